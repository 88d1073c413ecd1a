//! The `knowledge` function: knowledge bases, collections, credentials and the embedding
//! catalog. Today it serves the catalog; the routes that read and write bases follow, each
//! through the one access decision in `sluice_domain::access`.

mod error;

pub use error::KnowledgeError;

use lambda_http::{Body, Request, RequestExt, Response};
use sluice_web::json_response;

#[derive(Debug, PartialEq, Eq)]
enum Route {
    EmbeddingModels,
}

fn route(method: &str, path: &str) -> Option<Route> {
    let path = path.strip_prefix("/api/v1/")?.trim_end_matches('/');
    match (method, path) {
        ("GET", "rag/embedding-models") => Some(Route::EmbeddingModels),
        _ => None,
    }
}

/// Serves one API Gateway request.
pub async fn handle(request: Request) -> Response<Body> {
    let result = (|| {
        sluice_web::caller(&request).map_err(|_| KnowledgeError::Unauthorized)?;
        match route(request.method().as_str(), request.uri().path()).ok_or(KnowledgeError::NoRoute)? {
            Route::EmbeddingModels => embedding_models(&request),
        }
    })();
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
        assert_eq!(route("GET", "/api/v1/kb"), None);
    }
}
