//! SVG: the words a drawing shows or names — its `<text>` (with the `<tspan>`s inside),
//! `<title>` and `<desc>` elements, one line each, in document order. The file is read as
//! XML and nothing else: no script runs, no reference (`href`, `@import`, an external
//! entity) is loaded, and no entity beyond XML's five is expanded.

use crate::xml::{Node, XmlError, local, walk_past_doctype};

/// The elements whose text is the drawing's words.
const WORDED: &[&str] = &["text", "title", "desc"];
/// Elements whose content is never words: code and styles.
const SILENT: &[&str] = &["script", "style"];

/// The drawing's words, one element a line; `Err` names where the XML broke.
pub fn text_of(xml: &str) -> Result<String, XmlError> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    // How deep the walk is inside worded and silent elements.
    let (mut worded, mut silent) = (0usize, 0usize);
    walk_past_doctype::<XmlError>(xml.as_bytes(), |node| {
        match node {
            Node::Start(start) => {
                let name = local(start);
                if SILENT.contains(&name) {
                    silent += 1;
                } else if WORDED.contains(&name) {
                    worded += 1;
                } else if worded > 0 && name == "tspan" && !line.ends_with(' ') && !line.is_empty() {
                    line.push(' ');
                }
            }
            Node::End(name) => {
                if SILENT.contains(&name) {
                    silent = silent.saturating_sub(1);
                } else if WORDED.contains(&name) && worded > 0 {
                    worded -= 1;
                    if worded == 0 {
                        let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !words.is_empty() {
                            lines.push(words);
                        }
                        line.clear();
                    }
                }
            }
            Node::Text(text) if worded > 0 && silent == 0 => line.push_str(text),
            _ => {}
        }
        Ok(true)
    })?;
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_svg_reads_as_its_text_title_and_description_and_nothing_it_would_run_or_load() {
        let svg = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd" [
  <!ENTITY secret SYSTEM "file:///etc/passwd">
]>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="200" height="100">
  <title>Pump &amp; valve layout</title>
  <desc>Ground floor, wing B</desc>
  <style>text { font: 12px sans-serif; content: "not words"; }</style>
  <script>alert("never run")</script>
  <image xlink:href="https://example.com/tracker.png"/>
  <g><text x="10" y="20">Pump <tspan font-weight="bold">P-101</tspan><tspan x="10" dy="14">Zawór ręczny</tspan></text></g>
  <text x="10" y="60">&secret;Inlet</text>
  <text>   </text>
</svg>"#;
        assert_eq!(
            text_of(svg).expect("read"),
            "Pump & valve layout\nGround floor, wing B\nPump P-101 Zawór ręczny\nInlet"
        );
        assert!(matches!(text_of("<svg><text>open</svg"), Err(XmlError::Malformed(_))));
        assert_eq!(text_of("<svg/>").expect("empty"), "");
    }
}
