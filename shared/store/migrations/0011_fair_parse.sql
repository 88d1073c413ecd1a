-- When parse first took a document up (NULL: not yet): a tenant with documents parsing
-- yields its turn to another tenant's document that has not started, as ingest does.
ALTER TABLE rag_documents ADD COLUMN parse_started_at timestamptz;
