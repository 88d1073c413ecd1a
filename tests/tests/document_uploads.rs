//! Documents through the upload API on the running stack: their text and preview come back
//! from the same parsers `sluice parse` runs; unsafe containers are refused and leave
//! nothing behind.

use serde_json::Value;
use sluice_e2e::{Stack, User};
use sluice_fixtures::{docx, pdf, xlsx, zip};

/// Uploads as a browser that does not know the type would: `application/octet-stream`.
async fn upload(stack: &Stack, user: &User, name: &str, bytes: Vec<u8>) -> (u16, Value) {
    stack.upload(user, name, Some("application/octet-stream"), bytes).await
}

async fn text_response(stack: &Stack, user: &User, id: &str) -> reqwest::Response {
    let request = stack.http.get(stack.url(&format!("/files/{id}/text"))).header("authorization", user.bearer());
    request.send().await.expect("text")
}

async fn text(stack: &Stack, user: &User, id: &str) -> String {
    let response = text_response(stack, user, id).await;
    assert_eq!(response.status().as_u16(), 200);
    response.text().await.expect("body")
}

#[tokio::test]
async fn pdf_docx_and_xlsx_answer_their_preview_and_text() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let cases = [
        (
            "report.pdf",
            pdf(&["Annual report 2026", "Revenue by region"]),
            "pdf",
            "Annual report 2026\n\nRevenue by region",
        ),
        (
            "memo.docx",
            docx("<w:p><w:r><w:t>Memo body</w:t></w:r></w:p>"),
            "docx",
            "Quarterly header\nMemo body\nPage footer",
        ),
        (
            "stock.xlsx",
            xlsx(r#"<row r="1"><c r="A1" t="inlineStr"><is><t>item</t></is></c><c r="B1"><v>7</v></c></row>"#),
            "spreadsheet",
            "Sheet: Data\nitem\t7",
        ),
    ];
    for (name, bytes, file_type, preview) in cases {
        let (status, body) = upload(&stack, &user, name, bytes).await;
        assert_eq!(status, 201, "{name}: {body}");
        assert_eq!(body["file_type"], file_type, "{name}");
        assert_eq!(body["preview"], preview, "{name}");
        let id = body["id"].as_str().expect("id");
        assert!(text(&stack, &user, id).await.starts_with(preview), "{name}");
    }
}

#[tokio::test]
async fn an_office_file_with_an_entity_declaration_is_refused_and_leaves_nothing() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let bomb = zip(&[
        ("[Content_Types].xml", "<Types/>"),
        (
            "word/document.xml",
            "<!DOCTYPE d [<!ENTITY a \"aaaa\">]><w:document><w:body><w:p><w:r><w:t>&a;</w:t></w:r></w:p></w:body></w:document>",
        ),
    ]);
    let (status, body) = upload(&stack, &user, "bomb.docx", bomb).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["details"]["reason"], "xml_doctype");
    assert!(body["error"]["details"]["fields"]["file"].is_string());
    assert!(stack.keys_under(&format!("media/{}/", user.id)).await.is_empty());
    let db = stack.db().await;
    let rows: i64 =
        db.query_one("SELECT count(*) FROM chat_files WHERE user_id = $1", &[&user.id]).await.expect("count").get(0);
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn an_unreadable_document_is_stored_with_no_preview_and_no_text() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let broken = pdf(&["whatever"])[..40].to_vec();
    let (status, body) = upload(&stack, &user, "broken.pdf", broken).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["preview"], Value::Null);
    let note = body["parse_note"].as_str().unwrap_or_else(|| panic!("the file says why it has no text: {body}"));
    assert!(!note.is_empty(), "{body}");
    let id = body["id"].as_str().expect("id");
    assert_eq!(text_response(&stack, &user, id).await.status().as_u16(), 404);
}

#[tokio::test]
async fn tiff_pages_are_served_as_png_up_to_the_cap_and_only_to_the_owner() {
    let stack = Stack::from_env().await;
    let (owner, stranger) = (User::new(), User::new());
    let pages: Vec<(u32, u32)> = (1..=7).map(|i| (20 + i, 10 + i)).collect();
    let (status, body) = upload(&stack, &owner, "fax.tiff", sluice_fixtures::tiff(&pages)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["mime_type"], "image/tiff");
    let id = body["id"].as_str().expect("id");
    let get = |user: &User, n: u32| {
        stack.http.get(stack.url(&format!("/files/{id}/pages/{n}"))).header("authorization", user.bearer()).send()
    };
    for n in [1u32, 5] {
        let response = get(&owner, n).await.expect("page");
        assert_eq!(response.status().as_u16(), 200, "page {n}");
        assert_eq!(response.headers()["content-type"], "image/png");
        let png = response.bytes().await.expect("png");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
        assert_eq!(width, 20 + n, "page {n} is the right page");
    }
    for n in [0u32, 6, 8] {
        assert_eq!(get(&owner, n).await.expect("page").status().as_u16(), 404, "page {n} is past the cap");
    }
    assert_eq!(get(&stranger, 1).await.expect("page").status().as_u16(), 404);
}

#[tokio::test]
async fn an_undecodable_tiff_is_refused_and_leaves_nothing() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let mut broken = sluice_fixtures::tiff(&[(64, 64)]);
    broken.truncate(200);
    let (status, body) = upload(&stack, &user, "scan.tif", broken).await;
    assert_eq!(status, 415, "{body}");
    assert_eq!(body["error"]["details"]["reason"], "undecodable_image");
    assert!(stack.keys_under(&format!("media/{}/", user.id)).await.is_empty());
}
