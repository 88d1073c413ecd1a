//! The knowledge function's one error type, mapped once to HTTP.

use sluice_web::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("unauthorized")]
    Unauthorized,
    #[error("no such route")]
    NoRoute,
    #[error("{field}: {message}")]
    Invalid { field: &'static str, message: String },
}

impl KnowledgeError {
    pub fn into_api_error(self) -> ApiError {
        match self {
            Self::Unauthorized => ApiError::unauthorized(),
            Self::NoRoute => ApiError::new(404, "not_found", "no such route"),
            Self::Invalid { field, message } => {
                ApiError::new(400, "invalid_request", message.clone()).field(field, message)
            }
        }
    }
}
