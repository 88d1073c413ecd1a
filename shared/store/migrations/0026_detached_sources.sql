-- Deleting a knowledge base no longer deletes its sync sources and their run history: each
-- source is detached (no base, `detached_at` set, no next run) and keeps its configuration
-- until it is pointed at another collection (`PATCH /rag/sync/sources/{id}`).
ALTER TABLE sync_sources ALTER COLUMN kb_id DROP NOT NULL;
ALTER TABLE sync_sources DROP CONSTRAINT sync_sources_kb_id_fkey;
ALTER TABLE sync_sources
    ADD CONSTRAINT sync_sources_kb_id_fkey FOREIGN KEY (kb_id) REFERENCES knowledge_bases (id) ON DELETE SET NULL;
ALTER TABLE sync_sources ADD COLUMN detached_at timestamptz;
-- A detached source has no next run; an attached one was never detached.
ALTER TABLE sync_sources ADD CONSTRAINT sync_sources_detached_rests
    CHECK (detached_at IS NULL OR next_run_at IS NULL);
CREATE INDEX sync_sources_detached_idx ON sync_sources (org_id, created_by) WHERE kb_id IS NULL;
