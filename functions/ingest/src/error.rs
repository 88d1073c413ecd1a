//! The ingest function's one error type: everything here is transient (the message is
//! delivered again); a document's own failures are recorded on its row instead.

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("the message is not a document job")]
    Undecodable,
    #[error("the database failed: {0}")]
    Store(#[from] sluice_store::StoreError),
    #[error("object storage failed: {0}")]
    Blob(#[from] sluice_blob::BlobError),
    #[error("the vector table failed: {0}")]
    VectorTable(#[from] sluice_store::VectorTableError),
    #[error("the key could not be resolved: {0}")]
    Key(#[from] sluice_embed::credentials::ResolveError),
    #[error("embedding failed for now: {0}")]
    Embed(#[from] sluice_embed::client::EmbedError),
    #[error("the queue did not take the job back: {0}")]
    Requeue(#[from] sluice_queue::jobs::DispatchError),
}
