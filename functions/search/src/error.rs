//! The search function's one error type, mapped once to HTTP.

use sluice_store::StoreError;
use sluice_vault::VaultError;
use sluice_web::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("unauthorized")]
    Unauthorized,
    #[error("no such route")]
    NoRoute,
    /// An absent collection and another tenant's, worded alike.
    #[error("collection not found")]
    NotFound,
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// A field the request does not have.
    #[error("{field} is not a field of this request")]
    UnknownField { field: String },
    /// A well-formed request the service cannot honour as asked (an empty filter list).
    #[error("{field}: {message}")]
    Unprocessable { field: &'static str, message: String },
    /// A collection that cannot embed the query (no usable key, no service, a refusal).
    #[error("{message}")]
    Unusable { message: String },
    /// The collection's provider cannot embed a query now (rate limited, slow, down).
    #[error("{message}")]
    ProviderBusy { message: String, retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Vault(#[from] VaultError),
}

impl SearchError {
    /// The HTTP answer; a database or key-service failure is logged in full and answered
    /// without its text.
    pub fn into_api_error(self) -> ApiError {
        match self {
            Self::Unauthorized => ApiError::unauthorized(),
            Self::NoRoute => ApiError::new(404, "not_found", "no such route"),
            Self::NotFound => ApiError::not_found("Collection"),
            Self::Invalid { field, message } => ApiError::invalid_field(&field, message),
            Self::UnknownField { field } => {
                ApiError::new(400, "invalid_request", format!("{field} is not a field of this request"))
                    .field(&field, "not a field of this request")
            }
            Self::Unprocessable { field, message } => ApiError::unprocessable(field, message),
            Self::Unusable { message } => {
                ApiError::new(409, "collection_unusable", message.clone()).field("collections", message)
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
pub fn invalid(field: &str, message: impl Into<String>) -> SearchError {
    SearchError::Invalid { field: field.to_owned(), message: message.into() }
}

/// A `422` naming the field: an empty filter list would read as "match everything".
pub fn unprocessable(field: &'static str, message: &str) -> SearchError {
    SearchError::Unprocessable { field, message: message.to_owned() }
}
