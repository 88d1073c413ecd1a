//! Peak resident memory of the ingest function's own process on a real event, int8 and
//! fp32: the release `sluice-ingest` binary started as Lambda starts it (a Lambda Runtime
//! API on loopback, `sluice_e2e::runtime_api`), handed the SQS batch of a 200-page PDF's
//! ingest job received from the stack's queue, and its `VmHWM` read from `/proc` once it has
//! answered. The deployment's keyless model is registered in-process (`model://`, as the
//! template's migrate step does), so the function embeds with the model itself. The PDF is
//! uploaded through a front door of the bench's own and parsed in-process beforehand, into a
//! fresh base per run (nothing cached). **Baseline**: the same process after init, before
//! the event (`VmRSS` at its first ask for an event).
//!
//! `bench-ingest-memory --ingest BINARY --worker BINARY [--pages N]`; reads the local stack's
//! environment; nothing else may consume the stack's queues meanwhile.

use clap::Parser;
use reqwest::Method;
use serde_json::json;
use sluice_e2e::runtime_api::RuntimeApi;
use sluice_e2e::{Stack, User, file_form, survey_pdf};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use uuid::Uuid;

#[derive(Parser, Debug)]
struct Args {
    /// The release `sluice-ingest` binary.
    #[arg(long)]
    ingest: PathBuf,
    /// A binary that serves parse workers (`sluice-local`).
    #[arg(long)]
    worker: PathBuf,
    #[arg(long, default_value_t = 200)]
    pages: usize,
}

/// The ingest function's memory, as the template sets it.
const INGEST_MEMORY_MB: u64 = 2048;

/// A memory line of the process's status, in MiB.
fn status_mib(pid: u32, field: &str) -> f64 {
    sluice_e2e::process_memory_mib(&pid.to_string(), field).unwrap_or_else(|| panic!("no {field} for {pid}"))
}

/// Lambda's SQS event source for one queue: the next batch of at most `size`, as an event.
async fn next_batch(
    stack: &Stack,
    queue_url: &str,
    size: i32,
) -> (Vec<aws_sdk_sqs::types::Message>, sluice_local::pollers::Source) {
    let source = sluice_local::pollers::Source {
        queue_arn: sluice_local::resources::queue_arn(&stack.sqs, queue_url).await.expect("arn"),
        queue_url: queue_url.to_owned(),
        batch_size: size,
        region: "us-east-1".to_owned(),
    };
    let started = Instant::now();
    loop {
        let received = sluice_local::pollers::receive(&stack.sqs, &source).await.expect("receive");
        if !received.is_empty() {
            return (received, source);
        }
        assert!(started.elapsed() < Duration::from_secs(120), "nothing arrived on {queue_url}");
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let sdk = sluice_blob::sdk_config().await;
    let (s3, kms, sqs) = (sluice_blob::s3_client(&sdk), aws_sdk_kms::Client::new(&sdk), aws_sdk_sqs::Client::new(&sdk));
    let provisioned = sluice_local::resources::provision(&s3, &kms, &sqs).await.expect("the stack's resources");
    // The deployment's keyless model in-process, as the template's migrate step registers it.
    sluice_migrate::migrate_from_env(&sdk, Some("model://all-minilm-l6-v2"), None).await.expect("migrated");
    let mut stack = Stack::from_env().await;
    let config = stack.config().await;
    let vector_db = stack.store(8).await;
    stack.api = stack.door(stack.app_store(8).await, sluice_search::State::new(config.clone(), vector_db, &sdk)).await;
    let blob = sluice_blob::Blob::new(s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
    let extractor = sluice_isolate::Extractor::new(&args.worker, config.parse_max_memory_bytes);
    let parse = sluice_parse::State::new(
        config.clone(),
        stack.app_store(4).await,
        blob,
        sluice_extraction::Reader::Workers(extractor),
        &sdk,
    );
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let pdf = survey_pdf(args.pages, None);

    println!("| path | chunks | event (s) | RSS after init (MiB) | peak RSS on the event (MiB) | peak / after init |");
    println!("|---|---|---|---|---|---|");
    for precision in ["int8", "fp32"] {
        let body = json!({"name": format!("Memory {precision} {}", Uuid::new_v4().simple()), "scope": "org",
            "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
        let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
        assert_eq!(status, 201, "{base}");
        let kb = base["id"].as_str().expect("id").to_owned();
        let (status, accepted) =
            stack.post_form(&user, &format!("/kb/{kb}/documents"), file_form("survey.pdf", None, pdf.clone())).await;
        assert_eq!(status, 202, "{accepted}");
        let document = Uuid::parse_str(accepted["tracking_id"].as_str().expect("id")).expect("uuid");
        // Parsed in-process, as the parse function would (the queue also carries S3's events).
        let db = stack.db().await;
        let parsed = "SELECT 1 FROM rag_documents WHERE id = $1 AND parsed_path IS NOT NULL";
        while db.query_opt(parsed, &[&document]).await.expect("row").is_none() {
            let (messages, source) = next_batch(&stack, &provisioned.parse_queue_url, 5).await;
            let answer = sluice_parse::handle(
                &parse,
                sluice_local::pollers::event_of(&messages, &source),
                std::time::Instant::now() + std::time::Duration::from_secs(900),
            )
            .await;
            sluice_local::pollers::delete_handled(&stack.sqs, &source, &messages, &answer).await;
        }

        // The function, started as Lambda starts it, with the template's settings for ingest.
        let api =
            RuntimeApi::start("arn:aws:lambda:us-east-1:123456789012:function:ingest", Duration::from_secs(900)).await;
        let mut child = tokio::process::Command::new(&args.ingest)
            .env("AWS_LAMBDA_RUNTIME_API", &api.address)
            .env("AWS_LAMBDA_FUNCTION_NAME", "ingest")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", INGEST_MEMORY_MB.to_string())
            .env("SLUICE_DB_SECRET_ID", std::env::var("SLUICE_DB_VECTOR_SECRET_ID").expect("the vector login"))
            .env("SLUICE_KMS_KEY_ID", &provisioned.key)
            .env("SLUICE_PARSE_QUEUE_URL", &provisioned.parse_queue_url)
            .env("SLUICE_INGEST_QUEUE_URL", &provisioned.ingest_queue_url)
            .env("SLUICE_TEARDOWN_QUEUE_URL", &provisioned.teardown_queue_url)
            .env("SLUICE_EMBED_PRECISION", precision)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()
            .expect("start the ingest function");
        let pid = child.id().expect("pid");
        api.started(Duration::from_secs(60)).await.expect("the function started");
        let after_init = status_mib(pid, "VmRSS");
        let (messages, source) = next_batch(&stack, &provisioned.ingest_queue_url, 1).await;
        let event = serde_json::to_value(sluice_local::pollers::event_of(&messages, &source)).expect("event");
        let started = Instant::now();
        let answer = api.invoke(event, Duration::from_secs(900)).await.expect("the function answered");
        let took = started.elapsed().as_secs_f64();
        let peak = status_mib(pid, "VmHWM");
        let response: sluice_queue::SqsBatchResponse =
            serde_json::from_value(answer.clone()).expect("a batch response");
        assert!(response.batch_item_failures.is_empty(), "{answer}");
        sluice_local::pollers::delete_handled(&stack.sqs, &source, &messages, &response).await;
        let _ = child.kill().await;
        let row = db
            .query_one("SELECT status, chunk_count FROM rag_documents WHERE id = $1", &[&document])
            .await
            .expect("row");
        let (status, chunks): (String, i32) = (row.get(0), row.get(1));
        assert_eq!(status, "done", "the document was not ingested");
        println!("| {precision} | {chunks} | {took:.1} | {after_init:.0} | {peak:.0} | {:.1}× |", peak / after_init);
    }
}
