//! Benchmark of the presigned upload path on the running local stack (not a test).
//!
//! Uploads `--uploads` files of mixed types (text, CSV, PDF, DOCX, XLSX, PNG, ZIP) through
//! an intent and a PUT to the emulator's S3, and measures the time from the PUT's answer
//! to the row being `ready` (S3 notification → SQS → poller → parse → row), p50 and p99.
//! Baseline, in the same run: the inline upload of the same files (one request that checks,
//! parses, stores and answers `ready`). Prints a Markdown table.
//!
//! Run with `infra/local/bench` (builds in release and starts a fresh stack).

use clap::Parser;
use serde_json::json;
use sluice_e2e::{Stack, User};
use sluice_fixtures::{RawZipEntry, docx, pdf, raw_zip, xlsx};
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// Presigned uploads to time.
    #[arg(long, default_value_t = 50)]
    uploads: usize,
    /// Also write the largest PDF a chat upload allows here, and time it through the
    /// presigned path (its parse memory is measured by the script).
    #[arg(long)]
    largest_pdf: Option<std::path::PathBuf>,
}

/// A PDF of just under `limit` bytes: full pages of text, at most the 2,000 read.
fn largest_pdf(limit: usize) -> Vec<u8> {
    let page: String =
        (0..60).map(|l| format!("Line {l}: revenue, costs and margins by region and quarter, audited.\n")).collect();
    let one = pdf(&[page.as_str()]).len();
    let pages = (limit / one).min(2000);
    let mut body = pdf(&vec![page.as_str(); pages]);
    let mut n = pages;
    while body.len() >= limit {
        n -= 1;
        body = pdf(&vec![page.as_str(); n]);
    }
    body
}

/// The files, in turn: `(name, MIME type, bytes)`.
fn files() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let text: String = (0..4000).map(|i| format!("line {i} of the meeting notes\n")).collect();
    let csv: String = (0..20000).map(|i| format!("2026-11-{:02},EU-{},{}\n", i % 28 + 1, i % 7, i)).collect();
    let pages: Vec<String> = (0..20).map(|p| format!("Page {p} of the annual report")).collect();
    let rows: String = (1..=2000)
        .map(|r| format!(r#"<row r="{r}"><c r="A{r}"><v>{r}</v></c><c r="B{r}"><v>{}</v></c></row>"#, r * 3))
        .collect();
    vec![
        ("notes.txt", "text/plain", text.into_bytes()),
        ("ledger.csv", "text/csv", csv.into_bytes()),
        ("report.pdf", "application/pdf", pdf(&pages.iter().map(String::as_str).collect::<Vec<_>>())),
        (
            "memo.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            docx("<w:p><w:r><w:t>Memo</w:t></w:r></w:p>"),
        ),
        ("sheet.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", xlsx(&rows)),
        ("pixel.png", "image/png", sluice_e2e::tiny_png(64, 64)),
        (
            "repo.zip",
            "application/zip",
            raw_zip(&[
                RawZipEntry::file("repo/README.md", b"# Repo"),
                RawZipEntry::file("repo/src/app.py", b"print(1)").deflated(),
            ]),
        ),
    ]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let stack = Stack::from_env().await;
    let user = User::new();
    let files = files();
    let (mut presigned, mut inline) = (Vec::new(), Vec::new());
    for i in 0..args.uploads {
        let (name, mime, bytes) = &files[i % files.len()];
        let started = Instant::now();
        let (status, answer) = stack.upload(&user, name, Some(mime), bytes.clone()).await;
        assert_eq!(status, 201, "inline {name}: {answer}");
        inline.push(started.elapsed());

        let (status, intent) =
            stack.intent(&user, json!({"filename": name, "size": bytes.len(), "mime_type": mime})).await;
        assert_eq!(status, 201, "intent {name}: {intent}");
        assert_eq!(stack.put_presigned(&intent, bytes.clone()).await, 200);
        let landed = Instant::now();
        let file = stack.settled_every(&user, intent["id"].as_str().expect("id"), Duration::from_millis(5)).await;
        assert_eq!(file["status"], "ready", "{name}: {file}");
        presigned.push(landed.elapsed());
    }
    if let Some(path) = &args.largest_pdf {
        let bytes = largest_pdf(10 * 1024 * 1024);
        std::fs::write(path, &bytes).expect("write the PDF");
        let (status, intent) = stack
            .intent(&user, json!({"filename": "largest.pdf", "size": bytes.len(), "mime_type": "application/pdf"}))
            .await;
        assert_eq!(status, 201, "{intent}");
        assert_eq!(stack.put_presigned(&intent, bytes.clone()).await, 200);
        let landed = Instant::now();
        let file = stack.settled_every(&user, intent["id"].as_str().expect("id"), Duration::from_millis(5)).await;
        assert_eq!(file["status"], "ready", "{file}");
        println!(
            "largest allowed PDF ({:.1} MiB): PUT answered to `ready` in {:.0} ms\n",
            bytes.len() as f64 / 1048576.0,
            landed.elapsed().as_secs_f64() * 1000.0
        );
    }
    inline.sort();
    presigned.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("| path ({} uploads of 7 types) | p50 | p99 |", args.uploads);
    println!("|---|---|---|");
    println!(
        "| inline `POST /files/upload`, request to `ready` (baseline) | {:.1} ms | {:.1} ms |",
        ms(percentile(&inline, 0.5)),
        ms(percentile(&inline, 0.99))
    );
    println!(
        "| presigned: PUT answered to `ready` | {:.1} ms | {:.1} ms |",
        ms(percentile(&presigned, 0.5)),
        ms(percentile(&presigned, 0.99))
    );
    println!(
        "\npresigned / inline at p50: {:.2}x",
        percentile(&presigned, 0.5).as_secs_f64() / percentile(&inline, 0.5).as_secs_f64()
    );
}
