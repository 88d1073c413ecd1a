//! The two legs of a search over one collection, run side by side under the same scope and
//! filters: the vector leg (the query embedded with the collection's own provider and key,
//! within the search's budget) and the keyword leg (BM25 in PostgreSQL). A keyword search
//! never pays for an embedding.

use crate::State;
use crate::error::SearchError;
use crate::request::{Mode, Query};
use sluice_embed::client::{EmbedError, RetryPolicy, embed};
use sluice_embed::credentials::target_for;
use sluice_store::{Hit, KnowledgeBase, ScopeBase};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A search's retries: few and short, inside the budget (ingest's are for a queue's patience).
const SEARCH_RETRY: RetryPolicy =
    RetryPolicy { attempts: 3, first_delay: Duration::from_millis(250), max_delay: Duration::from_secs(5) };

/// Each leg's ranking of `group`'s chunks (bases sharing one collection name, its table and
/// its model), `depth` deep or the configured depth of a hybrid leg, whichever is more:
/// the vector leg's and the keyword leg's, best first.
pub async fn run(
    state: &State,
    tenant: Uuid,
    group: &[KnowledgeBase],
    query: &Query,
    depth: i64,
    deadline: Instant,
) -> Result<(Vec<Hit>, Vec<Hit>), SearchError> {
    let name = &group[0].collection_name;
    let settings = state.config.search;
    let scope: Vec<ScopeBase> = group.iter().map(|b| ScopeBase { kb_id: b.id, org_id: b.org_id }).collect();
    let (text, filters) = (&query.text, &query.filters);
    let keyword = async {
        let depth = match query.mode {
            Mode::Vector => return Ok(Vec::new()),
            Mode::Keyword => depth,
            Mode::Hybrid => settings.keyword_depth.max(depth),
        };
        state.db.search_keyword(name, &scope, filters, text, depth, settings.keyword).await
    };
    let vector = async {
        let depth = match query.mode {
            Mode::Keyword => return Ok(Vec::new()),
            Mode::Vector => depth,
            Mode::Hybrid => settings.vector_depth.max(depth),
        };
        let embedded = embed_query(state, tenant, &group[0], text, deadline).await?;
        Ok::<_, SearchError>(state.db.search_chunks(name, &scope, filters, &embedded, depth).await?)
    };
    // Side by side: a hybrid search waits for the slower leg, not the sum.
    let (vector, keyword) = tokio::join!(vector, keyword);
    Ok((vector?, keyword?))
}

/// The `503` for a provider that cannot embed the query now: it names the collection's
/// provider, and `Retry-After` is the provider's own ask where it gave one (else 5 s).
fn provider_busy(provider: &str, collection: &str, what: &str, asked: Option<Duration>) -> SearchError {
    let seconds = asked.map_or(5, |wait| wait.as_secs_f64().ceil() as u64).max(1);
    SearchError::ProviderBusy {
        message: format!(
            "search unavailable: the {provider} embedding provider {what} for collection {collection}; retry after \
             {seconds} s"
        ),
        retry_after_secs: seconds,
    }
}

/// The query's embedding for `base`'s collection, within what is left of the budget: a
/// provider that cannot embed it now is Sluice's `503`; one that refuses it, a `409`.
async fn embed_query(
    state: &State,
    tenant: Uuid,
    base: &KnowledgeBase,
    query: &str,
    deadline: Instant,
) -> Result<Vec<f32>, SearchError> {
    let name = &base.collection_name;
    let target = match target_for(&state.db, &state.vault, base).await.map_err(key_service)? {
        Ok(target) => target,
        Err(refusal) => return Err(SearchError::Unusable { message: refusal }),
    };
    let provider = &base.embedding_provider;
    // A keyless model's vectors are kept per asking tenant (see `query_cache`).
    let cache_key =
        target.api_key.is_none().then(|| (tenant, format!("{} {}", target.base_url, target.model), query.to_owned()));
    if let Some(vector) = cache_key.as_ref().and_then(|key| state.query_cache.get(key)) {
        return Ok(vector);
    }
    let remaining = deadline.saturating_duration_since(Instant::now());
    let texts = [query.to_owned()];
    match tokio::time::timeout(remaining, embed(&state.http, &target, &texts, SEARCH_RETRY)).await {
        Ok(Ok(mut vectors)) if !vectors.is_empty() => {
            let vector = vectors.remove(0);
            if let Some(key) = cache_key {
                state.query_cache.put(key, vector.clone());
            }
            Ok(vector)
        }
        Ok(Ok(_)) => Err(SearchError::Unusable {
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
            Err(SearchError::Unusable {
                message: format!(
                    "search refused: the query could not be embedded for collection {name} ({}): {}",
                    error.type_name(),
                    error.advice()
                ),
            })
        }
    }
}

fn key_service(error: sluice_embed::credentials::ResolveError) -> SearchError {
    match error {
        sluice_embed::credentials::ResolveError::Store(error) => SearchError::Store(error),
        sluice_embed::credentials::ResolveError::KeyService(error) => SearchError::Vault(error),
    }
}
