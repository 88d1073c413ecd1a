//! The limits every archive and office container is read under, and the refusal a broken
//! rule gives: shared by the archive checker and the containers above it.

/// The archive limits (`WORKSPACE_ARCHIVE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerLimits {
    /// `WORKSPACE_ARCHIVE_MAX_ENTRIES`.
    pub max_entries: usize,
    /// `WORKSPACE_ARCHIVE_MAX_BYTES`.
    pub max_total_bytes: u64,
    /// `WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES`.
    pub max_member_bytes: u64,
    /// `WORKSPACE_ARCHIVE_MAX_RATIO`.
    pub max_ratio: u64,
}

impl Default for ContainerLimits {
    fn default() -> Self {
        Self { max_entries: 5000, max_total_bytes: 200 << 20, max_member_bytes: 50 << 20, max_ratio: 100 }
    }
}

/// Why a container is refused (`code` is a stable reason code) or cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerError {
    Unsafe { code: &'static str, message: String },
    Corrupt(String),
}

/// Every reason code an archive or container refusal can carry; stable, and part of the API.
pub const REASON_CODES: &[&str] = &[
    "control_character_in_path",
    "backslash_in_path",
    "colon_in_path",
    "absolute_path",
    "path_traversal",
    "empty_path",
    "path_not_utf8",
    "symlink",
    "hardlink",
    "special_file",
    "duplicate_path",
    "file_folder_clash",
    "encrypted_member",
    "unsupported_compression",
    "unsupported_member_format",
    "too_many_entries",
    "too_large_unpacked",
    "ratio_exceeded",
    "member_too_large",
    "overlapping_entries",
    "header_mismatch",
    "corrupt_archive",
    "uncheckable_archive",
    "xml_doctype",
];
