//! How many tokens a chunk is for the model that embeds it, to size chunks the model reads
//! whole and to count any it cuts. all-MiniLM-L6-v2's own tokenizer counts exactly where the
//! deployment carries it (`SLUICE_MODEL_DIR`); for any other model (whose tokenizer is the
//! provider's) the count is an estimate that leans high, so chunks sized by it fit: a token
//! for every four letters of a word (at least one a word), one for every two digits of a
//! number, one for each other ASCII sign, one for each letter of the scripts written in two
//! UTF-8 bytes (accented Latin, Greek, Cyrillic, Arabic) and two for each character beyond
//! (CJK, whose characters byte-level tokenizers often split), and two special tokens.

use sluice_domain::catalog::Model;
use sluice_minilm::TokenCounter;
use std::sync::OnceLock;

/// The embedding space of the model whose tokenizer this build carries.
const MINILM_SPACE: &str = "sentence-transformers/all-minilm-l6-v2";

static COUNTER: OnceLock<Option<TokenCounter>> = OnceLock::new();

fn minilm_counter() -> Option<&'static TokenCounter> {
    COUNTER
        .get_or_init(|| {
            let dir = std::env::var("SLUICE_MODEL_DIR").ok()?;
            TokenCounter::load(std::path::Path::new(&dir))
                .inspect_err(
                    |error| tracing::warn!(%error, "the tokenizer cannot be loaded; token counts are estimated"),
                )
                .ok()
        })
        .as_ref()
}

/// The tokens `text` is for `model`, special tokens included.
pub fn count(model: &Model, text: &str) -> usize {
    if model.space == MINILM_SPACE
        && let Some(counted) = minilm_counter().and_then(|counter| counter.count(text).ok())
    {
        return counted;
    }
    estimate(text)
}

/// A high-leaning estimate for a tokenizer this build does not carry.
pub fn estimate(text: &str) -> usize {
    #[derive(PartialEq)]
    enum Run {
        None,
        Letters,
        Digits,
    }
    let (mut tokens, mut run, mut length) = (2usize, Run::None, 0usize);
    let close = |run: &Run, length: usize| match run {
        Run::Letters => length.div_ceil(4),
        Run::Digits => length.div_ceil(2),
        Run::None => 0,
    };
    for c in text.chars() {
        let kind = if c.is_ascii_alphabetic() {
            Run::Letters
        } else if c.is_ascii_digit() {
            Run::Digits
        } else {
            Run::None
        };
        if kind != run {
            tokens += close(&run, length);
            (run, length) = (kind, 0);
        }
        length += 1;
        if run == Run::None && !c.is_ascii_whitespace() {
            tokens += if c.len_utf8() <= 2 { 1 } else { 2 };
        }
    }
    tokens + close(&run, length)
}

/// Whether `model` reads `text` whole.
pub fn read_whole(model: &Model, text: &str) -> bool {
    count(model, text) <= model.max_input_tokens as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_words_numbers_signs_and_scripts() {
        assert_eq!(estimate(""), 2);
        assert_eq!(estimate("abcd"), 3);
        assert_eq!(estimate("abcde"), 4);
        assert_eq!(estimate("a b c"), 5, "every word is a token at least");
        assert_eq!(estimate("2023-04-15"), 2 + 2 + 1 + 1 + 1 + 1);
        assert_eq!(estimate("żółć"), 6, "a letter of a two-byte script is a token");
        assert_eq!(estimate("雪雪"), 6);
    }

    #[test]
    fn the_estimate_leans_high_for_prose_and_for_tables() {
        // English prose runs at about four characters a token in the common tokenizers.
        let prose = "The river ferry stops running when the water level rises above four metres.";
        assert!(estimate(prose) * 4 >= prose.len(), "{}", estimate(prose));
        // Numbers and signs run at two characters a token or fewer.
        let table = "| 12.5 | 0.031 | 4,200 | -7.25e-3 |";
        assert!(estimate(table) * 2 >= table.len(), "{}", estimate(table));
    }
}
