//! A document's title as its own metadata gives it: a PDF's Info `Title`, an OOXML
//! package's `dc:title`, an OpenDocument's `dc:title`, an Outlook message's subject. Taken
//! as written, spaces collapsed; whether it reads as a title (not `Untitled`, not a file
//! name) is for whoever chooses among a document's candidate titles to judge.

use crate::container::Container;

/// The longest title kept, in characters: past it, metadata is a paragraph, not a title.
pub const MAX_TITLE_CHARS: usize = 300;

/// `raw` with its spaces collapsed; `None` when blank or longer than `MAX_TITLE_CHARS`.
pub fn tidy(raw: &str) -> Option<String> {
    let title = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty() && title.chars().count() <= MAX_TITLE_CHARS).then_some(title)
}

/// The title in an office package's core properties (`docProps/core.xml`) or an
/// OpenDocument's `meta.xml`, read through the container's limits.
pub fn package_title(container: &mut Container<'_>) -> Option<String> {
    let member = if container.contains("docProps/core.xml") { "docProps/core.xml" } else { "meta.xml" };
    let xml = container.read(member).ok()?;
    tidy(&crate::dates::element_text(&xml, "title")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_tidied_and_a_paragraph_is_no_title() {
        assert_eq!(tidy("  Pump\n  maintenance   guide "), Some("Pump maintenance guide".to_owned()));
        assert_eq!(tidy(" \n "), None);
        assert_eq!(tidy(&"word ".repeat(100)), None);
    }
}
