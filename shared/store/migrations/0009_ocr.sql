-- OCR: the byte spans of a document's parsed text that were read from page images, as
-- [[start, end], ...]; ingest marks the chunks within them `ocr: true`. NULL: none.
ALTER TABLE rag_documents ADD COLUMN ocr_spans jsonb
    CHECK (ocr_spans IS NULL OR jsonb_typeof(ocr_spans) = 'array');
