//! A document's own date, read from its metadata: a PDF's `CreationDate` (else `ModDate`),
//! an OOXML package's `dcterms:created`, an OpenDocument's `meta:creation-date`, an
//! Outlook message's sent (else delivered) time, an image's EXIF `DateTimeOriginal`. The
//! calendar day is taken as the file writes it (no time-zone shift: the author's day). A
//! date before 1900 or after tomorrow is a clock that was never set, and is ignored.

use crate::container::Container;
use crate::xml::Node;
use time::{Date, Month, OffsetDateTime};

/// Where a document's date was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DateSource {
    PdfCreationDate,
    PdfModDate,
    DctermsCreated,
    OdfCreationDate,
    MsgDate,
    ExifDateTimeOriginal,
}

impl DateSource {
    /// The name stored with the document and in each chunk's `date_source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PdfCreationDate => "pdf_creation_date",
            Self::PdfModDate => "pdf_mod_date",
            Self::DctermsCreated => "dcterms_created",
            Self::OdfCreationDate => "odf_creation_date",
            Self::MsgDate => "msg_date",
            Self::ExifDateTimeOriginal => "exif_date_time_original",
        }
    }
}

/// A document's own date and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OwnDate {
    pub date: Date,
    pub source: DateSource,
}

/// A plausible calendar day from its parts.
fn day(year: i32, month: u8, day: u8) -> Option<Date> {
    let date = Date::from_calendar_date(year, Month::try_from(month).ok()?, day).ok()?;
    let tomorrow = OffsetDateTime::now_utc().date().next_day()?;
    (year >= 1900 && date <= tomorrow).then_some(date)
}

/// Reads `len` ASCII digits at `at`.
fn digits(text: &str, at: usize, len: usize) -> Option<u32> {
    let part = text.get(at..at + len)?;
    part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse().ok())?
}

/// A PDF date string: `D:YYYYMMDD…` (the `D:` prefix and everything after the day optional).
pub fn pdf_date(text: &str) -> Option<Date> {
    let text = text.trim();
    let text = text.strip_prefix("D:").unwrap_or(text);
    day(digits(text, 0, 4)? as i32, digits(text, 4, 2)? as u8, digits(text, 6, 2)? as u8)
}

/// A W3C date-time (`YYYY-MM-DD…`), as OOXML and OpenDocument write them.
pub fn w3c_date(text: &str) -> Option<Date> {
    let text = text.trim();
    if text.get(4..5) != Some("-") || text.get(7..8) != Some("-") {
        return None;
    }
    day(digits(text, 0, 4)? as i32, digits(text, 5, 2)? as u8, digits(text, 8, 2)? as u8)
}

/// An EXIF date-time: `YYYY:MM:DD HH:MM:SS`.
pub fn exif_date(text: &str) -> Option<Date> {
    let text = text.trim();
    if text.get(4..5) != Some(":") || text.get(7..8) != Some(":") {
        return None;
    }
    day(digits(text, 0, 4)? as i32, digits(text, 5, 2)? as u8, digits(text, 8, 2)? as u8)
}

/// A Windows FILETIME (100-ns ticks since 1601), as Outlook stores times; its UTC day.
pub fn filetime_date(ticks: u64) -> Option<Date> {
    let seconds = i64::try_from(ticks / 10_000_000).ok()? - 11_644_473_600;
    let at = OffsetDateTime::from_unix_timestamp(seconds).ok()?;
    day(at.year(), at.month() as u8, at.day())
}

/// The creation date in an office package's core properties (`docProps/core.xml`) or an
/// OpenDocument's `meta.xml`, read through the container's limits.
pub fn package_created(container: &mut Container<'_>) -> Option<OwnDate> {
    let (member, element, source) = if container.contains("docProps/core.xml") {
        ("docProps/core.xml", "created", DateSource::DctermsCreated)
    } else {
        ("meta.xml", "creation-date", DateSource::OdfCreationDate)
    };
    let xml = container.read(member).ok()?;
    let text = element_text(&xml, element)?;
    Some(OwnDate { date: w3c_date(&text)?, source })
}

/// The text of the first element whose local name is `local` (any prefix).
pub(crate) fn element_text(xml: &[u8], local: &str) -> Option<String> {
    let (mut inside, mut found) = (false, None::<String>);
    let walked = crate::xml::walk::<crate::xml::XmlError>(xml, |node| {
        match node {
            Node::Start(start) => inside = crate::xml::local(start) == local,
            Node::Text(text) if inside => found.get_or_insert_with(String::new).push_str(text),
            Node::End(_) if found.is_some() => return Ok(false),
            Node::End(_) | Node::Empty(_) => inside = false,
            Node::Text(_) => {}
        }
        Ok(true)
    });
    walked.ok().and(found)
}

/// An image's EXIF `DateTimeOriginal` (JPEG, TIFF, PNG, WebP, HEIF containers).
pub fn exif_created(bytes: &[u8]) -> Option<OwnDate> {
    let exif = exif::Reader::new().read_from_container(&mut std::io::Cursor::new(bytes)).ok()?;
    let field = exif.get_field(exif::Tag::DateTimeOriginal, exif::In::PRIMARY)?;
    let exif::Value::Ascii(parts) = &field.value else { return None };
    let text = String::from_utf8_lossy(parts.first()?);
    Some(OwnDate { date: exif_date(&text)?, source: DateSource::ExifDateTimeOriginal })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    #[test]
    fn each_written_form_gives_its_day_and_junk_gives_none() {
        assert_eq!(pdf_date("D:20230415123000+02'00'"), Some(date!(2023 - 04 - 15)));
        assert_eq!(pdf_date("20230415"), Some(date!(2023 - 04 - 15)));
        assert_eq!(w3c_date("2006-10-13T18:06:00Z"), Some(date!(2006 - 10 - 13)));
        assert_eq!(w3c_date("2006-10-13"), Some(date!(2006 - 10 - 13)));
        assert_eq!(exif_date("2019:07:04 10:11:12"), Some(date!(2019 - 07 - 04)));
        // 2007-08-15 06:50:14 UTC as a FILETIME.
        assert_eq!(filetime_date((1_187_160_614 + 11_644_473_600) * 10_000_000), Some(date!(2007 - 08 - 15)));
        for junk in ["", "D:", "D:2023", "D:20231301", "D:00000101", "D:99991231", "D:2023+415", "garbage"] {
            assert_eq!(pdf_date(junk), None, "{junk}");
        }
        assert_eq!(w3c_date("2023/04/15"), None);
        assert_eq!(exif_date("0000:00:00 00:00:00"), None, "a camera whose clock was never set");
        assert_eq!(filetime_date(0), None);
    }

    #[test]
    fn the_element_is_found_under_any_prefix() {
        let core = br#"<cp:coreProperties xmlns:dcterms="x"><dc:title>T</dc:title><dcterms:created>2006-10-13T18:06:00Z</dcterms:created></cp:coreProperties>"#;
        assert_eq!(element_text(core, "created").as_deref(), Some("2006-10-13T18:06:00Z"));
        assert_eq!(element_text(core, "modified"), None);
    }
}
