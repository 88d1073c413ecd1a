//! The `sweep` function, run on a schedule (every 15 minutes, one at a time): it reaps what
//! nobody else will. Each task has its own age threshold (`Thresholds`, configurable):
//!
//! - presigned upload intents whose link expired with no bytes judged: when their object is
//!   there (its S3 event was lost or dead-lettered), the parse is asked to judge it, again
//!   each `INTENT_GRACE` until `CHAT_RETENTION` after the upload was asked for — an upload
//!   that landed is never refused for want of its event; otherwise the row is rejected (so `GET /files/{id}` says why: no
//!   file arrived, or it arrived and could never be checked) and any object that landed
//!   late is deleted; a document's intent likewise fails its row. Past `CHAT_RETENTION` the
//!   rows go too: a chat intent's as an unlinked chat file, a document intent's here;
//! - outbox rows left unsent (the send after their commit failed): sent again, so an
//!   acknowledged upload never stays `processing` for want of its job;
//! - teardowns not finished an hour after they were queued: their job sent again, so a
//!   lost or failing drop does not hold a name for good;
//! - documents `processing` with no attempt for `STALE_DOCUMENT_AGE`: failed, saying the
//!   ingestion did not finish and that a retry is possible;
//! - removals of stored objects whose rows are gone, queued with the delete and still
//!   pending: run again;
//! - chat files never linked to a message within `CHAT_RETENTION` of their upload: rows
//!   first, then bytes, the row restored if its bytes cannot be removed. It fails closed:
//!   if the scan for unlinked files fails, nothing is removed;
//! - sync sources whose schedule is due: a run started (one at a time per source; a source
//!   still running is not started twice, and its next time moves on);
//! - sync runs whose listing stopped between pages for `SYNC_STALL_AGE` (the worker died):
//!   the job for their next page sent again; runs whose listing completed and whose
//!   documents have all finished: closed;
//! - objects under the prefixes Sluice writes that no row names, an hour after they were
//!   written: deleted. The scan goes on from where the last run stopped, a bounded slice
//!   per run.
//!
//! Every task runs even when another fails; the run reports counts per task, logs them as
//! one structured line, and fails (so the schedule's retry and alarm see it) when a task did.

use serde::Serialize;
use sluice_blob::{Blob, BlobError};
use sluice_domain::Config;
use sluice_queue::jobs::{Dispatcher, LANDED_TOPIC, LandedJob};
use sluice_store::{Db, Reaped, StoreError};
use std::time::Duration;
use time::OffsetDateTime;

/// How long after its link expired an intent is left alone: S3 checks a presigned URL's
/// expiry when the request starts, so a large PUT begun just in time may still be landing.
pub const INTENT_GRACE: Duration = Duration::from_secs(3600);

/// How long an outbox row may wait for the send after its commit before the sweep sends
/// it: longer than any request takes to send its own.
pub const OUTBOX_GRACE: Duration = Duration::from_secs(120);

/// How long a teardown may stay unfinished before the sweep sends its job again.
pub const TEARDOWN_RETRY: Duration = Duration::from_secs(3600);

/// How long a document may stay `processing` with no attempt at it: past the ingest queue's
/// last delivery (5 deliveries of up to 15 minutes, 90 minutes apart), nothing will finish it.
pub const STALE_DOCUMENT_AGE: Duration = Duration::from_secs(12 * 3600);

/// How long a queued removal is left to the request or worker that queued it.
pub const REMOVAL_GRACE: Duration = Duration::from_secs(300);

/// How long a chat file may wait to be linked to a message. The composer links a file when
/// its message is sent; one not sent within a day is abandoned and has to be uploaded again.
pub const CHAT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// How old an object must be before having no row makes it garbage: an inline upload
/// writes its object moments before its row, and a parse its text moments before recording it.
pub const UNNAMED_OBJECT_GRACE: Duration = Duration::from_secs(3600);

/// Every prefix Sluice writes objects under: presigned and inline chat files, presigned and
/// inline documents, parsed texts, and the extract function's one-time inputs and answers
/// (no row ever names those: one left by a crashed call goes after the grace).
pub const SCANNED_PREFIXES: [&str; 6] =
    ["uploads/", "media/", "document-uploads/", "documents/", "parsed/", "extract/"];

/// How long a run's listing may go without recording a page before the sweep sends its
/// next page's job again: longer than one job takes (ten pages).
pub const SYNC_STALL_AGE: Duration = Duration::from_secs(1800);

/// Rows reaped per task per run, so one run stays well inside its timeout; the next takes the rest.
const BATCH: i64 = 500;

/// Keys listed per page, and pages per prefix per run, of the scan for unnamed objects.
const SCAN_PAGE: i32 = 1000;
const SCAN_PAGES_PER_RUN: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the database failed: {0}")]
    Store(#[from] StoreError),
    #[error("object storage failed: {0}")]
    Blob(#[from] BlobError),
    #[error("a job could not be sent: {0}")]
    Dispatch(#[from] sluice_queue::jobs::DispatchError),
    #[error("tasks failed: {}", .0.failed_tasks.join("; "))]
    Incomplete(Box<SweepReport>),
}

/// What one run did, per task; `failed_tasks` names each task that stopped, and why.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub expired_intents: u64,
    pub redriven_uploads: u64,
    pub removed_intents: u64,
    pub resent_jobs: u64,
    pub retried_teardowns: u64,
    pub stale_documents: u64,
    pub removals_run: u64,
    pub expired_chat_files: u64,
    pub unnamed_objects: u64,
    pub sync_runs_started: u64,
    pub sync_runs_resumed: u64,
    pub sync_runs_closed: u64,
    pub failed_tasks: Vec<String>,
}

/// The age thresholds of the tasks; each is configurable (seconds) so an operator, or a
/// test, can move it without a code change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// `SLUICE_INTENT_GRACE_SECS`
    pub intent_grace: Duration,
    /// `SLUICE_OUTBOX_GRACE_SECS`
    pub outbox_grace: Duration,
    /// `SLUICE_TEARDOWN_RETRY_SECS`
    pub teardown_retry: Duration,
    /// `SLUICE_STALE_DOCUMENT_SECS`
    pub stale_document_age: Duration,
    /// `SLUICE_REMOVAL_GRACE_SECS`
    pub removal_grace: Duration,
    /// `SLUICE_CHAT_RETENTION_SECS`
    pub chat_retention: Duration,
    /// `SLUICE_UNNAMED_OBJECT_GRACE_SECS`
    pub unnamed_object_grace: Duration,
    /// `SLUICE_SYNC_STALL_SECS`
    pub sync_stall_age: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            intent_grace: INTENT_GRACE,
            outbox_grace: OUTBOX_GRACE,
            teardown_retry: TEARDOWN_RETRY,
            stale_document_age: STALE_DOCUMENT_AGE,
            removal_grace: REMOVAL_GRACE,
            chat_retention: CHAT_RETENTION,
            unnamed_object_grace: UNNAMED_OBJECT_GRACE,
            sync_stall_age: SYNC_STALL_AGE,
        }
    }
}

impl Thresholds {
    pub fn from_env() -> Self {
        let seconds = |name: &str, default: Duration| {
            std::env::var(name).ok().and_then(|v| v.parse().ok()).map_or(default, Duration::from_secs)
        };
        let d = Self::default();
        Self {
            intent_grace: seconds("SLUICE_INTENT_GRACE_SECS", d.intent_grace),
            outbox_grace: seconds("SLUICE_OUTBOX_GRACE_SECS", d.outbox_grace),
            teardown_retry: seconds("SLUICE_TEARDOWN_RETRY_SECS", d.teardown_retry),
            stale_document_age: seconds("SLUICE_STALE_DOCUMENT_SECS", d.stale_document_age),
            removal_grace: seconds("SLUICE_REMOVAL_GRACE_SECS", d.removal_grace),
            chat_retention: seconds("SLUICE_CHAT_RETENTION_SECS", d.chat_retention),
            unnamed_object_grace: seconds("SLUICE_UNNAMED_OBJECT_GRACE_SECS", d.unnamed_object_grace),
            sync_stall_age: seconds("SLUICE_SYNC_STALL_SECS", d.sync_stall_age),
        }
    }
}

#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
    pub dispatcher: Dispatcher,
    pub thresholds: Thresholds,
}

impl State {
    pub fn new(config: Config, db: Db, blob: Blob, sqs: aws_sdk_sqs::Client) -> Self {
        let dispatcher = Dispatcher::new(sqs, config.job_routes());
        Self { config, db, blob, dispatcher, thresholds: Thresholds::from_env() }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        let sdk = sluice_blob::sdk_config().await;
        let db = Db::from_env(&sdk, 2).await?;
        let blob = Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        Ok(Self::new(config, db, blob, sqs))
    }
}

/// One sweep, as of `now`: every task, each on its own (every step is idempotent, so a
/// half-done task is simply finished by the next run).
pub async fn handle(state: &State, now: OffsetDateTime) -> Result<SweepReport, SweepError> {
    let mut failed_tasks = Vec::new();
    let mut count = |task: &str, outcome: Result<u64, SweepError>| {
        outcome.unwrap_or_else(|error| {
            failed_tasks.push(format!("{task}: {error}"));
            0
        })
    };
    let (expired, redriven) = match expire_intents(state, now).await {
        Ok(intents) => (intents.expired, intents.redriven),
        Err(error) => (count("expired_intents", Err(error)), 0),
    };
    let mut report = SweepReport {
        expired_intents: expired,
        redriven_uploads: redriven,
        removed_intents: count("removed_intents", remove_expired_document_intents(state, now).await),
        resent_jobs: count("resent_jobs", resend_jobs(state).await),
        retried_teardowns: count("retried_teardowns", retry_teardowns(state).await),
        stale_documents: count("stale_documents", fail_stale_documents(state).await),
        removals_run: count("removals_run", run_stalled_removals(state).await),
        expired_chat_files: count("expired_chat_files", reap_unlinked_chat_files(state, now).await),
        unnamed_objects: 0,
        sync_runs_started: count("sync_runs_started", start_due_runs(state, now).await),
        sync_runs_resumed: count("sync_runs_resumed", resume_stalled_runs(state).await),
        sync_runs_closed: count("sync_runs_closed", state.db.finish_drained_runs().await.map_err(SweepError::from)),
        failed_tasks: Vec::new(),
    };
    for prefix in SCANNED_PREFIXES {
        report.unnamed_objects += count("unnamed_objects", remove_unnamed_objects(state, prefix, now).await);
    }
    report.failed_tasks = failed_tasks;
    tracing::info!(
        expired_intents = report.expired_intents,
        redriven_uploads = report.redriven_uploads,
        removed_intents = report.removed_intents,
        resent_jobs = report.resent_jobs,
        retried_teardowns = report.retried_teardowns,
        stale_documents = report.stale_documents,
        removals_run = report.removals_run,
        expired_chat_files = report.expired_chat_files,
        unnamed_objects = report.unnamed_objects,
        sync_runs_started = report.sync_runs_started,
        sync_runs_resumed = report.sync_runs_resumed,
        sync_runs_closed = report.sync_runs_closed,
        failed_tasks = ?report.failed_tasks,
        "swept"
    );
    if report.failed_tasks.is_empty() { Ok(report) } else { Err(SweepError::Incomplete(Box::new(report))) }
}

/// What an intent that expired with no file records, stage, type and advice.
pub const INTENT_EXPIRED: &str =
    "sweep: intent_expired: no file arrived before the upload link expired; upload it again";

/// What an upload records whose bytes landed but were never judged, though the parse was
/// asked again until a day after the upload.
pub const NEVER_JUDGED: &str =
    "sweep: never_judged: the file arrived but could not be checked within a day; upload it again";

/// What the intents' task did.
struct Intents {
    expired: u64,
    redriven: u64,
}

async fn expire_intents(state: &State, now: OffsetDateTime) -> Result<Intents, SweepError> {
    let mut done = Intents { expired: 0, redriven: 0 };
    let before = now - state.thresholds.intent_grace;
    // An upload asked for before this whose bytes are there but still unjudged is given up.
    let asked_since = before - state.thresholds.chat_retention;
    for (id, key, asked_at) in state.db.expired_intents(before, BATCH).await? {
        let landed = landed(state, &key).await?;
        if landed && asked_at >= asked_since {
            redrive(state, &key).await?;
            // Not asked again before another grace has passed, nor ahead of the others.
            state.db.postpone_intent(id, now).await?;
            done.redriven += 1;
        } else if state.db.expire_intent(id, before, if landed { NEVER_JUDGED } else { INTENT_EXPIRED }).await? {
            state.blob.delete(&key).await?;
            done.expired += 1;
        }
    }
    for (id, key, asked_at) in state.db.expired_document_intents(before, BATCH).await? {
        let landed = !key.is_empty() && landed(state, &key).await?;
        if landed && asked_at >= asked_since {
            redrive(state, &key).await?;
            state.db.postpone_document_intent(id, now).await?;
            done.redriven += 1;
            continue;
        }
        if state.db.fail_document(id, if landed { NEVER_JUDGED } else { INTENT_EXPIRED }).await? {
            done.expired += 1;
        }
        if !key.is_empty() {
            state.blob.delete(&key).await?;
        }
    }
    Ok(done)
}

/// Whether an object is stored under `key` (a listing: the sweep may list the upload
/// prefixes, never read what is in them).
async fn landed(state: &State, key: &str) -> Result<bool, SweepError> {
    Ok(state.blob.list(key, None, 1).await?.objects.first().is_some_and(|(found, _)| found == key))
}

/// Asks the parse to judge the bytes under `key`, as their S3 event would have.
async fn redrive(state: &State, key: &str) -> Result<(), SweepError> {
    let job = serde_json::to_value(LandedJob { landed_key: key.to_owned() }).unwrap_or_default();
    state.dispatcher.send(LANDED_TOPIC, &job).await?;
    tracing::info!(key, "an expired upload's bytes are there unjudged; the parse is asked to judge them");
    Ok(())
}

async fn remove_expired_document_intents(state: &State, now: OffsetDateTime) -> Result<u64, SweepError> {
    let before = now - state.thresholds.intent_grace - state.thresholds.chat_retention;
    Ok(state.db.remove_expired_document_intents(before, INTENT_EXPIRED).await?)
}

async fn resend_jobs(state: &State) -> Result<u64, SweepError> {
    let mut sent = 0;
    for message in state.db.undispatched(state.thresholds.outbox_grace).await? {
        state.dispatcher.send(&message.topic, &message.payload).await?;
        state.db.mark_dispatched(message.id).await?;
        sent += 1;
    }
    Ok(sent)
}

async fn retry_teardowns(state: &State) -> Result<u64, SweepError> {
    let mut sent = 0;
    for job in state.db.stale_teardowns(state.thresholds.teardown_retry).await? {
        state.dispatcher.send(sluice_store::TEARDOWN_TOPIC, &job).await?;
        sent += 1;
    }
    Ok(sent)
}

async fn start_due_runs(state: &State, now: OffsetDateTime) -> Result<u64, SweepError> {
    let mut started = 0;
    for (run_id, outbox_id) in state.db.start_due_runs(now, BATCH).await? {
        let job = sluice_store::SyncRunJob { run_id, step: 0 };
        state.dispatcher.send(sluice_store::SYNC_RUN_TOPIC, &serde_json::to_value(job).unwrap_or_default()).await?;
        state.db.mark_dispatched(outbox_id).await?;
        started += 1;
    }
    Ok(started)
}

async fn resume_stalled_runs(state: &State) -> Result<u64, SweepError> {
    let mut resumed = 0;
    for job in state.db.stalled_sync_runs(state.thresholds.sync_stall_age).await? {
        state.dispatcher.send(sluice_store::SYNC_RUN_TOPIC, &serde_json::to_value(job).unwrap_or_default()).await?;
        resumed += 1;
    }
    Ok(resumed)
}

async fn fail_stale_documents(state: &State) -> Result<u64, SweepError> {
    let message = "sweep: IngestionNotFinished: the ingestion stopped without finishing; retry the document";
    Ok(state.db.fail_stale_documents(state.thresholds.stale_document_age, message).await?)
}

async fn run_stalled_removals(state: &State) -> Result<u64, SweepError> {
    let mut done = 0;
    for id in state.db.stalled_removals(state.thresholds.removal_grace, BATCH).await? {
        if state.db.run_removal(id, move |key| async move { state.blob.delete(&key).await }).await?? {
            done += 1;
        }
    }
    Ok(done)
}

/// Removes the chat files never linked to a message within the retention: each row first
/// (spared if it was linked since the scan), then its bytes, the row restored if those
/// cannot be removed. The scan comes first and whole: if it fails, nothing is removed.
pub async fn reap_unlinked_chat_files(state: &State, now: OffsetDateTime) -> Result<u64, SweepError> {
    let before = now - state.thresholds.chat_retention;
    let candidates = state.db.unlinked_chat_files(before, BATCH).await?;
    let mut removed = 0;
    for (id, _) in candidates {
        match state.db.reap_unlinked_chat_file(id, before, async |key| state.blob.delete(key).await).await?? {
            Reaped::Removed => removed += 1,
            Reaped::Spared => {}
        }
    }
    Ok(removed)
}

/// Deletes the objects under `prefix` that no row names and that were written before the
/// grace, going on from where the previous run stopped (a bounded slice per run; the scan
/// starts over when it reaches the end).
pub async fn remove_unnamed_objects(state: &State, prefix: &str, now: OffsetDateTime) -> Result<u64, SweepError> {
    let cutoff = (now - state.thresholds.unnamed_object_grace).unix_timestamp();
    let mut start_after = state.db.sweep_cursor(prefix).await?;
    let mut removed = 0;
    for _ in 0..SCAN_PAGES_PER_RUN {
        let page = state.blob.list(prefix, start_after.as_deref(), SCAN_PAGE).await?;
        let old: Vec<String> =
            page.objects.iter().filter(|(_, written)| *written < cutoff).map(|(key, _)| key.clone()).collect();
        let unnamed = state.db.unnamed_objects(&old).await?;
        state.blob.delete_many(&unnamed).await?;
        for key in &unnamed {
            tracing::info!(key, "an object no row names; deleted");
        }
        removed += unnamed.len() as u64;
        start_after = if page.truncated { page.objects.last().map(|(key, _)| key.clone()) } else { None };
        if start_after.is_none() {
            break;
        }
    }
    state.db.set_sweep_cursor(prefix, start_after.as_deref()).await?;
    Ok(removed)
}
