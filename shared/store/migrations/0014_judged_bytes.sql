-- Whether a document's stored bytes have passed the upload check. An inline upload is judged
-- before its row exists; a presigned one only when its bytes land and the parse function
-- checks them. Until then its original is never handed out (`GET /rag/documents/{id}/file`).
ALTER TABLE rag_documents ADD COLUMN bytes_judged boolean NOT NULL DEFAULT true;
UPDATE rag_documents SET bytes_judged = false WHERE upload_expires_at IS NOT NULL AND parsed_path IS NULL;
