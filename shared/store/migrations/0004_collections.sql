-- Credentials: an API key sealed with a KMS data key. `sealed_key` is the data key as KMS
-- encrypted it, under an encryption context naming the organization and the secret, so
-- the ciphertext opens only for that organization's row. The value is never stored plain.
CREATE TABLE secrets (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    kind        text NOT NULL CHECK (kind = 'api_key'),
    provider    text NOT NULL,
    visibility  text NOT NULL CHECK (visibility IN ('private', 'org')),
    owner_id    uuid NOT NULL,
    org_id      uuid,
    sealed_key  bytea NOT NULL,
    nonce       bytea NOT NULL,
    ciphertext  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (visibility <> 'org' OR org_id IS NOT NULL)
);
CREATE INDEX secrets_org_idx ON secrets (org_id);
CREATE INDEX secrets_owner_idx ON secrets (owner_id);

-- Keyless embedding services: an organization's own, or deployment-wide (`app`).
CREATE TABLE embedding_endpoints (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    provider    text NOT NULL,
    base_url    text NOT NULL,
    scope       text NOT NULL CHECK (scope IN ('org', 'app')),
    org_id      uuid,
    created_by  uuid NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((scope = 'org') = (org_id IS NOT NULL))
);
CREATE UNIQUE INDEX embedding_endpoints_app_name_idx ON embedding_endpoints (provider, name) WHERE scope = 'app';

-- `embedding_secret_id` deliberately has no foreign key: a deleted key must stay visible
-- as the key the base chose, so the embedding path can say it was deleted.
ALTER TABLE knowledge_bases ADD CONSTRAINT knowledge_bases_endpoint_fk
    FOREIGN KEY (embedding_endpoint_id) REFERENCES embedding_endpoints (id) ON DELETE SET NULL;

-- A name whose rows are gone but whose vector table is not yet: no claim may take it
-- until the teardown clears the row.
CREATE TABLE collection_teardowns (
    id               uuid PRIMARY KEY,
    collection_name  text NOT NULL,
    kb_id            uuid,
    drop_table       boolean NOT NULL,
    reserved_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX collection_teardowns_name_idx ON collection_teardowns (collection_name);

-- Work committed with the rows it concerns, sent after the commit; the sweep re-sends
-- what was never marked sent.
CREATE TABLE outbox (
    id             uuid PRIMARY KEY,
    topic          text NOT NULL,
    payload        jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    dispatched_at  timestamptz
);
CREATE INDEX outbox_pending_idx ON outbox (created_at) WHERE dispatched_at IS NULL;

-- Ingested documents (the seed's "Document tracking"). `kb_id` NULL is an unfiled row:
-- written by an operator's ingest with no base, filed under its tenant only.
CREATE TABLE rag_documents (
    id                   uuid PRIMARY KEY,
    collection_name      text NOT NULL,
    kb_id                uuid REFERENCES knowledge_bases (id) ON DELETE SET NULL,
    org_id               uuid,
    owner_id             uuid,
    writer_kind          text NOT NULL DEFAULT 'document' CHECK (writer_kind IN ('document', 'operator')),
    filename             text NOT NULL,
    filesize             bigint NOT NULL,
    filetype             text NOT NULL,
    status               text NOT NULL CHECK (status IN ('processing', 'done', 'error')),
    error_message        text,
    vector_document_id   uuid,
    chunk_count          integer NOT NULL DEFAULT 0,
    storage_path         text,
    source_path          text,
    organizational_unit  text CHECK (organizational_unit IS NULL OR organizational_unit <> ''),
    -- Where it came from (`upload`), its parsed type, and its own date: the filter
    -- dimensions every chunk is stamped with.
    source               text NOT NULL DEFAULT 'upload',
    document_date        date NOT NULL DEFAULT CURRENT_DATE,
    mime_type            text,
    content_hash         text,
    -- The chunking this document was accepted with (the base's, merged with the upload's
    -- override), so a queued run is not changed by a later edit of the base.
    ingestion_config     jsonb NOT NULL DEFAULT '{}',
    parsed_path          text,
    -- Asked to replace the base's earlier documents of the same filename once it is indexed.
    replace_previous     boolean NOT NULL DEFAULT false,
    -- A presigned upload's deadline: until the bytes land the row waits for them.
    upload_expires_at    timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    completed_at         timestamptz
);
CREATE INDEX rag_documents_collection_idx ON rag_documents (collection_name);
CREATE INDEX rag_documents_kb_idx ON rag_documents (kb_id);
