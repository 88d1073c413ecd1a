//! The archive checker on archives the tests build: one refusal per rule (zip and tar.gz),
//! benign archives described by their members, and a property over arbitrary members.

use proptest::prelude::*;
use sluice_fixtures::{RawZipEntry, hostile_archives, raw_zip, tar_gz};
use sluice_formats::archive::{self, Listing};
use sluice_formats::container::{ContainerError, ContainerLimits};
use sluice_formats::{ExtractOptions, RefusalCode, check_upload, extract};

#[test]
fn every_hostile_archive_is_refused_with_its_reason() {
    for (name, bytes, reason) in hostile_archives() {
        let accepted = check_upload(name, None, &bytes).unwrap_or_else(|r| panic!("{name}: {r:?}"));
        let refusal = extract(accepted.kind, &bytes, &ExtractOptions::new(200_000)).expect_err(name);
        assert_eq!(refusal.code, RefusalCode::UnsafeContainer(reason), "{name}: {}", refusal.message);
    }
}

#[test]
fn a_benign_archive_is_described_by_its_members() {
    let zip = raw_zip(&[
        RawZipEntry::folder("repo"),
        RawZipEntry::file("repo/README.md", b"# Repo"),
        RawZipEntry::file("repo/src/app.py", b"print('hi')").deflated(),
    ]);
    let tar = tar_gz(&[(b"./", b'5', b""), (b"./repo/README.md", b'0', b"# Repo"), (b"./repo/src/app.py", b'0', b"x")]);
    for (name, bytes) in [("repo.zip", zip), ("repo.tar.gz", tar)] {
        let accepted = check_upload(name, None, &bytes).expect("accepted type");
        let extraction = extract(accepted.kind, &bytes, &ExtractOptions::new(200_000)).expect(name);
        let text = extraction.text.expect("the member list");
        assert!(text.contains("repo/README.md\n") && text.contains("repo/src/app.py\n"), "{name}: {text}");
        assert!(!text.contains("./"), "{name}: paths are normalised");
    }
}

#[test]
fn a_file_that_is_not_the_archive_its_name_says_is_refused() {
    assert_eq!(check_upload("x.zip", None, b"%PDF-1.4 nothing").expect_err("pdf").code, RefusalCode::ContentMismatch);
    assert_eq!(check_upload("x.tgz", None, b"PK\x03\x04").expect_err("zip").code, RefusalCode::ContentMismatch);
}

/// A member the property generates: a name from a small alphabet of troublemakers, and a type.
/// Mostly plain parts and files, so that many generated archives are accepted.
fn member() -> impl Strategy<Value = (String, u8, usize)> {
    let plain = prop::sample::select(vec!["a", "A", "b", "src", "x.txt", "caf\u{e9}", "cafe\u{301}", ".", ""]);
    let hostile = prop::sample::select(vec!["..", "c:", "d\\e", "\u{0}", "\u{7f}"]);
    let part = prop_oneof![12 => plain, 1 => hostile];
    let kind = prop_oneof![12 => Just(b'0'), 6 => Just(b'5'), 1 => Just(b'2'), 1 => Just(b'1'), 1 => Just(b'6')];
    (prop::collection::vec(part, 1..4), kind, 0usize..1200)
        .prop_map(|(parts, kind, size)| (parts.join("/"), kind, size))
}

fn keys_are_unique_and_clash_free(listing: &Listing) {
    use unicode_normalization_free::fold;
    let mut files = std::collections::HashSet::new();
    let mut folders = std::collections::HashSet::new();
    for member in &listing.members {
        let path = &member.path;
        assert!(archive::local_path(path).expect("local").as_deref() == Some(path.as_str()), "{path} is normal");
        let key = fold(path);
        assert!(!files.contains(&key) && !folders.contains(&key), "{path} twice");
        if member.is_folder {
            folders.insert(key.clone())
        } else {
            files.insert(key.clone())
        };
    }
    for member in &listing.members {
        let key = fold(&member.path);
        for (at, _) in key.match_indices('/') {
            assert!(!files.contains(&key[..at]), "{} lies inside a file", member.path);
        }
    }
}

/// Case folding and NFC, as an independent statement of the rule.
mod unicode_normalization_free {
    pub fn fold(path: &str) -> String {
        path.replace("e\u{301}", "\u{e9}").to_lowercase()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    #[test]
    fn accepted_means_local_unique_and_within_limits(members in prop::collection::vec(member(), 1..8)) {
        let limits = ContainerLimits { max_member_bytes: 1000, max_total_bytes: 4000, max_ratio: 1000, max_entries: 6 };
        let data: Vec<Vec<u8>> = members.iter().map(|(_, _, size)| vec![b'z'; *size]).collect();
        let entries: Vec<(&[u8], u8, &[u8])> =
            members.iter().zip(&data).map(|((name, kind, _), d)| (name.as_bytes(), *kind, if *kind == b'0' { d.as_slice() } else { &b""[..] })).collect();
        match archive::tar::check(&tar_gz(&entries), limits) {
            Ok(listing) => {
                keys_are_unique_and_clash_free(&listing);
                prop_assert!(listing.members.len() <= limits.max_entries);
                for member in &listing.members {
                    prop_assert!(member.size <= limits.max_member_bytes);
                }
                prop_assert!(listing.unpacked_bytes <= limits.max_total_bytes);
            }
            Err(ContainerError::Unsafe { .. } | ContainerError::Corrupt(_)) => {}
        }
    }

    #[test]
    fn bytes_read_never_pass_a_limit_by_more_than_one_buffer(sizes in prop::collection::vec(0usize..300_000, 1..4)) {
        let limits = ContainerLimits { max_member_bytes: 100_000, max_total_bytes: 250_000, max_ratio: 1_000_000, max_entries: 10 };
        let names: Vec<String> = (0..sizes.len()).map(|i| format!("m{i}")).collect();
        let entries: Vec<RawZipEntry> = names.iter().zip(&sizes).map(|(n, s)| RawZipEntry::file(n, vec![1u8; *s]).deflated()).collect();
        let zip = raw_zip(&entries);
        let mut read = 0usize;
        let outcome = archive::zip::check(&zip, limits, &mut |_, chunk| { read += chunk.len(); Ok(()) });
        prop_assert!(read as u64 <= limits.max_total_bytes + archive::READ_CHUNK_BYTES as u64);
        let fits = sizes.iter().all(|s| *s as u64 <= limits.max_member_bytes) && sizes.iter().sum::<usize>() as u64 <= limits.max_total_bytes;
        prop_assert_eq!(outcome.is_ok(), fits);
    }
}

#[test]
fn a_broken_archive_or_tiff_is_refused_in_sluices_words_never_the_readers() {
    let zip = raw_zip(&[RawZipEntry::file("a.txt", b"hello").deflated()]);
    let tar = tar_gz(&[(b"a.txt", b'0', b"hello hello hello hello")]);
    let tiff_header: &[u8] = b"II*\x00\x08\x00\x00\x00\xff\xff";
    let cases: [(&str, Vec<u8>, &str); 4] = [
        // The central directory's signature with nothing after it.
        (
            "cut.zip",
            zip[..zip.len() - 10].to_vec(),
            "not a readable zip archive (its central directory is missing or broken)",
        ),
        ("cut.tar.gz", tar[..tar.len() / 2].to_vec(), "a member's header cannot be read"),
        (
            "bad-crc.tgz",
            {
                let mut t = tar.clone();
                let n = t.len();
                t[n - 8] ^= 0xff;
                t
            },
            "the compressed stream is broken",
        ),
        ("cut.tiff", tiff_header.to_vec(), "not a readable TIFF: "),
    ];
    for (name, bytes, ours) in cases {
        let refusal = match check_upload(name, None, &bytes) {
            Ok(accepted) => extract(accepted.kind, &bytes, &ExtractOptions::new(200_000)).expect_err(name),
            Err(refusal) => refusal,
        };
        assert!(refusal.message.contains(ours), "{name}: {}", refusal.message);
        for library in [
            "invalid Zip archive",
            "format error",
            "unsupported error",
            "failed to fill whole buffer",
            "unexpected end",
        ] {
            assert!(!refusal.message.contains(library), "{name}: {}", refusal.message);
        }
    }
}
