//! What the upload function is sent beside a file's bytes, read once into types: the JSON
//! bodies of the presigned declarations and the text fields of the multipart forms. Each
//! refusal names the field at fault; the handlers then work on these types only.

use crate::UploadError;
use serde::Deserialize;
use serde_json::{Map, Value};
use sluice_web::NonBlank;
use std::collections::BTreeMap;

/// The longest `organizational_unit` accepted.
const MAX_UNIT_CHARS: usize = 200;

/// How `POST /messages/{message_id}/attachments` names its files.
pub const LINK_RULE: &str = "send a JSON object {\"file_ids\": [\"<uuid>\", ...]}";

/// The request's JSON body read into `T`, refused naming the field at fault.
pub fn typed<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, UploadError> {
    sluice_web::typed_body(bytes).map_err(|refused| {
        let worded = refused.worded(wrong_type);
        UploadError::InvalidFields { message: worded.message.clone(), fields: vec![(worded.field, worded.message)] }
    })
}

/// How a declaration's field of the wrong type is refused.
fn wrong_type(field: &str) -> String {
    match field {
        "size" => "size must be a positive whole number of bytes".to_owned(),
        "vision" | "replace" => format!("{field} must be true or false"),
        "ingestion" => "ingestion must be a JSON object".to_owned(),
        "organizational_unit" | "vision_model" | "gallery_id" => format!("{field} must be a string"),
        "file_ids" => LINK_RULE.to_owned(),
        other => format!("{other} must be a non-empty string"),
    }
}

/// A required field of a declaration.
fn required<T>(value: Option<T>, field: &'static str, rule: &str) -> Result<T, UploadError> {
    value.ok_or_else(|| UploadError::invalid(field, format!("{field} {rule}")))
}

/// What a declaration names: the file to come, by name, size and type.
#[derive(Debug)]
pub struct Declared {
    pub filename: String,
    pub size: u64,
    pub mime_type: String,
}

impl Declared {
    fn from_fields(
        filename: Option<NonBlank>,
        size: Option<u64>,
        mime_type: Option<NonBlank>,
    ) -> Result<Self, UploadError> {
        let filename = required(filename, "filename", "must be a non-empty string")?.0;
        filename_fits("filename", &filename)?;
        let mime_type = required(mime_type, "mime_type", "must be a non-empty string")?.0;
        let size = required(size.filter(|size| *size > 0), "size", "must be a positive whole number of bytes")?;
        Ok(Self { filename, size, mime_type })
    }
}

/// Refuses, on `field`, a filename past `MAX_FILENAME_CHARS`: one rule for the inline upload
/// and both presigned declarations.
pub(crate) fn filename_fits(field: &'static str, filename: &str) -> Result<(), UploadError> {
    if filename.chars().count() > sluice_domain::MAX_FILENAME_CHARS {
        return Err(UploadError::invalid(field, "the filename is longer than 255 characters"));
    }
    Ok(())
}

/// An image's hints as sent: text, or in JSON `vision` as a boolean too.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum HintText {
    Flag(bool),
    Text(String),
}

impl HintText {
    fn text(&self) -> String {
        match self {
            Self::Flag(flag) => flag.to_string(),
            Self::Text(text) => text.clone(),
        }
    }
}

/// An image's hints as text, judged once the file is known to be an image (or not).
#[derive(Debug, Default)]
pub struct Hints {
    pub vision: Option<String>,
    pub vision_model: Option<String>,
    pub gallery_id: Option<String>,
}

impl Hints {
    /// The hints judged for a file that is (or is not) an image, refused naming the field.
    pub fn judged(&self, is_image: bool) -> Result<sluice_domain::ImageHints, UploadError> {
        sluice_domain::ImageHints::parse(
            self.vision.as_deref(),
            self.vision_model.as_deref(),
            self.gallery_id.as_deref(),
            is_image,
        )
        .map_err(|(field, why)| UploadError::invalid(field, why))
    }
}

/// `POST /files/uploads`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatIntentBody {
    filename: Option<NonBlank>,
    size: Option<u64>,
    mime_type: Option<NonBlank>,
    vision: Option<HintText>,
    vision_model: Option<HintText>,
    gallery_id: Option<HintText>,
}

/// A chat file's declaration, read.
#[derive(Debug)]
pub struct ChatIntent {
    pub declared: Declared,
    pub hints: Hints,
}

impl ChatIntent {
    pub fn read(bytes: &[u8]) -> Result<Self, UploadError> {
        let body: ChatIntentBody = typed(bytes)?;
        let text = |hint: &Option<HintText>| hint.as_ref().map(HintText::text);
        let hints = Hints {
            vision: text(&body.vision),
            vision_model: text(&body.vision_model),
            gallery_id: text(&body.gallery_id),
        };
        Ok(Self { declared: Declared::from_fields(body.filename, body.size, body.mime_type)?, hints })
    }
}

/// How a document is to be ingested, beside its bytes: the chunking override, the unit it
/// belongs to, and whether it replaces the base's earlier documents of its name.
#[derive(Debug, Default)]
pub struct DocumentOptions {
    pub ingestion: Option<Value>,
    pub organizational_unit: Option<String>,
    pub replace: bool,
}

/// The form's unit: trimmed; blank is none.
fn organizational_unit(value: Option<&str>) -> Result<Option<String>, UploadError> {
    let Some(unit) = value.map(str::trim).filter(|v| !v.is_empty()) else { return Ok(None) };
    if unit.chars().count() > MAX_UNIT_CHARS || unit.chars().any(char::is_control) {
        return Err(UploadError::invalid(
            "organizational_unit",
            format!("at most {MAX_UNIT_CHARS} printable characters"),
        ));
    }
    Ok(Some(unit.to_owned()))
}

/// `POST /kb/{kb_id}/documents/uploads`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DocumentIntentBody {
    filename: Option<NonBlank>,
    size: Option<u64>,
    mime_type: Option<NonBlank>,
    ingestion: Option<Map<String, Value>>,
    organizational_unit: Option<String>,
    replace: Option<bool>,
}

/// A document's declaration, read.
#[derive(Debug)]
pub struct DocumentIntent {
    pub declared: Declared,
    pub options: DocumentOptions,
}

impl DocumentIntent {
    pub fn read(bytes: &[u8]) -> Result<Self, UploadError> {
        let body: DocumentIntentBody = typed(bytes)?;
        let options = DocumentOptions {
            ingestion: body.ingestion.map(Value::Object),
            organizational_unit: organizational_unit(body.organizational_unit.as_deref())?,
            replace: body.replace.unwrap_or(false),
        };
        Ok(Self { declared: Declared::from_fields(body.filename, body.size, body.mime_type)?, options })
    }
}

/// A multipart form's text fields beside its file, read into a type.
pub trait Form: Sized {
    /// The text fields the form reads; any other part but `file` is ignored.
    const FIELDS: &'static [&'static str];
    fn read(texts: BTreeMap<&'static str, String>) -> Result<Self, UploadError>;
}

/// `POST /files/upload`'s form: an image's hints.
impl Form for Hints {
    const FIELDS: &'static [&'static str] = &["vision", "vision_model", "gallery_id"];
    fn read(mut texts: BTreeMap<&'static str, String>) -> Result<Self, UploadError> {
        Ok(Self {
            vision: texts.remove("vision"),
            vision_model: texts.remove("vision_model"),
            gallery_id: texts.remove("gallery_id"),
        })
    }
}

/// `POST /kb/{kb_id}/documents`'s form: `ingestion` as JSON text, the unit, `replace` as
/// `true`/`1` or `false`/`0` (blank is false).
impl Form for DocumentOptions {
    const FIELDS: &'static [&'static str] = &["ingestion", "organizational_unit", "replace"];
    fn read(texts: BTreeMap<&'static str, String>) -> Result<Self, UploadError> {
        let ingestion = match texts.get("ingestion").filter(|text| !text.trim().is_empty()) {
            None => None,
            Some(text) => match serde_json::from_str(text) {
                Ok(Value::Object(object)) => Some(Value::Object(object)),
                _ => return Err(UploadError::invalid("ingestion", wrong_type("ingestion"))),
            },
        };
        let replace = match texts.get("replace").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("" | "false" | "0") => false,
            Some("true" | "1") => true,
            Some(_) => return Err(UploadError::invalid("replace", wrong_type("replace"))),
        };
        let organizational_unit = organizational_unit(texts.get("organizational_unit").map(String::as_str))?;
        Ok(Self { ingestion, organizational_unit, replace })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<impl std::fmt::Debug, UploadError>) -> (String, String) {
        match result {
            Err(UploadError::Invalid { field, message }) => (field.to_owned(), message),
            Err(UploadError::InvalidFields { message, mut fields }) => (fields.remove(0).0, message),
            other => panic!("not a field's refusal: {other:?}"),
        }
    }

    #[test]
    fn a_declaration_is_read_into_types_and_refused_naming_its_field() {
        let intent =
            ChatIntent::read(br#"{"filename": "a.png", "size": 10, "mime_type": "image/png", "vision": true}"#)
                .expect("read");
        assert_eq!((intent.declared.filename.as_str(), intent.declared.size), ("a.png", 10));
        assert_eq!(intent.hints.vision.as_deref(), Some("true"), "a JSON flag reads as the form's text");
        for (body, field, message) in [
            (r#"{"size": 10, "mime_type": "text/plain"}"#, "filename", "filename must be a non-empty string"),
            (r#"{"filename": " ", "size": 10}"#, "filename", "filename must be a non-empty string"),
            (
                r#"{"filename": "a.txt", "size": 0, "mime_type": "text/plain"}"#,
                "size",
                "size must be a positive whole number of bytes",
            ),
            (
                r#"{"filename": "a.txt", "size": -4, "mime_type": "text/plain"}"#,
                "size",
                "size must be a positive whole number of bytes",
            ),
            (
                r#"{"filename": "a.txt", "size": 4, "mime_type": "text/plain", "vision": 3}"#,
                "vision",
                "vision must be true or false",
            ),
            (
                r#"{"filename": "a.txt", "size": 4, "mime": "text/plain"}"#,
                "mime",
                "mime is not a field of this request",
            ),
            ("[]", "body", "the body must be a JSON object"),
        ] {
            assert_eq!(refusal(ChatIntent::read(body.as_bytes())), (field.to_owned(), message.to_owned()), "{body}");
        }
        let document = DocumentIntent::read(
            br#"{"filename": "a.pdf", "size": 9, "mime_type": "application/pdf", "ingestion": {"chunk_size": 500}, "organizational_unit": " Ops ", "replace": true}"#,
        )
        .expect("read");
        assert_eq!(document.options.organizational_unit.as_deref(), Some("Ops"));
        assert!(document.options.replace && document.options.ingestion.is_some());
        for (body, field) in [
            (r#"{"filename": "a.pdf", "size": 9, "mime_type": "application/pdf", "ingestion": "x"}"#, "ingestion"),
            (r#"{"filename": "a.pdf", "size": 9, "mime_type": "application/pdf", "replace": "yes"}"#, "replace"),
            (
                r#"{"filename": "a.pdf", "size": 9, "mime_type": "application/pdf", "organizational_unit": 5}"#,
                "organizational_unit",
            ),
            (r#"{"filename": "a.pdf", "size": 9, "mime_type": "application/pdf", "vision": true}"#, "vision"),
        ] {
            assert_eq!(refusal(DocumentIntent::read(body.as_bytes())).0, field, "{body}");
        }
    }

    #[test]
    fn a_document_form_is_read_into_its_options() {
        let texts = |pairs: &[(&'static str, &str)]| pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        let options = DocumentOptions::read(texts(&[("replace", " TRUE "), ("ingestion", " ")])).expect("read");
        assert!(options.replace && options.ingestion.is_none(), "blank ingestion is none");
        assert_eq!(refusal(DocumentOptions::read(texts(&[("ingestion", "[1]")]))).0, "ingestion");
        assert_eq!(refusal(DocumentOptions::read(texts(&[("replace", "maybe")]))).0, "replace");
        let long = "x".repeat(MAX_UNIT_CHARS + 1);
        assert_eq!(refusal(DocumentOptions::read(texts(&[("organizational_unit", &long)]))).0, "organizational_unit");
    }
}
