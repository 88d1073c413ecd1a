//! Real workers: the `sluice-extract-worker` binary started per file, killed at its
//! deadline, starved of memory, and the parent still serving afterwards.

use sluice_fixtures as fixtures;
use sluice_formats::{ExtractOptions, FileKind, RefusalCode, kind_for_filename};
use sluice_isolate::Extractor;
use std::time::{Duration, Instant};

/// The default `SLUICE_PARSE_MAX_MEMORY_MB`.
const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;

fn worker(memory_bytes: u64) -> Extractor {
    Extractor::new(env!("CARGO_BIN_EXE_sluice-extract-worker"), memory_bytes)
}

fn kind(extension: &str) -> &'static FileKind {
    kind_for_filename(&format!("file.{extension}")).expect("a kind")
}

fn spreadsheet(rows: usize) -> Vec<u8> {
    let sheet: String = (1..=rows)
        .map(|r| {
            format!(
                r#"<row r="{r}"><c r="A{r}" t="inlineStr"><is><t>row {r}</t></is></c><c r="B{r}"><v>{r}</v></c></row>"#
            )
        })
        .collect();
    fixtures::xlsx(&sheet)
}

#[test]
fn a_worker_answers_what_the_parser_answers() {
    let options = ExtractOptions::new(10_000);
    let docx = fixtures::docx("<w:p><w:r><w:t>Isolated but identical</w:t></w:r></w:p>");
    let isolated = worker(DEFAULT_MEMORY_BYTES).extract(kind("docx"), &docx, &options).expect("spawned");
    assert_eq!(isolated, sluice_formats::extract(kind("docx"), &docx, &options));
    assert!(isolated.expect("read").text.expect("text").contains("Isolated but identical"));

    let bomb = fixtures::zip(&[("word/document.xml", "<!DOCTYPE w [<!ENTITY a \"aaaa\">]><w:document/>")]);
    let refused = worker(DEFAULT_MEMORY_BYTES).extract(kind("docx"), &bomb, &options).expect("spawned");
    assert_eq!(refused.expect_err("refused").code, RefusalCode::UnsafeContainer("xml_doctype"));
}

/// Two thousand full pages: PDFium needs about 40 MiB of address space for them.
fn long_report() -> Vec<u8> {
    let pages: Vec<String> =
        (0..2000).map(|p| (0..40).map(|l| format!("Line {l} of page {p} of a long report\n")).collect()).collect();
    fixtures::pdf(&pages.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn the_default_memory_bound_holds_a_two_thousand_page_pdf() {
    let pdf = long_report();
    let options = ExtractOptions::new(10_000_000);
    let extraction = worker(DEFAULT_MEMORY_BYTES).extract(kind("pdf"), &pdf, &options).expect("spawned").expect("read");
    assert_eq!(extraction.unreadable, None);
    assert_eq!(extraction.pages, Some(2000));
}

/// The address space a parse worker gets on the smallest function that OCRs: 1,536 MB
/// shared by two workers (`worker_memory_limit_mb`).
const SMALLEST_OCR_WORKER_BYTES: u64 = 640 << 20;

#[test]
fn a_dense_scanned_page_at_300_dpi_is_read_within_the_smallest_workers_memory() {
    // A real page of full-width lines (the corpus's one-column LaTeX document), scanned at
    // 300 dpi: the recognizer reads them at its widest, where eight at once needed more
    // than 600 MiB.
    let paper = fixtures::corpus_file("pdf-layouts/pdflatex-4-pages.pdf");
    let pages = sluice_formats::pdf::render_pages(&paper, 300).expect("render");
    let file = fixtures::image_pdf(&[fixtures::scanned(&pages[0].0, 300, 1.2, 5)], 300);
    let mut options = ExtractOptions::new(1_000_000).with_ocr(Some(sluice_formats::OcrOptions {
        dpi: 300,
        max_pages: 10,
        alphabet: sluice_formats::OcrAlphabet::LATIN,
    }));
    options.time_limit = Duration::from_secs(120);
    let extraction =
        worker(SMALLEST_OCR_WORKER_BYTES).extract(kind("pdf"), &file, &options).expect("spawned").expect("read");
    assert_eq!(extraction.ocr_pages, Some(1), "{extraction:?}");
    let read = extraction.text.unwrap_or_default();
    assert!(read.contains("Hello, here is some text without a meaning."), "{read}");
}

#[test]
fn a_file_that_needs_more_memory_than_the_bound_is_unreadable() {
    let options = ExtractOptions::new(10_000_000);
    let starved =
        worker(32 << 20).extract(kind("pdf"), &long_report(), &options).expect("spawned").expect("not refused");
    assert!(starved.text.is_none(), "a starved worker yielded text");
    assert_eq!(
        starved.unreadable.as_deref(),
        Some("reading the file needed more than 32 MiB of memory and was stopped")
    );

    let text = "a line of a very long log file\n".repeat(400_000);
    let starved = worker(16 << 20).extract(kind("txt"), text.as_bytes(), &options).expect("spawned");
    assert!(starved.expect("not refused").unreadable.expect("a reason").contains("more than 16 MiB"));
}

#[test]
fn a_worker_past_its_hard_limit_is_killed_and_the_next_file_still_reads() {
    // The parsers' own deadline is far away: only the kill can stop this one in time.
    let options = ExtractOptions { time_limit: Duration::from_secs(600), ..ExtractOptions::new(10_000_000) };
    let big = spreadsheet(400_000);
    let impatient = worker(DEFAULT_MEMORY_BYTES).with_hard_time_limit(Duration::from_millis(40));
    let started = Instant::now();
    let killed = impatient.extract(kind("xlsx"), &big, &options).expect("spawned").expect("not refused");
    assert!(started.elapsed() < Duration::from_secs(2), "killed late: {:?}", started.elapsed());
    assert_eq!(killed.text, None);
    assert!(killed.unreadable.expect("a reason").contains("hard limit"));

    // A zero limit kills the worker before it can answer, however fast the machine is.
    let tiff = fixtures::tiff(&[(3000, 3000); 4]);
    let killed_at_once = worker(DEFAULT_MEMORY_BYTES).with_hard_time_limit(Duration::ZERO);
    let refused = killed_at_once.extract(kind("tiff"), &tiff, &options).expect("spawned");
    assert_eq!(refused.expect_err("refused").code, RefusalCode::UndecodableImage);

    let small = spreadsheet(3);
    let read = worker(DEFAULT_MEMORY_BYTES).extract(kind("xlsx"), &small, &options).expect("spawned").expect("read");
    assert!(read.text.expect("text").contains("row 3\t3"));
}

#[test]
fn a_worker_sees_none_of_the_functions_secrets() {
    // The parent holds what a Lambda holds: session credentials and database settings.
    for held in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "SLUICE_DB_HOST", "SLUICE_DB_SECRET_ID"] {
        assert!(std::env::var_os(held).is_some(), "run with `infra/local/test`: the parent must hold {held}");
    }
    // A stand-in worker that writes down the environment it was started with.
    let (dir, seen) = run_stand_in("env", "env > \"$OUT\"");
    let environment = std::fs::read_to_string(&seen).expect("the worker ran");
    for forbidden in ["AWS_", "SLUICE_DB_", "SLUICE_BUCKET", "SLUICE_KMS"] {
        assert!(!environment.contains(forbidden), "the worker saw {forbidden}: {environment}");
    }
    assert!(environment.contains("SLUICE_EXTRACT_WORKER=1"), "{environment}");
    // ONNX Runtime's uploader would open a socket, which the filter punishes by death.
    assert!(environment.lines().any(|l| l == "ORT_DISABLE_TELEMETRY=1"), "{environment}");
    // Nothing but the allowlist and what the shell itself sets.
    for line in environment.lines() {
        let name = line.split('=').next().unwrap_or("");
        let allowed = sluice_isolate::WORKER_PASSES_ENV.contains(&name)
            || ["SLUICE_EXTRACT_WORKER", "MALLOC_ARENA_MAX", "ORT_DISABLE_TELEMETRY", "PWD", "SHLVL", "_"]
                .contains(&name);
        assert!(allowed, "the worker saw {name}: {environment}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs a stand-in worker, a shell script whose `body` writes to `$OUT`, as an extraction;
/// its folder and that file.
fn run_stand_in(name: &str, body: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-worker-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let out = dir.join("out");
    let program = dir.join("worker.sh");
    std::fs::write(&program, format!("#!/bin/sh\nOUT='{}'\n{body}\n", out.display())).expect("script");
    std::process::Command::new("chmod").arg("+x").arg(&program).status().expect("chmod");
    let _ = Extractor::new(&program, DEFAULT_MEMORY_BYTES).extract(kind("txt"), b"hello", &ExtractOptions::new(100));
    (dir, out)
}

/// A worker whose parser was taken over, told by the file which escape to try.
fn rogue() -> Extractor {
    Extractor::new(env!("CARGO_BIN_EXE_sluice-escape-probe"), DEFAULT_MEMORY_BYTES)
}

#[test]
fn a_worker_that_tries_to_escape_is_stopped_and_the_file_refused() {
    // Where the platform grants confinement (here); on AWS Lambda the microVM is the boundary.
    let granted = rogue().probe().expect("a worker answered");
    assert!(granted.refused().is_empty(), "{granted:?}");
    let options = ExtractOptions::new(100_000);
    // Each of these kills the worker at the forbidden call: a TIFF (which must decode) is
    // refused, and nothing of the escape reaches the answer.
    let mark = std::env::temp_dir().join(format!("sluice-escaped-{}", std::process::id()));
    let exec = format!("exec:{}", mark.display());
    let left = std::env::temp_dir().join(format!("sluice-left-{}", std::process::id()));
    let setsid = format!("setsid:{}", left.display());
    let escapes =
        ["socket", "ptrace", "process_vm_readv", exec.as_str(), "kill", "kill_all", "spawn", &setsid, "io_uring"];
    for escape in escapes {
        let answer = rogue().extract(kind("tiff"), escape.as_bytes(), &options).expect("spawned");
        let refusal = answer.expect_err(escape);
        assert_eq!(refusal.code, RefusalCode::UndecodableImage, "{escape}: {}", refusal.message);
        assert!(refusal.message.contains("crashed"), "{escape}: {}", refusal.message);
    }
    assert!(!mark.exists(), "a program the worker started ran");
    assert!(!left.exists(), "a process in a session of its own was started");
    // The parent's environment (a Lambda's credentials live there) is closed to the worker,
    // even where the worker runs as root: the parent is not dumpable, and the worker holds
    // no capability.
    let answer = rogue().extract(kind("txt"), b"environ", &options).expect("spawned").expect("answered");
    let text = answer.text.expect("the probe's verdict");
    assert!(text.starts_with("denied: "), "{text}");
    assert!(!text.contains("AWS_") && !text.contains("PATH="), "{text}");
}

#[test]
fn nothing_a_worker_starts_outlives_it() {
    // A stand-in worker that leaves a process behind and exits without answering.
    let (dir, pid_file) = run_stand_in("linger", "sleep 60 &\necho $! > \"$OUT\"");
    let pid = std::fs::read_to_string(&pid_file).expect("the worker ran").trim().to_owned();
    let started = Instant::now();
    // Gone, or a zombie waiting for its reaper: either way no longer running.
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
        assert!(started.elapsed() < Duration::from_secs(5), "process {pid} outlived its worker");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
