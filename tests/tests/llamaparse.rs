//! LlamaParse as a collection's parser, on the running stack, against a **stand-in** of its
//! job API that the test starts (`sluice_e2e::llamaparse_stand_in`) at the address the test
//! stack names: what Sluice sends (the original once, `max_pages`, the organization's key),
//! how it polls a job that outlives a delivery, what it ingests, and how a bad key reads.
//! One test, as the stand-in holds one fixed address.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::llamaparse_stand_in::LlamaParseStandIn;
use sluice_e2e::{Stack, User};
use std::time::Duration;
use uuid::Uuid;

const KEY: &str = "llx-stand-in-key";

async fn key(stack: &Stack, user: &User, value: &str) -> String {
    let body =
        json!({"name": "parser key", "kind": "api_key", "provider": "llamaparse", "value": value, "visibility": "org"});
    let (status, secret) = stack.call_json(user, Method::POST, "/secrets", Some(body)).await;
    assert_eq!(status, 201, "{secret}");
    secret["id"].as_str().expect("id").to_owned()
}

async fn base(stack: &Stack, user: &User, ingestion: Value) -> (u16, Value) {
    let body = json!({"name": format!("parsed {}", Uuid::new_v4().simple()), "scope": "org",
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2", "ingestion_config": ingestion});
    stack.call_json(user, Method::POST, "/kb", Some(body)).await
}

async fn document(stack: &Stack, user: &User, id: &str) -> Value {
    let (status, document) = stack.call_json(user, Method::GET, &format!("/rag/documents/{id}"), None).await;
    assert_eq!(status, 200, "{document}");
    document
}

#[tokio::test]
async fn a_llamaparse_collection_sends_the_file_once_polls_and_ingests_the_markdown() {
    let stack = Stack::from_env().await;
    let pages =
        ["# Berth rules\n\nShips dock at the east quay only.", "Pilots board at the outer buoy.", "Never sent."];
    // Pending longer than one delivery polls (SLUICE_PARSER_POLL_SECS=3 on the test stack).
    let stand_in = LlamaParseStandIn::start(KEY, &pages, Duration::from_secs(5)).await;
    let user = User::with(Some(Uuid::new_v4()), &["secrets:edit", "collections:edit"], false);
    let secret = key(&stack, &user, KEY).await;

    // The settings: a key is required, and must be a LlamaParse key the caller can see.
    let (status, refused) = base(&stack, &user, json!({"parser": "llamaparse"})).await;
    assert_eq!(status, 422, "a collection's own configuration: {refused}");
    assert!(refused["error"]["details"]["fields"].get("ingestion_config.llamaparse_secret_id").is_some(), "{refused}");
    let stranger = User::with(Some(Uuid::new_v4()), &["secrets:edit", "collections:edit"], false);
    let theirs = key(&stack, &stranger, KEY).await;
    let (status, refused) = base(&stack, &user, json!({"parser": "llamaparse", "llamaparse_secret_id": theirs})).await;
    assert_eq!(status, 422, "another organization's key: {refused}");

    let (status, created) =
        base(&stack, &user, json!({"parser": "llamaparse", "llamaparse_secret_id": secret, "max_pages": 2})).await;
    assert_eq!(status, 201, "{created}");
    let kb = created["id"].as_str().expect("id").to_owned();

    // What the collection takes: LlamaParse's formats only.
    let (status, formats) = stack.call_json(&user, Method::GET, "/rag/supported-formats?parser=llamaparse", None).await;
    assert_eq!(status, 200, "{formats}");
    let listed: Vec<&str> = formats["formats"].as_array().expect("list").iter().filter_map(Value::as_str).collect();
    assert!(listed.contains(&".pdf") && !listed.contains(&".json"), "{formats}");
    let form = sluice_e2e::file_form("data.json", None, b"{\"a\": 1}".to_vec());
    let (status, refused) = stack.post_form(&user, &format!("/kb/{kb}/documents"), form).await;
    assert_eq!(status, 400, "{refused}");
    let (status, _) = stack.call_json(&user, Method::GET, "/rag/supported-formats?parser=acme", None).await;
    assert_eq!(status, 400);

    let pdf = sluice_fixtures::pdf_typeset(&[vec![sluice_fixtures::Ink::Text {
        x: 72.0,
        y: 700.0,
        size: 10.0,
        bold: false,
        text: "What Sluice would have read itself.",
    }]]);
    let accepted = stack.upload_document(&user, &kb, "rules.pdf", &pdf).await;
    let id = accepted["tracking_id"].as_str().expect("id").to_owned();
    sluice_e2e::eventually("the LlamaParse document is indexed", Duration::from_secs(60), async || {
        document(&stack, &user, &id).await["status"] != "processing"
    })
    .await;
    let read = document(&stack, &user, &id).await;
    assert_eq!(read["status"], "done", "{read}");
    assert_eq!(read["parser_pages"], 2, "the pages LlamaParse parsed: {read}");
    // Sent once, with max_pages and the file; polled over more than one delivery.
    assert_eq!(stand_in.violations(), Vec::<String>::new());
    let uploads = stand_in.uploads();
    assert_eq!(uploads.len(), 1, "a job that outlived a delivery is polled, not uploaded again: {uploads:?}");
    assert_eq!(
        (uploads[0].filename.as_str(), uploads[0].bytes, uploads[0].max_pages),
        ("rules.pdf", pdf.len(), Some(2))
    );
    assert!(stand_in.polls() >= 2, "{}", stand_in.polls());

    let (status, text) = stack.call_json(&user, Method::GET, &format!("/rag/documents/{id}/text"), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        text["text"], "# Berth rules\n\nShips dock at the east quay only.\n\nPilots board at the outer buoy.",
        "{text}"
    );
    let body = json!({"query": "pilots outer buoy", "knowledge_base_ids": [kb], "mode": "keyword", "top_k": 3});
    let (status, found) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    // One chunk over both pages, cited by LlamaParse's pages.
    assert_eq!(found["results"][0]["metadata"]["pages"], json!([1, 2]), "{found}");

    // Re-indexed to text long after its job: parsed again by a new job, not failed for the
    // old one's age.
    let document_id: Uuid = id.parse().expect("uuid");
    let db = stack.db().await;
    let aged = "UPDATE rag_documents SET parser_job_started_at = now() - interval '2 hours' WHERE id = $1";
    assert_eq!(db.execute(aged, &[&document_id]).await.expect("aged"), 1);
    let patch = json!({"ingestion_config": {"output_format": "text"}});
    let (status, patched) = stack.call_json(&user, Method::PATCH, &format!("/kb/{kb}"), Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    let (status, started) = stack.call_json(&user, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
    assert_eq!(status, 202, "{started}");
    sluice_e2e::eventually("the re-index ends", Duration::from_secs(90), async || {
        let (_, ingestion) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
        ingestion["reindexing"].is_null() && ingestion["indexing_status"] == "complete"
    })
    .await;
    let reread = document(&stack, &user, &id).await;
    assert_eq!(reread["status"], "done", "{reread}");
    assert_eq!(stand_in.uploads().len(), 2, "the original was sent again for the new format");

    // A key LlamaParse refuses: the document fails in Sluice's words.
    let wrong = key(&stack, &user, "llx-revoked").await;
    let (_, created) = base(&stack, &user, json!({"parser": "llamaparse", "llamaparse_secret_id": wrong})).await;
    let other = created["id"].as_str().expect("id").to_owned();
    let accepted = stack.upload_document(&user, &other, "rules.pdf", &pdf).await;
    let id = accepted["tracking_id"].as_str().expect("id").to_owned();
    sluice_e2e::eventually("the refused document fails", Duration::from_secs(30), async || {
        document(&stack, &user, &id).await["status"] == "error"
    })
    .await;
    let failed = document(&stack, &user, &id).await;
    let message = failed["error_message"].as_str().expect("message");
    assert!(message.starts_with("parse: ParserCredentialRefused: "), "{message}");
    assert!(message.contains("llamaparse_secret_id") && !message.contains("Invalid API Key"), "{message}");
}
