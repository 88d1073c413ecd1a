//! Re-indexing a base on the running stack, through a counting embedding service: 50
//! documents re-chunked from 750 to 300 characters are never parsed again and embed only
//! the chunk texts the collection had not embedded; a second re-index with nothing changed
//! embeds nothing; a re-upload with `replace=true` goes through the same cache; and while a
//! re-index runs, no document is ever seen with no chunks or with old and new ones at once.

use reqwest::Method;
use serde_json::json;
use sluice_e2e::stub::StubProvider;
use sluice_e2e::{Stack, User, file_form};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use uuid::Uuid;

const DOCUMENTS: usize = 50;

/// A document of distinct paragraphs (its number in every sentence), about 3,000 characters.
fn document(n: usize) -> String {
    (0..12)
        .map(|p| {
            format!(
                "Paragraph {p} of report {n}: the survey team counted {} birds near marker {} and noted the weather.\n\n",
                n * 31 + p,
                p * 7 + n
            )
        })
        .collect::<Vec<_>>()
        .join("")
        .repeat(2)
}

async fn chunk_counts(stack: &Stack, table: &str) -> BTreeMap<Uuid, i64> {
    let rows = stack
        .db()
        .await
        .query(&format!("SELECT document_id, count(*) FROM \"{table}\" GROUP BY document_id"), &[])
        .await
        .expect("counts");
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

async fn chunk_hashes(stack: &Stack, table: &str) -> BTreeSet<String> {
    let rows = stack.db().await.query(&format!("SELECT content_hash FROM \"{table}\""), &[]).await.expect("hashes");
    rows.iter().map(|r| r.get(0)).collect()
}

async fn parse_marks(stack: &Stack, kb: &str) -> BTreeMap<Uuid, (Option<String>, Option<time::OffsetDateTime>)> {
    let rows = stack
        .db()
        .await
        .query("SELECT id, parsed_path, parse_started_at FROM rag_documents WHERE kb_id = $1::text::uuid", &[&kb])
        .await
        .expect("marks");
    rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect()
}

/// Starts a re-index and waits for it; the counts seen by a watcher meanwhile.
async fn reindex(stack: &Stack, owner: &User, kb: &str, table: &str) -> Vec<BTreeMap<Uuid, i64>> {
    let (status, started) = stack.call_json(owner, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["total"], DOCUMENTS, "{started}");
    let mut seen = Vec::new();
    let began = Instant::now();
    loop {
        seen.push(chunk_counts(stack, table).await);
        let (status, ingestion) = stack.call_json(owner, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
        assert_eq!(status, 200, "{ingestion}");
        if ingestion["reindexing"].is_null() && ingestion["indexing_status"] == "complete" {
            return seen;
        }
        if !ingestion["reindexing"].is_null() {
            assert_eq!(ingestion["reindexing"]["total"], DOCUMENTS, "{ingestion}");
        }
        assert!(began.elapsed() < Duration::from_secs(120), "still re-indexing: {ingestion}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_reindex_rechunks_from_parsed_text_and_pays_only_for_new_chunk_texts() {
    let stack = Stack::from_env().await;
    let owner = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&owner, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let body = json!({"name": "Surveys", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint["id"],
        "ingestion_config": {"chunk_size": 750, "chunk_overlap": 0}});
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let (kb, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let table = format!("rag_{collection}");
    for n in 0..DOCUMENTS {
        stack.upload_document(&owner, kb, &format!("survey-{n}.md"), document(n).as_bytes()).await;
    }
    stack.indexed(&owner, kb).await;
    let before = chunk_counts(&stack, &table).await;
    assert_eq!(before.len(), DOCUMENTS);
    let old_hashes = chunk_hashes(&stack, &table).await;
    let parsed = parse_marks(&stack, kb).await;
    let paid_before = stub.inputs();

    // Smaller chunks: only texts never embedded are paid for, nothing is parsed again.
    let patch = json!({"ingestion_config": {"chunk_size": 300}});
    let (status, patched) = stack.call_json(&owner, Method::PATCH, &format!("/kb/{kb}"), Some(patch)).await;
    assert_eq!(status, 200, "{patched}");
    let seen = reindex(&stack, &owner, kb, &table).await;
    let after = chunk_counts(&stack, &table).await;
    assert!(seen.len() > 1, "the watcher looked while the re-index ran");
    for counts in &seen {
        assert_eq!(counts.len(), DOCUMENTS, "a document with no chunks was visible");
        for (id, count) in counts {
            assert!(
                *count == before[id] || *count == after[id],
                "{id}: {count}, neither {} nor {}",
                before[id],
                after[id]
            );
        }
    }
    assert!(after.iter().all(|(id, count)| *count > before[id]), "{after:?}");
    let new_hashes = chunk_hashes(&stack, &table).await;
    let fresh = new_hashes.difference(&old_hashes).count();
    let rows: i64 = after.values().sum();
    assert!(fresh > 0 && (fresh as i64) < rows, "repeated texts are embedded once: {fresh} of {rows}");
    assert_eq!(stub.inputs() - paid_before, fresh, "only chunk texts the collection had not embedded");
    assert_eq!(parse_marks(&stack, kb).await, parsed, "no document was parsed again");
    let (_, listed) = stack.call_json(&owner, Method::GET, &format!("/kb/{kb}/documents?limit=100"), None).await;
    assert!(listed["documents"].as_array().expect("documents").iter().all(|d| d["status"] == "done"), "{listed}");

    // Nothing changed: nothing embedded.
    let paid = stub.inputs();
    reindex(&stack, &owner, kb, &table).await;
    assert_eq!(stub.inputs(), paid, "a re-index with no change embeds nothing");
    assert_eq!(chunk_counts(&stack, &table).await, after);

    // A re-upload of the same text replacing the first: every chunk text is known.
    let form = file_form("survey-0.md", None, document(0).into_bytes()).text("replace", "true");
    let (status, accepted) = stack.post_form(&owner, &format!("/kb/{kb}/documents"), form).await;
    assert_eq!(status, 202, "{accepted}");
    stack.indexed(&owner, kb).await;
    assert_eq!(stub.inputs(), paid, "the replacement reused every vector");
    assert_eq!(chunk_counts(&stack, &table).await.len(), DOCUMENTS, "the replacement retired the first");

    // Nobody else may start one.
    let stranger = User::new();
    let (status, _) = stack.call(&stranger, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
    assert_eq!(status, 404);
}
