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
    pub attachment_id: Uuid,
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
        Self {
            kind: "attachment_ref",
            attachment_id: id,
            name: name.to_owned(),
            mime: mime.to_owned(),
            size,
            checksum_sha256: checksum_sha256.to_owned(),
            created_at,
            uri: format!("sluice://attachment/{id}"),
            read_policy: "owner_checked_upload",
            width: dimensions.map(|d| d.0),
            height: dimensions.map(|d| d.1),
            workspace_folder: None,
        }
    }

    /// The reference of an archive, naming the folder it unpacks into.
    pub fn unpacked_into(mut self, folder: String) -> Self {
        self.workspace_folder = Some(folder);
        self
    }
}
