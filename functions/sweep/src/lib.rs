//! The `sweep` function, run on a schedule: it reaps what nobody else will —
//!
//! - presigned upload intents whose link expired with no bytes judged: the row is rejected
//!   (so `GET /files/{id}` says so) and any object that landed late is deleted; a
//!   document's intent likewise fails its row;
//! - outbox rows left unsent (the send after their commit failed): sent again, so an
//!   acknowledged upload never stays `processing` for want of its job;
//! - teardown reservations older than an hour: their job sent again, so a lost or failing
//!   drop does not hold a name for good;
//! - documents `processing` with no attempt for `STALE_DOCUMENT_AGE`: failed, saying the
//!   ingestion did not finish and that a retry is possible.

use serde::Serialize;
use sluice_blob::{Blob, BlobError};
use sluice_domain::Config;
use sluice_queue::jobs::Dispatcher;
use sluice_store::{Db, StoreError};
use std::time::Duration;
use time::OffsetDateTime;

/// How long after its link expired an intent is left alone: S3 checks a presigned URL's
/// expiry when the request starts, so a large PUT begun just in time may still be landing.
pub const INTENT_GRACE: Duration = Duration::from_secs(3600);

/// How long an outbox row may wait for the send after its commit before the sweep sends
/// it: longer than any request takes to send its own.
pub const OUTBOX_GRACE: Duration = Duration::from_secs(120);

/// How old a teardown reservation may grow before the sweep sends its job again.
pub const RESERVATION_GRACE: Duration = Duration::from_secs(3600);

/// How long a document may stay `processing` with no attempt at it: past the ingest queue's
/// last delivery (5 deliveries of up to 15 minutes, 90 minutes apart), nothing will finish it.
pub const STALE_DOCUMENT_AGE: Duration = Duration::from_secs(12 * 3600);

/// Rows reaped per run, so one run stays well inside its timeout; the next takes the rest.
const BATCH: i64 = 500;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the database failed: {0}")]
    Store(#[from] StoreError),
    #[error("object storage failed: {0}")]
    Blob(#[from] BlobError),
    #[error("a job could not be sent: {0}")]
    Dispatch(#[from] sluice_queue::jobs::DispatchError),
}

/// What one run did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub expired_intents: u32,
    pub resent_jobs: u32,
    pub retried_teardowns: u32,
    pub stale_documents: u64,
}

#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
    pub dispatcher: Dispatcher,
    /// `OUTBOX_GRACE` unless a test shortens it.
    pub outbox_grace: Duration,
    /// `STALE_DOCUMENT_AGE` unless configured (`SLUICE_STALE_DOCUMENT_SECS`).
    pub stale_document_age: Duration,
}

impl State {
    pub fn new(config: Config, db: Db, blob: Blob, sqs: aws_sdk_sqs::Client) -> Self {
        let dispatcher = Dispatcher::new(sqs, config.job_routes());
        let seconds = |name: &str, default: Duration| {
            std::env::var(name).ok().and_then(|v| v.parse().ok()).map_or(default, Duration::from_secs)
        };
        let outbox_grace = seconds("SLUICE_OUTBOX_GRACE_SECS", OUTBOX_GRACE);
        let stale_document_age = seconds("SLUICE_STALE_DOCUMENT_SECS", STALE_DOCUMENT_AGE);
        Self { config, db, blob, dispatcher, outbox_grace, stale_document_age }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        let db = Db::connect_from_env(2).await?;
        let blob = Blob::from_env(config.bucket.clone(), config.kms_key_id.clone()).await;
        let sqs = aws_sdk_sqs::Client::new(&sluice_blob::sdk_config().await);
        Ok(Self::new(config, db, blob, sqs))
    }
}

/// One sweep, as of `now`. A failure fails the run (the schedule runs it again); every
/// step is idempotent, so a half-done run is simply finished by the next.
pub async fn handle(state: &State, now: OffsetDateTime) -> Result<SweepReport, SweepError> {
    let mut report = SweepReport::default();
    let before = now - INTENT_GRACE;
    for (id, key) in state.db.expired_intents(before, BATCH).await? {
        let reason = "sweep: intent_expired: no file arrived before the upload link expired; upload it again";
        if state.db.expire_intent(id, before, reason).await? {
            state.blob.delete(&key).await?;
            report.expired_intents += 1;
        }
    }
    for (id, key) in state.db.expired_document_intents(before, BATCH).await? {
        let reason = "sweep: intent_expired: no file arrived before the upload link expired; upload it again";
        if state.db.fail_document(id, reason).await? {
            report.expired_intents += 1;
        }
        if !key.is_empty() {
            state.blob.delete(&key).await?;
        }
    }
    for message in state.db.undispatched(state.outbox_grace).await? {
        state.dispatcher.send(&message.topic, &message.payload).await?;
        state.db.mark_dispatched(message.id).await?;
        report.resent_jobs += 1;
    }
    for job in state.db.stale_teardowns(RESERVATION_GRACE).await? {
        state.dispatcher.send(sluice_store::TEARDOWN_TOPIC, &job).await?;
        report.retried_teardowns += 1;
    }
    let message = "sweep: IngestionNotFinished: the ingestion stopped without finishing; retry the document";
    report.stale_documents = state.db.fail_stale_documents(state.stale_document_age, message).await?;
    if report != SweepReport::default() {
        tracing::info!(
            expired_intents = report.expired_intents,
            resent_jobs = report.resent_jobs,
            retried_teardowns = report.retried_teardowns,
            stale_documents = report.stale_documents,
            "swept"
        );
    }
    Ok(report)
}
