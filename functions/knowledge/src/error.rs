//! The knowledge function's one error type, mapped once to HTTP.

use sluice_store::StoreError;
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
    #[error("{field}: {message}")]
    Invalid { field: &'static str, message: String },
    #[error("{field}: {message}")]
    Conflict { field: &'static str, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl KnowledgeError {
    /// The HTTP answer; a database failure is logged in full and answered without its text.
    pub fn into_api_error(self) -> ApiError {
        match self {
            Self::Unauthorized => ApiError::unauthorized(),
            Self::NoRoute => ApiError::new(404, "not_found", "no such route"),
            Self::NotFound => ApiError::not_found("Collection"),
            Self::Invalid { field, message } => {
                ApiError::new(400, "invalid_request", message.clone()).field(field, message)
            }
            Self::Conflict { field, message } => ApiError::new(409, "conflict", message.clone()).field(field, message),
            Self::Store(error) => {
                tracing::error!(error = %error, "database failure");
                ApiError::unavailable()
            }
        }
    }
}
