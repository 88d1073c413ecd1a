//! The upload function's one error type, mapped once to an HTTP answer.

use lambda_http::{Body, Response};
use sluice_blob::BlobError;
use sluice_formats::{Refusal, RefusalCode};
use sluice_store::StoreError;
use sluice_web::ApiError;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("no valid caller identity")]
    Unauthorized,
    #[error("no such route")]
    NoRoute,
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("invalid {field}: {message}")]
    Invalid { field: &'static str, message: String },
    #[error("the file is larger than {limit_bytes} bytes")]
    TooLarge { limit_bytes: u64 },
    #[error("the declared size is larger than {limit_bytes} bytes")]
    DeclaredTooLarge { limit_bytes: u64 },
    #[error("file refused: {}", .0.message)]
    Refused(Refusal),
    /// A presigned upload's declaration refused; the field is the one at fault.
    #[error("declaration refused: {}", .1.message)]
    DeclarationRefused(&'static str, Refusal),
    #[error("the document is larger than {limit_bytes} bytes")]
    DocumentTooLarge { limit_bytes: u64 },
    /// Larger than a direct upload carries, though within the ceiling: the presigned path.
    #[error("the file is larger than the {limit_bytes} bytes a direct upload carries")]
    UsePresignedUpload { limit_bytes: u64, route: &'static str },
    #[error("the declared document size is larger than {limit_bytes} bytes")]
    DeclaredDocumentTooLarge { limit_bytes: u64 },
    #[error("{field}: {message}")]
    Conflict { field: &'static str, message: String },
    /// A refusal naming several fields (the chunking override's pair rule).
    #[error("{message}")]
    InvalidFields { message: String, fields: Vec<(String, String)> },
    #[error("files cannot be attached: {0:?}")]
    NotAttachable(Vec<Uuid>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error("blocking work failed")]
    Blocking,
    #[error(transparent)]
    Read(#[from] sluice_extraction::ReadError),
}

impl UploadError {
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid { field, message: message.into() }
    }

    /// The HTTP answer. Infrastructure failures are logged in full and answered without
    /// their text, which can name hosts, buckets or keys.
    pub fn into_api_error(self) -> ApiError {
        match self {
            Self::Unauthorized => ApiError::unauthorized(),
            Self::NoRoute => ApiError::new(404, "not_found", "no such route"),
            Self::NotFound(what) => ApiError::not_found(capitalised(what).as_str()),
            Self::Invalid { field, message } => {
                ApiError::new(400, "invalid_request", message.clone()).field(field, message)
            }
            Self::TooLarge { limit_bytes } => {
                let mb = limit_bytes / (1024 * 1024);
                ApiError::new(413, "file_too_large", format!("the file is larger than the {mb} MB limit"))
                    .field("file", format!("larger than {mb} MB (CHAT_MAX_UPLOAD_SIZE_MB)"))
                    .detail("limit_bytes", limit_bytes)
            }
            Self::UsePresignedUpload { limit_bytes, route } => {
                let mb = limit_bytes / (1024 * 1024);
                let advice =
                    format!("larger than the {mb} MB a direct upload carries: upload it with {route} (presigned)");
                ApiError::new(413, "file_too_large", format!("the file is {advice}"))
                    .field("file", advice)
                    .detail("reason", "use_presigned_upload")
                    .detail("upload_route", route)
                    .detail("limit_bytes", limit_bytes)
            }
            Self::DeclaredTooLarge { limit_bytes } => {
                let mb = limit_bytes / (1024 * 1024);
                ApiError::new(413, "file_too_large", format!("the declared size is over the {mb} MB limit"))
                    .field("size", format!("larger than {mb} MB (CHAT_MAX_UPLOAD_SIZE_MB)"))
                    .detail("limit_bytes", limit_bytes)
            }
            Self::DeclarationRefused(field, refusal) => {
                ApiError::new(415, "unsupported_media_type", refusal.message.clone())
                    .field(field, refusal.message)
                    .detail("reason", refusal.code.as_str())
            }
            Self::Refused(refusal) => {
                // An empty file or an unsafe container is a bad request; a wrong type is 415.
                let status = match refusal.code {
                    RefusalCode::EmptyFile | RefusalCode::UnsafeContainer(_) => 400,
                    _ => 415,
                };
                let code = if status == 400 { "invalid_request" } else { "unsupported_media_type" };
                ApiError::new(status, code, refusal.message.clone())
                    .field("file", refusal.message)
                    .detail("reason", refusal.code.as_str())
            }
            Self::DocumentTooLarge { limit_bytes } => {
                let mb = limit_bytes / (1024 * 1024);
                ApiError::new(413, "file_too_large", format!("the document is larger than the {mb} MB limit"))
                    .field("file", format!("larger than {mb} MB (MAX_UPLOAD_SIZE_MB)"))
                    .detail("limit_bytes", limit_bytes)
            }
            Self::DeclaredDocumentTooLarge { limit_bytes } => {
                let mb = limit_bytes / (1024 * 1024);
                ApiError::new(413, "file_too_large", format!("the declared size is over the {mb} MB limit"))
                    .field("size", format!("larger than {mb} MB (MAX_UPLOAD_SIZE_MB)"))
                    .detail("limit_bytes", limit_bytes)
            }
            Self::Conflict { field, message } => ApiError::new(409, "conflict", message.clone()).field(field, message),
            Self::InvalidFields { message, fields } => fields
                .into_iter()
                .fold(ApiError::new(400, "invalid_request", message), |error, (field, why)| error.field(&field, why)),
            Self::NotAttachable(ids) => {
                let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
                ApiError::new(404, "not_found", "some files are not your own unlinked, ready files")
                    .field("file_ids", format!("cannot be attached: {}", ids.join(", ")))
                    .detail("file_ids", ids)
            }
            Self::Store(error) => ApiError::database_failure(&error),
            Self::Blob(error) => {
                tracing::error!(error = ?error, "object storage failure");
                ApiError::unavailable()
            }
            Self::Blocking => {
                tracing::error!("blocking work panicked or was cancelled");
                ApiError::internal()
            }
            Self::Read(error) => {
                tracing::error!(error = %error, "the file could not be handed to a reader");
                ApiError::unavailable()
            }
        }
    }

    pub fn into_response(self) -> Response<Body> {
        self.into_api_error().into_response()
    }
}

fn capitalised(what: &str) -> String {
    let mut chars = what.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}
