//! Writing descriptions into a parsed text at their images' places, and moving what points
//! into the text (page starts, OCR spans) so it still points at the same words.

use sluice_domain::ingestion::OutputFormat;

/// A description and where it goes: a byte offset at a block boundary, on `page` (0 where
/// the document has no pages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub offset: usize,
    pub page: u32,
    pub number: usize,
    pub description: String,
}

/// A parsed text and what points into it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    pub text: String,
    pub page_starts: Vec<(u32, usize)>,
    pub ocr_spans: Vec<(usize, usize)>,
    /// The byte spans of the image blocks written in.
    pub image_spans: Vec<(usize, usize)>,
}

/// How an image's description reads: `[Image: …]` in text, a markdown image whose
/// alternative text is the description (its target names the image's number in the
/// document, so nothing fetches it).
pub fn block(format: OutputFormat, number: usize, description: &str) -> String {
    match format {
        OutputFormat::Text => format!("[Image: {description}]"),
        OutputFormat::Markdown => {
            let alt = description.replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]");
            format!("![Image: {alt}](#image-{number})")
        }
    }
}

/// `parsed` with each of `placed` (in offset order) written in as a block of its own. A
/// description at a page's start stays with the page its image is on: written before the
/// next page begins when its image is on the page before.
pub fn write_in(parsed: Parsed, format: OutputFormat, placed: &[Placed]) -> Parsed {
    let Parsed { text, mut page_starts, mut ocr_spans, mut image_spans } = parsed;
    let mut out = String::with_capacity(text.len() + placed.iter().map(|p| p.description.len() + 32).sum::<usize>());
    let mut copied = 0;
    // (offset in the original, bytes written in there, the page it belongs to)
    let mut inserted: Vec<(usize, usize, u32)> = Vec::new();
    for place in placed {
        let offset = floor_boundary(&text, place.offset.clamp(copied, text.len()));
        out.push_str(&text[copied..offset]);
        copied = offset;
        // The separator the text already has there, so the block stands alone both ways.
        let separator = match format {
            OutputFormat::Markdown => "\n\n",
            OutputFormat::Text if text[..offset].ends_with("\n\n") || offset == 0 => "\n\n",
            OutputFormat::Text => "\n",
        };
        let lead = if out.is_empty() || out.ends_with('\n') { "" } else { separator };
        let start = out.len() + lead.len();
        out.push_str(lead);
        out.push_str(&block(format, place.number, &place.description));
        image_spans.push((start, out.len()));
        out.push_str(separator);
        inserted.push((offset, lead.len() + (out.len() - start - lead.len()), place.page));
    }
    out.push_str(&text[copied..]);
    // Everything after an insertion moves by what was written in before it.
    let shift = |at: usize, moves_at: &dyn Fn(u32) -> bool| -> usize {
        at + inserted
            .iter()
            .filter(|(o, _, page)| *o < at || (*o == at && moves_at(*page)))
            .map(|(_, n, _)| n)
            .sum::<usize>()
    };
    for (page, start) in &mut page_starts {
        let this_page = *page;
        // A page starting where a description goes moves past it if the image is on an earlier page.
        *start = shift(*start, &|image_page| image_page != 0 && image_page < this_page);
    }
    for (start, end) in &mut ocr_spans {
        let (s, e) = (*start, *end);
        *start = shift(s, &|_| true);
        *end = shift(e, &|_| false).max(*start);
    }
    Parsed { text: out, page_starts, ocr_spans, image_spans }
}

/// The largest char boundary at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(offset: usize, page: u32, description: &str) -> Placed {
        Placed { offset, page, number: 1, description: description.to_owned() }
    }

    #[test]
    fn a_description_stands_as_a_block_where_its_image_was_and_pages_keep_their_words() {
        // Page 1 ends with a picture; page 2 starts at the same offset.
        let text = "Page one text.\n\nPage two text.".to_owned();
        let parsed =
            Parsed { text, page_starts: vec![(1, 0), (2, 16)], ocr_spans: vec![(16, 30)], image_spans: vec![] };
        let out = write_in(parsed, OutputFormat::Markdown, &[place(16, 1, "A chart [of] ships.")]);
        assert_eq!(out.text, "Page one text.\n\n![Image: A chart \\[of\\] ships.](#image-1)\n\nPage two text.");
        assert_eq!(&out.text[out.page_starts[1].1..], "Page two text.");
        assert_eq!(&out.text[out.ocr_spans[0].0..out.ocr_spans[0].1], "Page two text.");
        let (start, end) = out.image_spans[0];
        assert!(out.text[start..end].starts_with("![Image: A chart"));
        // A picture at the top of page 2 stays on page 2.
        let parsed = Parsed {
            text: "Page one text.\n\nPage two text.".to_owned(),
            page_starts: vec![(1, 0), (2, 16)],
            ..Parsed::default()
        };
        let out = write_in(parsed, OutputFormat::Text, &[place(16, 2, "A map.")]);
        assert_eq!(out.text, "Page one text.\n\n[Image: A map.]\n\nPage two text.");
        assert_eq!(&out.text[out.page_starts[1].1..], "[Image: A map.]\n\nPage two text.");
    }

    #[test]
    fn text_lines_keep_their_single_breaks_and_the_end_takes_a_block_too() {
        let parsed = Parsed { text: "one\ntwo".to_owned(), ..Parsed::default() };
        let out = write_in(parsed, OutputFormat::Text, &[place(4, 0, "A."), place(7, 0, "B.")]);
        assert_eq!(out.text, "one\n[Image: A.]\ntwo\n[Image: B.]\n");
        assert_eq!(out.image_spans.len(), 2);
        let empty = write_in(Parsed::default(), OutputFormat::Text, &[place(0, 0, "A whiteboard.")]);
        assert_eq!(empty.text, "[Image: A whiteboard.]\n\n");
    }
}
