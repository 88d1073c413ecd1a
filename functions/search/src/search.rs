//! A search of bases already resolved for the caller: one run of the legs per collection
//! name, fused, reranked where the collection asks, then answered.

use crate::answer::{Answer, answer};
use crate::error::SearchError;
use crate::fusion::{Fused, fuse};
use crate::request::Query;
use crate::{State, legs, rerank};
use sluice_store::KnowledgeBase;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long embedding a search's queries may take in all: API Gateway gives a request 29 s,
/// and the searches themselves and a cold start need the rest. A provider that is slower,
/// or asks to be left alone longer, is answered with Sluice's own `503` before the gateway
/// would answer its timeout.
const SEARCH_EMBED_BUDGET: Duration = Duration::from_secs(20);

/// The whole search's time: API Gateway gives a request 29 s.
const SEARCH_TIME_BUDGET: Duration = Duration::from_secs(25);

/// How many more candidates each leg reads when hits are grouped by document, so `top_k`
/// documents are found where one document holds many of the best chunks.
const GROUPED_DEPTH_FACTOR: i64 = 5;

/// The search of `bases` (already resolved for the caller: nothing here decides access) for
/// `tenant` (whose query cache it uses): each hit as `/rag/search` answers it, best first,
/// and how reranking went.
pub async fn search_bases(
    state: &State,
    tenant: Uuid,
    bases: Vec<KnowledgeBase>,
    query: &Query,
) -> Result<Answer, SearchError> {
    let started = Instant::now();
    // Grouped, each leg reads deeper: top_k counts documents, not chunks.
    let depth = if query.by_document { query.top_k.saturating_mul(GROUPED_DEPTH_FACTOR) } else { query.top_k };
    // One run per collection name: bases sharing a name share its table and its model.
    let mut by_name: BTreeMap<String, Vec<KnowledgeBase>> = BTreeMap::new();
    for base in bases {
        let group = by_name.entry(base.collection_name.clone()).or_default();
        if !group.iter().any(|b| b.id == base.id) {
            group.push(base);
        }
    }
    let mut hits: Vec<(String, Fused)> = Vec::new();
    let mut reranked: Vec<rerank::Outcome> = Vec::new();
    for (name, group) in &by_name {
        let (vector, keyword) = legs::run(state, tenant, group, query, depth, started + SEARCH_EMBED_BUDGET).await?;
        let mut fused = fuse(vector, keyword, state.config.search.fusion);
        if let (true, Some((base, setting))) = (query.rerank != Some(false), rerank::setting_of(group)) {
            let deadline = started + SEARCH_TIME_BUDGET;
            reranked.push(rerank::rerank_candidates(state, base, &setting, &query.text, &mut fused, deadline).await);
        }
        hits.extend(fused.into_iter().map(|f| (name.clone(), f)));
    }
    Ok(answer(hits, query, reranked))
}
