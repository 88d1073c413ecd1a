//! The search function: `POST /rag/search` and `GET /rag/collections/{name}/filter-values`
//! (its own Lambda, served from this crate by `handle`). Every collection a
//! search names is resolved through the access decision before the first vector is read;
//! one the caller cannot reach refuses the whole search with exactly the answer a missing
//! one gets. The scope (bases and their tenants) comes from the resolved rows, never from
//! the body.
//!
//! A search runs in one of three modes (`mode`): `vector` (the query's embedding against
//! the chunks'), `keyword` (PostgreSQL full-text search over the chunks' text: a part
//! number, a name, an acronym or an exact phrase) or `hybrid`, the default, which runs both
//! legs under exactly the same scope and filters and fuses their rankings by reciprocal rank
//! fusion. A collection with a `rerank` setting then has its first candidates reordered by
//! its reranker (`crate::rerank`), unless the request says `rerank: false`. `explain: true`
//! answers, per hit, each stage's rank and score.

use crate::collections::resolve;
use crate::error::{KnowledgeError, invalid};
use crate::fusion::{Fused, LegPlace, best_first, fuse};
use crate::{State, bases};
use lambda_http::{Body, Request, Response};
use serde_json::{Map, Value, json};
use sluice_domain::Caller;
use sluice_domain::access::Access;
use sluice_embed::client::{EmbedError, RetryPolicy, embed};
use sluice_embed::credentials::target_for;
use sluice_store::{KnowledgeBase, ScopeBase, SearchFilters};
use sluice_web::json_response;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Every route the search function serves: its router answers nothing else (the knowledge
/// function's are `crate::ROUTES`).
pub const ROUTES: &[&str] = &["POST /api/v1/rag/search", "GET /api/v1/rag/collections/{name}/filter-values"];

/// Serves one API Gateway request to the search function.
pub async fn handle(state: &State, request: Request) -> Response<Body> {
    let result = async {
        let caller = sluice_web::caller(&request).map_err(|_| KnowledgeError::Unauthorized)?;
        let (method, path) = (request.method().as_str(), request.uri().path());
        match sluice_web::route_template(ROUTES, method, path).ok_or(KnowledgeError::NoRoute)? {
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

pub const DEFAULT_TOP_K: i64 = 5;
pub const MAX_TOP_K: i64 = 100;
/// The longest query embedded.
const MAX_QUERY_CHARS: usize = 8_000;

/// A `422` naming the field: an empty filter list would read as "match everything".
fn unprocessable(field: &'static str, message: &str) -> KnowledgeError {
    KnowledgeError::Unprocessable { field, message: message.to_owned() }
}

fn string_list(filters: &Map<String, Value>, field: &'static str) -> Result<Option<Vec<String>>, KnowledgeError> {
    match filters.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) if items.is_empty() => {
            Err(unprocessable(field, "an empty list matches nothing; leave the filter out instead"))
        }
        Some(Value::Array(items)) if items.len() > MAX_FILTER_VALUES => {
            Err(invalid(field, format!("filters.{field} may list at most {MAX_FILTER_VALUES} values")))
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(|values| Some(distinct(values)))
            .ok_or_else(|| invalid(field, format!("filters.{field} must be a list of non-empty strings"))),
        Some(_) => Err(invalid(field, format!("filters.{field} must be a list of strings"))),
    }
}

/// The most collections (names and base ids together) one search reads.
pub const MAX_SEARCH_COLLECTIONS: usize = 20;
/// The most values one filter lists.
pub const MAX_FILTER_VALUES: usize = 100;

/// `values` without repeats, in first-seen order.
fn distinct<T: PartialEq>(values: Vec<T>) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(values.len());
    for value in values {
        if !kept.contains(&value) {
            kept.push(value);
        }
    }
    kept
}

fn date(filters: &Map<String, Value>, field: &'static str) -> Result<Option<time::Date>, KnowledgeError> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    match filters.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => time::Date::parse(text, &format)
            .map(Some)
            .map_err(|_| invalid(field, format!("filters.{field} must be a date, YYYY-MM-DD"))),
        Some(_) => Err(invalid(field, format!("filters.{field} must be a date, YYYY-MM-DD"))),
    }
}

/// The legacy `filter` string: exactly `parent_doc_id == "<uuid>"`, nothing else.
fn legacy_filter(text: &str) -> Option<Uuid> {
    let rest = text.trim().strip_prefix("parent_doc_id")?.trim_start().strip_prefix("==")?.trim();
    let quoted = rest.strip_prefix('"')?.strip_suffix('"')?;
    Uuid::parse_str(quoted).ok()
}

/// The filters of a search body: `filters` and the legacy `filter`, never both for one thing.
pub fn parse_filters(body: &Map<String, Value>) -> Result<SearchFilters, KnowledgeError> {
    let mut filters = SearchFilters::default();
    match body.get("filters") {
        None | Some(Value::Null) => {}
        Some(Value::Object(given)) => {
            const KNOWN: &[&str] =
                &["source", "document_type", "organizational_unit", "date_from", "date_to", "parent_doc_id"];
            if let Some(unknown) = given.keys().find(|k| !KNOWN.contains(&k.as_str())) {
                return Err(invalid("filters", format!("{unknown} is not a filter; filters are {}", KNOWN.join(", "))));
            }
            filters.source = string_list(given, "source")?;
            filters.document_type = string_list(given, "document_type")?;
            filters.organizational_unit = string_list(given, "organizational_unit")?;
            filters.date_from = date(given, "date_from")?;
            filters.date_to = date(given, "date_to")?;
            filters.parent_doc_id = match given.get("parent_doc_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(id)) => Some(
                    Uuid::parse_str(id)
                        .map_err(|_| invalid("parent_doc_id", "filters.parent_doc_id must be a UUID"))?,
                ),
                Some(_) => return Err(invalid("parent_doc_id", "filters.parent_doc_id must be a UUID")),
            };
        }
        Some(_) => return Err(invalid("filters", "filters must be an object")),
    }
    match body.get("filter") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) if text.trim().is_empty() => {}
        Some(Value::String(text)) => {
            let parent = legacy_filter(text).ok_or_else(|| {
                invalid("filter", "the filter string accepts only parent_doc_id == \"<id>\"; use filters for the rest")
            })?;
            if filters.parent_doc_id.is_some() {
                return Err(invalid("filter", "give parent_doc_id in filters or in filter, not both"));
            }
            filters.parent_doc_id = Some(parent);
        }
        Some(_) => return Err(invalid("filter", "filter must be a string")),
    }
    Ok(filters)
}

/// How long embedding a search's queries may take in all: API Gateway gives a request 29 s,
/// and the searches themselves and a cold start need the rest. A provider that is slower,
/// or asks to be left alone longer, is answered with Sluice's own `503` before the gateway
/// would answer its timeout.
const SEARCH_EMBED_BUDGET: std::time::Duration = std::time::Duration::from_secs(20);

/// A search's retries: few and short, inside the budget (ingest's are for a queue's patience).
const SEARCH_RETRY: RetryPolicy = RetryPolicy {
    attempts: 3,
    first_delay: std::time::Duration::from_millis(250),
    max_delay: std::time::Duration::from_secs(5),
};

/// The `503` for a provider that cannot embed the query now: it names the collection's
/// provider, and `Retry-After` is the provider's own ask where it gave one (else 5 s).
fn provider_busy(provider: &str, collection: &str, what: &str, asked: Option<std::time::Duration>) -> KnowledgeError {
    let seconds = asked.map_or(5, |wait| wait.as_secs_f64().ceil() as u64).max(1);
    KnowledgeError::ProviderBusy {
        message: format!(
            "search unavailable: the {provider} embedding provider {what} for collection {collection}; retry after \
             {seconds} s"
        ),
        retry_after_secs: seconds,
    }
}

/// Which legs a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Hybrid,
    Vector,
    Keyword,
}

impl Mode {
    /// The mode a name says: `hybrid`, `vector` or `keyword`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "hybrid" => Some(Self::Hybrid),
            "vector" => Some(Self::Vector),
            "keyword" => Some(Self::Keyword),
            _ => None,
        }
    }

    fn parse(body: &Map<String, Value>) -> Result<Self, KnowledgeError> {
        match body.get("mode") {
            None | Some(Value::Null) => Ok(Self::Hybrid),
            Some(Value::String(mode)) => Self::from_name(mode).ok_or_else(mode_refused),
            Some(_) => Err(mode_refused()),
        }
    }
}

fn mode_refused() -> KnowledgeError {
    invalid("mode", "mode is hybrid (the default), vector or keyword")
}

/// What a search asks, once read and checked.
#[derive(Debug, Clone)]
pub struct Query {
    pub text: String,
    pub mode: Mode,
    pub top_k: i64,
    pub filters: SearchFilters,
    pub explain: bool,
    /// One hit per document (`group_by: "document"`): its best chunk, the others that
    /// matched as its `citations`; `top_k` then counts documents.
    pub by_document: bool,
    /// Whether to rerank: `None` follows each collection's setting, `Some(false)` skips it.
    pub rerank: Option<bool>,
}

/// What a search answers: its hits, and how each collection's reranking went (empty when
/// none was asked).
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub results: Vec<Value>,
    pub rerank: Vec<crate::rerank::Outcome>,
}

impl Answer {
    /// The route's body: `results`, and with reranking asked, `reranked` (every collection's
    /// was done) and `rerank` (each one's outcome).
    pub fn to_json(&self) -> Value {
        let mut body = json!({ "results": self.results });
        if !self.rerank.is_empty() {
            body["reranked"] = json!(self.rerank.iter().all(|o| o.reranked));
            body["rerank"] = self.rerank.iter().map(crate::rerank::Outcome::to_json).collect();
        }
        body
    }
}

/// The whole search's time: API Gateway gives a request 29 s.
const SEARCH_TIME_BUDGET: std::time::Duration = std::time::Duration::from_secs(25);

/// How many more candidates each leg reads when hits are grouped by document, so `top_k`
/// documents are found where one document holds many of the best chunks.
const GROUPED_DEPTH_FACTOR: i64 = 5;

/// `POST /rag/search` `{query, collections, top_k?, filters?, filter?, mode?, explain?}`; an
/// agent bound to bases names them instead (`knowledge_base_ids`), and searches exactly
/// their scope.
pub async fn search(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let body = crate::fields::object(request)?;
    crate::fields::only(
        &body,
        &[
            "query",
            "collections",
            "knowledge_base_ids",
            "top_k",
            "filters",
            "filter",
            "mode",
            "explain",
            "group_by",
            "rerank",
        ],
    )?;
    let rerank = match body.get("rerank") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(flag)) => Some(*flag),
        Some(_) => return Err(invalid("rerank", "rerank must be true or false (absent: each collection's setting)")),
    };
    let by_document = match body.get("group_by") {
        None | Some(Value::Null) => false,
        Some(Value::String(group)) if group == "document" => true,
        Some(_) => return Err(invalid("group_by", "group_by is \"document\" (one hit per document) or absent")),
    };
    let mode = Mode::parse(&body)?;
    let explain = match body.get("explain") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err(invalid("explain", "explain must be true or false")),
    };
    let query = crate::fields::required_text(&body, "query")?;
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(invalid("query", format!("the query is longer than {MAX_QUERY_CHARS} characters")));
    }
    let top_k = match body.get("top_k") {
        None | Some(Value::Null) => DEFAULT_TOP_K,
        Some(value) => value
            .as_i64()
            .filter(|k| (1..=MAX_TOP_K).contains(k))
            .ok_or_else(|| invalid("top_k", format!("top_k must be 1 to {MAX_TOP_K}")))?,
    };
    let filters = parse_filters(&body)?;
    let query = Query { text: query, mode, top_k, filters, explain, by_document, rerank };

    // Every base the search reads, resolved before any vector is.
    let mut bases: Vec<KnowledgeBase> = Vec::new();
    let names = match body.get("collections") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| invalid("collections", "collections must be a list of names"))?,
        Some(_) => return Err(invalid("collections", "collections must be a list of names")),
    };
    let names = distinct(names);
    let ids = match body.get("knowledge_base_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(ids) => distinct(
            ids.as_array()
                .and_then(|items| {
                    items.iter().map(|v| v.as_str().and_then(|s| Uuid::parse_str(s).ok())).collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| invalid("knowledge_base_ids", "knowledge_base_ids must be a list of UUIDs"))?,
        ),
    };
    // Bounded before any is resolved: each costs a lookup, and each a query.
    if names.len() + ids.len() > MAX_SEARCH_COLLECTIONS {
        let field =
            if names.len() > MAX_SEARCH_COLLECTIONS || ids.is_empty() { "collections" } else { "knowledge_base_ids" };
        return Err(invalid(field, format!("a search reads at most {MAX_SEARCH_COLLECTIONS} collections and bases")));
    }
    for name in &names {
        bases.push(resolve(state, caller, name, Access::View).await?.0);
    }
    for id in ids {
        bases.push(bases::reach(state, caller, id, Access::View).await?.0);
    }
    if bases.is_empty() {
        return Err(invalid("collections", "name at least one collection"));
    }
    if rerank == Some(true) && bases.iter().all(|base| base.rerank.is_none()) {
        return Err(unprocessable("rerank", "none of the collections searched has a rerank setting"));
    }
    let answer = search_bases(state, crate::query_cache::tenant_of(caller), bases, &query).await?;
    Ok(json_response(200, &answer.to_json()))
}

/// The search of `bases` (already resolved for the caller: nothing here decides access) for
/// `tenant` (whose query cache it uses): each hit as `/rag/search` answers it, best first,
/// and how reranking went.
pub async fn search_bases(
    state: &State,
    tenant: Uuid,
    bases: Vec<KnowledgeBase>,
    query: &Query,
) -> Result<Answer, KnowledgeError> {
    let started = std::time::Instant::now();
    let Query { text: query, mode, top_k, filters, explain, by_document, rerank } = query;
    let (mode, top_k, explain, by_document) = (*mode, *top_k, *explain, *by_document);
    // Grouped, each leg reads deeper: top_k counts documents, not chunks.
    let depth = if by_document { top_k.saturating_mul(GROUPED_DEPTH_FACTOR) } else { top_k };
    // One query per collection name: bases sharing a name share its table and its model.
    let mut by_name: BTreeMap<String, Vec<KnowledgeBase>> = BTreeMap::new();
    for base in bases {
        let group = by_name.entry(base.collection_name.clone()).or_default();
        if !group.iter().any(|b| b.id == base.id) {
            group.push(base);
        }
    }
    let mut hits: Vec<(String, Fused)> = Vec::new();
    let mut reranked: Vec<crate::rerank::Outcome> = Vec::new();
    let deadline = started + SEARCH_EMBED_BUDGET;
    let settings = state.config.search;
    for (name, group) in &by_name {
        let scope: Vec<ScopeBase> = group.iter().map(|b| ScopeBase { kb_id: b.id, org_id: b.org_id }).collect();
        // The two legs run side by side: a hybrid search waits for the slower, not the sum.
        // A keyword search never pays for an embedding.
        let keyword = async {
            match mode {
                Mode::Vector => Ok(Vec::new()),
                Mode::Keyword => state.db.search_keyword(name, &scope, filters, query, depth, settings.keyword).await,
                Mode::Hybrid => {
                    let depth = settings.keyword_depth.max(depth);
                    state.db.search_keyword(name, &scope, filters, query, depth, settings.keyword).await
                }
            }
        };
        let vector = async {
            if mode == Mode::Keyword {
                return Ok(Vec::new());
            }
            let embedded = embed_query(state, tenant, &group[0], query, deadline).await?;
            let depth = if mode == Mode::Vector { depth } else { settings.vector_depth.max(depth) };
            Ok::<_, KnowledgeError>(state.db.search_chunks(name, &scope, filters, &embedded, depth).await?)
        };
        let (keyword, vector) = tokio::join!(keyword, vector);
        let mut fused = fuse(vector?, keyword?, settings.fusion);
        if let (true, Some((base, setting))) = (*rerank != Some(false), crate::rerank::setting_of(group)) {
            let deadline = started + SEARCH_TIME_BUDGET;
            let outcome = crate::rerank::rerank_candidates(state, base, &setting, query, &mut fused, deadline).await;
            reranked.push(outcome);
        }
        hits.extend(fused.into_iter().map(|f| (name.clone(), f)));
    }
    // A reranked candidate's score is its reranker's; otherwise a single leg's own score
    // orders it (comparable across collections of one leg), and a hybrid search's the fused
    // score. Reranked candidates come first, best first (across collections, rerankers' scores
    // are compared as they are), then the rest in their order.
    let order = |f: &Fused| match (f.rerank, mode) {
        (Some(place), _) => place.score,
        (None, Mode::Hybrid) => f.fused,
        (None, Mode::Vector | Mode::Keyword) => f.hit.score,
    };
    hits.sort_by(|a, b| b.1.rerank.is_some().cmp(&a.1.rerank.is_some()).then_with(|| best_first(&a.1, &b.1, order)));
    // Each hit with the citations it carries: grouped, each document's best chunk leads and
    // its other hits ride along; otherwise every hit stands alone, citing nothing.
    let mut answered: Vec<(String, Fused, Vec<Value>)> = Vec::new();
    let mut leader_of: BTreeMap<(String, Uuid), usize> = BTreeMap::new();
    for (collection, fused) in hits {
        let key = (collection.clone(), fused.hit.document_id);
        match leader_of.get(&key).filter(|_| by_document) {
            Some(&at) => answered[at].2.push(citation(&fused, order(&fused))),
            None => {
                leader_of.insert(key, answered.len());
                answered.push((collection, fused, Vec::new()));
            }
        }
    }
    answered.truncate(usize::try_from(top_k).unwrap_or(usize::MAX));
    let results: Vec<Value> = answered
        .into_iter()
        .map(|(collection, fused, cited)| {
            let score = order(&fused);
            let why = explain.then(|| {
                let place = |p: Option<LegPlace>| p.map(|p| json!({"rank": p.rank, "score": p.score}));
                json!({"vector": place(fused.vector), "keyword": place(fused.keyword), "fused": fused.fused,
                    "fused_rank": fused.fused_rank, "rerank": place(fused.rerank)})
            });
            let hit = fused.hit;
            let mut metadata = match hit.metadata {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            metadata.insert("kb_id".to_owned(), json!(hit.kb_id));
            metadata.insert("chunk_id".to_owned(), json!(hit.chunk_id));
            metadata.insert("source".to_owned(), json!(hit.source));
            metadata.insert("document_type".to_owned(), json!(hit.document_type));
            metadata.insert("organizational_unit".to_owned(), json!(hit.organizational_unit));
            metadata.insert("document_date".to_owned(), json!(hit.document_date.map(|d| d.to_string())));
            let mut result = json!({
                "collection": collection,
                "document_id": hit.document_id,
                "filename": hit.filename,
                "title": metadata.get("title"),
                "chunk_index": hit.chunk_index,
                "content": hit.content,
                "score": score,
                "metadata": metadata,
            });
            if let Some(why) = why {
                result["explain"] = why;
            }
            if by_document {
                result["citations"] = Value::Array(cited);
            }
            result
        })
        .collect();
    Ok(Answer { results, rerank: reranked })
}

/// Where a grouped document's further matching chunk is: its id and index, its score, and
/// its place in the document (offsets, pages, headings, slide or sheet) when known.
fn citation(fused: &Fused, score: f64) -> Value {
    let mut cited = json!({"chunk_id": fused.hit.chunk_id, "chunk_index": fused.hit.chunk_index, "score": score});
    for key in ["char_start", "char_end", "pages", "heading", "slide", "sheet"] {
        if let Some(value) = fused.hit.metadata.get(key) {
            cited[key] = value.clone();
        }
    }
    cited
}

/// The query's embedding for `base`'s collection, within what is left of the budget: a
/// provider that cannot embed it now is Sluice's `503`; one that refuses it, a `422`.
async fn embed_query(
    state: &State,
    tenant: Uuid,
    base: &KnowledgeBase,
    query: &str,
    deadline: std::time::Instant,
) -> Result<Vec<f32>, KnowledgeError> {
    let name = &base.collection_name;
    let target = match target_for(&state.db, &state.vault, base).await.map_err(key_service)? {
        Ok(target) => target,
        Err(refusal) => return Err(KnowledgeError::Unusable { field: "collections", message: refusal }),
    };
    let provider = &base.embedding_provider;
    // A keyless model's vectors are kept per asking tenant (see `query_cache`).
    let cache_key =
        target.api_key.is_none().then(|| (tenant, format!("{} {}", target.base_url, target.model), query.to_owned()));
    if let Some(vector) = cache_key.as_ref().and_then(|key| state.query_cache.get(key)) {
        return Ok(vector);
    }
    let remaining = deadline.saturating_duration_since(std::time::Instant::now());
    let texts = [query.to_owned()];
    match tokio::time::timeout(remaining, embed(&state.http, &target, &texts, SEARCH_RETRY)).await {
        Ok(Ok(mut vectors)) if !vectors.is_empty() => {
            let vector = vectors.remove(0);
            if let Some(key) = cache_key {
                state.query_cache.put(key, vector.clone());
            }
            Ok(vector)
        }
        Ok(Ok(_)) => Err(KnowledgeError::Unusable {
            field: "collections",
            message: format!(
                "search refused: the {provider} embedding provider answered no vector for collection {name}"
            ),
        }),
        Err(_) => Err(provider_busy(provider, name, "did not embed the query in time", None)),
        Ok(Err(EmbedError::RateLimited { retry_after })) => {
            Err(provider_busy(provider, name, "is rate limiting the query's embedding", retry_after))
        }
        Ok(Err(error)) if error.is_transient() => {
            tracing::warn!(collection = %name, error = %error, "query not embedded");
            Err(provider_busy(provider, name, "is not answering", None))
        }
        Ok(Err(error)) => {
            tracing::warn!(collection = %name, error = %error, "query not embedded");
            Err(KnowledgeError::Unusable {
                field: "collections",
                message: format!(
                    "search refused: the query could not be embedded for collection {name} ({}): {}",
                    error.type_name(),
                    error.advice()
                ),
            })
        }
    }
}

fn key_service(error: sluice_embed::credentials::ResolveError) -> KnowledgeError {
    match error {
        sluice_embed::credentials::ResolveError::Store(error) => KnowledgeError::Store(error),
        sluice_embed::credentials::ResolveError::KeyService(error) => KnowledgeError::Vault(error),
    }
}

/// `GET /rag/collections/{name}/filter-values`: the units present under the caller's scope.
pub async fn filter_values(state: &State, caller: &Caller, name: &str) -> Result<Response<Body>, KnowledgeError> {
    let (base, _) = resolve(state, caller, name, Access::View).await?;
    let scope = [ScopeBase { kb_id: base.id, org_id: base.org_id }];
    let values = state.db.filter_values(name, &scope).await?;
    Ok(json_response(200, &json!({ "organizational_unit": values })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(value: Value) -> Map<String, Value> {
        value.as_object().expect("object").clone()
    }

    #[test]
    fn the_mode_is_hybrid_unless_named() {
        assert_eq!(Mode::parse(&body(json!({}))).ok(), Some(Mode::Hybrid));
        assert_eq!(Mode::parse(&body(json!({"mode": "keyword"}))).ok(), Some(Mode::Keyword));
        assert!(Mode::parse(&body(json!({"mode": "bm25"}))).is_err());
    }

    #[test]
    fn filters_refuse_what_they_cannot_honour() {
        let id = Uuid::new_v4();
        let parsed = parse_filters(&body(json!({"filter": format!("parent_doc_id == \"{id}\"")}))).expect("legacy");
        assert_eq!(parsed.parent_doc_id, Some(id));
        for refused in [
            json!({"filter": "source == \"upload\""}),
            json!({"filter": format!("parent_doc_id == \"{id}\" and x"), }),
            json!({"filter": format!("parent_doc_id == \"{id}\""), "filters": {"parent_doc_id": id.to_string()}}),
            json!({"filters": {"colour": ["red"]}}),
            json!({"filters": {"date_from": "yesterday"}}),
            json!({"filters": {"source": "upload"}}),
        ] {
            assert!(matches!(parse_filters(&body(refused.clone())), Err(KnowledgeError::Invalid { .. })), "{refused}");
        }
        assert!(matches!(
            parse_filters(&body(json!({"filters": {"source": []}}))),
            Err(KnowledgeError::Unprocessable { field: "source", .. })
        ));
        let many: Vec<String> = (0..=MAX_FILTER_VALUES).map(|n| format!("unit {n}")).collect();
        assert!(parse_filters(&body(json!({"filters": {"organizational_unit": many}}))).is_err());
        let repeated =
            parse_filters(&body(json!({"filters": {"document_type": ["pdf", "pdf", "md", "pdf"]}}))).expect("valid");
        assert_eq!(repeated.document_type, Some(vec!["pdf".to_owned(), "md".to_owned()]));
        let full = parse_filters(&body(json!({"filters": {"source": ["upload"], "document_type": ["pdf", "md"],
            "organizational_unit": ["Ops"], "date_from": "2026-01-01", "date_to": "2026-12-31"}})))
        .expect("filters");
        assert_eq!(full.document_type, Some(vec!["pdf".to_owned(), "md".to_owned()]));
        assert_eq!(full.date_to.map(|d| d.to_string()), Some("2026-12-31".to_owned()));
    }
}
