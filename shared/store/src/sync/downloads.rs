//! A synced document's download: recorded with its hash, or skipped when its bytes are those
//! of the document it would replace; and the lookups the fetch decides with.

use super::listing::existing_documents;
use super::runs::count_finished;
use crate::{Db, Document, StoreError};
use deadpool_postgres::GenericClient;
use sluice_domain::sync::Existing;
use std::collections::HashMap;
use uuid::Uuid;

impl Db {
    /// Records a synced document's download: its content hash and the ETag fetched, and the
    /// GetObject requests it took counted to its run.
    pub async fn record_download(
        &self,
        doc: &Document,
        hash: &str,
        etag: Option<&str>,
        requests: i32,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE rag_documents SET content_hash = $2, source_etag = coalesce($3, source_etag) WHERE id = $1",
                &[&doc.id, &hash, &etag],
            )
            .await?;
        if let Some(run_id) = doc.sync.as_ref().and_then(|s| s.run_id) {
            client.execute("UPDATE sync_logs SET fetched = fetched + $2 WHERE id = $1", &[&run_id, &requests]).await?;
        }
        Ok(())
    }

    /// A downloaded object whose bytes hash as the document it would replace: that document
    /// stays (recording the ETag now listed, so the next run skips it unread), and the new
    /// row goes. Counted as skipped. `false` when either row changed meanwhile.
    pub async fn skip_unchanged_download(
        &self,
        doc: &Document,
        kept: Uuid,
        etag: Option<&str>,
        requests: i32,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let deleted =
            tx.execute("DELETE FROM rag_documents WHERE id = $1 AND status = 'processing'", &[&doc.id]).await?;
        if deleted == 0 {
            return Ok(false);
        }
        tx.execute(
            "UPDATE rag_documents SET source_etag = $2, source_path = coalesce(source_path, $3) WHERE id = $1",
            &[&kept, &etag, &doc.source_path],
        )
        .await?;
        if let Some(source_id) = doc.sync.as_ref().and_then(|s| s.source_id) {
            tx.execute(
                "INSERT INTO rag_document_claims (source_id, document_id) VALUES ($1, $2) \
                 ON CONFLICT (source_id, document_id) DO UPDATE SET seen_at = now()",
                &[&source_id, &kept],
            )
            .await?;
        }
        if let Some(run_id) = doc.sync.as_ref().and_then(|s| s.run_id) {
            tx.execute("UPDATE sync_logs SET fetched = fetched + $2 WHERE id = $1", &[&run_id, &requests]).await?;
            count_finished(&tx, run_id, "skipped").await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// The stored document in a base that a file at `address` named `label` corresponds
    /// to (the one lookup a run makes, for one file).
    pub async fn existing_document(
        &self,
        kb_id: Uuid,
        address: &str,
        label: &str,
    ) -> Result<Option<Existing>, StoreError> {
        let client = self.client().await?;
        let found = existing_documents(&client, kb_id, &[address.to_owned()], &[label.to_owned()]).await?;
        Ok(found.into_iter().next().flatten())
    }

    /// A finished document of the base that no address claims (an upload) whose bytes hash
    /// as `hash`: the last resort of the lookup, once a download has a hash to ask with.
    pub async fn unaddressed_document_with_hash(&self, kb_id: Uuid, hash: &str) -> Result<Option<Uuid>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id FROM rag_documents WHERE kb_id = $1 AND content_hash = $2 AND source_path IS NULL \
                 AND status = 'done' ORDER BY created_at DESC LIMIT 1",
                &[&kb_id, &hash],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The status of each of `ids` that still exists.
    pub async fn document_statuses(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, String>, StoreError> {
        let client = self.client().await?;
        let rows = client.query("SELECT id, status FROM rag_documents WHERE id = ANY($1)", &[&ids]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}
