-- Stored objects whose rows are gone, removed after the commit that made them garbage. A
-- row stays until its objects are gone, so a failed or lost removal is run again by the
-- sweep.
CREATE TABLE pending_removals (
    id         uuid PRIMARY KEY,
    objects    text[] NOT NULL,
    reason     text NOT NULL,
    queued_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_removals_queued_idx ON pending_removals (queued_at);

-- Where the sweep's scan for objects with no row stopped, per prefix: each run goes on
-- from there, so a bucket of any size is covered a bounded slice at a time.
CREATE TABLE sweep_cursors (
    prefix      text PRIMARY KEY,
    start_after text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Every teardown keeps its row until it has finished, also one that leaves the table to a
-- sibling base (drop_table false): the sweep sends a stalled one again. Only a drop
-- reserves the name.
CREATE INDEX collection_teardowns_reserved_idx ON collection_teardowns (reserved_at);
CREATE INDEX chat_files_unlinked_idx ON chat_files (created_at) WHERE message_id IS NULL;
-- A landed object is looked up by its key (parse), and the scan asks whether a row names it.
CREATE INDEX rag_documents_storage_path_idx ON rag_documents (storage_path) WHERE storage_path IS NOT NULL;
CREATE INDEX rag_documents_parsed_path_idx ON rag_documents (parsed_path) WHERE parsed_path IS NOT NULL;
