//! The attachment reference: the contract with the chat runner and its tools.

use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

/// What a chat message carries instead of the bytes; tools read the bytes back through
/// an owner-checked route named by `uri`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttachmentRef {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The contract's form: the upload's id as 32 hex digits, with the file's extension when
    /// it has one (`3f2a…9c.pdf`); `parse_id` reads it back, as it reads a hyphenated id.
    pub attachment_id: String,
    pub name: String,
    pub mime: String,
    pub size: i64,
    pub checksum_sha256: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub uri: String,
    pub read_policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// For an image: what the web app said of it (`vision`, `vision_model`, `gallery_id`).
    #[serde(flatten)]
    pub hints: ImageHints,
    /// For an archive: the workspace folder its members are unpacked into (members keep
    /// their paths under it; the list is the file's text), so the runner decides no path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<String>,
}

impl AttachmentRef {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: Uuid,
        name: &str,
        mime: &str,
        size: i64,
        checksum_sha256: &str,
        created_at: OffsetDateTime,
        dimensions: Option<(u32, u32)>,
    ) -> Self {
        let attachment_id = match extension(name) {
            Some(extension) => format!("{}.{extension}", id.simple()),
            None => id.simple().to_string(),
        };
        Self {
            kind: "attachment_ref",
            uri: format!("sluice://attachment/{attachment_id}"),
            attachment_id,
            name: name.to_owned(),
            mime: mime.to_owned(),
            size,
            checksum_sha256: checksum_sha256.to_owned(),
            created_at,
            read_policy: "owner_checked_upload",
            width: dimensions.map(|d| d.0),
            height: dimensions.map(|d| d.1),
            hints: ImageHints::default(),
            workspace_folder: None,
        }
    }

    /// The reference of an image, with what the web app said of it.
    pub fn with_hints(mut self, hints: ImageHints) -> Self {
        self.hints = hints;
        self
    }

    /// The reference of an archive, naming the folder it unpacks into.
    pub fn unpacked_into(mut self, folder: String) -> Self {
        self.workspace_folder = Some(folder);
        self
    }
}

/// A file name's extension as an attachment id carries it: letters and digits, at most ten,
/// lower-cased.
fn extension(name: &str) -> Option<String> {
    let (_, extension) = name.rsplit_once('.')?;
    let plain = !extension.is_empty() && extension.len() <= 10 && extension.chars().all(|c| c.is_ascii_alphanumeric());
    plain.then(|| extension.to_ascii_lowercase())
}

/// An upload's id as a client sends it: an attachment id (32 hex digits, with an extension
/// or without) or the hyphenated form.
pub fn parse_id(text: &str) -> Option<Uuid> {
    let id = match text.split_once('.') {
        Some((id, extension)) if extension.chars().all(|c| c.is_ascii_alphanumeric()) && !extension.is_empty() => id,
        Some(_) => return None,
        None => text,
    };
    // Only the two forms the contract names, not the braced or URN ones `Uuid` also reads.
    (id.len() == 32 || id.len() == 36).then(|| Uuid::parse_str(id).ok()).flatten()
}

/// What the web app may say of an uploaded image, kept with it and carried in its
/// reference: whether the chat shows it to a vision model (`vision`), which model
/// (`vision_model`), and the gallery it belongs to (`gallery_id`, an id or a hash).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ImageHints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vision: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vision_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gallery_id: Option<String>,
}

/// The longest `vision_model` or `gallery_id`.
pub const MAX_HINT_CHARS: usize = 128;

impl ImageHints {
    /// The hints as a form or a JSON body gives them (text; `vision` as `true` or
    /// `false`), refused naming the field. Only an image carries them.
    pub fn parse(
        vision: Option<&str>,
        vision_model: Option<&str>,
        gallery_id: Option<&str>,
        is_image: bool,
    ) -> Result<Self, (&'static str, String)> {
        let vision = match vision.map(str::trim) {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(_) => return Err(("vision", "vision must be true or false".to_owned())),
        };
        let vision_model = match vision_model.map(str::trim) {
            None => None,
            Some(model)
                if !model.is_empty()
                    && model.chars().count() <= MAX_HINT_CHARS
                    && !model.chars().any(|c| c.is_control() || c.is_whitespace()) =>
            {
                Some(model.to_owned())
            }
            Some(_) => {
                return Err((
                    "vision_model",
                    format!("vision_model must be a model name of 1 to {MAX_HINT_CHARS} characters without spaces"),
                ));
            }
        };
        let gallery_id = match gallery_id.map(str::trim) {
            None => None,
            Some(id)
                if !id.is_empty()
                    && id.len() <= MAX_HINT_CHARS
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':')) =>
            {
                Some(id.to_owned())
            }
            Some(_) => {
                return Err((
                    "gallery_id",
                    format!("gallery_id must be 1 to {MAX_HINT_CHARS} letters, digits, '-', '_', '.' or ':'"),
                ));
            }
        };
        let hints = Self { vision, vision_model, gallery_id };
        if !is_image && hints != Self::default() {
            let field = if hints.vision.is_some() {
                "vision"
            } else if hints.vision_model.is_some() {
                "vision_model"
            } else {
                "gallery_id"
            };
            return Err((field, format!("{field} describes an image; this file is not one")));
        }
        Ok(hints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_s_hints_are_checked_and_only_an_image_has_them() {
        let hints = ImageHints::parse(Some("true"), Some("gpt-4o"), Some("gal_7f3a:01"), true).expect("valid");
        assert_eq!(hints.vision, Some(true));
        let reference =
            AttachmentRef::new(Uuid::nil(), "a.png", "image/png", 1, "00", OffsetDateTime::UNIX_EPOCH, Some((2, 3)))
                .with_hints(hints);
        let json = serde_json::to_value(&reference).expect("json");
        assert_eq!(
            (json["vision"].clone(), json["vision_model"].clone(), json["gallery_id"].clone()),
            (serde_json::json!(true), serde_json::json!("gpt-4o"), serde_json::json!("gal_7f3a:01"))
        );
        assert_eq!((json["width"].clone(), json["height"].clone()), (serde_json::json!(2), serde_json::json!(3)));
        let plain = serde_json::to_value(AttachmentRef::new(
            Uuid::nil(),
            "a.txt",
            "text/plain",
            1,
            "00",
            OffsetDateTime::UNIX_EPOCH,
            None,
        ))
        .expect("json");
        assert!(plain.get("vision").is_none() && plain.get("gallery_id").is_none());
        assert_eq!(ImageHints::parse(Some("yes"), None, None, true).expect_err("bad").0, "vision");
        assert_eq!(ImageHints::parse(None, Some("two words"), None, true).expect_err("bad").0, "vision_model");
        assert_eq!(ImageHints::parse(None, None, Some("../x"), true).expect_err("bad").0, "gallery_id");
        assert_eq!(ImageHints::parse(None, None, Some(&"a".repeat(129)), true).expect_err("long").0, "gallery_id");
        assert_eq!(ImageHints::parse(Some("false"), None, None, false).expect_err("not an image").0, "vision");
        assert_eq!(ImageHints::parse(None, None, None, false), Ok(ImageHints::default()));
    }

    #[test]
    fn an_attachment_id_is_32_hex_digits_with_the_files_extension_and_reads_back() {
        let id = Uuid::parse_str("0f8fad5b-d9cb-469f-a165-70867728950e").expect("uuid");
        let at = OffsetDateTime::UNIX_EPOCH;
        let pdf = AttachmentRef::new(id, "Report.PDF", "application/pdf", 1, "", at, None);
        assert_eq!(pdf.attachment_id, "0f8fad5bd9cb469fa16570867728950e.pdf");
        assert_eq!(pdf.uri, "sluice://attachment/0f8fad5bd9cb469fa16570867728950e.pdf");
        assert_eq!(AttachmentRef::new(id, "notes", "text/plain", 1, "", at, None).attachment_id.len(), 32);
        for sent in
            [pdf.attachment_id.as_str(), "0f8fad5bd9cb469fa16570867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e"]
        {
            assert_eq!(parse_id(sent), Some(id), "{sent}");
        }
        for refused in [
            "0f8fad5bd9cb469fa16570867728950e.",
            "0f8fad5bd9cb469fa16570867728950e./x",
            "{0f8fad5b-d9cb-469f-a165-70867728950e}",
            "12.pdf",
        ] {
            assert_eq!(parse_id(refused), None, "{refused}");
        }
    }
}
