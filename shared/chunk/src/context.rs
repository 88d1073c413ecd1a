//! What a chunk is embedded and keyword-indexed by besides its own text (`chunk_context`):
//! its document's title and the path of headings it sits under. The headings are those the
//! parsed text itself marks: a markdown document's `#` headings (outside code fences), a
//! presentation's `--- Slide N ---` markers (with the slide's first line as its title) and
//! a workbook's `Sheet: name` lines. Documents parsed as markdown (`output_format`) have
//! `#` headings (a slide's `## Slide N — title`, a sheet's `## Sheet: name`); as text, the
//! formats the parsers write flat (PDF, DOCX, text) have a title and no headings.

use crate::is_heading;
use sluice_domain::ingestion::ChunkContext;

/// How a document's parsed text marks its sections, by its file type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outline {
    Markdown,
    Slides,
    Sheets,
    Flat,
}

impl Outline {
    /// How a document's parsed text marks its sections: by its file type, or as markdown
    /// when the parser wrote it so.
    pub fn of(filetype: &str, parsed_as_markdown: bool) -> Self {
        if parsed_as_markdown {
            return Self::Markdown;
        }
        match filetype.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Self::Markdown,
            "pptx" | "ppt" | "odp" => Self::Slides,
            "xlsx" | "xlsm" | "xls" | "ods" => Self::Sheets,
            _ => Self::Flat,
        }
    }
}

/// The longest heading kept in a path: a heading is a label, not a paragraph.
const MAX_HEADING_CHARS: usize = 120;

/// Where each heading path begins: `(byte offset, path)` in text order. The path in effect
/// at an offset is that of the last entry at or before it (`path_at`).
pub fn heading_paths(text: &str, outline: Outline) -> Vec<(usize, Vec<String>)> {
    let mut paths = Vec::new();
    let mut current: Vec<(usize, String)> = Vec::new();
    let mut offset = 0;
    let mut in_fence = false;
    let mut slide_waiting: Option<(usize, String)> = None;
    for line in text.split_inclusive('\n') {
        let here = offset;
        offset += line.len();
        let trimmed = line.trim();
        match outline {
            Outline::Markdown => {
                let indented = line.trim_start_matches(' ');
                if indented.starts_with("```") || indented.starts_with("~~~") {
                    in_fence = !in_fence;
                } else if !in_fence && is_heading(indented) {
                    let level = indented.chars().take_while(|c| *c == '#').count();
                    current.retain(|(l, _)| *l < level);
                    current.push((level, label(indented.trim_start_matches('#'))));
                    paths.push((here, current.iter().map(|(_, h)| h.clone()).collect()));
                }
            }
            Outline::Slides => {
                if let Some(number) = trimmed.strip_prefix("--- Slide ").and_then(|r| r.strip_suffix(" ---")) {
                    let name = format!("Slide {number}");
                    paths.push((here, vec![name.clone()]));
                    slide_waiting = Some((here, name));
                } else if !trimmed.is_empty()
                    && let Some((at, name)) = slide_waiting.take()
                {
                    // A slide's first line is its title.
                    let titled = format!("{name} — {}", label(trimmed));
                    if let Some(last) = paths.last_mut().filter(|(start, _)| *start == at) {
                        last.1 = vec![titled];
                    }
                }
            }
            Outline::Sheets => {
                if let Some(name) = line.strip_prefix("Sheet: ") {
                    paths.push((here, vec![label(name)]));
                }
            }
            Outline::Flat => return paths,
        }
    }
    paths
}

fn label(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_HEADING_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The heading path in effect at byte `offset` (empty before the first heading).
pub fn path_at(paths: &[(usize, Vec<String>)], offset: usize) -> &[String] {
    let after = paths.partition_point(|(start, _)| *start <= offset);
    after.checked_sub(1).map_or(&[], |i| paths[i].1.as_slice())
}

/// A document's title from its file name: the name without its extension, where it reads as
/// words; empty where it reads as an id (`scan0001`, `IMG_2231`, `cran-17`, a UUID), whose
/// characters before every chunk would only mislead the vector leg. (The parsers do not
/// read titles from documents' own metadata yet.)
pub fn title_from_filename(filename: &str) -> String {
    let name = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let stem = match name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => name,
    };
    let stem = stem.trim();
    if reads_as_words(stem) { stem.to_owned() } else { String::new() }
}

/// Whether a file name's stem reads as words: two words or more (a word: three letters or
/// more, a vowel among them, no digit), or one word and nothing that holds a digit.
fn reads_as_words(stem: &str) -> bool {
    let tokens: Vec<&str> = stem.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).collect();
    let is_word = |t: &str| {
        t.chars().count() >= 3
            && t.chars().all(char::is_alphabetic)
            // A vowel, or a letter outside ASCII (accented, or of a script without them).
            && t.chars().any(|c| "aeiouyAEIOUY".contains(c) || !c.is_ascii())
    };
    let words = tokens.iter().filter(|t| is_word(t)).count();
    let with_digits = tokens.iter().any(|t| t.chars().any(|c| c.is_ascii_digit()));
    words >= 2 || (words == 1 && !with_digits)
}

/// The context a chunk is indexed by under `setting`: the title, then the heading path
/// joined by ` > `, one per line; `None` when there is nothing to add.
pub fn chunk_context(setting: ChunkContext, title: &str, headings: &[String]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    if setting != ChunkContext::None && !title.is_empty() {
        lines.push(title.to_owned());
    }
    if setting == ChunkContext::TitleAndHeadings && !headings.is_empty() {
        lines.push(headings.join(" > "));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_is_a_title_only_where_it_reads_as_words() {
        for (name, title) in [
            ("Centrifugal Pump.md", "Centrifugal Pump"),
            ("harbour-report_2023.pdf", "harbour-report_2023"),
            ("pilots.txt", "pilots"),
            ("reports/Quarterly review.docx", "Quarterly review"),
            ("scan0001.pdf", ""),
            ("IMG_2231.png", ""),
            ("cran-17.txt", ""),
            ("3f2a9c1e-77b0-4c3e-9d21-0a5b6c7d8e9f.pdf", ""),
            ("DSC_0042.jpg", ""),
        ] {
            assert_eq!(title_from_filename(name), title, "{name}");
        }
    }

    #[test]
    fn a_markdown_heading_path_follows_levels_and_skips_code_fences() {
        let text = "intro\n# Pump\n## Seals\ntext\n```\n# not a heading\n```\n## Valves\n### Intake\nx\n# Motor\ny\n";
        let paths = heading_paths(text, Outline::Markdown);
        let at = |needle: &str| path_at(&paths, text.find(needle).expect("in text")).join(" > ");
        assert_eq!(at("intro"), "");
        assert_eq!(at("text"), "Pump > Seals");
        assert_eq!(at("# not"), "Pump > Seals");
        assert_eq!(at("x\n"), "Pump > Valves > Intake");
        assert_eq!(at("y\n"), "Motor");
        assert_eq!(at("## Seals"), "Pump > Seals", "a chunk that starts at its heading is under it");
    }

    #[test]
    fn slides_are_titled_by_their_first_line_and_sheets_by_name() {
        let slides = "--- Slide 1 ---\nQuarterly results\nRevenue grew\n--- Slide 2 ---\n\nHiring plan\nTwo roles\n";
        let paths = heading_paths(slides, Outline::Slides);
        assert_eq!(path_at(&paths, slides.find("Revenue").expect("in")), ["Slide 1 — Quarterly results"]);
        assert_eq!(path_at(&paths, slides.find("Two").expect("in")), ["Slide 2 — Hiring plan"]);
        let sheets = "Sheet: Budget\na\tb\nSheet: Staff\nc\n";
        let paths = heading_paths(sheets, Outline::Sheets);
        assert_eq!(path_at(&paths, sheets.find('c').expect("in")), ["Staff"]);
        assert!(heading_paths("# Not markdown here\n", Outline::Flat).is_empty());
        assert_eq!(Outline::of("docx", false), Outline::Flat);
        assert_eq!(Outline::of("docx", true), Outline::Markdown);
        assert_eq!(Outline::of("md", false), Outline::Markdown);
        assert_eq!(Outline::of("pptx", false), Outline::Slides);
    }

    #[test]
    fn the_context_is_what_the_setting_asks_for() {
        let headings = vec!["Pump".to_owned(), "Seals".to_owned()];
        let title = title_from_filename("manuals/Pump Manual.v2.pdf");
        assert_eq!(title, "Pump Manual.v2");
        assert_eq!(chunk_context(ChunkContext::None, &title, &headings), None);
        assert_eq!(chunk_context(ChunkContext::Title, &title, &headings).as_deref(), Some("Pump Manual.v2"));
        assert_eq!(
            chunk_context(ChunkContext::TitleAndHeadings, &title, &headings).as_deref(),
            Some("Pump Manual.v2\nPump > Seals")
        );
        assert_eq!(title_from_filename(".env"), ".env");
        assert_eq!(chunk_context(ChunkContext::TitleAndHeadings, "", &[]), None);
    }
}
