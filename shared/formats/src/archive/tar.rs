//! Gzipped tar archives (`.tar.gz`, `.tgz`): the `tar` crate walks the headers (GNU long
//! names, PAX records, sparse maps); every byte it is handed is counted as it leaves the
//! gzip decoder, and every byte of a member as it is read, sparse holes included.

use super::{Ledger, Listing, READ_CHUNK_BYTES, refuse};
use crate::limits::{ContainerError, ContainerLimits};
use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;
use tar::EntryType;

/// A reader that counts what passes and fails once `cap` is passed, so no header (a PAX
/// record, a long name) can make the tar reader take more than the archive limits allow.
struct Metered<R> {
    inner: R,
    passed: Rc<Cell<u64>>,
    cap: u64,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        let passed = self.passed.get() + read as u64;
        self.passed.set(passed);
        if passed > self.cap {
            return Err(std::io::Error::other("the archive limits were passed"));
        }
        Ok(read)
    }
}

/// Checks a gzipped tar archive member by member under `limits`.
pub fn check(bytes: &[u8], limits: ContainerLimits) -> Result<Listing, ContainerError> {
    let mut ledger = Ledger::new(limits, bytes.len() as u64);
    let passed = Rc::new(Cell::new(0u64));
    let cap = limits.max_total_bytes.min((bytes.len() as u64).saturating_mul(limits.max_ratio));
    let stream = Metered { inner: flate2::read::GzDecoder::new(bytes), passed: passed.clone(), cap };
    let mut archive = tar::Archive::new(stream);
    // An error after the cap was passed is the limit's, whatever the tar reader made of it.
    let failed = |ledger: &Ledger, what: String| match ledger.check_total(passed.get()) {
        Err(limit) => limit,
        Ok(()) => ContainerError::Corrupt(what),
    };
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    // The reasons are Sluice's words: a reader's own error text is never stored or answered.
    let entries = archive.entries().map_err(|_| failed(&ledger, "not a readable tar archive".to_owned()))?;
    for entry in entries {
        let mut entry = entry.map_err(|_| failed(&ledger, "a member's header cannot be read".to_owned()))?;
        let raw = entry.path_bytes().into_owned();
        let path = String::from_utf8(raw).map_err(|e| {
            let shown = String::from_utf8_lossy(e.as_bytes()).into_owned();
            refuse("path_not_utf8", format!("member {shown:?} has a path that is not UTF-8"))
        })?;
        let is_folder = match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => false,
            EntryType::Directory => true,
            // Global PAX records describe the archive, not a member.
            EntryType::XGlobalHeader => continue,
            EntryType::Symlink => return Err(refuse("symlink", format!("member {path:?} is a symbolic link"))),
            EntryType::Link => return Err(refuse("hardlink", format!("member {path:?} is a hard link"))),
            other => {
                let kind = match other {
                    EntryType::Char | EntryType::Block => "a device".to_owned(),
                    EntryType::Fifo => "a FIFO".to_owned(),
                    other => format!("of tar type {:?}", char::from(other.as_byte())),
                };
                return Err(refuse(
                    "special_file",
                    format!("member {path:?} is {kind}, not a regular file or a folder"),
                ));
            }
        };
        check_pax_records(&mut entry, &path)?;
        let slot = ledger.add(&path, is_folder)?;
        loop {
            let read = entry.read(&mut chunk).map_err(|_| {
                failed(&ledger, format!("member {path:?} cannot be read whole (the archive is cut short)"))
            })?;
            if read == 0 {
                break;
            }
            ledger.count(slot, read as u64)?;
        }
    }
    // What follows the end-of-archive blocks is unpacked too: a stream of gigabytes of
    // zeros is a bomb even if the tar inside it is empty.
    let mut rest = archive.into_inner();
    loop {
        match rest.read(&mut chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return Err(failed(&ledger, "the compressed stream is broken".to_owned())),
        }
    }
    ledger.check_total(passed.get())?;
    Ok(ledger.finish())
}

/// A member's PAX records must parse, with keys free of NUL; a PAX sparse file (whose data
/// the reader would hand over still packed, as a different file) is not read at all.
fn check_pax_records<R: Read>(entry: &mut tar::Entry<'_, R>, path: &str) -> Result<(), ContainerError> {
    let malformed = |why: &str| ContainerError::Corrupt(format!("member {path:?} has a malformed PAX record: {why}"));
    let Some(records) = entry.pax_extensions().map_err(|_| malformed("its records cannot be read"))? else {
        return Ok(());
    };
    for record in records {
        let record = record.map_err(|_| malformed("a record that does not parse"))?;
        let key = record.key().map_err(|_| malformed("a key that is not UTF-8"))?;
        if key.is_empty() || key.contains('\0') {
            return Err(malformed("an empty key or a key with a NUL"));
        }
        if key.starts_with("GNU.sparse.") {
            return Err(refuse(
                "unsupported_member_format",
                format!("member {path:?} is a PAX sparse file, which is not read"),
            ));
        }
    }
    Ok(())
}
