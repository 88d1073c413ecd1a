//! The `sweep` function, run on a schedule: it reaps what nobody else will. Today that is
//! presigned upload intents whose link expired with no bytes judged: the row is rejected
//! (so `GET /files/{id}` says so) and any object that landed late is deleted.

use serde::Serialize;
use sluice_blob::{Blob, BlobError};
use sluice_domain::Config;
use sluice_store::{Db, StoreError};
use std::time::Duration;
use time::OffsetDateTime;

/// How long after its link expired an intent is left alone: S3 checks a presigned URL's
/// expiry when the request starts, so a large PUT begun just in time may still be landing.
pub const INTENT_GRACE: Duration = Duration::from_secs(3600);

/// Rows reaped per run, so one run stays well inside its timeout; the next takes the rest.
const BATCH: i64 = 500;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the database failed: {0}")]
    Store(#[from] StoreError),
    #[error("object storage failed: {0}")]
    Blob(#[from] BlobError),
}

/// What one run did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub expired_intents: u32,
}

#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
}

impl State {
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        let db = Db::connect_from_env(2).await?;
        let blob = Blob::from_env(config.bucket.clone(), config.kms_key_id.clone()).await;
        Ok(Self { config, db, blob })
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
    if report.expired_intents > 0 {
        tracing::info!(expired_intents = report.expired_intents, "swept");
    }
    Ok(report)
}
