//! BM25 for the keyword leg, computed here from what PostgreSQL reads for each candidate
//! chunk: its length and the query's words it holds with their positions (its `tsvector`
//! filtered to those words, in the text form PostgreSQL writes). Scored in SQL instead, each
//! chunk ran a sub-query of its own (unnest the words, look each one's idf up, sum), which
//! cost as much again as finding the chunks (BENCHMARKS.md, "Search relevance").

use std::collections::HashMap;
use std::iter::Peekable;
use std::str::Chars;
use uuid::Uuid;

/// BM25's term-frequency saturation and length normalisation, at the values Lucene and
/// Elasticsearch ship.
pub(crate) const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// A chunk the keyword leg scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored {
    pub id: Uuid,
    pub score: f64,
}

/// BM25 for one query: each of its words' idf (already times the word's weight in the
/// query) and the scope's average chunk length.
pub(crate) struct Bm25<'a> {
    idfs: HashMap<&'a str, f64>,
    average_length: f64,
}

impl<'a> Bm25<'a> {
    /// `lexemes[i]` weighs `idfs[i]`.
    pub fn new(lexemes: &'a [String], idfs: &[f64], average_length: f64) -> Self {
        Self { idfs: lexemes.iter().map(String::as_str).zip(idfs.iter().copied()).collect(), average_length }
    }

    /// The score of a chunk of `length` words whose `tsvector`, filtered to the query's
    /// words, PostgreSQL wrote as `filtered`. A chunk with no length or no vector scores
    /// nothing, as SQL's `NULL` arithmetic did.
    pub fn score(&self, filtered: Option<&str>, length: Option<f64>) -> f64 {
        let (Some(filtered), Some(length)) = (filtered, length) else {
            return 0.0;
        };
        let normalised = BM25_K1 * (1.0 - BM25_B + BM25_B * length / self.average_length);
        lexeme_positions(filtered)
            .into_iter()
            .filter_map(|(lexeme, positions)| {
                let idf = self.idfs.get(lexeme.as_str())?;
                let tf = positions as f64;
                Some(idf * tf * (BM25_K1 + 1.0) / (tf + normalised))
            })
            .sum()
    }
}

/// The best `depth` of the chunks pushed, best first (ties by id, as SQL's `ORDER BY rank
/// DESC, id`), holding at most twice `depth` at any time however many are pushed.
pub(crate) struct Best {
    depth: usize,
    chunks: Vec<Scored>,
}

impl Best {
    pub fn new(depth: i64) -> Self {
        Self { depth: usize::try_from(depth).unwrap_or(0), chunks: Vec::new() }
    }

    pub fn push(&mut self, chunk: Scored) {
        self.chunks.push(chunk);
        if self.chunks.len() >= self.depth.max(1) * 2 {
            self.settle();
        }
    }

    pub fn into_sorted(mut self) -> Vec<Scored> {
        self.settle();
        self.chunks
    }

    fn settle(&mut self) {
        self.chunks.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        self.chunks.truncate(self.depth);
    }
}

/// Each lexeme of a `tsvector`'s text form (`'lift':3,17A 'wing':5`) with how many positions
/// it holds (none for a lexeme stored without positions).
pub(crate) fn lexeme_positions(text: &str) -> Vec<(String, usize)> {
    let mut lexemes = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let lexeme = read_quoted(&mut chars);
        let mut positions = 0;
        if chars.peek() == Some(&':') {
            chars.next();
            positions = 1;
            while let Some(c) = chars.next_if(|c| *c != ' ') {
                positions += usize::from(c == ',');
            }
        }
        lexemes.push((lexeme, positions));
    }
    lexemes
}

/// The rest of a quoted lexeme whose opening quote was read, the closing quote consumed: as
/// PostgreSQL writes `tsvector` and `tsquery` text, `''` is a quote and a backslash escapes
/// the next character.
pub(crate) fn read_quoted(chars: &mut Peekable<Chars<'_>>) -> String {
    let mut lexeme = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => lexeme.extend(chars.next()),
            '\'' if chars.peek() == Some(&'\'') => {
                chars.next();
                lexeme.push('\'');
            }
            '\'' => break,
            other => lexeme.push(other),
        }
    }
    lexeme
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsvector_s_lexemes_are_read_with_their_positions() {
        assert_eq!(lexeme_positions("'lift':3,17A,40 'wing':5A"), [("lift".to_owned(), 3), ("wing".to_owned(), 1)]);
        assert_eq!(
            lexeme_positions("'it''s':1 'a\\\\b':2,3 'bare'"),
            [("it's".to_owned(), 1), ("a\\b".to_owned(), 2), ("bare".to_owned(), 0)]
        );
        assert!(lexeme_positions("").is_empty());
    }

    #[test]
    fn bm25_saturates_with_repetition_and_favours_short_chunks() {
        let lexemes = ["lift".to_owned(), "wing".to_owned()];
        let bm25 = Bm25::new(&lexemes, &[2.0, 1.0], 100.0);
        // One occurrence in a chunk of average length: idf × (k1 + 1) / (1 + k1) = idf.
        assert!((bm25.score(Some("'lift':1A"), Some(100.0)) - 2.0).abs() < 1e-12);
        assert!((bm25.score(Some("'lift':1A 'wing':9A"), Some(100.0)) - 3.0).abs() < 1e-12);
        let twice = bm25.score(Some("'lift':1A,2A"), Some(100.0));
        assert!(twice > 2.0 && twice < 4.0, "a second occurrence adds less than the first");
        assert!(bm25.score(Some("'lift':1A"), Some(50.0)) > bm25.score(Some("'lift':1A"), Some(200.0)));
        assert_eq!(bm25.score(Some("'other':1A"), Some(100.0)), 0.0, "a word the query lacks weighs nothing");
        assert_eq!(bm25.score(None, Some(100.0)), 0.0);
        assert_eq!(bm25.score(Some("'lift':1A"), None), 0.0);
    }

    #[test]
    fn the_best_are_kept_in_order_within_a_bounded_list() {
        let id = |n: u128| Uuid::from_u128(n);
        let mut best = Best::new(3);
        for n in 0..1_000u128 {
            best.push(Scored { id: id(n), score: (n % 10) as f64 });
            assert!(best.chunks.len() < 6, "never more than twice the depth held");
        }
        let kept: Vec<(u128, f64)> = best.into_sorted().iter().map(|s| (s.id.as_u128(), s.score)).collect();
        assert_eq!(kept, [(9, 9.0), (19, 9.0), (29, 9.0)], "ties go to the lower id");
        assert!(Best::new(0).into_sorted().is_empty());
    }
}
