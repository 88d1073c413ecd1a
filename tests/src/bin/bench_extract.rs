//! Benchmark (not a test) of what reading a file through the extract function costs: the same
//! files read by the `Reader` upload and parse use, once through the running stack's Lambda
//! API (the extract function in an environment of the file's tenant, as on AWS) and once by
//! a parse worker of this process (the path before the extract function), in the same run.
//! A one-page PDF under the chat options (a chat upload's read) and a 200-page PDF under the
//! document options (a document's parse); p50 and p95 of each, and their ratio.
//!
//! Run with `infra/local/bench-extract` (builds in release and starts a fresh stack).

use bytes::Bytes;
use clap::Parser;
use sluice_domain::BlockingPool;
use sluice_extraction::{ExtractFunction, Reader, Tenant};
use sluice_formats::ExtractOptions;
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// Reads of the one-page PDF per path.
    #[arg(long, default_value_t = 60)]
    small: usize,
    /// Reads of the 200-page PDF per path.
    #[arg(long, default_value_t = 10)]
    large: usize,
    /// The parse worker binary for the in-process path.
    #[arg(long)]
    worker: Option<std::path::PathBuf>,
    /// Instead: this many chat uploads of the one-page PDF through the running stack's API
    /// (whichever reader its runner was started with), printed as one row named `--label`.
    #[arg(long)]
    chat_uploads: Option<usize>,
    #[arg(long, default_value = "chat upload")]
    label: String,
    /// The chat path's p50 before, for the row's ratio.
    #[arg(long)]
    baseline_ms: Option<f64>,
}

/// Chat uploads of `pdf` through the API, one at a time; their latencies, sorted.
async fn chat_uploads(stack: &sluice_e2e::Stack, pdf: &[u8], runs: usize) -> Vec<Duration> {
    let user = sluice_e2e::User::new();
    let mut times = Vec::with_capacity(runs);
    for run in 0..runs + 3 {
        let started = Instant::now();
        let response = stack
            .http
            .post(stack.url("/files/upload"))
            .header("authorization", user.bearer())
            .multipart(sluice_e2e::file_form("minutes.pdf", Some("application/pdf"), pdf.to_vec()))
            .send()
            .await
            .expect("upload");
        assert_eq!(response.status().as_u16(), 201, "upload refused");
        let view: serde_json::Value = response.json().await.expect("json");
        assert!(view["preview"].as_str().is_some_and(|p| p.contains("harbour")), "not read: {view}");
        // The first three warm the path (the tenant's environment starts on the first).
        if run >= 3 {
            times.push(started.elapsed());
        }
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure(
    reader: &Reader,
    tenant: &Tenant,
    bytes: &Bytes,
    options: &ExtractOptions,
    runs: usize,
) -> Vec<Duration> {
    let pool = BlockingPool::new(1);
    let kind = sluice_formats::kind_for_filename("file.pdf").expect("pdf");
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let read = reader.extract(&pool, tenant, kind, bytes.clone(), None, options).await.expect("handed over");
        let read = read.expect("not refused");
        assert!(read.unreadable.is_none() && read.text.is_some(), "not read: {:?}", read.unreadable);
        times.push(started.elapsed());
    }
    times.sort();
    times
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let stack = sluice_e2e::Stack::from_env().await;
    let config = stack.config().await;
    let one_page = Bytes::from(sluice_fixtures::pdf(&["Minutes of the harbour board: the budget was approved."]));
    if let Some(runs) = args.chat_uploads {
        let times = chat_uploads(&stack, &one_page, runs).await;
        let p50 = percentile(&times, 0.5);
        let ratio = args.baseline_ms.map_or("1.00×".to_owned(), |b| format!("{:.2}×", p50.as_secs_f64() * 1000.0 / b));
        let p95 = percentile(&times, 0.95);
        println!(
            "| one-page PDF, chat upload (whole request) | {} | {runs} | {} | {} | {ratio} |",
            args.label,
            ms(p50),
            ms(p95)
        );
        return;
    }
    let blob = sluice_blob::Blob::new(stack.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
    let name = std::env::var("SLUICE_EXTRACT_FUNCTION").expect("SLUICE_EXTRACT_FUNCTION");
    let function = Reader::Function(ExtractFunction { lambda: aws_sdk_lambda::Client::new(&stack.sdk), name, blob });
    let worker = args.worker.expect("--worker");
    let workers = Reader::Workers(sluice_isolate::Extractor::new(&worker, config.parse_max_memory_bytes));
    let tenant = Tenant::user(uuid::Uuid::new_v4());
    let survey = Bytes::from(sluice_e2e::survey_pdf(200, None));
    let chat = sluice_isolate::chat_options(&config);
    let mut document = ExtractOptions::new(config.document_text_max_chars);
    document.time_limit = config.document_parse_time_limit;

    println!("| read | path | runs | p50 ms | p95 ms | p50 ratio |");
    println!("|---|---|---:|---:|---:|---:|");
    for (label, bytes, options, runs) in [
        ("one-page PDF, chat options", &one_page, &chat, args.small),
        ("200-page PDF, document options", &survey, &document, args.large),
    ] {
        // One read each first: the environment's start and the worker binary's first load are
        // cold starts, measured by bench-cold-start, not here.
        let _ = measure(&function, &tenant, bytes, options, 1).await;
        let _ = measure(&workers, &tenant, bytes, options, 1).await;
        let in_process = measure(&workers, &tenant, bytes, options, runs).await;
        let invoked = measure(&function, &tenant, bytes, options, runs).await;
        let ratio = percentile(&invoked, 0.5).as_secs_f64() / percentile(&in_process, 0.5).as_secs_f64();
        for (path, times) in [("worker in the caller (before)", &in_process), ("extract function, invoked", &invoked)] {
            let ratio = if std::ptr::eq(times, &invoked) { format!("{ratio:.2}×") } else { "1.00×".to_owned() };
            println!(
                "| {label} | {path} | {runs} | {} | {} | {ratio} |",
                ms(percentile(times, 0.5)),
                ms(percentile(times, 0.95))
            );
        }
        println!(
            "| {label} | added by the invocation (p50) | | {} | | |",
            ms(percentile(&invoked, 0.5).saturating_sub(percentile(&in_process, 0.5)))
        );
    }
}
