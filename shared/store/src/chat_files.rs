//! The `chat_files` repository. Every read and write is scoped by the owner: a row of
//! another user is indistinguishable from no row.

use crate::{Db, StoreError};
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
    pub message_id: Option<Uuid>,
    pub created_at: OffsetDateTime,
}

/// A chat file about to be recorded.
#[derive(Debug, Clone)]
pub struct NewChatFile {
    pub id: Uuid,
    pub user_id: Uuid,
    pub filename: String,
    pub mime_type: String,
    pub size: i64,
    pub storage_path: String,
    pub file_type: String,
    pub status: &'static str,
    pub parsed_content: Option<String>,
    pub preview: Option<String>,
    pub checksum_sha256: Option<String>,
    pub parse_note: Option<String>,
    pub width: Option<i32>,
    pub height: Option<i32>,
}

const COLUMNS: &str = "id, user_id, filename, mime_type, size, storage_path, file_type, status, preview, \
                       checksum_sha256, rejection, parse_note, width, height, message_id, created_at";

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
        message_id: row.get("message_id"),
        created_at: row.get("created_at"),
    }
}

impl Db {
    pub async fn insert_chat_file(&self, file: &NewChatFile) -> Result<ChatFile, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "INSERT INTO chat_files (id, user_id, filename, mime_type, size, storage_path, file_type, status, \
             parsed_content, preview, checksum_sha256, parse_note, width, height) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING {COLUMNS}"
        );
        let row = client
            .query_one(
                &sql,
                &[
                    &file.id,
                    &file.user_id,
                    &file.filename,
                    &file.mime_type,
                    &file.size,
                    &file.storage_path,
                    &file.file_type,
                    &file.status,
                    &file.parsed_content,
                    &file.preview,
                    &file.checksum_sha256,
                    &file.parse_note,
                    &file.width,
                    &file.height,
                ],
            )
            .await?;
        Ok(from_row(&row))
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
