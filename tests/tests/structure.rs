//! Documents keep their structure on the running stack: a base writes DOCX, ODT and HTML as
//! markdown by default, each chunk knows the headings it sits under (and is found by them),
//! the read-back says which format the text is in, and a re-index to another
//! `output_format` reads the stored original again.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use sluice_fixtures as fixtures;
use sluice_fixtures::docx_outlined;
use uuid::Uuid;

const ODF: &str = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0""#;

fn odt(body: &str) -> Vec<u8> {
    fixtures::zip(&[
        ("mimetype", "application/vnd.oasis.opendocument.text"),
        (
            "content.xml",
            &format!(
                "<office:document-content {ODF}><office:body><office:text>{body}</office:text></office:body></office:document-content>"
            ),
        ),
    ])
}

/// Every hit of a keyword query in base `kb`, best first.
async fn keyword(stack: &Stack, user: &User, kb: &str, query: &str) -> Vec<Value> {
    let body = json!({"query": query, "knowledge_base_ids": [kb], "mode": "keyword", "top_k": 20});
    let (status, found) = stack.call_json(user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    found["results"].as_array().expect("results").clone()
}

/// A base of the keyless model named `name` with `ingestion` settings; its answer.
async fn base(stack: &Stack, user: &User, name: &str, ingestion: Value) -> Value {
    let body = json!({"name": name, "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": ingestion});
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base
}

/// The id of a new base made as [`base`] makes it.
async fn base_id(stack: &Stack, user: &User, name: &str, ingestion: Value) -> String {
    base(stack, user, name, ingestion).await["id"].as_str().expect("id").to_owned()
}

async fn parsed_text(stack: &Stack, user: &User, id: &str) -> Value {
    let (status, text) = stack.call_json(user, Method::GET, &format!("/rag/documents/{id}/text"), None).await;
    assert_eq!(status, 200, "{text}");
    text
}

#[tokio::test]
async fn docx_odt_and_html_are_written_as_markdown_and_each_chunk_knows_its_headings() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let settings = json!({"chunk_size": 200, "chunk_overlap": 0, "chunking_strategy": "markdown"});
    let base = base(&stack, &user, "Plant manuals", settings).await;
    assert_eq!(base["ingestion_config"]["output_format"], "markdown", "the default for a new base: {base}");
    let kb = base["id"].as_str().expect("id").to_owned();

    let docx = docx_outlined(&[
        (Some(1), "Boiler"),
        (None, "The boiler heats the feed water for the whole plant."),
        (Some(2), "Blowdown"),
        (None, "Open the valve for ten seconds at every shift change."),
    ]);
    let odt = odt("<text:h text:outline-level=\"1\">Cooling tower</text:h>\
                   <text:h text:outline-level=\"2\">Drift eliminators</text:h>\
                   <text:p>Inspect the louvres for scale twice a year.</text:p>");
    let html = "<html><head><title>x</title><script>var hidden = 'zanzibar';</script></head><body>\
                <h1>Compressor</h1><h2>Intercooler</h2><p>Drain the condensate trap daily.</p>\
                <table><tr><th>Part</th><th>Code</th></tr><tr><td>Trap</td><td>CT-9</td></tr></table></body></html>";
    let mut ids = Vec::new();
    for (name, bytes) in [("boiler.docx", docx), ("tower.odt", odt), ("compressor.html", html.as_bytes().to_vec())] {
        let accepted = stack.upload_document(&user, &kb, name, &bytes).await;
        ids.push(accepted["tracking_id"].as_str().expect("id").to_owned());
    }
    stack.indexed(&user, &kb).await;

    // Each hit carries the headings of its section, in every format.
    for (query, heading) in [
        ("shift change valve", json!(["Boiler", "Blowdown"])),
        ("louvres scale", json!(["Cooling tower", "Drift eliminators"])),
        ("condensate trap", json!(["Compressor", "Intercooler"])),
    ] {
        let hits = keyword(&stack, &user, &kb, query).await;
        let first = hits.first().unwrap_or_else(|| panic!("{query:?} found nothing"));
        assert_eq!(first["metadata"]["heading"], heading, "{query:?}: {first}");
    }
    // Found by a heading its own text never names; the table's cells are in their rows.
    let by_heading = keyword(&stack, &user, &kb, "intercooler").await;
    assert!(
        by_heading.iter().any(|hit| hit["content"].as_str().expect("content").contains("| Trap | CT-9 |")),
        "{by_heading:?}"
    );
    assert_eq!(keyword(&stack, &user, &kb, "zanzibar").await, Vec::<Value>::new(), "a script's text is never read");

    let text = parsed_text(&stack, &user, &ids[0]).await;
    assert_eq!(text["format"], "markdown", "{text}");
    assert_eq!(
        text["text"],
        "# Boiler\n\nThe boiler heats the feed water for the whole plant.\n\n## Blowdown\n\n\
         Open the valve for ten seconds at every shift change."
    );
    let (status, formats) = stack.call_json(&user, Method::GET, "/rag/supported-formats", None).await;
    assert_eq!(status, 200, "{formats}");
    assert_eq!(
        formats["output_formats"]["markdown"],
        json!([
            ".csv", ".doc", ".docx", ".epub", ".html", ".odp", ".ods", ".odt", ".pdf", ".pptx", ".xls", ".xlsm",
            ".xlsx"
        ]),
        "{formats}"
    );
    assert_eq!(formats["default_output_format"], "markdown");

    // To text: a re-index reads each original again, and the headings go with the markup.
    let patch = json!({"ingestion_config": {"output_format": "text"}});
    let (status, patched) = stack.call_json(&user, Method::PATCH, &format!("/kb/{kb}"), Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    let (status, started) = stack.call_json(&user, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
    assert_eq!(status, 202, "{started}");
    sluice_e2e::eventually("the re-index ends", std::time::Duration::from_secs(90), async || {
        let (_, ingestion) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
        ingestion["reindexing"].is_null() && ingestion["indexing_status"] == "complete"
    })
    .await;
    let text = parsed_text(&stack, &user, &ids[0]).await;
    assert_eq!(text["format"], "text", "{text}");
    assert_eq!(
        text["text"],
        "Boiler\nThe boiler heats the feed water for the whole plant.\nBlowdown\nOpen the valve for ten seconds at every shift change."
    );
    let html_text = parsed_text(&stack, &user, &ids[2]).await;
    assert!(html_text["text"].as_str().expect("text").starts_with("<html>"), "an HTML file as text is itself");
    let hits = keyword(&stack, &user, &kb, "shift change valve").await;
    assert_eq!(hits.first().map(|hit| hit["metadata"]["heading"].clone()), Some(Value::Null), "{hits:?}");
}

#[tokio::test]
async fn a_hit_in_a_pdf_names_its_page_and_where_its_text_opens() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let kb = base_id(&stack, &user, "Reports", json!({"chunk_size": 100, "chunk_overlap": 0})).await;
    let pages = [
        "Quarterly report of the harbour authority",
        "Introduction to the dredging plan",
        "The seventh berth reopens in June after repairs",
    ];
    let accepted = stack.upload_document(&user, &kb, "report.pdf", &fixtures::pdf(&pages)).await;
    let id = accepted["tracking_id"].as_str().expect("id").to_owned();
    stack.indexed(&user, &kb).await;
    let hits = keyword(&stack, &user, &kb, "seventh berth reopens").await;
    let first = hits.first().unwrap_or_else(|| panic!("nothing found: {hits:?}"));
    assert_eq!(first["metadata"]["pages"], json!([3, 3]), "{first}");
    let intro = keyword(&stack, &user, &kb, "dredging plan").await;
    // The first two pages are short enough to share a chunk: it names both.
    assert_eq!(intro[0]["metadata"]["pages"], json!([1, 2]), "{intro:?}");
    // The character offset opens the read-back at the chunk's text.
    let offset = first["metadata"]["char_start"].as_u64().expect("char_start");
    let path = format!("/rag/documents/{id}/text?offset={offset}&limit=20");
    let (status, page) = stack.call_json(&user, Method::GET, &path, None).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["text"], "The seventh berth re", "{page}");
    let length = first["metadata"]["char_end"].as_u64().expect("char_end") - offset;
    assert_eq!(length as usize, first["content"].as_str().expect("content").chars().count());
}

#[tokio::test]
async fn a_hit_in_a_workbook_or_a_deck_names_its_sheet_or_slide() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    // Written as markdown (the default), each slide and sheet a section the chunker splits at.
    let settings = json!({"chunk_size": 100, "chunk_overlap": 0, "chunking_strategy": "markdown"});
    let kb = base_id(&stack, &user, "Sheets and decks", settings).await;
    let sheet = r#"<row r="1"><c r="A1" t="inlineStr"><is><t>turbine spares ledger</t></is></c></row>"#;
    stack.upload_document(&user, &kb, "stock.xlsx", &fixtures::xlsx(sheet)).await;
    const P: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
    let slide = |text: &str| format!("<p:sld {P}><p:cSld><a:p><a:r><a:t>{text}</a:t></a:r></a:p></p:cSld></p:sld>");
    let (one, two) = (slide("Welcome to the plant tour"), slide("Cooling water intake screens are cleaned weekly"));
    let deck = fixtures::zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("ppt/presentation.xml", "<p:presentation/>"),
        ("ppt/slides/slide1.xml", &one),
        ("ppt/slides/slide2.xml", &two),
    ]);
    stack.upload_document(&user, &kb, "tour.pptx", &deck).await;
    stack.indexed(&user, &kb).await;
    let ledger = keyword(&stack, &user, &kb, "turbine spares ledger").await;
    assert_eq!(ledger[0]["metadata"]["sheet"], "Data", "{ledger:?}");
    let screens = keyword(&stack, &user, &kb, "intake screens cleaned weekly").await;
    assert_eq!(screens[0]["metadata"]["slide"], 2, "{screens:?}");
    assert_eq!(screens[0]["metadata"]["heading"], json!(["Slide 2 — Cooling water intake screens are cleaned weekly"]));
}

#[tokio::test]
async fn an_output_format_that_is_not_one_is_refused_by_name() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let body = json!({"name": "Bad", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": {"output_format": "pdf"}});
    let (status, refused) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 422, "a collection's own configuration: {refused}");
    assert_eq!(refused["error"]["details"]["fields"]["ingestion_config.output_format"], "must be markdown or text");
    let (status, listed) = stack.call_json(&user, Method::GET, "/kb", None).await;
    assert_eq!(status, 200, "{listed}");
    assert!(!listed.to_string().contains("\"Bad\""), "nothing was created: {listed}");
}

/// A pump station manual of seven pages, typeset as a word processor would: a running
/// header and a page number on each page, one top-level section a page (a heading and
/// prose), and on page 7 a section "Maintenance" whose "Spare parts" table holds the answer.
fn manual_pdf() -> Vec<u8> {
    use fixtures::Ink::{self, Rule, Text};
    const TOPICS: [&str; 6] = ["Intake", "Screens", "Wet well", "Motors", "Controls", "Alarms"];
    let text = |x: f32, y: f32, size: f32, bold: bool, text: &'static str| Text { x, y, size, bold, text };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let mut pages: Vec<Vec<Ink<'static>>> = Vec::new();
    for page in 1..=7 {
        let mut inks = vec![
            text(72.0, 760.0, 8.0, false, "Pump station manual"),
            text(300.0, 30.0, 8.0, false, leak(format!("Page {page}"))),
        ];
        if page < 7 {
            let topic = TOPICS[page - 1];
            inks.push(text(72.0, 700.0, 18.0, true, topic));
            for line in 0..8 {
                let prose = format!(
                    "The {} section, line {line}, says how the station's {} is kept in working order.",
                    topic.to_lowercase(),
                    topic.to_lowercase()
                );
                inks.push(text(72.0, 676.0 - 13.0 * line as f32, 10.0, false, leak(prose)));
            }
        } else {
            inks.push(text(72.0, 700.0, 18.0, true, "Maintenance"));
            inks.push(text(72.0, 672.0, 14.0, true, "Spare parts"));
            inks.push(text(72.0, 652.0, 10.0, false, "Keep these parts in the store by the control room."));
            for y in [640.0, 624.0, 608.0, 592.0] {
                inks.push(Rule { from: (70.0, y), to: (420.0, y) });
            }
            for (row, cells) in [
                ["Part", "Code", "Interval"],
                ["Impeller", "IMP-7731", "4000 hours"],
                ["Seal kit", "SK-210", "2000 hours"],
            ]
            .iter()
            .enumerate()
            {
                for (column, cell) in cells.iter().enumerate() {
                    inks.push(text(75.0 + 130.0 * column as f32, 629.0 - 16.0 * row as f32, 10.0, row == 0, cell));
                }
            }
        }
        pages.push(inks);
    }
    fixtures::pdf_typeset(&pages)
}

#[tokio::test]
async fn an_answer_in_a_table_on_page_seven_is_found_with_its_page_and_headings() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let settings = json!({"chunk_size": 300, "chunk_overlap": 0, "chunking_strategy": "markdown"});
    let kb = base_id(&stack, &user, "Pump station", settings).await;
    let accepted = stack.upload_document(&user, &kb, "manual.pdf", &manual_pdf()).await;
    let id = accepted["tracking_id"].as_str().expect("id").to_owned();
    stack.indexed(&user, &kb).await;

    let hits = keyword(&stack, &user, &kb, "impeller").await;
    let first = hits.first().unwrap_or_else(|| panic!("nothing found: {hits:?}"));
    assert_eq!(first["metadata"]["pages"], json!([7, 7]), "{first}");
    assert_eq!(first["metadata"]["heading"], json!(["Maintenance", "Spare parts"]), "{first}");
    let content = first["content"].as_str().expect("content");
    assert!(content.contains("| Impeller | IMP-7731 | 4000 hours |"), "the answer in its row: {content}");

    // Split at its headings: every chunk sits in one top-level section (each is longer than
    // a chunk), and no chunk carries the running header or a page number.
    let all = keyword(&stack, &user, &kb, "station").await;
    assert!(all.len() >= 6, "{all:?}");
    for hit in &all {
        let content = hit["content"].as_str().expect("content");
        let sections = content.lines().filter(|line| line.starts_with("# ")).count();
        assert!(sections <= 1, "a chunk across two sections: {content}");
        assert!(!content.contains("Pump station manual") && !content.contains("Page "), "{content}");
        let pages = &hit["metadata"]["pages"];
        assert_eq!(pages[0], pages[1], "one section, one page: {hit}");
    }
    let text = parsed_text(&stack, &user, &id).await;
    assert_eq!(text["format"], "markdown", "{text}");
    assert!(text["text"].as_str().expect("text").starts_with("# Intake\n\nThe intake section, line 0,"), "{text}");
}

#[tokio::test]
async fn a_word_97_doc_is_a_knowledge_base_format_read_without_libreoffice() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let kb = base_id(&stack, &user, "Old manuals", json!({"chunk_size": 200, "chunk_overlap": 0})).await;
    let (status, formats) = stack.call_json(&user, Method::GET, "/rag/supported-formats", None).await;
    assert_eq!(status, 200, "{formats}");
    assert!(formats.to_string().contains("\".doc\""), "{formats}");
    let bytes = fixtures::doc(&[
        ("Boiler room\rThe feed pump primes in ninety seconds.\r", true),
        ("Part\u{7}Code\u{7}\u{7}Gland\u{7}GL-4\u{7}\u{7}", false),
    ]);
    let accepted = stack.upload_document(&user, &kb, "boiler.doc", &bytes).await;
    let id = accepted["tracking_id"].as_str().expect("id").to_owned();
    stack.indexed(&user, &kb).await;
    let hits = keyword(&stack, &user, &kb, "feed pump primes").await;
    assert!(!hits.is_empty(), "{hits:?}");
    // An encrypted one is taken, and ends in error with the reason.
    let locked = fixtures::doc_with(&[("secret\r", true)], 0x0100, 0x00C1);
    let accepted = stack.upload_document(&user, &kb, "locked.doc", &locked).await;
    let locked_id = accepted["tracking_id"].as_str().expect("id").to_owned();
    let path = format!("/rag/documents/{locked_id}");
    let mut document = Value::Null;
    sluice_e2e::eventually("the encrypted .doc settles", std::time::Duration::from_secs(30), async || {
        document = stack.call_json(&user, Method::GET, &path, None).await.1;
        document["status"] == "error"
    })
    .await;
    let message = document["error_message"].as_str().unwrap_or_default();
    assert!(message.contains("encrypted"), "{document}");
    let text = parsed_text(&stack, &user, &id).await;
    assert_eq!(text["format"], "markdown", "{text}");
    assert_eq!(
        text["text"],
        "Boiler room\n\nThe feed pump primes in ninety seconds.\n\n| Part | Code |\n| --- | --- |\n| Gland | GL-4 |",
        "{text}"
    );
}

#[tokio::test]
async fn an_epub_and_an_rtf_are_knowledge_base_formats() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let settings = json!({"chunk_size": 200, "chunk_overlap": 0, "chunking_strategy": "markdown"});
    let kb = base_id(&stack, &user, "Library", settings).await;
    let book = fixtures::zip(&[
        ("mimetype", "application/epub+zip"),
        ("META-INF/container.xml", r#"<container><rootfiles><rootfile full-path="book.opf"/></rootfiles></container>"#),
        (
            "book.opf",
            r#"<package><manifest><item id="a" href="one.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="a"/></spine></package>"#,
        ),
        ("one.xhtml", "<html><body><h1>The lighthouse</h1><p>The keeper trims the wicks at dawn.</p></body></html>"),
    ]);
    stack.upload_document(&user, &kb, "coast.epub", &book).await;
    let rtf = br"{\rtf1\ansi\ansicpg1252 The ferry leaves the quay at seven\par}";
    stack.upload_document(&user, &kb, "ferry.rtf", rtf).await;
    stack.indexed(&user, &kb).await;
    let hits = keyword(&stack, &user, &kb, "keeper trims wicks").await;
    assert_eq!(hits.first().map(|h| h["metadata"]["heading"].clone()), Some(json!(["The lighthouse"])), "{hits:?}");
    let hits = keyword(&stack, &user, &kb, "ferry leaves quay").await;
    assert_eq!(hits.first().map(|h| h["filename"].clone()), Some(json!("ferry.rtf")), "{hits:?}");
}

/// A re-index to another output format leaves a document parse's until its new text is
/// written: a late ingest delivery (a duplicate, or another tenant's giving up its turn)
/// finds nothing to do, and never publishes the old text as the re-index's.
#[tokio::test]
async fn a_document_a_reindex_parses_again_is_never_ingested_from_its_old_text() {
    use sluice_queue::jobs::{DocumentJob, STAGE_LEASE};
    use sluice_store::{PARSE_DOCUMENT_TOPIC, ReindexStart, Stage, Turn};
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let created = base(&stack, &user, "Pump notes", json!({"chunk_size": 200, "chunk_overlap": 0})).await;
    let kb = created["id"].as_str().expect("id").to_owned();
    let docx = docx_outlined(&[(Some(1), "Pumps"), (None, "Prime the pump before starting it.")]);
    let accepted = stack.upload_document(&user, &kb, "pumps.docx", &docx).await;
    let id = Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid");
    stack.indexed(&user, &kb).await;

    // The run started as the endpoint starts it, its job held back in the outbox for now.
    let mut config = created["ingestion_config"].clone();
    config["output_format"] = json!("text");
    let store = stack.store(2).await;
    let kb_id = Uuid::parse_str(&kb).expect("uuid");
    let ReindexStart::Started { jobs, .. } = store.start_reindex(kb_id, &config).await.expect("start") else {
        panic!("the re-index did not start")
    };
    assert_eq!(jobs.iter().map(|j| j.topic.as_str()).collect::<Vec<_>>(), [PARSE_DOCUMENT_TOPIC]);

    // A late ingest delivery takes no turn and changes nothing.
    assert_eq!(store.take_turn(id, Stage::Ingest, true, STAGE_LEASE).await.expect("turn"), Turn::NotProcessing);
    let config = stack.config().await;
    let blob = sluice_blob::Blob::new(stack.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
    let ingest = sluice_ingest::State::new(config, stack.store(2).await, blob, stack.kms.clone(), stack.sqs.clone());
    sluice_ingest::ingest(&ingest, DocumentJob { document_id: id, yields: 0 }, 1).await.expect("acknowledged");
    let row = stack
        .db()
        .await
        .query_one("SELECT status, parsed_format, reparse_pending FROM rag_documents WHERE id = $1", &[&id])
        .await
        .expect("row");
    let seen: (String, String, bool) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(seen, ("processing".to_owned(), "markdown".to_owned(), true), "still parse's");

    // Its parse job sent (as the endpoint or the sweep sends it): the original read again as
    // text, then ingested.
    let payloads: Vec<Value> = jobs.iter().map(|j| j.payload.clone()).collect();
    stack.sweep_state().await.dispatcher.send_all(PARSE_DOCUMENT_TOPIC, &payloads).await.expect("sent");
    store.mark_all_dispatched(&jobs.iter().map(|j| j.id).collect::<Vec<_>>()).await.expect("marked");
    sluice_e2e::eventually("the re-index ends", std::time::Duration::from_secs(90), async || {
        let (_, ingestion) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
        ingestion["reindexing"].is_null() && ingestion["indexing_status"] == "complete"
    })
    .await;
    let text = parsed_text(&stack, &user, &id.to_string()).await;
    assert_eq!((&text["format"], &text["text"]), (&json!("text"), &json!("Pumps\nPrime the pump before starting it.")));
}
