//! Legacy Word `.doc` (Word 97 to 2003), read in Rust from the compound file: the File
//! Information Block at the start of the `WordDocument` stream says where the piece table
//! is (in the `0Table` or `1Table` stream) and how many characters the main text has; each
//! piece names where its characters are in `WordDocument`, as 8-bit Windows-1252 or as
//! UTF-16. No program is started and nothing leaves the bytes handed in.
//!
//! What is read: the main text's paragraphs, and its tables from their cell and row marks
//! (cells tab-separated as text, pipe tables as markdown); of a field, its result and never
//! its code. As markdown, a paragraph whose style is a built-in heading (`Heading 1`–`9`,
//! `Title`) is a heading: its style comes from the paragraph properties in the formatting
//! pages (`PlcBtePapx`, its FKPs) and the style's built-in id from the stylesheet. What is
//! not read: headers, footnotes, comments and text boxes. An encrypted file, or one older
//! than Word 97 (Word 6 and 95 keep their text another way), is unreadable, with that reason.

use crate::budget::{Stop, TextBudget};
use crate::markdown::MarkdownWriter;
use crate::office::ReadError;
use std::io::{Cursor, Read};

/// The File Information Block's identifier.
const WORD_IDENT: u16 = 0xA5EC;
/// The first `nFib` of Word 97.
const WORD_97: u16 = 0x00C1;
const FLAG_ENCRYPTED: u16 = 0x0100;
const FLAG_TABLE_1: u16 = 0x0200;
/// Where the FIB's variable parts start: after its 32-byte base.
const FIB_BASE: usize = 32;
/// `ccpText` in `fibRgLw97`; `fcStshf`, `fcPlcfBtePapx` and `fcClx` in `fibRgFcLcb97`
/// (pair indexes).
const CCP_TEXT: usize = 3;
const FC_STSHF: usize = 1;
const FC_PLCF_BTE_PAPX: usize = 13;
const FC_CLX: usize = 33;
/// A formatting page's size in the Word stream.
const FKP_BYTES: usize = 512;
/// The built-in style id of `Title`.
const STI_TITLE: u16 = 62;
/// A piece's characters are 8-bit when this bit of its offset is set (the offset is then
/// twice the byte's position).
const COMPRESSED: u32 = 0x4000_0000;

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn broken(what: &str) -> ReadError {
    ReadError::Unreadable(format!("not a readable Word document: {what}"))
}

/// What the File Information Block says.
#[derive(Debug)]
struct Fib {
    table_1: bool,
    text_chars: u32,
    clx: (usize, usize),
    stylesheet: (usize, usize),
    paragraph_pages: (usize, usize),
}

impl Fib {
    fn read(word: &[u8]) -> Result<Self, ReadError> {
        if u16_at(word, 0) != Some(WORD_IDENT) {
            return Err(broken("its Word stream does not start as one"));
        }
        let n_fib = u16_at(word, 2).unwrap_or(0);
        let flags = u16_at(word, 0x0A).unwrap_or(0);
        if flags & FLAG_ENCRYPTED != 0 {
            return Err(ReadError::Unreadable(
                "the .doc is encrypted (protected by a password); save it without one to index it".to_owned(),
            ));
        }
        if n_fib < WORD_97 {
            return Err(ReadError::Unreadable(
                "the .doc was written by Word 6 or 95, older than Word 97, which is not read; save it as .docx"
                    .to_owned(),
            ));
        }
        let short = || broken("its File Information Block is cut short");
        let csw = usize::from(u16_at(word, FIB_BASE).ok_or_else(short)?);
        let lw_at = FIB_BASE + 2 + 2 * csw + 2;
        let cslw = usize::from(u16_at(word, lw_at - 2).ok_or_else(short)?);
        if cslw <= CCP_TEXT {
            return Err(short());
        }
        let text_chars = u32_at(word, lw_at + 4 * CCP_TEXT).ok_or_else(short)?;
        let fc_at = lw_at + 4 * cslw + 2;
        let pairs = usize::from(u16_at(word, fc_at - 2).ok_or_else(short)?);
        if pairs <= FC_CLX {
            return Err(short());
        }
        let pair = |index: usize| -> Result<(usize, usize), ReadError> {
            let fc = u32_at(word, fc_at + 8 * index).ok_or_else(short)? as usize;
            let lcb = u32_at(word, fc_at + 8 * index + 4).ok_or_else(short)? as usize;
            Ok((fc, lcb))
        };
        Ok(Self {
            table_1: flags & FLAG_TABLE_1 != 0,
            text_chars,
            clx: pair(FC_CLX)?,
            stylesheet: pair(FC_STSHF)?,
            paragraph_pages: pair(FC_PLCF_BTE_PAPX)?,
        })
    }
}

/// A run of characters: character positions `[start, end)` stored from byte `at` of the
/// Word stream, 8-bit or UTF-16.
#[derive(Debug)]
struct Piece {
    start: u32,
    end: u32,
    at: usize,
    compressed: bool,
}

/// The piece table from the table stream's `Clx` (formatting runs before it are skipped).
fn pieces(table: &[u8], (fc_clx, lcb_clx): (usize, usize)) -> Result<Vec<Piece>, ReadError> {
    let clx = table
        .get(fc_clx..fc_clx.saturating_add(lcb_clx))
        .ok_or_else(|| broken("its piece table is outside the table stream"))?;
    let mut at = 0;
    let plc = loop {
        match clx.get(at) {
            Some(0x01) => at += 3 + usize::from(u16_at(clx, at + 1).ok_or_else(|| broken("a cut formatting run"))?),
            Some(0x02) => {
                let len = u32_at(clx, at + 1).ok_or_else(|| broken("a cut piece table"))? as usize;
                break clx.get(at + 5..at + 5 + len).ok_or_else(|| broken("a cut piece table"))?;
            }
            _ => return Err(broken("no piece table")),
        }
    };
    if plc.len() < 4 || (plc.len() - 4) % 12 != 0 {
        return Err(broken("a piece table of the wrong size"));
    }
    let count = (plc.len() - 4) / 12;
    let descriptors = 4 * (count + 1);
    (0..count)
        .map(|i| {
            let start = u32_at(plc, 4 * i).unwrap_or(0);
            let end = u32_at(plc, 4 * (i + 1)).unwrap_or(0);
            let fc = u32_at(plc, descriptors + 8 * i + 2).unwrap_or(0);
            let compressed = fc & COMPRESSED != 0;
            let offset = (fc & !(COMPRESSED | 0x8000_0000)) as usize;
            if end < start {
                return Err(broken("a piece that ends before it starts"));
            }
            Ok(Piece { start, end, at: if compressed { offset / 2 } else { offset }, compressed })
        })
        .collect()
}

/// Which paragraphs are headings: the heading level of each style (by its built-in id in
/// the stylesheet) and the style of each run of paragraphs (by where their marks are in the
/// Word stream, from the formatting pages). Anything unreadable here only loses headings.
#[derive(Debug, Default)]
struct Headings {
    levels: std::collections::HashMap<u16, u8>,
    /// `(first byte, end byte, style)` runs, sorted.
    runs: Vec<(u32, u32, u16)>,
}

impl Headings {
    fn read(word: &[u8], table: &[u8], fib: &Fib) -> Self {
        let mut headings = Self::default();
        let slice = |(fc, lcb): (usize, usize)| table.get(fc..fc.saturating_add(lcb)).unwrap_or_default();
        // The stylesheet: a header, then each style's length and definition, whose first
        // 12 bits are its built-in id (1–9 the headings).
        let stylesheet = slice(fib.stylesheet);
        if let Some(header) = u16_at(stylesheet, 0) {
            let count = u16_at(stylesheet, 2).unwrap_or(0);
            let mut at = 2 + usize::from(header);
            for istd in 0..count {
                let Some(len) = u16_at(stylesheet, at) else { break };
                if len >= 2
                    && let Some(sti) = u16_at(stylesheet, at + 2).map(|v| v & 0x0FFF)
                {
                    match sti {
                        1..=9 => drop(headings.levels.insert(istd, sti as u8)),
                        STI_TITLE => drop(headings.levels.insert(istd, 1)),
                        _ => {}
                    }
                }
                at += 2 + usize::from(len);
            }
        }
        if headings.levels.is_empty() {
            return headings;
        }
        // The formatting pages of paragraphs: each page's runs and their properties, whose
        // first two bytes are the paragraphs' style.
        let plc = slice(fib.paragraph_pages);
        let count = plc.len().saturating_sub(4) / 8;
        for i in 0..count {
            let Some(pn) = u32_at(plc, 4 * (count + 1) + 4 * i) else { break };
            let start = (pn & 0x003F_FFFF) as usize * FKP_BYTES;
            let Some(page) = word.get(start..start + FKP_BYTES) else { continue };
            let runs = usize::from(page[FKP_BYTES - 1]);
            for r in 0..runs {
                let (Some(from), Some(to)) = (u32_at(page, 4 * r), u32_at(page, 4 * (r + 1))) else { break };
                let offset = page.get(4 * (runs + 1) + 13 * r).map_or(0, |b| usize::from(*b) * 2);
                let istd = match page.get(offset) {
                    _ if offset == 0 => 0,
                    Some(0) => u16_at(page, offset + 2).unwrap_or(0),
                    Some(_) => u16_at(page, offset + 1).unwrap_or(0),
                    None => 0,
                };
                headings.runs.push((from, to, istd));
            }
        }
        headings.runs.sort_unstable();
        headings
    }

    /// The heading level of the paragraph whose mark is at byte `at` of the Word stream.
    fn level_at(&self, at: u32) -> Option<u8> {
        let index = self.runs.partition_point(|run| run.0 <= at).checked_sub(1)?;
        let (_, end, istd) = self.runs[index];
        (at < end).then(|| self.levels.get(&istd).copied()).flatten()
    }
}

/// The main text's paragraphs and table rows, written as they end.
struct Writer<'a> {
    budget: &'a mut TextBudget,
    markdown: Option<MarkdownWriter>,
    headings: Headings,
    /// Where in the Word stream the character being read is.
    at: u32,
    paragraph: String,
    cells: Vec<String>,
    /// Whether the last character was a cell's end (a second one ends the row).
    after_cell: bool,
    /// For each open field: whether its code (not shown) is being read.
    fields: Vec<bool>,
    /// The characters held in `paragraph` and `cells`, not yet in the budget.
    pending: usize,
}

impl<'a> Writer<'a> {
    fn new(budget: &'a mut TextBudget, markdown: bool, headings: Headings) -> Self {
        Self {
            budget,
            markdown: markdown.then(MarkdownWriter::default),
            headings,
            at: 0,
            paragraph: String::new(),
            cells: Vec::new(),
            after_cell: false,
            fields: Vec::new(),
            pending: 0,
        }
    }

    fn char(&mut self, c: char) -> Result<(), Stop> {
        match c {
            '\u{13}' => self.fields.push(true),
            '\u{14}' => {
                if let Some(code) = self.fields.last_mut() {
                    *code = false;
                }
            }
            '\u{15}' => {
                self.fields.pop();
            }
            _ if self.fields.iter().any(|&code| code) => {}
            '\r' | '\u{c}' => return self.end_paragraph(),
            '\u{7}' => return self.end_cell(),
            '\u{b}' => self.held('\n')?,
            '\u{1e}' => self.held('-')?,
            '\u{a0}' => self.held(' ')?,
            '\t' => self.held('\t')?,
            c if c.is_control() => {}
            c => self.held(c)?,
        }
        self.after_cell = false;
        Ok(())
    }

    /// Holds `c` in the paragraph until its mark; a paragraph (or row) longer than what the
    /// budget has left is cut now, so a file of one endless paragraph never grows past the
    /// budget in memory.
    fn held(&mut self, c: char) -> Result<(), Stop> {
        self.paragraph.push(c);
        self.pending += 1;
        if self.pending <= self.budget.remaining() {
            return Ok(());
        }
        let mut text = self.cells.join("\t");
        if !text.is_empty() {
            text.push('\t');
        }
        text.push_str(&self.paragraph);
        self.paragraph.clear();
        self.cells.clear();
        self.pending = 0;
        self.budget.push(&text)?;
        Err(Stop::Budget)
    }

    fn end_paragraph(&mut self) -> Result<(), Stop> {
        self.after_cell = false;
        // Within a row (a cell of it ended already): the cell's next line.
        if !self.cells.is_empty() {
            return self.held(' ');
        }
        self.pending = 0;
        let text = std::mem::take(&mut self.paragraph);
        match &mut self.markdown {
            Some(writer) => {
                writer.end_table();
                match self.headings.level_at(self.at) {
                    Some(level) => writer.heading(self.budget, level, &text),
                    None => writer.paragraph(self.budget, &text),
                }
            }
            None if text.trim().is_empty() => Ok(()),
            None => {
                self.budget.push(text.trim_end())?;
                self.budget.push("\n")
            }
        }
    }

    /// A cell mark: the cell's end, or (right after one) the row's.
    fn end_cell(&mut self) -> Result<(), Stop> {
        if self.after_cell && self.paragraph.trim().is_empty() {
            self.after_cell = false;
            self.paragraph.clear();
            self.pending = 0;
            let cells: Vec<String> = std::mem::take(&mut self.cells).into_iter().map(|c| c.trim().to_owned()).collect();
            return match &mut self.markdown {
                Some(writer) => writer.table_row(self.budget, &cells),
                None => {
                    self.budget.push(&cells.join("\t"))?;
                    self.budget.push("\n")
                }
            };
        }
        self.cells.push(std::mem::take(&mut self.paragraph));
        self.after_cell = true;
        Ok(())
    }
}

/// Reads a `.doc`'s main text into the budget, as markdown when `markdown`.
pub fn doc(bytes: &[u8], budget: &mut TextBudget, markdown: bool) -> Result<(), ReadError> {
    let mut file =
        cfb::CompoundFile::open(Cursor::new(bytes)).map_err(|_| broken("its compound file cannot be opened"))?;
    let mut stream = |name: &str| -> Option<Vec<u8>> {
        let mut out = Vec::new();
        file.open_stream(name).ok()?.take(bytes.len() as u64).read_to_end(&mut out).ok()?;
        Some(out)
    };
    let word = stream("/WordDocument").ok_or_else(|| broken("it holds no WordDocument stream"))?;
    let fib = Fib::read(&word)?;
    let table =
        stream(if fib.table_1 { "/1Table" } else { "/0Table" }).ok_or_else(|| broken("its table stream is missing"))?;
    let pieces = pieces(&table, fib.clx)?;
    let headings = if markdown { Headings::read(&word, &table, &fib) } else { Headings::default() };
    let mut writer = Writer::new(budget, markdown, headings);
    let written = (|| -> Result<(), Stop> {
        for piece in pieces.iter().filter(|p| p.start < fib.text_chars) {
            writer.budget.check_time()?;
            let chars = (piece.end.min(fib.text_chars) - piece.start) as usize;
            if piece.compressed {
                let Some(raw) = word.get(piece.at..piece.at.saturating_add(chars)) else { continue };
                // Windows-1252 is one byte a character: the n-th character is the n-th byte.
                let (text, _) = encoding_rs::WINDOWS_1252.decode_without_bom_handling(raw);
                for (n, c) in text.chars().enumerate() {
                    writer.at = (piece.at + n) as u32;
                    writer.char(c)?;
                }
            } else {
                let Some(raw) = word.get(piece.at..piece.at.saturating_add(2 * chars)) else { continue };
                let units = raw.chunks_exact(2).map(|pair| u16::from_le_bytes([pair[0], pair[1]]));
                let mut unit = 0;
                for c in char::decode_utf16(units) {
                    writer.at = (piece.at + 2 * unit) as u32;
                    unit += c.as_ref().map_or(1, |c| c.len_utf16());
                    writer.char(c.unwrap_or(char::REPLACEMENT_CHARACTER))?;
                }
            }
        }
        if !writer.paragraph.trim().is_empty() {
            writer.end_paragraph()?;
        }
        Ok(())
    })();
    match written {
        Ok(()) | Err(Stop::Budget) => Ok(()),
        Err(Stop::Time) => Err(ReadError::Time),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paragraph_with_no_mark_stops_at_the_budget_not_at_its_end() {
        let mut budget = TextBudget::new(10, std::time::Duration::from_secs(5));
        let mut writer = Writer::new(&mut budget, false, Headings::default());
        let stopped = (0..1000).map(|_| writer.char('a')).position(|r| r.is_err());
        assert_eq!(stopped, Some(10), "the eleventh character of a 10-character budget stops the reader");
        assert!(writer.paragraph.is_empty(), "nothing is held past the budget");
        let (text, truncated) = budget.finish();
        assert!(truncated, "{text}");
        assert_eq!(text.lines().next(), Some("aaaaaaaaaa"), "the budget's ten characters, then the cut's marker");
    }
}
