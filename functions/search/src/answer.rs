//! A search's answer: its hits in one order across collections, grouped by document on
//! request, each with its metadata and, with `explain`, every stage's rank and score.

use crate::fusion::{Fused, LegPlace, best_first};
use crate::request::{Mode, Query};
use crate::rerank::Outcome;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

/// What a search answers: its hits, and how each collection's reranking went (empty when
/// none was asked).
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub results: Vec<Value>,
    pub rerank: Vec<Outcome>,
}

impl Answer {
    /// The route's body: `results`, and with reranking asked, `reranked` (every collection's
    /// was done) and `rerank` (each one's outcome).
    pub fn to_json(&self) -> Value {
        let mut body = json!({ "results": self.results });
        if !self.rerank.is_empty() {
            body["reranked"] = json!(self.rerank.iter().all(|o| o.reranked));
            body["rerank"] = self.rerank.iter().map(Outcome::to_json).collect();
        }
        body
    }
}

/// The answer to `query` from every collection's fused (and perhaps reranked) `hits`.
pub fn answer(mut hits: Vec<(String, Fused)>, query: &Query, reranked: Vec<Outcome>) -> Answer {
    let (mode, explain, by_document) = (query.mode, query.explain, query.by_document);
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
    answered.truncate(usize::try_from(query.top_k).unwrap_or(usize::MAX));
    let results = answered
        .into_iter()
        .map(|(collection, fused, cited)| {
            let score = order(&fused);
            let why = explain.then(|| {
                let place = |p: Option<LegPlace>| p.map(|p| json!({"rank": p.rank, "score": p.score}));
                json!({"vector": place(fused.vector), "keyword": place(fused.keyword), "fused": fused.fused,
                    "fused_rank": fused.fused_rank, "rerank": place(fused.rerank)})
            });
            let mut result = result(&collection, fused, score);
            if let Some(why) = why {
                result["explain"] = why;
            }
            if by_document {
                result["citations"] = Value::Array(cited);
            }
            result
        })
        .collect();
    Answer { results, rerank: reranked }
}

/// One hit as `/rag/search` answers it, its metadata carrying the chunk, base and filter values.
fn result(collection: &str, fused: Fused, score: f64) -> Value {
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
    json!({
        "collection": collection,
        "document_id": hit.document_id,
        "filename": hit.filename,
        "title": metadata.get("title"),
        "chunk_index": hit.chunk_index,
        "content": hit.content,
        "score": score,
        "metadata": metadata,
    })
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
