-- Ingestion in bounded batches, and fairness between tenants.
--
-- A document's chunks are embedded and staged here batch by batch, then moved into the
-- collection's vector table by the one transaction that completes the document: memory
-- stays flat in the document's size, the document becomes searchable all at once, and a
-- redelivery resumes after the chunks already staged instead of paying for them again.
CREATE TABLE rag_chunk_staging (
    document_id  uuid NOT NULL REFERENCES rag_documents (id) ON DELETE CASCADE,
    chunk_index  integer NOT NULL,
    content      text NOT NULL,
    metadata     jsonb NOT NULL,
    content_hash text NOT NULL,
    embedding    vector NOT NULL,
    PRIMARY KEY (document_id, chunk_index)
);

-- When ingest first took a document up (NULL: not yet). A tenant with documents ingesting
-- yields its turn to another tenant's document that has not started.
ALTER TABLE rag_documents ADD COLUMN ingest_started_at timestamptz;
CREATE INDEX rag_documents_ingesting_idx ON rag_documents (org_id, ingest_started_at)
    WHERE status = 'processing';

-- The chunk size floor (100 characters): stored configurations below it are raised to it.
UPDATE knowledge_bases SET ingestion_config = jsonb_set(ingestion_config, '{chunk_size}', '100')
    WHERE jsonb_typeof(ingestion_config -> 'chunk_size') = 'number'
      AND (ingestion_config ->> 'chunk_size')::numeric < 100;
UPDATE rag_documents SET ingestion_config = jsonb_set(ingestion_config, '{chunk_size}', '100')
    WHERE jsonb_typeof(ingestion_config -> 'chunk_size') = 'number'
      AND (ingestion_config ->> 'chunk_size')::numeric < 100;
