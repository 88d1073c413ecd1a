//! The allowlist: the seed's "Supported file types" table, one row per extension.

use serde::Serialize;

/// The classified type stored on a file row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    Image,
    Pdf,
    Docx,
    Spreadsheet,
    Document,
    Presentation,
    Email,
    Text,
    Archive,
}

impl FileType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Pdf => "pdf",
            Self::Docx => "docx",
            Self::Spreadsheet => "spreadsheet",
            Self::Document => "document",
            Self::Presentation => "presentation",
            Self::Email => "email",
            Self::Text => "text",
            Self::Archive => "archive",
        }
    }
}

/// The container or signature family the bytes of a kind must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Jpeg,
    Png,
    Webp,
    Gif,
    Tiff,
    Pdf,
    /// A zip container; `Some` names the office format it must be when the bytes say.
    Zip(Option<&'static str>),
    /// An OLE compound file (legacy Office, Outlook).
    Cfb,
    Gzip,
    Text,
}

/// One allowed kind of file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// The extension, lower case, without the dot (`tar.gz` has one).
    pub extension: &'static str,
    /// The MIME type stored on the row, whatever the client declared.
    pub canonical_mime: &'static str,
    /// Declared types that agree with this extension. `application/octet-stream` (and no
    /// type at all) always agrees: browsers send it for anything they do not know.
    pub declared_mimes: &'static [&'static str],
    pub file_type: FileType,
    pub family: Family,
}

const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
const XLSM: &str = "application/vnd.ms-excel.sheet.macroEnabled.12";
const PPTX: &str = "application/vnd.openxmlformats-officedocument.presentationml.presentation";
const ODT: &str = "application/vnd.oasis.opendocument.text";
const ODS: &str = "application/vnd.oasis.opendocument.spreadsheet";
const ODP: &str = "application/vnd.oasis.opendocument.presentation";

const fn kind(
    extension: &'static str,
    canonical_mime: &'static str,
    declared_mimes: &'static [&'static str],
    file_type: FileType,
    family: Family,
) -> FileKind {
    FileKind { extension, canonical_mime, declared_mimes, file_type, family }
}

use Family as F;
use FileType as T;

/// Every allowed kind. Aliases in `declared_mimes` are the ones real browsers send (for
/// example Windows labels a `.csv` `application/vnd.ms-excel`); the bytes still decide.
pub const KINDS: &[FileKind] = &[
    kind("jpg", "image/jpeg", &["image/jpeg", "image/jpg", "image/pjpeg"], T::Image, F::Jpeg),
    kind("jpeg", "image/jpeg", &["image/jpeg", "image/jpg", "image/pjpeg"], T::Image, F::Jpeg),
    kind("png", "image/png", &["image/png", "image/x-png"], T::Image, F::Png),
    kind("webp", "image/webp", &["image/webp"], T::Image, F::Webp),
    kind("gif", "image/gif", &["image/gif"], T::Image, F::Gif),
    kind("tiff", "image/tiff", &["image/tiff", "image/tif"], T::Image, F::Tiff),
    kind("tif", "image/tiff", &["image/tiff", "image/tif"], T::Image, F::Tiff),
    kind("pdf", "application/pdf", &["application/pdf", "application/x-pdf"], T::Pdf, F::Pdf),
    kind("docx", DOCX, &[DOCX], T::Docx, F::Zip(Some("docx"))),
    kind("doc", "application/msword", &["application/msword"], T::Document, F::Cfb),
    kind("xlsx", XLSX, &[XLSX], T::Spreadsheet, F::Zip(Some("xlsx"))),
    kind("xlsm", XLSM, &[XLSM, XLSX], T::Spreadsheet, F::Zip(Some("xlsx"))),
    kind("xls", "application/vnd.ms-excel", &["application/vnd.ms-excel"], T::Spreadsheet, F::Cfb),
    kind("ods", ODS, &[ODS], T::Spreadsheet, F::Zip(Some("ods"))),
    kind("pptx", PPTX, &[PPTX], T::Presentation, F::Zip(Some("pptx"))),
    kind("odp", ODP, &[ODP], T::Presentation, F::Zip(Some("odp"))),
    kind("odt", ODT, &[ODT], T::Document, F::Zip(Some("odt"))),
    kind("epub", "application/epub+zip", &["application/epub+zip"], T::Document, F::Zip(Some("epub"))),
    kind("rtf", "application/rtf", &["application/rtf", "text/rtf"], T::Document, F::Text),
    kind("msg", "application/vnd.ms-outlook", &["application/vnd.ms-outlook", "application/x-msg"], T::Email, F::Cfb),
    kind("txt", "text/plain", &["text/plain"], T::Text, F::Text),
    kind("md", "text/markdown", &["text/markdown", "text/x-markdown", "text/plain"], T::Text, F::Text),
    kind(
        "csv",
        "text/csv",
        &["text/csv", "application/csv", "text/plain", "application/vnd.ms-excel"],
        T::Text,
        F::Text,
    ),
    kind("html", "text/html", &["text/html"], T::Text, F::Text),
    kind("xml", "application/xml", &["application/xml", "text/xml"], T::Text, F::Text),
    kind("json", "application/json", &["application/json", "text/json"], T::Text, F::Text),
    // A drawing in XML: read for its words (`crate::svg`), and served only as a download,
    // never shown where its scripts could run.
    kind("svg", "image/svg+xml", &["image/svg+xml"], T::Text, F::Text),
    kind("zip", "application/zip", &["application/zip", "application/x-zip-compressed"], T::Archive, F::Zip(None)),
    kind(
        "tar.gz",
        "application/gzip",
        &["application/gzip", "application/x-gzip", "application/x-tar"],
        T::Archive,
        F::Gzip,
    ),
    kind(
        "tgz",
        "application/gzip",
        &["application/gzip", "application/x-gzip", "application/x-tar"],
        T::Archive,
        F::Gzip,
    ),
];

/// The extensions whose readers write markdown when asked (`ExtractOptions::markdown`);
/// every other format is written as text either way.
pub const MARKDOWN_EXTENSIONS: &[&str] =
    &["csv", "doc", "docx", "epub", "html", "odp", "ods", "odt", "pdf", "pptx", "xls", "xlsm", "xlsx"];

/// Whether the reader of files with `extension` writes markdown when asked.
pub fn writes_markdown(extension: &str) -> bool {
    MARKDOWN_EXTENSIONS.contains(&extension)
}

/// Whether ingestion can turn a kind into text here: documents, spreadsheets, slides, mail
/// and text — not archives.
pub fn ingestible(kind: &FileKind) -> bool {
    match kind.file_type {
        // Images and TIFF pages are read by OCR.
        FileType::Archive => false,
        _ => true,
    }
}

/// The extensions ingestion can route, as `GET /rag/supported-formats` answers them.
pub fn ingestible_extensions() -> Vec<&'static str> {
    KINDS.iter().filter(|k| ingestible(k)).map(|k| k.extension).collect()
}

/// The kind a filename's extension names, if it is on the allowlist (case-insensitive).
pub fn kind_for_filename(filename: &str) -> Option<&'static FileKind> {
    let lower = filename.to_ascii_lowercase();
    if lower.ends_with(".tar.gz") {
        return KINDS.iter().find(|k| k.extension == "tar.gz");
    }
    let ext = lower.rsplit_once('.').map(|(_, ext)| ext)?;
    KINDS.iter().find(|k| k.extension == ext)
}

/// Lower-cases a declared type and drops its parameters (`; charset=…`).
pub fn essence(mime: &str) -> String {
    mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_found_case_insensitively() {
        assert_eq!(kind_for_filename("Report.PDF").map(|k| k.extension), Some("pdf"));
        assert_eq!(kind_for_filename("repo.tar.gz").map(|k| k.extension), Some("tar.gz"));
        assert_eq!(kind_for_filename("x.gz"), None);
        assert_eq!(kind_for_filename("noext"), None);
        assert_eq!(kind_for_filename("evil.exe"), None);
    }

    #[test]
    fn every_row_of_the_seed_table_is_present() {
        for ext in [
            "jpg", "png", "webp", "gif", "tiff", "tif", "pdf", "docx", "doc", "xlsx", "xlsm", "xls", "ods", "pptx",
            "odp", "odt", "msg", "txt", "md", "csv", "html", "xml", "json", "zip", "tar.gz", "tgz",
        ] {
            assert!(KINDS.iter().any(|k| k.extension == ext), "{ext} missing");
        }
    }
}
