//! A small XML walker over quick-xml: element starts and ends by local name, and text with
//! the five predefined entities and character references resolved. Any other entity is
//! never expanded (the container check already refused DOCTYPEs; this refuses them again).

use quick_xml::events::{BytesStart, Event};

/// What a reader sees of an XML part.
#[derive(Debug)]
pub enum Node<'a> {
    Start(&'a BytesStart<'a>),
    /// An element with no content (`<a/>`): a start and an end at once.
    Empty(&'a BytesStart<'a>),
    End(&'a str),
    Text(&'a str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XmlError {
    Doctype,
    Malformed(String),
}

/// Walks `xml`, calling `visit` for every node until it returns `Ok(false)` (stop) or
/// an error (passed up). A DOCTYPE is refused.
pub fn walk<E: From<XmlError>>(xml: &[u8], visit: impl FnMut(Node<'_>) -> Result<bool, E>) -> Result<(), E> {
    walk_with(xml, false, visit)
}

/// `walk` that passes over a DOCTYPE (a standalone SVG file often carries one): its
/// declarations are never read, so an entity it declares is never expanded.
pub fn walk_past_doctype<E: From<XmlError>>(
    xml: &[u8],
    visit: impl FnMut(Node<'_>) -> Result<bool, E>,
) -> Result<(), E> {
    walk_with(xml, true, visit)
}

fn walk_with<E: From<XmlError>>(
    xml: &[u8],
    doctype_passed: bool,
    mut visit: impl FnMut(Node<'_>) -> Result<bool, E>,
) -> Result<(), E> {
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().check_end_names = false;
    let mut buf = Vec::new();
    loop {
        // Where, not the parser's own wording: the reason is stored and shown with the file.
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|_| XmlError::Malformed(format!("at byte {}", reader.error_position())))?;
        let go_on = match &event {
            Event::Start(start) => visit(Node::Start(start))?,
            Event::Empty(start) => visit(Node::Empty(start))?,
            Event::End(end) => visit(Node::End(end.local_name().into_inner()))?,
            Event::Text(text) => visit(Node::Text(&text.xml10_content()))?,
            Event::CData(data) => visit(Node::Text(&data.xml10_content()))?,
            Event::GeneralRef(reference) => match resolve(reference) {
                Some(ch) => {
                    let mut utf8 = [0u8; 4];
                    visit(Node::Text(ch.encode_utf8(&mut utf8)))?
                }
                None => true,
            },
            Event::DocType(_) if doctype_passed => true,
            Event::DocType(_) => return Err(XmlError::Doctype.into()),
            Event::Eof => return Ok(()),
            _ => true,
        };
        if !go_on {
            return Ok(());
        }
        buf.clear();
    }
}

fn resolve(reference: &quick_xml::events::BytesRef<'_>) -> Option<char> {
    if reference.is_char_ref() {
        return reference.resolve_char_ref().ok().flatten();
    }
    match &**reference {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => None,
    }
}

/// The value of attribute `local` (any prefix) on `start`.
pub fn attribute(start: &BytesStart<'_>, local: &str) -> Option<String> {
    start.attributes().flatten().find(|a| a.key.local_name().as_ref() == local).map(|a| a.value.into_owned())
}

pub fn local<'a>(start: &'a BytesStart<'a>) -> &'a str {
    start.local_name().into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_references_are_resolved_and_unknown_entities_dropped() {
        let mut out = String::new();
        walk::<XmlError>(b"<a>x &amp; &#x17C; &custom; y</a>", |node| {
            if let Node::Text(t) = node {
                out.push_str(t);
            }
            Ok(true)
        })
        .expect("walk");
        assert_eq!(out, "x & ż  y");
    }

    #[test]
    fn a_doctype_is_refused() {
        let result = walk::<XmlError>(b"<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>", |_| Ok(true));
        assert_eq!(result, Err(XmlError::Doctype));
    }
}
