//! Word-processing and presentation documents: DOCX and PPTX (OOXML), ODT and ODP
//! (OpenDocument), read from their checked containers part by part into the budget.

use crate::budget::{Stop, TextBudget};
use crate::container::{Container, ContainerError};
use crate::images::ImageCollector;
use crate::markdown::{ListMark, MarkdownWriter};
use crate::xml::{Node, XmlError, attribute, local, walk};
use std::collections::HashMap;

/// Why an office document yields no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The container breaks a safety rule: the file is refused.
    Unsafe { code: &'static str, message: String },
    /// The file cannot be read (corrupt, truncated, unexpected layout).
    Unreadable(String),
    /// The time limit passed.
    Time,
}

impl From<ContainerError> for ReadError {
    fn from(error: ContainerError) -> Self {
        match error {
            ContainerError::Unsafe { code, message } => Self::Unsafe { code, message },
            ContainerError::Corrupt(message) => Self::Unreadable(message),
        }
    }
}

impl From<XmlError> for ReadError {
    fn from(error: XmlError) -> Self {
        match error {
            XmlError::Doctype => {
                Self::Unsafe { code: "xml_doctype", message: "an XML part declares a DOCTYPE".to_owned() }
            }
            XmlError::Malformed(message) => Self::Unreadable(format!("malformed XML: {message}")),
        }
    }
}

/// A stop while walking: the budget ends the document cleanly, time fails it.
#[derive(Debug)]
pub(crate) enum WalkStop {
    Read(ReadError),
    Budget,
}

impl From<XmlError> for WalkStop {
    fn from(error: XmlError) -> Self {
        Self::Read(error.into())
    }
}

pub(crate) fn stop(error: Stop) -> WalkStop {
    match error {
        Stop::Budget => WalkStop::Budget,
        Stop::Time => WalkStop::Read(ReadError::Time),
    }
}

/// How many XML nodes pass between two looks at the clock.
const NODES_PER_TIME_CHECK: u32 = 4096;

/// Collects paragraphs and table rows from OOXML (`w:` and `a:` share local names:
/// `p`, `t`, `tab`, `br`, `tbl`, `tr`, `tc`).
#[derive(Debug, Default)]
struct Paragraphs {
    /// Text of the paragraph being read.
    para: String,
    /// Open tables, innermost last: the row being built and the cell being filled.
    tables: Vec<(Vec<String>, String)>,
    /// Inside an element whose text counts (`t` for OOXML; the paragraph itself for ODF).
    text_depth: u32,
    /// Inside an element whose text is skipped (a slide-number field in notes).
    skip_depth: u32,
    nodes: u32,
    /// Cap on a paragraph's bytes: no paragraph grows past what the budget could keep.
    para_cap: usize,
    /// Set when the document is written as markdown: the writer and what the paragraph
    /// being read is.
    markdown: Option<(MarkdownWriter, ParagraphKind)>,
    /// A slide whose heading waits for its title: the slide's first paragraph.
    slide_title: Option<u32>,
    /// A DOCX's footnotes by id (markdown), the ones referred to since the last heading
    /// (their number and text), and how many have been referred to.
    footnotes: HashMap<String, String>,
    pending_notes: Vec<(usize, String)>,
    notes_referred: usize,
    /// An ODT note being read (markdown): the text of the paragraph it sits in.
    note_in: Option<String>,
    /// Gathering pictures for description: the ones referred to in the paragraph being
    /// read (OOXML relationship ids, ODF hrefs), and each one placed with its offset.
    pictures: Option<Vec<String>>,
    placed: Vec<(String, usize)>,
}

/// What a paragraph is, as its properties (DOCX) or element (ODT) say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ParagraphKind {
    #[default]
    Body,
    Heading(u8),
    Item(usize, ListMark),
}

impl Paragraphs {
    fn new(markdown: bool) -> Self {
        Self {
            para_cap: PARAGRAPH_CAP_BYTES,
            markdown: markdown.then(|| (MarkdownWriter::default(), ParagraphKind::Body)),
            ..Self::default()
        }
    }

    /// The same, noting where pictures sit when `images` is gathering them.
    fn with_pictures(mut self, images: &Option<&mut ImageCollector>) -> Self {
        self.pictures = images.is_some().then(Vec::new);
        self
    }

    /// A picture referred to here; it is placed after the paragraph it sits in.
    fn refer_to_picture(&mut self, target: Option<String>) {
        if let (Some(pictures), Some(target)) = (&mut self.pictures, target) {
            pictures.push(target);
        }
    }

    /// Places the pictures referred to since the last block, at a block boundary (outside
    /// tables: a picture in a cell goes after its table's row).
    fn place_pictures(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        if !self.tables.is_empty() || self.pictures.as_ref().is_none_or(Vec::is_empty) {
            return Ok(());
        }
        let offset = match &mut self.markdown {
            Some((writer, _)) => writer.place(budget).map_err(stop)?,
            None => budget.len(),
        };
        let pictures = self.pictures.as_mut().map(std::mem::take).unwrap_or_default();
        self.placed.extend(pictures.into_iter().map(|target| (target, offset)));
        Ok(())
    }

    /// Says what the paragraph being read is (markdown only; text ignores it).
    fn set_kind(&mut self, kind: ParagraphKind) {
        if let Some((_, current)) = &mut self.markdown {
            *current = kind;
        }
    }

    fn kind(&self) -> ParagraphKind {
        self.markdown.as_ref().map_or(ParagraphKind::Body, |(_, kind)| *kind)
    }

    fn text(&mut self, s: &str) {
        if self.text_depth > 0 && self.skip_depth == 0 && self.para.len() < self.para_cap {
            self.para.push_str(s);
        }
    }

    fn end_paragraph(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        let para = std::mem::take(&mut self.para);
        let kind = self.kind();
        self.set_kind(ParagraphKind::Body);
        if let Some((_, cell)) = self.tables.last_mut() {
            if !para.trim().is_empty() {
                if !cell.is_empty() {
                    cell.push(' ');
                }
                cell.push_str(para.trim().replace(['\n', '\t'], " ").as_str());
            }
            return Ok(());
        }
        if para.trim().is_empty() {
            return self.place_pictures(budget);
        }
        if self.markdown.is_some() {
            // A section's footnotes close it, before the next heading.
            if matches!(kind, ParagraphKind::Heading(_)) && self.slide_title.is_none() {
                self.write_footnotes(budget)?;
            }
            let (Some((writer, _)), title) = (&mut self.markdown, self.slide_title.take()) else { return Ok(()) };
            match (title, kind) {
                (Some(number), _) => writer.heading(budget, 2, &format!("Slide {number} — {para}")),
                (None, ParagraphKind::Body) => writer.paragraph(budget, &para),
                (None, ParagraphKind::Heading(level)) => writer.heading(budget, level, &para),
                (None, ParagraphKind::Item(depth, mark)) => writer.list_item(budget, depth, mark, &para),
            }
            .map_err(stop)?;
            return self.place_pictures(budget);
        }
        budget.push(para.trim_end()).map_err(stop)?;
        budget.push("\n").map_err(stop)?;
        self.place_pictures(budget)
    }

    /// A footnote referred to here (markdown, DOCX): its mark in the text, its text kept for
    /// the end of the section.
    fn refer_to_footnote(&mut self, id: &str) {
        if let Some(note) = self.footnotes.get(id).cloned() {
            self.cite(note);
        }
    }

    /// A note cited here: its number's mark in the paragraph, its text kept for the end of
    /// the section.
    fn cite(&mut self, note: String) {
        self.notes_referred += 1;
        let number = self.notes_referred;
        self.pending_notes.push((number, note));
        self.para.push_str(&format!("[^{number}]"));
    }

    /// An ODT note starts inside the paragraph being read (markdown): its body is read
    /// aside, the paragraph waits.
    fn start_note(&mut self) {
        if self.markdown.is_some() && self.note_in.is_none() {
            self.note_in = Some(std::mem::take(&mut self.para));
        }
    }

    /// The ODT note ends: its mark goes into the paragraph, its text to the section's end.
    fn end_note(&mut self) {
        let Some(paragraph) = self.note_in.take() else { return };
        let note = std::mem::replace(&mut self.para, paragraph);
        self.cite(note.split_whitespace().collect::<Vec<_>>().join(" "));
    }

    /// Writes the footnotes referred to since the last heading, as `[^N]: text`.
    fn write_footnotes(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        let notes = std::mem::take(&mut self.pending_notes);
        if let Some((writer, _)) = &mut self.markdown {
            for (number, text) in notes {
                writer.paragraph(budget, &format!("[^{number}]: {text}")).map_err(stop)?;
            }
        }
        Ok(())
    }

    /// Starts slide `number` (markdown): its first paragraph will be its heading.
    fn start_slide(&mut self, budget: &mut TextBudget, number: u32) -> Result<(), WalkStop> {
        self.untitled_slide(budget)?;
        self.slide_title = Some(number);
        Ok(())
    }

    /// Writes the heading of a slide that had no paragraph to title it.
    fn untitled_slide(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        if let (Some(number), Some((writer, _))) = (self.slide_title.take(), &mut self.markdown) {
            writer.heading(budget, 2, &format!("Slide {number}")).map_err(stop)?;
        }
        Ok(())
    }

    /// Starts the speaker notes of the slide read last (markdown: a heading under it).
    fn start_notes(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        self.untitled_slide(budget)?;
        match &mut self.markdown {
            Some((writer, _)) => writer.heading(budget, 3, "Notes").map_err(stop),
            None => budget.push("Notes:\n").map_err(stop),
        }
    }

    fn end_list(&mut self) {
        if let Some((writer, _)) = &mut self.markdown {
            writer.end_list();
        }
    }

    fn start_table(&mut self) {
        self.tables.push((Vec::new(), String::new()));
    }

    fn end_table(&mut self) {
        self.tables.pop();
        if self.tables.is_empty()
            && let Some((writer, _)) = &mut self.markdown
        {
            writer.end_table();
        }
    }

    fn start_row(&mut self) {
        if let Some((row, _)) = self.tables.last_mut() {
            row.clear();
        }
    }

    fn end_cell(&mut self) {
        if let Some((row, cell)) = self.tables.last_mut() {
            row.push(std::mem::take(cell));
        }
    }

    fn end_row(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        let Some((row, _)) = self.tables.last_mut() else { return Ok(()) };
        let cells = std::mem::take(row);
        if self.tables.len() == 1 && self.markdown.is_some() {
            self.untitled_slide(budget)?;
            if let Some((writer, _)) = &mut self.markdown {
                return writer.table_row(budget, &cells).map_err(stop);
            }
        }
        let line = cells.join("\t");
        if line.trim().is_empty() {
            return Ok(());
        }
        let depth = self.tables.len();
        if depth > 1 {
            // A nested table's row lands in the enclosing cell.
            let (_, outer_cell) = &mut self.tables[depth - 2];
            if !outer_cell.is_empty() {
                outer_cell.push(' ');
            }
            outer_cell.push_str(&line.replace('\t', " "));
            return Ok(());
        }
        budget.push(line.trim_end()).map_err(stop)?;
        budget.push("\n").map_err(stop)
    }

    fn tick(&mut self, budget: &TextBudget) -> Result<(), WalkStop> {
        self.nodes = self.nodes.wrapping_add(1);
        if self.nodes.is_multiple_of(NODES_PER_TIME_CHECK) {
            budget.check_time().map_err(stop)?;
        }
        Ok(())
    }
}

/// No paragraph buffer grows past this; the budget bounds what is kept anyway.
const PARAGRAPH_CAP_BYTES: usize = 8 << 20;

/// Walks one OOXML part into the budget. `Ok(true)` when the budget is spent. With `styles`
/// (DOCX written as markdown) each paragraph's style, outline level and numbering say
/// whether it is a heading or a list item.
fn ooxml_part(
    xml: &[u8],
    budget: &mut TextBudget,
    state: &mut Paragraphs,
    skip_fields: bool,
    styles: Option<&WordStyles>,
    slide: bool,
) -> Result<bool, ReadError> {
    let mut numbering = (None::<String>, 0u8);
    // A slide's shapes (markdown): whether the shape being read is a body placeholder,
    // whose paragraphs are bulleted unless they say otherwise, and the paragraph's level.
    let mut body_shape = false;
    let mut level = 0usize;
    let result = walk(xml, |node| -> Result<bool, WalkStop> {
        state.tick(budget)?;
        match node {
            Node::Start(e) => match local(e) {
                "t" => state.text_depth += 1,
                "fld" if skip_fields => state.skip_depth += 1,
                "tbl" => state.start_table(),
                "tr" => state.start_row(),
                "tab" => state.para.push('\t'),
                "br" | "cr" => state.para.push('\n'),
                "p" => {
                    numbering = (None, 0);
                    level = 0;
                    state.set_kind(if slide && body_shape {
                        ParagraphKind::Item(0, ListMark::Bullet)
                    } else {
                        ParagraphKind::Body
                    });
                }
                "sp" if slide => body_shape = false,
                name @ ("ph" | "pPr") if slide => slide_shape(state, e, name, &mut body_shape, &mut level),
                "blip" => state.refer_to_picture(attribute(e, "embed")),
                _ => {}
            },
            Node::Empty(e) => match local(e) {
                "tab" => state.para.push('\t'),
                "br" | "cr" => state.para.push('\n'),
                "tc" => state.end_cell(),
                name @ ("ph" | "pPr" | "buNone" | "buChar" | "buAutoNum") if slide => {
                    slide_shape(state, e, name, &mut body_shape, &mut level)
                }
                "footnoteReference" => {
                    if let Some(id) = attribute(e, "id") {
                        state.refer_to_footnote(&id);
                    }
                }
                "blip" => state.refer_to_picture(attribute(e, "embed")),
                name @ ("pStyle" | "outlineLvl" | "ilvl" | "numId") => {
                    if let (Some(styles), Some(value)) = (styles, attribute(e, "val")) {
                        match name {
                            "pStyle" => state.set_kind(styles.of_style(&value)),
                            "outlineLvl" => {
                                if let Some(level) = outline_level(&value) {
                                    state.set_kind(ParagraphKind::Heading(level));
                                }
                            }
                            "ilvl" => numbering.1 = value.parse().unwrap_or(0),
                            _ => {
                                numbering.0 = Some(value);
                                if let Some(kind) = styles.of_numbering(numbering.0.as_deref(), numbering.1) {
                                    state.set_kind(kind);
                                }
                            }
                        }
                    }
                }
                _ => {}
            },
            Node::End(name) => match name {
                "t" => state.text_depth = state.text_depth.saturating_sub(1),
                "fld" if skip_fields => state.skip_depth = state.skip_depth.saturating_sub(1),
                "p" => state.end_paragraph(budget)?,
                "tc" => state.end_cell(),
                "tr" => state.end_row(budget)?,
                "tbl" => state.end_table(),
                // A slide's picture is a shape of its own, in no paragraph.
                "pic" if slide => state.place_pictures(budget)?,
                _ => {}
            },
            Node::Text(text) => state.text(text),
        }
        Ok(true)
    });
    match result {
        Ok(()) => Ok(false),
        Err(WalkStop::Budget) => Ok(true),
        Err(WalkStop::Read(error)) => Err(error),
    }
}

/// What a slide's shape or paragraph property says (markdown): a placeholder of the body
/// (no type, `body` or `obj`) bullets its paragraphs; a paragraph's `lvl` is its depth, and
/// `buNone`, `buChar` and `buAutoNum` say whether and how it is marked.
fn slide_shape(
    state: &mut Paragraphs,
    e: &quick_xml::events::BytesStart<'_>,
    name: &str,
    body_shape: &mut bool,
    level: &mut usize,
) {
    match name {
        "ph" => *body_shape = attribute(e, "type").is_none_or(|kind| matches!(kind.as_str(), "body" | "obj")),
        "pPr" => {
            *level = attribute(e, "lvl").and_then(|l| l.parse().ok()).unwrap_or(0).min(8);
            if let ParagraphKind::Item(_, mark) = state.kind() {
                state.set_kind(ParagraphKind::Item(*level, mark));
            }
        }
        "buNone" => state.set_kind(ParagraphKind::Body),
        "buChar" => state.set_kind(ParagraphKind::Item(*level, ListMark::Bullet)),
        _ => state.set_kind(ParagraphKind::Item(*level, ListMark::Numbered)),
    }
}

/// A DOCX outline level (`0` is the top; `9` is body text) as a heading level.
fn outline_level(value: &str) -> Option<u8> {
    value.parse::<u8>().ok().filter(|level| *level < 9).map(|level| level + 1)
}

/// What a DOCX's styles and numbering say about its paragraphs: which styles are headings
/// (by their name, `heading N` or `Title`, or their outline level) or lists, and which list
/// levels are numbered.
#[derive(Debug, Default)]
struct WordStyles {
    styles: HashMap<String, ParagraphKind>,
    /// `numId` to its abstract numbering's id.
    nums: HashMap<String, String>,
    /// Abstract numbering id and level to whether it counts or bullets.
    levels: HashMap<(String, u8), ListMark>,
}

impl WordStyles {
    fn read(container: &mut Container<'_>) -> Result<Self, ReadError> {
        let mut styles = Self::default();
        if container.contains("word/styles.xml") {
            let xml = container.read("word/styles.xml")?;
            styles.read_styles(&xml)?;
        }
        if container.contains("word/numbering.xml") {
            let xml = container.read("word/numbering.xml")?;
            styles.read_numbering(&xml)?;
        }
        Ok(styles)
    }

    fn read_styles(&mut self, xml: &[u8]) -> Result<(), ReadError> {
        let mut current: Option<(String, ParagraphKind)> = None;
        walk(xml, |node| -> Result<bool, ReadError> {
            match node {
                Node::Start(e) if local(e) == "style" => {
                    current = attribute(e, "styleId").map(|id| (id, ParagraphKind::Body));
                }
                Node::Empty(e) => {
                    let Some((_, kind)) = &mut current else { return Ok(true) };
                    let value = attribute(e, "val").unwrap_or_default();
                    match local(e) {
                        "name" => {
                            let name = value.to_ascii_lowercase();
                            if name == "title" {
                                *kind = ParagraphKind::Heading(1);
                            } else if let Some(level) = name.strip_prefix("heading ").and_then(|n| n.parse::<u8>().ok())
                            {
                                *kind = ParagraphKind::Heading(level.clamp(1, 9));
                            } else if name.starts_with("list bullet") {
                                *kind = ParagraphKind::Item(0, ListMark::Bullet);
                            } else if name.starts_with("list number") {
                                *kind = ParagraphKind::Item(0, ListMark::Numbered);
                            }
                        }
                        "outlineLvl" => {
                            if let Some(level) = outline_level(&value) {
                                *kind = ParagraphKind::Heading(level);
                            }
                        }
                        _ => {}
                    }
                }
                Node::End("style") => {
                    if let Some((id, kind)) = current.take().filter(|(_, kind)| *kind != ParagraphKind::Body) {
                        self.styles.insert(id, kind);
                    }
                }
                _ => {}
            }
            Ok(true)
        })
    }

    fn read_numbering(&mut self, xml: &[u8]) -> Result<(), ReadError> {
        let mut abstract_id: Option<String> = None;
        let mut level = 0u8;
        let mut num_id: Option<String> = None;
        walk(xml, |node| -> Result<bool, ReadError> {
            match node {
                Node::Start(e) => match local(e) {
                    "abstractNum" => abstract_id = attribute(e, "abstractNumId"),
                    "lvl" => level = attribute(e, "ilvl").and_then(|l| l.parse().ok()).unwrap_or(0),
                    "num" => num_id = attribute(e, "numId"),
                    _ => {}
                },
                Node::Empty(e) => match local(e) {
                    "numFmt" => {
                        if let (Some(id), Some(format)) = (&abstract_id, attribute(e, "val")) {
                            let mark = if matches!(format.as_str(), "bullet" | "none") {
                                ListMark::Bullet
                            } else {
                                ListMark::Numbered
                            };
                            self.levels.insert((id.clone(), level), mark);
                        }
                    }
                    "abstractNumId" => {
                        if let (Some(num), Some(id)) = (num_id.take(), attribute(e, "val")) {
                            self.nums.insert(num, id);
                        }
                    }
                    _ => {}
                },
                Node::End("abstractNum") => abstract_id = None,
                _ => {}
            }
            Ok(true)
        })
    }

    /// A paragraph style's kind; a style the file does not describe is judged by its id
    /// (`Heading2`, `Title`), as Word's built-in ids read.
    fn of_style(&self, id: &str) -> ParagraphKind {
        if let Some(kind) = self.styles.get(id) {
            return *kind;
        }
        let lower = id.to_ascii_lowercase();
        match lower.strip_prefix("heading").and_then(|n| n.parse::<u8>().ok()) {
            Some(level) => ParagraphKind::Heading(level.clamp(1, 9)),
            None if lower == "title" => ParagraphKind::Heading(1),
            None => ParagraphKind::Body,
        }
    }

    /// A numbered paragraph's list item (`numId` 0 takes numbering away).
    fn of_numbering(&self, num_id: Option<&str>, level: u8) -> Option<ParagraphKind> {
        let num_id = num_id.filter(|id| *id != "0")?;
        let mark = self
            .nums
            .get(num_id)
            .and_then(|abstract_id| self.levels.get(&(abstract_id.clone(), level)))
            .copied()
            .unwrap_or(ListMark::Bullet);
        Some(ParagraphKind::Item(usize::from(level), mark))
    }
}

/// Members whose name is `prefix<number>.xml`, in numeric order.
fn numbered_parts(container: &Container<'_>, prefix: &str) -> Vec<String> {
    let mut parts: Vec<(u32, String)> = container
        .names()
        .iter()
        .filter_map(|name| {
            let number = name.strip_prefix(prefix)?.strip_suffix(".xml")?.parse().ok()?;
            Some((number, name.clone()))
        })
        .collect();
    parts.sort();
    parts.into_iter().map(|(_, name)| name).collect()
}

/// DOCX: headers, the body (paragraphs and table rows), then footers. As markdown, the
/// body's headings, lists and tables are marked as such.
pub fn docx(
    container: &mut Container<'_>,
    budget: &mut TextBudget,
    markdown: bool,
    mut images: Option<&mut ImageCollector>,
) -> Result<(), ReadError> {
    if !container.contains("word/document.xml") {
        return Err(ReadError::Unreadable("the container has no word/document.xml".to_owned()));
    }
    let styles = if markdown { Some(WordStyles::read(container)?) } else { None };
    let headers = numbered_parts(container, "word/header");
    let footers = numbered_parts(container, "word/footer");
    let parts = headers.into_iter().chain(["word/document.xml".to_owned()]).chain(footers);
    let mut state = Paragraphs::new(markdown).with_pictures(&images);
    if markdown && container.contains("word/footnotes.xml") {
        state.footnotes = footnotes(&container.read("word/footnotes.xml")?)?;
    }
    for part in parts {
        let xml = container.read(&part)?;
        let spent = ooxml_part(&xml, budget, &mut state, false, styles.as_ref(), false)?;
        offer_pictures(container, &part, &mut state, images.as_deref_mut())?;
        if spent {
            return Ok(());
        }
        // The body's last section's footnotes close it (before the footers).
        if part == "word/document.xml" {
            match state.write_footnotes(budget) {
                Ok(()) => {}
                Err(WalkStop::Budget) => return Ok(()),
                Err(WalkStop::Read(error)) => return Err(error),
            }
        }
    }
    Ok(())
}

/// A DOCX's footnotes by id, each one line of text (the separators Word keeps there are
/// not notes). At most [`PARAGRAPH_CAP_BYTES`] of each are kept.
fn footnotes(xml: &[u8]) -> Result<HashMap<String, String>, ReadError> {
    let mut notes = HashMap::new();
    let mut current: Option<(String, String)> = None;
    let mut in_text = false;
    walk(xml, |node| -> Result<bool, ReadError> {
        match node {
            Node::Start(e) if local(e) == "footnote" => {
                let note = attribute(e, "type").is_none_or(|kind| kind == "normal");
                current = attribute(e, "id").filter(|_| note).map(|id| (id, String::new()));
            }
            Node::Start(e) if local(e) == "t" => in_text = true,
            Node::Start(e) | Node::Empty(e) if matches!(local(e), "p" | "tab" | "br") => {
                if let Some((_, text)) = &mut current
                    && !text.is_empty()
                    && !text.ends_with(' ')
                {
                    text.push(' ');
                }
            }
            Node::End("t") => in_text = false,
            Node::End("footnote") => {
                if let Some((id, text)) = current.take() {
                    notes.insert(id, text.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
            Node::Text(part) if in_text => {
                if let Some((_, text)) = &mut current
                    && text.len() < PARAGRAPH_CAP_BYTES
                {
                    text.push_str(part);
                }
            }
            _ => {}
        }
        Ok(true)
    })?;
    Ok(notes)
}

/// PPTX: every slide's shape text and table rows, then its notes.
pub fn pptx(
    container: &mut Container<'_>,
    budget: &mut TextBudget,
    markdown: bool,
    mut images: Option<&mut ImageCollector>,
) -> Result<(), ReadError> {
    let slides = numbered_parts(container, "ppt/slides/slide");
    if slides.is_empty() && !container.contains("ppt/presentation.xml") {
        return Err(ReadError::Unreadable("the container has no ppt/presentation.xml".to_owned()));
    }
    // As markdown one writer runs through the deck: `## Slide N — title` a slide (its first
    // paragraph is its title), body placeholders' paragraphs as list items, tables, and the
    // speaker notes under `### Notes`.
    let mut deck = Paragraphs::new(markdown).with_pictures(&images);
    let spent = |result: Result<(), WalkStop>| match result {
        Ok(()) => Ok(false),
        Err(WalkStop::Budget) => Ok(true),
        Err(WalkStop::Read(error)) => Err(error),
    };
    for (index, slide) in slides.iter().enumerate() {
        let number = index as u32 + 1;
        let started = if markdown {
            deck.start_slide(budget, number)
        } else {
            budget.push(&format!("--- Slide {number} ---\n")).map_err(stop)
        };
        if spent(started)? {
            return Ok(());
        }
        let xml = container.read(slide)?;
        let mut plain = Paragraphs::new(false).with_pictures(&images);
        let state = if markdown { &mut deck } else { &mut plain };
        let slide_spent = ooxml_part(&xml, budget, state, false, None, markdown)?;
        offer_pictures(container, slide, state, images.as_deref_mut())?;
        if slide_spent {
            return Ok(());
        }
        if let Some(notes) = notes_for_slide(container, slide)? {
            let xml = container.read(&notes)?;
            if spent(state.start_notes(budget))? || ooxml_part(&xml, budget, state, true, None, false)? {
                return Ok(());
            }
        }
        budget.check_time().map_err(|_| ReadError::Time)?;
    }
    let _ = spent(deck.untitled_slide(budget))?;
    Ok(())
}

/// The notes part a slide's relationships name, if any.
fn notes_for_slide(container: &mut Container<'_>, slide: &str) -> Result<Option<String>, ReadError> {
    let file = slide.rsplit('/').next().unwrap_or_default();
    let rels = format!("ppt/slides/_rels/{file}.rels");
    if !container.contains(&rels) {
        return Ok(None);
    }
    let xml = container.read(&rels)?;
    let mut target = None;
    walk(&xml, |node| -> Result<bool, ReadError> {
        if let Node::Empty(e) | Node::Start(e) = node
            && local(e) == "Relationship"
            && attribute(e, "Type").is_some_and(|t| t.ends_with("/notesSlide"))
        {
            target = attribute(e, "Target");
            return Ok(false);
        }
        Ok(true)
    })?;
    Ok(target.and_then(|t| crate::container::part_path("ppt/slides", &t)).filter(|p| container.contains(p)))
}

/// ODT and ODP: paragraphs, headings, lists, tables and (ODP) slides with their notes,
/// from `content.xml`. As markdown (ODT), headings keep their outline level, list items
/// their depth and whether their list style counts, and tables their rows.
pub fn odf_text(
    container: &mut Container<'_>,
    budget: &mut TextBudget,
    markdown: bool,
    images: Option<&mut ImageCollector>,
) -> Result<(), ReadError> {
    if !container.contains("content.xml") {
        return Err(ReadError::Unreadable("the container has no content.xml".to_owned()));
    }
    let xml = container.read("content.xml")?;
    let mut state = Paragraphs::new(markdown).with_pictures(&images);
    let mut slide = 0u32;
    // The automatic list styles that count (their first level is a number style), the
    // style being read, and the open lists' marks, innermost last.
    let mut numbered_styles: Vec<String> = Vec::new();
    let mut list_style: Option<String> = None;
    let mut lists: Vec<ListMark> = Vec::new();
    let result = walk(&xml, |node| -> Result<bool, WalkStop> {
        state.tick(budget)?;
        match node {
            Node::Start(e) => match local(e) {
                name @ ("p" | "h") => {
                    if state.text_depth == 0 {
                        let level = attribute(e, "outline-level").and_then(|l| l.parse::<u8>().ok());
                        state.set_kind(match (name, lists.last()) {
                            ("h", _) => ParagraphKind::Heading(level.unwrap_or(1).clamp(1, 9)),
                            (_, Some(mark)) => ParagraphKind::Item(lists.len() - 1, *mark),
                            _ => ParagraphKind::Body,
                        });
                    }
                    state.text_depth += 1;
                }
                "table" => state.start_table(),
                "table-row" => state.start_row(),
                "list" => {
                    let named = attribute(e, "style-name");
                    let mark = match (&named, lists.last()) {
                        (Some(name), _) if numbered_styles.contains(name) => ListMark::Numbered,
                        (None, Some(outer)) => *outer,
                        _ => ListMark::Bullet,
                    };
                    lists.push(mark);
                }
                "list-style" => list_style = attribute(e, "name"),
                "list-level-style-number" => note_numbered(&mut list_style, e, &mut numbered_styles),
                "page" => start_page(&mut state, budget, &mut slide)?,
                "notes" => state.start_notes(budget)?,
                "note" => state.start_note(),
                "note-citation" if state.markdown.is_some() => state.skip_depth += 1,
                "tab" => state.text("\t"),
                "line-break" => state.text("\n"),
                "image" => state.refer_to_picture(attribute(e, "href")),
                _ => {}
            },
            Node::Empty(e) => match local(e) {
                // An empty slide is still a slide: the next ones keep their numbers.
                "page" => start_page(&mut state, budget, &mut slide)?,
                "s" => {
                    let count = attribute(e, "c").and_then(|c| c.parse::<usize>().ok()).unwrap_or(1).min(64);
                    state.text(&" ".repeat(count));
                }
                "tab" => state.text("\t"),
                "line-break" => state.text("\n"),
                "table-cell" | "covered-table-cell" => state.end_cell(),
                "list-level-style-number" => note_numbered(&mut list_style, e, &mut numbered_styles),
                "image" => state.refer_to_picture(attribute(e, "href")),
                _ => {}
            },
            Node::End(name) => match name {
                "p" | "h" => {
                    state.text_depth = state.text_depth.saturating_sub(1);
                    if state.text_depth == 0 {
                        state.end_paragraph(budget)?;
                    }
                }
                "table-cell" | "covered-table-cell" => state.end_cell(),
                "table-row" => state.end_row(budget)?,
                "table" => state.end_table(),
                "list" => {
                    lists.pop();
                    if lists.is_empty() {
                        state.end_list();
                    }
                }
                "list-style" => list_style = None,
                "note" => state.end_note(),
                "note-citation" if state.markdown.is_some() => state.skip_depth = state.skip_depth.saturating_sub(1),
                _ => {}
            },
            Node::Text(text) => state.text(text),
        }
        Ok(true)
    });
    let ended = match result.and_then(|()| state.untitled_slide(budget)).and_then(|()| state.write_footnotes(budget)) {
        Ok(()) | Err(WalkStop::Budget) => Ok(()),
        Err(WalkStop::Read(error)) => Err(error),
    };
    offer_pictures(container, "content.xml", &mut state, images)?;
    ended
}

/// Hands the pictures placed while `part` was read to `images`, each read from the
/// container: an OOXML relationship id through the part's relationships, an ODF href as
/// the path it is. A picture linked from outside the file, or missing, is not described.
fn offer_pictures(
    container: &mut Container<'_>,
    part: &str,
    state: &mut Paragraphs,
    images: Option<&mut ImageCollector>,
) -> Result<(), ReadError> {
    let Some(images) = images else { return Ok(()) };
    let placed = std::mem::take(&mut state.placed);
    if placed.is_empty() {
        return Ok(());
    }
    let (folder, file) = part.rsplit_once('/').unwrap_or(("", part));
    let targets = if part == "content.xml" { HashMap::new() } else { relationships(container, folder, file)? };
    for (reference, offset) in placed {
        let path = if part == "content.xml" {
            crate::container::part_path("", &reference)
        } else {
            targets.get(&reference).cloned()
        };
        match path.filter(|p| container.contains(p)) {
            Some(path) => images.offer_encoded(&container.read(&path)?, offset),
            None => images.not_in_file(),
        }
    }
    Ok(())
}

/// An OOXML part's internal relationships: id to the part it names.
fn relationships(
    container: &mut Container<'_>,
    folder: &str,
    file: &str,
) -> Result<HashMap<String, String>, ReadError> {
    let rels = crate::container::part_path(folder, &format!("_rels/{file}.rels")).unwrap_or_default();
    let mut targets = HashMap::new();
    if !container.contains(&rels) {
        return Ok(targets);
    }
    let xml = container.read(&rels)?;
    walk(&xml, |node| -> Result<bool, ReadError> {
        if let Node::Empty(e) | Node::Start(e) = node
            && local(e) == "Relationship"
            && attribute(e, "TargetMode").is_none_or(|mode| mode != "External")
            && let (Some(id), Some(target)) = (attribute(e, "Id"), attribute(e, "Target"))
            && let Some(path) = crate::container::part_path(folder, &target)
        {
            targets.insert(id, path);
        }
        Ok(true)
    })?;
    Ok(targets)
}

/// Starts an ODP slide: its marker as text, or (markdown) a heading its first paragraph
/// will title.
fn start_page(state: &mut Paragraphs, budget: &mut TextBudget, slide: &mut u32) -> Result<(), WalkStop> {
    *slide += 1;
    if state.markdown.is_some() {
        return state.start_slide(budget, *slide);
    }
    budget.end_line().map_err(stop)?;
    budget.push(&format!("--- Slide {slide} ---\n")).map_err(stop)
}

/// A list style whose first level is a number style counts its items.
fn note_numbered(style: &mut Option<String>, element: &quick_xml::events::BytesStart<'_>, numbered: &mut Vec<String>) {
    if attribute(element, "level").is_none_or(|level| level == "1")
        && let Some(name) = style.take()
        && numbered.len() < 10_000
    {
        numbered.push(name);
    }
}
