//! Pseudo-relevance feedback for the keyword leg (RM3): a question rarely uses every word
//! its best passages use ("lift" where they say "lift coefficient" and "airfoil"), so the
//! words that weigh most in the first ranking's best chunks join the query at a lower
//! weight, and the leg ranks again. Pure arithmetic over what the first ranking read.

use sluice_domain::config::KeywordFeedback;
use std::collections::BTreeMap;

/// One chunk of the first ranking: its BM25 score, its length in words (stop words out),
/// and each of its words with how often it occurs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FeedbackChunk {
    pub score: f64,
    pub length: f64,
    pub words: Vec<(String, f64)>,
}

/// The query's words and the added ones, each with its weight, sorted by word. The query's
/// own words weigh 1 (plus their share of the feedback, as RM3 mixes them); an added word
/// weighs its share of the feedback, scaled so the query keeps
/// `original_weight_percent` of the whole. With no feedback, the query as it was.
pub(crate) fn expanded_query(
    query: &[String],
    chunks: &[FeedbackChunk],
    feedback: KeywordFeedback,
) -> Vec<(String, f64)> {
    let mut weights: BTreeMap<String, f64> = query.iter().map(|word| (word.clone(), 1.0)).collect();
    let read: Vec<&FeedbackChunk> =
        chunks.iter().take(feedback.chunks).filter(|c| c.score > 0.0 && c.length > 0.0).collect();
    let total: f64 = read.iter().map(|c| c.score).sum();
    let kept = f64::from(feedback.original_weight_percent.clamp(1, 100)) / 100.0;
    if total <= 0.0 || query.is_empty() || kept >= 1.0 {
        return weights.into_iter().collect();
    }
    // Each word's share of the feedback: its share of each chunk, weighed by the chunk's score.
    let mut shares: BTreeMap<&str, f64> = BTreeMap::new();
    for chunk in &read {
        for (word, count) in &chunk.words {
            *shares.entry(word.as_str()).or_default() += chunk.score / total * count / chunk.length;
        }
    }
    let mut heaviest: Vec<(&str, f64)> = shares.into_iter().collect();
    heaviest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    heaviest.truncate(feedback.terms);
    let sum: f64 = heaviest.iter().map(|(_, share)| share).sum();
    // The query's words each weigh 1 where RM3 gives them `kept / n`; everything scales alike.
    let scale = (1.0 - kept) / kept * query.len() as f64 / sum;
    for (word, share) in heaviest {
        *weights.entry(word.to_owned()).or_default() += share * scale;
    }
    weights.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(score: f64, words: &[(&str, f64)]) -> FeedbackChunk {
        FeedbackChunk {
            score,
            length: words.iter().map(|(_, n)| n).sum(),
            words: words.iter().map(|(w, n)| ((*w).to_owned(), *n)).collect(),
        }
    }

    fn query(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_best_chunks_words_join_the_query_below_its_own() {
        let chunks = [
            chunk(3.0, &[("lift", 2.0), ("airfoil", 4.0), ("wing", 2.0)]),
            chunk(1.0, &[("lift", 1.0), ("drag", 1.0)]),
        ];
        let feedback = KeywordFeedback { chunks: 5, terms: 2, original_weight_percent: 50 };
        let expanded: BTreeMap<String, f64> =
            expanded_query(&query(&["lift"]), &chunks, feedback).into_iter().collect();
        assert_eq!(expanded.keys().collect::<Vec<_>>(), ["airfoil", "lift"], "the two heaviest words only");
        // airfoil: 3/4 × 4/8 = 0.375; lift: 3/4 × 2/8 + 1/4 × 1/2 = 0.3125; half the weight is the query's.
        let sum = 0.375 + 0.3125;
        assert!((expanded["airfoil"] - 0.375 / sum).abs() < 1e-9);
        assert!((expanded["lift"] - (1.0 + 0.3125 / sum)).abs() < 1e-9);
    }

    #[test]
    fn only_the_first_chunks_are_read_and_without_feedback_the_query_stands() {
        let chunks = [chunk(2.0, &[("pump", 1.0)]), chunk(1.0, &[("gasket", 5.0)])];
        let one = KeywordFeedback { chunks: 1, terms: 20, original_weight_percent: 50 };
        let expanded = expanded_query(&query(&["seal"]), &chunks, one);
        assert_eq!(expanded, vec![("pump".to_owned(), 1.0), ("seal".to_owned(), 1.0)]);
        assert_eq!(expanded_query(&query(&["seal"]), &[], one), vec![("seal".to_owned(), 1.0)]);
        let all_kept = KeywordFeedback { original_weight_percent: 100, ..one };
        assert_eq!(expanded_query(&query(&["seal"]), &chunks, all_kept), vec![("seal".to_owned(), 1.0)]);
    }
}
