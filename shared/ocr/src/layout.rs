//! Recognized lines into text: top to bottom, lines that share a row left to right, a blank
//! line where the gap between rows says a paragraph ends. One column is assumed; a page of
//! columns reads row by row across them.

use crate::geometry::RotatedRect;

pub fn reading_order(mut lines: Vec<(RotatedRect, String)>) -> String {
    lines.sort_by(|a, b| a.0.cy.total_cmp(&b.0.cy));
    let mut rows: Vec<Vec<(RotatedRect, String)>> = Vec::new();
    for line in lines {
        match rows.last_mut() {
            // A line whose centre lies within the row's first line's height shares that row.
            Some(row) if line.0.cy < row[0].0.bottom() && line.0.cy > row[0].0.top() => row.push(line),
            _ => rows.push(vec![line]),
        }
    }
    let mut heights: Vec<f32> = rows.iter().map(|row| row[0].0.height).collect();
    heights.sort_by(f32::total_cmp);
    let typical = heights.get(heights.len() / 2).copied().unwrap_or(0.0);
    let mut text = String::new();
    let mut previous_bottom: Option<f32> = None;
    for mut row in rows {
        row.sort_by(|a, b| a.0.left().total_cmp(&b.0.left()));
        let top = row.iter().map(|l| l.0.top()).fold(f32::MAX, f32::min);
        if let Some(bottom) = previous_bottom {
            text.push_str(if top - bottom > typical * 0.6 { "\n\n" } else { "\n" });
        }
        previous_bottom = Some(row.iter().map(|l| l.0.bottom()).fold(f32::MIN, f32::max));
        let words: Vec<&str> = row.iter().map(|l| l.1.as_str()).collect();
        text.push_str(&words.join(" "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cx: f32, cy: f32, text: &str) -> (RotatedRect, String) {
        (RotatedRect { cx, cy, width: 100.0, height: 20.0, angle: 0.0 }, text.to_owned())
    }

    #[test]
    fn rows_read_left_to_right_and_gaps_end_paragraphs() {
        let text = reading_order(vec![
            line(300.0, 52.0, "right"),
            line(100.0, 50.0, "left"),
            line(100.0, 75.0, "next"),
            line(100.0, 140.0, "paragraph"),
        ]);
        assert_eq!(text, "left right\nnext\n\nparagraph");
    }
}
