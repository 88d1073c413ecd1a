//! A PDF's text layer as markdown: headings from font size and weight, bulleted and
//! numbered lists, tables from aligned cells and ruling lines, paragraphs with words
//! hyphenated at line ends joined, and running headers and footers dropped.
//!
//! PDFium gives each character's box, font size and weight; characters are gathered into
//! spans (a line's run between gaps wider than any word space: a table's cell, a column's
//! line). Which span comes next is decided by the OCR's layout module
//! ([`sluice_ocr::layout`]), the one reading order for scans and text layers; this module
//! only says what each row in that order is.
//!
//! Choices where a PDF says nothing: the body size is the size most of the document's
//! characters have (a cover page or a slide-like page follows the document, not itself);
//! heading levels rank the sizes larger than the body, largest first, and a bold line of
//! body size comes after them; a running header or footer is a line in the top or bottom
//! 7% of the page, or its first or last row set apart from the text, whose text (numbers
//! aside) recurs on more than half of the pages and which is set no larger than the text (a
//! heading that opens every page stays a heading).

use crate::budget::{Stop, TextBudget};
use crate::markdown::{ListMark, MarkdownWriter};
use pdfium_render::prelude::{
    PdfFontWeight, PdfPage, PdfPageObjectCommon, PdfPageObjectType, PdfPageObjectsCommon, PdfPageTextChar,
};
use sluice_ocr::RotatedRect;
use sluice_ocr::layout::{Break, Row, in_reading_order};
use std::collections::{HashMap, HashSet};

/// A horizontal gap this many ems wide ends a span: a word space, even a justified one, is
/// narrower, and a table's cells or a page's columns are further apart.
const SPAN_GAP_EMS: f32 = 1.0;
/// A gap this many ems wide between two characters is a word space the layer did not write.
const WORD_GAP_EMS: f32 = 0.15;
/// A path no thicker than this, in points, is a ruling line.
const RULE_THICKNESS: f32 = 2.0;
/// A ruling line's shortest length, in points.
const MIN_RULE_LENGTH: f32 = 8.0;
/// The share of the page at its top and at its bottom where running headers and footers sit.
const MARGIN_SHARE: f32 = 0.07;
/// Text at least this much larger than the body is a heading.
const HEADING_RATIO: f32 = 1.15;
/// The most heading levels told apart by size (the rest share the last).
const MAX_SIZE_LEVELS: usize = 5;
/// The longest heading, in characters: a longer run of large type is a paragraph.
const MAX_HEADING_CHARS: usize = 200;
/// The longest bold line of body size that is read as a heading.
const MAX_BOLD_HEADING_CHARS: usize = 100;
/// The fewest letters a heading holds: a lone letter or number in large type is a figure's
/// label or an axis's tick, not a section's name.
const MIN_HEADING_LETTERS: usize = 2;
/// A text layer's columns are read as columns only when at least this many line heights
/// wide: narrower ones are a table's, told apart by its cells.
const TEXT_COLUMN_WIDTH: f32 = 15.0;
/// The characters that open a bulleted list item.
const BULLETS: &[char] =
    &['•', '·', '◦', '▪', '▫', '●', '○', '■', '□', '►', '▸', '‣', '⁃', '–', '—', '-', '*', '\u{f0b7}'];

/// A run of characters on one line, between gaps too wide for a word space.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub text: String,
    /// The font size most of its characters have, in points.
    pub size: f32,
    /// Whether most of its characters are bold.
    pub bold: bool,
}

/// The text layer of one page, in points from the page's top left.
#[derive(Debug, Clone, Default)]
pub struct TextPage {
    pub height: f32,
    pub spans: Vec<(RotatedRect, Span)>,
    /// Horizontal ruling lines: (left, right, y).
    pub rules: Vec<(f32, f32, f32)>,
}

impl TextPage {
    /// The characters in its spans.
    pub fn chars(&self) -> usize {
        self.spans.iter().map(|(_, span)| span.text.chars().count()).sum()
    }
}

/// Where an image sits on a page, in points from the page's top left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    pub left: f32,
    pub right: f32,
    pub top: f32,
    pub bottom: f32,
}

/// The page's text layer gathered into spans, with its ruling lines.
pub fn read_page(page: &PdfPage<'_>) -> TextPage {
    let height = page.height().value;
    let mut columns = Vec::new();
    let mut rules = Vec::new();
    for object in page.objects().iter().filter(|o| o.object_type() == PdfPageObjectType::Path) {
        let Ok(b) = object.bounds() else { continue };
        let (left, right, top, bottom) =
            (b.left().value, b.right().value, height - b.top().value, height - b.bottom().value);
        if right - left <= RULE_THICKNESS && bottom - top >= MIN_RULE_LENGTH {
            columns.push(((left + right) / 2.0, top, bottom));
        } else if bottom - top <= RULE_THICKNESS && right - left >= MIN_RULE_LENGTH {
            rules.push((left, right, (top + bottom) / 2.0));
        }
    }
    let mut spans = SpanBuilder { height, vertical_rules: columns, ..SpanBuilder::default() };
    if let Ok(text) = page.text() {
        for ch in text.chars().iter() {
            spans.push(&ch);
        }
    }
    spans.close();
    TextPage { height, spans: spans.spans, rules }
}

/// A span being gathered.
#[derive(Debug)]
struct OpenSpan {
    text: String,
    left: f32,
    right: f32,
    top: f32,
    bottom: f32,
    sizes: Vec<f32>,
    bold: usize,
}

#[derive(Debug, Default)]
struct SpanBuilder {
    height: f32,
    /// Vertical ruling lines: (x, top, bottom).
    vertical_rules: Vec<(f32, f32, f32)>,
    open: Option<OpenSpan>,
    space: bool,
    spans: Vec<(RotatedRect, Span)>,
}

impl SpanBuilder {
    fn push(&mut self, ch: &PdfPageTextChar<'_>) {
        let Some(c) = ch.unicode_char() else { return };
        // PDFium marks a word hyphenated at a line's end with U+0002.
        if c == '\u{2}' {
            if let Some(open) = &mut self.open {
                open.text.push('-');
            }
            return;
        }
        if c.is_whitespace() || c.is_control() {
            self.space = true;
            return;
        }
        let Ok(bounds) = ch.loose_bounds() else { return };
        let size = ch.scaled_font_size().value.max(1.0);
        let bold = match ch.font_weight() {
            Some(
                PdfFontWeight::Weight600
                | PdfFontWeight::Weight700Bold
                | PdfFontWeight::Weight800
                | PdfFontWeight::Weight900,
            ) => true,
            Some(PdfFontWeight::Custom(weight)) if weight >= 100 => weight >= 600,
            // A font without a stated weight (PDFium says 0 for the standard fonts) says it
            // in its name.
            None | Some(PdfFontWeight::Custom(_)) => is_bold_name(&ch.font_name()),
            Some(_) => false,
        };
        let (left, right) = (bounds.left().value, bounds.right().value);
        let (top, bottom) = (self.height - bounds.top().value, self.height - bounds.bottom().value);
        self.add(c, left, right, top, bottom, size, bold);
    }

    /// Adds a character, ending the open span first when the character is on another
    /// line, a span's gap away, back before it, or past a vertical ruling line.
    #[allow(clippy::too_many_arguments)]
    fn add(&mut self, c: char, left: f32, right: f32, top: f32, bottom: f32, size: f32, bold: bool) {
        if let Some(open) = &self.open {
            let centre = (top + bottom) / 2.0;
            let same_line =
                (centre - (open.top + open.bottom) / 2.0).abs() < (bottom - top).min(open.bottom - open.top) / 2.0;
            let gap = left - open.right;
            let ruled = self.vertical_rules.iter().any(|&(x, rule_top, rule_bottom)| {
                x > open.right - 0.5 && x < left + 0.5 && rule_top < centre && centre < rule_bottom
            });
            if !same_line || gap > SPAN_GAP_EMS * size || gap < -size || ruled {
                self.close();
            }
        }
        match &mut self.open {
            Some(open) => {
                if (self.space || left - open.right > WORD_GAP_EMS * size) && !open.text.ends_with(' ') {
                    open.text.push(' ');
                }
                open.text.push(c);
                open.left = open.left.min(left);
                open.right = open.right.max(right);
                open.top = open.top.min(top);
                open.bottom = open.bottom.max(bottom);
                open.sizes.push(size);
                open.bold += usize::from(bold);
            }
            None => {
                self.open = Some(OpenSpan {
                    text: c.to_string(),
                    left,
                    right,
                    top,
                    bottom,
                    sizes: vec![size],
                    bold: usize::from(bold),
                })
            }
        }
        self.space = false;
    }

    fn close(&mut self) {
        let Some(mut open) = self.open.take() else { return };
        open.sizes.sort_by(f32::total_cmp);
        let size = open.sizes[open.sizes.len() / 2];
        let rect = RotatedRect {
            cx: (open.left + open.right) / 2.0,
            cy: (open.top + open.bottom) / 2.0,
            width: open.right - open.left,
            height: (open.bottom - open.top).max(1.0),
            angle: 0.0,
        };
        let bold = open.bold * 2 > open.sizes.len();
        self.spans.push((rect, Span { text: open.text.trim_end().to_owned(), size, bold }));
    }
}

/// Whether a font's name says it is bold (`Helvetica-Bold`, `ABCDEF+Calibri-Bold`,
/// `Arial Black`, `Inter SemiBold`).
fn is_bold_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["bold", "black", "heavy", "semibold", "demi"].iter().any(|weight| name.contains(weight))
}

/// A size in half points, so that sizes a renderer rounds differently count as one.
fn size_key(size: f32) -> i32 {
    (size * 2.0).round() as i32
}

/// What the whole document says of its type: the body's size, the heading sizes, and the
/// running headers and footers.
#[derive(Debug, Clone, Default)]
pub struct Style {
    body: f32,
    /// The heading sizes (in half points), largest first.
    heading_sizes: Vec<i32>,
    /// The running headers' and footers' texts, numbers aside.
    running: HashSet<String>,
}

/// How many characters each size (in half points) sets in `spans`.
fn sizes<'a>(spans: impl Iterator<Item = &'a Span>) -> HashMap<i32, usize> {
    let mut by_size: HashMap<i32, usize> = HashMap::new();
    for span in spans {
        *by_size.entry(size_key(span.size)).or_default() += span.text.chars().count();
    }
    by_size
}

/// The size most characters are set in (the smaller of two that tie), in points.
fn most_used(by_size: &HashMap<i32, usize>) -> f32 {
    by_size.iter().max_by_key(|&(key, chars)| (*chars, -key)).map_or(20, |(key, _)| *key) as f32 / 2.0
}

/// A margin line's text with its numbers taken out, so that "Page 3" and "Page 4" match.
fn margin_key(text: &str) -> String {
    let mut key = String::new();
    let mut in_number = false;
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_digit() {
            if !in_number {
                key.push('#');
            }
            in_number = true;
            continue;
        }
        in_number = false;
        if !(c.is_whitespace() && key.ends_with(' ')) {
            key.push(if c.is_whitespace() { ' ' } else { c });
        }
    }
    key.trim().to_owned()
}

/// Where a page's running lines may be: its margins, and its first and last rows when set
/// apart from the text by more than a line's height (a page number is often set well
/// inside the margin, below the last line of text; a first line of text at the usual
/// leading is text, however often it recurs).
#[derive(Debug, Clone, Copy)]
struct Margins {
    height: f32,
    first_row: Option<f32>,
    last_row: Option<f32>,
}

impl Margins {
    fn of(page: &TextPage) -> Self {
        let rects: Vec<&RotatedRect> = page.spans.iter().map(|(rect, _)| rect).collect();
        let in_row =
            |rect: &RotatedRect, row: &RotatedRect| (rect.cy - row.cy).abs() < rect.height.min(row.height) / 2.0;
        let apart = |edge: Option<&&RotatedRect>, gap: &dyn Fn(&RotatedRect, &RotatedRect) -> f32| {
            let edge = *edge?;
            let nearest = rects.iter().filter(|r| !in_row(r, edge)).map(|r| gap(edge, r)).fold(f32::MAX, f32::min);
            (nearest > edge.height).then_some(edge.cy)
        };
        Self {
            height: page.height,
            first_row: apart(rects.iter().min_by(|a, b| a.cy.total_cmp(&b.cy)), &|edge, r| r.top() - edge.bottom()),
            last_row: apart(rects.iter().max_by(|a, b| a.cy.total_cmp(&b.cy)), &|edge, r| edge.top() - r.bottom()),
        }
    }

    fn contain(&self, rect: &RotatedRect) -> bool {
        let in_row = |row: Option<f32>| row.is_some_and(|row| (rect.cy - row).abs() < rect.height / 2.0);
        rect.bottom() <= MARGIN_SHARE * self.height
            || rect.top() >= (1.0 - MARGIN_SHARE) * self.height
            || in_row(self.first_row)
            || in_row(self.last_row)
    }
}

impl Style {
    pub fn of(pages: &[&TextPage]) -> Self {
        let margins: Vec<Margins> = pages.iter().map(|page| Margins::of(page)).collect();
        let spans = || pages.iter().zip(&margins).flat_map(|(page, m)| page.spans.iter().map(move |(r, s)| (m, r, s)));
        // Running lines are set no larger than the text: a heading that opens every page
        // ("Chapter 3", "Invoice 1042") stays a heading.
        let all_text = most_used(&sizes(spans().map(|(_, _, span)| span)));
        let mut recurring: HashMap<String, usize> = HashMap::new();
        let mut pages_with_text = 0;
        for (page, margins) in pages.iter().zip(&margins).filter(|(page, _)| !page.spans.is_empty()) {
            pages_with_text += 1;
            let keys: HashSet<String> = page
                .spans
                .iter()
                .filter(|(rect, span)| margins.contain(rect) && span.size < all_text * HEADING_RATIO)
                .map(|(_, span)| margin_key(&span.text))
                .collect();
            for key in keys {
                *recurring.entry(key).or_default() += 1;
            }
        }
        let running: HashSet<String> = recurring
            .into_iter()
            .filter(|&(_, pages)| pages >= 2 && pages * 2 > pages_with_text)
            .map(|(key, _)| key)
            .collect();
        let by_size = sizes(
            spans()
                .filter(|(margins, rect, span)| !(margins.contain(rect) && running.contains(&margin_key(&span.text))))
                .map(|(_, _, span)| span),
        );
        let body = most_used(&by_size);
        // A size used only for long runs (a large-print document's body), or only by marks
        // (a list's bullets, numbers), is no heading's.
        let labels: HashSet<i32> = spans()
            .map(|(_, _, span)| span)
            .filter(|s| {
                s.text.chars().count() <= MAX_HEADING_CHARS && s.text.chars().filter(|c| c.is_alphabetic()).count() >= 2
            })
            .map(|s| size_key(s.size))
            .collect();
        let mut heading_sizes: Vec<i32> = by_size
            .keys()
            .copied()
            .filter(|&key| key as f32 / 2.0 >= body * HEADING_RATIO && labels.contains(&key))
            .collect();
        heading_sizes.sort_unstable_by(|a, b| b.cmp(a));
        Self { body, heading_sizes, running }
    }

    fn is_running(&self, margins: &Margins, rect: &RotatedRect, span: &Span) -> bool {
        margins.contain(rect) && self.running.contains(&margin_key(&span.text))
    }

    /// The heading level of a row of spans, if it is a heading.
    fn heading_level(&self, spans: &[&Span]) -> Option<u8> {
        let chars: usize = spans.iter().map(|s| s.text.chars().count()).sum();
        let first = spans.first()?;
        if chars > MAX_HEADING_CHARS || spans.iter().any(|s| size_key(s.size) != size_key(first.size)) {
            return None;
        }
        let letters = spans.iter().flat_map(|s| s.text.chars()).filter(|c| c.is_alphabetic()).count();
        if letters < MIN_HEADING_LETTERS {
            return None;
        }
        if let Some(rank) = self.heading_sizes.iter().position(|&key| key == size_key(first.size)) {
            return Some(rank.min(MAX_SIZE_LEVELS - 1) as u8 + 1);
        }
        let body_sized = (first.size - self.body).abs() < 0.75;
        let ends_sentence = spans.last().is_some_and(|s| s.text.ends_with(['.', ',', ';']));
        if body_sized && spans.iter().all(|s| s.bold) && chars <= MAX_BOLD_HEADING_CHARS && !ends_sentence {
            return Some((self.heading_sizes.len().min(MAX_SIZE_LEVELS) + 1) as u8);
        }
        None
    }
}

/// A row of the page in reading order, as this module sees it.
#[derive(Debug)]
struct Line {
    cells: Vec<(f32, f32, String)>,
    spans: Vec<Span>,
    left: f32,
    right: f32,
    y: f32,
    size: f32,
    before: Break,
}

impl Line {
    fn of(row: Row<Span>) -> Self {
        let left = row.lines.iter().map(|(r, _)| r.left()).fold(f32::MAX, f32::min);
        let right = row.lines.iter().map(|(r, _)| r.cx + r.width / 2.0).fold(f32::MIN, f32::max);
        let y = row.lines.iter().map(|(r, _)| r.cy).sum::<f32>() / row.lines.len().max(1) as f32;
        let size = row.lines.iter().map(|(_, s)| s.size).fold(0.0, f32::max);
        let mut cells: Vec<(f32, f32, String)> =
            row.lines.iter().map(|(r, s)| (r.left(), r.cx + r.width / 2.0, s.text.clone())).collect();
        // A bullet or number set apart from its item's text is the item's, not a cell; so
        // is a bare number of up to three digits, narrow, before a row's one other cell.
        let bare_number = |cell: &(f32, f32, String)| {
            (1..=3).contains(&cell.2.len())
                && cell.2.bytes().all(|b| b.is_ascii_digit())
                && cell.1 - cell.0 <= 2.0 * size
        };
        if cells.len() >= 2 && list_marker(&cells[0].2).is_some_and(|(_, rest)| rest.is_empty()) {
            let marker = cells.remove(0);
            cells[0] = (marker.0, cells[0].1, format!("{} {}", marker.2, cells[0].2));
        } else if cells.len() == 2 && bare_number(&cells[0]) {
            let marker = cells.remove(0);
            cells[0] = (marker.0, cells[0].1, format!("{}. {}", marker.2, cells[0].2));
        }
        let spans = row.lines.into_iter().map(|(_, s)| s).collect();
        Self { cells, spans, left, right, y, size, before: row.before }
    }

    fn text(&self) -> String {
        self.cells.iter().map(|c| c.2.as_str()).collect::<Vec<_>>().join(" ")
    }
}

/// The mark and the rest of a list item's text, if `text` opens like one: a bullet, or a
/// number or letter of up to three characters followed by `.` or `)`.
fn list_marker(text: &str) -> Option<(ListMark, &str)> {
    let mut chars = text.chars();
    let first = chars.next()?;
    let after_first = chars.as_str();
    if BULLETS.contains(&first) && (after_first.is_empty() || after_first.starts_with(char::is_whitespace)) {
        return Some((ListMark::Bullet, after_first.trim_start()));
    }
    let body = text.strip_prefix('(').unwrap_or(text);
    let end = body.find(['.', ')'])?;
    let (label, rest) = (&body[..end], &body[end + 1..]);
    let numbered = (1..=3).contains(&label.len()) && label.bytes().all(|b| b.is_ascii_digit());
    let lettered = label.len() == 1 && label.bytes().all(|b| b.is_ascii_lowercase()) && body[end..].starts_with(')');
    ((numbered || lettered) && (rest.is_empty() || rest.starts_with(char::is_whitespace)))
        .then(|| (ListMark::Numbered, rest.trim_start()))
}

/// Joins a line to the text before it: a word hyphenated at the line's end is joined whole.
fn join_line(text: &mut String, next: &str) {
    let hyphenated = text.strip_suffix('-').is_some_and(|head| head.ends_with(char::is_alphabetic))
        && next.starts_with(char::is_lowercase);
    if hyphenated {
        text.pop();
    } else if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(next);
}

/// A markdown block of a page.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    Heading(u8, String),
    Paragraph(String),
    Item(usize, ListMark, String),
    EndList,
    Table(Vec<Vec<String>>),
    /// The place of the `n`th of the page's figures.
    Figure(usize),
}

/// Writes one page's text layer as markdown, its blocks closed at the page's end (so the
/// next page starts where its first block does), and returns where each of `figures`
/// goes: before the first line below its middle that it overlaps across, else at the
/// page's end.
pub fn write_page(
    page: TextPage,
    style: &Style,
    writer: &mut MarkdownWriter,
    budget: &mut TextBudget,
    figures: &[Figure],
) -> Result<Vec<usize>, Stop> {
    let margins = Margins::of(&page);
    let spans: Vec<(RotatedRect, Span)> = page
        .spans
        .into_iter()
        .filter(|(rect, span)| !span.text.is_empty() && !style.is_running(&margins, rect, span))
        .collect();
    let lines: Vec<Line> = in_reading_order(spans, TEXT_COLUMN_WIDTH).into_iter().map(Line::of).collect();
    let mut due: Vec<(usize, usize)> = figures
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let middle = (f.top + f.bottom) / 2.0;
            let below = lines.iter().position(|l| l.y > middle && l.left < f.right && l.right > f.left);
            (below.unwrap_or(lines.len()), n)
        })
        .collect();
    due.sort_unstable();
    let mut places = vec![0; figures.len()];
    for block in blocks(&lines, style, &page.rules, &due) {
        match block {
            Block::Figure(n) => places[n] = writer.place(budget)?,
            Block::Heading(level, text) => writer.heading(budget, level, &text)?,
            Block::Paragraph(text) => writer.paragraph(budget, &text)?,
            Block::Item(depth, mark, text) => writer.list_item(budget, depth, mark, &text)?,
            Block::EndList => writer.end_list(),
            Block::Table(rows) => {
                writer.end_table();
                for row in &rows {
                    writer.table_row(budget, row)?;
                }
                writer.end_table();
            }
        }
    }
    writer.end_page(budget)?;
    Ok(places)
}

/// The page's rows as blocks, with each figure's place (`due`: the line it goes before,
/// and its number, in order) as a block of its own.
fn blocks(lines: &[Line], style: &Style, rules: &[(f32, f32, f32)], due: &[(usize, usize)]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut due = due.iter().peekable();
    // The open paragraph's widest line, and the list's markers' indents.
    let mut widest = 0.0f32;
    let mut list_indents: Vec<f32> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        while let Some((_, n)) = due.next_if(|(before, _)| *before <= index) {
            list_indents.clear();
            blocks.push(Block::Figure(*n));
        }
        let line = &lines[index];
        // A table first: its header row may well be bold.
        if let Some((rows, used)) = table(&lines[index..], rules) {
            list_indents.clear();
            blocks.push(Block::Table(rows));
            index += used;
            continue;
        }
        let spans: Vec<&Span> = line.spans.iter().collect();
        if let Some(level) = style.heading_level(&spans) {
            list_indents.clear();
            match blocks.last_mut() {
                // A heading set on two lines is one heading.
                Some(Block::Heading(last, text)) if *last == level && line.before == Break::Line => {
                    join_line(text, &line.text())
                }
                _ => blocks.push(Block::Heading(level, line.text())),
            }
            index += 1;
            continue;
        }
        let text = line.text();
        let tolerance = line.size / 2.0;
        if let Some((mark, rest)) = list_marker(&text) {
            while list_indents.last().is_some_and(|&indent| indent > line.left + tolerance) {
                list_indents.pop();
            }
            if list_indents.last().is_none_or(|&indent| line.left > indent + tolerance) {
                list_indents.push(line.left);
            }
            // Another kind of list after a gap is another list.
            if line.before != Break::Line && matches!(blocks.last(), Some(Block::Item(_, last, _)) if *last != mark) {
                blocks.push(Block::EndList);
            }
            blocks.push(Block::Item(list_indents.len() - 1, mark, rest.to_owned()));
            index += 1;
            continue;
        }
        let continues_item = line.before == Break::Line
            && list_indents.last().is_some_and(|&indent| line.left > indent + tolerance)
            && matches!(blocks.last(), Some(Block::Item(..)));
        if continues_item {
            if let Some(Block::Item(_, _, item)) = blocks.last_mut() {
                join_line(item, &text);
            }
            index += 1;
            continue;
        }
        list_indents.clear();
        let previous = index.checked_sub(1).map(|i| &lines[i]);
        // A short line ending a sentence ends its paragraph, though no gap follows it.
        // So does a first line set in from the line before (paragraphs marked by indent).
        let ended = previous.is_some_and(|p| {
            let short = p.right < widest - 3.0 * p.size && p.text().ends_with(['.', '!', '?', ':']);
            let indented = line.left > p.left + 0.8 * line.size && line.left < p.left + 6.0 * line.size;
            short || indented
        });
        match blocks.last_mut() {
            Some(Block::Paragraph(paragraph)) if line.before == Break::Line && !ended => {
                join_line(paragraph, &text);
                widest = widest.max(line.right);
            }
            _ => {
                blocks.push(Block::Paragraph(text));
                widest = line.right;
            }
        }
        index += 1;
    }
    blocks.extend(due.map(|(_, n)| Block::Figure(*n)));
    blocks
}

/// A table at the start of `lines`: rows of two cells or more (at least two rows) whose
/// cells fall into shared columns. A row of fewer cells that ruling lines put in the same
/// band as the row before it, or whose first column is empty (no gap before it), is that
/// row's next line. Returns the rows and
/// how many lines they used.
fn table(lines: &[Line], rules: &[(f32, f32, f32)]) -> Option<(Vec<Vec<String>>, usize)> {
    if lines.first().is_none_or(|l| l.cells.len() < 2) {
        return None;
    }
    // The candidates: full rows, and rows of one cell right under the row before.
    let mut candidates = 1;
    while candidates < lines.len() && lines[candidates].before != Break::Block {
        let line = &lines[candidates];
        if line.cells.len() < 2 && line.before != Break::Line {
            break;
        }
        candidates += 1;
    }
    // The columns: the full rows' cells' extents, overlapping ones merged.
    let mut extents: Vec<(f32, f32)> = lines[..candidates]
        .iter()
        .filter(|l| l.cells.len() >= 2)
        .flat_map(|l| l.cells.iter().map(|c| (c.0, c.1)))
        .collect();
    extents.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut columns: Vec<(f32, f32)> = Vec::new();
    for (left, right) in extents {
        match columns.last_mut() {
            Some(last) if left <= last.1 => last.1 = last.1.max(right),
            _ => columns.push((left, right)),
        }
    }
    if columns.len() < 2 {
        return None;
    }
    let (table_left, table_right) = (columns[0].0, columns[columns.len() - 1].1);
    // Which band of the horizontal rules across the table a row sits in.
    let across: Vec<f32> =
        rules.iter().filter(|r| r.0 <= table_left + 2.0 && r.1 >= table_right - 2.0).map(|r| r.2).collect();
    let ruled = across.len() >= 2;
    let band = |y: f32| across.iter().filter(|&&rule| rule < y).count();
    let column_of = |cell: &(f32, f32, String)| {
        columns
            .iter()
            .position(|c| cell.0 < c.1 && cell.1 > c.0)
            .unwrap_or_else(|| columns.iter().position(|c| cell.0 < c.0).unwrap_or(columns.len() - 1))
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    for (index, line) in lines[..candidates].iter().enumerate() {
        // A row of fewer cells than columns continues the row above when its first column
        // is empty, or when it sits between the same ruling lines (a booktabs table's rows,
        // full and between the same two rules, stay rows).
        let continues = index > 0
            && line.before == Break::Line
            && line.left >= table_left - line.size
            && line.right <= table_right + line.size
            && line.cells.len() < columns.len()
            && (column_of(&line.cells[0]) > 0 || (ruled && band(line.y) == band(lines[index - 1].y)));
        if !continues && line.cells.len() < 2 {
            break;
        }
        if !continues {
            rows.push(vec![String::new(); columns.len()]);
        }
        if let Some(row) = rows.last_mut() {
            for cell in &line.cells {
                join_line(&mut row[column_of(cell)], &cell.2);
            }
        }
        used = index + 1;
    }
    (rows.len() >= 2).then_some((rows, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn span(left: f32, top: f32, text: &str, size: f32, bold: bool) -> (RotatedRect, Span) {
        // Helvetica's average width: half an em a character.
        let width = text.chars().count() as f32 * size * 0.5;
        let rect = RotatedRect { cx: left + width / 2.0, cy: top + size * 0.6, width, height: size * 1.2, angle: 0.0 };
        (rect, Span { text: text.to_owned(), size, bold })
    }

    fn written(pages: Vec<TextPage>) -> String {
        let style = Style::of(&pages.iter().collect::<Vec<_>>());
        let mut budget = TextBudget::new(100_000, Duration::from_secs(5));
        let mut writer = MarkdownWriter::default();
        for page in pages {
            write_page(page, &style, &mut writer, &mut budget, &[]).expect("within the budget");
        }
        budget.trim_end();
        budget.finish().0
    }

    fn page(spans: Vec<(RotatedRect, Span)>) -> TextPage {
        TextPage { height: 792.0, spans, rules: Vec::new() }
    }

    #[test]
    fn headings_rank_by_size_and_bold_body_lines_come_after() {
        let text = written(vec![page(vec![
            span(72.0, 80.0, "Harbour survey", 20.0, true),
            span(72.0, 110.0, "Dredging", 14.0, false),
            span(72.0, 130.0, "The channel is dredged every spring before the ferries run.", 10.0, false),
            span(72.0, 143.0, "Silt is taken to the northern bank.", 10.0, false),
            span(72.0, 165.0, "Costs", 10.0, true),
            span(72.0, 180.0, "The council pays for the work from harbour dues.", 10.0, false),
        ])]);
        assert_eq!(
            text,
            "# Harbour survey\n\n## Dredging\n\nThe channel is dredged every spring before the ferries run. Silt is taken to \
             the northern bank.\n\n### Costs\n\nThe council pays for the work from harbour dues."
        );
    }

    #[test]
    fn a_lone_letter_or_number_in_large_type_is_no_heading() {
        // A figure's labels set as large as a heading: "T" and "10" are read as text.
        let text = written(vec![page(vec![
            span(72.0, 80.0, "Harbour survey", 20.0, true),
            span(72.0, 110.0, "Tides", 14.0, false),
            span(200.0, 130.0, "T", 14.0, false),
            span(72.0, 160.0, "The tide rises twice a day at the northern quay.", 10.0, false),
            span(200.0, 190.0, "10", 14.0, false),
        ])]);
        assert_eq!(text, "# Harbour survey\n\n## Tides\n\nT\n\nThe tide rises twice a day at the northern quay.\n\n10");
    }

    #[test]
    fn lists_keep_their_marks_depth_and_wrapped_lines() {
        let text = written(vec![page(vec![
            span(72.0, 100.0, "Check before sailing:", 10.0, false),
            span(72.0, 115.0, "•", 10.0, false),
            span(84.0, 115.0, "the pilot's licence,", 10.0, false),
            span(84.0, 127.0, "signed by the master", 10.0, false),
            span(90.0, 139.0, "- a copy on board", 10.0, false),
            span(72.0, 151.0, "• the tide table", 10.0, false),
            span(72.0, 175.0, "1. Call the harbour", 10.0, false),
            span(72.0, 187.0, "2) Wait for the pilot", 10.0, false),
        ])]);
        assert_eq!(
            text,
            "Check before sailing:\n\n- the pilot's licence, signed by the master\n  - a copy on board\n- the tide \
             table\n\n1. Call the harbour\n1. Wait for the pilot"
        );
    }

    #[test]
    fn aligned_cells_are_a_table_and_a_ruled_cell_on_two_lines_is_one_cell() {
        let row = |top: f32, cells: &[(f32, &str)]| {
            cells.iter().map(|&(x, t)| span(x, top, t, 10.0, false)).collect::<Vec<_>>()
        };
        let mut spans = vec![span(72.0, 80.0, "Parts in stock", 10.0, false)];
        spans.extend(row(100.0, &[(72.0, "Part"), (200.0, "Code"), (300.0, "Count")]));
        spans.extend(row(118.0, &[(72.0, "Lip seal"), (200.0, "LS-40"), (300.0, "12")]));
        spans.extend(row(130.0, &[(72.0, "for pumps")]));
        spans.extend(row(148.0, &[(72.0, "Gasket"), (200.0, "GK-7"), (300.0, "3")]));
        let rules = [97.0, 115.0, 145.0, 162.0].iter().map(|&y| (70.0, 340.0, y)).collect();
        let text = written(vec![TextPage { height: 792.0, spans, rules }]);
        assert_eq!(
            text,
            "Parts in stock\n\n| Part | Code | Count |\n| --- | --- | --- |\n| Lip seal for pumps | LS-40 | 12 |\n| Gasket | \
             GK-7 | 3 |"
        );
    }

    #[test]
    fn an_unruled_table_continues_a_cell_only_where_its_first_column_is_empty() {
        let row = |top: f32, cells: &[(f32, &str)]| {
            cells.iter().map(|&(x, t)| span(x, top, t, 10.0, false)).collect::<Vec<_>>()
        };
        let mut spans = row(100.0, &[(72.0, "Berth"), (200.0, "Opens")]);
        spans.extend(row(112.0, &[(72.0, "North"), (200.0, "June, after")]));
        spans.extend(row(124.0, &[(200.0, "the repairs")]));
        spans.extend(row(136.0, &[(72.0, "South"), (200.0, "May")]));
        let text = written(vec![page(spans)]);
        assert_eq!(text, "| Berth | Opens |\n| --- | --- |\n| North | June, after the repairs |\n| South | May |");
    }

    #[test]
    fn running_headers_and_page_numbers_are_dropped_and_hyphenated_words_joined() {
        let pages = (1..=3)
            .map(|n| {
                page(vec![
                    span(72.0, 30.0, "Harbour Authority — Annual Report", 9.0, false),
                    span(72.0, 100.0, &format!("Page {n} tells of the dredg-"), 10.0, false),
                    span(72.0, 112.0, "ing of berth seven and its well-", 10.0, false),
                    span(72.0, 124.0, "Known costs.", 10.0, false),
                    span(300.0, 760.0, &format!("{n}"), 9.0, false),
                ])
            })
            .collect();
        let text = written(pages);
        assert!(!text.contains("Annual Report"), "{text}");
        assert!(!text.contains("\n2\n") && !text.ends_with('3'), "{text}");
        assert!(text.starts_with("Page 1 tells of the dredging of berth seven and its well- Known costs."), "{text}");
        assert_eq!(text.matches("dredging").count(), 3, "{text}");
    }

    #[test]
    fn a_heading_that_opens_every_page_stays_a_heading() {
        let pages = (1..=3)
            .map(|n| {
                page(vec![
                    span(72.0, 40.0, &format!("Chapter {n}"), 18.0, true),
                    span(72.0, 100.0, &format!("The chapter numbered {n} tells of the harbour."), 10.0, false),
                    span(72.0, 112.0, "It goes on for a line or two more.", 10.0, false),
                ])
            })
            .collect();
        let text = written(pages);
        assert_eq!(text.matches("# Chapter").count(), 3, "{text}");
    }

    #[test]
    fn two_columns_of_prose_are_read_one_after_the_other() {
        let mut spans = vec![span(72.0, 60.0, "Minutes of the harbour council", 16.0, false)];
        for row in 0..20 {
            let top = 100.0 + 12.0 * row as f32;
            spans.push(span(72.0, top, &format!("left column line {row:02} runs on to its end"), 10.0, false));
            spans.push(span(320.0, top, &format!("right column line {row:02} runs on to its end"), 10.0, false));
        }
        let text = written(vec![page(spans)]);
        let left_end = text.find("left column line 19").expect("left");
        let right_start = text.find("right column line 00").expect("right");
        assert!(text.starts_with("# Minutes of the harbour council\n\n"), "{text}");
        assert!(left_end < right_start, "{text}");
        assert!(!text.contains('|'), "prose columns are no table: {text}");
    }

    #[test]
    fn markers_and_joins_follow_the_rules() {
        assert_eq!(list_marker("• tide"), Some((ListMark::Bullet, "tide")));
        assert_eq!(list_marker("12. Call"), Some((ListMark::Numbered, "Call")));
        assert_eq!(list_marker("(a) first"), Some((ListMark::Numbered, "first")));
        assert_eq!(list_marker("3.5 million"), None);
        assert_eq!(list_marker("2024. The year"), None);
        assert_eq!(list_marker("e.g. this"), None);
        assert_eq!(list_marker("-5 degrees"), None);
        let mut text = "dredg-".to_owned();
        join_line(&mut text, "ing");
        assert_eq!(text, "dredging");
        let mut text = "1990-".to_owned();
        join_line(&mut text, "and");
        assert_eq!(text, "1990- and");
        assert_eq!(margin_key("Page 12 of  40"), "page # of #");
    }
}
