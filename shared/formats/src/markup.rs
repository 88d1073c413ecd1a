//! Reducing markup to text for the `.msg` bodies and HTML files (as text, or as markdown
//! that keeps headings, lists and tables): HTML, and RTF (with Outlook's
//! compressed-RTF container). Written here because the rules are small and exact: no
//! script or style content, block elements end lines, table cells are tab-separated.

use crate::budget::{Stop, TextBudget};
use crate::markdown::{ListMark, MarkdownWriter};
use encoding_rs::Encoding;

/// The most bytes a compressed RTF body may expand to.
const MAX_RTF_BYTES: usize = 16 << 20;

/// What the HTML walker sees: text (entities unresolved), and the start or end of an
/// element by its lower-case name. `script`, `style`, `head` and `title` content and
/// comments never reach a visitor.
enum Html<'a> {
    Text(&'a str),
    Open(&'a str),
    Close(&'a str),
}

/// Walks `html` tag by tag; `visit` returns `false` to stop.
fn walk_html(html: &str, mut visit: impl FnMut(Html<'_>) -> bool) {
    let mut skip_until: Option<&'static str> = None;
    let mut rest = html;
    while !rest.is_empty() {
        let Some(open) = rest.find('<') else {
            if skip_until.is_none() {
                visit(Html::Text(rest));
            }
            return;
        };
        if skip_until.is_none() && open > 0 && !visit(Html::Text(&rest[..open])) {
            return;
        }
        let after = &rest[open + 1..];
        if let Some(comment) = after.strip_prefix("!--") {
            rest = comment.find("-->").map_or("", |end| &comment[end + 3..]);
            continue;
        }
        let Some(close) = after.find('>') else { return };
        let tag = &after[..close];
        rest = &after[close + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(until) = skip_until {
            if closing && name == until {
                skip_until = None;
            }
            continue;
        }
        let go_on = match name.as_str() {
            "script" | "style" | "head" | "title" if !closing => {
                skip_until = Some(match name.as_str() {
                    "script" => "script",
                    "style" => "style",
                    "title" => "title",
                    _ => "head",
                });
                true
            }
            _ if closing => visit(Html::Close(&name)),
            _ => visit(Html::Open(&name)),
        };
        if !go_on {
            return;
        }
    }
}

/// HTML reduced to text: tags dropped, `script`/`style`/`head` content skipped, block
/// elements and `<br>` end lines, cells are tab-separated, entities resolved, runs of
/// white space collapsed as a browser would.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let mut pending_space = false;
    walk_html(html, |event| {
        match event {
            Html::Text(text) => push_text(&mut out, text, &mut pending_space),
            Html::Open("br") | Html::Close("br") => {
                out.push('\n');
                pending_space = false;
            }
            Html::Close("td" | "th") => {
                out.push('\t');
                pending_space = false;
            }
            Html::Open(name) | Html::Close(name) if is_block(name) => {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                pending_space = false;
            }
            _ => {}
        }
        true
    });
    tidy_lines(&out)
}

/// The elements that end a line of text.
fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "tr"
            | "li"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "table"
            | "blockquote"
            | "ul"
            | "ol"
            | "pre"
            | "hr"
    )
}

/// The elements that start a block of their own in markdown besides those of `is_block`.
fn is_section(name: &str) -> bool {
    matches!(
        name,
        "section"
            | "article"
            | "header"
            | "footer"
            | "main"
            | "nav"
            | "aside"
            | "figure"
            | "figcaption"
            | "address"
            | "dl"
            | "dt"
            | "dd"
            | "body"
            | "caption"
    )
}

/// HTML written as markdown into `budget`: `h1`–`h6` as headings, `ul`/`ol` items as list
/// items at their depth, tables as pipe tables (a nested table's text stays in its cell),
/// every other block as a paragraph, links as their text; `script`, `style` and `head`
/// never. Stops when the budget is spent; a time stop is passed up.
pub fn html_to_markdown(html: &str, budget: &mut TextBudget) -> Result<(), Stop> {
    let mut page = HtmlPage::default();
    let mut outcome = Ok(());
    let mut visited = 0u32;
    walk_html(html, |event| {
        visited = visited.wrapping_add(1);
        let step = if visited.is_multiple_of(4096) { budget.check_time() } else { Ok(()) };
        outcome = step.and_then(|()| page.visit(event, budget));
        outcome.is_ok()
    });
    outcome?;
    page.flush(budget)
}

/// The state of an HTML page being written as markdown.
#[derive(Default)]
struct HtmlPage {
    writer: MarkdownWriter,
    /// The block being read and what it is.
    block: String,
    heading: Option<u8>,
    pending_space: bool,
    /// Open lists' marks, innermost last, and how many list items are open.
    lists: Vec<ListMark>,
    items: usize,
    /// Open tables, the row being built and the cell being filled.
    tables: usize,
    row: Vec<String>,
    cell: String,
}

impl HtmlPage {
    fn visit(&mut self, event: Html<'_>, budget: &mut TextBudget) -> Result<(), Stop> {
        if self.tables > 0 {
            return self.visit_in_table(event, budget);
        }
        match event {
            Html::Text(text) => push_text(&mut self.block, text, &mut self.pending_space),
            Html::Open("br") | Html::Close("br") => {
                self.block.push('\n');
                self.pending_space = false;
            }
            Html::Open(name @ ("h1" | "h2" | "h3" | "h4" | "h5" | "h6")) => {
                self.flush(budget)?;
                self.heading = name[1..].parse().ok();
            }
            Html::Open(name @ ("ul" | "ol")) => {
                self.flush(budget)?;
                self.lists.push(if name == "ol" { ListMark::Numbered } else { ListMark::Bullet });
            }
            Html::Close("ul" | "ol") => {
                self.flush(budget)?;
                self.lists.pop();
                if self.lists.is_empty() {
                    self.writer.end_list();
                }
            }
            Html::Open("li") => {
                self.flush(budget)?;
                self.items += 1;
            }
            Html::Close("li") => {
                self.flush(budget)?;
                self.items = self.items.saturating_sub(1);
            }
            Html::Open("table") => {
                self.flush(budget)?;
                self.tables = 1;
            }
            Html::Open(name) | Html::Close(name) if is_block(name) || is_section(name) => self.flush(budget)?,
            _ => {}
        }
        Ok(())
    }

    /// Inside a table, text fills the cell; a nested table's rows and cells are spaces in it.
    fn visit_in_table(&mut self, event: Html<'_>, budget: &mut TextBudget) -> Result<(), Stop> {
        let nested = self.tables > 1;
        match event {
            Html::Text(text) => push_text(&mut self.cell, text, &mut self.pending_space),
            Html::Open("table") => self.tables += 1,
            Html::Close("table") if nested => self.tables -= 1,
            Html::Close("table") => {
                self.end_row(budget)?;
                self.tables = 0;
                self.writer.end_table();
            }
            Html::Open("tr") | Html::Close("tr") if !nested => self.end_row(budget)?,
            Html::Close("td" | "th") if !nested => {
                self.row.push(std::mem::take(&mut self.cell));
                self.pending_space = false;
            }
            Html::Open(_) | Html::Close(_) => self.pending_space = true,
        }
        Ok(())
    }

    fn end_row(&mut self, budget: &mut TextBudget) -> Result<(), Stop> {
        if !self.cell.trim().is_empty() {
            self.row.push(std::mem::take(&mut self.cell));
        }
        self.cell.clear();
        let row = std::mem::take(&mut self.row);
        self.writer.table_row(budget, &row)
    }

    /// Writes the block read so far as what it is.
    fn flush(&mut self, budget: &mut TextBudget) -> Result<(), Stop> {
        let text = std::mem::take(&mut self.block);
        self.pending_space = false;
        match (self.heading.take(), self.items) {
            (Some(level), _) => self.writer.heading(budget, level, &text),
            (None, 0) => self.writer.paragraph(budget, &text),
            (None, items) => {
                let mark = self.lists.last().copied().unwrap_or(ListMark::Bullet);
                self.writer.list_item(budget, items - 1, mark, &text)
            }
        }
    }
}

fn push_text(out: &mut String, raw: &str, pending_space: &mut bool) {
    let text = resolve_entities(raw);
    for ch in text.chars() {
        if ch.is_whitespace() && ch != '\u{a0}' {
            *pending_space = true;
            continue;
        }
        if *pending_space && !out.is_empty() && !out.ends_with(['\n', '\t', ' ']) {
            out.push(' ');
        }
        *pending_space = false;
        out.push(if ch == '\u{a0}' { ' ' } else { ch });
    }
}

/// Named entities mail clients commonly write beyond the XML five (HTML has ~2,000; the
/// rest are left as written rather than guessed).
const COMMON_ENTITIES: &[(&str, char)] = &[
    ("eacute", 'é'),
    ("egrave", 'è'),
    ("ecirc", 'ê'),
    ("aacute", 'á'),
    ("agrave", 'à'),
    ("acirc", 'â'),
    ("auml", 'ä'),
    ("ouml", 'ö'),
    ("uuml", 'ü'),
    ("Auml", 'Ä'),
    ("Ouml", 'Ö'),
    ("Uuml", 'Ü'),
    ("szlig", 'ß'),
    ("ccedil", 'ç'),
    ("ntilde", 'ñ'),
    ("oacute", 'ó'),
    ("iacute", 'í'),
    ("uacute", 'ú'),
    ("copy", '©'),
    ("reg", '®'),
    ("trade", '™'),
    ("euro", '€'),
    ("pound", '£'),
    ("hellip", '…'),
    ("mdash", '—'),
    ("ndash", '–'),
    ("lsquo", '\u{2018}'),
    ("rsquo", '\u{2019}'),
    ("ldquo", '\u{201C}'),
    ("rdquo", '\u{201D}'),
    ("laquo", '«'),
    ("raquo", '»'),
    ("bull", '•'),
    ("middot", '·'),
    ("deg", '°'),
];

fn resolve_entities(raw: &str) -> String {
    if !raw.contains('&') {
        return raw.to_owned();
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let end = after.find(';').filter(|e| *e <= 10);
        let resolved = end.and_then(|end| {
            let name = &after[..end];
            let ch = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ if COMMON_ENTITIES.iter().any(|(n, _)| *n == name) => {
                    COMMON_ENTITIES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
                }
                _ => name.strip_prefix('#').and_then(|n| {
                    let code = match n.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => n.parse().ok(),
                    };
                    code.and_then(char::from_u32)
                }),
            };
            ch.map(|c| (c, end))
        });
        match resolved {
            Some((ch, end)) => {
                out.push(ch);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Trims each line and keeps at most one blank line in a row.
fn tidy_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines() {
        let line = line.trim_matches(|c: char| c == ' ' || c == '\r');
        if line.trim().is_empty() {
            if !blank && !out.is_empty() {
                out.push('\n');
            }
            blank = true;
            continue;
        }
        blank = false;
        out.push_str(line.trim_end_matches('\t'));
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// The dictionary every compressed-RTF stream starts from ([MS-OXRTFCP] 3.1.3.1).
const RTF_PREBUFFER: &[u8] = b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{\\fonttbl;}{\\f0\\fnil \\froman \\fswiss \\fmodern \\fscript \\fdecor MS Sans SerifSymbolArialTimes New RomanCourier{\\colortbl\\red0\\green0\\blue0\r\n\\par \\pard\\plain\\f0\\fs20\\b\\i\\u\\tab\\tx";

/// Decompresses Outlook's compressed RTF (`LZFu`, or `MELA` stored as is).
pub fn decompress_rtf(data: &[u8]) -> Option<Vec<u8>> {
    let word = |at: usize| data.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let raw_size = (word(4)? as usize).min(MAX_RTF_BYTES);
    let body = data.get(16..)?;
    match word(8)? {
        0x414C_454D => return Some(body[..body.len().min(raw_size)].to_vec()),
        0x7546_5A4C => {}
        _ => return None,
    }
    let mut dictionary = [0u8; 4096];
    dictionary[..RTF_PREBUFFER.len()].copy_from_slice(RTF_PREBUFFER);
    let mut write = RTF_PREBUFFER.len();
    let mut out = Vec::with_capacity(raw_size);
    let mut at = 0;
    while at < body.len() && out.len() < raw_size {
        let control = body[at];
        at += 1;
        for bit in 0..8 {
            if at >= body.len() || out.len() >= raw_size {
                break;
            }
            if control & (1 << bit) == 0 {
                let byte = body[at];
                at += 1;
                out.push(byte);
                dictionary[write] = byte;
                write = (write + 1) % 4096;
            } else {
                let token = u16::from_be_bytes([body[at], *body.get(at + 1)?]);
                at += 2;
                let offset = usize::from(token >> 4);
                let length = usize::from(token & 0xF) + 2;
                if offset == write {
                    return Some(out);
                }
                for i in 0..length {
                    let byte = dictionary[(offset + i) % 4096];
                    out.push(byte);
                    dictionary[write] = byte;
                    write = (write + 1) % 4096;
                }
            }
        }
    }
    Some(out)
}

/// Destinations whose content is never text.
const SKIPPED_DESTINATIONS: &[&str] = &[
    "fonttbl",
    "colortbl",
    "stylesheet",
    "info",
    "pict",
    "object",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "xmlnstbl",
    "themedata",
    "datastore",
    "latentstyles",
    "mmathPr",
    "fldinst",
    "filetbl",
    "revtbl",
];

/// RTF reduced to text: groups of non-text destinations skipped, `\par`/`\line`/`\row`
/// end lines, `\tab`/`\cell` are tabs, `\'hh` bytes decoded in the document's code page,
/// `\uN` read with its fallback skipped, and `\htmlrtf` spans (RTF-only in Outlook's
/// encapsulated HTML) left out.
pub fn rtf_to_text(rtf: &[u8], default: &'static Encoding) -> String {
    let mut encoding = default;
    let mut out = String::new();
    let mut bytes: Vec<u8> = Vec::new();
    // Per group: skipped, and how many fallback characters follow a \uN.
    let mut groups: Vec<(bool, usize)> = vec![(false, 1)];
    let mut skip_fallback = 0usize;
    let mut html_rtf = false;
    let mut first_in_group = false;
    let mut i = 0;
    let flush = |bytes: &mut Vec<u8>, out: &mut String, encoding: &'static Encoding| {
        if !bytes.is_empty() {
            out.push_str(&encoding.decode_without_bom_handling(bytes).0);
            bytes.clear();
        }
    };
    while i < rtf.len() {
        let (skipped, uc) = *groups.last().unwrap_or(&(false, 1));
        let byte = rtf[i];
        match byte {
            b'{' => {
                groups.push((skipped, uc));
                first_in_group = true;
                i += 1;
            }
            b'}' => {
                if groups.len() > 1 {
                    groups.pop();
                }
                first_in_group = false;
                i += 1;
            }
            b'\\' => {
                let was_first = first_in_group;
                first_in_group = false;
                let next = rtf.get(i + 1).copied().unwrap_or(b' ');
                if next.is_ascii_alphabetic() {
                    let start = i + 1;
                    let mut end = start;
                    while end < rtf.len() && rtf[end].is_ascii_alphabetic() {
                        end += 1;
                    }
                    let word = std::str::from_utf8(&rtf[start..end]).unwrap_or_default();
                    let mut param_end = end;
                    if param_end < rtf.len() && (rtf[param_end] == b'-' || rtf[param_end].is_ascii_digit()) {
                        param_end += 1;
                        while param_end < rtf.len() && rtf[param_end].is_ascii_digit() {
                            param_end += 1;
                        }
                    }
                    let param: Option<i64> =
                        std::str::from_utf8(&rtf[end..param_end]).ok().and_then(|p| p.parse().ok());
                    i = param_end;
                    if rtf.get(i) == Some(&b' ') {
                        i += 1;
                    }
                    if was_first && SKIPPED_DESTINATIONS.contains(&word) {
                        if let Some(group) = groups.last_mut() {
                            group.0 = true;
                        }
                        continue;
                    }
                    match word {
                        "ansicpg" => {
                            if let Some(cp) = param {
                                encoding = crate::text::encoding_for_codepage(cp as u32);
                            }
                        }
                        "uc" => {
                            if let Some(group) = groups.last_mut() {
                                group.1 = param.unwrap_or(1).max(0) as usize;
                            }
                        }
                        "htmlrtf" => html_rtf = param != Some(0),
                        _ if skipped || html_rtf => {}
                        "par" | "line" | "row" | "sect" | "page" => {
                            flush(&mut bytes, &mut out, encoding);
                            out.push('\n');
                        }
                        "tab" | "cell" => {
                            flush(&mut bytes, &mut out, encoding);
                            out.push('\t');
                        }
                        "u" => {
                            flush(&mut bytes, &mut out, encoding);
                            if let Some(code) = param {
                                let code = if code < 0 { code + 65_536 } else { code };
                                if let Some(ch) = char::from_u32(code as u32) {
                                    out.push(ch);
                                }
                            }
                            skip_fallback = uc;
                        }
                        _ => {}
                    }
                } else if next == b'*' {
                    if let Some(group) = groups.last_mut() {
                        group.0 = true;
                    }
                    i += 2;
                } else if next == b'\'' {
                    let hex = rtf.get(i + 2..i + 4).and_then(|h| std::str::from_utf8(h).ok());
                    let value = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                    i += 4;
                    if skip_fallback > 0 {
                        skip_fallback -= 1;
                    } else if let (Some(value), false, false) = (value, skipped, html_rtf) {
                        bytes.push(value);
                    }
                } else {
                    i += 2;
                    if !skipped && !html_rtf {
                        match next {
                            b'\\' | b'{' | b'}' => bytes.push(next),
                            b'~' => bytes.push(b' '),
                            b'_' => bytes.push(b'-'),
                            _ => {}
                        }
                    }
                }
            }
            b'\r' | b'\n' => i += 1,
            _ => {
                first_in_group = false;
                i += 1;
                if skip_fallback > 0 {
                    skip_fallback -= 1;
                } else if !skipped && !html_rtf {
                    bytes.push(byte);
                }
            }
        }
    }
    flush(&mut bytes, &mut out, encoding);
    tidy_lines(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_readable_text() {
        let html = "<html><head><title>t</title><style>p{}</style></head><body><p>Hello&nbsp;<b>there</b>,\n  world</p>\
                    <table><tr><td>a</td><td>b</td></tr></table><script>x()</script><div>caf&eacute; &#x17C; &amp;</div></body></html>";
        assert_eq!(html_to_text(html), "Hello there, world\na\tb\ncafé ż &");
    }

    #[test]
    fn rtf_text_with_code_page_unicode_and_skipped_groups() {
        let rtf = b"{\\rtf1\\ansi\\ansicpg1251{\\fonttbl{\\f0 Arial;}}{\\*\\generator x;}\\pard \\'cf\\'f0\\'e8\\'e2\\'e5\\'f2 \\u8364?5\\par second\\tab line}";
        assert_eq!(rtf_to_text(rtf, encoding_rs::WINDOWS_1252), "Привет €5\nsecond\tline");
    }

    #[test]
    fn uncompressed_and_compressed_rtf_containers() {
        let mut mela = Vec::new();
        mela.extend_from_slice(&(12u32 + 5).to_le_bytes());
        mela.extend_from_slice(&5u32.to_le_bytes());
        mela.extend_from_slice(&0x414C_454Du32.to_le_bytes());
        mela.extend_from_slice(&0u32.to_le_bytes());
        mela.extend_from_slice(b"{\\rtf}");
        assert_eq!(decompress_rtf(&mela).as_deref(), Some(&b"{\\rtf"[..]));
        // The specification's example: "{\rtf1\ansi\ansicpg1252\pard hello world}\r\n".
        let example: [u8; 0x2D] = [
            0x2d, 0x00, 0x00, 0x00, 0x2b, 0x00, 0x00, 0x00, 0x4c, 0x5a, 0x46, 0x75, 0xf1, 0xc5, 0xc7, 0xa7, 0x03, 0x00,
            0x0a, 0x00, 0x72, 0x63, 0x70, 0x67, 0x31, 0x32, 0x35, 0x42, 0x32, 0x0a, 0xf3, 0x20, 0x68, 0x65, 0x6c, 0x09,
            0x00, 0x20, 0x62, 0x77, 0x05, 0xb0, 0x6c, 0x64, 0x7d,
        ];
        let mut data = example.to_vec();
        data.extend_from_slice(&[0x0a, 0x80, 0x0f, 0xa0]);
        let text = decompress_rtf(&data).expect("decompressed");
        assert_eq!(String::from_utf8_lossy(&text), "{\\rtf1\\ansi\\ansicpg1252\\pard hello world}\r\n");
    }
}
