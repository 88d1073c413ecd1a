//! The upload check: the extension, the declared type and the bytes must all agree.

use crate::kinds::{self, Family, FileKind, FileType, essence, kind_for_filename};
use crate::sniff::{Sniffed, sniff};

/// Why a file is refused. Each code is stable: clients and tests match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalCode {
    /// The extension is on no row of the allowlist.
    ExtensionNotAllowed,
    /// The declared type is not one the extension's row allows.
    DeclaredTypeMismatch,
    /// The bytes are not what the extension says.
    ContentMismatch,
    /// Zero bytes.
    EmptyFile,
    /// An image whose pixels cannot be decoded (a TIFF must be shown as PNG pages).
    UndecodableImage,
    /// An office container breaking an archive safety rule; the code names the rule.
    UnsafeContainer(&'static str),
}

impl RefusalCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExtensionNotAllowed => "extension_not_allowed",
            Self::DeclaredTypeMismatch => "declared_type_mismatch",
            Self::ContentMismatch => "content_mismatch",
            Self::EmptyFile => "empty_file",
            Self::UndecodableImage => "undecodable_image",
            Self::UnsafeContainer(code) => code,
        }
    }

    /// The code `as_str` gave, back again; `None` for a code this build does not know.
    pub fn from_code(code: &str) -> Option<Self> {
        let fixed = [
            Self::ExtensionNotAllowed,
            Self::DeclaredTypeMismatch,
            Self::ContentMismatch,
            Self::EmptyFile,
            Self::UndecodableImage,
        ];
        fixed
            .into_iter()
            .find(|c| c.as_str() == code)
            .or_else(|| crate::limits::REASON_CODES.iter().find(|c| **c == code).map(|c| Self::UnsafeContainer(c)))
    }
}

/// A refusal with a sentence a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "RefusalRecord", try_from = "RefusalRecord")]
pub struct Refusal {
    pub code: RefusalCode,
    pub message: String,
}

/// A refusal as it travels between processes: the code by its name.
#[derive(serde::Serialize, serde::Deserialize)]
struct RefusalRecord {
    code: String,
    message: String,
}

impl From<Refusal> for RefusalRecord {
    fn from(refusal: Refusal) -> Self {
        Self { code: refusal.code.as_str().to_owned(), message: refusal.message }
    }
}

impl TryFrom<RefusalRecord> for Refusal {
    type Error = String;

    fn try_from(record: RefusalRecord) -> Result<Self, String> {
        let code =
            RefusalCode::from_code(&record.code).ok_or_else(|| format!("unknown refusal code {}", record.code))?;
        Ok(Self { code, message: record.message })
    }
}

/// The checks an upload's name and declared type must pass before any byte is seen (a
/// presigned upload is judged on these first, and on its bytes when they land).
pub fn check_declared(filename: &str, declared_mime: Option<&str>) -> Result<&'static FileKind, Refusal> {
    let kind = kind_for_filename(filename).ok_or_else(|| Refusal {
        code: RefusalCode::ExtensionNotAllowed,
        message: format!(
            "files named like {filename:?} are not accepted; allowed extensions: {}",
            kinds::KINDS.iter().map(|k| k.extension).collect::<Vec<_>>().join(", ")
        ),
    })?;
    let declared = declared_mime.map(essence).unwrap_or_default();
    let declared_ok = declared.is_empty()
        || declared == "application/octet-stream"
        || kind.declared_mimes.iter().any(|m| *m == declared);
    if !declared_ok {
        return Err(Refusal {
            code: RefusalCode::DeclaredTypeMismatch,
            message: format!("a .{} file cannot be declared as {declared}", kind.extension),
        });
    }
    Ok(kind)
}

/// An accepted file: its row of the allowlist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    pub kind: &'static FileKind,
}

impl Accepted {
    pub fn canonical_mime(&self) -> &'static str {
        self.kind.canonical_mime
    }
    pub fn file_type(&self) -> FileType {
        self.kind.file_type
    }
}

/// Checks a file by its name, its declared type and its bytes.
pub fn check_upload(filename: &str, declared_mime: Option<&str>, bytes: &[u8]) -> Result<Accepted, Refusal> {
    let kind = check_declared(filename, declared_mime)?;
    if bytes.is_empty() {
        return Err(Refusal { code: RefusalCode::EmptyFile, message: "the file is empty".to_owned() });
    }
    let sniffed = sniff(bytes);
    if !family_agrees(kind.family, sniffed) {
        let found = match sniffed {
            Sniffed::Family(family) => describe(family).to_owned(),
            Sniffed::Other(mime) => mime.to_owned(),
            Sniffed::Binary => "unrecognised binary data".to_owned(),
        };
        return Err(Refusal {
            code: RefusalCode::ContentMismatch,
            message: format!("the file is named .{} but its content is {found}", kind.extension),
        });
    }
    Ok(Accepted { kind })
}

fn family_agrees(expected: Family, sniffed: Sniffed) -> bool {
    match (expected, sniffed) {
        (Family::Zip(want), Sniffed::Family(Family::Zip(found))) => match (want, found) {
            // A plain zip may still be an office file the signature check could not see
            // into; the parser opens it and decides.
            (_, None) => true,
            (Some(want), Some(found)) => want == found,
            (None, Some(_)) => true,
        },
        (expected, Sniffed::Family(found)) => expected == found,
        _ => false,
    }
}

fn describe(family: Family) -> &'static str {
    match family {
        Family::Jpeg => "a JPEG image",
        Family::Png => "a PNG image",
        Family::Webp => "a WebP image",
        Family::Gif => "a GIF image",
        Family::Tiff => "a TIFF image",
        Family::Pdf => "a PDF document",
        Family::Zip(Some(_)) => "an office document",
        Family::Zip(None) => "a zip archive",
        Family::Cfb => "an OLE compound file",
        Family::Gzip => "a gzip stream",
        Family::Text => "text",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";

    #[test]
    fn every_refusal_code_reads_back_as_itself() {
        let container = crate::limits::REASON_CODES.iter().map(|c| RefusalCode::UnsafeContainer(c));
        let fixed = [RefusalCode::ExtensionNotAllowed, RefusalCode::EmptyFile, RefusalCode::UndecodableImage];
        for code in fixed.into_iter().chain(container) {
            assert_eq!(RefusalCode::from_code(code.as_str()), Some(code));
        }
        assert_eq!(RefusalCode::from_code("made_up"), None);
    }

    #[test]
    fn agreeing_name_type_and_bytes_are_accepted_with_the_canonical_type() {
        let accepted = check_upload("a.csv", Some("text/csv"), b"a,b\n1,2\n").expect("accepted");
        assert_eq!(accepted.canonical_mime(), "text/csv");
        let tiff = b"II*\0\x08\0\0\0\x01\0\0\x01\x03\0\x01\0\0\0";
        let accepted = check_upload("scan.TIFF", Some("application/octet-stream"), tiff).expect("accepted");
        assert_eq!(accepted.canonical_mime(), "image/tiff");
        assert_eq!(accepted.file_type(), FileType::Image);
    }

    #[test]
    fn each_disagreement_has_its_code() {
        let code = |name: &str, mime: Option<&str>, bytes: &[u8]| check_upload(name, mime, bytes).map_err(|r| r.code);
        assert_eq!(code("run.exe", None, b"MZ"), Err(RefusalCode::ExtensionNotAllowed));
        assert_eq!(code("notes.txt", Some("image/png"), b"hello"), Err(RefusalCode::DeclaredTypeMismatch));
        assert_eq!(code("photo.txt", Some("text/plain"), PNG), Err(RefusalCode::ContentMismatch));
        assert_eq!(code("photo.jpg", Some("image/jpeg"), PNG), Err(RefusalCode::ContentMismatch));
        assert_eq!(code("doc.pdf", Some("application/pdf"), b"just text"), Err(RefusalCode::ContentMismatch));
        assert_eq!(code("empty.txt", Some("text/plain"), b""), Err(RefusalCode::EmptyFile));
        assert!(code("photo.png", Some("image/png; charset=binary"), PNG).is_ok());
    }
}
