//! Properties of every strategy over arbitrary text: each chunk within size unless it is
//! one unsplittable piece, the chunks in order and covering the text with no gap, the text
//! rebuilt from them less their overlaps, and no overlap over the ceiling.

use proptest::prelude::*;
use sluice_chunk::chunk;
use sluice_domain::ingestion::{ChunkingStrategy, IngestionConfig};

fn strategy() -> impl Strategy<Value = ChunkingStrategy> {
    prop_oneof![Just(ChunkingStrategy::Recursive), Just(ChunkingStrategy::Fixed), Just(ChunkingStrategy::Markdown)]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            4 => "[a-z]{1,12}",
            2 => Just(" ".to_owned()),
            2 => Just("\n".to_owned()),
            1 => Just("\n\n".to_owned()),
            1 => Just("\n## Heading\n".to_owned()),
            1 => "[żółćé漢字]{1,6}",
        ],
        0..120,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn chunks_cover_the_text_in_order_within_size(
        text in text(),
        size in 1u32..80,
        overlap_fraction in 0.0f64..1.0,
        strategy in strategy(),
    ) {
        let overlap = ((f64::from(size) * overlap_fraction) as u32).min(size - 1);
        let config = IngestionConfig { chunk_size: size, chunk_overlap: overlap, chunking_strategy: strategy, ..IngestionConfig::default() };
        let chunks = chunk(&text, &config);
        if text.is_empty() {
            prop_assert!(chunks.is_empty());
            return Ok(());
        }
        prop_assert_eq!(chunks[0].start, 0);
        prop_assert_eq!(chunks.last().map(|c| c.end), Some(text.len()));
        let mut rebuilt = chunks[0].text.clone();
        for pair in chunks.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            prop_assert!(after.start <= before.end, "a gap between chunks");
            prop_assert!(after.start >= before.start && after.end > before.end, "order lost");
            let repeated = &text[after.start..before.end];
            prop_assert!(repeated.chars().count() <= overlap as usize, "overlap {:?} over {}", repeated, overlap);
            rebuilt.push_str(&text[before.end..after.end]);
        }
        prop_assert_eq!(&rebuilt, &text);
        for c in &chunks {
            prop_assert_eq!(&c.text, &text[c.start..c.end]);
            let chars = c.text.chars().count();
            prop_assert_eq!(c.oversize, chars > size as usize);
            if c.oversize {
                // Only `fixed` leaves a piece unsplit: one line with nothing to cut it on.
                prop_assert_eq!(strategy, ChunkingStrategy::Fixed);
                prop_assert!(!c.text.trim_end_matches('\n').contains('\n'), "an oversize chunk of several lines");
            }
        }
    }
}
