//! What the upload check found in a file's bytes.

/// The checked content of a file: the same for the inline and the presigned path, so the
/// two produce identical rows.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileContent {
    /// The canonical MIME type of the file's row of the allowlist.
    pub mime_type: String,
    /// Bytes, as counted.
    pub size: i64,
    pub file_type: String,
    /// The extracted text, NUL-free; `None` for an image or a file no parser could read.
    pub parsed_content: Option<String>,
    pub preview: Option<String>,
    pub checksum_sha256: String,
    /// Why a file that should have text has none.
    pub parse_note: Option<String>,
    pub width: Option<i32>,
    pub height: Option<i32>,
}
