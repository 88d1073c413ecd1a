//! What embedding is asked with and how it fails: the types the HTTP client, the in-process
//! model and the credentials that choose between them all share.

use std::time::Duration;

/// Where and how a collection embeds.
#[derive(Debug, Clone)]
pub struct Target {
    /// The endpoint's base URL, e.g. `https://api.openai.com/v1`; `/embeddings` is appended
    /// (`/api/embed` for Ollama's own API).
    pub base_url: String,
    pub model: String,
    pub dimensions: usize,
    pub api_key: Option<ApiKey>,
    pub api: EmbedApi,
}

/// The embeddings API an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmbedApi {
    /// `POST {base_url}/embeddings`, OpenAI's shape, which hosted providers and most servers
    /// (Ollama's `/v1` among them) speak.
    #[default]
    OpenAi,
    /// Ollama's own `POST {base_url}/api/embed`, asked never to cut an input short
    /// (`truncate: false`), so a chunk too long for the model fails instead of losing its end.
    Ollama,
}

impl EmbedApi {
    /// How an Ollama registered at `base_url` is asked: through its OpenAI-compatible API
    /// when the address ends in `/v1` (as an OpenAI base URL does), else through its own.
    pub fn of_ollama(base_url: &str) -> Self {
        if base_url.trim_end_matches('/').ends_with("/v1") { Self::OpenAi } else { Self::Ollama }
    }
}

/// An API key, opened; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(pub(crate) String);

impl ApiKey {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(..)")
    }
}

/// Why embedding failed. Each variant names what happened, never the endpoint's own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// 401/403: the key was refused.
    #[error("the provider refused the credential (HTTP {0})")]
    CredentialRefused(u16),
    /// 404: the endpoint does not serve the model.
    #[error("the endpoint does not serve the model")]
    ModelNotServed,
    /// Another 4xx: the request itself was refused.
    #[error("the provider refused the request (HTTP {0})")]
    RequestRefused(u16),
    /// Still rate limited after every retry; with the wait the provider last asked for.
    #[error("the provider kept rate limiting")]
    RateLimited { retry_after: Option<Duration> },
    /// Still failing with 5xx after every retry.
    #[error("the provider kept failing (HTTP {0})")]
    ProviderFailing(u16),
    /// Not reachable (connection, timeout), after every retry.
    #[error("the provider could not be reached")]
    Unreachable,
    /// An answer that is not the vectors asked for (count or width).
    #[error("the provider answered malformed vectors")]
    Malformed,
    /// The in-process model is not in this deployment (its layer or `SLUICE_MODEL_DIR`).
    #[error("the deployment's embedding model cannot be loaded")]
    ModelMissing,
}

impl EmbedError {
    /// Whether a later attempt may succeed: the message is worth redelivering.
    pub fn is_transient(&self) -> bool {
        // A missing model is the deployment's failure, never the document's: redelivered,
        // then dead-lettered (and alarmed), never recorded against the file.
        matches!(self, Self::RateLimited { .. } | Self::ProviderFailing(_) | Self::Unreachable | Self::ModelMissing)
    }

    /// A short, stable name for the error's type, for the stored message.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::CredentialRefused(_) => "CredentialRefused",
            Self::ModelNotServed => "ModelNotServed",
            Self::RequestRefused(_) => "RequestRefused",
            Self::RateLimited { .. } => "RateLimited",
            Self::ProviderFailing(_) => "ProviderFailing",
            Self::Unreachable => "ProviderUnreachable",
            Self::Malformed => "MalformedEmbeddings",
            Self::ModelMissing => "ModelMissing",
        }
    }

    /// What the user can do about it.
    pub fn advice(&self) -> &'static str {
        match self {
            Self::CredentialRefused(_) => {
                "check the collection's embedding credential (embedding_secret_id), then retry the document"
            }
            Self::ModelNotServed => {
                "the collection's endpoint does not serve its model; move the collection to an endpoint that does, then retry the document"
            }
            Self::RequestRefused(_) => {
                "the provider refused this document's text; retry it, or report it if it persists"
            }
            Self::RateLimited { .. } => "the provider is rate limiting this key; retry the document later",
            Self::ProviderFailing(_) | Self::Unreachable => {
                "the embedding provider is unavailable; retry the document later"
            }
            Self::Malformed => {
                "the provider answered vectors that do not fit the collection; check its model and endpoint"
            }
            Self::ModelMissing => {
                "this deployment's keyless embedding model is missing; ask its operator, then retry the document"
            }
        }
    }
}
