//! The `search` function: `POST /rag/search` and `GET /rag/collections/{name}/filter-values`.
//! Every collection a search names is resolved through the access decision before the first
//! vector is read; one the caller cannot reach refuses the whole search with exactly the
//! answer a missing one gets. The scope (bases and their tenants) comes from the resolved
//! rows, never from the body.
//!
//! A search runs in one of three modes (`mode`): `vector` (the query's embedding against
//! the chunks'), `keyword` (BM25 over the chunks' words in PostgreSQL: a part number, a
//! name, an acronym or an exact phrase) or `hybrid`, the default, which runs both legs under
//! exactly the same scope and filters (`legs`) and fuses their rankings (`fusion`). A
//! collection with a `rerank` setting then has its first candidates reordered by its
//! reranker (`rerank`), unless the request says `rerank: false`; `answer` orders, groups and
//! explains the hits. The request is read once, into types, by `request`.

mod answer;
mod error;
pub mod fusion;
mod legs;
pub mod query_cache;
pub mod request;
pub mod rerank;
mod search;

pub use answer::Answer;
pub use error::SearchError;
pub use request::{Mode, Query};
pub use search::search_bases;

use lambda_http::{Body, Request, Response};
use serde_json::json;
use sluice_domain::access::Access;
use sluice_domain::{Caller, Config};
use sluice_store::{Db, KnowledgeBase, ScopeBase};
use sluice_vault::Vault;
use sluice_web::json_response;

/// Every route the search function serves: its router answers nothing else.
pub const ROUTES: &[&str] = &["POST /api/v1/rag/search", "GET /api/v1/rag/collections/{name}/filter-values"];

/// Everything a search needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub vault: Vault,
    pub http: reqwest::Client,
    /// The keyless model's query embeddings, kept for this sandbox's life (clones of the
    /// state share them).
    pub query_cache: std::sync::Arc<query_cache::QueryCache>,
    /// Reranks with Amazon Bedrock as the deployment's own role, in its region.
    pub bedrock: aws_sdk_bedrockagentruntime::Client,
    pub region: String,
}

impl State {
    /// The state over the SDK's clients; collections' keys are opened under `config.kms_key_id`.
    pub fn new(config: Config, db: Db, sdk: &aws_config::SdkConfig) -> Self {
        Self {
            vault: Vault::new(aws_sdk_kms::Client::new(sdk), config.kms_key_id.clone()),
            db,
            http: sluice_embed::http_client(),
            query_cache: std::sync::Arc::new(query_cache::QueryCache::new(query_cache::QUERY_CACHE_ENTRIES)),
            bedrock: aws_sdk_bedrockagentruntime::Client::new(sdk),
            region: sdk.region().map_or_else(|| "us-east-1".to_owned(), ToString::to_string),
            config,
        }
    }

    /// The state at a cold start, with the in-process model at hand (it embeds the keyless
    /// collections' queries).
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        sluice_embed::network::NetworkPolicy::from_env()?;
        sluice_embed::in_process::ensure_available()?;
        let sdk = sluice_blob::sdk_config().await;
        Ok(Self::new(config, Db::from_env(&sdk, 4).await?, &sdk))
    }
}

/// Serves one API Gateway request to the search function.
pub async fn handle(state: &State, request: Request) -> Response<Body> {
    let result = async {
        let caller = sluice_web::caller(&request).map_err(|_| SearchError::Unauthorized)?;
        let (method, path) = (request.method().as_str(), request.uri().path());
        match sluice_web::route_template(ROUTES, method, path).ok_or(SearchError::NoRoute)? {
            "POST /api/v1/rag/search" => search(state, &caller, &request).await,
            _ => {
                let name = path.trim_end_matches('/').rsplit('/').nth(1).unwrap_or_default();
                filter_values(state, &caller, name).await
            }
        }
    }
    .await;
    result.unwrap_or_else(|error| error.into_api_error().into_response())
}

/// `POST /rag/search`: the collections a caller names (an agent bound to bases names them
/// instead, `knowledge_base_ids`, and searches exactly their scope), resolved before any
/// vector is read.
async fn search(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, SearchError> {
    let asked = request::parse(sluice_web::body_bytes(request))?;
    let mut bases: Vec<KnowledgeBase> = Vec::new();
    for name in &asked.names {
        bases.push(state.db.reach_named(caller, name, Access::View).await?.ok_or(SearchError::NotFound)?.0);
    }
    for id in &asked.ids {
        bases.push(state.db.reach_base(caller, *id, Access::View).await?.ok_or(SearchError::NotFound)?.0);
    }
    if asked.query.rerank == Some(true) && bases.iter().all(|base| base.rerank.is_none()) {
        return Err(error::unprocessable("rerank", "none of the collections searched has a rerank setting"));
    }
    let answer = search_bases(state, query_cache::tenant_of(caller), bases, &asked.query).await?;
    Ok(json_response(200, &answer.to_json()))
}

/// `GET /rag/collections/{name}/filter-values`: the units present under the caller's scope.
async fn filter_values(state: &State, caller: &Caller, name: &str) -> Result<Response<Body>, SearchError> {
    let (base, _) = state.db.reach_named(caller, name, Access::View).await?.ok_or(SearchError::NotFound)?;
    let scope = [ScopeBase { kb_id: base.id, org_id: base.org_id }];
    let values = state.db.filter_values(name, &scope).await?;
    Ok(json_response(200, &json!({ "organizational_unit": values })))
}
