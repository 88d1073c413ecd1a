//! The sweep's scan for objects no row names, on N objects under one prefix of which half
//! are named by chat-file rows: the time to cover the prefix (runs of 5,000 keys, each
//! listing, asking the database which keys no row names, and deleting those), against the
//! baseline of only listing the same keys through the same client in the same run.
//!
//! `bench-sweep [--objects N]`; reads the local stack's environment.

use futures_util::StreamExt;
use sluice_e2e::Stack;
use std::time::{Duration, Instant};
use uuid::Uuid;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let n: usize = flag("--objects").and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let stack = Stack::from_env().await;
    let mut state = stack.sweep_state().await;
    state.thresholds.unnamed_object_grace = Duration::ZERO;
    let owner = Uuid::new_v4();
    let prefix = format!("media/{owner}/");
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}{i:06}_note.txt")).collect();

    let started = Instant::now();
    futures_util::stream::iter(keys.iter().cloned())
        .map(|key| {
            let (s3, bucket) = (stack.s3.clone(), stack.bucket.clone());
            async move { s3.put_object().bucket(bucket).key(key).body(b"x".to_vec().into()).send().await.expect("put") }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let named: Vec<String> = keys.iter().step_by(2).cloned().collect();
    stack
        .db()
        .await
        .execute(
            "INSERT INTO chat_files (id, user_id, filename, mime_type, size, storage_path, file_type, status) \
             SELECT gen_random_uuid(), $1, 'note.txt', 'text/plain', 1, k, 'text', 'ready' FROM unnest($2::text[]) AS k",
            &[&owner, &named],
        )
        .await
        .expect("rows");
    eprintln!("setup: {n} objects, {} named, in {:.1} s", named.len(), started.elapsed().as_secs_f64());
    // Objects are stamped to the second; the scan takes only those written before its second.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let started = Instant::now();
    let (mut listed, mut after) = (0, None::<String>);
    loop {
        let page = state.blob.list(&prefix, after.as_deref(), 1000).await.expect("list");
        listed += page.objects.len();
        after = page.objects.last().map(|(k, _)| k.clone());
        if !page.truncated {
            break;
        }
    }
    let baseline = started.elapsed().as_secs_f64();
    assert_eq!(listed, n);

    let started = Instant::now();
    let (mut runs, mut removed, mut slowest) = (0, 0, 0.0f64);
    loop {
        let run = Instant::now();
        removed +=
            sluice_sweep::remove_unnamed_objects(&state, &prefix, time::OffsetDateTime::now_utc()).await.expect("scan");
        slowest = slowest.max(run.elapsed().as_secs_f64());
        runs += 1;
        if state.db.sweep_cursor(&prefix).await.expect("cursor").is_none() {
            break;
        }
    }
    let scan = started.elapsed().as_secs_f64();
    assert_eq!(removed as usize, n - named.len(), "every unnamed object, and only those");
    assert_eq!(stack.keys_under(&prefix).await.len(), named.len());

    println!("| pass over {n} objects ({} unnamed) | time | keys/s | ratio |", n - named.len());
    println!("|---|---|---|---|");
    println!("| listing only (baseline) | {baseline:.2} s | {:.0} | 1.00x |", n as f64 / baseline);
    println!(
        "| the sweep's scan: {runs} runs, list + ask the database + delete the unnamed | {scan:.2} s | {:.0} | {:.2}x |",
        n as f64 / scan,
        scan / baseline
    );
    println!();
    println!("slowest run (5,000 keys): {slowest:.2} s; every unnamed object deleted, every named one kept");
    stack.db().await.execute("DELETE FROM chat_files WHERE user_id = $1", &[&owner]).await.expect("cleanup");
}
