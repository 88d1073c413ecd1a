-- S3 sync sources: a bucket prefix kept in step with one knowledge base. `config` says
-- where the documents are ({bucket, prefix, region}) and never holds a credential: the
-- source reads its bucket only through an IAM role it names (assumed with the
-- organization's external id) or an `aws_credentials` vault secret, exactly one of them.
CREATE TABLE sync_sources (
    id                   uuid PRIMARY KEY,
    kb_id                uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    collection_name      text NOT NULL,
    org_id               uuid,
    created_by           uuid NOT NULL,
    name                 text NOT NULL,
    source_type          text NOT NULL CHECK (source_type = 's3'),
    config               jsonb NOT NULL,
    role_arn             text,
    secret_id            uuid,
    sync_mode            text NOT NULL CHECK (sync_mode IN ('new_only', 'update_only', 'full')),
    schedule             text,
    next_run_at          timestamptz,
    event_driven         boolean NOT NULL DEFAULT false,
    organizational_unit  text CHECK (organizational_unit IS NULL OR organizational_unit <> ''),
    max_removal_percent  integer NOT NULL DEFAULT 50 CHECK (max_removal_percent BETWEEN 0 AND 100),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK ((role_arn IS NULL) <> (secret_id IS NULL))
);
CREATE INDEX sync_sources_kb_idx ON sync_sources (kb_id);
CREATE INDEX sync_sources_due_idx ON sync_sources (next_run_at) WHERE next_run_at IS NOT NULL;
CREATE INDEX sync_sources_bucket_idx ON sync_sources ((config ->> 'bucket')) WHERE event_driven;

-- One run of a source. The row exists before any work; the listing advances `cursor` (the
-- last key decided) a page at a time, so a run cut short goes on from there. `pending`
-- counts the documents it sent to parse and ingest that have not finished.
CREATE TABLE sync_logs (
    id                uuid PRIMARY KEY,
    source_id         uuid NOT NULL REFERENCES sync_sources (id) ON DELETE CASCADE,
    kb_id             uuid,
    collection_name   text NOT NULL,
    mode              text NOT NULL,
    trigger           text NOT NULL CHECK (trigger IN ('manual', 'schedule', 'operator')),
    confirm_removals  boolean NOT NULL DEFAULT false,
    status            text NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    listing_complete  boolean NOT NULL DEFAULT false,
    cursor            text,
    step              integer NOT NULL DEFAULT 0,
    total             integer NOT NULL DEFAULT 0,
    ingested          integer NOT NULL DEFAULT 0,
    updated           integer NOT NULL DEFAULT 0,
    skipped           integer NOT NULL DEFAULT 0,
    failed            integer NOT NULL DEFAULT 0,
    removed           integer NOT NULL DEFAULT 0,
    pending           integer NOT NULL DEFAULT 0,
    fetched           integer NOT NULL DEFAULT 0,
    removals_held     integer,
    message           text,
    failures          jsonb NOT NULL DEFAULT '[]',
    started_at        timestamptz NOT NULL DEFAULT now(),
    heartbeat_at      timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
CREATE INDEX sync_logs_source_idx ON sync_logs (source_id, started_at DESC);
CREATE INDEX sync_logs_kb_idx ON sync_logs (kb_id, started_at DESC);
-- A source runs one at a time: a second start finds this index taken.
CREATE UNIQUE INDEX sync_logs_one_running_idx ON sync_logs (source_id) WHERE status = 'running';

-- Each source that lists a document claims it; `seen_at` is when it last listed it (or an
-- event reported it). A run whose listing completed drops the claims it did not renew,
-- and a document no source claims any more is removed.
CREATE TABLE rag_document_claims (
    source_id    uuid NOT NULL REFERENCES sync_sources (id) ON DELETE CASCADE,
    document_id  uuid NOT NULL REFERENCES rag_documents (id) ON DELETE CASCADE,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    seen_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, document_id)
);
CREATE INDEX rag_document_claims_document_idx ON rag_document_claims (document_id);

-- A synced document: the source that brought it (whose credential fetches it), the run
-- that counts it, the object's ETag when it was listed (the change signal read before any
-- download), and the document it replaces once indexed.
ALTER TABLE rag_documents
    ADD COLUMN sync_source_id uuid REFERENCES sync_sources (id) ON DELETE SET NULL,
    ADD COLUMN sync_run_id uuid,
    ADD COLUMN source_etag text,
    ADD COLUMN replaces_document_id uuid;
-- Equality lookups on an unbounded address: hash, not btree (no row-size limit).
CREATE INDEX rag_documents_source_path_idx ON rag_documents USING hash (source_path);
CREATE INDEX rag_documents_unaddressed_name_idx ON rag_documents (kb_id, filename) WHERE source_path IS NULL;
CREATE INDEX rag_documents_run_idx ON rag_documents (sync_run_id) WHERE status = 'processing';

-- A vault secret is an embedding API key or an S3 source's access key pair.
ALTER TABLE secrets DROP CONSTRAINT secrets_kind_check;
ALTER TABLE secrets ADD CONSTRAINT secrets_kind_check CHECK (kind IN ('api_key', 'aws_credentials'));

-- Who decided what a source reads and who can search it: actor, collection and the
-- credential's id, never the configuration.
CREATE TABLE audit_log (
    id                   uuid PRIMARY KEY,
    action               text NOT NULL,
    actor_id             uuid NOT NULL,
    org_id               uuid,
    kb_id                uuid,
    subject_id           uuid NOT NULL,
    collection_name      text NOT NULL,
    previous_collection  text,
    credential_id        text,
    at                   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_subject_idx ON audit_log (subject_id, at);
