//! Splitting a document's text into chunks, as the seed's "Chunking configuration" says:
//!
//! - `recursive` splits on paragraphs, then lines, then words, then characters;
//! - `fixed` splits on line ends only, so a line longer than `chunk_size` is one chunk, and
//!   marked `oversize` for the caller to warn about (a line of exactly `chunk_size` passes);
//! - `markdown` cuts at heading lines first, so each section keeps its heading in its first
//!   chunk and no chunk crosses a heading, then runs `recursive` within each section.
//!
//! Sizes are in characters. `chunk_overlap` is a ceiling: a chunk repeats as much of the end
//! of the one before as still fits under `chunk_size` beside its next piece, which may be
//! nothing. Every chunk is a contiguous span of the text, in order; together they cover it
//! with no gap, so the text is the first chunk followed by each next chunk minus its
//! overlap.
//!
//! `chunk_size` is in characters, as the seed says, and a model reads tokens: `chunk_to_fit`
//! splits again, at smaller sizes, each chunk the caller's model would not read whole (its
//! title and heading context counted in), so no chunk's end is invisible to the vector leg.

pub mod context;

use sluice_domain::ingestion::{ChunkingStrategy, IngestionConfig};

/// One chunk: its text and where it lies in the document (byte offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub text: String,
    pub start: usize,
    pub end: usize,
    /// Longer than `chunk_size`: a piece with no separator left to split it on.
    pub oversize: bool,
}

/// A run of the text that is merged whole: a byte span and its length in characters.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    chars: usize,
}

const RECURSIVE_SEPARATORS: &[&str] = &["\n\n", "\n", " ", ""];
const FIXED_SEPARATORS: &[&str] = &["\n"];

/// Splits `text` under `config`.
pub fn chunk(text: &str, config: &IngestionConfig) -> Vec<Chunk> {
    let size = config.chunk_size.max(1) as usize;
    let overlap = (config.chunk_overlap as usize).min(size - 1);
    match config.chunking_strategy {
        ChunkingStrategy::Recursive => split_span(text, 0, text.len(), RECURSIVE_SEPARATORS, size, overlap),
        ChunkingStrategy::Fixed => split_span(text, 0, text.len(), FIXED_SEPARATORS, size, overlap),
        ChunkingStrategy::Markdown => markdown_sections(text)
            .into_iter()
            .flat_map(|(start, end)| split_span(text, start, end, RECURSIVE_SEPARATORS, size, overlap))
            .collect(),
    }
}

/// The smallest size `chunk_to_fit` splits down to: a chunk this short that still does not
/// fit is kept (its context alone fills the model's window) and counted by the caller.
const MIN_FIT_CHARS: usize = 16;

/// Splits `text` under `config`, then splits each chunk `fits` refuses again with the
/// recursive separators at three quarters of the size, and so on, until every chunk fits (or
/// is `MIN_FIT_CHARS` long). The overlap shrinks in proportion. The chunks still cover the
/// text in order with no gap; a chunk that fits is exactly what `chunk` makes. Each comes with
/// whether it fits, so the caller asks `fits` once per chunk it keeps.
pub fn chunk_to_fit(text: &str, config: &IngestionConfig, fits: impl Fn(&Chunk) -> bool) -> Vec<(Chunk, bool)> {
    let size = config.chunk_size.max(1) as usize;
    let overlap = (config.chunk_overlap as usize).min(size - 1);
    let mut fitted = Vec::new();
    for chunk in chunk(text, config) {
        fit(text, chunk, (size, overlap), &fits, &mut fitted);
    }
    fitted
}

fn fit(
    text: &str,
    chunk: Chunk,
    (size, overlap): (usize, usize),
    fits: &impl Fn(&Chunk) -> bool,
    out: &mut Vec<(Chunk, bool)>,
) {
    let fitting = fits(&chunk);
    let chars = chunk.text.chars().count();
    if fitting || chars <= MIN_FIT_CHARS {
        out.push((chunk, fitting));
        return;
    }
    let smaller = (chars.min(size) * 3 / 4).max(MIN_FIT_CHARS);
    let overlap = overlap * smaller / size.max(1);
    for piece in split_span(text, chunk.start, chunk.end, RECURSIVE_SEPARATORS, smaller, overlap) {
        fit(text, Chunk { oversize: false, ..piece }, (smaller, overlap), fits, out);
    }
}

/// Chunks of `text[start..end]`.
fn split_span(text: &str, start: usize, end: usize, separators: &[&str], size: usize, overlap: usize) -> Vec<Chunk> {
    let mut pieces = Vec::new();
    pieces_of(text, start, end, separators, size, &mut pieces);
    merge(text, &pieces, size, overlap)
}

/// Breaks `text[start..end]` into pieces of at most `size` characters where a separator
/// allows, each separator kept at the end of the piece before it.
fn pieces_of(text: &str, start: usize, end: usize, separators: &[&str], size: usize, out: &mut Vec<Piece>) {
    let span = &text[start..end];
    let chars = span.chars().count();
    if chars == 0 {
        return;
    }
    if chars <= size {
        out.push(Piece { start, end, chars });
        return;
    }
    let Some((index, separator)) =
        separators.iter().enumerate().find(|(_, sep)| sep.is_empty() || span.contains(**sep))
    else {
        // No separator left: the piece is emitted whole.
        out.push(Piece { start, end, chars });
        return;
    };
    if separator.is_empty() {
        // Characters: cut into `size`-character pieces.
        let mut piece_start = start;
        let mut count = 0;
        for (offset, _) in span.char_indices() {
            if count == size {
                out.push(Piece { start: piece_start, end: start + offset, chars: count });
                piece_start = start + offset;
                count = 0;
            }
            count += 1;
        }
        out.push(Piece { start: piece_start, end, chars: count });
        return;
    }
    let finer = &separators[index + 1..];
    let mut piece_start = start;
    for (offset, _) in span.match_indices(separator) {
        let piece_end = start + offset + separator.len();
        pieces_of(text, piece_start, piece_end, finer, size, out);
        piece_start = piece_end;
    }
    pieces_of(text, piece_start, end, finer, size, out);
}

/// Packs pieces into chunks of at most `size` characters, each starting with as much of
/// the previous chunk's tail (whole pieces) as fits under `overlap` and beside its next piece.
fn merge(text: &str, pieces: &[Piece], size: usize, overlap: usize) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current: std::collections::VecDeque<Piece> = std::collections::VecDeque::new();
    let mut total = 0usize;
    let mut emitted_end = None;
    let emit = |current: &std::collections::VecDeque<Piece>, total: usize, chunks: &mut Vec<Chunk>| {
        if let (Some(first), Some(last)) = (current.front(), current.back()) {
            chunks.push(Chunk {
                text: text[first.start..last.end].to_owned(),
                start: first.start,
                end: last.end,
                oversize: total > size,
            });
        }
    };
    for piece in pieces {
        if total + piece.chars > size && !current.is_empty() {
            emit(&current, total, &mut chunks);
            emitted_end = current.back().map(|p| p.end);
            // Keep the tail that fits as overlap and leaves room for this piece.
            while !current.is_empty() && (total > overlap || total + piece.chars > size) {
                if let Some(dropped) = current.pop_front() {
                    total -= dropped.chars;
                }
            }
        }
        current.push_back(*piece);
        total += piece.chars;
    }
    // The last chunk, unless it is only the overlap of the one before.
    if current.back().map(|p| p.end) != emitted_end {
        emit(&current, total, &mut chunks);
    }
    chunks
}

/// Byte spans of the sections: a heading line (`#` to `######`, then a space) starts one.
fn markdown_sections(text: &str) -> Vec<(usize, usize)> {
    let mut starts = vec![0];
    let mut offset = 0;
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start_matches(' ');
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence && offset > 0 && is_heading(trimmed) {
            starts.push(offset);
        }
        offset += line.len();
    }
    starts.iter().zip(starts.iter().skip(1).chain(std::iter::once(&text.len()))).map(|(s, e)| (*s, *e)).collect()
}

fn is_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    (1..=6).contains(&hashes) && line[hashes..].starts_with([' ', '\t'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(size: u32, overlap: u32, strategy: ChunkingStrategy) -> IngestionConfig {
        IngestionConfig {
            chunk_size: size,
            chunk_overlap: overlap,
            chunking_strategy: strategy,
            ..IngestionConfig::default()
        }
    }

    fn texts(chunks: &[Chunk]) -> Vec<&str> {
        chunks.iter().map(|c| c.text.as_str()).collect()
    }

    #[test]
    fn recursive_prefers_paragraphs_then_lines_then_words() {
        let text = "alpha beta\n\ngamma delta\nepsilon";
        let chunks = chunk(text, &config(12, 0, ChunkingStrategy::Recursive));
        assert_eq!(texts(&chunks), ["alpha beta\n\n", "gamma delta\n", "epsilon"]);
    }

    #[test]
    fn the_overlap_is_a_ceiling_of_whole_pieces() {
        let text = "one two three four five six";
        let chunks = chunk(text, &config(14, 8, ChunkingStrategy::Recursive));
        assert_eq!(texts(&chunks), ["one two three ", "three four ", "four five six"]);
    }

    #[test]
    fn fixed_keeps_a_long_line_whole_and_says_so() {
        let text = format!("short\n{}\nend", "x".repeat(30));
        let chunks = chunk(&text, &config(10, 0, ChunkingStrategy::Fixed));
        assert_eq!(chunks.len(), 3);
        assert!(chunks[1].oversize && chunks[1].text.starts_with("xxx"));
        let exact = chunk(&"y".repeat(10), &config(10, 0, ChunkingStrategy::Fixed));
        assert!(!exact[0].oversize, "exactly chunk_size is within the limit");
    }

    #[test]
    fn markdown_keeps_headings_with_their_sections() {
        let text = "# Title\nintro\n## Part one\nbody one\n```\n# not a heading\n```\n## Part two\nbody two\n";
        let chunks = chunk(text, &config(2500, 200, ChunkingStrategy::Markdown));
        assert_eq!(
            texts(&chunks),
            ["# Title\nintro\n", "## Part one\nbody one\n```\n# not a heading\n```\n", "## Part two\nbody two\n"]
        );
    }

    #[test]
    fn a_chunk_that_does_not_fit_is_split_until_it_does_and_the_text_stays_covered() {
        let text = "alpha beta gamma delta\n\nepsilon zeta eta theta iota kappa lambda mu\nnu xi omicron";
        let config = config(60, 10, ChunkingStrategy::Recursive);
        // A model that reads at most five words (the caller's count).
        let fits = |c: &Chunk| c.text.split_whitespace().count() <= 5;
        let fitted: Vec<Chunk> = chunk_to_fit(text, &config, fits)
            .into_iter()
            .map(|(c, fitting)| {
                assert!(fitting);
                c
            })
            .collect();
        assert!(fitted.iter().all(fits), "{:?}", texts(&fitted));
        assert!(fitted.len() > chunk(text, &config).len());
        let mut covered = 0;
        for piece in &fitted {
            assert!(piece.start <= covered && piece.end > covered, "in order, no gap: {:?}", texts(&fitted));
            assert_eq!(piece.text, text[piece.start..piece.end]);
            covered = piece.end;
        }
        assert_eq!(covered, text.len());
        // Where everything fits, nothing changes.
        let unchanged: Vec<Chunk> = chunk_to_fit(text, &config, |_| true).into_iter().map(|(c, _)| c).collect();
        assert_eq!(unchanged, chunk(text, &config));
    }

    #[test]
    fn a_chunk_that_can_never_fit_stops_at_a_few_characters() {
        let text = "word ".repeat(40);
        let fitted = chunk_to_fit(&text, &config(100, 0, ChunkingStrategy::Fixed), |_| false);
        assert!(fitted.iter().all(|(_, fitting)| !fitting), "each still says it does not fit");
        let fitted: Vec<Chunk> = fitted.into_iter().map(|(c, _)| c).collect();
        assert!(fitted.iter().all(|c| c.text.chars().count() <= MIN_FIT_CHARS), "{:?}", texts(&fitted));
    }

    #[test]
    fn characters_are_counted_not_bytes() {
        let text = "żółć".repeat(10);
        let chunks = chunk(&text, &config(8, 0, ChunkingStrategy::Recursive));
        assert!(chunks.iter().all(|c| c.text.chars().count() <= 8));
        assert_eq!(chunks.len(), 5);
    }
}
