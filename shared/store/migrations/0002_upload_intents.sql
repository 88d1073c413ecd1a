-- Presigned uploads: a `pending` row is an intent that expires, and the parse step
-- records which landed object it judged (its ETag), so a redelivered event is a no-op.
ALTER TABLE chat_files ADD COLUMN expires_at timestamptz;
ALTER TABLE chat_files ADD COLUMN object_etag text;

CREATE INDEX chat_files_pending_idx ON chat_files (expires_at) WHERE status = 'pending';
