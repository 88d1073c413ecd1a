//! A sync source of N small objects (default 10,000) on the local stack: a re-sync with
//! nothing changed against the baseline of a bare paginated ListObjectsV2 of the same prefix
//! through the same SDK in the same run, timed through the API (queue hops included) and as
//! the listing alone (`list_pages` in this process, as `sluice sync` runs it), whose peak
//! resident memory is read after a prefix of M keys and after one of N. The first sync is
//! measured end to end through the API on M objects (default 1,000: parse and ingest
//! included, embeddings answered by a stub so the model's speed is not what is measured).
//!
//! The emulator's SQS slows to a few requests a second once a queue holds thousands of
//! messages, so a first sync of N objects would measure the emulator. The N objects'
//! documents are therefore written as a completed first sync leaves them (a finished row
//! with the listed ETag and size, claimed by the source), straight into the database; the
//! re-sync then decides against them exactly as it would.
//!
//! `bench-sync [--objects N] [--first M]`; reads the local stack's environment.

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::json;
use sluice_e2e::stub::StubProvider;
use sluice_e2e::{Stack, User};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The process's peak resident set, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

async fn fill(stack: &Stack, bucket: &str, prefix: &str, n: usize) {
    futures_util::stream::iter(0..n)
        .map(|i| {
            let (s3, bucket, key) = (stack.s3.clone(), bucket.to_owned(), format!("{prefix}{i:06}.md"));
            let body = format!("Note number {i}: a small synced document.").into_bytes();
            async move { s3.put_object().bucket(bucket).key(key).body(body.into()).send().await.expect("put") }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
}

async fn run_to_end(stack: &Stack, user: &User, kb: &str, source: &str) -> (f64, serde_json::Value) {
    let started = Instant::now();
    let path = format!("/kb/{kb}/sync-sources/{source}/sync");
    let (status, run) = stack.call_json(user, Method::POST, &path, None).await;
    assert_eq!(status, 202, "{run}");
    loop {
        let (_, logs) =
            stack.call_json(user, Method::GET, &format!("/kb/{kb}/sync-sources/{source}/logs?limit=1"), None).await;
        let log = &logs["logs"][0];
        if log["id"] == run["run_id"] && log["status"] != "running" {
            return (started.elapsed().as_secs_f64(), log.clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes the documents of every object under `big/` as a completed first sync of `source`
/// leaves them: a finished row addressed by the object, with its listed ETag and size, and
/// the source's claim.
async fn seed_as_synced(stack: &Stack, kb: &str, bucket: &str, source: &str) {
    let (mut keys, mut etags, mut sizes, mut after) = (Vec::new(), Vec::new(), Vec::new(), None::<String>);
    loop {
        let page = stack.s3.list_objects_v2().bucket(bucket).prefix("big/").set_start_after(after.clone()).send().await;
        let page = page.expect("list");
        for object in page.contents() {
            keys.push(format!("s3://{bucket}/{}", object.key().expect("key")));
            etags.push(object.e_tag().expect("etag").trim_matches('"').to_owned());
            sizes.push(object.size().expect("size"));
        }
        after = page.contents().last().and_then(|o| o.key()).map(str::to_owned);
        if !page.is_truncated().unwrap_or(false) {
            break;
        }
    }
    let db = stack.db().await;
    db.execute(
        "WITH seeded AS (INSERT INTO rag_documents (id, collection_name, kb_id, org_id, owner_id, filename, filesize, \
         filetype, status, source_path, source, sync_source_id, source_etag, vector_document_id, completed_at) \
         SELECT gen_random_uuid(), kb.collection_name, kb.id, kb.org_id, kb.owner_id, \
         regexp_replace(s.path, '^.*/', ''), s.size, 'md', 'done', s.path, 's3', $2::text::uuid, s.etag, NULL, now() \
         FROM knowledge_bases kb, unnest($3::text[], $4::text[], $5::int8[]) AS s(path, etag, size) \
         WHERE kb.id = $1::text::uuid RETURNING id) \
         INSERT INTO rag_document_claims (source_id, document_id) SELECT $2::text::uuid, id FROM seeded",
        &[&kb, &source, &keys, &etags, &sizes],
    )
    .await
    .expect("seed");
}

/// The bare listing: every page of `prefix`, nothing else.
async fn bare_listing(stack: &Stack, bucket: &str, prefix: &str) -> (f64, usize) {
    let started = Instant::now();
    let (mut listed, mut after) = (0, None::<String>);
    loop {
        let page = stack
            .s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_start_after(after.clone())
            .max_keys(1000)
            .send()
            .await
            .expect("list");
        listed += page.contents().len();
        after = page.contents().last().and_then(|o| o.key()).map(str::to_owned);
        if !page.is_truncated().unwrap_or(false) {
            return (started.elapsed().as_secs_f64(), listed);
        }
    }
}

/// A no-change re-sync's listing in this process, as `sluice sync` runs it.
async fn listing_in_process(state: &sluice_parse::State, db: &sluice_store::Db, source: Uuid) -> f64 {
    let started = Instant::now();
    let sluice_store::RunStart::Started { run_id, outbox_id } =
        db.start_sync_run(source, "operator", false).await.expect("start")
    else {
        panic!("a run is still going");
    };
    db.mark_dispatched(outbox_id).await.expect("mark");
    let job = sluice_store::SyncRunJob { run_id, step: 0 };
    sluice_parse::sync::list_pages(state, job, None, |_, _| {}).await.expect("listed");
    let elapsed = started.elapsed().as_secs_f64();
    let run = db.sync_run(run_id).await.expect("run").expect("run");
    assert_eq!((run.status.as_str(), run.fetched, run.ingested), ("done", 0, 0), "{run:?}");
    elapsed
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let n: usize = flag("--objects").and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let small: usize = flag("--first").and_then(|v| v.parse().ok()).unwrap_or(1_000);
    let stack = Stack::from_env().await;
    let stub = StubProvider::start(vec![StubProvider::sized()], 384).await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit", "secrets:edit"], false);
    let service = json!({"name": format!("bench stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (_, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(service)).await;
    let body = json!({"name": "Bench", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint["id"]});
    let (_, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    let kb = base["id"].as_str().expect("base").to_owned();
    let bucket = format!("bench-sync-{}", &Uuid::new_v4().simple().to_string()[..12]);
    stack.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let started = Instant::now();
    fill(&stack, &bucket, "big/", n).await;
    fill(&stack, &bucket, "small/", small).await;
    eprintln!("setup: {} objects in {:.1} s", n + small, started.elapsed().as_secs_f64());
    let secret = json!({"name": "bench reader", "kind": "aws_credentials", "visibility": "org",
        "value": {"access_key_id": "AKIABENCH", "secret_access_key": "bench"}});
    let (_, secret) = stack.call_json(&user, Method::POST, "/secrets", Some(secret)).await;
    let mut sources = Vec::new();
    for prefix in ["big/", "small/"] {
        let body = json!({"type": "s3", "name": prefix, "config": {"bucket": bucket, "prefix": prefix},
            "credential": {"secret_id": secret["id"]}});
        let (status, source) =
            stack.call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(body)).await;
        assert_eq!(status, 201, "{source}");
        sources.push(source["id"].as_str().expect("id").to_owned());
    }

    let (first, small_log) = run_to_end(&stack, &user, &kb, &sources[1]).await;
    assert_eq!(small_log["ingested"].as_i64(), Some(small as i64), "{small_log}");
    seed_as_synced(&stack, &kb, &bucket, &sources[0]).await;
    let embedded = stub.requests();

    let mut baseline = Vec::new();
    for _ in 0..3 {
        let (seconds, listed) = bare_listing(&stack, &bucket, "big/").await;
        assert_eq!(listed, n);
        baseline.push(seconds);
    }
    let mut api = Vec::new();
    for _ in 0..3 {
        let (seconds, log) = run_to_end(&stack, &user, &kb, &sources[0]).await;
        assert_eq!((log["skipped"].as_i64(), log["fetched"].as_i64()), (Some(n as i64), Some(0)), "{log}");
        api.push(seconds);
    }

    let sdk = sluice_blob::sdk_config().await;
    let key = stack.kms_key_arn().await;
    let config = sluice_domain::Config::from_lookup(|name| match name {
        "SLUICE_KMS_KEY_ID" => Some(key.clone()),
        other => std::env::var(other).ok(),
    })
    .expect("config");
    let db = sluice_store::Db::open(&stack.db_target, &stack.app_login, 2).expect("pool");
    let blob = sluice_blob::Blob::new(stack.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
    let extractor = sluice_isolate::Extractor::new("/bin/false", config.parse_max_memory_bytes);
    let state = sluice_parse::State::new(config, db.clone(), blob, sluice_extraction::Reader::Workers(extractor), &sdk);
    let before = peak_rss_mib();
    let small_source = Uuid::parse_str(&sources[1]).expect("id");
    listing_in_process(&state, &db, small_source).await;
    let after_small = peak_rss_mib();
    let big_source = Uuid::parse_str(&sources[0]).expect("id");
    let mut in_process = Vec::new();
    for _ in 0..3 {
        in_process.push(listing_in_process(&state, &db, big_source).await);
    }
    let after_big = peak_rss_mib();

    let listing = median(baseline);
    println!("| measure (objects of ~45 bytes) | value |");
    println!("|---|---|");
    println!(
        "| first sync of {small} objects end to end (API → listed, fetched, parsed, embedded by a stub, written) | {first:.1} s, {:.0} objects/s |",
        small as f64 / first
    );
    println!("| bare paginated ListObjectsV2 of {n} keys (baseline, median of 3) | {listing:.3} s |");
    println!(
        "| no-change re-sync, the listing and its decisions in-process (median of 3) | {:.3} s, **{:.2}×** the listing |",
        median(in_process.clone()),
        median(in_process) / listing
    );
    println!(
        "| no-change re-sync through the API, queue hops included (median of 3) | {:.3} s, {:.2}× the listing |",
        median(api.clone()),
        median(api) / listing
    );
    println!("| GetObject requests and embeddings during the re-syncs | 0 and {} |", stub.requests() - embedded);
    println!(
        "| peak resident memory of the in-process listing: before, after {small} keys, after {n} keys | {before:.1} / {after_small:.1} / {after_big:.1} MiB |"
    );
}
