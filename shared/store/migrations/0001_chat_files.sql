-- pgvector is needed by the knowledge-base tables; create it once, up front.
CREATE EXTENSION IF NOT EXISTS vector;

-- A chat attachment: the seed's ChatFile, plus its lifecycle status, checksum and preview.
CREATE TABLE chat_files (
    id              uuid PRIMARY KEY,
    user_id         uuid NOT NULL,
    filename        text NOT NULL,
    mime_type       text NOT NULL,
    size            bigint NOT NULL CHECK (size >= 0),
    storage_path    text NOT NULL UNIQUE,
    file_type       text NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'ready', 'rejected')),
    parsed_content  text,
    preview         text,
    checksum_sha256 text,
    rejection       text,
    parse_note      text,
    width           integer,
    height          integer,
    message_id      uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX chat_files_owner_idx ON chat_files (user_id, created_at DESC);
CREATE INDEX chat_files_message_idx ON chat_files (message_id) WHERE message_id IS NOT NULL;
