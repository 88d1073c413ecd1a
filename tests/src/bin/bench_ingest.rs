//! Ingestion throughput: documents, pages and chunks a minute through the local stack — each
//! uploaded through the API, judged, parsed in a worker, chunked, embedded by the keyless
//! model and written — with the runner's ingest running `--concurrency` documents at a time
//! (`SLUICE_LOCAL_INGEST_CONCURRENCY`), and where the time goes per stage, added up from the
//! functions' own `stage` spans in the runner's JSON log (`--log`).
//!
//! Three batches, timed apart: **corpus** — every document of the public corpus a base reads
//! (real papers, Office files, mail; the broken ones fail, as they should) —, **ten-page
//! PDFs** — `--generated` text PDFs of ten pages (default 20), the unit `docs/capacity.md`
//! prices — and **scans** — `--scans` two-page scanned PDFs (default 3, 150 dpi), read by OCR.
//!
//! `bench-ingest --concurrency N --log FILE [--generated 20] [--scans 3]`; reads the stack's
//! environment.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User, file_form};
use sluice_fixtures::{image_pdf, pdf, scanned_page};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The stages in the order a document meets them (parse's, then ingest's).
const STAGES: [(&str, &str); 8] = [
    ("parse", "download"),
    ("parse", "extract"),
    ("parse", "describe"),
    ("parse", "store"),
    ("ingest", "download"),
    ("ingest", "chunk"),
    ("ingest", "embed"),
    ("ingest", "write"),
];

/// A ten-page report of plain prose: about the length of a real ten-page PDF's text.
fn ten_page_pdf(n: usize) -> Vec<u8> {
    let words = ["pressure", "boundary", "layer", "flow", "wing", "stress", "heat", "transfer", "shock", "wave"];
    let pages: Vec<String> = (0..10)
        .map(|page| {
            (0..40)
                .map(|line| {
                    (0..12).map(|w| words[(n + page * 7 + line * 3 + w) % words.len()]).collect::<Vec<_>>().join(" ")
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let refs: Vec<&str> = pages.iter().map(String::as_str).collect();
    pdf(&refs)
}

fn two_page_scan(n: u64) -> Vec<u8> {
    let text = "The boundary layer thickens along the plate as the\nflow slows near the wall, and the heat\n\
                transfer falls with it. Measured pressures agree\nwith the theory within two per cent.";
    let pages = [scanned_page(text, 150, 0.5, n), scanned_page(text, 150, -0.7, n + 1)];
    image_pdf(&pages, 150)
}

/// Milliseconds in one of the log's durations (`"812µs"`, `"3.41ms"`, `"1.02s"`).
fn milliseconds(duration: &str) -> f64 {
    let split = duration.find(|c: char| c.is_alphabetic() || c == 'µ').unwrap_or(duration.len());
    let (number, unit) = duration.split_at(split);
    let value: f64 = number.parse().unwrap_or(0.0);
    match unit {
        "ns" => value / 1e6,
        "µs" | "us" => value / 1e3,
        "ms" => value,
        "s" => value * 1e3,
        _ => 0.0,
    }
}

/// What the stage spans in `log` from byte `from` on add up to.
#[derive(Default)]
struct Spans {
    /// `(function, stage)` → (milliseconds, spans).
    times: BTreeMap<(String, String), (f64, usize)>,
    /// Pages read, and the milliseconds OCR spent, in `extract`.
    pages: f64,
    ocr_ms: f64,
}

/// A numeric field of a span as the log writes it (a number, or a number in a string).
fn number(field: &Value) -> f64 {
    field.as_f64().or_else(|| field.as_str().and_then(|s| s.parse().ok())).unwrap_or(0.0)
}

fn stage_times(log: &str, from: usize) -> Spans {
    let mut spans = Spans::default();
    let text = std::fs::read_to_string(log).expect("the runner's log");
    for line in text.get(from..).unwrap_or_default().lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else { continue };
        let span = &entry["span"];
        if entry["fields"]["message"] != "close" || span["name"] != "stage" {
            continue;
        }
        let function = span["function"].as_str().unwrap_or_default().to_owned();
        let stage = span["stage"].as_str().unwrap_or_default().to_owned();
        let ms = milliseconds(entry["fields"]["time.busy"].as_str().unwrap_or("0"))
            + milliseconds(entry["fields"]["time.idle"].as_str().unwrap_or("0"));
        let slot = spans.times.entry((function, stage)).or_insert((0.0, 0));
        slot.0 += ms;
        slot.1 += 1;
        spans.pages += number(&span["pages"]);
        spans.ocr_ms += number(&span["ocr_ms"]);
    }
    spans
}

struct Batch {
    documents: usize,
    failed: usize,
    chunks: i64,
    seconds: f64,
    spans: Spans,
}

async fn run_batch(stack: &Stack, owner: &User, kb: &str, log: &str, files: Vec<(String, Vec<u8>)>) -> Batch {
    let from = std::fs::metadata(log).map(|m| m.len() as usize).unwrap_or(0);
    let started = Instant::now();
    let mut accepted = Vec::new();
    for (name, bytes) in files {
        let (status, answer) =
            stack.post_form(owner, &format!("/kb/{kb}/documents"), file_form(&name, None, bytes)).await;
        if status == 202 {
            accepted.push(answer["tracking_id"].as_str().expect("id").to_owned());
        }
    }
    let (mut failed, mut chunks) = (0, 0);
    for id in &accepted {
        let document = stack.document_settled(owner, id, Duration::from_secs(3600)).await;
        if document["status"] == "done" {
            chunks += document["chunk_count"].as_i64().unwrap_or(0);
        } else {
            failed += 1;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    // The runner writes a span's line as it closes; the last ones are in by now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    Batch { documents: accepted.len(), failed, chunks, seconds, spans: stage_times(log, from) }
}

fn print_batch(label: &str, concurrency: usize, batch: &Batch) {
    let per_minute = |n: f64| n / batch.seconds * 60.0;
    let indexed = batch.documents - batch.failed;
    println!(
        "| {label} | {concurrency} | {} ({} failed) | {:.0} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
        batch.documents,
        batch.failed,
        batch.spans.pages,
        batch.chunks,
        batch.seconds,
        per_minute(indexed as f64),
        per_minute(batch.spans.pages),
        batch.chunks as f64 / batch.seconds
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let concurrency: usize = flag("--concurrency").and_then(|v| v.parse().ok()).unwrap_or(1);
    let log = flag("--log").expect("--log: the runner's JSON log");
    let generated: usize = flag("--generated").and_then(|v| v.parse().ok()).unwrap_or(20);
    let scans: u64 = flag("--scans").and_then(|v| v.parse().ok()).unwrap_or(3);
    let stack = Stack::from_env().await;
    let owner = User::new();
    let body = json!({"name": "Throughput", "scope": "personal", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "ingestion_config": {"auto_ocr": true}});
    let (status, base) = stack.call_json(&owner, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id").to_owned();

    let corpus: Vec<(String, Vec<u8>)> =
        sluice_e2e::corpus::documents().into_iter().map(|(path, bytes)| (path.replace('/', "-"), bytes)).collect();
    let reports: Vec<(String, Vec<u8>)> =
        (0..generated).map(|n| (format!("report-{n}.pdf"), ten_page_pdf(n))).collect();
    let scanned: Vec<(String, Vec<u8>)> = (0..scans).map(|n| (format!("scan-{n}.pdf"), two_page_scan(n))).collect();
    let batches = [
        ("corpus", run_batch(&stack, &owner, &kb, &log, corpus).await),
        ("ten-page PDFs", run_batch(&stack, &owner, &kb, &log, reports).await),
        ("scans", run_batch(&stack, &owner, &kb, &log, scanned).await),
    ];

    println!(
        "| batch | ingest at once | documents | pages | chunks | seconds | documents/min | pages/min | chunks/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (label, batch) in &batches {
        print_batch(label, concurrency, batch);
    }
    println!();
    println!("Where the time goes: each stage's spans' wall time summed over the batch (s), and per indexed");
    println!("document (ms):");
    println!();
    let labels = batches.each_ref().map(|(label, _)| format!("{label}: s, ms a document"));
    println!("| function | stage | {} |", labels.join(" | "));
    println!("|---|---|{}", "---|".repeat(batches.len()));
    let per_document = |b: &Batch, ms: f64| ms / (b.documents - b.failed).max(1) as f64;
    for (function, stage) in STAGES {
        let cells = batches.each_ref().map(|(_, b)| {
            let ms = b.spans.times.get(&(function.to_owned(), stage.to_owned())).map_or(0.0, |(ms, _)| *ms);
            format!("{:.1}, {:.0}", ms / 1000.0, per_document(b, ms))
        });
        println!("| {function} | {stage} | {} |", cells.join(" | "));
    }
    let ocr = batches
        .each_ref()
        .map(|(_, b)| format!("{:.1}, {:.0}", b.spans.ocr_ms / 1000.0, per_document(b, b.spans.ocr_ms)));
    println!("| parse | of which OCR | {} |", ocr.join(" | "));
}
