-- A document's title as the parse found it (its metadata, its first heading, its first line,
-- else its file name where that reads as words) and where it was found. Documents parsed
-- before have none recorded: ingest falls back to the file name for them, as it did.
ALTER TABLE rag_documents ADD COLUMN title text;
ALTER TABLE rag_documents ADD COLUMN title_source text
    CHECK (title_source IN ('metadata', 'heading', 'first_line', 'filename'));
