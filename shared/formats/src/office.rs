//! Word-processing and presentation documents: DOCX and PPTX (OOXML), ODT and ODP
//! (OpenDocument), read from their checked containers part by part into the budget.

use crate::budget::{Stop, TextBudget};
use crate::container::{Container, ContainerError};
use crate::xml::{Node, XmlError, attribute, local, walk};

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
}

impl Paragraphs {
    fn new() -> Self {
        Self { para_cap: PARAGRAPH_CAP_BYTES, ..Self::default() }
    }

    fn text(&mut self, s: &str) {
        if self.text_depth > 0 && self.skip_depth == 0 && self.para.len() < self.para_cap {
            self.para.push_str(s);
        }
    }

    fn end_paragraph(&mut self, budget: &mut TextBudget) -> Result<(), WalkStop> {
        let para = std::mem::take(&mut self.para);
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
            return Ok(());
        }
        budget.push(para.trim_end()).map_err(stop)?;
        budget.push("\n").map_err(stop)
    }

    fn start_table(&mut self) {
        self.tables.push((Vec::new(), String::new()));
    }

    fn end_table(&mut self) {
        self.tables.pop();
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

/// Walks one OOXML part into the budget. `Ok(true)` when the budget is spent.
fn ooxml_part(xml: &[u8], budget: &mut TextBudget, skip_fields: bool) -> Result<bool, ReadError> {
    let mut state = Paragraphs::new();
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
                _ => {}
            },
            Node::Empty(e) => match local(e) {
                "tab" => state.para.push('\t'),
                "br" | "cr" => state.para.push('\n'),
                "tc" => state.end_cell(),
                _ => {}
            },
            Node::End(name) => match name {
                "t" => state.text_depth = state.text_depth.saturating_sub(1),
                "fld" if skip_fields => state.skip_depth = state.skip_depth.saturating_sub(1),
                "p" => state.end_paragraph(budget)?,
                "tc" => state.end_cell(),
                "tr" => state.end_row(budget)?,
                "tbl" => state.end_table(),
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

/// DOCX: headers, the body (paragraphs and table rows), then footers.
pub fn docx(container: &mut Container<'_>, budget: &mut TextBudget) -> Result<(), ReadError> {
    if !container.contains("word/document.xml") {
        return Err(ReadError::Unreadable("the container has no word/document.xml".to_owned()));
    }
    let headers = numbered_parts(container, "word/header");
    let footers = numbered_parts(container, "word/footer");
    let parts = headers.into_iter().chain(["word/document.xml".to_owned()]).chain(footers);
    for part in parts {
        let xml = container.read(&part)?;
        if ooxml_part(&xml, budget, false)? {
            return Ok(());
        }
    }
    Ok(())
}

/// PPTX: every slide's shape text and table rows, then its notes.
pub fn pptx(container: &mut Container<'_>, budget: &mut TextBudget) -> Result<(), ReadError> {
    let slides = numbered_parts(container, "ppt/slides/slide");
    if slides.is_empty() && !container.contains("ppt/presentation.xml") {
        return Err(ReadError::Unreadable("the container has no ppt/presentation.xml".to_owned()));
    }
    for (index, slide) in slides.iter().enumerate() {
        if budget.push(&format!("--- Slide {} ---\n", index + 1)).is_err() {
            return Ok(());
        }
        let xml = container.read(slide)?;
        if ooxml_part(&xml, budget, false)? {
            return Ok(());
        }
        if let Some(notes) = notes_for_slide(container, slide)? {
            let xml = container.read(&notes)?;
            if budget.push("Notes:\n").is_err() || ooxml_part(&xml, budget, true)? {
                return Ok(());
            }
        }
        budget.check_time().map_err(|_| ReadError::Time)?;
    }
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
    Ok(target.map(|t| resolve_relative("ppt/slides", &t)).filter(|p| container.contains(p)))
}

/// `../notesSlides/notesSlide1.xml` relative to `ppt/slides` is `ppt/notesSlides/notesSlide1.xml`.
fn resolve_relative(base: &str, target: &str) -> String {
    if let Some(absolute) = target.strip_prefix('/') {
        return absolute.to_owned();
    }
    let mut parts: Vec<&str> = base.split('/').collect();
    for piece in target.split('/') {
        match piece {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// ODT and ODP: paragraphs, headings, lists, tables and (ODP) slides with their notes,
/// from `content.xml`.
pub fn odf_text(container: &mut Container<'_>, budget: &mut TextBudget) -> Result<(), ReadError> {
    if !container.contains("content.xml") {
        return Err(ReadError::Unreadable("the container has no content.xml".to_owned()));
    }
    let xml = container.read("content.xml")?;
    let mut state = Paragraphs::new();
    let mut slide = 0u32;
    let result = walk(&xml, |node| -> Result<bool, WalkStop> {
        state.tick(budget)?;
        match node {
            Node::Start(e) => match local(e) {
                "p" | "h" => state.text_depth += 1,
                "table" => state.start_table(),
                "table-row" => state.start_row(),
                "page" => {
                    slide += 1;
                    budget.end_line().map_err(stop)?;
                    budget.push(&format!("--- Slide {slide} ---\n")).map_err(stop)?;
                }
                "notes" => budget.push("Notes:\n").map_err(stop)?,
                "tab" => state.text("\t"),
                "line-break" => state.text("\n"),
                _ => {}
            },
            Node::Empty(e) => match local(e) {
                "s" => {
                    let count = attribute(e, "c").and_then(|c| c.parse::<usize>().ok()).unwrap_or(1).min(64);
                    state.text(&" ".repeat(count));
                }
                "tab" => state.text("\t"),
                "line-break" => state.text("\n"),
                "table-cell" | "covered-table-cell" => state.end_cell(),
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
                _ => {}
            },
            Node::Text(text) => state.text(text),
        }
        Ok(true)
    });
    match result {
        Ok(()) | Err(WalkStop::Budget) => Ok(()),
        Err(WalkStop::Read(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_targets_resolve() {
        assert_eq!(resolve_relative("ppt/slides", "../notesSlides/notesSlide3.xml"), "ppt/notesSlides/notesSlide3.xml");
        assert_eq!(resolve_relative("ppt/slides", "/ppt/x.xml"), "ppt/x.xml");
    }
}
