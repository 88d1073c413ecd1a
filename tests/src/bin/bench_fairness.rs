//! Ingestion fairness between tenants on the local stack: organization A queues N documents
//! (default 200), organization B then queues one. The baseline, measured in the same run,
//! is the time A's first ten documents take from A's first upload; the figure is the time
//! B's one document takes from its upload, and how many of A's were done before it.
//! Embeddings are the deployment's real local model, each document about twenty chunks.
//!
//! `bench-fairness [--documents N]`; reads the local stack's environment.

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::json;
use sluice_e2e::{Stack, User};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// About twenty chunks at chunk_size 200.
fn document(tenant: &str, n: usize) -> Vec<u8> {
    (0..20)
        .map(|p| format!("{tenant} report {n}, section {p}: the depot counted pallets, checked the cold store and logged the late lorries.\n\n"))
        .collect::<String>()
        .into_bytes()
}

async fn base(stack: &Stack, user: &User) -> String {
    let body = json!({"name": "Fairness", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": {"chunk_size": 200, "chunk_overlap": 0}});
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base["id"].as_str().expect("id").to_owned()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let documents: usize =
        args.windows(2).find(|w| w[0] == "--documents").and_then(|w| w[1].parse().ok()).unwrap_or(200);
    let stack = Stack::from_env().await;
    let a = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let b = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let (kb_a, kb_b) = (base(&stack, &a).await, base(&stack, &b).await);

    let a_started = Instant::now();
    let a_ids: Vec<Uuid> = futures_util::stream::iter(0..documents)
        .map(|n| {
            let (stack, a, kb_a) = (&stack, &a, &kb_a);
            async move {
                let accepted = stack.upload_document(a, kb_a, &format!("a-{n}.txt"), &document("A", n)).await;
                Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid")
            }
        })
        .buffered(8)
        .collect()
        .await;
    let queued_a = a_started.elapsed();
    let b_started = Instant::now();
    let accepted = stack.upload_document(&b, &kb_b, "b-0.txt", &document("B", 0)).await;
    let b_id = Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid");

    let db = stack.db().await;
    let mut a_done: Vec<Duration> = Vec::new();
    let mut b_done: Option<(Duration, usize)> = None;
    while a_done.len() < documents || b_done.is_none() {
        let finished: i64 = db
            .query_one("SELECT count(*) FROM rag_documents WHERE id = ANY($1) AND status <> 'processing'", &[&a_ids])
            .await
            .expect("A's documents")
            .get(0);
        while a_done.len() < usize::try_from(finished).unwrap_or_default() {
            a_done.push(a_started.elapsed());
        }
        if b_done.is_none() {
            let status: String = db
                .query_one("SELECT status FROM rag_documents WHERE id = $1", &[&b_id])
                .await
                .expect("B's document")
                .get(0);
            if status != "processing" {
                assert_eq!(status, "done", "B's document failed");
                b_done = Some((b_started.elapsed(), a_done.len()));
            }
        }
        assert!(a_started.elapsed() < Duration::from_secs(1800), "ingestion stalled: {} of A's done", a_done.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failed: i64 = db
        .query_one("SELECT count(*) FROM rag_documents WHERE id = ANY($1) AND status <> 'done'", &[&a_ids])
        .await
        .expect("A's failures")
        .get(0);
    assert_eq!(failed, 0, "some of A's documents failed");
    let (b_time, a_before_b) = b_done.expect("B done");
    let (a_ten, a_all) = (a_done[9.min(documents - 1)], a_done[documents - 1]);
    println!("| measure | seconds |");
    println!("|---|---|");
    println!("| A queues {documents} documents (uploads answered) | {:.1} |", queued_a.as_secs_f64());
    println!("| baseline: A's first 10 documents done, from A's first upload | {:.1} |", a_ten.as_secs_f64());
    println!("| B's one document done, from its upload | {:.1} |", b_time.as_secs_f64());
    println!("| all of A's {documents} done, from A's first upload | {:.1} |", a_all.as_secs_f64());
    println!();
    println!(
        "B's document took **{:.2}×** the time of A's first ten; {a_before_b} of A's {documents} were done before it.",
        b_time.as_secs_f64() / a_ten.as_secs_f64()
    );
}
