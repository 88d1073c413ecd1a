//! Zip containers (the OOXML and OpenDocument formats) opened under the archive limits:
//! a bounded member count, every member's size counted on the decompressed bytes as they
//! are read (headers are hints), a total and a ratio cap, no duplicate part names (also
//! case-folded), no encrypted parts, and no XML part with a DOCTYPE or entity declaration.

use std::io::{Cursor, Read};

pub use crate::limits::{ContainerError, ContainerLimits, REASON_CODES};

/// A checked zip container.
pub struct Container<'a> {
    archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    names: Vec<String>,
    limits: ContainerLimits,
    /// The decompressed bytes handed out so far: a reader that reads a part again (an EPUB
    /// spine naming one chapter a thousand times) spends the same total as an archive.
    read_bytes: u64,
}

impl std::fmt::Debug for Container<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container").field("names", &self.names).finish()
    }
}

const DECLARATIONS: [&[u8]; 2] = [b"<!DOCTYPE", b"<!ENTITY"];

impl<'a> Container<'a> {
    /// Opens the container through the archive checks (every member decompressed once,
    /// counted) and scans its XML parts for declarations; nothing is kept but the names.
    pub fn open(bytes: &'a [u8], limits: ContainerLimits) -> Result<Self, ContainerError> {
        // The last bytes of the previous chunk of the same part, so a split declaration is seen.
        let mut tail: (String, Vec<u8>) = (String::new(), Vec::new());
        let mut scan = |name: &str, chunk: &[u8]| -> Result<(), ContainerError> {
            if !(name.ends_with(".xml") || name.ends_with(".rels")) {
                return Ok(());
            }
            if tail.0 != name {
                tail = (name.to_owned(), Vec::new());
            }
            tail.1.extend_from_slice(chunk);
            if DECLARATIONS.iter().any(|d| tail.1.windows(d.len()).any(|w| w == *d)) {
                return Err(crate::archive::refuse(
                    "xml_doctype",
                    format!("part {name:?} declares a DOCTYPE or entities"),
                ));
            }
            let keep = tail.1.len().saturating_sub(8);
            tail.1.drain(..keep);
            Ok(())
        };
        let checked = crate::archive::zip::check(bytes, limits, &mut scan)?;
        Ok(Self { archive: checked.archive, names: checked.names, limits, read_bytes: 0 })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// A member's bytes (it was checked against the limits when the container opened); every
    /// read counts against the archive's total, however often a part is read.
    pub fn read(&mut self, name: &str) -> Result<Vec<u8>, ContainerError> {
        // Described in Sluice's words: the reason is stored and shown with the file.
        let mut member = self.archive.by_name(name).map_err(|e| match e {
            zip::result::ZipError::FileNotFound => ContainerError::Corrupt(format!("part {name:?} is missing")),
            _ => ContainerError::Corrupt(format!("part {name:?} is damaged")),
        })?;
        let left = self.limits.max_total_bytes.saturating_sub(self.read_bytes);
        let mut out = Vec::new();
        (&mut member)
            .take(self.limits.max_member_bytes.min(left) + 1)
            .read_to_end(&mut out)
            .map_err(|_| ContainerError::Corrupt(format!("part {name:?} is damaged: it cannot be unpacked")))?;
        self.read_bytes += out.len() as u64;
        if self.read_bytes > self.limits.max_total_bytes {
            return Err(crate::archive::refuse(
                "too_large_unpacked",
                format!("the parts read add up to more than {} bytes", self.limits.max_total_bytes),
            ));
        }
        Ok(out)
    }
}

/// The part that `target` names relative to the folder `base` (`..` goes up, a leading `/`
/// starts at the container's root; the OOXML relationships' and EPUB packages' own rule),
/// as the container names its parts; `None` when it climbs out of the container.
pub fn part_path(base: &str, target: &str) -> Option<String> {
    let (base, target) = match target.strip_prefix('/') {
        Some(absolute) => ("", absolute),
        None => (base, target),
    };
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for piece in target.split('/') {
        match piece {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::part_path;

    #[test]
    fn part_paths_resolve_inside_the_container_only() {
        assert_eq!(
            part_path("ppt/slides", "../notesSlides/notesSlide3.xml").as_deref(),
            Some("ppt/notesSlides/notesSlide3.xml")
        );
        assert_eq!(part_path("ppt/slides", "/ppt/x.xml").as_deref(), Some("ppt/x.xml"));
        assert_eq!(part_path("OEBPS/text", "../ch2.xhtml").as_deref(), Some("OEBPS/ch2.xhtml"));
        assert_eq!(part_path("", "ch3.xhtml").as_deref(), Some("ch3.xhtml"));
        assert_eq!(part_path("OEBPS", "../../etc/passwd"), None);
    }
}
