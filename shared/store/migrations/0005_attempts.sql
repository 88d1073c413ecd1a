-- When the current attempt at a document began (accepted, retried, or taken up by ingest):
-- a document `processing` with no attempt for long enough is failed by the sweep.
ALTER TABLE rag_documents ADD COLUMN attempt_started_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX rag_documents_processing_idx ON rag_documents (attempt_started_at) WHERE status = 'processing';
