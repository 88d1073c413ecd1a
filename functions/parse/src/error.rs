//! The parse function's one error type. Every error here is transient — the message is
//! delivered again and, after `maxReceiveCount`, kept in the dead-letter queue — because a
//! file's own faults are not errors: they are recorded on its row and acknowledged.

use sluice_blob::BlobError;
use sluice_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("the message is not an S3 event notification: {0}")]
    Undecodable(#[from] sluice_queue::s3::DecodeError),
    #[error("the database failed: {0}")]
    Store(#[from] StoreError),
    #[error("object storage failed: {0}")]
    Blob(#[from] BlobError),
    #[error("the file could not be handed to a reader: {0}")]
    Read(#[from] sluice_extraction::ReadError),
    #[error("the blocking pool failed")]
    Blocking,
    #[error("a sync source's bucket could not be read: {0}")]
    Source(#[from] sluice_sources::SourceError),
    #[error("the cloud parser did not answer")]
    ParserUnavailable,
    #[error("the key service did not answer: {0}")]
    KeyService(String),
    #[error("the next job could not be sent: {0}")]
    Dispatch(String),
}

impl From<sluice_embed::credentials::ResolveError> for ParseError {
    fn from(error: sluice_embed::credentials::ResolveError) -> Self {
        match error {
            sluice_embed::credentials::ResolveError::Store(error) => Self::Store(error),
            sluice_embed::credentials::ResolveError::KeyService(error) => Self::KeyService(error.to_string()),
        }
    }
}
