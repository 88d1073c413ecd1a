//! The janitor's rows: durable removals of stored objects whose rows are gone, unlinked
//! chat files past their retention, and the scan for objects no row names.
//!
//! A stored object cannot be deleted in a database transaction, so whoever makes one
//! garbage queues its removal in the transaction that deletes its row, runs it after the
//! commit, and leaves the row for the sweep if that fails: nothing is lost between the two.

use crate::{Db, StoreError};
use deadpool_postgres::GenericClient;
use time::OffsetDateTime;
use uuid::Uuid;

/// Queues the removal of `objects` (none queued when there are none); `reason` says who
/// made them garbage, for an operator reading the table.
pub(crate) async fn queue_removal(
    client: &impl GenericClient,
    objects: &[String],
    reason: &str,
) -> Result<Option<Uuid>, StoreError> {
    if objects.is_empty() {
        return Ok(None);
    }
    let id = Uuid::new_v4();
    client
        .execute("INSERT INTO pending_removals (id, objects, reason) VALUES ($1, $2, $3)", &[&id, &objects, &reason])
        .await?;
    Ok(Some(id))
}

/// What became of an unlinked chat file the retention reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    /// Its row and its object are gone.
    Removed,
    /// Linked, or gone, since the scan: left alone.
    Spared,
}

impl Db {
    /// Queues the removal of objects a worker wrote for a row it then found gone.
    pub async fn queue_removal(&self, objects: &[String], reason: &str) -> Result<Option<Uuid>, StoreError> {
        let client = self.client().await?;
        queue_removal(&client, objects, reason).await
    }

    /// Runs one queued removal: `remove` deletes each object (one already gone must count
    /// as removed), and the row goes only when every object went. `Ok(Ok(false))` when the
    /// removal is done already or another run holds it.
    pub async fn run_removal<F, Fut, E>(&self, id: Uuid, mut remove: F) -> Result<Result<bool, E>, StoreError>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) =
            tx.query_opt("SELECT objects FROM pending_removals WHERE id = $1 FOR UPDATE SKIP LOCKED", &[&id]).await?
        else {
            return Ok(Ok(false));
        };
        let objects: Vec<String> = row.get(0);
        for key in objects {
            if let Err(error) = remove(key).await {
                return Ok(Err(error));
            }
        }
        tx.execute("DELETE FROM pending_removals WHERE id = $1", &[&id]).await?;
        tx.commit().await?;
        Ok(Ok(true))
    }

    /// Runs a removal right after the commit that queued it; a failure is logged and left
    /// to the sweep, which runs every stalled removal again.
    pub async fn remove_now_or_later<F, Fut, E>(&self, id: Uuid, remove: F)
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: std::fmt::Debug,
    {
        match self.run_removal(id, remove).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(error = ?error, removal = %id, "removal left for the sweep"),
            Err(error) => tracing::warn!(error = ?error, removal = %id, "removal left for the sweep"),
        }
    }

    /// Removals queued longer than `older_than` ago and still pending: their first run
    /// failed or never happened.
    pub async fn stalled_removals(&self, older_than: std::time::Duration, limit: i64) -> Result<Vec<Uuid>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id FROM pending_removals WHERE queued_at < now() - make_interval(secs => $1) \
                 ORDER BY queued_at LIMIT $2",
                &[&older_than.as_secs_f64(), &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Chat files never linked to a message and created before `before`, with their
    /// objects: the candidates of the retention. An error here means the scan did not
    /// complete, and the caller removes nothing.
    pub async fn unlinked_chat_files(
        &self,
        before: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<(Uuid, String)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, storage_path FROM chat_files WHERE message_id IS NULL AND status <> 'pending' \
                 AND created_at < $1 ORDER BY created_at LIMIT $2",
                &[&before, &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Removes one unlinked chat file the retention reached: the row first — re-checked, so
    /// a file linked since the scan is spared (the link and this delete take the same row
    /// lock) — then its bytes through `remove_bytes`; if those cannot be removed, the row is
    /// restored (the transaction rolls back) and the error returned.
    pub async fn reap_unlinked_chat_file<E>(
        &self,
        id: Uuid,
        before: OffsetDateTime,
        remove_bytes: impl AsyncFnOnce(&str) -> Result<(), E>,
    ) -> Result<Result<Reaped, E>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                "DELETE FROM chat_files WHERE id = $1 AND message_id IS NULL AND status <> 'pending' \
                 AND created_at < $2 RETURNING storage_path, status",
                &[&id, &before],
            )
            .await?
        else {
            return Ok(Ok(Reaped::Spared));
        };
        let (storage_path, status): (String, String) = (row.get(0), row.get(1));
        // A rejected file's object was deleted when it was refused; only its row is left.
        if status != "rejected"
            && let Err(error) = remove_bytes(&storage_path).await
        {
            tx.rollback().await?;
            return Ok(Err(error));
        }
        tx.commit().await?;
        Ok(Ok(Reaped::Removed))
    }

    /// Of `keys` (objects under one upload prefix), those no row names: no chat file, no
    /// document's original or parsed text, no intent waiting for them.
    pub async fn unnamed_objects(&self, keys: &[String]) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT k FROM unnest($1::text[]) AS k \
                 WHERE NOT EXISTS (SELECT 1 FROM chat_files WHERE storage_path = k) \
                 AND NOT EXISTS (SELECT 1 FROM rag_documents WHERE storage_path = k) \
                 AND NOT EXISTS (SELECT 1 FROM rag_documents WHERE parsed_path = k)",
                &[&keys],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Where the scan of `prefix` stopped last (`None`: start from the beginning).
    pub async fn sweep_cursor(&self, prefix: &str) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt("SELECT start_after FROM sweep_cursors WHERE prefix = $1", &[&prefix]).await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Records where the scan of `prefix` goes on next time; `None` starts it over.
    pub async fn set_sweep_cursor(&self, prefix: &str, start_after: Option<&str>) -> Result<(), StoreError> {
        let client = self.client().await?;
        match start_after {
            Some(key) => {
                client
                    .execute(
                        "INSERT INTO sweep_cursors (prefix, start_after) VALUES ($1, $2) \
                         ON CONFLICT (prefix) DO UPDATE SET start_after = $2, updated_at = now()",
                        &[&prefix, &key],
                    )
                    .await?
            }
            None => client.execute("DELETE FROM sweep_cursors WHERE prefix = $1", &[&prefix]).await?,
        };
        Ok(())
    }
}
