//! The knowledge function's one error type, mapped once to HTTP.

use sluice_store::StoreError;
use sluice_vault::VaultError;
use sluice_web::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("unauthorized")]
    Unauthorized,
    #[error("no such route")]
    NoRoute,
    /// An absent base and another tenant's, worded alike.
    #[error("collection not found")]
    NotFound,
    /// A resource other than a collection that is absent or not the caller's, worded alike.
    #[error("{0} not found")]
    Missing(&'static str),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A refusal naming several fields (the ingestion configuration's pair rule).
    #[error("{message}")]
    InvalidFields { message: String, fields: Vec<(String, String)> },
    /// A collection's own ingestion configuration that is not valid: `422`, as the reference
    /// product answers a body field it cannot take (an upload's override is a `400`).
    #[error("{message}")]
    InvalidConfig { message: String, fields: Vec<(String, String)> },
    /// The caller lacks a permission the route needs (not a question of one resource).
    #[error("{0}")]
    Forbidden(String),
    #[error("{field}: {message}")]
    Conflict { field: &'static str, message: String },
    /// A well-formed request the service cannot honour as asked (an empty filter list).
    #[error("{field}: {message}")]
    Unprocessable { field: &'static str, message: String },
    /// A collection that cannot embed right now (no usable key, no service, provider down).
    #[error("{field}: {message}")]
    Unusable { field: &'static str, message: String },
    /// The collection's provider cannot embed a query now (rate limited, slow, down).
    #[error("{message}")]
    ProviderBusy { message: String, retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Vault(#[from] VaultError),
}

impl KnowledgeError {
    /// The HTTP answer; a database or key-service failure is logged in full and answered
    /// without its text.
    pub fn into_api_error(self) -> ApiError {
        match self {
            Self::Unauthorized => ApiError::unauthorized(),
            Self::NoRoute => ApiError::new(404, "not_found", "no such route"),
            Self::NotFound => ApiError::not_found("Collection"),
            Self::Missing(what) => ApiError::not_found(what),
            Self::Invalid { field, message } => ApiError::invalid_field(&field, message),
            Self::InvalidFields { message, fields } => fields
                .into_iter()
                .fold(ApiError::new(400, "invalid_request", message), |error, (field, why)| error.field(&field, why)),
            Self::InvalidConfig { message, fields } => fields
                .into_iter()
                .fold(ApiError::new(422, "unprocessable", message), |error, (field, why)| error.field(&field, why)),
            Self::Forbidden(message) => ApiError::new(403, "forbidden", message),
            Self::Conflict { field, message } => ApiError::new(409, "conflict", message.clone()).field(field, message),
            Self::Unprocessable { field, message } => ApiError::unprocessable(field, message),
            Self::Unusable { field, message } => {
                ApiError::new(409, "collection_unusable", message.clone()).field(field, message)
            }
            Self::ProviderBusy { message, retry_after_secs } => {
                ApiError::provider_unavailable(message, retry_after_secs)
            }
            Self::Store(error) => ApiError::database_failure(&error),
            Self::Vault(error) => ApiError::key_service_failure(&error),
        }
    }
}

/// A `400` naming `field`.
pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> KnowledgeError {
    KnowledgeError::Invalid { field: field.into(), message: message.into() }
}
