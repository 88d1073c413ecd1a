-- An image's description is kept per collection, image, and the address and model that
-- described it: a description from one endpoint (a member's own, say) is never reused where
-- another describes. The descriptions kept before are not known by address, so they go (a
-- cache: the next parse asks again).
DELETE FROM rag_image_descriptions;
ALTER TABLE rag_image_descriptions ADD COLUMN target text NOT NULL;
ALTER TABLE rag_image_descriptions DROP CONSTRAINT rag_image_descriptions_pkey;
ALTER TABLE rag_image_descriptions ADD PRIMARY KEY (kb_id, image_sha256, target, model);
