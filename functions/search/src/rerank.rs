//! A search's optional last stage: a collection's reranker (`rerank` setting) reorders its
//! first candidates in the fused order. The candidates go only to the collection's own
//! reranker, with the key stored for it. It gets one try within the search's time; when it
//! cannot answer the fused order stands, and the search says so (`reranked: false` and the
//! reason) rather than fail.

use crate::State;
use crate::fusion::{Fused, LegPlace};
use serde_json::{Value, json};
use sluice_domain::rerank::Rerank;
use sluice_store::KnowledgeBase;
use std::time::{Duration, Instant};

/// The longest one reranking may take: a hosted reranker answers 50 passages in well under
/// a second; past this the search answers without it, inside API Gateway's 29 seconds.
pub const RERANK_TIME_LIMIT: Duration = Duration::from_secs(5);

/// How one collection's reranking went.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub collection: String,
    pub reranked: bool,
    /// Why not, when not: a stable name (`sluice_rerank::RerankError::reason`,
    /// `sluice_rerank::target::Unusable::reason`).
    pub reason: Option<&'static str>,
    pub candidates: usize,
}

impl Outcome {
    pub fn to_json(&self) -> Value {
        json!({"collection": self.collection, "reranked": self.reranked, "reason": self.reason,
            "candidates": self.candidates})
    }
}

/// The setting a group of bases sharing a collection reranks with: the first that has one.
pub fn setting_of(group: &[KnowledgeBase]) -> Option<(&KnowledgeBase, Rerank)> {
    group.iter().find_map(|base| base.rerank_setting().map(|setting| (base, setting)))
}

/// What a candidate is read as: its document's title, a blank line, its text.
fn passage(fused: &Fused) -> String {
    match fused.hit.metadata.get("title").and_then(Value::as_str) {
        Some(title) => format!("{title}\n\n{}", fused.hit.content),
        None => fused.hit.content.clone(),
    }
}

/// Reorders the first `setting.candidates` of `fused` (best first) by `base`'s reranker,
/// each marked with its reranked place; the rest keep their fused order after them. By
/// `deadline` at the latest.
pub async fn rerank_candidates(
    state: &State,
    base: &KnowledgeBase,
    setting: &Rerank,
    query: &str,
    fused: &mut [Fused],
    deadline: Instant,
) -> Outcome {
    let count = fused.len().min(setting.candidates as usize);
    let mut outcome =
        Outcome { collection: base.collection_name.clone(), reranked: false, reason: None, candidates: count };
    let target = match sluice_rerank::target::target_for(&state.db, &state.vault, base.org_id, setting, &state.region)
        .await
    {
        Ok(Ok(target)) => target,
        Ok(Err(unusable)) => {
            outcome.reason = Some(unusable.reason());
            return outcome;
        }
        Err(error) => {
            tracing::warn!(error = %error, collection = %base.collection_name, "the reranking key could not be opened");
            outcome.reason = Some("key_service_unavailable");
            return outcome;
        }
    };
    let documents: Vec<String> = fused[..count].iter().map(passage).collect();
    let time_limit = deadline.saturating_duration_since(Instant::now()).min(RERANK_TIME_LIMIT);
    let scored = sluice_rerank::rerank(&state.http, &state.bedrock, &target, query, &documents, time_limit).await;
    match scored {
        Ok(scored) => {
            let mut reordered: Vec<Fused> = Vec::with_capacity(count);
            for (rank, place) in scored.iter().enumerate() {
                let mut candidate = fused[place.index].clone();
                candidate.rerank = Some(LegPlace { rank: rank + 1, score: place.score });
                reordered.push(candidate);
            }
            fused[..count].clone_from_slice(&reordered);
            outcome.reranked = true;
        }
        Err(error) => {
            tracing::warn!(error = %error, collection = %base.collection_name, "reranking skipped; the fused order stands");
            outcome.reason = Some(error.reason());
        }
    }
    outcome
}
