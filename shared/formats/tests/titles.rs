//! A document's title as its own metadata gives it, through the same check and extraction
//! the upload path runs: files built in code, and real files from the public corpus.

use sluice_fixtures::{W, corpus_file as corpus, pdf, pdf_with_info, zip};
use sluice_formats::{ExtractOptions, check_upload, extract};

fn metadata_title(name: &str, bytes: &[u8]) -> Option<String> {
    let accepted = check_upload(name, None, bytes).unwrap_or_else(|r| panic!("{name} refused: {r:?}"));
    extract(accepted.kind, bytes, &ExtractOptions::new(200_000)).expect("extracted").title
}

fn docx_titled(title: &str) -> Vec<u8> {
    zip(&[
        ("[Content_Types].xml", "<Types/>"),
        (
            "word/document.xml",
            &format!("<w:document {W}><w:body><w:p><w:r><w:t>Body</w:t></w:r></w:p></w:body></w:document>"),
        ),
        (
            "docProps/core.xml",
            &format!(
                r#"<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></cp:coreProperties>"#
            ),
        ),
    ])
}

#[test]
fn each_format_gives_the_title_its_metadata_holds() {
    assert_eq!(
        metadata_title("titled.pdf", &pdf_with_info(&["Body"], "/Title (Seal wear in  centrifugal pumps)")),
        Some("Seal wear in centrifugal pumps".to_owned())
    );
    assert_eq!(metadata_title("plain.pdf", &pdf(&["Body"])), None);
    assert_eq!(
        metadata_title("titled.docx", &docx_titled("Harbour dredging plan")),
        Some("Harbour dredging plan".to_owned())
    );
    assert_eq!(metadata_title("blank.docx", &docx_titled("   ")), None);
}

#[test]
fn real_files_give_the_titles_their_authors_tools_wrote() {
    assert_eq!(
        metadata_title("google-doc-document.pdf", &corpus("pdf-layouts/google-doc-document.pdf")),
        Some("PDF Example Document".to_owned())
    );
    assert_eq!(metadata_title("multicolumn.pdf", &corpus("pdf-layouts/multicolumn.pdf")), None);
    let subject = metadata_title("quick.msg", &corpus("apache-poi/quick.msg"));
    assert!(subject.as_deref().is_some_and(|s| !s.is_empty()), "{subject:?}");
}
