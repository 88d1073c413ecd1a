//! The `knowledge` function: knowledge bases, collections, credentials, keyless embedding
//! services and the embedding catalog. Every answer about a base goes through the one
//! access decision in `sluice_domain::access`. Search is the `search` function's
//! (`functions/search`): the hot path holds the model for query embeddings and scales on its
//! own; a management call never pays for the model.

mod bases;
mod collections;
mod embedding;
mod endpoints;
mod error;
mod fields;
mod reindex;
mod secrets;
mod sources;
pub use sources::{MAX_EVENT_SOURCES_PER_BUCKET, MAX_SOURCES_PER_BASE};

pub use error::KnowledgeError;

use lambda_http::{Body, Request, RequestExt, Response};
use sluice_domain::Config;
use sluice_embed::EndpointPolicy;
use sluice_queue::jobs::Dispatcher;
use sluice_store::Db;
use sluice_vault::Vault;
use sluice_web::json_response;
use uuid::Uuid;

/// Everything a request needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub vault: Vault,
    pub http: reqwest::Client,
    pub endpoint_policy: EndpointPolicy,
    /// Sends the teardown a delete committed (the sweep re-sends it if this send fails).
    pub dispatcher: Dispatcher,
    /// Reaches a sync source's bucket with the source's own credential, to check it before
    /// the source follows the bucket's events.
    pub remote: sluice_sources::Remote,
    /// The deployment's region: a Bedrock reranker must be offered in it.
    pub region: String,
}

impl State {
    /// The state over the SDK's clients; credentials are sealed under `config.kms_key_id`.
    pub fn new(config: Config, db: Db, sdk: &aws_config::SdkConfig) -> Self {
        let (kms, sqs) = (aws_sdk_kms::Client::new(sdk), aws_sdk_sqs::Client::new(sdk));
        Self {
            vault: Vault::new(kms, config.kms_key_id.clone()),
            remote: sluice_sources::Remote::new(sdk),
            db,
            http: sluice_embed::http_client(),
            endpoint_policy: EndpointPolicy { networks: sluice_embed::network::NetworkPolicy::current().clone() },
            dispatcher: Dispatcher::new(sqs, config.job_routes()),
            region: sdk.region().map_or_else(|| "us-east-1".to_owned(), ToString::to_string),
            config,
        }
    }

    /// The state at a cold start (the knowledge function never embeds: no model here).
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        sluice_embed::network::NetworkPolicy::from_env()?;
        let sdk = sluice_blob::sdk_config().await;
        Ok(Self::new(config, Db::from_env(&sdk, 4).await?, &sdk))
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Route {
    EmbeddingModels,
    OpenRouterModels,
    CreateBase,
    ListBases,
    Base(Uuid),
    PatchBase(Uuid),
    DeleteBase(Uuid),
    Grant(Uuid),
    Revoke(Uuid, Uuid),
    /// A grant route naming a user id that cannot exist.
    NoSuchGrant,
    Ingestion(Uuid),
    Documents(Uuid),
    Reindex(Uuid),
    /// A base route naming an id that cannot exist: answered like an absent base.
    NoSuchBase,
    ListCollections,
    CreateCollection(String),
    DropCollection(String),
    CollectionInfo(String),
    CreateSecret,
    ListSecrets,
    DeleteSecret(Uuid),
    /// A secret route naming an id that cannot exist.
    NoSuchSecret,
    CreateEndpoint,
    ListEndpoints,
    ListSources(Uuid),
    CreateSource(Uuid),
    Source(Uuid, Uuid),
    PatchSource(Uuid, Uuid),
    DeleteSource(Uuid, Uuid),
    RunSource(Uuid, Uuid),
    SourceLogs(Uuid, Uuid),
    /// A source route naming a base or source id that cannot exist.
    NoSuchSource,
    AllSyncLogs,
    AllSources,
    AnySource(Uuid),
    RepointSource(Uuid),
}

/// Every route this function serves (search's are `sluice_search::ROUTES`): its router answers
/// nothing else, and the test in
/// `tests/tests/contract.rs` holds the table against `docs/openapi.yaml` and the template.
pub const ROUTES: &[&str] = &[
    "GET /api/v1/rag/embedding-models",
    "GET /api/v1/rag/embedding-models/openrouter",
    "POST /api/v1/kb",
    "GET /api/v1/kb",
    "GET /api/v1/kb/{kb_id}",
    "PATCH /api/v1/kb/{kb_id}",
    "DELETE /api/v1/kb/{kb_id}",
    "POST /api/v1/kb/{kb_id}/grants",
    "DELETE /api/v1/kb/{kb_id}/grants/{user_id}",
    "GET /api/v1/kb/{kb_id}/ingestion",
    "GET /api/v1/kb/{kb_id}/documents",
    "POST /api/v1/kb/{kb_id}/reindex",
    "GET /api/v1/kb/{kb_id}/sync-sources",
    "POST /api/v1/kb/{kb_id}/sync-sources",
    "GET /api/v1/kb/{kb_id}/sync-sources/{source_id}",
    "PATCH /api/v1/kb/{kb_id}/sync-sources/{source_id}",
    "DELETE /api/v1/kb/{kb_id}/sync-sources/{source_id}",
    "POST /api/v1/kb/{kb_id}/sync-sources/{source_id}/sync",
    "GET /api/v1/kb/{kb_id}/sync-sources/{source_id}/logs",
    "GET /api/v1/rag/sync/logs",
    "GET /api/v1/rag/sync/sources",
    "GET /api/v1/rag/sync/sources/{source_id}",
    "PATCH /api/v1/rag/sync/sources/{source_id}",
    "GET /api/v1/rag/collections",
    "POST /api/v1/rag/collections/{name}",
    "DELETE /api/v1/rag/collections/{name}",
    "GET /api/v1/rag/collections/{name}/info",
    "POST /api/v1/secrets",
    "GET /api/v1/secrets",
    "DELETE /api/v1/secrets/{secret_id}",
    "POST /api/v1/embedding-endpoints",
    "GET /api/v1/embedding-endpoints",
];

fn route(method: &str, path: &str) -> Option<Route> {
    sluice_web::route_template(ROUTES, method, path)?;
    let path = path.strip_prefix("/api/v1/")?.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let base = |id: &str, found: fn(Uuid) -> Route| Uuid::parse_str(id).map_or(Route::NoSuchBase, found);
    let source = |kb: &str, id: &str, found: fn(Uuid, Uuid) -> Route| match (Uuid::parse_str(kb), Uuid::parse_str(id)) {
        (Ok(kb), Ok(id)) => found(kb, id),
        (Err(_), _) => Route::NoSuchBase,
        (Ok(_), Err(_)) => Route::NoSuchSource,
    };
    Some(match (method, segments.as_slice()) {
        ("GET", ["rag", "embedding-models"]) => Route::EmbeddingModels,
        ("GET", ["rag", "embedding-models", "openrouter"]) => Route::OpenRouterModels,
        ("POST", ["kb"]) => Route::CreateBase,
        ("GET", ["kb"]) => Route::ListBases,
        ("GET", ["kb", id]) => base(id, Route::Base),
        ("PATCH", ["kb", id]) => base(id, Route::PatchBase),
        ("DELETE", ["kb", id]) => base(id, Route::DeleteBase),
        ("POST", ["kb", id, "grants"]) => base(id, Route::Grant),
        ("DELETE", ["kb", kb, "grants", user]) => match (Uuid::parse_str(kb), Uuid::parse_str(user)) {
            (Ok(kb), Ok(user)) => Route::Revoke(kb, user),
            (Err(_), _) => Route::NoSuchBase,
            (Ok(_), Err(_)) => Route::NoSuchGrant,
        },
        ("GET", ["kb", id, "ingestion"]) => base(id, Route::Ingestion),
        ("GET", ["kb", id, "documents"]) => base(id, Route::Documents),
        ("POST", ["kb", id, "reindex"]) => base(id, Route::Reindex),
        ("GET", ["kb", id, "sync-sources"]) => base(id, Route::ListSources),
        ("POST", ["kb", id, "sync-sources"]) => base(id, Route::CreateSource),
        ("GET", ["kb", kb, "sync-sources", id]) => source(kb, id, Route::Source),
        ("PATCH", ["kb", kb, "sync-sources", id]) => source(kb, id, Route::PatchSource),
        ("DELETE", ["kb", kb, "sync-sources", id]) => source(kb, id, Route::DeleteSource),
        ("POST", ["kb", kb, "sync-sources", id, "sync"]) => source(kb, id, Route::RunSource),
        ("GET", ["kb", kb, "sync-sources", id, "logs"]) => source(kb, id, Route::SourceLogs),
        ("GET", ["rag", "sync", "logs"]) => Route::AllSyncLogs,
        ("GET", ["rag", "sync", "sources"]) => Route::AllSources,
        ("GET", ["rag", "sync", "sources", id]) => Uuid::parse_str(id).map_or(Route::NoSuchSource, Route::AnySource),
        ("PATCH", ["rag", "sync", "sources", id]) => {
            Uuid::parse_str(id).map_or(Route::NoSuchSource, Route::RepointSource)
        }
        ("GET", ["rag", "collections"]) => Route::ListCollections,
        ("POST", ["rag", "collections", name]) => Route::CreateCollection((*name).to_owned()),
        ("DELETE", ["rag", "collections", name]) => Route::DropCollection((*name).to_owned()),
        ("GET", ["rag", "collections", name, "info"]) => Route::CollectionInfo((*name).to_owned()),
        ("POST", ["secrets"]) => Route::CreateSecret,
        ("GET", ["secrets"]) => Route::ListSecrets,
        ("DELETE", ["secrets", id]) => Uuid::parse_str(id).map_or(Route::NoSuchSecret, Route::DeleteSecret),
        ("POST", ["embedding-endpoints"]) => Route::CreateEndpoint,
        ("GET", ["embedding-endpoints"]) => Route::ListEndpoints,
        _ => return None,
    })
}

/// Serves one API Gateway request.
pub async fn handle(state: &State, request: Request) -> Response<Body> {
    let result = async {
        let caller = sluice_web::caller(&request).map_err(|_| KnowledgeError::Unauthorized)?;
        match route(request.method().as_str(), request.uri().path()).ok_or(KnowledgeError::NoRoute)? {
            Route::EmbeddingModels => embedding_models(&request),
            Route::OpenRouterModels => openrouter_models(state, &request).await,
            Route::CreateBase => bases::create(state, &caller, &request).await,
            Route::ListBases => bases::list(state, &caller).await,
            Route::Base(id) => bases::get(state, &caller, id).await,
            Route::PatchBase(id) => bases::patch(state, &caller, id, &request).await,
            Route::DeleteBase(id) => bases::delete(state, &caller, id).await,
            Route::Grant(id) => bases::grant(state, &caller, id, &request).await,
            Route::Revoke(id, user) => bases::revoke(state, &caller, id, user).await,
            Route::NoSuchGrant => Err(KnowledgeError::Missing("Grant")),
            Route::Ingestion(id) => collections::ingestion(state, &caller, id).await,
            Route::Documents(id) => collections::documents(state, &caller, id, &request).await,
            Route::Reindex(id) => reindex::start(state, &caller, id).await,
            Route::NoSuchBase => Err(KnowledgeError::NotFound),
            Route::ListCollections => collections::list(state, &caller).await,
            Route::CreateCollection(name) => collections::create(state, &caller, &name, &request).await,
            Route::DropCollection(name) => collections::drop(state, &caller, &name).await,
            Route::CollectionInfo(name) => collections::info(state, &caller, &name).await,
            Route::CreateSecret => secrets::create(state, &caller, &request).await,
            Route::ListSecrets => secrets::list(state, &caller).await,
            Route::DeleteSecret(id) => secrets::delete(state, &caller, id).await,
            Route::NoSuchSecret => Err(KnowledgeError::Missing("Secret")),
            Route::CreateEndpoint => endpoints::create(state, &caller, &request).await,
            Route::ListEndpoints => endpoints::list(state, &caller).await,
            Route::ListSources(kb) => sources::list(state, &caller, kb).await,
            Route::CreateSource(kb) => sources::create(state, &caller, kb, &request).await,
            Route::Source(kb, id) => sources::get(state, &caller, kb, id).await,
            Route::PatchSource(kb, id) => sources::patch(state, &caller, kb, id, &request).await,
            Route::DeleteSource(kb, id) => sources::delete(state, &caller, kb, id).await,
            Route::RunSource(kb, id) => sources::sync(state, &caller, kb, id, &request).await,
            Route::SourceLogs(kb, id) => sources::logs(state, &caller, kb, id, &request).await,
            Route::NoSuchSource => Err(KnowledgeError::Missing("Sync source")),
            Route::AllSyncLogs => sources::all_logs(state, &caller, &request).await,
            Route::AllSources => sources::list_all(state, &caller).await,
            Route::AnySource(id) => sources::get_any(state, &caller, id).await,
            Route::RepointSource(id) => sources::repoint(state, &caller, id, &request).await,
        }
    }
    .await;
    result.unwrap_or_else(|error| error.into_api_error().into_response())
}

/// `GET /rag/embedding-models?provider=`: the catalog, or one provider's part of it.
fn embedding_models(request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let query = request.query_string_parameters();
    let provider = query.first("provider").filter(|p| !p.is_empty());
    let entries = sluice_domain::ingestion::catalog_entries(provider).ok_or_else(|| {
        let known: Vec<&str> = sluice_domain::catalog::providers().iter().map(|p| p.id.as_str()).collect();
        error::invalid(
            "provider",
            format!("unknown provider {:?}; the catalog has {}", provider.unwrap_or_default(), known.join(", ")),
        )
    })?;
    Ok(json_response(200, &serde_json::json!({ "models": entries })))
}

/// `GET /rag/embedding-models/openrouter?base_url=`: the catalog's OpenRouter models the
/// endpoint lists, or the whole list marked unconfirmed when it cannot be asked.
async fn openrouter_models(state: &State, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let query = request.query_string_parameters();
    let entries = sluice_domain::ingestion::catalog_entries(Some("openrouter")).unwrap_or_default();
    let Some(base_url) = query.first("base_url").filter(|u| !u.is_empty()) else {
        return Ok(json_response(200, &serde_json::json!({ "models": entries, "confirmed": false })));
    };
    state.endpoint_policy.check_openrouter(base_url).map_err(|why| error::invalid("base_url", why))?;
    Ok(match sluice_embed::openrouter_models(&state.http, base_url).await {
        sluice_embed::Listing::Served(served) => {
            let models: Vec<_> = entries.into_iter().filter(|e| served.contains(&e.model)).collect();
            json_response(200, &serde_json::json!({ "models": models, "confirmed": true }))
        }
        sluice_embed::Listing::Unconfirmed => {
            json_response(200, &serde_json::json!({ "models": entries, "confirmed": false }))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_in_the_table_is_served_and_nothing_else_is() {
        for (method, path) in sluice_web::route_examples(ROUTES) {
            let routed = route(&method, &path);
            let refused = matches!(
                routed,
                Some(Route::NoSuchBase | Route::NoSuchGrant | Route::NoSuchSecret | Route::NoSuchSource)
            );
            assert!(routed.is_some() && !refused, "{method} {path}: {routed:?}");
        }
        assert_eq!(route("PUT", "/api/v1/kb"), None);
        assert_eq!(route("GET", "/api/v1/rag/search"), None);
    }

    #[test]
    fn routes_are_decided_by_method_and_path() {
        assert_eq!(route("GET", "/api/v1/rag/embedding-models"), Some(Route::EmbeddingModels));
        assert_eq!(route("GET", "/api/v1/rag/embedding-models/"), Some(Route::EmbeddingModels));
        assert_eq!(route("POST", "/api/v1/rag/embedding-models"), None);
        assert_eq!(route("GET", "/api/v1/kb"), Some(Route::ListBases));
        assert_eq!(route("GET", "/api/v1/kb/not-a-uuid"), Some(Route::NoSuchBase));
        assert_eq!(route("DELETE", "/api/v1/kb"), None);
        let id = Uuid::new_v4();
        assert_eq!(route("PATCH", &format!("/api/v1/kb/{id}")), Some(Route::PatchBase(id)));
        assert_eq!(route("DELETE", "/api/v1/rag/collections/handbook"), Some(Route::DropCollection("handbook".into())));
        assert_eq!(route("GET", "/api/v1/rag/collections/x/info"), Some(Route::CollectionInfo("x".into())));
        assert_eq!(route("GET", "/api/v1/secrets"), Some(Route::ListSecrets));
        assert_eq!(route("PUT", "/api/v1/secrets"), None);
        let source = Uuid::new_v4();
        assert_eq!(
            route("POST", &format!("/api/v1/kb/{id}/sync-sources/{source}/sync")),
            Some(Route::RunSource(id, source))
        );
        assert_eq!(route("GET", &format!("/api/v1/kb/{id}/sync-sources/x/logs")), Some(Route::NoSuchSource));
        assert_eq!(route("GET", &format!("/api/v1/kb/x/sync-sources/{source}")), Some(Route::NoSuchBase));
        assert_eq!(route("GET", "/api/v1/rag/sync/logs"), Some(Route::AllSyncLogs));
        assert_eq!(route("DELETE", &format!("/api/v1/kb/{id}/grants/{source}")), Some(Route::Revoke(id, source)));
        assert_eq!(route("DELETE", &format!("/api/v1/kb/{id}/grants/me")), Some(Route::NoSuchGrant));
    }
}
