//! Collections beyond their bases: teardown reservations, unfiled content, the outbox
//! and the counts a collection's card shows.

use crate::knowledge::{COLUMNS, KnowledgeBase, from_row};
use crate::vectors::{NAME_LOCK_SQL, vector_width};
use crate::{Db, StoreError};
use deadpool_postgres::GenericClient;
use sluice_domain::collection::vector_table;
use uuid::Uuid;

/// What deleting (or clearing) a base committed: the reservation, if the name's table is
/// to be dropped, and the outbox row that asks the teardown to finish the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownQueued {
    pub teardown_id: Uuid,
    pub collection_name: String,
    pub kb_id: Uuid,
    /// No other base holds the name: the vector table goes, and the name is reserved
    /// until it has.
    pub drop_table: bool,
    /// A default base keeps its row; only its content goes.
    pub cleared: bool,
}

/// The teardown job as the outbox carries it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct TeardownJob {
    pub teardown_id: Uuid,
    pub collection_name: String,
    pub kb_id: Uuid,
    pub drop_table: bool,
    pub cleared: bool,
    #[serde(default)]
    pub document_ids: Vec<Uuid>,
    #[serde(default)]
    pub objects: Vec<String>,
}

/// Documents and vectors of one base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CollectionCounts {
    pub processing: i64,
    pub indexed: i64,
    pub failed: i64,
    pub documents: i64,
    pub vectors: i64,
}

/// The outbox topic the teardown function consumes.
pub const TEARDOWN_TOPIC: &str = "teardown";

pub(crate) async fn teardown_reserved(client: &impl GenericClient, name: &str) -> Result<bool, StoreError> {
    let row = client
        .query_one("SELECT EXISTS (SELECT 1 FROM collection_teardowns WHERE collection_name = $1)", &[&name])
        .await?;
    Ok(row.get(0))
}

/// Whether `name`, held by no base, holds content written with no base by a tenant other
/// than `org` (any such content, for a caller outside an organization): tracking rows that
/// describe chunks (or may yet), or chunks in the vector table.
pub(crate) async fn holds_unfiled_content(
    client: &impl GenericClient,
    name: &str,
    org: Option<Uuid>,
) -> Result<bool, StoreError> {
    let rows: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM rag_documents WHERE collection_name = $1 AND kb_id IS NULL \
             AND (vector_document_id IS NOT NULL OR status = 'processing') \
             AND ($2::uuid IS NULL OR org_id IS DISTINCT FROM $2))",
            &[&name, &org],
        )
        .await?
        .get(0);
    if rows {
        return Ok(true);
    }
    if vector_width(client, name).await?.is_none() {
        return Ok(false);
    }
    let table = vector_table(name);
    let chunks: bool = client
        .query_one(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM {table} WHERE kb_id IS NULL \
                 AND ($1::uuid IS NULL OR org_id IS DISTINCT FROM $1))"
            ),
            &[&org],
        )
        .await?
        .get(0);
    Ok(chunks)
}

impl Db {
    /// Whether a teardown has reserved `name`.
    pub async fn teardown_reserved(&self, name: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        teardown_reserved(&client, name).await
    }

    /// Deletes a base (a default base is cleared: its row stays) and, in the same
    /// transaction, reserves its name when no other base holds it and queues the teardown
    /// in the outbox. `None` when the base is already gone.
    pub async fn queue_teardown(&self, kb_id: Uuid) -> Result<Option<(TeardownQueued, serde_json::Value)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx.query_opt("SELECT collection_name FROM knowledge_bases WHERE id = $1", &[&kb_id]).await?
        else {
            return Ok(None);
        };
        let name: String = row.get(0);
        tx.execute(NAME_LOCK_SQL, &[&name]).await?;
        let Some(row) = tx
            .query_opt(&format!("SELECT {COLUMNS} FROM knowledge_bases kb WHERE kb.id = $1 FOR UPDATE"), &[&kb_id])
            .await?
        else {
            return Ok(None);
        };
        let base: KnowledgeBase = from_row(&row);
        let others: i64 = tx
            .query_one("SELECT count(*) FROM knowledge_bases WHERE collection_name = $1 AND id <> $2", &[&name, &kb_id])
            .await?
            .get(0);
        let cleared = base.is_default;
        // The base's documents go with it, in this transaction: afterwards nothing would say
        // they were the base's. Their chunks and stored objects are the teardown's.
        let documents = tx
            .query("DELETE FROM rag_documents WHERE kb_id = $1 RETURNING id, storage_path, parsed_path", &[&kb_id])
            .await?;
        let document_ids: Vec<Uuid> = documents.iter().map(|r| r.get(0)).collect();
        let objects: Vec<String> = documents
            .iter()
            .flat_map(|r| [r.get::<_, Option<String>>(1), r.get::<_, Option<String>>(2)])
            .flatten()
            .collect();
        if !cleared {
            tx.execute("DELETE FROM knowledge_bases WHERE id = $1", &[&kb_id]).await?;
        }
        let queued = TeardownQueued {
            teardown_id: Uuid::new_v4(),
            collection_name: name,
            kb_id,
            drop_table: others == 0,
            cleared,
        };
        if queued.drop_table {
            tx.execute(
                "INSERT INTO collection_teardowns (id, collection_name, kb_id, drop_table) VALUES ($1, $2, $3, true)",
                &[&queued.teardown_id, &queued.collection_name, &kb_id],
            )
            .await?;
        }
        let payload = serde_json::json!({
            "teardown_id": queued.teardown_id,
            "collection_name": queued.collection_name,
            "kb_id": kb_id,
            "drop_table": queued.drop_table,
            "cleared": cleared,
            "document_ids": document_ids,
            "objects": objects,
        });
        tx.execute(
            "INSERT INTO outbox (id, topic, payload) VALUES ($1, $2, $3)",
            &[&queued.teardown_id, &TEARDOWN_TOPIC, &payload],
        )
        .await?;
        tx.commit().await?;
        Ok(Some((queued, payload)))
    }

    /// Finishes a teardown's database part, idempotently, under the name's lock: drops the
    /// vector table and releases the name while the reservation `teardown_id` still holds
    /// it, or else removes only the deleted base's chunks from the table its siblings keep.
    pub async fn finish_teardown(&self, job: &TeardownJob) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(NAME_LOCK_SQL, &[&job.collection_name]).await?;
        let table = vector_table(&job.collection_name);
        if job.drop_table {
            let held = tx.execute("DELETE FROM collection_teardowns WHERE id = $1", &[&job.teardown_id]).await?;
            // Gone already: an earlier run finished, and the name may be someone's again.
            if held == 1 && vector_width(&tx, &job.collection_name).await?.is_some() {
                tx.batch_execute(&format!("DROP TABLE {table}")).await?;
            }
        } else if vector_width(&tx, &job.collection_name).await?.is_some() {
            tx.execute(
                &format!("DELETE FROM {table} WHERE kb_id = $1 OR document_id = ANY($2)"),
                &[&job.kb_id, &job.document_ids],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Teardowns whose reservation is older than `older_than`: their drop was lost or keeps
    /// failing. Each is stamped anew, so the next run waits another period before asking
    /// again; the job is the outbox row committed with the delete.
    pub async fn stale_teardowns(&self, older_than: std::time::Duration) -> Result<Vec<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "WITH stale AS (UPDATE collection_teardowns SET reserved_at = now() \
                 WHERE reserved_at < now() - make_interval(secs => $1) RETURNING id) \
                 SELECT o.payload FROM outbox o JOIN stale ON stale.id = o.id",
                &[&older_than.as_secs_f64()],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// The counts of one base's documents and chunks.
    pub async fn collection_counts(&self, base: &KnowledgeBase) -> Result<CollectionCounts, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE status = 'processing'), count(*) FILTER (WHERE status = 'done'), \
                 count(*) FILTER (WHERE status = 'error'), count(*) FROM rag_documents WHERE kb_id = $1",
                &[&base.id],
            )
            .await?;
        let mut counts = CollectionCounts {
            processing: row.get(0),
            indexed: row.get(1),
            failed: row.get(2),
            documents: row.get(3),
            vectors: 0,
        };
        if vector_width(&client, &base.collection_name).await?.is_some() {
            let table = vector_table(&base.collection_name);
            counts.vectors =
                client.query_one(&format!("SELECT count(*) FROM {table} WHERE kb_id = $1"), &[&base.id]).await?.get(0);
        }
        Ok(counts)
    }
}
