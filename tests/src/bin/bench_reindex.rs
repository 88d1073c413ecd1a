//! Re-indexing a 200-page PDF on the local stack, with the deployment's real local model
//! behind a counting stand-in (so what is embedded is real, and how much is counted):
//!
//! - an unchanged re-index, against a full re-embed in the same run (the same re-index after
//!   a chunk_size change, so every chunk text is new): both re-chunk the parsed text and
//!   never parse;
//! - a re-upload with one paragraph edited (`replace=true`), against the same edited file
//!   uploaded into a fresh base with nothing cached: both parse the 200 pages.
//!
//! `bench-reindex [--pages N]`; reads the local stack's environment.

use reqwest::Method;
use serde_json::json;
use sluice_e2e::stub::StubProvider;
use sluice_e2e::{Stack, User, file_form, survey_pdf};
use std::time::{Duration, Instant};
use uuid::Uuid;

async fn base(stack: &Stack, user: &User, endpoint: &str, name: &str) -> String {
    let body = json!({"name": name, "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint});
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base["id"].as_str().expect("id").to_owned()
}

/// Waits until nothing of the base is processing and no re-index runs.
async fn settled(stack: &Stack, user: &User, kb: &str) {
    loop {
        let (_, ingestion) = stack.call_json(user, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
        if ingestion["indexing_status"] == "complete" && ingestion["reindexing"].is_null() {
            assert_eq!(ingestion["failed_count"], 0, "{ingestion}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn upload(stack: &Stack, user: &User, kb: &str, bytes: Vec<u8>, replace: bool) {
    let form = file_form("survey.pdf", None, bytes).text("replace", replace.to_string());
    let (status, answer) = stack.post_form(user, &format!("/kb/{kb}/documents"), form).await;
    assert_eq!(status, 202, "{answer}");
}

async fn reindex(stack: &Stack, user: &User, kb: &str) {
    let (status, started) = stack.call_json(user, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
    assert_eq!(status, 202, "{started}");
}

/// Times `work` until the base settles; the texts embedded meanwhile.
async fn measured(
    stack: &Stack,
    user: &User,
    kb: &str,
    counter: &StubProvider,
    work: impl Future<Output = ()>,
) -> (f64, usize) {
    let (texts, started) = (counter.inputs(), Instant::now());
    work.await;
    settled(stack, user, kb).await;
    (started.elapsed().as_secs_f64(), counter.inputs() - texts)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let count: usize = args.windows(2).find(|w| w[0] == "--pages").and_then(|w| w[1].parse().ok()).unwrap_or(200);
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let upstream = std::env::var("SLUICE_LOCAL_EMBEDDINGS_URL").expect("the local stack's embedding service");
    let counter = StubProvider::forwarding(&upstream).await;
    let service = json!({"name": format!("counted {}", Uuid::new_v4()), "provider": "local",
        "base_url": counter.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    let endpoint = endpoint["id"].as_str().expect("id").to_owned();

    let kb = base(&stack, &user, &endpoint, "Survey").await;
    let first =
        measured(&stack, &user, &kb, &counter, upload(&stack, &user, &kb, survey_pdf(count, None), false)).await;
    let unchanged = measured(&stack, &user, &kb, &counter, reindex(&stack, &user, &kb)).await;
    let patch = json!({"ingestion_config": {"chunk_size": 700}});
    let (status, _) = stack.call_json(&user, Method::PATCH, &format!("/kb/{kb}"), Some(patch)).await;
    assert_eq!(status, 200);
    let full = measured(&stack, &user, &kb, &counter, reindex(&stack, &user, &kb)).await;
    let edited = survey_pdf(count, Some(count / 2));
    let edit = measured(&stack, &user, &kb, &counter, upload(&stack, &user, &kb, edited.clone(), true)).await;
    let fresh_kb = base(&stack, &user, &endpoint, "Survey, fresh").await;
    let patch = json!({"ingestion_config": {"chunk_size": 700}});
    let (status, _) = stack.call_json(&user, Method::PATCH, &format!("/kb/{fresh_kb}"), Some(patch)).await;
    assert_eq!(status, 200);
    let fresh = measured(&stack, &user, &fresh_kb, &counter, upload(&stack, &user, &fresh_kb, edited, false)).await;

    let ratio = |(s, t): (f64, usize), (bs, bt): (f64, usize)| {
        format!("{:.3}× the time, {:.3}× the texts", s / bs, t as f64 / bt.max(1) as f64)
    };
    println!("\n{count}-page PDF, {} texts embedded on first upload ({:.1} s, parse included)\n", first.1, first.0);
    println!("| run | texts embedded | time | against its baseline |");
    println!("|---|---|---|---|");
    println!("| full re-embed (re-index after a chunk_size change) — baseline | {} | {:.2} s | 1× |", full.1, full.0);
    println!(
        "| re-index, configuration unchanged | {} | {:.2} s | {} |",
        unchanged.1,
        unchanged.0,
        ratio(unchanged, full)
    );
    println!("| fresh base, edited file (parse + every text) — baseline | {} | {:.2} s | 1× |", fresh.1, fresh.0);
    println!(
        "| re-upload with one paragraph edited (`replace=true`) | {} | {:.2} s | {} |",
        edit.1,
        edit.0,
        ratio(edit, fresh)
    );
}
