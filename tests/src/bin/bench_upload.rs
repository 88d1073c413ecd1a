//! Benchmark of the inline chat-upload path on the running local stack (not a test).
//!
//! Uploads a 100 KB CSV through the front door at each concurrency and reports requests per
//! second and p50/p99 latency, beside a baseline measured in the same run: a bare SSE-KMS
//! `PutObject` of the same bytes straight to the same S3 endpoint, the floor any upload path
//! pays. With `--pid`, also reports the function process's peak resident memory (VmHWM).
//!
//! Run with `infra/local/bench` (builds in release and starts a fresh stack).

use clap::Parser;
use sluice_e2e::{Stack, User, file_form};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

#[derive(Debug, Parser)]
struct Args {
    /// Requests per measurement.
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Concurrency levels to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,
    /// Size of the CSV in bytes.
    #[arg(long, default_value_t = 100 * 1024)]
    size: usize,
    /// The process id of the runner hosting the function, for its peak memory.
    #[arg(long)]
    pid: Option<u32>,
}

/// A CSV of `size` bytes, realistic enough to be parsed and previewed.
fn csv(size: usize) -> Vec<u8> {
    let mut out = b"date,region,product,units,revenue\n".to_vec();
    let mut i = 0u64;
    while out.len() < size {
        out.extend_from_slice(
            format!(
                "2026-{:02}-{:02},EU-{},SKU-{:05},{},{}.{:02}\n",
                i % 12 + 1,
                i % 28 + 1,
                i % 7,
                i,
                i % 97,
                i * 13,
                i % 100
            )
            .as_bytes(),
        );
        i += 1;
    }
    out.truncate(size);
    out
}

#[derive(Debug)]
struct Measured {
    rps: f64,
    p50: Duration,
    p99: Duration,
}

async fn measure<F, Fut>(requests: usize, concurrency: usize, one: F) -> Measured
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let one = Arc::new(one);
    for _ in 0..concurrency.max(5) {
        one().await;
    }
    let permits = Arc::new(Semaphore::new(concurrency));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(requests);
    for _ in 0..requests {
        let permit = permits.clone().acquire_owned().await.expect("semaphore");
        let one = one.clone();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            one().await;
            drop(permit);
            t.elapsed()
        }));
    }
    let mut latencies = Vec::with_capacity(requests);
    for task in tasks {
        latencies.push(task.await.expect("request task"));
    }
    let total = started.elapsed();
    latencies.sort();
    let pct =
        |p: f64| latencies[((latencies.len() as f64 * p).ceil() as usize).saturating_sub(1).min(latencies.len() - 1)];
    Measured { rps: requests as f64 / total.as_secs_f64(), p50: pct(0.50), p99: pct(0.99) }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let stack = Arc::new(Stack::from_env().await);
    let user = Arc::new(User::new());
    let body = Arc::new(csv(args.size));
    let key_arn = stack.kms_key_arn().await;

    println!("| path | concurrency | requests | req/s | p50 ms | p99 ms | ratio to baseline req/s |");
    println!("|---|---|---|---|---|---|---|");
    for &concurrency in &args.concurrency {
        let (s, b, k) = (stack.clone(), body.clone(), key_arn.clone());
        let baseline = measure(args.requests, concurrency, move || {
            let (s, b, k) = (s.clone(), b.clone(), k.clone());
            async move {
                let key = format!("bench/baseline/{}", uuid::Uuid::new_v4());
                s.s3.put_object()
                    .bucket(&s.bucket)
                    .key(key)
                    .body(b.to_vec().into())
                    .content_type("text/csv")
                    .server_side_encryption(aws_sdk_s3::types::ServerSideEncryption::AwsKms)
                    .ssekms_key_id(k)
                    .send()
                    .await
                    .expect("baseline put");
            }
        })
        .await;
        let (s, u, b) = (stack.clone(), user.clone(), body.clone());
        let upload = measure(args.requests, concurrency, move || {
            let (s, u, b) = (s.clone(), u.clone(), b.clone());
            async move {
                let response = s
                    .http
                    .post(s.url("/files/upload"))
                    .header("authorization", u.bearer())
                    .multipart(file_form("sales.csv", Some("text/csv"), b.to_vec()))
                    .send()
                    .await
                    .expect("upload");
                assert_eq!(response.status().as_u16(), 201, "upload refused");
            }
        })
        .await;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| baseline: SSE-KMS PutObject to the emulator | {concurrency} | {} | {:.1} | {:.1} | {:.1} | 1.00 |",
            args.requests,
            baseline.rps,
            ms(baseline.p50),
            ms(baseline.p99)
        );
        println!(
            "| POST /api/v1/files/upload (100 KB CSV) | {concurrency} | {} | {:.1} | {:.1} | {:.1} | {:.2} |",
            args.requests,
            upload.rps,
            ms(upload.p50),
            ms(upload.p99),
            upload.rps / baseline.rps
        );
    }
    if let Some(pid) = args.pid {
        match sluice_e2e::process_memory_mib(&pid.to_string(), "VmHWM") {
            Some(mib) => println!("\npeak resident memory of the function process (VmHWM): {mib:.1} MiB"),
            None => println!("\npeak memory: process {pid} not readable"),
        }
    }
}
