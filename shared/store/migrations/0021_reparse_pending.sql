-- A re-index that writes a document's text again in another output format keeps the old
-- text (read-back and the sweep still name it) until parse writes the new one. Until then
-- the document waits for parse, and ingest — a late or duplicated delivery, or another
-- tenant's delivery giving up its turn — must not chunk the old text and call it done.
ALTER TABLE rag_documents ADD COLUMN reparse_pending boolean NOT NULL DEFAULT false;
