//! The `knowledge` function: knowledge bases, collections, credentials and the embedding
//! catalog. It serves the catalog and the bases (create with the collection-name claim,
//! list, read, grant), each answer through the one access decision in
//! `sluice_domain::access`.

mod bases;
mod error;

pub use error::KnowledgeError;

use lambda_http::{Body, Request, RequestExt, Response};
use sluice_domain::Config;
use sluice_store::Db;
use sluice_web::json_response;
use uuid::Uuid;

/// Everything a request needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
}

impl State {
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Self { config: Config::from_env()?, db: Db::connect_from_env(4).await? })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    EmbeddingModels,
    CreateBase,
    ListBases,
    Base(Uuid),
    Grant(Uuid),
    /// A base route naming an id that cannot exist: answered like an absent base.
    NoSuchBase,
}

fn route(method: &str, path: &str) -> Option<Route> {
    let path = path.strip_prefix("/api/v1/")?.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let base = |id: &str, found: fn(Uuid) -> Route| Uuid::parse_str(id).map_or(Route::NoSuchBase, found);
    Some(match (method, segments.as_slice()) {
        ("GET", ["rag", "embedding-models"]) => Route::EmbeddingModels,
        ("POST", ["kb"]) => Route::CreateBase,
        ("GET", ["kb"]) => Route::ListBases,
        ("GET", ["kb", id]) => base(id, Route::Base),
        ("POST", ["kb", id, "grants"]) => base(id, Route::Grant),
        _ => return None,
    })
}

/// Serves one API Gateway request.
pub async fn handle(state: &State, request: Request) -> Response<Body> {
    let result = async {
        let caller = sluice_web::caller(&request).map_err(|_| KnowledgeError::Unauthorized)?;
        match route(request.method().as_str(), request.uri().path()).ok_or(KnowledgeError::NoRoute)? {
            Route::EmbeddingModels => embedding_models(&request),
            Route::CreateBase => bases::create(state, &caller, &request).await,
            Route::ListBases => bases::list(state, &caller).await,
            Route::Base(id) => bases::get(state, &caller, id).await,
            Route::Grant(id) => bases::grant(state, &caller, id, &request).await,
            Route::NoSuchBase => Err(KnowledgeError::NotFound),
        }
    }
    .await;
    result.unwrap_or_else(|error| error.into_api_error().into_response())
}

/// `GET /rag/embedding-models?provider=`: the catalog, or one provider's part of it.
fn embedding_models(request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let query = request.query_string_parameters();
    let provider = query.first("provider").filter(|p| !p.is_empty());
    let entries = sluice_domain::catalog::entries(provider).ok_or_else(|| {
        let known: Vec<&str> = sluice_domain::catalog::providers().iter().map(|p| p.id.as_str()).collect();
        KnowledgeError::Invalid {
            field: "provider",
            message: format!(
                "unknown provider {:?}; the catalog has {}",
                provider.unwrap_or_default(),
                known.join(", ")
            ),
        }
    })?;
    Ok(json_response(200, &serde_json::json!({ "models": entries })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_decided_by_method_and_path() {
        assert_eq!(route("GET", "/api/v1/rag/embedding-models"), Some(Route::EmbeddingModels));
        assert_eq!(route("GET", "/api/v1/rag/embedding-models/"), Some(Route::EmbeddingModels));
        assert_eq!(route("POST", "/api/v1/rag/embedding-models"), None);
        assert_eq!(route("GET", "/api/v1/kb"), Some(Route::ListBases));
        assert_eq!(route("GET", "/api/v1/kb/not-a-uuid"), Some(Route::NoSuchBase));
        assert_eq!(route("DELETE", "/api/v1/kb"), None);
    }
}
