//! Writing a document's blocks as markdown into the budget: `#` headings, list items,
//! paragraphs and GitHub pipe tables, separated as a markdown reader expects (a blank line
//! between blocks; none between the items of one list or the rows of one table).
//!
//! The readers (DOCX, ODT, HTML) say what each block is; this module alone decides how it
//! is written, so every format's markdown looks the same to the chunker.

use crate::budget::{Stop, TextBudget};

/// The deepest heading markdown has.
const MAX_LEVEL: u8 = 6;

/// The block written last, which decides the separator before the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Last {
    #[default]
    Nothing,
    Block,
    ListItem,
    TableRow,
}

/// How a list item is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMark {
    Bullet,
    Numbered,
}

/// Writes blocks as markdown. A table is written row by row: the first row is its header.
#[derive(Debug, Default)]
pub struct MarkdownWriter {
    last: Last,
    /// The header's width of the table being written, once its first row is.
    table_width: Option<usize>,
}

impl MarkdownWriter {
    /// Starts the block after the last one: a blank line, or one line break between items
    /// of a list or rows of a table.
    fn separate(&mut self, budget: &mut TextBudget, next: Last) -> Result<(), Stop> {
        if next != Last::TableRow {
            self.table_width = None;
        }
        match (self.last, next) {
            (Last::Nothing, _) => Ok(()),
            (Last::ListItem, Last::ListItem) | (Last::TableRow, Last::TableRow) => budget.end_line(),
            _ => {
                budget.end_line()?;
                budget.push("\n")
            }
        }
    }

    /// A heading at `level` (1 is the top; deeper than 6 is written as 6).
    pub fn heading(&mut self, budget: &mut TextBudget, level: u8, text: &str) -> Result<(), Stop> {
        let text = one_line(text);
        if text.is_empty() {
            return Ok(());
        }
        self.separate(budget, Last::Block)?;
        let level = usize::from(level.clamp(1, MAX_LEVEL));
        budget.push(&"#".repeat(level))?;
        budget.push(" ")?;
        budget.push(&text)?;
        self.last = Last::Block;
        budget.push("\n")
    }

    /// A paragraph, its line breaks kept.
    pub fn paragraph(&mut self, budget: &mut TextBudget, text: &str) -> Result<(), Stop> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        self.separate(budget, Last::Block)?;
        budget.push(&escape_opening(text))?;
        self.last = Last::Block;
        budget.push("\n")
    }

    /// A list item, `depth` lists deep (0 is the outermost).
    pub fn list_item(&mut self, budget: &mut TextBudget, depth: usize, mark: ListMark, text: &str) -> Result<(), Stop> {
        let text = one_line(text);
        if text.is_empty() {
            return Ok(());
        }
        self.separate(budget, Last::ListItem)?;
        budget.push(&"  ".repeat(depth.min(8)))?;
        budget.push(match mark {
            ListMark::Bullet => "- ",
            ListMark::Numbered => "1. ",
        })?;
        budget.push(&text)?;
        self.last = Last::ListItem;
        budget.push("\n")
    }

    /// A table row; the first of a table is its header. Rows shorter than the header are
    /// padded, so every row has a cell under each column.
    pub fn table_row(&mut self, budget: &mut TextBudget, cells: &[String]) -> Result<(), Stop> {
        if cells.iter().all(|c| c.trim().is_empty()) {
            return Ok(());
        }
        let continuing = self.last == Last::TableRow && self.table_width.is_some();
        self.separate(budget, Last::TableRow)?;
        let width = if continuing { self.table_width.unwrap_or(cells.len()) } else { cells.len() };
        budget.push("|")?;
        for index in 0..width.max(cells.len()) {
            budget.push(" ")?;
            budget.push(&cell_text(cells.get(index).map_or("", String::as_str)))?;
            budget.push(" |")?;
        }
        budget.push("\n")?;
        if !continuing {
            budget.push("|")?;
            budget.push(&" --- |".repeat(width))?;
            budget.push("\n")?;
            self.table_width = Some(width);
        }
        self.last = Last::TableRow;
        Ok(())
    }

    /// Ends a list: the next item starts a new one, after a blank line.
    pub fn end_list(&mut self) {
        if self.last == Last::ListItem {
            self.last = Last::Block;
        }
    }

    /// Ends a page: its last block is closed with a blank line, so the next page's text
    /// starts exactly where its first block does.
    pub fn end_page(&mut self, budget: &mut TextBudget) -> Result<(), Stop> {
        self.table_width = None;
        if self.last == Last::Nothing {
            return Ok(());
        }
        self.last = Last::Nothing;
        budget.end_line()?;
        budget.push("\n")
    }

    /// A place for a block written in later (an image's description): the last block is
    /// closed with a blank line and the offset returned; the next block starts there, so
    /// the text reads the same whether or not anything is written in.
    pub fn place(&mut self, budget: &mut TextBudget) -> Result<usize, Stop> {
        self.end_page(budget)?;
        Ok(budget.len())
    }

    /// Ends a table: the next row starts a new one (with its own header).
    pub fn end_table(&mut self) {
        self.table_width = None;
        if self.last == Last::TableRow {
            self.last = Last::Block;
        }
    }
}

/// A heading's or item's text on one line, white space collapsed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A cell's text as a pipe table holds it: one line, its pipes escaped.
fn cell_text(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

/// A paragraph that happens to open like a heading, list item, quote or table row is
/// escaped so that it stays a paragraph (`\# …`, `12\. …`).
fn escape_opening(text: &str) -> String {
    let first_word = text.split_whitespace().next().unwrap_or_default();
    let numbered = first_word.len() > 1
        && first_word.strip_suffix(['.', ')']).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if numbered {
        let at = first_word.len() - 1;
        return format!("{}\\{}", &text[..at], &text[at..]);
    }
    if text.starts_with(['#', '>', '|']) || matches!(first_word, "-" | "*" | "+") {
        return format!("\\{text}");
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn written(write: impl FnOnce(&mut MarkdownWriter, &mut TextBudget) -> Result<(), Stop>) -> String {
        let mut budget = TextBudget::new(10_000, Duration::from_secs(5));
        let mut writer = MarkdownWriter::default();
        write(&mut writer, &mut budget).expect("within the budget");
        budget.trim_end();
        budget.finish().0
    }

    #[test]
    fn blocks_are_separated_as_markdown_reads_them() {
        let text = written(|w, b| {
            w.heading(b, 1, "Pumps\n and valves")?;
            w.paragraph(b, "Each pump is checked.")?;
            w.list_item(b, 0, ListMark::Bullet, "inlet")?;
            w.list_item(b, 1, ListMark::Numbered, "outlet")?;
            w.heading(b, 9, "Deep")?;
            w.table_row(b, &["Part".into(), "Code".into()])?;
            w.table_row(b, &["Seal | ring".into()])?;
            w.end_table();
            w.table_row(b, &["Next".into()])?;
            w.paragraph(b, "# not a heading")?;
            w.paragraph(b, "12. not an item")
        });
        assert_eq!(
            text,
            "# Pumps and valves\n\nEach pump is checked.\n\n- inlet\n  1. outlet\n\n###### Deep\n\n| Part | Code |\n| --- | \
             --- |\n| Seal \\| ring |  |\n\n| Next |\n| --- |\n\n\\# not a heading\n\n12\\. not an item"
        );
    }

    #[test]
    fn empty_blocks_write_nothing() {
        let text = written(|w, b| {
            w.heading(b, 2, "  ")?;
            w.paragraph(b, "\n")?;
            w.table_row(b, &[" ".into()])?;
            w.paragraph(b, "only")
        });
        assert_eq!(text, "only");
    }
}
