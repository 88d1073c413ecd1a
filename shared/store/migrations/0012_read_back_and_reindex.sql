-- Where a document's date came from (`upload` when the file carries none of its own), and
-- how many of its chunks the embedding model could not read whole.
ALTER TABLE rag_documents ADD COLUMN date_source text NOT NULL DEFAULT 'upload';
ALTER TABLE rag_documents ADD COLUMN truncated_chunks integer NOT NULL DEFAULT 0;

-- A re-index of a base: the run its documents belong to and how many it took up, so
-- progress reads as done/total while the documents are re-chunked one by one.
ALTER TABLE knowledge_bases ADD COLUMN reindex_run_id uuid;
ALTER TABLE knowledge_bases ADD COLUMN reindex_total integer NOT NULL DEFAULT 0;
ALTER TABLE rag_documents ADD COLUMN reindex_run_id uuid;
CREATE INDEX rag_documents_reindex_idx ON rag_documents (reindex_run_id) WHERE reindex_run_id IS NOT NULL;
