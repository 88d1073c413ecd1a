//! Presigned document uploads: a row waiting for its bytes until its link expires, its bytes
//! judged or refused where they land, and the expired ones the sweep closes.

use crate::{Db, StoreError};
use time::OffsetDateTime;
use uuid::Uuid;

impl Db {
    /// The document's bytes were refused by the reader: `/file` serves only what was accepted.
    pub async fn mark_bytes_refused(&self, id: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE rag_documents SET bytes_judged = false WHERE id = $1", &[&id]).await?;
        Ok(())
    }

    /// The landed bytes of a presigned document passed the upload check: from now on its
    /// original may be handed out.
    pub async fn mark_bytes_judged(&self, id: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE rag_documents SET bytes_judged = true WHERE id = $1", &[&id]).await?;
        Ok(())
    }

    /// Moves a presigned document upload's deadline to `until` while no text is parsed: its
    /// bytes were handed to the parse again.
    pub async fn postpone_document_intent(&self, id: Uuid, until: OffsetDateTime) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE rag_documents SET upload_expires_at = $2 \
                 WHERE id = $1 AND status = 'processing' AND parsed_path IS NULL",
                &[&id, &until],
            )
            .await?;
        Ok(())
    }

    /// Presigned document uploads whose deadline passed before `before` with no text parsed:
    /// each id, stored key and when it was asked for.
    pub async fn expired_document_intents(
        &self,
        before: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<(Uuid, String, OffsetDateTime)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, storage_path, created_at FROM rag_documents WHERE status = 'processing' \
                 AND parsed_path IS NULL AND upload_expires_at < $1 ORDER BY upload_expires_at LIMIT $2",
                &[&before, &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default(), r.get(2))).collect())
    }

    /// Removes the rows of document intents that expired with no file before `before`:
    /// failed by the sweep with `reason` when their link expired (so the base lists why),
    /// they describe nothing once the retention has passed. Late objects went then.
    pub async fn remove_expired_document_intents(
        &self,
        before: OffsetDateTime,
        reason: &str,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "DELETE FROM rag_documents WHERE status = 'error' AND parsed_path IS NULL \
                 AND upload_expires_at < $1 AND error_message = $2",
                &[&before, &reason],
            )
            .await?)
    }
}
