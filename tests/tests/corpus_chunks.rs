//! Every document of the public test corpus (real papers, Office files, mail, text in many
//! encodings) indexed into a `local` base at its default chunking: the model reads every
//! chunk whole (`truncated_chunks` 0, its own tokenizer counting), and each document's title
//! is the one the document gives (a PDF's metadata, a paper's first line) or none at all,
//! never an id of a file name; search hits carry it.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::corpus::documents;
use sluice_e2e::{Stack, User, file_form};
use std::time::Duration;

#[tokio::test]
async fn every_corpus_document_is_read_whole_by_the_model_and_titled_by_itself() {
    let stack = Stack::from_env().await;
    let owner = User::new();
    let body = json!({"name": "Corpus", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let (kb, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));

    let mut accepted = Vec::new();
    for (path, bytes) in documents() {
        // The corpus's file names as they are, folders flattened: a name is not an id here.
        let name = path.replace('/', "-");
        let form = file_form(&name, None, bytes);
        let (status, answer) = stack.post_form(&owner, &format!("/kb/{kb}/documents"), form).await;
        match status {
            202 => accepted.push((path, answer["tracking_id"].as_str().expect("id").to_owned())),
            // A hostile or broken file refused at the door is another test's verdict.
            400 | 413 | 415 | 422 => {}
            other => panic!("{path}: {other} {answer}"),
        }
    }
    assert!(accepted.len() >= 30, "the corpus's documents were refused: {}", accepted.len());

    let mut done = Vec::new();
    for (path, id) in &accepted {
        let document = stack.document_settled(&owner, id, Duration::from_secs(600)).await;
        if document["status"] == "done" {
            assert_eq!(document["truncated_chunks"], 0, "{path}: {document}");
            done.push((path.clone(), document));
        }
    }
    let chunks: i64 = done.iter().map(|(_, d)| d["chunk_count"].as_i64().unwrap_or(0)).sum();
    assert!(done.len() >= 25 && chunks >= 200, "{} documents, {chunks} chunks indexed", done.len());

    let document = |suffix: &str| -> &Value {
        &done.iter().find(|(path, _)| path.ends_with(suffix)).unwrap_or_else(|| panic!("{suffix} not indexed")).1
    };
    let google = document("google-doc-document.pdf");
    assert_eq!(
        (google["title"].as_str(), google["title_source"].as_str()),
        (Some("PDF Example Document"), Some("metadata"))
    );
    for (path, document) in &done {
        if let Some(title) = document["title"].as_str() {
            assert!(title.chars().count() <= 300 && !title.trim().is_empty(), "{path}: {title:?}");
            assert!(!title.ends_with(".txt") && !title.ends_with(".pdf"), "{path}: a file name is no title: {title:?}");
            assert!(!title.starts_with("Sheet:") && !title.ends_with('。'), "{path}: no sheet or sentence: {title:?}");
        }
    }

    // A hit carries its document's title.
    let body = json!({"query": "PDF example document", "collections": [collection], "top_k": 20});
    let (status, found) = stack.call_json(&owner, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    let results = found["results"].as_array().expect("results");
    let google_id = google["id"].as_str().expect("id");
    let hit = results.iter().find(|r| r["document_id"] == google_id).unwrap_or_else(|| panic!("{found}"));
    assert_eq!(hit["title"], "PDF Example Document", "{hit}");
    assert_eq!(hit["metadata"]["title"], "PDF Example Document", "{hit}");
}
