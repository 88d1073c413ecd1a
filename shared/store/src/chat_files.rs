//! The `chat_files` repository. Every read and write is scoped by the owner: a row of
//! another user is indistinguishable from no row.

use crate::{Db, StoreError};
use sluice_domain::{FileContent, ImageHints};
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

/// A chat file as stored, without its (possibly large) extracted text.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatFile {
    pub id: Uuid,
    pub user_id: Uuid,
    pub filename: String,
    pub mime_type: String,
    pub size: i64,
    pub storage_path: String,
    pub file_type: String,
    pub status: String,
    pub preview: Option<String>,
    pub checksum_sha256: Option<String>,
    pub rejection: Option<String>,
    pub parse_note: Option<String>,
    pub width: Option<i32>,
    pub height: Option<i32>,
    /// What the web app said of an image.
    pub hints: ImageHints,
    pub message_id: Option<Uuid>,
    pub created_at: OffsetDateTime,
}

/// A chat file about to be recorded, checked and ready.
#[derive(Debug, Clone)]
pub struct NewChatFile {
    pub id: Uuid,
    pub user_id: Uuid,
    pub filename: String,
    pub storage_path: String,
    pub content: FileContent,
    pub hints: ImageHints,
}

/// A presigned upload's intent: a `pending` row awaiting its bytes until `expires_at`.
#[derive(Debug, Clone)]
pub struct NewUploadIntent {
    pub id: Uuid,
    pub user_id: Uuid,
    pub filename: String,
    pub mime_type: String,
    pub size: i64,
    pub storage_path: String,
    pub file_type: String,
    pub expires_at: OffsetDateTime,
    pub hints: ImageHints,
}

/// A row the parse step looks up by the key of a landed object.
#[derive(Debug, Clone)]
pub struct LandedFile {
    pub file: ChatFile,
    /// The ETag of the object the parse step last judged, if any.
    pub object_etag: Option<String>,
}

const COLUMNS: &str = "id, user_id, filename, mime_type, size, storage_path, file_type, status, preview, \
                       checksum_sha256, rejection, parse_note, width, height, message_id, created_at, vision, \
                       vision_model, gallery_id";

fn from_row(row: &Row) -> ChatFile {
    ChatFile {
        id: row.get("id"),
        user_id: row.get("user_id"),
        filename: row.get("filename"),
        mime_type: row.get("mime_type"),
        size: row.get("size"),
        storage_path: row.get("storage_path"),
        file_type: row.get("file_type"),
        status: row.get("status"),
        preview: row.get("preview"),
        checksum_sha256: row.get("checksum_sha256"),
        rejection: row.get("rejection"),
        parse_note: row.get("parse_note"),
        width: row.get("width"),
        height: row.get("height"),
        hints: ImageHints {
            vision: row.get("vision"),
            vision_model: row.get("vision_model"),
            gallery_id: row.get("gallery_id"),
        },
        message_id: row.get("message_id"),
        created_at: row.get("created_at"),
    }
}

impl Db {
    pub async fn insert_chat_file(&self, file: &NewChatFile) -> Result<ChatFile, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "INSERT INTO chat_files (id, user_id, filename, mime_type, size, storage_path, file_type, status, \
             parsed_content, preview, checksum_sha256, parse_note, width, height, vision, vision_model, gallery_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'ready', $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING {COLUMNS}"
        );
        let c = &file.content;
        let row = client
            .query_one(
                &sql,
                &[
                    &file.id,
                    &file.user_id,
                    &file.filename,
                    &c.mime_type,
                    &c.size,
                    &file.storage_path,
                    &c.file_type,
                    &c.parsed_content,
                    &c.preview,
                    &c.checksum_sha256,
                    &c.parse_note,
                    &c.width,
                    &c.height,
                    &file.hints.vision,
                    &file.hints.vision_model,
                    &file.hints.gallery_id,
                ],
            )
            .await?;
        Ok(from_row(&row))
    }

    /// Records a presigned upload's intent as a `pending` row.
    pub async fn insert_upload_intent(&self, intent: &NewUploadIntent) -> Result<ChatFile, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "INSERT INTO chat_files (id, user_id, filename, mime_type, size, storage_path, file_type, status, \
             expires_at, vision, vision_model, gallery_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10, $11) RETURNING {COLUMNS}"
        );
        let i = intent;
        let row = client
            .query_one(
                &sql,
                &[
                    &i.id,
                    &i.user_id,
                    &i.filename,
                    &i.mime_type,
                    &i.size,
                    &i.storage_path,
                    &i.file_type,
                    &i.expires_at,
                    &i.hints.vision,
                    &i.hints.vision_model,
                    &i.hints.gallery_id,
                ],
            )
            .await?;
        Ok(from_row(&row))
    }

    /// The row whose object lives at `storage_path`, whoever owns it (the parse step acts
    /// for the system, on the key S3 reported).
    pub async fn landed_file(&self, storage_path: &str) -> Result<Option<LandedFile>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {COLUMNS}, object_etag FROM chat_files WHERE storage_path = $1");
        Ok(client
            .query_opt(&sql, &[&storage_path])
            .await?
            .map(|row| LandedFile { file: from_row(&row), object_etag: row.get("object_etag") }))
    }

    /// Marks a file ready with what its landed bytes held, when it is pending or its object
    /// changed since it was judged (bytes PUT again under the same key); `false` when these
    /// very bytes were judged already.
    pub async fn complete_upload(&self, id: Uuid, content: &FileContent, etag: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let c = content;
        let updated = client
            .execute(
                "UPDATE chat_files SET status = 'ready', mime_type = $2, size = $3, file_type = $4, \
                 parsed_content = $5, preview = $6, checksum_sha256 = $7, parse_note = $8, width = $9, height = $10, \
                 object_etag = $11, expires_at = NULL, updated_at = now() \
                 WHERE id = $1 AND (status = 'pending' OR (object_etag IS NOT NULL AND object_etag <> $11))",
                &[
                    &id,
                    &c.mime_type,
                    &c.size,
                    &c.file_type,
                    &c.parsed_content,
                    &c.preview,
                    &c.checksum_sha256,
                    &c.parse_note,
                    &c.width,
                    &c.height,
                    &etag,
                ],
            )
            .await?;
        Ok(updated == 1)
    }

    /// Intents whose link expired before `before` with no bytes judged: each id, stored key
    /// and when it was asked for, at most `limit`, the longest expired first.
    pub async fn expired_intents(
        &self,
        before: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<(Uuid, String, OffsetDateTime)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, storage_path, created_at FROM chat_files WHERE status = 'pending' AND expires_at < $1 \
                 ORDER BY expires_at LIMIT $2",
                &[&before, &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    }

    /// Moves a still-pending intent's expiry to `until`: its bytes were handed to the parse
    /// again, and the sweep looks at it next only once `until` has passed its grace.
    pub async fn postpone_intent(&self, id: Uuid, until: OffsetDateTime) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute("UPDATE chat_files SET expires_at = $2 WHERE id = $1 AND status = 'pending'", &[&id, &until])
            .await?;
        Ok(())
    }

    /// Rejects an intent that expired before `before`; `false` when it was judged meanwhile.
    pub async fn expire_intent(&self, id: Uuid, before: OffsetDateTime, rejection: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let updated = client
            .execute(
                "UPDATE chat_files SET status = 'rejected', rejection = $3, expires_at = NULL, updated_at = now() \
                 WHERE id = $1 AND status = 'pending' AND expires_at < $2",
                &[&id, &before, &rejection],
            )
            .await?;
        Ok(updated == 1)
    }

    /// Records that a file's object is gone: the row is rejected with `rejection` unless it
    /// already was.
    pub async fn mark_object_removed(&self, id: Uuid, rejection: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let updated = client
            .execute(
                "UPDATE chat_files SET status = 'rejected', rejection = $2, parsed_content = NULL, preview = NULL, \
                 expires_at = NULL, updated_at = now() WHERE id = $1 AND status <> 'rejected'",
                &[&id, &rejection],
            )
            .await?;
        Ok(updated == 1)
    }

    /// Marks a file rejected with the reason its landed bytes were refused, under the same
    /// condition as `complete_upload`.
    pub async fn reject_upload(&self, id: Uuid, rejection: &str, etag: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let updated = client
            .execute(
                "UPDATE chat_files SET status = 'rejected', rejection = $2, object_etag = $3, parsed_content = NULL, \
                 preview = NULL, expires_at = NULL, updated_at = now() \
                 WHERE id = $1 AND (status = 'pending' OR (object_etag IS NOT NULL AND object_etag <> $3))",
                &[&id, &rejection, &etag],
            )
            .await?;
        Ok(updated == 1)
    }

    /// The caller's own file, or `None` (also for another user's).
    pub async fn chat_file(&self, id: Uuid, owner: Uuid) -> Result<Option<ChatFile>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {COLUMNS} FROM chat_files WHERE id = $1 AND user_id = $2");
        Ok(client.query_opt(&sql, &[&id, &owner]).await?.as_ref().map(from_row))
    }

    /// The extracted text of the caller's own file: `None` when there is no such file,
    /// `Some(None)` when the file has no text.
    pub async fn chat_file_text(&self, id: Uuid, owner: Uuid) -> Result<Option<Option<String>>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt("SELECT parsed_content FROM chat_files WHERE id = $1 AND user_id = $2", &[&id, &owner])
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Deletes the caller's own file: the row goes first, then `remove_bytes` removes the
    /// object, and the row is restored (the transaction rolls back) if that fails.
    /// Returns `Ok(false)` when there was no such file.
    pub async fn delete_chat_file<E>(
        &self,
        id: Uuid,
        owner: Uuid,
        remove_bytes: impl AsyncFnOnce(&str) -> Result<(), E>,
    ) -> Result<Result<bool, E>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let row = tx
            .query_opt("DELETE FROM chat_files WHERE id = $1 AND user_id = $2 RETURNING storage_path", &[&id, &owner])
            .await?;
        let Some(row) = row else {
            return Ok(Ok(false));
        };
        let storage_path: String = row.get(0);
        match remove_bytes(&storage_path).await {
            Ok(()) => {
                tx.commit().await?;
                Ok(Ok(true))
            }
            Err(e) => {
                tx.rollback().await?;
                Ok(Err(e))
            }
        }
    }

    /// Links the caller's own unlinked, ready files to a message, all or none. Returns the
    /// ids that could not be linked (absent, another user's, already linked, not ready);
    /// when that list is not empty nothing was changed.
    pub async fn link_chat_files(&self, message_id: Uuid, owner: Uuid, ids: &[Uuid]) -> Result<Vec<Uuid>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let linked: Vec<Uuid> = tx
            .query(
                "UPDATE chat_files SET message_id = $1, updated_at = now() \
                 WHERE id = ANY($2) AND user_id = $3 AND message_id IS NULL AND status = 'ready' RETURNING id",
                &[&message_id, &ids, &owner],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let refused: Vec<Uuid> = ids.iter().filter(|id| !linked.contains(id)).copied().collect();
        if refused.is_empty() {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(refused)
    }
}
