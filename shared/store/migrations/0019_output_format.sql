-- Parsed text can be written as markdown (`ingestion_config.output_format`, the default
-- from now on). The bases that exist keep reading as they did: their settings say `text`,
-- as do those of their documents still waiting to be parsed. Each document records how its
-- stored text was written, so a re-index reads the headings only text that has them.
UPDATE knowledge_bases
   SET ingestion_config = coalesce(ingestion_config, '{}'::jsonb) || '{"output_format": "text"}'::jsonb
 WHERE NOT coalesce(ingestion_config ? 'output_format', false);
UPDATE rag_documents
   SET ingestion_config = ingestion_config || '{"output_format": "text"}'::jsonb
 WHERE parsed_path IS NULL AND NOT ingestion_config ? 'output_format';
ALTER TABLE rag_documents ADD COLUMN parsed_format text
    CHECK (parsed_format IN ('text', 'markdown'));

-- How many lines OCR kept though it read them with low confidence: a client can flag a
-- poor scan.
ALTER TABLE rag_documents ADD COLUMN ocr_low_confidence_lines integer NOT NULL DEFAULT 0;

-- Where each page begins in the parsed text ([[page, byte offset], ...]; PDF and TIFF), so a
-- chunk can say which pages it came from.
ALTER TABLE rag_documents ADD COLUMN page_starts jsonb;
