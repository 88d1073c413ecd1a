//! The page's layout, before and after recognition: which text comes next.
//!
//! Before: a detected line that runs across a column gap is cut there. A gap counts as a
//! column's edge when the lines around it agree — nearly all of those that say anything are
//! blank at that place, or end before it with a line across it in their row — which a word
//! space, wherever it falls, never is (and a ragged line's end says nothing); a gap wider
//! than a word space could ever be is cut whatever its neighbours say.
//!
//! After: the recognized lines are read in columns. The page is turned straight (by the
//! lines' own median angle), the gutters are the stretches across the page that (almost)
//! no line covers, and the lines are read band by band from the top: a run of lines that
//! stay within the columns is read column by column, left to right; a line across a
//! gutter (a title, a figure caption) is a band of its own. Within a column, rows are read
//! top to bottom and left to right, a blank line where the gap between rows says a
//! paragraph ends.
//!
//! The same reading order serves a PDF's text layer ([`in_reading_order`]): its lines come
//! from the characters' boxes instead of the detector, and what follows is the same.

use crate::geometry::{RotatedRect, blank_runs, trim_to_ink};
use image::GrayImage;

/// What a line keeps beside its first and last ink, in line heights (the recognizer reads
/// a letter better with some paper around it).
const INK_PAD: f32 = 0.15;
/// A gap narrower than this, in line heights, is never a column's edge.
const MIN_COLUMN_GAP: f32 = 0.5;
/// A gap this wide, in line heights, is a column's edge whatever the lines around it say.
const CERTAIN_COLUMN_GAP: f32 = 2.0;
/// The lines around a gap that are asked: within this many median line heights above or
/// below it.
const NEIGHBOURHOOD: f32 = 8.0;
/// The share of the asked lines that must be clear at the gap.
const AGREEMENT: f32 = 0.8;
/// The fewest lines that must have been asked.
const MIN_NEIGHBOURS: usize = 3;
/// A stretch of the page covered by at most this share of the most-covered stretch's lines
/// is a gutter candidate.
const GUTTER_COVERAGE: f32 = 0.25;
/// A gutter's narrowest width, in median line heights.
const MIN_GUTTER: f32 = 0.15;
/// A column's narrowest width, in median line heights: narrower "columns" are a table's,
/// whose rows are read across.
pub const MIN_COLUMN_WIDTH: f32 = 6.0;
/// The share of a line's area inside a wider line that makes it a sliver of that line.
const SLIVER_OVERLAP: f32 = 0.5;

/// A line's extent on the page turned straight.
#[derive(Debug, Clone, Copy)]
struct Extent {
    left: f32,
    right: f32,
    top: f32,
    bottom: f32,
}

impl Extent {
    fn centre_y(&self) -> f32 {
        (self.top + self.bottom) / 2.0
    }

    fn width(&self) -> f32 {
        self.right - self.left
    }
}

/// Turns page points straight by the page's skew (about the origin: only differences are
/// used).
#[derive(Debug, Clone, Copy)]
struct Straighten {
    sin: f32,
    cos: f32,
}

impl Straighten {
    /// The median angle of the lines long enough to show it.
    fn of(lines: &[RotatedRect]) -> Self {
        let mut angles: Vec<f32> = lines.iter().filter(|l| l.aspect() > 3.0).map(|l| l.angle).collect();
        angles.sort_by(f32::total_cmp);
        let angle = angles.get(angles.len() / 2).copied().unwrap_or(0.0);
        let (sin, cos) = (-angle).sin_cos();
        Self { sin, cos }
    }

    fn point(&self, (x, y): (f32, f32)) -> (f32, f32) {
        (x * self.cos - y * self.sin, x * self.sin + y * self.cos)
    }

    fn extent(&self, line: &RotatedRect) -> Extent {
        let (_, cy) = self.point((line.cx, line.cy));
        let (start, _) = self.point(line.along(0.0));
        let (end, _) = self.point(line.along(line.width));
        Extent {
            left: start.min(end),
            right: start.max(end),
            top: cy - line.height / 2.0,
            bottom: cy + line.height / 2.0,
        }
    }
}

fn median_height(lines: &[RotatedRect]) -> f32 {
    let mut heights: Vec<f32> = lines.iter().map(|l| l.height).collect();
    heights.sort_by(f32::total_cmp);
    heights.get(heights.len() / 2).copied().unwrap_or(0.0)
}

/// The detected lines with every one that runs across a column gap cut there. `ink` is the
/// grey level below which a pixel is dark.
pub fn split_at_column_gaps(page: &GrayImage, lines: Vec<RotatedRect>, ink: u8) -> Vec<RotatedRect> {
    if lines.len() < 2 {
        return lines;
    }
    let straight = Straighten::of(&lines);
    let typical = median_height(&lines);
    let extents: Vec<Extent> = lines.iter().map(|l| straight.extent(l)).collect();
    // Each line's blank stretches, on the straightened page's x axis.
    let gaps: Vec<Vec<(f32, f32, f32, f32)>> = lines
        .iter()
        .map(|line| {
            blank_runs(page, line, ink)
                .into_iter()
                .map(|(from, to)| {
                    let (a, _) = straight.point(line.along(from));
                    let (b, _) = straight.point(line.along(to));
                    (from, to, a.min(b), a.max(b))
                })
                .collect()
        })
        .collect();
    // What line `j` says of a column edge at `x`: blank there (`Some(true)`), inked there
    // (`Some(false)`), or nothing — it ends before `x` (or starts after it) with no line on
    // the other side in its row, as a ragged line's end does.
    let vote = |j: usize, x: f32| -> Option<bool> {
        let extent = extents[j];
        if extent.left < x && x < extent.right {
            return Some(gaps[j].iter().any(|&(_, _, a, b)| a <= x && x <= b));
        }
        let same_row = |k: usize| k != j && (extents[k].centre_y() - extent.centre_y()).abs() < typical / 2.0;
        let across = (0..extents.len())
            .filter(|&k| same_row(k))
            .any(|k| if extent.right <= x { extents[k].left >= x } else { extents[k].right <= x });
        across.then_some(true)
    };
    let mut split = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let mut cuts: Vec<(f32, f32)> = Vec::new();
        for &(from, to, a, b) in &gaps[i] {
            let width = to - from;
            if width < MIN_COLUMN_GAP * line.height {
                continue;
            }
            let middle = (a + b) / 2.0;
            let certain = width >= CERTAIN_COLUMN_GAP * line.height;
            let agreed = || {
                let votes: Vec<bool> = (0..lines.len())
                    .filter(|&j| {
                        j != i && (extents[j].centre_y() - extents[i].centre_y()).abs() <= NEIGHBOURHOOD * typical
                    })
                    .filter_map(|j| vote(j, middle))
                    .collect();
                let clear = votes.iter().filter(|&&clear| clear).count();
                clear >= MIN_NEIGHBOURS && clear as f32 >= AGREEMENT * votes.len() as f32
            };
            if certain || agreed() {
                cuts.push((from, to));
            }
        }
        split.extend(cut(line, &cuts));
    }
    // Each line trimmed to its ink (the detector's boxes are padded, and padding hides a
    // narrow gutter); then a line the votes left whole across what the page shows to be a
    // gutter is cut there too, where it is blank (a title is inked across it, whole).
    let split: Vec<RotatedRect> = split.iter().map(|l| trim_to_ink(page, l, ink, INK_PAD * l.height)).collect();
    let extents: Vec<Extent> = split.iter().map(|l| straight.extent(l)).collect();
    let gutters = gutters(&extents, typical, MIN_COLUMN_WIDTH);
    let reach = typical / 2.0;
    let mut finished = Vec::with_capacity(split.len());
    for (line, extent) in split.into_iter().zip(extents) {
        let crossed: Vec<f32> =
            gutters.iter().copied().filter(|g| extent.left < g - reach && extent.right > g + reach).collect();
        if crossed.is_empty() {
            finished.push(line);
            continue;
        }
        let cuts: Vec<(f32, f32)> = blank_runs(page, &line, ink)
            .into_iter()
            .filter(|&(from, to)| {
                let (a, _) = straight.point(line.along(from));
                let (b, _) = straight.point(line.along(to));
                crossed.iter().any(|g| a.min(b) <= *g && *g <= a.max(b))
            })
            .collect();
        finished.extend(cut(&line, &cuts));
    }
    without_slivers(finished, &straight)
}

/// The lines less each one lying mostly (by [`SLIVER_OVERLAP`] of its area) inside a wider
/// line: that is the wider line's ink read twice — a letter the detector joined to the line
/// beside it across a column gap, and cutting there left on its own.
fn without_slivers(lines: Vec<RotatedRect>, straight: &Straighten) -> Vec<RotatedRect> {
    let extents: Vec<Extent> = lines.iter().map(|l| straight.extent(l)).collect();
    let inside = |i: usize, j: usize| {
        let (inner, outer) = (extents[i], extents[j]);
        let wider = outer.width() > inner.width() || (outer.width() == inner.width() && j < i);
        let overlap = (inner.right.min(outer.right) - inner.left.max(outer.left)).max(0.0)
            * (inner.bottom.min(outer.bottom) - inner.top.max(outer.top)).max(0.0);
        wider && overlap >= SLIVER_OVERLAP * inner.width() * (inner.bottom - inner.top)
    };
    lines
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| !(0..extents.len()).any(|j| j != i && inside(i, j)))
        .map(|(_, line)| line)
        .collect()
}

/// `line` in the pieces between `cuts` (blank stretches along it, in order).
fn cut(line: &RotatedRect, cuts: &[(f32, f32)]) -> Vec<RotatedRect> {
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0.0;
    for &(from, to) in cuts {
        pieces.push(line.piece(start, from));
        start = to;
    }
    pieces.push(line.piece(start, line.width));
    pieces
}

/// What separates a row from the row before it in reading order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// The next line of the same paragraph or list.
    Line,
    /// A gap wide enough to end a paragraph.
    Paragraph,
    /// Another column's run, or a band across the columns: a new block.
    Block,
}

/// A row of a page in reading order: the lines that share it, left to right.
#[derive(Debug)]
pub struct Row<T> {
    pub lines: Vec<(RotatedRect, T)>,
    pub before: Break,
}

/// The lines of a page in reading order (see the module's comment): the one place that
/// decides which text comes next, for recognized lines and for a PDF's text layer alike.
/// Columns narrower than `min_column_width` line heights are a table's, read across: the
/// OCR asks [`MIN_COLUMN_WIDTH`]; a text layer, whose tables are told apart by their cells,
/// asks more.
pub fn in_reading_order<T>(lines: Vec<(RotatedRect, T)>, min_column_width: f32) -> Vec<Row<T>> {
    let rects: Vec<RotatedRect> = lines.iter().map(|(rect, _)| *rect).collect();
    let straight = Straighten::of(&rects);
    let extents: Vec<Extent> = rects.iter().map(|r| straight.extent(r)).collect();
    let typical = median_height(&rects);
    let gutters = gutters(&extents, typical, min_column_width);
    if gutters.is_empty() {
        return rows(lines, &straight);
    }
    // Across a gutter by more than half a line's height: a column's line whose box just
    // reaches into the gutter is not.
    let reach = typical / 2.0;
    let spans = |e: &Extent| gutters.iter().any(|g| e.left < *g - reach && e.right > *g + reach);
    let column = |e: &Extent| gutters.iter().filter(|g| (e.left + e.right) / 2.0 > **g).count();
    let mut order: Vec<usize> = (0..lines.len()).collect();
    order.sort_by(|&a, &b| extents[a].top.total_cmp(&extents[b].top));
    // Bands: runs of lines within the columns, and runs of lines across a gutter.
    let mut bands: Vec<(bool, Vec<usize>)> = Vec::new();
    for index in order {
        let across = spans(&extents[index]);
        match bands.last_mut() {
            Some((kind, members)) if *kind == across => members.push(index),
            _ => bands.push((across, vec![index])),
        }
    }
    let mut slots: Vec<Option<(RotatedRect, T)>> = lines.into_iter().map(Some).collect();
    let mut ordered = Vec::new();
    for (across, members) in bands {
        if across {
            ordered.extend(rows(members.iter().filter_map(|&i| slots[i].take()).collect(), &straight));
            continue;
        }
        for c in 0..=gutters.len() {
            let in_column: Vec<(RotatedRect, T)> =
                members.iter().filter(|&&i| column(&extents[i]) == c).filter_map(|&i| slots[i].take()).collect();
            ordered.extend(rows(in_column, &straight));
        }
    }
    ordered
}

/// Recognized lines into text, column by column: blocks apart by a blank line, rows by a
/// line break (a blank line where a paragraph ends), lines sharing a row by a space.
pub fn reading_order(lines: Vec<(RotatedRect, String)>) -> String {
    reading_order_of_some(lines.into_iter().map(|(rect, text)| (rect, Some(text))).collect())
}

/// As [`reading_order`], of the lines that have a text; the lines without one (not read) still
/// shape the page's columns, as a page read in part keeps the layout of the whole page.
pub fn reading_order_of_some(lines: Vec<(RotatedRect, Option<String>)>) -> String {
    let mut blocks: Vec<String> = Vec::new();
    for row in in_reading_order(lines, MIN_COLUMN_WIDTH) {
        let words: Vec<&str> = row.lines.iter().filter_map(|l| l.1.as_deref()).collect();
        if words.is_empty() {
            continue;
        }
        match (row.before, blocks.last_mut()) {
            (Break::Block, _) | (_, None) => blocks.push(String::new()),
            (Break::Paragraph, Some(block)) => block.push_str("\n\n"),
            (Break::Line, Some(block)) => block.push('\n'),
        }
        if let Some(block) = blocks.last_mut() {
            block.push_str(&words.join(" "));
        }
    }
    blocks.retain(|b| !b.is_empty());
    blocks.join("\n\n")
}

/// The middles of the page's gutters, left to right: stretches (at least [`MIN_GUTTER`]
/// line heights wide) that at most [`GUTTER_COVERAGE`] of the lines (two line heights long
/// or more) cover, with text well covered on both sides; none when a column between them
/// would be narrower than `min_column_width` line heights (a table).
fn gutters(extents: &[Extent], typical: f32, min_column_width: f32) -> Vec<f32> {
    if extents.len() < 4 || typical <= 0.0 {
        return Vec::new();
    }
    let left = extents.iter().map(|e| e.left).fold(f32::MAX, f32::min);
    let right = extents.iter().map(|e| e.right).fold(f32::MIN, f32::max);
    let bins = ((right - left).ceil() as usize).clamp(1, 20_000);
    let mut coverage = vec![0u32; bins];
    // A mark shorter than two line heights (a hyphen left at a line's end, a page number)
    // says nothing of where the columns are.
    for e in extents.iter().filter(|e| e.right - e.left >= 2.0 * typical) {
        let from = ((e.left - left).floor().max(0.0) as usize).min(bins - 1);
        let to = ((e.right - left).ceil().max(0.0) as usize).min(bins);
        for bin in &mut coverage[from..to] {
            *bin += 1;
        }
    }
    let most = coverage.iter().copied().max().unwrap_or(0);
    if most < 4 {
        return Vec::new();
    }
    let low = (GUTTER_COVERAGE * most as f32).floor() as u32;
    let well_covered = |range: &[u32]| range.iter().any(|&c| c as f32 >= 0.4 * most as f32);
    let mut found = Vec::new();
    let mut start: Option<usize> = None;
    for bin in 0..=bins {
        let is_low = bin < bins && coverage[bin] <= low;
        match (is_low, start) {
            (true, None) => start = Some(bin),
            (false, Some(from)) => {
                start = None;
                let wide = (bin - from) as f32 >= MIN_GUTTER * typical;
                if wide && well_covered(&coverage[..from]) && well_covered(&coverage[bin..]) {
                    found.push(left + (from + bin) as f32 / 2.0);
                }
            }
            _ => {}
        }
    }
    let edges: Vec<f32> = std::iter::once(left).chain(found.iter().copied()).chain(std::iter::once(right)).collect();
    if edges.windows(2).any(|pair| pair[1] - pair[0] < min_column_width * typical) {
        return Vec::new();
    }
    found
}

/// Lines of one column into rows: top to bottom on the page turned straight (so a skewed
/// table's cells keep their rows), lines sharing a row left to right, the first a new block
/// and each next one a new paragraph where the gap between rows says one ends.
fn rows<T>(mut lines: Vec<(RotatedRect, T)>, straight: &Straighten) -> Vec<Row<T>> {
    let y = |rect: &RotatedRect| straight.point((rect.cx, rect.cy)).1;
    lines.sort_by(|a, b| y(&a.0).total_cmp(&y(&b.0)));
    let mut rows: Vec<Vec<(RotatedRect, T)>> = Vec::new();
    for line in lines {
        match rows.last_mut() {
            // Lines share a row when their centres are closer than half the smaller one's
            // height (a tall picture beside the text gathers no lines into its row).
            Some(row) if (y(&line.0) - y(&row[0].0)).abs() < line.0.height.min(row[0].0.height) / 2.0 => row.push(line),
            _ => rows.push(vec![line]),
        }
    }
    let mut heights: Vec<f32> = rows.iter().map(|row| row[0].0.height).collect();
    heights.sort_by(f32::total_cmp);
    let typical = heights.get(heights.len() / 2).copied().unwrap_or(0.0);
    let mut ordered = Vec::with_capacity(rows.len());
    let mut previous_bottom: Option<f32> = None;
    for mut row in rows {
        row.sort_by(|a, b| a.0.left().total_cmp(&b.0.left()));
        let top = row.iter().map(|l| y(&l.0) - l.0.height / 2.0).fold(f32::MAX, f32::min);
        let before = match previous_bottom {
            None => Break::Block,
            Some(bottom) if top - bottom > typical * 0.6 => Break::Paragraph,
            Some(_) => Break::Line,
        };
        previous_bottom = Some(row.iter().map(|l| y(&l.0) + l.0.height / 2.0).fold(f32::MIN, f32::max));
        ordered.push(Row { lines: row, before });
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Luma;

    fn line(cx: f32, cy: f32, width: f32, text: &str) -> (RotatedRect, String) {
        (RotatedRect { cx, cy, width, height: 20.0, angle: 0.0 }, text.to_owned())
    }

    #[test]
    fn rows_read_left_to_right_and_gaps_end_paragraphs() {
        let text = reading_order(vec![
            line(300.0, 52.0, 100.0, "right"),
            line(100.0, 50.0, 100.0, "left"),
            line(100.0, 75.0, 100.0, "next"),
            line(100.0, 140.0, 100.0, "paragraph"),
        ]);
        assert_eq!(text, "left right\nnext\n\nparagraph");
    }

    #[test]
    fn two_columns_are_read_one_after_the_other_under_a_title_across_both() {
        // A title across the page, then eight rows in two columns (x 50–450 and 500–900),
        // then a caption across both.
        let mut lines = vec![line(475.0, 20.0, 700.0, "Title")];
        for row in 0..8 {
            let y = 60.0 + 25.0 * row as f32;
            lines.push(line(250.0, y, 400.0, &format!("left {row}")));
            lines.push(line(700.0, y + 3.0, 400.0, &format!("right {row}")));
        }
        lines.push(line(475.0, 300.0, 800.0, "Caption"));
        let text = reading_order(lines);
        let left: Vec<String> = (0..8).map(|r| format!("left {r}")).collect();
        let right: Vec<String> = (0..8).map(|r| format!("right {r}")).collect();
        assert_eq!(text, format!("Title\n\n{}\n\n{}\n\nCaption", left.join("\n"), right.join("\n")));
    }

    #[test]
    fn a_skewed_page_of_two_columns_is_read_column_by_column() {
        let angle = 1.5f32.to_radians();
        let (sin, cos) = angle.sin_cos();
        let mut lines = Vec::new();
        for row in 0..30 {
            let y = 60.0 + 25.0 * row as f32;
            for (x, side) in [(250.0, "left"), (700.0, "right")] {
                // Turned about the origin, as a scanner's skew turns the page.
                let (cx, cy) = (x * cos - y * sin, x * sin + y * cos);
                lines.push((RotatedRect { cx, cy, width: 420.0, height: 20.0, angle }, format!("{side} {row}")));
            }
        }
        let text = reading_order(lines);
        let position = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle} in {text}"));
        assert!(position("left 29") < position("right 0"), "{text}");
        assert!(position("right 0") < position("right 1"), "{text}");
    }

    #[test]
    fn a_line_across_a_column_gap_is_cut_there_and_word_spaces_are_not() {
        // Twenty rows of two columns (ink x 50–450 and 480–880: a 30-pixel gutter), words
        // 40 pixels long with 8-pixel spaces at places that differ row by row; the detector
        // joined each row into one line.
        let page = GrayImage::from_fn(940, 560, |x, y| {
            let row = (y / 25) as usize;
            let in_band = y % 25 >= 6 && y % 25 < 18 && row < 20;
            let column = (50..450).contains(&x) || (480..880).contains(&x);
            let word = ((x as usize + row * 13) % 48) < 40;
            Luma([if in_band && column && word { 0 } else { 255 }])
        });
        let lines: Vec<RotatedRect> = (0..20)
            .map(|row| RotatedRect { cx: 465.0, cy: 12.0 + 25.0 * row as f32, width: 830.0, height: 20.0, angle: 0.0 })
            .collect();
        let split = split_at_column_gaps(&page, lines, 128);
        assert_eq!(split.len(), 40, "each row cut once, at the gutter: {split:?}");
        for pair in split.chunks(2) {
            assert!(pair[0].cx + pair[0].width / 2.0 <= 455.0 && pair[0].cx + pair[0].width / 2.0 >= 435.0, "{pair:?}");
            assert!(pair[1].cx - pair[1].width / 2.0 >= 470.0 && pair[1].cx - pair[1].width / 2.0 <= 490.0, "{pair:?}");
        }
    }

    #[test]
    fn one_column_of_justified_text_is_never_cut() {
        let page = GrayImage::from_fn(900, 560, |x, y| {
            let row = (y / 25) as usize;
            let in_band = y % 25 >= 6 && y % 25 < 18 && row < 20;
            let word = ((x as usize + row * 17) % 50) < 40;
            Luma([if in_band && (50..850).contains(&x) && word { 0 } else { 255 }])
        });
        let lines: Vec<RotatedRect> = (0..20)
            .map(|row| RotatedRect { cx: 450.0, cy: 12.0 + 25.0 * row as f32, width: 820.0, height: 20.0, angle: 0.0 })
            .collect();
        assert_eq!(split_at_column_gaps(&page, lines, 128).len(), 20);
    }

    #[test]
    fn a_skewed_tables_cells_keep_their_rows() {
        // Five columns of cells, the page turned by 1.2°: a row's last cell sits lower than
        // the next row's first.
        let angle = 1.2f32.to_radians();
        let (sin, cos) = angle.sin_cos();
        let mut lines = Vec::new();
        for row in 0..5 {
            let y = 680.0 + 50.0 * row as f32;
            for (column, x) in [415.0, 900.0, 1290.0, 1570.0, 1945.0].into_iter().enumerate() {
                let (cx, cy) = (x * cos - y * sin, x * sin + y * cos);
                let rect = RotatedRect { cx, cy, width: 150.0 + 60.0 * (column % 2) as f32, height: 58.0, angle };
                lines.push((rect, format!("r{row}c{column}")));
            }
        }
        let expected: Vec<String> =
            (0..5).map(|r| (0..5).map(|c| format!("r{r}c{c}")).collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(reading_order(lines), expected.join("\n"));
    }

    #[test]
    fn a_letter_split_off_inside_the_next_columns_line_is_dropped() {
        // As read from a scanned two-column page: a `t` cut off the left column's line lies
        // within the right column's line, whose first letter it is; a page number stands apart.
        let rect = |cx: f32, cy: f32, width: f32| RotatedRect { cx, cy, width, height: 56.0, angle: 0.02 };
        let lines = vec![
            rect(768.0, 2284.0, 974.0),
            rect(1291.0, 2295.0, 14.0),
            rect(1757.0, 2306.0, 962.0),
            rect(1240.0, 2912.0, 14.0),
        ];
        let kept = without_slivers(lines.clone(), &Straighten::of(&lines));
        assert_eq!(kept, vec![lines[0], lines[2], lines[3]]);
        // Two lines the same, once.
        assert_eq!(without_slivers(vec![lines[0]; 2], &Straighten::of(&lines)), vec![lines[0]]);
    }
}
