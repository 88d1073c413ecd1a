//! Two legs' rankings made one: reciprocal rank fusion or a convex combination of scaled
//! scores, each chunk keeping its place in either leg for `explain` and the reranker.

use sluice_domain::config::Fusion;
use sluice_store::Hit;

/// One leg's place for a chunk: its rank (1-based) and the leg's own score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LegPlace {
    pub rank: usize,
    pub score: f64,
}

/// A chunk as the fusion sees it: its place in each leg, and the fused score.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub hit: Hit,
    pub vector: Option<LegPlace>,
    pub keyword: Option<LegPlace>,
    pub fused: f64,
    /// Its place in its collection's fused order (1-based).
    pub fused_rank: usize,
    /// Its place as its collection's reranker ordered it, when it was a reranked candidate.
    pub rerank: Option<LegPlace>,
}

/// The fusion of two rankings (each best first) as `fusion` says. Reciprocal rank fusion: a
/// chunk's score is the sum, over the legs that found it, of `1 / (k + rank)`. The convex
/// combination: each leg's scores scaled to 0–1 over that leg's own candidates (the best 1,
/// the last 0; a leg of one score gives it 1), a chunk's score their sum weighed
/// `vector_weight` and `1 − vector_weight`, a leg that did not find it adding nothing. A chunk
/// found by one leg keeps the other's place empty. On a tie the chunk the keyword leg found
/// goes first: it holds the query's own words, while the vector leg always has a nearest
/// chunk, meaningful or not (an exact part number's one chunk must not lose a coin toss to
/// it); then the smaller chunk id.
pub fn fuse(vector: Vec<Hit>, keyword: Vec<Hit>, fusion: Fusion) -> Vec<Fused> {
    let scale = |hits: &[Hit]| {
        let (low, high) =
            hits.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), hit| (l.min(hit.score), h.max(hit.score)));
        move |score: f64| if high > low { (score - low) / (high - low) } else { 1.0 }
    };
    let (vector_scale, keyword_scale) = (scale(&vector), scale(&keyword));
    let mut fused: Vec<Fused> = Vec::with_capacity(vector.len() + keyword.len());
    for (leg, hits) in [(0, vector), (1, keyword)] {
        for (i, hit) in hits.into_iter().enumerate() {
            let place = LegPlace { rank: i + 1, score: hit.score };
            let entry = match fused.iter_mut().position(|f| f.hit.chunk_id == hit.chunk_id) {
                Some(at) => &mut fused[at],
                None => {
                    fused.push(Fused { hit, vector: None, keyword: None, fused: 0.0, fused_rank: 0, rerank: None });
                    fused.last_mut().expect("just pushed")
                }
            };
            if leg == 0 {
                entry.vector = Some(place)
            } else {
                entry.keyword = Some(place)
            }
            entry.fused += match fusion {
                Fusion::Rrf { k } => 1.0 / (f64::from(k) + place.rank as f64),
                Fusion::Convex { vector_weight_percent } => {
                    let weight = f64::from(vector_weight_percent.min(100)) / 100.0;
                    if leg == 0 {
                        weight * vector_scale(place.score)
                    } else {
                        (1.0 - weight) * keyword_scale(place.score)
                    }
                }
            };
        }
    }
    fused.sort_by(|a, b| best_first(a, b, |f| f.fused));
    for (rank, entry) in fused.iter_mut().enumerate() {
        entry.fused_rank = rank + 1;
    }
    fused
}

/// The order of hits by `score`, best first; a tie broken as the fusion breaks it: the
/// chunk the keyword leg found (it holds the query's own words), then the smaller id.
pub(crate) fn best_first(a: &Fused, b: &Fused, score: impl Fn(&Fused) -> f64) -> std::cmp::Ordering {
    score(b)
        .total_cmp(&score(a))
        .then(b.keyword.is_some().cmp(&a.keyword.is_some()))
        .then(a.hit.chunk_id.cmp(&b.hit.chunk_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use uuid::Uuid;

    fn hit(id: u128, score: f64) -> Hit {
        Hit {
            chunk_id: Uuid::from_u128(id),
            kb_id: None,
            document_id: Uuid::from_u128(id),
            filename: None,
            chunk_index: 0,
            content: String::new(),
            score,
            source: None,
            document_type: None,
            organizational_unit: None,
            document_date: None,
            metadata: Value::Null,
        }
    }

    const RRF: Fusion = Fusion::Rrf { k: 60 };

    #[test]
    fn reciprocal_rank_fusion_rewards_what_both_legs_find() {
        // Vector: 1, 2, 3. Keyword: 3, 4. Chunk 3 is found by both and comes first.
        let fused = fuse(vec![hit(1, 0.9), hit(2, 0.8), hit(3, 0.7)], vec![hit(3, 0.5), hit(4, 0.4)], RRF);
        let order: Vec<u128> = fused.iter().map(|f| f.hit.chunk_id.as_u128()).collect();
        assert_eq!(order, [3, 1, 4, 2]);
        let first = &fused[0];
        assert_eq!(first.vector, Some(LegPlace { rank: 3, score: 0.7 }));
        assert_eq!(first.keyword, Some(LegPlace { rank: 1, score: 0.5 }));
        assert!((first.fused - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
        // Equal places in different legs tie; the keyword leg's chunk goes first.
        assert_eq!(fused[2].fused, fused[3].fused);
        assert!(fused[2].vector.is_none() && fused[3].keyword.is_none());
        // The same with one chunk each: the literal match wins the tie.
        let tie = fuse(vec![hit(9, 0.2)], vec![hit(10, 0.1)], RRF);
        assert_eq!(tie[0].hit.chunk_id.as_u128(), 10);
        assert!(fuse(Vec::new(), Vec::new(), RRF).is_empty());
    }

    #[test]
    fn the_convex_combination_weighs_each_legs_scaled_scores() {
        let convex = Fusion::Convex { vector_weight_percent: 60 };
        // Vector scores 0.9, 0.8, 0.5 scale to 1, 0.75, 0; keyword 12, 3 to 1, 0.
        let fused = fuse(vec![hit(1, 0.9), hit(2, 0.8), hit(3, 0.5)], vec![hit(3, 12.0), hit(4, 3.0)], convex);
        let scored: Vec<(u128, f64)> = fused.iter().map(|f| (f.hit.chunk_id.as_u128(), f.fused)).collect();
        let expected = [(1, 0.6), (2, 0.45), (3, 0.4), (4, 0.0)];
        for ((id, score), (want_id, want)) in scored.iter().zip(expected) {
            assert_eq!(*id, want_id, "{scored:?}");
            assert!((score - want).abs() < 1e-12, "{scored:?}");
        }
        assert_eq!(fused.iter().map(|f| f.fused_rank).collect::<Vec<_>>(), [1, 2, 3, 4]);
        // A leg of one chunk gives it the full weight; the literal match still wins a tie.
        let tie = fuse(vec![hit(9, 0.2)], vec![hit(10, 7.0)], Fusion::Convex { vector_weight_percent: 50 });
        assert_eq!(tie[0].hit.chunk_id.as_u128(), 10);
        assert_eq!(tie[0].fused, tie[1].fused);
    }
}
