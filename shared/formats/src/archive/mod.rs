//! Archive safety for `.zip`, `.tar.gz` and `.tgz` uploads (the seed's "Archives"), and for
//! the zip containers the office parsers open.
//!
//! An archive is read whole, one member at a time, never written anywhere. Every member's
//! path must be local and plain, every member a regular file or a folder, every path unique
//! (also case-folded and NFC-normalised) and never both file and folder; sizes are counted
//! on the decompressed bytes as they are read, and the first broken rule refuses the file
//! with a stable reason code. What passes is described by its list of members.

pub mod tar;
pub mod zip;

use crate::limits::{ContainerError, ContainerLimits};
use std::collections::{HashMap, HashSet};
use unicode_normalization::UnicodeNormalization;

/// A member of an accepted archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The path, normalised: `/`-separated, no `.` or empty parts, no trailing slash.
    pub path: String,
    pub is_folder: bool,
    /// Bytes read from it (zero for a folder).
    pub size: u64,
}

/// What an accepted archive holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    pub members: Vec<Member>,
    /// The sum of the members' sizes.
    pub unpacked_bytes: u64,
}

impl Listing {
    /// The archive's text: one member a line, folders ending in `/`.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for member in &self.members {
            text.push_str(&member.path);
            text.push_str(if member.is_folder { "/\n" } else { "\n" });
        }
        text
    }
}

/// Reads members in chunks of this size, so a member is never read past its limit by more.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

pub(crate) fn refuse(code: &'static str, message: impl Into<String>) -> ContainerError {
    ContainerError::Unsafe { code, message: message.into() }
}

/// The refusal for more members than `limits` allow (the zip check also asks it of the
/// directory's count up front, before reading a member).
pub(crate) fn too_many_entries(limits: ContainerLimits) -> ContainerError {
    refuse(
        "too_many_entries",
        format!("more than {} files and folders (WORKSPACE_ARCHIVE_MAX_ENTRIES)", limits.max_entries),
    )
}

/// Checks one member path against the path rules and returns it normalised; `None` for
/// the archive's own root (`./`), which names nothing.
pub fn local_path(raw: &str) -> Result<Option<String>, ContainerError> {
    if raw.chars().any(char::is_control) {
        return Err(refuse("control_character_in_path", format!("member {raw:?} has a control character in its path")));
    }
    if raw.contains('\\') {
        return Err(refuse("backslash_in_path", format!("member {raw:?} has a backslash in its path")));
    }
    if raw.contains(':') {
        return Err(refuse("colon_in_path", format!("member {raw:?} has a ':' in its path (a drive or a stream)")));
    }
    if raw.starts_with('/') {
        return Err(refuse("absolute_path", format!("member {raw:?} starts at the root")));
    }
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(refuse("path_traversal", format!("member {raw:?} leads outside the archive"))),
            part => {
                windows_safe(raw, part)?;
                parts.push(part)
            }
        }
    }
    if parts.is_empty() {
        return if raw.is_empty() { Err(refuse("empty_path", "a member has no name")) } else { Ok(None) };
    }
    Ok(Some(parts.join("/")))
}

/// A path component a Windows machine can create as named. Whoever downloads the archive
/// and extracts it on Windows is the one a device name (`NUL`, `COM1.txt`), a trailing dot
/// or space, or a reserved character targets, so those are refused like traversal.
fn windows_safe(raw: &str, part: &str) -> Result<(), ContainerError> {
    if let Some(bad) = part.chars().find(|c| matches!(c, '<' | '>' | '"' | '|' | '?' | '*')) {
        return Err(refuse(
            "windows_reserved_character",
            format!("member {raw:?} has {bad:?} in its path, which Windows cannot create"),
        ));
    }
    if part.ends_with('.') || part.ends_with(' ') {
        return Err(refuse(
            "windows_trailing_dot_or_space",
            format!("member {raw:?} has a name ending in a dot or a space, which Windows drops"),
        ));
    }
    // The device names hold with any extension (`con.txt`), in any case, and Windows reads
    // the superscript digits as digits (`COM¹`).
    let stem = part.split('.').next().unwrap_or(part).trim_end().to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$")
        || ["COM", "LPT"].iter().any(|prefix| {
            stem.strip_prefix(prefix).is_some_and(|digit| {
                matches!(digit, "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³")
            })
        });
    if device {
        return Err(refuse(
            "windows_device_name",
            format!("member {raw:?} is named as a Windows device ({stem}), which extracting it would open"),
        ));
    }
    Ok(())
}

/// The key two paths clash under: case-folded, NFC-normalised.
fn clash_key(path: &str) -> String {
    path.nfc().flat_map(char::to_lowercase).collect()
}

/// The accountant of one archive: paths, kinds, counts and sizes, as members are read.
#[derive(Debug)]
pub(crate) struct Ledger {
    limits: ContainerLimits,
    ratio_cap: u64,
    listing: Listing,
    /// Explicit members by clash key: `true` for a folder.
    explicit: HashMap<String, bool>,
    /// Every folder some member's path passes through.
    implied_folders: HashSet<String>,
}

impl Ledger {
    pub(crate) fn new(limits: ContainerLimits, archive_bytes: u64) -> Self {
        Self {
            limits,
            ratio_cap: archive_bytes.saturating_mul(limits.max_ratio),
            listing: Listing::default(),
            explicit: HashMap::new(),
            implied_folders: HashSet::new(),
        }
    }

    /// Records a member by its raw path; `None` when it names the root and is skipped.
    pub(crate) fn add(&mut self, raw: &str, is_folder: bool) -> Result<Option<usize>, ContainerError> {
        let Some(path) = local_path(raw)? else { return Ok(None) };
        if self.listing.members.len() >= self.limits.max_entries {
            return Err(too_many_entries(self.limits));
        }
        let key = clash_key(&path);
        let clash = || refuse("file_folder_clash", format!("{path:?} is both a file and a folder"));
        if let Some(was_folder) = self.explicit.get(&key) {
            return Err(if *was_folder == is_folder {
                refuse("duplicate_path", format!("{path:?} is in the archive twice (case and Unicode form aside)"))
            } else {
                clash()
            });
        }
        if !is_folder && self.implied_folders.contains(&key) {
            return Err(clash());
        }
        for (at, _) in key.match_indices('/') {
            let parent = &key[..at];
            if self.explicit.get(parent) == Some(&false) {
                return Err(refuse("file_folder_clash", format!("{path:?} lies inside a file")));
            }
            self.implied_folders.insert(parent.to_owned());
        }
        self.explicit.insert(key, is_folder);
        self.listing.members.push(Member { path, is_folder, size: 0 });
        Ok(Some(self.listing.members.len() - 1))
    }

    /// Counts `read` more bytes of member `index` against every size limit.
    pub(crate) fn count(&mut self, index: Option<usize>, read: u64) -> Result<(), ContainerError> {
        let size = match index {
            Some(index) => {
                let member = &mut self.listing.members[index];
                member.size += read;
                member.size
            }
            None => read,
        };
        self.listing.unpacked_bytes += read;
        let limits = self.limits;
        if size > limits.max_member_bytes {
            return Err(refuse(
                "member_too_large",
                format!(
                    "a member unpacks to more than {} MiB (WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES)",
                    limits.max_member_bytes >> 20
                ),
            ));
        }
        self.check_total(self.listing.unpacked_bytes)
    }

    /// Refuses once `unpacked` bytes pass the total or the ratio limit.
    pub(crate) fn check_total(&self, unpacked: u64) -> Result<(), ContainerError> {
        if unpacked > self.limits.max_total_bytes {
            return Err(refuse(
                "too_large_unpacked",
                format!(
                    "the archive unpacks to more than {} MiB (WORKSPACE_ARCHIVE_MAX_BYTES)",
                    self.limits.max_total_bytes >> 20
                ),
            ));
        }
        if unpacked > self.ratio_cap {
            return Err(refuse(
                "ratio_exceeded",
                format!(
                    "the archive unpacks to more than {} times its own size (WORKSPACE_ARCHIVE_MAX_RATIO)",
                    self.limits.max_ratio
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Listing {
        self.listing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason code of a refusal; anything else fails the test.
    fn refusal<T: std::fmt::Debug>(result: Result<T, ContainerError>) -> &'static str {
        match result {
            Err(ContainerError::Unsafe { code, .. }) => code,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn paths_are_local_and_plain() {
        assert_eq!(local_path("repo/src/app.py").expect("fine").as_deref(), Some("repo/src/app.py"));
        assert_eq!(local_path("./a//b/").expect("fine").as_deref(), Some("a/b"));
        assert_eq!(local_path("./").expect("root"), None);
        assert_eq!(refusal(local_path("a/../../etc/passwd")), "path_traversal");
        assert_eq!(refusal(local_path("/etc/passwd")), "absolute_path");
        assert_eq!(refusal(local_path("C:/Windows/x")), "colon_in_path");
        assert_eq!(refusal(local_path("a\\b")), "backslash_in_path");
        assert_eq!(refusal(local_path("a\0b")), "control_character_in_path");
        assert_eq!(refusal(local_path("a\u{7f}")), "control_character_in_path");
        assert_eq!(refusal(local_path("")), "empty_path");
    }

    #[test]
    fn names_windows_cannot_create_are_refused() {
        for (path, code) in [
            ("docs/CON", "windows_device_name"),
            ("nul.txt", "windows_device_name"),
            ("a/b/Com1.tar.gz", "windows_device_name"),
            ("lpt9", "windows_device_name"),
            ("docs/Aux.tar/x", "windows_device_name"),
            ("COM¹.log", "windows_device_name"),
            ("notes./x", "windows_trailing_dot_or_space"),
            ("report ", "windows_trailing_dot_or_space"),
            ("what?.txt", "windows_reserved_character"),
            ("a|b", "windows_reserved_character"),
            ("<x>", "windows_reserved_character"),
            ("\"quoted\"", "windows_reserved_character"),
            ("star*", "windows_reserved_character"),
        ] {
            assert_eq!(refusal(local_path(path)), code, "{path}");
        }
        // Near misses are ordinary names.
        for path in ["console.txt", "com10", "lpt0.txt", "nullable/x", "con-tract.pdf", "a.b.c", ".hidden"] {
            assert!(local_path(path).is_ok(), "{path}");
        }
    }

    fn ledger() -> Ledger {
        Ledger::new(ContainerLimits::default(), 1 << 20)
    }

    #[test]
    fn a_path_twice_by_case_or_by_unicode_form_is_a_duplicate() {
        let mut l = ledger();
        l.add("Docs/Readme.md", false).expect("first");
        assert_eq!(refusal(l.add("docs/README.md", false)), "duplicate_path");
        let mut l = ledger();
        l.add("caf\u{e9}.txt", false).expect("composed");
        assert_eq!(refusal(l.add("cafe\u{301}.txt", false)), "duplicate_path");
    }

    #[test]
    fn a_path_as_file_and_folder_clashes_either_way_round() {
        let mut l = ledger();
        l.add("a/b", false).expect("file");
        assert_eq!(refusal(l.add("a/b/c.txt", false)), "file_folder_clash");
        let mut l = ledger();
        l.add("a/b/c.txt", false).expect("file");
        assert_eq!(refusal(l.add("A/B", false)), "file_folder_clash");
        let mut l = ledger();
        l.add("a/", true).expect("folder");
        l.add("a/b", false).expect("file in folder");
        assert_eq!(refusal(l.add("a", false)), "file_folder_clash");
    }

    #[test]
    fn sizes_are_counted_against_each_limit() {
        let limits = ContainerLimits { max_member_bytes: 10, max_total_bytes: 15, max_ratio: 100, max_entries: 2 };
        let mut l = Ledger::new(limits, 1 << 20);
        let a = l.add("a", false).expect("a");
        l.count(a, 10).expect("at the limit");
        assert!(matches!(l.count(a, 1), Err(ContainerError::Unsafe { code: "member_too_large", .. })));
        let mut l = Ledger::new(limits, 1 << 20);
        let (a, b) = (l.add("a", false).expect("a"), l.add("b", false).expect("b"));
        l.count(a, 8).expect("a");
        assert!(matches!(l.count(b, 8), Err(ContainerError::Unsafe { code: "too_large_unpacked", .. })));
        assert_eq!(refusal(l.add("c", false)), "too_many_entries");
        let l = Ledger::new(ContainerLimits { max_total_bytes: 1000, ..limits }, 1);
        assert!(matches!(l.check_total(101), Err(ContainerError::Unsafe { code: "ratio_exceeded", .. })));
    }
}
