//! The corpus check: every file under `../shared/corpus` (beside the checkout; override
//! with `SLUICE_CORPUS_DIR`) goes through the upload check and extraction. No file may
//! crash, hang or exhaust memory; for the format folders the outcome must agree with the
//! manifests' verdicts, and each CJK-encoded text must decode to its UTF-8 truth.
//!
//! How a verdict is read for a document: `ACCEPT` means accepted with text (an image:
//! accepted); `REFUSE` means refused, or accepted with no text and the reason recorded
//! (an encrypted document is "unreadable", as the issue asks for password-protected PDFs).
//! Verdicts written with `?`, `/no-crash` or `/or` are policy choices: only "no crash".
//! Archive folders: a `.tar` (off the allowlist) is gzipped in memory and checked as the
//! `.tar.gz` it would be uploaded as; a `.bz2` bomb is checked as the file it is (refused by
//! type) and, decompressed here, as the archive inside it.

use sluice_fixtures::corpus_dir;
use sluice_formats::{ExtractOptions, check_upload, extract};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Folders whose manifest verdicts this check compares.
const FORMAT_FOLDERS: &[&str] = &["calamine", "apache-poi", "cpython-testdata/cjkencodings"];

/// Files whose verdict Sluice does not meet yet, each with the reason. The test fails when
/// one of them starts to agree, so this list only ever shrinks.
const KNOWN_GAPS: &[(&str, &str)] = &[];

/// Verdicts Sluice decides otherwise, on purpose.
const POLICY: &[(&str, Outcome, &str)] = &[
    ("issue_666_panic.xlsb", Outcome::Refused, ".xlsb is not on the seed's allowlist"),
    (
        "poc-shared-strings.xlsx",
        Outcome::Accepted,
        "it unpacks to 17x its size (under the 100x ratio) and the character budget cuts its text",
    ),
];

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Outcome {
    Accepted,
    Refused,
}

fn outcome(name: &str, bytes: &[u8]) -> (Outcome, Option<String>) {
    let accepted = match check_upload(name, None, bytes) {
        Ok(accepted) => accepted,
        Err(_) => return (Outcome::Refused, None),
    };
    match extract(accepted.kind, bytes, &ExtractOptions::new(200_000)) {
        Err(_) => (Outcome::Refused, None),
        Ok(extraction) if accepted.file_type() == sluice_formats::FileType::Image => {
            (Outcome::Accepted, extraction.text)
        }
        Ok(extraction) if extraction.text.is_some() => (Outcome::Accepted, extraction.text),
        Ok(_) => (Outcome::Refused, None),
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read corpus dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn no_corpus_file_crashes_or_hangs() {
    let dir = corpus_dir();
    let mut files = Vec::new();
    walk(&dir, &mut files);
    assert!(files.len() > 100, "expected the whole corpus, found {} files", files.len());
    for path in files {
        let bytes = std::fs::read(&path).expect("read");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let started = Instant::now();
        let _ = outcome(name, &bytes);
        assert!(started.elapsed() < Duration::from_secs(25), "{} took {:?}", path.display(), started.elapsed());
    }
}

#[test]
fn format_verdicts_agree_with_the_manifests() {
    let dir = corpus_dir();
    let mut disagreements = Vec::new();
    let mut checked = 0;
    for folder in FORMAT_FOLDERS {
        let top = folder.split('/').next().unwrap_or(folder);
        let manifest = std::fs::read_to_string(dir.join(top).join("MANIFEST.txt")).expect("manifest");
        for line in manifest.lines() {
            let columns: Vec<&str> = line.split('|').map(str::trim).collect();
            if columns.len() < 5 || columns[0] == "file" {
                continue;
            }
            let (file, verdict) = (columns[0], columns[4]);
            let path = dir.join(top).join(file);
            if !path.starts_with(dir.join(folder)) || !path.is_file() {
                continue;
            }
            let expected = match (POLICY.iter().find(|(f, _, _)| *f == file), verdict) {
                (Some((_, ours, _)), _) => *ours,
                (None, "ACCEPT" | "ACCEPT*") => Outcome::Accepted,
                (None, "REFUSE") => Outcome::Refused,
                _ => continue,
            };
            let bytes = std::fs::read(&path).expect("read");
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let (found, _) = outcome(name, &bytes);
            checked += 1;
            let gap = KNOWN_GAPS.iter().any(|(f, _)| *f == file);
            if (found == expected) == gap {
                disagreements.push(format!(
                    "{folder}/{file}: expected {expected:?}, got {found:?}{}",
                    if gap { " (listed as a known gap: remove it)" } else { "" }
                ));
            }
        }
    }
    assert!(checked > 40, "only {checked} verdicts were checked");
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
}

/// Archive verdicts written as choices (`?`, `/or`, `/empty`, `*`), each decided here.
const ARCHIVE_POLICY: &[(&str, Outcome, &str)] = &[
    ("non_utf8.zip", Outcome::Accepted, "names without the UTF-8 flag are CP437, as the zip format says"),
    ("zip64_magic_in_filename_1.zip", Outcome::Refused, "its member name holds control characters"),
    ("misaligned_comment.zip", Outcome::Accepted, "an empty archive with a bad comment length holds nothing"),
    ("comment_garbage.zip", Outcome::Accepted, "an empty archive with bytes after its end holds nothing"),
    ("lzma.zip", Outcome::Refused, "only stored and deflated members are read"),
    ("TestDataArchivesNested.zip", Outcome::Accepted, "nested archives are opaque files, never unpacked"),
    ("duplicate_dirs.tar", Outcome::Refused, "a path twice is refused, folders too: 'the same path twice'"),
    ("sparse.tar", Outcome::Refused, "holes count at full size: 77 KB from a 0.6 KB .tar.gz passes the 100x ratio"),
    ("test-baddirsz.zip", Outcome::Accepted, "the reader recovers from the bad directory size field"),
    ("test-prefix.zip", Outcome::Refused, "data before the zip: the type check wants the signature at the start"),
    ("test-trailing-junk.zip", Outcome::Accepted, "bytes after the end record are not part of the archive"),
    ("dupdir.zip", Outcome::Refused, "'a/b' is both a file and a folder"),
];

const ARCHIVE_FOLDERS: &[&str] = &["zip2", "tar-rs", "go-archive-testdata", "recursiveextractor"];

/// The archive verdict of `bytes` uploaded as `name`; a `.tar` goes in gzipped.
fn archive_outcome(name: &str, bytes: &[u8]) -> Outcome {
    if let Some(stem) = name.strip_suffix(".tar") {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(bytes).expect("gzip");
        return outcome(&format!("{stem}.tar.gz"), &gz.finish().expect("gzip")).0;
    }
    outcome(name, bytes).0
}

#[test]
fn archive_verdicts_agree_with_the_manifests() {
    let dir = corpus_dir();
    let mut disagreements = Vec::new();
    let mut checked = 0;
    for folder in ARCHIVE_FOLDERS {
        let manifest = std::fs::read_to_string(dir.join(folder).join("MANIFEST.txt")).expect("manifest");
        for line in manifest.lines() {
            let columns: Vec<&str> = line.split('|').map(str::trim).collect();
            if columns.len() < 5 || columns[0] == "file" {
                continue;
            }
            let (file, verdict) = (columns[0], columns[4]);
            let path = dir.join(folder).join(file);
            if !path.is_file() {
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let expected = match (ARCHIVE_POLICY.iter().find(|(f, _, _)| *f == name), verdict) {
                (Some((_, ours, _)), _) => *ours,
                (None, "ACCEPT") => Outcome::Accepted,
                (None, "REFUSE") => Outcome::Refused,
                (None, "(see header)") => continue,
                (None, other) => {
                    panic!("{folder}/{file}: the verdict {other:?} is a choice; decide it in ARCHIVE_POLICY")
                }
            };
            let found = archive_outcome(name, &std::fs::read(&path).expect("read"));
            checked += 1;
            if found != expected {
                disagreements.push(format!("{folder}/{file}: expected {expected:?}, got {found:?}"));
            }
        }
    }
    assert!(checked >= 50, "only {checked} archive verdicts were checked");
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
}

#[test]
fn the_compressed_bombs_are_refused_once_decompressed() {
    let dir = corpus_dir().join("recursiveextractor");
    for (bomb, inner_name) in [("10GB.zip.bz2", "10GB.zip"), ("10GB.gz.bz2", "10GB.tar.gz")] {
        use std::io::Read;
        let packed = std::fs::read(dir.join(bomb)).expect("bomb");
        let mut inner = Vec::new();
        bzip2::read::BzDecoder::new(packed.as_slice()).take(256 << 20).read_to_end(&mut inner).expect("bunzip2");
        let started = Instant::now();
        assert_eq!(outcome(inner_name, &inner).0, Outcome::Refused, "{inner_name} ({} bytes)", inner.len());
        assert!(started.elapsed() < Duration::from_secs(20), "{inner_name} took {:?}", started.elapsed());
    }
}

#[test]
fn cjk_texts_decode_to_their_utf8_truth() {
    let dir = corpus_dir().join("cpython-testdata/cjkencodings");
    let mut wrong = Vec::new();
    let mut matched = 0;
    for entry in std::fs::read_dir(&dir).expect("cjk dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".txt").filter(|s| !s.ends_with("-utf8")) else { continue };
        let truth_path = dir.join(format!("{stem}-utf8.txt"));
        let Ok(truth) = std::fs::read_to_string(&truth_path) else { continue };
        let bytes = std::fs::read(entry.path()).expect("read");
        let (_, text) = outcome(&name, &bytes);
        if text.as_deref() == Some(truth.as_str()) {
            matched += 1;
        } else {
            wrong.push(stem.to_owned());
        }
    }
    assert!(matched >= 7, "only {matched} CJK pairs were found");
    assert!(wrong.is_empty(), "decoded text differs from the truth for: {wrong:?} ({matched} matched)");
}

/// TIFF files whose verdict Sluice does not meet, with the reason; the test fails when one
/// starts to agree, so the list only shrinks.
const TIFF_GAPS: &[(&str, &str)] =
    &[("valid/big_g4.tif", "tiff 0.11.3 refuses this 1x65537 Group 4 strip layout ('size limits exceeded')")];

#[test]
fn tiff_images_decode_or_are_refused_as_the_manifest_says() {
    let dir = corpus_dir().join("image-tiff");
    let mut files = Vec::new();
    walk(&dir, &mut files);
    let mut wrong = Vec::new();
    let mut checked = 0;
    // The fuzzer's outputs carry no extension; they are uploaded as `.tiff`.
    for path in files.iter().filter(|p| p.file_name().is_some_and(|n| n != "MANIFEST.txt" && n != ".renames")) {
        let relative = path.strip_prefix(&dir).expect("inside").to_string_lossy().into_owned();
        let expected = if relative.starts_with("valid/") { Outcome::Accepted } else { Outcome::Refused };
        let bytes = std::fs::read(path).expect("read");
        let name = if relative.starts_with("valid/") { relative.clone() } else { format!("{relative}.tiff") };
        let started = Instant::now();
        let (found, _) = outcome(&name, &bytes);
        assert!(started.elapsed() < Duration::from_secs(10), "{relative} took {:?}", started.elapsed());
        checked += 1;
        let gap = TIFF_GAPS.iter().any(|(f, _)| *f == relative);
        if (found == expected) == gap {
            wrong.push(format!(
                "{relative}: expected {expected:?}, got {found:?}{}",
                if gap { " (a listed gap: remove it)" } else { "" }
            ));
        }
    }
    assert!(checked > 50, "only {checked} TIFF files");
    assert!(wrong.is_empty(), "{} TIFF verdicts differ:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn the_password_protected_word_97_document_is_unreadable_because_it_is_encrypted() {
    let bytes = std::fs::read(corpus_dir().join("apache-poi/PasswordProtected.doc")).expect("read");
    let accepted = check_upload("PasswordProtected.doc", None, &bytes).expect("a .doc it is");
    let extraction = extract(accepted.kind, &bytes, &ExtractOptions::new(200_000)).expect("read");
    assert_eq!(extraction.text, None);
    assert!(extraction.unreadable.as_deref().is_some_and(|r| r.contains("encrypted")), "{:?}", extraction.unreadable);
}
