//! OCR on the running stack: a scanned PDF in a knowledge base is searchable by what its
//! second page says, a scanned two-column paper by a sentence of its right column (read
//! whole, not interleaved with the left), its chunks marked `ocr`; a PDF with a text layer is not OCRed; a
//! 2,000-page scan stops at `max_pages` with its note; a chat image gets a preview; a
//! scanned Polish page is found by a Polish query with its diacritics; and a language the
//! deployment has no model for is refused where it is configured.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User, file_form};
use sluice_fixtures::{
    LEFT_COLUMN, RIGHT_COLUMN, image_pdf, image_pdf_of, pdf, pdf_two_columns, png_of, scanned, scanned_page,
};
use std::time::{Duration, Instant};
use uuid::Uuid;

const PAGE_ONE: &str = "Quarterly report for the harbour authority\nThe eastern pier was rebuilt in March\nVessel traffic rose by twelve percent";
const PAGE_TWO: &str = "Dredging of the northern channel begins in autumn\nThe pilot station moves to the lighthouse\nContact the harbour master for permits";

async fn base(stack: &Stack, user: &User, ingestion: Value) -> Value {
    let body = json!({"name": format!("Scans {}", Uuid::new_v4().simple()), "scope": "personal",
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2", "ingestion_config": ingestion});
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base
}

/// The base's documents once none is processing, by filename: (status, error, id).
async fn settled_documents(stack: &Stack, kb_id: &str, expected: usize) -> Vec<(String, String, Option<String>, Uuid)> {
    let db = stack.db().await;
    let started = Instant::now();
    loop {
        let rows: Vec<(String, String, Option<String>, Uuid)> = db
            .query(
                "SELECT filename, status, error_message, id FROM rag_documents WHERE kb_id = $1::text::uuid ORDER BY filename",
                &[&kb_id],
            )
            .await
            .expect("documents")
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        if rows.len() == expected && rows.iter().all(|r| r.1 != "processing") {
            return rows;
        }
        assert!(started.elapsed() < Duration::from_secs(240), "still processing: {rows:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn a_scanned_two_column_paper_is_found_by_a_sentence_of_its_right_column_read_whole() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base(&stack, &user, json!({"chunk_size": 300, "chunk_overlap": 0})).await;
    let kb_id = base["id"].as_str().expect("id");
    let page = sluice_formats::pdf::render_pages(&pdf_two_columns(LEFT_COLUMN, RIGHT_COLUMN), 150).expect("render");
    let scan = image_pdf(&[scanned(&page[0].0, 150, 1.2, 21)], 150);
    stack.upload_document(&user, kb_id, "paper-scan.pdf", &scan).await;
    stack.indexed(&user, kb_id).await;
    // The right column's first sentence as it runs across its first two lines.
    let sentence = format!("{} for the next", RIGHT_COLUMN[0]);
    let body =
        json!({"query": "budget for the next quarter council vote", "knowledge_base_ids": [kb_id], "mode": "keyword"});
    let (status, found) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    let first = &found["results"][0];
    let content = first["content"].as_str().unwrap_or_else(|| panic!("nothing found: {found}"));
    let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    // The sentence as the column prints it: no line of the left column inside it.
    assert!(flat(content).contains(&flat(&sentence)), "{content:?} is not {sentence:?} whole");
    assert_eq!(first["metadata"]["ocr"], true, "{first}");
}

#[tokio::test]
async fn a_scanned_pdf_is_searchable_by_its_second_page_and_a_text_layer_is_not_ocred() {
    let stack = Stack::from_env().await;
    let user = User::new();
    // Small chunks, so each page is a chunk of its own.
    let base = base(&stack, &user, json!({"chunk_size": 200, "chunk_overlap": 0})).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    assert_eq!(base["ingestion_config"]["auto_ocr"], true, "{base}");
    assert_eq!(base["ingestion_config"]["ocr_languages"], json!(["eng"]));
    let scan = image_pdf(&[scanned_page(PAGE_ONE, 150, 1.5, 11), scanned_page(PAGE_TWO, 150, -1.0, 12)], 150);
    stack.upload_document(&user, kb_id, "harbour-scan.pdf", &scan).await;
    stack
        .upload_document(&user, kb_id, "typed.pdf", &pdf(&["The typed minutes of the harbour board meeting in May"]))
        .await;
    let documents = settled_documents(&stack, kb_id, 2).await;
    assert!(documents.iter().all(|d| d.1 == "done"), "{documents:?}");

    let search = json!({"query": "the pilot station moves to the lighthouse", "collections": [collection], "top_k": 3});
    let (status, answer) = stack.call_json(&user, Method::POST, "/rag/search", Some(search)).await;
    assert_eq!(status, 200, "{answer}");
    let top = &answer["results"][0];
    assert!(top["content"].as_str().expect("content").contains("lighthouse"), "{answer}");
    assert!(!top["content"].as_str().expect("content").contains("eastern pier"), "the second page's chunk: {top}");
    assert_eq!(top["filename"], "harbour-scan.pdf", "{top}");
    assert_eq!(top["metadata"]["ocr"], true, "{top}");

    // The typed PDF was read from its text layer: no OCR span, no chunk marked.
    let db = stack.db().await;
    let typed = documents.iter().find(|d| d.0 == "typed.pdf").expect("typed").3;
    let spans: Option<Value> =
        db.query_one("SELECT ocr_spans FROM rag_documents WHERE id = $1", &[&typed]).await.expect("row").get(0);
    assert_eq!(spans, None);
    let marked: i64 = db
        .query_one(
            &format!("SELECT count(*) FROM rag_{collection} WHERE document_id = $1::text::uuid AND metadata ? 'ocr'"),
            &[&typed.to_string()],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(marked, 0);
}

#[tokio::test]
async fn a_two_thousand_page_scan_stops_at_max_pages_with_its_note() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let base = base(&stack, &user, json!({"max_pages": 4})).await;
    let (kb_id, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    // One printed line, as a strip of a scanned page, shown on each of 2,000 pages.
    let page = scanned_page("Ledger of harbour dues", 150, 0.0, 21);
    let strip = image::imageops::crop_imm(&page, 0, 110, page.width(), 120).to_image();
    let scan = image_pdf_of(&[strip], 150, 2000);
    stack.upload_document(&user, kb_id, "ledger.pdf", &scan).await;
    let documents = settled_documents(&stack, kb_id, 1).await;
    assert_eq!(documents[0].1, "done", "{documents:?}");
    let db = stack.db().await;
    let text: String = db
        .query_one(
            &format!("SELECT string_agg(content, ' ' ORDER BY chunk_index) FROM rag_{collection} WHERE kb_id = $1::text::uuid"),
            &[&kb_id],
        )
        .await
        .expect("chunks")
        .get(0);
    assert_eq!(text.matches("Ledger of harbour dues").count(), 4, "{text}");
    assert!(text.contains("[Stopped after 4 of 2000 pages: pages 5–2000 were not read.]"), "{text}");
}

#[tokio::test]
async fn a_chat_image_gets_a_preview_and_its_text() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let png = png_of(&scanned_page(PAGE_ONE, 150, 0.0, 31));
    let (status, file) = stack.upload(&user, "whiteboard.png", Some("image/png"), png).await;
    assert_eq!(status, 201, "{file}");
    let preview = file["preview"].as_str().unwrap_or_default();
    assert!(preview.starts_with("Quarterly report for the harbour authority"), "{file}");
    let id = file["id"].as_str().expect("id");
    let (status, text) = stack.call(&user, Method::GET, &format!("/files/{id}/text"), None).await;
    assert_eq!(status, 200);
    assert!(text.contains("Vessel traffic rose by twelve percent"), "{text}");
    assert_eq!(file["ref"]["width"], json!(1275), "the image keeps its dimensions: {file}");

    // The presigned path reads it alike, in the parse function; a scanned PDF of five pages
    // has its first three read and the rest named.
    let png = png_of(&scanned_page(PAGE_TWO, 150, 1.0, 32));
    let (status, intent) =
        stack.intent(&user, json!({"filename": "notice.png", "size": png.len(), "mime_type": "image/png"})).await;
    assert_eq!(status, 201, "{intent}");
    assert_eq!(stack.put_presigned(&intent, png).await, 200);
    let landed = stack.settled(&user, intent["id"].as_str().expect("id")).await;
    assert!(landed["preview"].as_str().unwrap_or_default().starts_with("Dredging of the northern channel"), "{landed}");
    let page = scanned_page("The eastern pier was rebuilt", 150, 0.0, 33);
    let strip = image::imageops::crop_imm(&page, 0, 110, page.width(), 120).to_image();
    let scan = image_pdf_of(&[strip], 150, 5);
    let (status, file) = stack.upload(&user, "fax.pdf", Some("application/pdf"), scan).await;
    assert_eq!(status, 201, "{file}");
    let id = file["id"].as_str().expect("id");
    let (_, text) = stack.call(&user, Method::GET, &format!("/files/{id}/text"), None).await;
    assert_eq!(text.matches("eastern pier").count(), 3, "{text}");
    assert!(text.ends_with("[Scanned pages not read: 4–5 (OCR reads at most 3 pages of a file here).]"), "{text}");
}

/// Polish prose as a port's report would print it, every diacritic of the alphabet in it.
const POLISH: &[&str] = &[
    "Sprawozdanie zarządu portu za pierwszy kwartał",
    "Żegluga na północnym kanale została wstrzymana",
    "Pogłębianie toru wodnego rozpocznie się jesienią",
    "Właściciele łodzi muszą uzyskać nowe zezwolenia",
    "Ruch statków wzrósł o dwanaście procent, źródło: kapitanat",
];

/// The first hit of `query` (in `mode`) in a new base of `languages` holding one document: a
/// scan of `lines` printed in DejaVu Serif (provisioned by the stack: Debian's
/// fonts-dejavu-core). The hit is asserted to be OCR's.
async fn first_hit_in_a_scan(
    stack: &Stack,
    languages: &[&str],
    lines: &[&str],
    seed: u64,
    query: &str,
    mode: &str,
) -> String {
    let user = User::new();
    let ingestion = json!({"ocr_languages": languages, "chunk_size": 300, "chunk_overlap": 0});
    let base = base(stack, &user, ingestion).await;
    assert_eq!(base["ingestion_config"]["ocr_languages"], json!(languages), "{base}");
    let kb_id = base["id"].as_str().expect("id");
    let font = std::fs::read("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf").expect("DejaVu Serif");
    let page = sluice_fixtures::printed_page(lines, &font, 150).expect("a font");
    let scan = image_pdf(&[scanned(&page, 150, 1.0, seed)], 150);
    stack.upload_document(&user, kb_id, "scan.pdf", &scan).await;
    stack.indexed(&user, kb_id).await;
    let body = json!({"query": query, "knowledge_base_ids": [kb_id], "mode": mode});
    let (status, found) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    let first = &found["results"][0];
    assert_eq!(first["metadata"]["ocr"], true, "{first}");
    first["content"].as_str().unwrap_or_else(|| panic!("nothing found: {found}")).to_owned()
}

#[tokio::test]
async fn a_scanned_polish_pdf_is_found_by_a_polish_query_and_keeps_its_diacritics() {
    let stack = Stack::from_env().await;
    let content =
        first_hit_in_a_scan(&stack, &["pol"], POLISH, 31, "pogłębianie toru wodnego jesienią", "hybrid").await;
    for word in ["Pogłębianie", "jesienią", "Żegluga", "północnym", "Właściciele", "łodzi", "źródło"] {
        assert!(content.contains(word), "{word:?} read with its diacritics: {content:?}");
    }
}

/// Russian prose as a port's report would print it.
const RUSSIAN: &[&str] = &[
    "Отчёт управления порта за первый квартал",
    "Судоходство в северном канале было приостановлено",
    "Углубление фарватера начнётся осенью",
    "Владельцы лодок должны получить новые разрешения",
];

// Read by Tesseract in the extract function's confined worker, through the local runner.
#[tokio::test]
async fn a_scanned_russian_pdf_is_read_by_tesseract_and_found_by_a_russian_query() {
    let stack = Stack::from_env().await;
    let content =
        first_hit_in_a_scan(&stack, &["rus", "eng"], RUSSIAN, 34, "углубление фарватера осенью", "keyword").await;
    for line in RUSSIAN {
        assert!(content.contains(line), "{line:?} read whole: {content:?}");
    }
}

#[tokio::test]
async fn a_language_with_no_model_is_refused_where_it_is_configured() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let body = json!({"name": "German scans", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": {"ocr_languages": ["ara"]}});
    let (status, refused) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 422, "a collection's own configuration: {refused}");
    let why = refused["error"]["details"]["fields"]["ingestion_config.ocr_languages"].as_str().expect("the field");
    assert!(why.contains("\"ara\" has no OCR model"), "{why}");

    // The same rule on a base's settings and on one upload's override.
    let base = base(&stack, &user, json!({"ocr_languages": ["eng", "chi_sim"], "ocr_dpi": 300})).await;
    let kb_id = base["id"].as_str().expect("id");
    let patch = json!({"ingestion_config": {"ocr_dpi": 1200}});
    let (status, refused) = stack.call_json(&user, Method::PATCH, &format!("/kb/{kb_id}"), Some(patch)).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"]["details"]["fields"]["ingestion_config.ocr_dpi"].is_string(), "{refused}");
    let form = file_form("notes.txt", None, b"words".to_vec()).text("ingestion", r#"{"ocr_languages": ["hin"]}"#);
    let (status, refused) = stack.post_form(&user, &format!("/kb/{kb_id}/documents"), form).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["ingestion_config.ocr_languages"].is_string(), "{refused}");
    let rows: i64 = stack
        .db()
        .await
        .query_one("SELECT count(*) FROM rag_documents WHERE kb_id = $1::text::uuid", &[&kb_id])
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 0, "a refused upload left a row");
}
