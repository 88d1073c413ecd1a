//! Collections beyond their bases: teardown reservations, unfiled content, the outbox
//! and the counts a collection's card shows.

use crate::knowledge::{COLUMNS, KnowledgeBase, from_row};
use crate::names::{NAME_LOCK_SQL, teardown_reserved, vector_width};
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
    /// `None` for a name no base held (`sluice rag-drop` of what `rag-ingest` left).
    pub kb_id: Option<Uuid>,
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
    pub kb_id: Option<Uuid>,
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

/// What `sluice rag-drop` found for a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameDrop {
    /// The teardown is committed; its job (the payload) is to be sent.
    Queued(TeardownQueued, serde_json::Value),
    /// Several bases hold the name and none was named: their ids.
    Ambiguous(Vec<Uuid>),
    /// The named base does not exist or holds another name.
    NoSuchBase,
    /// A teardown of the name is already under way.
    Reserved,
    /// No base, no table and no document row has the name.
    Nothing,
}

/// The outbox topic the teardown function consumes.
pub const TEARDOWN_TOPIC: &str = "teardown";

/// Writes a teardown's row (it stays until the teardown has finished, so the sweep can send
/// a stalled one again; only a drop reserves the name) and its job in the outbox, for the
/// deleted `documents` (rows of `id, storage_path, parsed_path`): their chunks and stored
/// objects are the teardown's. Returns the job.
async fn record_teardown(
    tx: &deadpool_postgres::Transaction<'_>,
    queued: &TeardownQueued,
    documents: &[tokio_postgres::Row],
) -> Result<serde_json::Value, StoreError> {
    let document_ids: Vec<Uuid> = documents.iter().map(|r| r.get(0)).collect();
    let objects: Vec<String> = documents
        .iter()
        .flat_map(|r| [r.get::<_, Option<String>>(1), r.get::<_, Option<String>>(2)])
        .flatten()
        .collect();
    tx.execute(
        "INSERT INTO collection_teardowns (id, collection_name, kb_id, drop_table) VALUES ($1, $2, $3, $4)",
        &[&queued.teardown_id, &queued.collection_name, &queued.kb_id, &queued.drop_table],
    )
    .await?;
    let payload = serde_json::json!({
        "teardown_id": queued.teardown_id,
        "collection_name": queued.collection_name,
        "kb_id": queued.kb_id,
        "drop_table": queued.drop_table,
        "cleared": queued.cleared,
        "document_ids": document_ids,
        "objects": objects,
    });
    tx.execute(
        "INSERT INTO outbox (id, topic, payload) VALUES ($1, $2, $3)",
        &[&queued.teardown_id, &TEARDOWN_TOPIC, &payload],
    )
    .await?;
    Ok(payload)
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
        // Its sync sources are detached, not deleted: each keeps its configuration and run
        // history until it is pointed at another collection; a run still going ends here.
        tx.execute(
            "UPDATE sync_logs SET status = 'failed', finished_at = now(), \
             message = 'the knowledge base was deleted; the source was detached' \
             WHERE status = 'running' AND source_id IN (SELECT id FROM sync_sources WHERE kb_id = $1)",
            &[&kb_id],
        )
        .await?;
        tx.execute(
            "UPDATE sync_sources SET kb_id = NULL, detached_at = now(), next_run_at = NULL, updated_at = now() \
             WHERE kb_id = $1",
            &[&kb_id],
        )
        .await?;
        // The base's documents go with it, in this transaction: afterwards nothing would say
        // they were the base's. Their chunks and stored objects are the teardown's.
        let documents = tx
            .query("DELETE FROM rag_documents WHERE kb_id = $1 RETURNING id, storage_path, parsed_path", &[&kb_id])
            .await?;
        if !cleared {
            tx.execute("DELETE FROM knowledge_bases WHERE id = $1", &[&kb_id]).await?;
        }
        let queued = TeardownQueued {
            teardown_id: Uuid::new_v4(),
            collection_name: name,
            kb_id: Some(kb_id),
            drop_table: others == 0,
            cleared,
        };
        let payload = record_teardown(&tx, &queued, &documents).await?;
        tx.commit().await?;
        Ok(Some((queued, payload)))
    }

    /// `sluice rag-drop`: queues the teardown of a collection name. With one base holding
    /// it (or the one named with `knowledge_base`), that base's teardown, as `DELETE
    /// /kb/{id}` queues it; with several and none named, nothing (their ids are returned);
    /// with none — the name as `rag-ingest` leaves it — the operator's drop of everything
    /// under the name: every document row goes (their objects with the teardown), the name
    /// is reserved and its table dropped.
    pub async fn queue_name_drop(&self, name: &str, knowledge_base: Option<Uuid>) -> Result<NameDrop, StoreError> {
        let client = self.client().await?;
        let holders: Vec<Uuid> = client
            .query("SELECT id FROM knowledge_bases WHERE collection_name = $1 ORDER BY created_at, id", &[&name])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        drop(client);
        let chosen = match (knowledge_base, holders.as_slice()) {
            (Some(id), _) if !holders.contains(&id) => return Ok(NameDrop::NoSuchBase),
            (Some(id), _) => Some(id),
            (None, [only]) => Some(*only),
            (None, []) => None,
            (None, _) => return Ok(NameDrop::Ambiguous(holders)),
        };
        if let Some(id) = chosen {
            return Ok(match self.queue_teardown(id).await? {
                Some((queued, payload)) => NameDrop::Queued(queued, payload),
                None => NameDrop::NoSuchBase,
            });
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(NAME_LOCK_SQL, &[&name]).await?;
        if tx.query_opt("SELECT 1 FROM knowledge_bases WHERE collection_name = $1", &[&name]).await?.is_some() {
            // A base claimed the name meanwhile: the operator has to look again.
            return Ok(NameDrop::Ambiguous(Vec::new()));
        }
        if teardown_reserved(&tx, name).await? {
            return Ok(NameDrop::Reserved);
        }
        let documents = tx
            .query(
                "DELETE FROM rag_documents WHERE collection_name = $1 RETURNING id, storage_path, parsed_path",
                &[&name],
            )
            .await?;
        if documents.is_empty() && vector_width(&tx, name).await?.is_none() {
            return Ok(NameDrop::Nothing);
        }
        let queued = TeardownQueued {
            teardown_id: Uuid::new_v4(),
            collection_name: name.to_owned(),
            kb_id: None,
            drop_table: true,
            cleared: false,
        };
        let payload = record_teardown(&tx, &queued, &documents).await?;
        tx.commit().await?;
        Ok(NameDrop::Queued(queued, payload))
    }

    /// Finishes a teardown's database part, idempotently, under the name's lock: drops the
    /// vector table and releases the name while the reservation `teardown_id` still holds
    /// it, or else removes only the deleted base's chunks from the table its siblings keep;
    /// then clears the teardown's row. A lock (the name's, or the table's, which a long
    /// search holds) not granted within `lock_timeout` fails the attempt rather than
    /// queueing every reader of the table behind a waiting `DROP`; the job is retried.
    pub async fn finish_teardown(
        &self,
        job: &TeardownJob,
        lock_timeout: std::time::Duration,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let millis = lock_timeout.as_millis().max(1);
        tx.batch_execute(&format!("SET LOCAL lock_timeout = {millis}")).await?;
        tx.execute(NAME_LOCK_SQL, &[&job.collection_name]).await?;
        let table = vector_table(&job.collection_name);
        let held = tx.execute("DELETE FROM collection_teardowns WHERE id = $1", &[&job.teardown_id]).await?;
        if job.drop_table {
            // Gone already: an earlier run finished, and the name may be someone's again.
            if held == 1 && vector_width(&tx, &job.collection_name).await?.is_some() {
                tx.execute("SELECT sluice_drop_vector_table($1)", &[&job.collection_name]).await?;
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

    /// Teardowns not finished `older_than` after they were queued: their job was lost or
    /// keeps failing. Each is stamped anew, so the next run waits another period before asking
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
