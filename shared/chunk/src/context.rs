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

/// Where a document's title was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TitleSource {
    /// The file's own metadata (PDF Info, Office and OpenDocument properties, a message's subject).
    Metadata,
    /// The text's first heading (a deck's first slide title).
    Heading,
    /// A text's first line, where it reads as a title.
    FirstLine,
    /// The file name, where it reads as words.
    Filename,
}

impl TitleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Metadata => "metadata",
            Self::Heading => "heading",
            Self::FirstLine => "first_line",
            Self::Filename => "filename",
        }
    }
}

/// How far into a text its title heading or line is looked for, in bytes.
const TITLE_REACH: usize = 2_000;

/// The longest first line taken as a title, in characters and in words.
const MAX_TITLE_LINE_CHARS: usize = 120;
const MAX_TITLE_LINE_WORDS: usize = 14;

/// Section names that head a part of a document, never the whole of it.
const SECTION_NAMES: &[&str] = &[
    "abstract",
    "introduction",
    "contents",
    "table of contents",
    "summary",
    "executive summary",
    "preface",
    "foreword",
    "acknowledgements",
    "acknowledgments",
    "references",
    "appendix",
    "keywords",
    "background",
];

/// The file types whose first line may be a title: prose, not a table's header or code.
const PROSE_TYPES: &[&str] =
    &["txt", "text", "md", "markdown", "pdf", "doc", "docx", "odt", "rtf", "epub", "html", "htm", "msg"];

/// A document's title and where it was found, first of: its metadata's title (where it reads
/// as one: not `Untitled`, not a file name); its first heading within `TITLE_REACH` (not a
/// section's name such as `Abstract`; a deck's first slide title); a prose file's first line
/// where it reads as a title (short, words, no sentence's end); its file name where that reads
/// as words. `None` when none does: a chunk is then indexed without a title.
pub fn document_title(
    metadata: Option<&str>,
    text: &str,
    outline: Outline,
    filetype: &str,
    filename: &str,
) -> Option<(String, TitleSource)> {
    if let Some(title) = metadata.map(str::trim).filter(|t| metadata_reads_as_title(t)) {
        return Some((title.to_owned(), TitleSource::Metadata));
    }
    // A workbook's sections are its sheets, whose names title no document.
    let kind = Outline::of(filetype, false);
    let reach = &text[..text.floor_char_boundary(TITLE_REACH)];
    if kind != Outline::Sheets
        && let Some(heading) = first_heading(reach, outline, kind == Outline::Slides)
    {
        return Some((heading, TitleSource::Heading));
    }
    if PROSE_TYPES.contains(&filetype.to_ascii_lowercase().as_str())
        && let Some(line) = reach.lines().map(str::trim).find(|l| !l.is_empty())
        && line_reads_as_title(line)
    {
        return Some((line.to_owned(), TitleSource::FirstLine));
    }
    let from_name = title_from_filename(filename);
    (!from_name.is_empty()).then_some((from_name, TitleSource::Filename))
}

/// The first heading that names the document rather than one of its sections: a markdown
/// document's first `#` heading (`##` and deeper head sections); a deck's (`deck`) first
/// slide's title (`Slide 1 — Quarterly results`, as text or markdown).
fn first_heading(text: &str, outline: Outline, deck: bool) -> Option<String> {
    let heading = if deck {
        let paths = heading_paths(text, outline);
        paths.first()?.1.last()?.split_once(" — ")?.1.to_owned()
    } else if outline == Outline::Markdown {
        first_top_heading(text)?
    } else {
        return None;
    };
    let heading = heading.trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace()).to_owned();
    let named_section = SECTION_NAMES.contains(&heading.trim_end_matches(':').to_lowercase().as_str());
    (!named_section && reads_as_words(&heading) && heading.chars().count() <= MAX_HEADING_CHARS).then_some(heading)
}

/// The text of the first level-one (`#`) heading outside code fences.
fn first_top_heading(text: &str) -> Option<String> {
    let mut in_fence = false;
    for line in text.lines() {
        let indented = line.trim_start_matches(' ');
        if indented.starts_with("```") || indented.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence && is_heading(indented) && !indented.starts_with("##") {
            return Some(label(indented.trim_start_matches('#')));
        }
    }
    None
}

/// Whether a metadata title is one: words, not a placeholder a program wrote.
fn metadata_reads_as_title(title: &str) -> bool {
    let lower = title.to_lowercase();
    let placeholder = ["untitled", "title", "document", "presentation", "slide 1", "no title"]
        .contains(&lower.as_str())
        || lower.starts_with("microsoft word - ")
        || lower.starts_with("microsoft powerpoint - ")
        || [".doc", ".docx", ".pdf", ".tex", ".dvi", ".ps", ".rtf", ".txt", ".md", ".odt", ".pptx", ".indd", ".qxd"]
            .iter()
            .any(|extension| lower.ends_with(extension));
    !placeholder && reads_as_words(title)
}

/// Whether a text's first line reads as a title: a few words, no sentence's or list's end
/// (in Latin or CJK punctuation) and no sentence's end within (a wrapped paragraph),
/// not a label (`From: …`), a table's row or a markdown heading (those are judged as headings).
fn line_reads_as_title(line: &str) -> bool {
    let words = line.split_whitespace().count();
    let label = line.split_once(": ").is_some_and(|(before, _)| !before.contains(' '));
    line.chars().count() <= MAX_TITLE_LINE_CHARS
        && (1..=MAX_TITLE_LINE_WORDS).contains(&words)
        && !line.ends_with(['.', ',', ';', ':', '!', '。', '，', '、', '！', '；', '：'])
        && !line.contains(". ")
        && !line.contains('。')
        && !line.contains(['\t', '|', '{', '<', '='])
        && !label
        && !line.starts_with('#')
        && reads_as_words(line)
}

/// A document's title from its file name: the name without its extension, where it reads as
/// words; empty where it reads as an id (`scan0001`, `IMG_2231`, `cran-17`, a UUID), whose
/// characters before every chunk would only mislead the vector leg.
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
    // A title taken from the first heading heads the path too: said once.
    let headings = match headings.split_first() {
        Some((first, rest)) if !title.is_empty() && first == title => rest,
        _ => headings,
    };
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
    fn a_title_is_the_metadata_s_else_the_first_heading_else_a_first_line_else_the_name() {
        let title = |metadata: Option<&str>, text: &str, outline: Outline, filetype: &str, name: &str| {
            document_title(metadata, text, outline, filetype, name).map(|(t, source)| (t, source.as_str()))
        };
        let paper = "# Abstract\nWe study pumps.\n# Introduction\nPumps move water.\n";
        assert_eq!(
            title(Some("  Centrifugal pump seals "), paper, Outline::Markdown, "pdf", "scan0001.pdf"),
            Some(("Centrifugal pump seals".to_owned(), "metadata"))
        );
        for placeholder in ["Untitled", "Microsoft Word - draft3.docx", "paper.dvi", "IMG_2231", "main.tex"] {
            assert_eq!(
                title(Some(placeholder), paper, Outline::Markdown, "pdf", "scan0001.pdf"),
                None,
                "{placeholder}"
            );
        }
        let headed = "# **Seal wear in centrifugal pumps**\n\n## Abstract\ntext\n";
        assert_eq!(
            title(None, headed, Outline::Markdown, "pdf", "scan0001.pdf"),
            Some(("Seal wear in centrifugal pumps".to_owned(), "heading"))
        );
        let deck = "--- Slide 1 ---\nQuarterly results\nRevenue grew\n--- Slide 2 ---\nHiring\n";
        assert_eq!(
            title(None, deck, Outline::Slides, "pptx", "deck-7.pptx"),
            Some(("Quarterly results".to_owned(), "heading"))
        );
        let deck = "## Slide 1 — Quarterly results\n- Revenue grew\n";
        assert_eq!(
            title(None, deck, Outline::Markdown, "pptx", "deck-7.pptx"),
            Some(("Quarterly results".to_owned(), "heading"))
        );
        let workbook = "## Sheet: Visible\n| a | b |\n";
        assert_eq!(title(None, workbook, Outline::Markdown, "xlsx", "book-3.xlsx"), None, "a sheet names no document");
        let sections = "## Maintenance\ntext\n### Seals\n";
        assert_eq!(
            title(None, sections, Outline::Markdown, "md", "Centrifugal Pump.md"),
            Some(("Centrifugal Pump".to_owned(), "filename")),
            "a section's heading is no title"
        );
        let note = "\n  Harbour dredging schedule 2024\n\nThe dredger arrives in May.\n";
        assert_eq!(
            title(None, note, Outline::Flat, "txt", "cran-17.txt"),
            Some(("Harbour dredging schedule 2024".to_owned(), "first_line"))
        );
        for (first, filetype) in [
            ("The dredger arrives in May.", "txt"),
            ("From: Ann <ann@example.com>", "txt"),
            ("name,price,quantity", "csv"),
            ("id\tname", "txt"),
            ("Harbour dredging schedule", "csv"),
            ("Python の開発は、1990 年ごろから開始されています。", "txt"),
            ("Python（派森）语言是一种功能强大而完善的通用型计算机程序设计语言，", "txt"),
            ("◎ 파이썬(Python)은 배우기 쉽고, 강력한 프로그래밍 언어입니다. 파이썬은", "txt"),
        ] {
            assert_eq!(title(None, first, Outline::Flat, filetype, "cran-17.txt"), None, "{first}");
        }
        assert_eq!(
            title(None, "1234 5678", Outline::Flat, "txt", "Harbour notes.txt"),
            Some(("Harbour notes".to_owned(), "filename"))
        );
        let late = format!("{}\n# Far down\n", "word ".repeat(600));
        assert_eq!(title(None, &late, Outline::Markdown, "md", "x1.md"), None, "a heading past the reach is no title");
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
        assert_eq!(
            chunk_context(ChunkContext::TitleAndHeadings, "Pump", &headings).as_deref(),
            Some("Pump\nSeals"),
            "a title that heads the path is said once"
        );
    }
}
