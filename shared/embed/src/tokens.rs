//! How many tokens a chunk is for the model that embeds it, to count the chunks a model
//! cuts. all-MiniLM-L6-v2's own tokenizer counts exactly where the deployment carries it
//! (`SLUICE_MODEL_DIR`); for any other model (whose tokenizer is the provider's) the count
//! is an estimate that leans high: a token for every four ASCII characters and one for every
//! other character (CJK runs near one a character).

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
    let (ascii, other) =
        text.chars().fold((0usize, 0usize), |(a, o), c| if c.is_ascii() { (a + 1, o) } else { (a, o + 1) });
    ascii.div_ceil(4) + other + 2
}

/// Whether `model` reads `text` whole.
pub fn read_whole(model: &Model, text: &str) -> bool {
    count(model, text) <= model.max_input_tokens as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_ascii_by_fours_and_anything_else_by_ones() {
        assert_eq!(estimate(""), 2);
        assert_eq!(estimate("abcd"), 3);
        assert_eq!(estimate("abcde"), 4);
        assert_eq!(estimate("雪雪"), 4);
    }
}
