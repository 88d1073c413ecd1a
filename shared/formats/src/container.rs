//! Zip containers (the OOXML and OpenDocument formats) opened under the archive limits:
//! a bounded member count, every member's size counted on the decompressed bytes as they
//! are read (headers are hints), a total and a ratio cap, no duplicate part names (also
//! case-folded), no encrypted parts, and no XML part with a DOCTYPE or entity declaration.

use std::collections::HashSet;
use std::io::{Cursor, Read};

/// The archive limits of the seed's "Archives" section.
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

/// Every reason code a container refusal can carry; stable, and part of the API.
pub const REASON_CODES: &[&str] = &[
    "too_many_entries",
    "encrypted_member",
    "duplicate_path",
    "member_too_large",
    "too_large_unpacked",
    "ratio_exceeded",
    "xml_doctype",
];

fn unsafe_(code: &'static str, message: impl Into<String>) -> ContainerError {
    debug_assert!(REASON_CODES.contains(&code), "{code} is missing from REASON_CODES");
    ContainerError::Unsafe { code, message: message.into() }
}

/// A checked zip container.
pub struct Container<'a> {
    archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    names: Vec<String>,
    limits: ContainerLimits,
}

impl std::fmt::Debug for Container<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container").field("names", &self.names).finish()
    }
}

const DECLARATIONS: [&[u8]; 2] = [b"<!DOCTYPE", b"<!ENTITY"];

impl<'a> Container<'a> {
    /// Opens and checks every member; nothing is kept but the names.
    pub fn open(bytes: &'a [u8], limits: ContainerLimits) -> Result<Self, ContainerError> {
        let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| ContainerError::Corrupt(format!("not a readable zip container: {e}")))?;
        if archive.len() > limits.max_entries {
            return Err(unsafe_("too_many_entries", format!("more than {} parts", limits.max_entries)));
        }
        let mut names = Vec::with_capacity(archive.len());
        let mut folded = HashSet::with_capacity(archive.len());
        for index in 0..archive.len() {
            let entry = archive.by_index_raw(index).map_err(|e| ContainerError::Corrupt(e.to_string()))?;
            let name = entry.name().map_err(|e| ContainerError::Corrupt(e.to_string()))?.into_owned();
            if entry.encrypted() {
                return Err(unsafe_("encrypted_member", format!("part {name:?} is encrypted")));
            }
            if !folded.insert(name.to_lowercase()) {
                return Err(unsafe_("duplicate_path", format!("part {name:?} appears twice")));
            }
            names.push(name);
        }
        // The zip reader keeps one entry per name, so a name stored twice in the central
        // directory is found by reading the directory's own records.
        if let Some(raw) = central_directory_names(bytes)
            && raw.len() != names.len()
        {
            return Err(unsafe_("duplicate_path", "a part name appears twice in the central directory"));
        }
        let mut container = Self { archive, names, limits };
        container.check_members(bytes.len() as u64)?;
        Ok(container)
    }

    /// Decompresses every member once, counting, and scans XML parts for declarations.
    fn check_members(&mut self, archive_size: u64) -> Result<(), ContainerError> {
        let ratio_cap = archive_size.saturating_mul(self.limits.max_ratio).min(self.limits.max_total_bytes);
        let mut total: u64 = 0;
        let mut chunk = vec![0u8; 64 * 1024];
        for index in 0..self.names.len() {
            let name = self.names[index].clone();
            let is_xml = name.ends_with(".xml") || name.ends_with(".rels");
            let mut member =
                self.archive.by_index(index).map_err(|e| ContainerError::Corrupt(format!("part {name:?}: {e}")))?;
            let mut size: u64 = 0;
            let mut tail: Vec<u8> = Vec::new();
            loop {
                let read =
                    member.read(&mut chunk).map_err(|e| ContainerError::Corrupt(format!("part {name:?}: {e}")))?;
                if read == 0 {
                    break;
                }
                size += read as u64;
                total += read as u64;
                if size > self.limits.max_member_bytes {
                    return Err(unsafe_("member_too_large", format!("part {name:?} unpacks to more than the limit")));
                }
                if total > self.limits.max_total_bytes {
                    return Err(unsafe_("too_large_unpacked", "the container unpacks to more than the limit"));
                }
                if total > ratio_cap {
                    return Err(unsafe_("ratio_exceeded", "the container unpacks to too many times its own size"));
                }
                if is_xml {
                    // Keep the last bytes of the previous chunk so a split declaration is seen.
                    tail.extend_from_slice(&chunk[..read]);
                    if DECLARATIONS.iter().any(|d| tail.windows(d.len()).any(|w| w == *d)) {
                        return Err(unsafe_("xml_doctype", format!("part {name:?} declares a DOCTYPE or entities")));
                    }
                    let keep = tail.len().saturating_sub(8);
                    tail.drain(..keep);
                }
            }
        }
        Ok(())
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// A member's bytes (it was checked against the limits when the container opened).
    pub fn read(&mut self, name: &str) -> Result<Vec<u8>, ContainerError> {
        let mut member =
            self.archive.by_name(name).map_err(|e| ContainerError::Corrupt(format!("part {name:?}: {e}")))?;
        let mut out = Vec::new();
        (&mut member)
            .take(self.limits.max_member_bytes + 1)
            .read_to_end(&mut out)
            .map_err(|e| ContainerError::Corrupt(format!("part {name:?}: {e}")))?;
        Ok(out)
    }
}

/// The names in the central directory, read from its records (`None` for zip64 or an
/// unreadable directory, where the zip reader's own view is used).
fn central_directory_names(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const HEADER: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];
    let search_from = bytes.len().saturating_sub(22 + 65_535);
    let eocd = bytes[search_from..].windows(4).rposition(|w| w == EOCD)? + search_from;
    let field = |at: usize, len: usize| -> Option<u64> {
        let slice = bytes.get(at..at + len)?;
        Some(slice.iter().rev().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    };
    let entries = field(eocd + 10, 2)?;
    let offset = field(eocd + 16, 4)?;
    if entries == 0xFFFF || offset == 0xFFFF_FFFF {
        return None;
    }
    let mut names = Vec::with_capacity(entries as usize);
    let mut at = usize::try_from(offset).ok()?;
    for _ in 0..entries {
        if bytes.get(at..at + 4)? != HEADER {
            return None;
        }
        let name_len = field(at + 28, 2)? as usize;
        let extra_len = field(at + 30, 2)? as usize;
        let comment_len = field(at + 32, 2)? as usize;
        names.push(bytes.get(at + 46..at + 46 + name_len)?);
        at += 46 + name_len + extra_len + comment_len;
    }
    Some(names)
}
