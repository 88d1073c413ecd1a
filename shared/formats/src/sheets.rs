//! Spreadsheets: every sheet, named, rows tab-separated. XLSX/XLSM stream their cells
//! (calamine's cell reader), XLS is read by calamine, ODS is walked from `content.xml`
//! so that repeated empty rows and cells (a sheet declaring 10^9 rows) cost nothing.
//! At most a million cells are read; a sheet stopped by that count ends with a note.

use crate::budget::{Stop, TextBudget};
use crate::container::Container;
use crate::markdown::MarkdownWriter;
use crate::office::{ReadError, WalkStop, stop};
use crate::xml::{Node, attribute, local, walk};
use calamine::{Data, DataRef, Reader, Xls, Xlsx};
use std::io::Cursor;

/// The most cells read from one workbook.
pub const MAX_CELLS: u64 = 1_000_000;
/// The widest gap of empty columns written out as tabs.
const MAX_COLUMN_GAP: u32 = 256;

/// What a spreadsheet read yielded beyond its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SheetStats {
    pub cells: u64,
}

fn cell_limit_note(out: &mut SheetOut, budget: &mut TextBudget) -> Result<(), Stop> {
    out.finish(budget)?;
    budget.end_line()?;
    budget.push(&format!(
        "[Stopped after {MAX_CELLS} cells: the rest of this sheet and any later sheets were not read.]\n"
    ))
}

/// Where a workbook's sheets and rows go: as text (`Sheet: name`, then each row's cells
/// tab-separated) or as markdown (`## Sheet: name`, then the rows as pipe tables whose
/// header is the sheet's first row; a tall sheet is cut into tables of
/// [`ROWS_PER_TABLE`] rows and a wide one into tables of [`COLUMNS_PER_TABLE`] columns
/// beside the first, each table with its header, so every chunk of a sheet can be read on
/// its own).
#[derive(Debug, Default)]
pub struct SheetOut {
    markdown: Option<MarkdownTables>,
}

/// The rows of a sheet waiting to be written as markdown tables.
#[derive(Debug, Default)]
struct MarkdownTables {
    writer: MarkdownWriter,
    header: Option<Vec<String>>,
    rows: Vec<Vec<String>>,
}

/// The most rows of one markdown table (then the header is written again).
pub const ROWS_PER_TABLE: usize = 40;
/// The most columns of one markdown table besides the first.
pub const COLUMNS_PER_TABLE: usize = 10;

impl SheetOut {
    pub fn new(markdown: bool) -> Self {
        Self { markdown: markdown.then(MarkdownTables::default) }
    }

    /// Starts a sheet named `name` (the previous sheet's rows are written first).
    pub fn sheet(&mut self, budget: &mut TextBudget, name: &str) -> Result<(), Stop> {
        match &mut self.markdown {
            Some(tables) => {
                tables.flush(budget)?;
                tables.header = None;
                tables.writer.heading(budget, 2, &format!("Sheet: {name}"))
            }
            None => {
                budget.end_line()?;
                budget.push(&format!("Sheet: {name}\n"))
            }
        }
    }

    /// Writes one row (emptied); `Err(Stop::Budget)` ends the workbook.
    pub fn row(&mut self, budget: &mut TextBudget, row: &mut Vec<String>) -> Result<(), Stop> {
        while row.last().is_some_and(String::is_empty) {
            row.pop();
        }
        if row.is_empty() {
            return Ok(());
        }
        let Some(tables) = &mut self.markdown else {
            budget.push(&row.join("\t"))?;
            row.clear();
            return budget.push("\n");
        };
        let row = std::mem::take(row);
        if tables.header.is_none() {
            tables.header = Some(row);
            return Ok(());
        }
        tables.rows.push(row);
        if tables.rows.len() == ROWS_PER_TABLE {
            tables.flush(budget)?;
        }
        Ok(())
    }

    /// Writes what is still waiting (the last sheet's last rows).
    pub fn finish(&mut self, budget: &mut TextBudget) -> Result<(), Stop> {
        match &mut self.markdown {
            Some(tables) => tables.flush(budget),
            None => Ok(()),
        }
    }
}

impl MarkdownTables {
    /// Writes the waiting rows under the header, as one table per column group.
    fn flush(&mut self, budget: &mut TextBudget) -> Result<(), Stop> {
        let Some(header) = &self.header else { return Ok(()) };
        if self.rows.is_empty() && header.is_empty() {
            return Ok(());
        }
        let width = self.rows.iter().map(Vec::len).chain([header.len()]).max().unwrap_or(0);
        let cell = |row: &[String], column: usize| row.get(column).cloned().unwrap_or_default();
        let mut first = 1;
        loop {
            let last = (first + COLUMNS_PER_TABLE).min(width.max(1));
            let columns: Vec<usize> = std::iter::once(0).chain(first..last).collect();
            self.writer.end_table();
            self.writer.table_row(budget, &columns.iter().map(|&c| cell(header, c)).collect::<Vec<_>>())?;
            for row in &self.rows {
                self.writer.table_row(budget, &columns.iter().map(|&c| cell(row, c)).collect::<Vec<_>>())?;
            }
            if last >= width {
                break;
            }
            first = last;
        }
        self.writer.end_table();
        self.rows.clear();
        Ok(())
    }
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{}", value as i64) } else { format!("{value}") }
}

fn data_ref_text(value: &DataRef<'_>) -> String {
    match value {
        DataRef::Int(i) => i.to_string(),
        DataRef::Float(f) => number(*f),
        DataRef::String(s) => s.clone(),
        DataRef::SharedString(s) => (*s).to_owned(),
        DataRef::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        DataRef::DateTime(d) => d.as_datetime().map(|t| t.to_string()).unwrap_or_else(|| number(d.as_f64())),
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => s.clone(),
        DataRef::Error(e) => format!("#{e:?}"),
        DataRef::Empty => String::new(),
    }
}

fn data_text(value: &Data) -> String {
    match value {
        Data::Int(i) => i.to_string(),
        Data::Float(f) => number(*f),
        Data::String(s) => s.clone(),
        Data::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        Data::DateTime(d) => d.as_datetime().map(|t| t.to_string()).unwrap_or_else(|| number(d.as_f64())),
        Data::DateTimeIso(s) | Data::DurationIso(s) => s.clone(),
        Data::Error(e) => format!("#{e:?}"),
        Data::Empty => String::new(),
    }
}

/// A CSV file's rows (already decoded) as markdown tables under the budget: its first row
/// is the header. The delimiter is the one of `,`, `;` and tab that the first line uses
/// most; a quoted field may hold delimiters and line breaks.
pub fn csv_markdown(text: &str, budget: &mut TextBudget) -> Result<(), Stop> {
    let first_line = text.lines().next().unwrap_or_default();
    let delimiter =
        [b',', b';', b'\t'].into_iter().max_by_key(|d| first_line.bytes().filter(|b| b == d).count()).unwrap_or(b',');
    let mut reader =
        csv::ReaderBuilder::new().has_headers(false).flexible(true).delimiter(delimiter).from_reader(text.as_bytes());
    let mut out = SheetOut::new(true);
    let mut cells = 0u64;
    for (index, record) in reader.records().enumerate() {
        if index % 4096 == 0 {
            budget.check_time()?;
        }
        // A line the CSV rules cannot read ends the table; what was read is kept.
        let Ok(record) = record else { break };
        cells += record.len() as u64;
        if cells > MAX_CELLS {
            out.finish(budget)?;
            budget.end_line()?;
            return budget.push(&format!("[Stopped after {MAX_CELLS} cells: the rest of the file was not read.]\n"));
        }
        let mut row: Vec<String> = record.iter().map(str::to_owned).collect();
        out.row(budget, &mut row)?;
    }
    out.finish(budget)
}

/// The workbook read to its end: what still waits is written.
fn finished(out: &mut SheetOut, budget: &mut TextBudget, stats: SheetStats) -> Result<SheetStats, ReadError> {
    match out.finish(budget) {
        Err(Stop::Time) => Err(ReadError::Time),
        Ok(()) | Err(Stop::Budget) => Ok(stats),
    }
}

/// What one sheet's read means for the workbook: `None` to go on, else the answer.
fn after_sheet(result: Result<bool, Stop>, stats: SheetStats) -> Option<Result<SheetStats, ReadError>> {
    match result {
        Ok(false) => None,
        Ok(true) | Err(Stop::Budget) => Some(Ok(stats)),
        Err(Stop::Time) => Some(Err(ReadError::Time)),
    }
}

/// XLSX and XLSM, streamed cell by cell. The container was checked before (limits,
/// duplicate parts, DOCTYPEs), so calamine only ever sees a safe zip.
pub fn xlsx(bytes: &[u8], budget: &mut TextBudget, markdown: bool) -> Result<SheetStats, ReadError> {
    let out = &mut SheetOut::new(markdown);
    let mut workbook: Xlsx<_> = Xlsx::new(Cursor::new(bytes)).map_err(|_| unreadable_workbook())?;
    let mut stats = SheetStats::default();
    for name in workbook.sheet_names() {
        let result = (|| -> Result<bool, Stop> {
            out.sheet(budget, &name)?;
            let mut reader = match workbook.worksheet_cells_reader(&name) {
                Ok(reader) => reader,
                Err(_) => return Ok(false),
            };
            let mut row: Vec<String> = Vec::new();
            let mut row_index: Option<u32> = None;
            // A sheet whose XML breaks off ends where it broke; what was read is kept.
            while let Ok(Some(cell)) = reader.next_cell() {
                if matches!(cell.get_value(), DataRef::Empty) {
                    continue;
                }
                stats.cells += 1;
                if stats.cells > MAX_CELLS {
                    out.row(budget, &mut row)?;
                    cell_limit_note(out, budget)?;
                    return Ok(true);
                }
                if stats.cells.is_multiple_of(4096) {
                    budget.check_time()?;
                }
                let (r, c) = cell.get_position();
                if row_index != Some(r) {
                    out.row(budget, &mut row)?;
                    row_index = Some(r);
                }
                let gap = c.saturating_sub(row.len() as u32).min(MAX_COLUMN_GAP);
                row.extend((0..gap).map(|_| String::new()));
                row.push(data_ref_text(cell.get_value()));
            }
            out.row(budget, &mut row)?;
            Ok(false)
        })();
        if let Some(done) = after_sheet(result, stats) {
            return done;
        }
    }
    finished(out, budget, stats)
}

/// Legacy XLS (BIFF), whole sheets at a time (a file at most the upload size). The
/// compound file is first read through the `cfb` crate, which refuses looping or
/// out-of-range sector chains that calamine's own reader would follow without end (found
/// by fuzzing: a cyclic chain grew one allocation past 2 GiB).
pub fn xls(bytes: &[u8], budget: &mut TextBudget, markdown: bool) -> Result<SheetStats, ReadError> {
    let out = &mut SheetOut::new(markdown);
    let workbook_stream = check_compound_file(bytes)?;
    check_biff_cell_span(&workbook_stream)?;
    let mut workbook: Xls<_> = Xls::new(Cursor::new(bytes)).map_err(|_| unreadable_workbook())?;
    let mut stats = SheetStats::default();
    for name in workbook.sheet_names() {
        let Ok(range) = workbook.worksheet_range(&name) else { continue };
        let result = (|| -> Result<bool, Stop> {
            out.sheet(budget, &name)?;
            for cells in range.rows() {
                budget.check_time()?;
                let mut row: Vec<String> = Vec::with_capacity(cells.len());
                for value in cells {
                    if !matches!(value, Data::Empty) {
                        stats.cells += 1;
                    }
                    if stats.cells > MAX_CELLS {
                        out.row(budget, &mut row)?;
                        cell_limit_note(out, budget)?;
                        return Ok(true);
                    }
                    row.push(data_text(value));
                }
                out.row(budget, &mut row)?;
            }
            Ok(false)
        })();
        if let Some(done) = after_sheet(result, stats) {
            return done;
        }
    }
    finished(out, budget, stats)
}

/// ODS from `content.xml`: repeated empty rows and cells are skipped without expanding them;
/// a repeated non-empty row or cell is written out only as far as the cell count allows.
pub fn ods(container: &mut Container<'_>, budget: &mut TextBudget, markdown: bool) -> Result<SheetStats, ReadError> {
    let out = &mut SheetOut::new(markdown);
    if !container.contains("content.xml") {
        return Err(ReadError::Unreadable("the container has no content.xml".to_owned()));
    }
    let xml = container.read("content.xml")?;
    let mut stats = SheetStats::default();
    let mut row: Vec<String> = Vec::new();
    let mut row_repeat: u64 = 1;
    let mut cell = String::new();
    let mut cell_repeat: u64 = 1;
    let mut in_cell = false;
    let mut para_depth = 0u32;
    let mut nodes = 0u32;
    let result = walk(&xml, |node| -> Result<bool, WalkStop> {
        nodes = nodes.wrapping_add(1);
        if nodes.is_multiple_of(4096) {
            budget.check_time().map_err(stop)?;
        }
        let repeat = |e: &quick_xml::events::BytesStart<'_>, name: &str| {
            attribute(e, name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(1).max(1)
        };
        match node {
            Node::Start(e) => match local(e) {
                "table" => {
                    let name = attribute(e, "name").unwrap_or_default();
                    out.sheet(budget, &name).map_err(stop)?;
                }
                "table-row" => {
                    row.clear();
                    row_repeat = repeat(e, "number-rows-repeated");
                }
                "table-cell" | "covered-table-cell" => {
                    in_cell = true;
                    cell.clear();
                    cell_repeat = repeat(e, "number-columns-repeated");
                }
                "p" if in_cell => {
                    if para_depth == 0 && !cell.is_empty() {
                        cell.push(' ');
                    }
                    para_depth += 1;
                }
                _ => {}
            },
            Node::Empty(e) => match local(e) {
                "table" => out.sheet(budget, &attribute(e, "name").unwrap_or_default()).map_err(stop)?,
                "table-row" => {}
                "table-cell" | "covered-table-cell" => {
                    // An empty cell: only its position matters, and only if a value follows.
                    let n = repeat(e, "number-columns-repeated").min(MAX_COLUMN_GAP as u64);
                    row.extend((0..n).map(|_| String::new()));
                    if row.len() > 16_384 {
                        row.truncate(16_384);
                    }
                }
                "s" if para_depth > 0 => cell.push(' '),
                _ => {}
            },
            Node::End(name) => match name {
                "p" if in_cell => para_depth = para_depth.saturating_sub(1),
                "table-cell" | "covered-table-cell" => {
                    in_cell = false;
                    if cell.is_empty() {
                        let n = cell_repeat.min(MAX_COLUMN_GAP as u64);
                        row.extend((0..n).map(|_| String::new()));
                    } else {
                        for _ in 0..cell_repeat.min(16_384) {
                            stats.cells += 1;
                            if stats.cells > MAX_CELLS {
                                break;
                            }
                            row.push(cell.clone());
                        }
                    }
                    if row.len() > 16_384 {
                        row.truncate(16_384);
                    }
                }
                "table-row" => {
                    let has_values = row.iter().any(|c| !c.is_empty());
                    if has_values {
                        let width = row.iter().filter(|c| !c.is_empty()).count() as u64;
                        for copy in 0..row_repeat {
                            if copy > 0 {
                                stats.cells += width;
                            }
                            let mut line = row.clone();
                            out.row(budget, &mut line).map_err(stop)?;
                            if stats.cells > MAX_CELLS {
                                cell_limit_note(out, budget).map_err(stop)?;
                                return Err(WalkStop::Budget);
                            }
                        }
                    }
                    row.clear();
                }
                _ => {}
            },
            Node::Text(text) if para_depth > 0 => {
                if cell.len() < 1 << 20 {
                    cell.push_str(text);
                }
            }
            Node::Text(_) => {}
        }
        Ok(true)
    });
    match result {
        Ok(()) => finished(out, budget, stats),
        Err(WalkStop::Budget) => Ok(stats),
        Err(WalkStop::Read(error)) => Err(error),
    }
}

/// The largest cell range one XLS sheet may span: calamine allocates the whole rectangle
/// between its first and last cell (32 bytes a cell), so a sheet with cells at opposite
/// corners costs the area, not the cells. Fuzzing found one asking for 24 GB.
const MAX_XLS_SPAN_CELLS: u64 = 4_000_000;

/// Walks the BIFF records of the workbook stream and refuses a sheet whose cells span more
/// than `MAX_XLS_SPAN_CELLS` or a multi-cell record whose columns run backwards.
fn check_biff_cell_span(stream: &[u8]) -> Result<(), ReadError> {
    let too_wide = || ReadError::Unreadable("a sheet's cells span a range too large to read".to_owned());
    let u16_at = |data: &[u8], at: usize| data.get(at..at + 2).map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])));
    let mut span: Option<(u32, u32, u32, u32)> = None;
    let mut at = 0;
    while at + 4 <= stream.len() {
        let kind = u16::from_le_bytes([stream[at], stream[at + 1]]);
        let len = usize::from(u16::from_le_bytes([stream[at + 2], stream[at + 3]]));
        let data = stream.get(at + 4..(at + 4 + len).min(stream.len())).unwrap_or_default();
        at += 4 + len;
        let cells: Option<(u32, u32, u32)> = match kind {
            // BOF starts a sheet: its span starts afresh.
            0x0809 => {
                span = None;
                None
            }
            // NUMBER, LABELSST, RK, BLANK, FORMULA, LABEL, BOOLERR, RSTRING: one cell.
            0x0203 | 0x00FD | 0x027E | 0x0201 | 0x0006 | 0x0204 | 0x0205 | 0x00D6 => {
                u16_at(data, 0).zip(u16_at(data, 2)).map(|(row, col)| (row, col, col))
            }
            // MULRK, MULBLANK: a row of cells, last column in the final two bytes.
            0x00BD | 0x00BE if data.len() >= 6 => {
                let last = u16_at(data, data.len() - 2);
                match (u16_at(data, 0), u16_at(data, 2), last) {
                    (Some(row), Some(first), Some(last)) if last >= first => Some((row, first, last)),
                    _ => return Err(ReadError::Unreadable("a multi-cell record runs backwards".to_owned())),
                }
            }
            _ => None,
        };
        if let Some((row, first, last)) = cells {
            let (r0, r1, c0, c1) = span.unwrap_or((row, row, first, last));
            let next = (r0.min(row), r1.max(row), c0.min(first), c1.max(last));
            let area = u64::from(next.1 - next.0 + 1) * u64::from(next.3 - next.2 + 1);
            if area > MAX_XLS_SPAN_CELLS {
                return Err(too_wide());
            }
            span = Some(next);
        }
    }
    Ok(())
}

/// Opens a compound file and reads every stream, each capped at the file's own size (no
/// stream can be longer than the file that holds it), returning the workbook stream.
/// `Unreadable` on any inconsistency.
pub fn check_compound_file(bytes: &[u8]) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let unreadable = |_: std::io::Error| {
        ReadError::Unreadable("not a readable compound file: the file is damaged or truncated".to_owned())
    };
    let mut file = cfb::CompoundFile::open(Cursor::new(bytes)).map_err(unreadable)?;
    let streams: Vec<std::path::PathBuf> =
        file.walk().filter(|e| e.is_stream()).map(|e| e.path().to_path_buf()).take(10_000).collect();
    let limit = bytes.len() as u64;
    let mut sink = [0u8; 64 * 1024];
    let mut workbook = Vec::new();
    for path in streams {
        let is_workbook = path.file_name().is_some_and(|n| n == "Workbook" || n == "Book");
        let mut stream = file.open_stream(&path).map_err(unreadable)?;
        if stream.len() > limit {
            return Err(ReadError::Unreadable("a stream claims to be larger than the file".to_owned()));
        }
        let mut read: u64 = 0;
        loop {
            let n = stream.read(&mut sink).map_err(unreadable)?;
            if n == 0 {
                break;
            }
            read += n as u64;
            if read > limit {
                return Err(ReadError::Unreadable("a stream reads past the size of the file".to_owned()));
            }
            if is_workbook {
                workbook.extend_from_slice(&sink[..n]);
            }
        }
    }
    Ok(workbook)
}

/// Why a workbook the spreadsheet reader refuses yields no text, in Sluice's words (the
/// reader's own error is a parser's, not something to show with the file).
fn unreadable_workbook() -> ReadError {
    ReadError::Unreadable(
        "not a readable workbook: the file is damaged, truncated or not the format its name says".to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_le_bytes().to_vec();
        out.extend_from_slice(&(data.len() as u16).to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    fn number(row: u16, col: u16) -> Vec<u8> {
        let mut data = row.to_le_bytes().to_vec();
        data.extend_from_slice(&col.to_le_bytes());
        data.extend_from_slice(&[0; 10]);
        record(0x0203, &data)
    }

    #[test]
    fn a_sheet_spanning_too_many_cells_is_unreadable() {
        let small = [record(0x0809, &[0; 16]), number(0, 0), number(999, 200)].concat();
        assert_eq!(check_biff_cell_span(&small), Ok(()));
        let wide = [record(0x0809, &[0; 16]), number(0, 0), number(65_535, 255)].concat();
        assert!(matches!(check_biff_cell_span(&wide), Err(ReadError::Unreadable(_))));
        // Each sheet's span starts afresh at its BOF.
        let two_sheets =
            [record(0x0809, &[0; 16]), number(0, 0), record(0x0809, &[0; 16]), number(60_000, 60)].concat();
        assert_eq!(check_biff_cell_span(&two_sheets), Ok(()));
    }

    #[test]
    fn a_multi_cell_record_running_backwards_is_unreadable() {
        let mut data = 3u16.to_le_bytes().to_vec();
        data.extend_from_slice(&10u16.to_le_bytes());
        data.extend_from_slice(&[0; 6]);
        data.extend_from_slice(&2u16.to_le_bytes());
        let stream = [record(0x0809, &[0; 16]), record(0x00BD, &data)].concat();
        assert!(matches!(check_biff_cell_span(&stream), Err(ReadError::Unreadable(_))));
    }

    #[test]
    fn a_compound_file_that_is_not_one_is_unreadable() {
        assert!(matches!(
            check_compound_file(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 short"),
            Err(ReadError::Unreadable(_))
        ));
    }
}
