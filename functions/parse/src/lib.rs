//! The `parse` function: S3 tells it (through SQS) that an object was created or removed
//! under the upload prefix, and it judges the bytes that actually landed exactly as the
//! inline upload does — size, sniffed type, archive safety, extraction under the budget —
//! then marks the row `ready` or `rejected` (deleting a refused object). An object nobody
//! asked for is deleted. The same event twice, or two events for one key, end in one
//! state: a row is judged once per ETag of the bytes under its key.
//!
//! The same queue carries `parse-document` jobs for knowledge-base documents
//! (`documents.rs`): their text is extracted to `parsed/{id}` and handed to `ingest`.

mod documents;
mod error;
mod images;
mod llamaparse;
pub mod sync;

pub use error::ParseError;

use sluice_blob::{Blob, BlobError};
use sluice_domain::{BlockingPool, CHAT_UPLOAD_PREFIX, Config};
use sluice_extraction::Reader;
use sluice_queue::SqsBatchResponse;
use sluice_queue::jobs::{Dispatcher, DocumentJob, LandedJob};
use sluice_queue::s3::{Change, ObjectChange, S3Message};
use sluice_sources::Remote;
use sluice_store::{DOCUMENT_UPLOAD_PREFIX, Db, SourceEventJob, SyncRunJob};
use sluice_vault::Vault;
use uuid::Uuid;

/// Everything a batch needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
    pub pool: BlockingPool,
    /// Reads each file: the extract function for the file's owner, or a worker process.
    pub reader: Reader,
    pub dispatcher: Dispatcher,
    /// Opens `aws_credentials` secrets for sync sources.
    pub vault: Vault,
    /// Builds the clients sync sources read their buckets through.
    pub remote: Remote,
}

impl State {
    pub fn new(config: Config, db: Db, blob: Blob, reader: Reader, sdk: &aws_config::SdkConfig) -> Self {
        let pool = BlockingPool::new(config.file_io_max_workers);
        let dispatcher = Dispatcher::new(aws_sdk_sqs::Client::new(sdk), config.job_routes());
        let vault = Vault::new(aws_sdk_kms::Client::new(sdk), config.kms_key_id.clone());
        Self { config, db, blob, pool, reader, dispatcher, vault, remote: Remote::new(sdk) }
    }

    /// Builds the state from the environment, as the upload function does; parse workers
    /// are this binary, so its `main` calls `sluice_isolate::serve_if_worker` first.
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        let sdk = sluice_blob::sdk_config().await;
        let db = Db::from_env(&sdk, 4).await?;
        let blob = Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
        let reader = Reader::from_env(&sdk, blob.clone(), config.parse_max_memory_bytes)?;
        Ok(Self::new(config, db, blob, reader, &sdk))
    }
}

/// What a message must have left of its invocation to be started: reading a document and
/// describing its images (each up to the document limit), and a margin for the rest.
pub fn message_reserve(config: &Config) -> std::time::Duration {
    2 * config.document_parse_time_limit + std::time::Duration::from_secs(60)
}

/// Handles one SQS batch, invoked with `deadline` its timeout; only messages that should be
/// delivered again are reported. A message is started only with [`message_reserve`] left,
/// so the timeout never cuts one off (which would send the whole batch back).
pub async fn handle(state: &State, event: sluice_queue::SqsEvent, deadline: std::time::Instant) -> SqsBatchResponse {
    let start_by = deadline.checked_sub(message_reserve(&state.config)).unwrap_or_else(std::time::Instant::now);
    sluice_queue::run_batch_starting_by(event, state.config.file_io_max_workers, Some(start_by), |message| async move {
        let body = message.body.unwrap_or_default();
        handle_message(state, &body).await
    })
    .await
}

async fn handle_message(state: &State, body: &str) -> Result<(), ParseError> {
    // A document job or a sync run's page from the outbox, the sweep's word that bytes
    // landed unjudged, or else an S3 notification.
    if let Ok(job) = serde_json::from_str::<LandedJob>(body) {
        let change = ObjectChange {
            change: Change::Created,
            bucket: state.config.bucket.clone(),
            key: job.landed_key,
            size: None,
            etag: None,
            version_id: None,
        };
        return handle_change(state, &change).await;
    }
    if let Ok(job) = serde_json::from_str::<DocumentJob>(body) {
        return documents::parse_document(state, job).await;
    }
    if let Ok(job) = serde_json::from_str::<SyncRunJob>(body) {
        return sync::run_job(state, job).await;
    }
    if let Ok(job) = serde_json::from_str::<SourceEventJob>(body) {
        return sync::source_event(state, job).await;
    }
    match sluice_queue::s3::decode(body)? {
        S3Message::Test => Ok(()),
        S3Message::Changes(changes) => {
            for change in changes {
                handle_change(state, &change).await?;
            }
            Ok(())
        }
    }
}

async fn handle_change(state: &State, change: &ObjectChange) -> Result<(), ParseError> {
    if change.bucket == state.config.bucket && change.key.starts_with(DOCUMENT_UPLOAD_PREFIX) {
        return match change.change {
            Change::Created => documents::document_landed(state, &change.key).await,
            Change::Removed | Change::Other => Ok(()),
        };
    }
    if change.bucket != state.config.bucket {
        return sync::object_changed(state, change).await;
    }
    if !change.key.starts_with(CHAT_UPLOAD_PREFIX) {
        tracing::info!(bucket = %change.bucket, key = %change.key, "not an upload of this deployment; ignored");
        return Ok(());
    }
    match change.change {
        Change::Created => object_created(state, &change.key).await,
        Change::Removed => object_removed(state, &change.key).await,
        Change::Other => Ok(()),
    }
}

/// A rejection as stored: the stage, the reason code and what to do.
fn rejection(code: &str, message: &str) -> String {
    format!("parse: {code}: {message}")
}

async fn object_created(state: &State, key: &str) -> Result<(), ParseError> {
    let Some(landed) = state.db.landed_file(key).await? else {
        tracing::warn!(key, "an object no intent asked for; deleted");
        state.blob.delete(key).await?;
        return Ok(());
    };
    let file = landed.file;
    let declared = u64::try_from(file.size).unwrap_or_default();
    // The bytes under the key now; an ETag already judged means this event is a repeat.
    let fetched = match state.blob.fetch(key, declared).await {
        Ok(fetched) => fetched,
        Err(BlobError::NotFound) => return Ok(()),
        Err(BlobError::TooLarge { .. }) => {
            let etag = state.blob.head(key).await.ok().and_then(|h| h.etag).unwrap_or_default();
            if file.status != "pending" && landed.object_etag.as_deref() == Some(etag.as_str()) {
                return Ok(());
            }
            let reason =
                rejection("size_mismatch", &format!("more bytes landed than the {declared} declared; upload again"));
            return reject(state, &file.id, key, &reason, &etag).await;
        }
        Err(error) => return Err(error.into()),
    };
    let etag = fetched.etag.clone().unwrap_or_default();
    if file.status != "pending" && landed.object_etag.as_deref() == Some(etag.as_str()) {
        return Ok(());
    }
    // A row closed before any bytes were judged (its intent expired): nothing may use them.
    if file.status != "pending" && landed.object_etag.is_none() {
        tracing::warn!(id = %file.id, key, "bytes landed for a closed intent; deleted");
        state.blob.delete(key).await?;
        return Ok(());
    }
    if fetched.bytes.len() as u64 != declared {
        let message = format!("{} bytes landed where {declared} were declared; upload again", fetched.bytes.len());
        return reject(state, &file.id, key, &rejection("size_mismatch", &message), &etag).await;
    }
    let options = sluice_isolate::chat_options(&state.config);
    let tenant = sluice_extraction::Tenant::user(file.user_id);
    let inspected = state
        .reader
        .inspect(&state.pool, &tenant, &file.filename, Some(&file.mime_type), fetched.bytes, Some(key), &options)
        .await?;
    match inspected {
        Ok(content) => {
            if state.db.complete_upload(file.id, &content, &etag).await? {
                tracing::info!(id = %file.id, key, "upload ready");
            }
            Ok(())
        }
        Err(refusal) => {
            let reason = rejection(refusal.code.as_str(), &refusal.message);
            reject(state, &file.id, key, &reason, &etag).await
        }
    }
}

/// Rejects the row, then deletes the refused object (a crash in between leaves a rejected
/// row whose object the redelivered event deletes).
async fn reject(state: &State, id: &Uuid, key: &str, reason: &str, etag: &str) -> Result<(), ParseError> {
    if state.db.reject_upload(*id, reason, etag).await? {
        tracing::info!(id = %id, key, reason, "upload rejected");
    }
    state.blob.delete(key).await?;
    Ok(())
}

async fn object_removed(state: &State, key: &str) -> Result<(), ParseError> {
    let Some(landed) = state.db.landed_file(key).await? else { return Ok(()) };
    // A removal reported late, after bytes landed again under the key, changes nothing.
    match state.blob.head(key).await {
        Ok(_) => return Ok(()),
        Err(BlobError::NotFound) => {}
        Err(error) => return Err(error.into()),
    }
    if landed.file.status == "ready" {
        let reason = rejection("object_removed", "the stored file was removed; upload it again");
        state.db.mark_object_removed(landed.file.id, &reason).await?;
    }
    Ok(())
}
