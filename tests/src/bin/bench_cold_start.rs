//! Cold start of each function binary: the time from starting the process until it asks a
//! Lambda Runtime API for its first event — init included: the SDK's configuration, the
//! database login from Secrets Manager, the TLS connection and the schema check, PDFium where
//! the function reads PDFs. The Runtime API is ours (`sluice_e2e::runtime_api`: a starting
//! function's `GET /2018-06-01/runtime/invocation/next` is held open until it is stopped).
//! **Baseline**: `curl` asking the same endpoint — a process that starts and makes that one
//! request, and nothing else.
//!
//! The in-process embedding model is loaded on a sandbox's first embedding, not at start;
//! its load (and that first embedding) is timed on its own from `SLUICE_MODEL_DIR`.
//!
//! `bench-cold-start [--runs N] BINARY...`; reads the local stack's environment.

use sluice_e2e::runtime_api::RuntimeApi;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `program` with the Runtime API's address and waits until it asks for an event;
/// the time that took.
async fn time_to_first_poll(program: &[String]) -> Duration {
    let api = RuntimeApi::start("arn:aws:lambda:us-east-1:000000000000:function:bench", Duration::from_secs(30)).await;
    let (command, args) = program.split_first().expect("a program");
    let next = format!("http://{}/2018-06-01/runtime/invocation/next", api.address);
    let args: Vec<String> = args.iter().map(|a| a.replace("{api}", &next)).collect();
    let started = Instant::now();
    let mut child = Command::new(command)
        .args(&args)
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the function");
    let waited = api.started(Duration::from_secs(30)).await.map(|()| started.elapsed());
    let _ = child.kill();
    let output = child.wait_with_output().expect("stopped");
    waited
        .unwrap_or_else(|error| panic!("{command}: {error}; its stderr:\n{}", String::from_utf8_lossy(&output.stderr)))
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 20;
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        runs = args.get(i + 1).and_then(|v| v.parse().ok()).expect("--runs N");
        args.drain(i..=i + 1);
    }
    let mut programs: Vec<(String, Vec<String>)> = vec![(
        "baseline: curl asks for an event".to_owned(),
        vec!["curl".to_owned(), "-s".to_owned(), "{api}".to_owned()],
    )];
    for binary in &args {
        let name = std::path::Path::new(binary).file_name().map(|n| n.to_string_lossy().into_owned());
        programs.push((name.unwrap_or_else(|| binary.clone()), vec![binary.clone()]));
    }
    println!("| program | runs | p50 ms | max ms | ratio to baseline p50 |");
    println!("|---|---|---|---|---|");
    let mut baseline = None;
    for (name, program) in &programs {
        let mut times = Vec::new();
        for _ in 0..runs {
            times.push(time_to_first_poll(program).await);
        }
        times.sort();
        let p50 = percentile(&times, 0.5);
        let base = *baseline.get_or_insert(p50);
        println!("| {name} | {runs} | {p50:.1} | {:.1} | {:.1} |", percentile(&times, 1.0), p50 / base);
    }
    if let Ok(dir) = std::env::var("SLUICE_MODEL_DIR") {
        let mut loads = Vec::new();
        let mut firsts = Vec::new();
        let mut precision = "";
        for _ in 0..runs.min(5) {
            let started = Instant::now();
            let model = sluice_minilm::Embedder::load_configured(std::path::Path::new(&dir)).expect("the model loads");
            loads.push(started.elapsed());
            precision = model.precision().as_str();
            let started = Instant::now();
            model.embed(&["The quarterly budget was approved.".to_owned()]).expect("embeds");
            firsts.push(started.elapsed());
        }
        loads.sort();
        firsts.sort();
        println!();
        println!(
            "in-process model (all-MiniLM-L6-v2 {}, {} loads): load p50 {:.0} ms, then the first embedding {:.0} ms",
            precision,
            loads.len(),
            percentile(&loads, 0.5),
            percentile(&firsts, 0.5)
        );
    }
}
