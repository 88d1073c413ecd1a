-- Images described by a vision model (`ingestion_config.image_description`): where each
-- description sits in the parsed text ([[start, end], ...] in bytes), and how many of the
-- document's images were described and skipped, with why ({"described": n, "skipped": n,
-- "skipped_reasons": {"too_small": n, ...}}).
ALTER TABLE rag_documents ADD COLUMN image_spans jsonb;
ALTER TABLE rag_documents ADD COLUMN images jsonb;

-- One description per collection, image and model: the same picture in a second document,
-- or the same document parsed again, costs no second request. Gone with its collection.
CREATE TABLE rag_image_descriptions (
    kb_id        uuid NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
    image_sha256 text NOT NULL CHECK (image_sha256 ~ '^[0-9a-f]{64}$'),
    model        text NOT NULL,
    description  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kb_id, image_sha256, model)
);

-- What the web app says of an uploaded image, carried in its attachment reference.
ALTER TABLE chat_files ADD COLUMN vision boolean;
ALTER TABLE chat_files ADD COLUMN vision_model text;
ALTER TABLE chat_files ADD COLUMN gallery_id text;

-- A document read by LlamaParse (`ingestion_config.parser`): its job, so a delivery that
-- outlives the job polls it again instead of uploading again; when the job was started; and
-- the pages LlamaParse parsed (billed per page).
ALTER TABLE rag_documents ADD COLUMN parser_job_id text;
ALTER TABLE rag_documents ADD COLUMN parser_job_started_at timestamptz;
ALTER TABLE rag_documents ADD COLUMN parser_pages integer;
