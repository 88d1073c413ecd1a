//! A sync run's log: started (one at a time per source), read back, failed, counted as its
//! documents finish, and closed once its listing is complete and its last document done.

use crate::{Db, StoreError};
use deadpool_postgres::{GenericClient, Transaction};
use serde::Serialize;
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

/// The outbox topic (on the parse queue) that carries a run's next page of listing.
pub const SYNC_RUN_TOPIC: &str = "sync-run";

/// Failed files named in one run's log; the count goes on past it.
pub const MAX_LOGGED_FAILURES: i32 = 100;

/// One run, as its log answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncRun {
    pub id: Uuid,
    pub source_id: Uuid,
    pub kb_id: Option<Uuid>,
    pub collection_name: String,
    pub mode: String,
    pub trigger: String,
    pub confirm_removals: bool,
    pub status: String,
    pub listing_complete: bool,
    #[serde(skip)]
    pub step: i32,
    pub total: i32,
    pub ingested: i32,
    pub updated: i32,
    pub skipped: i32,
    pub failed: i32,
    pub removed: i32,
    /// Documents sent to be fetched and indexed that have not finished.
    pub pending: i32,
    /// Objects downloaded (GetObject calls).
    pub fetched: i32,
    /// Documents the run would have removed past the source's threshold, removed none of.
    pub removals_held: Option<i32>,
    pub message: Option<String>,
    /// `[{key, error}]`, the first `MAX_LOGGED_FAILURES` failed files.
    pub failures: serde_json::Value,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

pub(super) const RUN_COLUMNS: &str = "id, source_id, kb_id, collection_name, mode, trigger, confirm_removals, status, \
    listing_complete, step, total, ingested, updated, skipped, failed, removed, pending, fetched, removals_held, \
    message, failures, started_at, finished_at";

pub(super) fn run(row: &Row) -> SyncRun {
    SyncRun {
        id: row.get("id"),
        source_id: row.get("source_id"),
        kb_id: row.get("kb_id"),
        collection_name: row.get("collection_name"),
        mode: row.get("mode"),
        trigger: row.get("trigger"),
        confirm_removals: row.get("confirm_removals"),
        status: row.get("status"),
        listing_complete: row.get("listing_complete"),
        step: row.get("step"),
        total: row.get("total"),
        ingested: row.get("ingested"),
        updated: row.get("updated"),
        skipped: row.get("skipped"),
        failed: row.get("failed"),
        removed: row.get("removed"),
        pending: row.get("pending"),
        fetched: row.get("fetched"),
        removals_held: row.get("removals_held"),
        message: row.get("message"),
        failures: row.get("failures"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
    }
}

/// Whose runs a log answers: one source's, or those of sources on any of some bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunScope<'a> {
    Source(Uuid),
    Bases(&'a [Uuid]),
}

/// How asking for a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStart {
    /// The log row and the first page's job are committed; the job is to be sent.
    Started {
        run_id: Uuid,
        outbox_id: Uuid,
    },
    /// A run of this source is still going: it is not started twice.
    AlreadyRunning(Uuid),
    SourceGone,
}

/// The job that lists a run's next page; `step` is the page it expects, so a job delivered
/// twice finds the run moved on and does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncRunJob {
    pub run_id: Uuid,
    pub step: i32,
}

/// The SQL that closes a run whose listing completed once its last document finished;
/// used in an `UPDATE sync_logs SET … pending = pending - 1, <this>`.
pub(super) const FINISH_WHEN_DRAINED: &str = "status = CASE WHEN listing_complete AND pending <= 1 AND status = 'running' \
    THEN 'done' ELSE status END, finished_at = CASE WHEN listing_complete AND pending <= 1 AND status = 'running' \
    THEN now() ELSE finished_at END";

/// Counts one finished document of a run into `column` (`ingested`, `updated`, `skipped`).
pub(super) async fn count_finished(client: &impl GenericClient, run_id: Uuid, column: &str) -> Result<(), StoreError> {
    client
        .execute(
            &format!(
                "UPDATE sync_logs SET {column} = {column} + 1, pending = greatest(pending - 1, 0), \
                 {FINISH_WHEN_DRAINED} WHERE id = $1"
            ),
            &[&run_id],
        )
        .await?;
    Ok(())
}

/// Writes a run's log row and the outbox row of its first page, in `tx`.
pub(super) async fn start_run(
    tx: &Transaction<'_>,
    source_id: Uuid,
    trigger: &str,
    confirm_removals: bool,
) -> Result<RunStart, StoreError> {
    let Some(row) = tx
        .query_opt(
            "SELECT kb_id, collection_name, sync_mode FROM sync_sources WHERE id = $1 AND kb_id IS NOT NULL",
            &[&source_id],
        )
        .await?
    else {
        return Ok(RunStart::SourceGone);
    };
    let (kb_id, collection, mode): (Uuid, String, String) = (row.get(0), row.get(1), row.get(2));
    if let Some(running) =
        tx.query_opt("SELECT id FROM sync_logs WHERE source_id = $1 AND status = 'running'", &[&source_id]).await?
    {
        return Ok(RunStart::AlreadyRunning(running.get(0)));
    }
    let run_id = Uuid::new_v4();
    // Two starts racing: the unique index lets one in; the other reads as already running.
    let inserted = tx
        .execute(
            "INSERT INTO sync_logs (id, source_id, kb_id, collection_name, mode, trigger, confirm_removals, status) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'running') ON CONFLICT DO NOTHING",
            &[&run_id, &source_id, &kb_id, &collection, &mode, &trigger, &confirm_removals],
        )
        .await?;
    if inserted == 0 {
        let running: Uuid = tx
            .query_one("SELECT id FROM sync_logs WHERE source_id = $1 AND status = 'running'", &[&source_id])
            .await?
            .get(0);
        return Ok(RunStart::AlreadyRunning(running));
    }
    let outbox_id = Uuid::new_v4();
    tx.execute(
        "INSERT INTO outbox (id, topic, payload) VALUES ($1, $2, $3)",
        &[&outbox_id, &SYNC_RUN_TOPIC, &serde_json::to_value(SyncRunJob { run_id, step: 0 }).unwrap_or_default()],
    )
    .await?;
    Ok(RunStart::Started { run_id, outbox_id })
}

impl Db {
    /// Writes a run's log row and its first page's job, unless one is still going.
    pub async fn start_sync_run(
        &self,
        source_id: Uuid,
        trigger: &str,
        confirm_removals: bool,
    ) -> Result<RunStart, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let start = start_run(&tx, source_id, trigger, confirm_removals).await?;
        if matches!(start, RunStart::Started { .. }) {
            tx.commit().await?;
        }
        Ok(start)
    }

    pub async fn sync_run(&self, id: Uuid) -> Result<Option<SyncRun>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt(&format!("SELECT {RUN_COLUMNS} FROM sync_logs WHERE id = $1"), &[&id]).await?;
        Ok(row.as_ref().map(run))
    }

    /// The runs of `scope`, newest first, `limit` after `offset`, with how many there are.
    pub async fn sync_runs(
        &self,
        scope: RunScope<'_>,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<SyncRun>, i64), StoreError> {
        let client = self.client().await?;
        let (filter, value): (&str, &(dyn tokio_postgres::types::ToSql + Sync)) = match &scope {
            RunScope::Source(id) => ("source_id = $1", id),
            RunScope::Bases(ids) => ("kb_id = ANY($1)", ids),
        };
        let rows = client
            .query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM sync_logs WHERE {filter} ORDER BY started_at DESC, id LIMIT $2 OFFSET $3"
                ),
                &[value, &limit, &offset],
            )
            .await?;
        let total: i64 =
            client.query_one(&format!("SELECT count(*) FROM sync_logs WHERE {filter}"), &[value]).await?.get(0);
        Ok((rows.iter().map(run).collect(), total))
    }

    /// Ends a run whose listing could not complete: it removes nothing, and says why.
    pub async fn fail_sync_run(&self, run_id: Uuid, message: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE sync_logs SET status = 'failed', message = $2, finished_at = now() \
                 WHERE id = $1 AND status = 'running'",
                &[&run_id, &message],
            )
            .await?;
        Ok(changed == 1)
    }

    /// The sweep: runs whose listing stopped with no page recorded for `older_than` (the
    /// worker died between pages): their next page's job, to send again.
    pub async fn stalled_sync_runs(&self, older_than: std::time::Duration) -> Result<Vec<SyncRunJob>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, step FROM sync_logs WHERE status = 'running' AND NOT listing_complete \
                 AND heartbeat_at < now() - make_interval(secs => $1) LIMIT 100",
                &[&older_than.as_secs_f64()],
            )
            .await?;
        Ok(rows.iter().map(|r| SyncRunJob { run_id: r.get(0), step: r.get(1) }).collect())
    }

    /// The sweep: closes runs whose listing completed and which have no document left
    /// `processing` (one deleted or failed by the sweep is not counted by its own path).
    pub async fn finish_drained_runs(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "UPDATE sync_logs l SET status = 'done', pending = 0, finished_at = now() \
                 WHERE l.status = 'running' AND l.listing_complete AND NOT EXISTS \
                 (SELECT 1 FROM rag_documents d WHERE d.sync_run_id = l.id AND d.status = 'processing')",
                &[],
            )
            .await?)
    }
}
