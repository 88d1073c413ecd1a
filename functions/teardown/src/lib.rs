//! The `teardown` function: a knowledge base deleted (or a default one cleared) had its rows
//! changed in the request, with a reservation of its name when no other base holds it and
//! this job in the outbox. Here, after the commit: the vector table is dropped and the name
//! released (or, when siblings keep the table, only the base's chunks go), then the stored
//! originals and parsed texts are deleted. Every step is idempotent: a redelivered or re-run
//! job finds the end state and changes nothing.

use sluice_blob::{Blob, BlobError};
use sluice_domain::Config;
use sluice_queue::SqsBatchResponse;
use sluice_store::{Db, StoreError, TeardownJob};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    #[error("the message is not a teardown job")]
    Undecodable,
    #[error("the database failed: {0}")]
    Store(#[from] StoreError),
    #[error("object storage failed: {0}")]
    Blob(#[from] BlobError),
}

/// How long a teardown waits for the name's lock or the table's before it gives up this
/// attempt (SQS delivers the job again, and the sweep after that).
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
    /// `LOCK_TIMEOUT` unless configured (`SLUICE_TEARDOWN_LOCK_TIMEOUT_MS`).
    pub lock_timeout: Duration,
}

impl State {
    pub fn new(config: Config, db: Db, blob: Blob) -> Self {
        let lock_timeout = std::env::var("SLUICE_TEARDOWN_LOCK_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(LOCK_TIMEOUT, Duration::from_millis);
        Self { config, db, blob, lock_timeout }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        let sdk = sluice_blob::sdk_config().await;
        let db = Db::from_env(&sdk, 2).await?;
        let blob = Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
        Ok(Self::new(config, db, blob))
    }
}

/// Handles one SQS batch; only messages that should be delivered again are reported.
pub async fn handle(state: &State, event: sluice_queue::SqsEvent) -> SqsBatchResponse {
    sluice_queue::run_batch(event, 2, |message| async move {
        let job: TeardownJob = serde_json::from_str(message.body.as_deref().unwrap_or_default())
            .map_err(|_| TeardownError::Undecodable)?;
        teardown(state, &job).await
    })
    .await
}

/// Finishes one teardown: the database first, then the objects (an object left by a failed
/// delete is retried with the message; one already gone is not an error).
pub async fn teardown(state: &State, job: &TeardownJob) -> Result<(), TeardownError> {
    state.db.finish_teardown(job, state.lock_timeout).await?;
    // S3 deletes up to 1,000 keys per request; keys already gone count as deleted.
    for keys in job.objects.chunks(1000) {
        state.blob.delete_many(keys).await?;
    }
    tracing::info!(collection = %job.collection_name, kb_id = ?job.kb_id, dropped = job.drop_table,
        objects = job.objects.len(), "teardown finished");
    Ok(())
}
