//! Filenames are never trusted: a stored name is one safe component.

/// The longest filename an upload may declare, in characters, whichever path it takes.
pub const MAX_FILENAME_CHARS: usize = 255;

/// The longest safe name kept, in bytes; longer names keep their extension.
const MAX_NAME_BYTES: usize = 120;

/// Reduces an uploaded filename to one safe path component: every directory part and
/// `.`/`..` is dropped as a separator, what remains is joined with `_`, and anything but
/// letters, digits, `.`, `-` and `_` becomes `_`. So `../../etc/passwd` is `etc_passwd`,
/// a hidden name loses its leading dots, and an empty result is `file`.
pub fn safe_filename(name: &str) -> String {
    let parts: Vec<&str> = name.split(['/', '\\']).filter(|p| !p.is_empty() && *p != "." && *p != "..").collect();
    let mut safe = String::with_capacity(name.len());
    for ch in parts.join("_").chars() {
        let keep = ch.is_alphanumeric() || matches!(ch, '.' | '-' | '_');
        let ch = if keep { ch } else { '_' };
        if ch == '_' && safe.ends_with('_') {
            continue;
        }
        safe.push(ch);
    }
    let safe = safe.trim_start_matches(['.', '_']).trim_end_matches(['.', '_', ' ']);
    let safe = if safe.is_empty() { "file".to_owned() } else { safe.to_owned() };
    truncate_keeping_extension(&safe)
}

/// The bucket prefix presigned chat uploads land under: the bucket notifies `parse` of it,
/// and nothing else is written there.
pub const CHAT_UPLOAD_PREFIX: &str = "uploads/";

/// The workspace folder an archive is unpacked into, as the seed names it:
/// `uploads/<first 8 hex of the file id>-<archive name without its extension>/`, the name
/// made safe. `repo.zip` with id `3f2a1b9c-…` is `uploads/3f2a1b9c-repo/`.
pub fn workspace_folder(id: uuid::Uuid, archive_name: &str) -> String {
    let safe = safe_filename(archive_name);
    let lower = safe.to_lowercase();
    let stem_len = [".tar.gz", ".tgz", ".zip"]
        .iter()
        .find(|ext| lower.ends_with(*ext))
        .map_or(safe.len(), |ext| safe.len() - ext.len());
    let stem = if stem_len == 0 { "archive" } else { &safe[..stem_len] };
    format!("uploads/{}-{stem}/", &id.simple().to_string()[..8])
}

fn truncate_keeping_extension(name: &str) -> String {
    if name.len() <= MAX_NAME_BYTES {
        return name.to_owned();
    }
    let ext = name.rfind('.').map(|i| &name[i..]).filter(|e| e.len() <= 16).unwrap_or("");
    let mut stem_end = MAX_NAME_BYTES - ext.len();
    while !name.is_char_boundary(stem_end) {
        stem_end -= 1;
    }
    format!("{}{}", &name[..stem_end], ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_unpacks_into_its_own_folder() {
        let id = uuid::Uuid::parse_str("3f2a1b9c-0000-4000-8000-000000000000").expect("uuid");
        assert_eq!(workspace_folder(id, "repo.zip"), "uploads/3f2a1b9c-repo/");
        assert_eq!(workspace_folder(id, "Site Backup.TAR.GZ"), "uploads/3f2a1b9c-Site_Backup/");
        assert_eq!(workspace_folder(id, "../../x.tgz"), "uploads/3f2a1b9c-x/");
        assert_eq!(workspace_folder(id, "notes 2.tgz"), "uploads/3f2a1b9c-notes_2/");
    }

    #[test]
    fn traversal_becomes_one_component() {
        assert_eq!(safe_filename("../../etc/passwd"), "etc_passwd");
        assert_eq!(safe_filename("..\\..\\windows\\win.ini"), "windows_win.ini");
        assert_eq!(safe_filename("/abs/path/report.csv"), "abs_path_report.csv");
    }

    #[test]
    fn odd_characters_are_replaced_and_unicode_letters_kept() {
        assert_eq!(safe_filename("my report (final).pdf"), "my_report_final_.pdf");
        assert_eq!(safe_filename("zażółć.txt"), "zażółć.txt");
        assert_eq!(safe_filename("a\u{0}b\nc.txt"), "a_b_c.txt");
        assert_eq!(safe_filename(".htaccess"), "htaccess");
        assert_eq!(safe_filename("../.."), "file");
        assert_eq!(safe_filename(""), "file");
    }

    #[test]
    fn long_names_keep_their_extension() {
        let long = format!("{}.xlsx", "a".repeat(400));
        let safe = safe_filename(&long);
        assert!(safe.len() <= MAX_NAME_BYTES);
        assert!(safe.ends_with(".xlsx"));
    }
}
