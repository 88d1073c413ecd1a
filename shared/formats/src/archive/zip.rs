//! Zip archives: the `zip` crate reads the central directory and inflates; the checks the
//! crate does not make are made here, on the raw records: a name stored twice, a local
//! header that disagrees with its central-directory record, and entries whose data ranges
//! overlap (the overlapping-file bomb, where one compressed block is counted many times).

use super::{Ledger, Listing, READ_CHUNK_BYTES, refuse, too_many_entries};
use crate::limits::{ContainerError, ContainerLimits};
use std::io::{Cursor, Read};
use zip::CompressionMethod;

/// A zip whose every member passed: the reader (for parsers that go on to read parts), the
/// names as the reader knows them, and the listing.
pub struct CheckedZip<'a> {
    pub archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    pub names: Vec<String>,
    pub listing: Listing,
}

impl std::fmt::Debug for CheckedZip<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedZip").field("names", &self.names).finish()
    }
}

/// Sees every chunk of every member as it is inflated (the office parsers scan XML parts).
pub type Inspect<'i> = &'i mut dyn FnMut(&str, &[u8]) -> Result<(), ContainerError>;

fn corrupt(message: impl Into<String>) -> ContainerError {
    ContainerError::Corrupt(message.into())
}

/// Checks a zip archive member by member under `limits`, stopping at the first refusal.
pub fn check<'a>(
    bytes: &'a [u8],
    limits: ContainerLimits,
    inspect: Inspect<'_>,
) -> Result<CheckedZip<'a>, ContainerError> {
    let mut archive =
        // The reasons are Sluice's words: the reader's own error text is never stored or answered.
        zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|_| corrupt("not a readable zip archive (its central directory is missing or broken)"))?;
    if end_record_is_cut(bytes) {
        return Err(corrupt("the end record's comment runs past the end of the file (the file is truncated)"));
    }
    if archive.len() > limits.max_entries {
        return Err(too_many_entries(limits));
    }
    // The reader keeps one entry per name, so a name stored twice is found in the raw records.
    if central_directory_records(bytes).is_some_and(|records| records != archive.len()) {
        return Err(refuse("duplicate_path", "a member name is stored twice in the central directory"));
    }
    let mut ledger = Ledger::new(limits, bytes.len() as u64);
    let mut names = Vec::with_capacity(archive.len());
    let mut ranges = Vec::with_capacity(archive.len());
    let mut slots = Vec::with_capacity(archive.len());
    for index in 0..archive.len() {
        let entry =
            archive.by_index_raw(index).map_err(|_| corrupt(format!("member {index}'s entry cannot be read")))?;
        let name = entry.name().map_err(|_| corrupt(format!("member {index}'s name cannot be read")))?.into_owned();
        if entry.encrypted() || entry.compression() == CompressionMethod::AES {
            return Err(refuse("encrypted_member", format!("member {name:?} is encrypted")));
        }
        match entry.unix_mode().map(|mode| mode & 0o170000) {
            Some(0o120000) => return Err(refuse("symlink", format!("member {name:?} is a symbolic link"))),
            Some(0o010000 | 0o020000 | 0o060000 | 0o140000) => {
                return Err(refuse("special_file", format!("member {name:?} is a device, FIFO or socket")));
            }
            _ => {}
        }
        let method = match entry.compression() {
            CompressionMethod::Stored => 0,
            CompressionMethod::Deflated => 8,
            other => {
                return Err(refuse(
                    "unsupported_compression",
                    format!("member {name:?} uses compression {other}; only stored and deflated members are read"),
                ));
            }
        };
        let local = LocalHeader::read(bytes, entry.header_start())
            .ok_or_else(|| corrupt(format!("member {name:?} has no local header where the directory says")))?;
        let sizes_disagree = local.flags & 0x08 == 0
            && local.compressed != u32::MAX
            && local.uncompressed != u32::MAX
            && (u64::from(local.compressed) != entry.compressed_size()
                || u64::from(local.uncompressed) != entry.size());
        if local.name != entry.name_raw() || local.method != method || sizes_disagree {
            return Err(refuse(
                "header_mismatch",
                format!("member {name:?}: its local header disagrees with the central directory"),
            ));
        }
        let end = local.data_start.checked_add(entry.compressed_size()).filter(|end| *end <= bytes.len() as u64);
        let end = end.ok_or_else(|| corrupt(format!("member {name:?} runs past the end of the file")))?;
        ranges.push((entry.header_start(), end));
        let is_folder = entry.is_dir();
        drop(entry);
        slots.push((ledger.add(&name, is_folder)?, is_folder));
        names.push(name);
    }
    ranges.sort_unstable();
    if ranges.windows(2).any(|pair| pair[1].0 < pair[0].1) {
        return Err(refuse("overlapping_entries", "two members' data overlap (an overlapping-file bomb)"));
    }
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    for (index, (slot, is_folder)) in slots.into_iter().enumerate() {
        if is_folder {
            continue;
        }
        let name = &names[index];
        let unreadable = || corrupt(format!("member {name:?} cannot be read whole (its data is corrupt or cut short)"));
        let mut member = archive.by_index(index).map_err(|_| unreadable())?;
        loop {
            let read = member.read(&mut chunk).map_err(|_| unreadable())?;
            if read == 0 {
                break;
            }
            ledger.count(slot, read as u64)?;
            inspect(name, &chunk[..read])?;
        }
    }
    Ok(CheckedZip { archive, names, listing: ledger.finish() })
}

/// The fields of a local file header the checks compare.
struct LocalHeader<'a> {
    flags: u16,
    method: u16,
    compressed: u32,
    uncompressed: u32,
    name: &'a [u8],
    data_start: u64,
}

impl<'a> LocalHeader<'a> {
    fn read(bytes: &'a [u8], at: u64) -> Option<Self> {
        let at = usize::try_from(at).ok()?;
        let header = bytes.get(at..at.checked_add(30)?)?;
        if header[..4] != [0x50, 0x4b, 0x03, 0x04] {
            return None;
        }
        let u16_at = |i: usize| u16::from_le_bytes([header[i], header[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let (name_len, extra_len) = (usize::from(u16_at(26)), usize::from(u16_at(28)));
        Some(Self {
            flags: u16_at(6),
            method: u16_at(8),
            compressed: u32_at(18),
            uncompressed: u32_at(22),
            name: bytes.get(at + 30..at + 30 + name_len)?,
            data_start: (at + 30 + name_len + extra_len) as u64,
        })
    }
}

/// Whether the end-of-central-directory record announces more comment than the file holds.
fn end_record_is_cut(bytes: &[u8]) -> bool {
    let search_from = bytes.len().saturating_sub(22 + 65_535);
    let Some(at) = bytes[search_from..].windows(4).rposition(|w| w == [0x50, 0x4b, 0x05, 0x06]) else { return false };
    let at = at + search_from;
    match bytes.get(at + 20..at + 22) {
        Some(len) => at + 22 + usize::from(u16::from_le_bytes([len[0], len[1]])) > bytes.len(),
        None => true,
    }
}

/// How many records the central directory holds, counted by walking them (`None` for
/// zip64 or a directory the walk cannot follow, where the reader's own view stands).
fn central_directory_records(bytes: &[u8]) -> Option<usize> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    const HEADER: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];
    let search_from = bytes.len().saturating_sub(22 + 65_535);
    let eocd = bytes[search_from..].windows(4).rposition(|w| w == EOCD)? + search_from;
    let field = |at: usize, len: usize| -> Option<usize> {
        let slice = bytes.get(at..at + len)?;
        Some(slice.iter().rev().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)))
    };
    let entries = field(eocd + 10, 2)?;
    let offset = field(eocd + 16, 4)?;
    if entries == 0xFFFF || offset == 0xFFFF_FFFF {
        return None;
    }
    let mut at = offset;
    for _ in 0..entries {
        if bytes.get(at..at + 4)? != HEADER {
            return None;
        }
        at += 46 + field(at + 28, 2)? + field(at + 30, 2)? + field(at + 32, 2)?;
    }
    Some(entries)
}
