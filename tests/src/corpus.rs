//! The public test corpus beside the repository (`../shared/corpus`): its documents, as the
//! corpus test and the ingestion benchmark read them.

use sluice_fixtures::corpus_dir;

/// The document formats a knowledge base reads (archives and images are other tests').
pub const DOCUMENT_TYPES: &[&str] =
    &["pdf", "docx", "doc", "odt", "rtf", "pptx", "xlsx", "xlsm", "xls", "ods", "msg", "txt", "md", "epub"];

/// The corpus's documents, by path under it.
pub fn documents() -> Vec<(String, Vec<u8>)> {
    let root = corpus_dir();
    let mut found = Vec::new();
    let mut folders = vec![root.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("corpus folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
            let readme = path.file_name().is_some_and(|n| n == "README.md" || n == "MANIFEST.txt");
            if DOCUMENT_TYPES.contains(&extension.as_str()) && !readme {
                let name = path.strip_prefix(&root).expect("under the corpus").to_string_lossy().into_owned();
                found.push((name, std::fs::read(&path).expect("corpus file")));
            }
        }
    }
    found.sort();
    found
}
