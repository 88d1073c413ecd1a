//! EPUB books: a zip container (opened under the archive limits every office file is)
//! whose `META-INF/container.xml` names the package document; the package's spine lists
//! the chapters in reading order, and each chapter's XHTML is read by the markup reader
//! (headings, lists and tables as markdown, or as text). A spine item the package does not
//! declare, or that names a part outside the book, is passed over; a book whose spine
//! leads to no chapter is unreadable.

use crate::budget::{Stop, TextBudget};
use crate::container::Container;
use crate::office::ReadError;
use crate::xml::{Node, attribute, local, walk};
use std::collections::HashMap;

/// The package document's path, from `META-INF/container.xml`.
fn package_path(container: &mut Container<'_>) -> Result<String, ReadError> {
    if !container.contains("META-INF/container.xml") {
        return Err(ReadError::Unreadable("not an EPUB book: it has no META-INF/container.xml".to_owned()));
    }
    let xml = container.read("META-INF/container.xml")?;
    let mut found = None;
    walk(&xml, |node| -> Result<bool, ReadError> {
        if let Node::Start(e) | Node::Empty(e) = node
            && local(e) == "rootfile"
        {
            found = attribute(e, "full-path");
        }
        Ok(found.is_none())
    })?;
    found.ok_or_else(|| ReadError::Unreadable("the book's container names no package document".to_owned()))
}

/// `href` (relative to the folder `base`, percent-encoded, perhaps with a fragment) as a
/// part name; `None` when it climbs out of the book or is not UTF-8.
fn resolve(base: &str, href: &str) -> Option<String> {
    let href = href.split('#').next().unwrap_or_default();
    let decoded = percent_encoding::percent_decode_str(href).decode_utf8().ok()?;
    crate::container::part_path(base, &decoded)
}

/// The chapters in reading order: the spine's items as parts of the container.
fn spine(container: &mut Container<'_>, package: &str) -> Result<Vec<String>, ReadError> {
    if !container.contains(package) {
        return Err(ReadError::Unreadable(format!("the book's package document {package:?} is missing")));
    }
    let xml = container.read(package)?;
    let base = package.rsplit_once('/').map_or("", |(folder, _)| folder);
    let mut manifest: HashMap<String, String> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    walk(&xml, |node| -> Result<bool, ReadError> {
        if let Node::Start(e) | Node::Empty(e) = node {
            match local(e) {
                "item" => {
                    let media = attribute(e, "media-type").unwrap_or_default();
                    if let (Some(id), Some(href), true) =
                        (attribute(e, "id"), attribute(e, "href"), media.contains("html"))
                    {
                        manifest.insert(id, href);
                    }
                }
                "itemref" => order.extend(attribute(e, "idref")),
                _ => {}
            }
        }
        Ok(true)
    })?;
    Ok(order
        .iter()
        .filter_map(|id| manifest.get(id))
        .filter_map(|href| resolve(base, href))
        .filter(|name| container.contains(name))
        .collect())
}

/// Reads the book's chapters in spine order into the budget, as markdown when `markdown`.
pub fn epub(container: &mut Container<'_>, budget: &mut TextBudget, markdown: bool) -> Result<(), ReadError> {
    let package = package_path(container)?;
    let chapters = spine(container, &package)?;
    if chapters.is_empty() {
        return Err(ReadError::Unreadable("the book's spine leads to no chapter".to_owned()));
    }
    for chapter in chapters {
        let bytes = container.read(&chapter)?;
        let html = String::from_utf8_lossy(&bytes);
        let written = if markdown {
            crate::markup::html_to_markdown(&html, budget)
        } else {
            budget.push(crate::markup::html_to_text(&html).trim())
        };
        let separated = written.and_then(|()| budget.end_line()).and_then(|()| budget.push("\n"));
        match separated {
            Ok(()) => {}
            Err(Stop::Budget) => return Ok(()),
            Err(Stop::Time) => return Err(ReadError::Time),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn hrefs_resolve_inside_the_book_only() {
        assert_eq!(resolve("OEBPS", "text/ch%201.xhtml#top").as_deref(), Some("OEBPS/text/ch 1.xhtml"));
        assert_eq!(resolve("OEBPS/text", "../ch2.xhtml").as_deref(), Some("OEBPS/ch2.xhtml"));
        assert_eq!(resolve("", "ch3.xhtml").as_deref(), Some("ch3.xhtml"));
        assert_eq!(resolve("OEBPS", "../../etc/passwd"), None);
    }
}
