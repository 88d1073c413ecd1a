//! `soak`: a bounded, self-stopping mixed load against the local stack from several tenants
//! at once, then a quiet period and a sweep, then the invariants checked — and the run fails
//! on any breach, naming the first ones with the ids to look at. Run by `infra/local/soak`.
//!
//! Load, each step chosen from a seeded generator: chat uploads inline and presigned (some
//! of them hostile files from the corpus), knowledge bases created and deleted, documents
//! uploaded, replaced and deleted, re-indexes, searches, and per tenant a sync source over
//! a bucket of its own whose objects are added, changed and removed, with runs asked for.
//!
//! Invariants: the stack recovered (a new tenant's document is indexed after the faults);
//! every upload ended (`ready`/`done`, or `rejected`/`error` with a stored
//! message that says stage, type and advice); every finished document's chunks are exactly
//! one copy of its current text (none duplicated, none of a replaced or deleted document);
//! every stored object is named by a row and every row's object exists, under `aws:kms`
//! with the deployment's key; no vector table outlives its base; after one last run, each
//! sync source's documents are its bucket's objects, one each, `done`, at their current
//! ETag; no answer was a 5xx other than a clean 503 of Sluice's shape (a 429 is a refusal
//! like any 4xx; S3's own `503 SlowDown` to a presigned PUT is its clean refusal). The last
//! sweep runs as it would once every upload link has expired (its clock set past them), so
//! an upload whose S3 event was dead-lettered must be judged through the sweep's re-drive;
//! the messages dead-lettered and the uploads re-driven are reported.
//!
//! Faults, on a seeded schedule while the load runs (each kind once per 2.5 minutes, at
//! least once; the load goes on until the last has been injected), each logged with its time: the runner (every function's host here, the door
//! and the pollers) killed with SIGKILL and restarted; PostgreSQL restarted with a fast and
//! with an immediate shutdown; pgbouncer paused and resumed; for a stretch, every SQS batch
//! delivered twice, or put back so later messages go first (`sluice_local::faults`, in the
//! runner's pollers, not in the functions); the sweep held back, then run; S3 answering
//! every request of the functions `503 SlowDown` (`sluice_e2e::s3_fault_proxy`).
//!
//! `--break KIND` injects one known breach before the checks (`duplicated-chunk`,
//! `orphan-object`, `stuck-row`, `unsynced-object`): the run must fail naming it.

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::s3_fault_proxy::S3FaultProxy;
use sluice_e2e::{Stack, User, file_form};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 15.0)]
    minutes: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 3)]
    tenants: usize,
    /// Files to upload besides the generated ones: the public corpus, hostile files included.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// How long the stack is left alone before the sweep and the checks.
    #[arg(long, default_value_t = 20)]
    quiet_secs: u64,
    #[arg(long, value_parser = ["duplicated-chunk", "orphan-object", "stuck-row", "unsynced-object"])]
    r#break: Option<String>,
    /// The local runner (`sluice-local`): started, killed and restarted by the soak.
    #[arg(long)]
    runner: PathBuf,
    /// PostgreSQL's programs (`stack.sh pg-bin`), for restarting the server.
    #[arg(long)]
    pg_bin: PathBuf,
    /// Run without faults.
    #[arg(long)]
    no_faults: bool,
}

/// The faults injected while the load runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// The runner (every function's host here) killed with SIGKILL mid-batch, then restarted.
    RunnerKilled,
    /// PostgreSQL stopped with a fast shutdown and started again.
    DatabaseFastRestart,
    /// PostgreSQL stopped with an immediate shutdown (a crash) and started again.
    DatabaseImmediateRestart,
    /// pgbouncer paused (`PAUSE`, by its SIGUSR1) for a few seconds, then resumed.
    PoolerPaused,
    /// Every SQS batch handed to its function twice, for a stretch.
    DuplicateDeliveries,
    /// Every SQS batch put back unhandled for a few seconds, for a stretch: later messages
    /// are delivered before earlier ones.
    LateDeliveries,
    /// The sweep's schedule held back for a stretch, then run again.
    SweepHeld,
    /// S3 answering every request of the functions `503 SlowDown` for a stretch (a fault
    /// proxy in front of the emulator).
    S3SlowDown,
}

const FAULTS: [Fault; 8] = [
    Fault::RunnerKilled,
    Fault::DatabaseFastRestart,
    Fault::DatabaseImmediateRestart,
    Fault::PoolerPaused,
    Fault::DuplicateDeliveries,
    Fault::LateDeliveries,
    Fault::SweepHeld,
    Fault::S3SlowDown,
];

/// The runner process the soak owns.
struct Runner {
    program: PathBuf,
    /// Where its functions reach S3: the fault proxy.
    s3_endpoint: String,
    child: Option<tokio::process::Child>,
}

impl Runner {
    /// Starts the runner and waits for its door; a start that fails (its database login
    /// refused for a moment after a restart) is tried again, as Lambda starts a function
    /// whose init failed again at the next event. Its pid goes to `sluice-local.pid`, so the
    /// soak's script stops it even when the soak itself dies.
    async fn start(&mut self, stack: &Stack) {
        let run_dir = std::env::var("SLUICE_RUN_DIR").expect("SLUICE_RUN_DIR");
        // Another process answering on the door (a runner left from an earlier run, with
        // that run's passwords) would be taken for this one.
        assert!(
            stack.http.get(&stack.api).send().await.is_err(),
            "something already answers on {}: stop it first",
            stack.api
        );
        let started = Instant::now();
        loop {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(format!("{run_dir}/sluice-local.log"))
                .expect("the runner's log");
            let faults = format!("{run_dir}/faults");
            std::fs::create_dir_all(&faults).expect("the faults' folder");
            let mut child = tokio::process::Command::new(&self.program)
                .env("RUST_LOG", "warn")
                .env("SLUICE_LOCAL_FAULTS_DIR", &faults)
                .env("AWS_ENDPOINT_URL_S3", &self.s3_endpoint)
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .expect("start the runner");
            if let Some(pid) = child.id() {
                std::fs::write(format!("{run_dir}/sluice-local.pid"), pid.to_string()).expect("the runner's pid");
            }
            loop {
                assert!(started.elapsed() < Duration::from_secs(120), "the runner did not come back");
                let exited = child.try_wait().ok().flatten().is_some();
                if !exited && stack.http.get(&stack.api).send().await.is_ok() {
                    self.child = Some(child);
                    return;
                }
                if exited {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

/// Injects `fault` and undoes it; the stack is whole again when this returns.
async fn inject_fault(
    fault: Fault,
    stack: &Stack,
    runner: &mut Runner,
    pg_bin: &std::path::Path,
    s3_proxy: &S3FaultProxy,
) {
    let run_dir = std::env::var("SLUICE_RUN_DIR").expect("SLUICE_RUN_DIR");
    let read = |name: &str| std::fs::read_to_string(format!("{run_dir}/{name}")).expect(name).trim().to_owned();
    match fault {
        Fault::RunnerKilled => {
            runner.kill().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            runner.start(stack).await;
        }
        Fault::DatabaseFastRestart | Fault::DatabaseImmediateRestart => {
            let mode = if fault == Fault::DatabaseFastRestart { "fast" } else { "immediate" };
            let status = tokio::process::Command::new("runuser")
                .args(["-u", "sluice", "--"])
                .arg(pg_bin.join("pg_ctl"))
                .args(["-D", &read("pgdata"), "-m", mode, "-w", "restart"])
                .stdout(std::process::Stdio::null())
                .status()
                .await
                .expect("pg_ctl");
            assert!(status.success(), "PostgreSQL did not restart");
        }
        Fault::DuplicateDeliveries | Fault::LateDeliveries | Fault::SweepHeld => {
            let (name, stretch) = match fault {
                Fault::DuplicateDeliveries => (sluice_local::faults::DUPLICATE_DELIVERIES, 8),
                Fault::LateDeliveries => (sluice_local::faults::LATE_DELIVERIES, 8),
                _ => (sluice_local::faults::SWEEP_HELD, 15),
            };
            let switch = format!("{run_dir}/faults/{name}");
            std::fs::write(&switch, b"").expect("switch the fault on");
            tokio::time::sleep(Duration::from_secs(stretch)).await;
            std::fs::remove_file(&switch).expect("switch the fault off");
        }
        Fault::S3SlowDown => {
            s3_proxy.slow_down(true);
            tokio::time::sleep(Duration::from_secs(8)).await;
            s3_proxy.slow_down(false);
        }
        Fault::PoolerPaused => {
            let pid = std::fs::read_to_string(format!("{}/pgbouncer.pid", read("pgbouncer"))).expect("pgbouncer's pid");
            let signal = |name: &'static str| {
                let pid = pid.trim().to_owned();
                async move { tokio::process::Command::new("kill").args([name, &pid]).status().await.expect("kill") }
            };
            signal("-USR1").await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            signal("-USR2").await;
        }
    }
}

/// What the load sent and how it was answered, by operation.
#[derive(Debug, Default)]
struct Tally {
    sent: BTreeMap<&'static str, u64>,
    accepted: BTreeMap<&'static str, u64>,
    refused: BTreeMap<&'static str, u64>,
    /// Answers no client should get: a 500, or a 503 not in Sluice's shape.
    breaches: Vec<String>,
    /// Clean 503s in Sluice's shape (a database or a service that was down).
    unavailable: BTreeMap<&'static str, u64>,
    /// Requests that got no answer: the door was down.
    unanswered: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn record(&mut self, operation: &'static str, status: u16, answer: &Value) {
        *self.sent.entry(operation).or_default() += 1;
        match status {
            200..=299 => *self.accepted.entry(operation).or_default() += 1,
            400..=499 => *self.refused.entry(operation).or_default() += 1,
            503 if answer["error"]["code"].is_string() => *self.unavailable.entry(operation).or_default() += 1,
            _ => self.breaches.push(format!("{operation} answered {status}: {answer}")),
        }
    }

    /// An answer of S3 itself (a presigned PUT): its `503 SlowDown` is a clean refusal a
    /// client retries, in S3's shape rather than Sluice's.
    fn record_s3(&mut self, operation: &'static str, status: u16) {
        let answer = if status == 503 { json!({"error": {"code": "SlowDown"}}) } else { Value::Null };
        self.record(operation, status, &answer);
    }
}

/// A tenant's sync source: a bucket of the emulator standing in for the tenant's own, whose
/// objects the load changes, followed by a base of its own.
struct SyncSource {
    kb: String,
    id: String,
    bucket: String,
}

impl SyncSource {
    /// The bucket with a few objects, a key pair in the vault, a base and the source.
    async fn create(stack: &Stack, user: &User, rng: &mut StdRng) -> Self {
        let bucket = format!("soak-source-{}", &Uuid::new_v4().simple().to_string()[..12]);
        stack.s3.create_bucket().bucket(&bucket).send().await.expect("create the source bucket");
        for n in 0..4 {
            put_source_object(stack, &bucket, &format!("shared/note-{n}.txt"), rng).await;
        }
        let secret = json!({"name": format!("reader {}", Uuid::new_v4().simple()), "kind": "aws_credentials",
            "visibility": "org", "value": {"access_key_id": "AKIAEXAMPLEREADER", "secret_access_key": "not-a-real-secret"}});
        let (status, secret) = stack.call_json(user, Method::POST, "/secrets", Some(secret)).await;
        assert_eq!(status, 201, "a key pair for the source: {secret}");
        let base = json!({"name": format!("Synced {}", Uuid::new_v4().simple()), "scope": "org",
            "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2",
            "ingestion_config": {"chunk_size": 300, "chunk_overlap": 30}});
        let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(base)).await;
        assert_eq!(status, 201, "the source's base: {base}");
        let kb = base["id"].as_str().expect("id").to_owned();
        let source = json!({"type": "s3", "name": bucket, "config": {"bucket": bucket, "prefix": "shared/"},
            "credential": {"secret_id": secret["id"]}, "sync_mode": "new_only"});
        let (status, source) =
            stack.call_json(user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(source)).await;
        assert_eq!(status, 201, "the source: {source}");
        Self { kb, id: source["id"].as_str().expect("id").to_owned(), bucket }
    }

    /// The bucket's objects under the source's prefix, with their ETags.
    async fn objects(&self, stack: &Stack) -> BTreeMap<String, String> {
        let listed = stack.s3.list_objects_v2().bucket(&self.bucket).prefix("shared/").send().await.expect("list");
        listed
            .contents()
            .iter()
            .filter_map(|o| Some((o.key()?.to_owned(), o.e_tag()?.trim_matches('"').to_owned())))
            .collect()
    }

    /// Starts a run; its id, or the answer that refused it.
    async fn start_run(&self, stack: &Stack, user: &User, confirm_removals: bool) -> (u16, Value) {
        let path = format!("/kb/{}/sync-sources/{}/sync", self.kb, self.id);
        stack.call_json(user, Method::POST, &path, Some(json!({"confirm_removals": confirm_removals}))).await
    }

    /// After the load: one more run, removals confirmed, waited for; what it left differing
    /// from the bucket. `drift` puts one object in the bucket after the run (a known breach).
    async fn breaches(&self, stack: &Stack, user: &User, drift: bool) -> Vec<String> {
        let began = Instant::now();
        let run_id = loop {
            let (status, started) = self.start_run(stack, user, true).await;
            if let Some(id) = started["run_id"].as_str().filter(|_| status == 202) {
                break id.to_owned();
            }
            if began.elapsed() > Duration::from_secs(120) {
                // A run held open only by a document a killed attempt still holds (its lease,
                // two minutes after the attempt's last renewal, has not ended) is waiting as
                // designed, not stuck.
                let held: i64 = stack
                    .db()
                    .await
                    .query_one(
                        "SELECT count(*) FROM rag_documents WHERE sync_source_id = $1::text::uuid \
                         AND status = 'processing' AND ingest_claimed_until > now()",
                        &[&self.id],
                    )
                    .await
                    .expect("held documents")
                    .get(0);
                if status == 409 && held > 0 {
                    eprintln!("[soak] source {}: its run waits on {held} document(s) a killed attempt holds", self.id);
                    return Vec::new();
                }
                return vec![format!("source {}: a last run could not start: {status} {started}", self.id)];
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        let logs = format!("/kb/{}/sync-sources/{}/logs", self.kb, self.id);
        let log = loop {
            let (_, listed) = stack.call_json(user, Method::GET, &logs, None).await;
            let log = listed["logs"].as_array().into_iter().flatten().find(|l| l["id"] == run_id.as_str()).cloned();
            if let Some(log) = log.filter(|l| l["status"] != "running") {
                break log;
            }
            if began.elapsed() > Duration::from_secs(240) {
                return vec![format!("source {}: its last run {run_id} did not end", self.id)];
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        if drift {
            eprintln!("[soak] breaking it on purpose: an object the source never ran over");
            stack
                .s3
                .put_object()
                .bucket(&self.bucket)
                .key("shared/unsynced.txt")
                .body(b"late".to_vec().into())
                .send()
                .await
                .expect("put");
        }
        let mut found = Vec::new();
        if log["status"] != "done" {
            found
                .push(format!("source {}: its last run {run_id} ended {}: {}", self.id, log["status"], log["message"]));
        }
        let rows = stack
            .db()
            .await
            .query(
                "SELECT id, coalesce(source_path, ''), status, coalesce(source_etag, '') FROM rag_documents                  WHERE kb_id = $1::text::uuid",
                &[&self.kb],
            )
            .await
            .expect("the source's documents");
        let mut objects = self.objects(stack).await;
        for row in &rows {
            let (id, address, status, etag): (Uuid, String, String, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let key = address.strip_prefix(&format!("s3://{}/", self.bucket)).unwrap_or_default();
            match objects.remove(key) {
                Some(current) if status == "done" && etag == current => {}
                Some(current) => found.push(format!(
                    "source {}: document {id} for {address} is {status} with ETag {etag:?}, the object's is {current:?}",
                    self.id
                )),
                None => found.push(format!(
                    "source {}: document {id} ({status}) at {address:?} names no object of the bucket (or a second one)",
                    self.id
                )),
            }
        }
        found.extend(objects.keys().map(|key| format!("source {}: object {key} has no document", self.id)));
        found
    }
}

async fn put_source_object(stack: &Stack, bucket: &str, key: &str, rng: &mut StdRng) {
    let body = generated_text(rng).into_bytes();
    stack.s3.put_object().bucket(bucket).key(key).body(body.into()).send().await.expect("put a source object");
}

/// One tenant's state: its user, its bases with their documents' names, its sync source.
struct Tenant {
    user: User,
    bases: Vec<(String, Vec<String>)>,
    source: SyncSource,
}

fn generated_text(rng: &mut StdRng) -> String {
    let words = ["harbour", "survey", "pump", "valve", "heron", "ledger", "turbine", "quarterly", "permit", "channel"];
    (0..rng.random_range(20..400)).map(|_| words[rng.random_range(0..words.len())]).collect::<Vec<_>>().join(" ")
}

fn corpus_files(dir: Option<&PathBuf>) -> Vec<(String, Vec<u8>)> {
    let Some(dir) = dir else { return Vec::new() };
    let mut files = Vec::new();
    for folder in ["zip2", "tar-rs", "calamine", "image-tiff", "pdf-layouts"] {
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let small = entry.metadata().is_ok_and(|m| m.is_file() && m.len() < 4 << 20);
            if small
                && !name.ends_with(".txt")
                && !name.ends_with(".md")
                && let Ok(bytes) = std::fs::read(&path)
            {
                files.push((name, bytes));
            }
        }
    }
    files.sort();
    files
}

/// PUTs an intent's bytes to S3; S3's `503 SlowDown` asks the client to try again later,
/// and it does, as S3's clients do.
async fn put_presigned(stack: &Stack, intent: &Value, bytes: Vec<u8>, tally: &Mutex<Tally>) {
    for _ in 0..40 {
        let put = stack.put_presigned(intent, bytes.clone()).await;
        tally.lock().expect("tally").record_s3("presigned PUT", put);
        if put != 503 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One step of a tenant's load; whether any answer was a 503 (the client then waits a
/// moment before its next request, as a client backs off).
async fn step(
    stack: &Stack,
    tenant: &mut Tenant,
    rng: &mut StdRng,
    corpus: &[(String, Vec<u8>)],
    tally: &Mutex<Tally>,
) -> bool {
    let user = tenant.user.clone();
    let shed = std::sync::atomic::AtomicBool::new(false);
    let record = |operation, status, answer: &Value| {
        shed.fetch_or(status == 503, std::sync::atomic::Ordering::Relaxed);
        tally.lock().expect("tally").record(operation, status, answer);
    };
    match rng.random_range(0..100) {
        0..20 => {
            let (name, bytes) = if !corpus.is_empty() && rng.random_bool(0.5) {
                corpus[rng.random_range(0..corpus.len())].clone()
            } else {
                ("notes.txt".to_owned(), generated_text(rng).into_bytes())
            };
            let (status, answer) = stack.upload(&user, &name, None, bytes).await;
            record("chat upload", status, &answer);
        }
        20..30 => {
            let bytes = generated_text(rng).into_bytes();
            let body = json!({"filename": "draft.txt", "size": bytes.len(), "mime_type": "text/plain"});
            let (status, intent) = stack.intent(&user, body).await;
            record("chat upload intent", status, &intent);
            if status == 201 {
                put_presigned(stack, &intent, bytes, tally).await;
            }
        }
        30..36 if tenant.bases.len() < 3 => {
            let body = json!({"name": format!("Soak {}", Uuid::new_v4().simple()), "scope": "org",
                "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2",
                "ingestion_config": {"chunk_size": 300, "chunk_overlap": 30}});
            let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
            record("create base", status, &base);
            if let Some(id) = base["id"].as_str() {
                tenant.bases.push((id.to_owned(), Vec::new()));
            }
        }
        36..40 if tenant.bases.len() > 1 => {
            let (id, _) = tenant.bases.remove(rng.random_range(0..tenant.bases.len()));
            let (status, answer) = stack.call_json(&user, Method::DELETE, &format!("/kb/{id}"), None).await;
            record("delete base", status, &answer);
        }
        40..70 if !tenant.bases.is_empty() => {
            let index = rng.random_range(0..tenant.bases.len());
            let (kb, names) = &mut tenant.bases[index];
            // Half the time the same name again, replacing the document.
            let replace = !names.is_empty() && rng.random_bool(0.5);
            let name = if replace {
                names[rng.random_range(0..names.len())].clone()
            } else {
                format!("doc-{}.txt", rng.random::<u32>())
            };
            let bytes = generated_text(rng).into_bytes();
            match rng.random_range(0..10) {
                0..2 if !replace => {
                    let body = json!({"filename": name, "size": bytes.len(), "mime_type": "text/plain"});
                    let (status, intent) =
                        stack.call_json(&user, Method::POST, &format!("/kb/{kb}/documents/uploads"), Some(body)).await;
                    record("document upload intent", status, &intent);
                    if status == 201 {
                        put_presigned(stack, &intent, bytes, tally).await;
                        names.push(name);
                    }
                }
                2..4 if !replace && !corpus.is_empty() => {
                    // A file of the corpus, hostile or not, as a document.
                    let (name, bytes) = corpus[rng.random_range(0..corpus.len())].clone();
                    let (status, answer) =
                        stack.post_form(&user, &format!("/kb/{kb}/documents"), file_form(&name, None, bytes)).await;
                    record("upload document (corpus)", status, &answer);
                }
                _ => {
                    let form = file_form(&name, Some("text/plain"), bytes).text("replace", replace.to_string());
                    let (status, answer) = stack.post_form(&user, &format!("/kb/{kb}/documents"), form).await;
                    record(if replace { "replace document" } else { "upload document" }, status, &answer);
                    if status == 202 && !replace {
                        names.push(name);
                    }
                }
            }
        }
        70..76 if !tenant.bases.is_empty() => {
            let (kb, _) = &tenant.bases[rng.random_range(0..tenant.bases.len())];
            let (status, listed) =
                stack.call_json(&user, Method::GET, &format!("/kb/{kb}/documents?limit=50"), None).await;
            record("list documents", status, &listed);
            let ids: Vec<String> = listed["documents"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["id"].as_str().map(str::to_owned))
                .collect();
            if !ids.is_empty() {
                let id = &ids[rng.random_range(0..ids.len())];
                // `204` with no body, or an error in Sluice's shape.
                let (status, body) = stack.call(&user, Method::DELETE, &format!("/rag/documents/{id}"), None).await;
                record("delete document", status, &serde_json::from_str(&body).unwrap_or(Value::Null));
            }
        }
        76..80 if !tenant.bases.is_empty() => {
            let (kb, _) = &tenant.bases[rng.random_range(0..tenant.bases.len())];
            let (status, answer) = stack.call_json(&user, Method::POST, &format!("/kb/{kb}/reindex"), None).await;
            // A re-index already running is a clean 409.
            record("re-index", status, &answer);
        }
        80..88 => {
            // The tenant's own bucket changes (straight to the emulator, as the tenant's
            // storage is not behind Sluice's faults), and now and then a run is asked for.
            let source = &tenant.source;
            let keys: Vec<String> = source.objects(stack).await.into_keys().collect();
            match rng.random_range(0..4) {
                0 => {
                    put_source_object(stack, &source.bucket, &format!("shared/note-{}.txt", rng.random::<u32>()), rng)
                        .await
                }
                1 if !keys.is_empty() => {
                    put_source_object(stack, &source.bucket, &keys[rng.random_range(0..keys.len())], rng).await
                }
                2 if keys.len() > 1 => {
                    let key = &keys[rng.random_range(0..keys.len())];
                    stack
                        .s3
                        .delete_object()
                        .bucket(&source.bucket)
                        .key(key)
                        .send()
                        .await
                        .expect("delete a source object");
                }
                _ => {
                    // A run already going is a clean 409.
                    let (status, answer) = source.start_run(stack, &user, rng.random_bool(0.5)).await;
                    record("sync run", status, &answer);
                }
            }
        }
        _ if !tenant.bases.is_empty() => {
            let ids: Vec<&String> = tenant.bases.iter().map(|(id, _)| id).collect();
            let mode = ["vector", "keyword", "hybrid"][rng.random_range(0..3)];
            let body = json!({"query": generated_text(rng).chars().take(60).collect::<String>(), "knowledge_base_ids": ids, "mode": mode});
            let (status, answer) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
            record("search", status, &answer);
        }
        _ => {}
    }
    shed.into_inner()
}

/// Waits until nothing is left to do: no document processing, no outbox row unsent, no
/// base's teardown unfinished, and with `uploads` no chat upload pending; at most `limit`.
async fn settled(stack: &Stack, limit: Duration, uploads: bool) {
    let started = Instant::now();
    let db = stack.db().await;
    while started.elapsed() < limit {
        let busy: i64 = db
            .query_one(
                "SELECT (SELECT count(*) FROM rag_documents WHERE status = 'processing') \
                      + (SELECT count(*) FROM outbox WHERE dispatched_at IS NULL) \
                      + (SELECT count(*) FROM collection_teardowns) \
                      + (SELECT count(*) FROM chat_files WHERE status = 'pending' AND $1)",
                &[&uploads],
            )
            .await
            .expect("busy")
            .get(0);
        if busy == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// After the faults, a new tenant's document is indexed and found: the stack recovered.
async fn recovered(stack: &Stack) -> Option<String> {
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let body = json!({"name": format!("After {}", Uuid::new_v4().simple()), "scope": "org",
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    let Some(kb) = base["id"].as_str().filter(|_| status == 201) else {
        return Some(format!("the stack did not recover: creating a base answered {status}: {base}"));
    };
    let form = file_form("after.txt", Some("text/plain"), b"The lighthouse keeper logs the fog signal.".to_vec());
    let (status, accepted) = stack.post_form(&user, &format!("/kb/{kb}/documents"), form).await;
    if status != 202 {
        return Some(format!("the stack did not recover: a document answered {status}: {accepted}"));
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(90) {
        let (_, ingestion) = stack.call_json(&user, Method::GET, &format!("/kb/{kb}/ingestion"), None).await;
        if ingestion["indexed_count"] == 1 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Some(format!("the stack did not recover: base {kb}'s document was not indexed in 90 s"))
}

/// The messages in the dead-letter queues, per queue: what five receives could not handle.
async fn dead_letters(stack: &Stack) -> String {
    let mut counts = Vec::new();
    for spec in sluice_local::resources::QUEUES {
        let name = format!("{}-dlq", spec.name);
        let url = stack.sqs.get_queue_url().queue_name(&name).send().await.expect("a dead-letter queue").queue_url;
        let attributes = stack
            .sqs
            .get_queue_attributes()
            .queue_url(url.expect("its url"))
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .expect("its attributes");
        let count = attributes
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages))
            .cloned()
            .unwrap_or_default();
        counts.push(format!("{name} {count}"));
    }
    counts.join(", ")
}

/// Every breach of the invariants, each with the ids to look at.
async fn breaches(stack: &Stack) -> Vec<String> {
    let db = stack.db().await;
    let mut found = Vec::new();
    let rows = db
        .query("SELECT id, status FROM chat_files WHERE status NOT IN ('ready', 'rejected')", &[])
        .await
        .expect("chat");
    found.extend(rows.iter().map(|r| format!("stuck chat file {}: {}", r.get::<_, Uuid>(0), r.get::<_, String>(1))));
    // A document a killed ingest attempt still holds waits for the attempt's lease (two
    // minutes after its last renewal) to end, as on AWS; it is named, not counted as stuck.
    let held = db
        .query(
            "SELECT id, ingest_claimed_until::text FROM rag_documents \
             WHERE status = 'processing' AND ingest_claimed_until > now()",
            &[],
        )
        .await
        .expect("held documents");
    for row in &held {
        eprintln!(
            "[soak] document {} waits for a killed attempt's lease (until {})",
            row.get::<_, Uuid>(0),
            row.get::<_, String>(1)
        );
    }
    let rows = db
        .query(
            "SELECT id, status, coalesce(error_message, '') FROM rag_documents \
             WHERE (status NOT IN ('done', 'error') AND NOT coalesce(ingest_claimed_until > now(), false)) \
                OR (status = 'error' AND coalesce(error_message, '') !~ '^[a-z]+: [A-Za-z_]+: .+')",
            &[],
        )
        .await
        .expect("documents");
    found.extend(rows.iter().map(|r| {
        format!(
            "stuck or unexplained document {}: {} {:?}",
            r.get::<_, Uuid>(0),
            r.get::<_, String>(1),
            r.get::<_, String>(2)
        )
    }));

    // Chunks: one copy of each finished document's current text, nothing else.
    let bases = db.query("SELECT id, collection_name FROM knowledge_bases", &[]).await.expect("bases");
    let tables: BTreeSet<String> = db
        .query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'rag\\_%'", &[])
        .await
        .expect("tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut owned = BTreeSet::new();
    for base in &bases {
        let (kb, collection): (Uuid, String) = (base.get(0), base.get(1));
        let table = format!("rag_{collection}");
        owned.insert(table.clone());
        if !tables.contains(&table) {
            continue;
        }
        let duplicated = db
            .query(&format!("SELECT document_id, chunk_index FROM \"{table}\" GROUP BY 1, 2 HAVING count(*) > 1"), &[])
            .await
            .expect("duplicates");
        found.extend(
            duplicated
                .iter()
                .map(|r| format!("duplicated chunk {} #{} in {table}", r.get::<_, Uuid>(0), r.get::<_, i32>(1))),
        );
        let mismatched = db
            .query(
                &format!(
                    "WITH chunks AS (SELECT document_id, count(*) AS n FROM \"{table}\" GROUP BY 1) \
                     SELECT coalesce(d.id, c.document_id), coalesce(d.status, 'gone'), coalesce(d.chunk_count, 0), coalesce(c.n, 0) \
                     FROM (SELECT * FROM rag_documents WHERE kb_id = $1 AND status = 'done') d \
                     FULL JOIN chunks c ON c.document_id = d.id \
                     WHERE d.id IS NULL OR c.document_id IS NULL OR c.n <> d.chunk_count"
                ),
                &[&kb],
            )
            .await
            .expect("chunk counts");
        found.extend(mismatched.iter().map(|r| {
            format!(
                "document {} ({}) has {} chunk(s) in {table}, not {}",
                r.get::<_, Uuid>(0),
                r.get::<_, String>(1),
                r.get::<_, i64>(3),
                r.get::<_, i32>(2)
            )
        }));
    }
    let system = ["rag_documents", "rag_chunk_staging", "rag_document_claims", "rag_image_descriptions"];
    // A base's table and its keyword tables beside it (`rag_{collection}$terms`).
    let owned_by_a_base = |t: &str| owned.iter().any(|o| t == o || t.starts_with(&format!("{o}$")));
    for table in tables.iter().filter(|t| !owned_by_a_base(t) && !system.contains(&t.as_str())) {
        let teardown_pending: bool = db
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM collection_teardowns WHERE 'rag_' || collection_name = $1)",
                &[table],
            )
            .await
            .expect("teardowns")
            .get(0);
        found.push(format!("table {table} outlives its base (teardown recorded: {teardown_pending})"));
    }

    // Objects: each named by a row, each row's object there, all under the deployment's key.
    let named: BTreeSet<String> = db
        .query(
            "SELECT storage_path FROM chat_files WHERE storage_path IS NOT NULL AND status = 'ready' \
             UNION SELECT storage_path FROM rag_documents WHERE storage_path IS NOT NULL \
             UNION SELECT parsed_path FROM rag_documents WHERE parsed_path IS NOT NULL",
            &[],
        )
        .await
        .expect("named")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let stored = stack.keys_under("").await;
    found.extend(stored.difference(&named).map(|key| format!("object {key} is named by no row")));
    found.extend(named.difference(&stored).map(|key| format!("row names {key}, which is not stored")));
    let key = stack.kms_key_arn().await;
    for object in stored.intersection(&named) {
        let head = stack.s3.head_object().bucket(&stack.bucket).key(object).send().await;
        let sealed = head.as_ref().is_ok_and(|h| {
            h.server_side_encryption().map(|s| s.as_str()) == Some("aws:kms") && h.ssekms_key_id() == Some(key.as_str())
        });
        if !sealed {
            found.push(format!("object {object} is not aws:kms with the deployment's key"));
        }
    }
    found
}

/// Injects one known breach of `kind`, so the checks are shown to catch it.
async fn inject(stack: &Stack, kind: &str) {
    let db = stack.db().await;
    match kind {
        "duplicated-chunk" => {
            let collection: String = db
                .query_one(
                    "SELECT b.collection_name FROM knowledge_bases b JOIN rag_documents d ON d.kb_id = b.id \
                     WHERE d.status = 'done' AND d.chunk_count > 0 LIMIT 1",
                    &[],
                )
                .await
                .expect("a base with chunks to break")
                .get(0);
            let table = format!("rag_{collection}");
            // Every column a row is written with but its id (generated columns follow).
            let columns: Vec<String> = db
                .query(
                    "SELECT quote_ident(column_name) FROM information_schema.columns \
                     WHERE table_name = $1 AND is_generated = 'NEVER' AND column_name <> 'id' ORDER BY ordinal_position",
                    &[&table],
                )
                .await
                .expect("columns")
                .iter()
                .map(|r| r.get(0))
                .collect();
            let columns = columns.join(", ");
            let copy = format!(
                "INSERT INTO \"{table}\" (id, {columns}) SELECT gen_random_uuid(), {columns} FROM \"{table}\" LIMIT 1"
            );
            db.execute(&copy, &[]).await.expect("duplicate a chunk");
        }
        "orphan-object" => {
            let key = format!("documents/{}/orphan.txt", Uuid::new_v4());
            stack.put_plain(&key, b"no row names this").await;
        }
        "stuck-row" => {
            db.execute(
                "UPDATE rag_documents SET status = 'processing' WHERE id = (SELECT id FROM rag_documents WHERE status = 'done' LIMIT 1)",
                &[],
            )
            .await
            .expect("stick a row");
        }
        other => panic!("no breach kind {other}"),
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // A step's panic is a request with no answer, counted; its message would only be noise.
    std::panic::set_hook(Box::new(|info| eprintln!("[soak] {info}")));
    let stack = Stack::from_env().await;
    let s3_proxy = S3FaultProxy::start(&std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL")).await;
    let mut runner = Runner { program: args.runner.clone(), s3_endpoint: s3_proxy.url.clone(), child: None };
    runner.start(&stack).await;
    let corpus = Arc::new(corpus_files(args.corpus.as_ref()));
    let tally = Arc::new(Mutex::new(Tally::default()));
    // Each tenant's sync source is made before the load and the faults begin.
    let mut tenants = Vec::new();
    for n in 0..args.tenants {
        let mut rng = StdRng::seed_from_u64(args.seed.wrapping_mul(1000).wrapping_add(n as u64));
        let user = User::with(Some(Uuid::new_v4()), &["collections:edit", "secrets:edit"], false);
        let source = SyncSource::create(&stack, &user, &mut rng).await;
        tenants.push((Tenant { user, bases: Vec::new(), source }, rng));
    }
    let deadline = Instant::now() + Duration::from_secs_f64(args.minutes * 60.0);
    // The load runs until the last fault has been injected and undone, even past the deadline.
    let load_over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (mut tenant, mut rng) in tenants {
        let (stack, corpus, tally, load_over) = (stack.clone(), corpus.clone(), tally.clone(), load_over.clone());
        tasks.push(tokio::spawn(async move {
            while !load_over.load(std::sync::atomic::Ordering::Relaxed) {
                // A request that gets no answer at all (the door killed under it) panics in
                // the client; it is counted, as API Gateway would answer it 502.
                let stepped = std::panic::AssertUnwindSafe(step(&stack, &mut tenant, &mut rng, &corpus, &tally));
                match futures_util::FutureExt::catch_unwind(stepped).await {
                    Ok(false) => {}
                    Ok(true) => tokio::time::sleep(Duration::from_millis(250)).await,
                    Err(_) => {
                        *tally.lock().expect("tally").unanswered.entry("no answer (the door was down)").or_default() +=
                            1;
                        // A client retries after a moment, not in a tight loop.
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                }
            }
            tenant
        }));
    }
    // The faults, on a seeded schedule spread over the run: each kind once per 2.5 minutes
    // (six times in 15 minutes, once in 2), the least injected kind next.
    let per_kind = ((args.minutes / 2.5).floor() as u32).max(1);
    let planned = if args.no_faults { 0 } else { per_kind * FAULTS.len() as u32 };
    let mut injected: BTreeMap<Fault, u32> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(7));
    let began = Instant::now();
    let mut spent = Duration::ZERO;
    let mut found = Vec::new();
    for done in 0..planned {
        // The gap left per fault once the faults' own time (as measured so far) is set aside.
        let typical = if done == 0 { Duration::from_secs(6) } else { spent / done };
        let left = deadline.saturating_duration_since(Instant::now());
        let gap = (left.as_secs_f64() / f64::from(planned - done) - typical.as_secs_f64()).max(0.5);
        tokio::time::sleep(Duration::from_secs_f64(gap * rng.random_range(0.75..1.25))).await;
        let least = FAULTS.iter().map(|f| injected.get(f).copied().unwrap_or(0)).min().unwrap_or(0);
        let due: Vec<Fault> = FAULTS.into_iter().filter(|f| injected.get(f).copied().unwrap_or(0) == least).collect();
        let fault = due[rng.random_range(0..due.len())];
        let at = Instant::now();
        eprintln!("[soak] {:>7.1} s: {fault:?}", began.elapsed().as_secs_f64());
        inject_fault(fault, &stack, &mut runner, &args.pg_bin, &s3_proxy).await;
        spent += at.elapsed();
        *injected.entry(fault).or_default() += 1;
    }
    tokio::time::sleep_until(deadline.into()).await;
    load_over.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut tenants = Vec::new();
    for task in tasks {
        tenants.push(task.await.expect("a tenant's load"));
    }
    eprintln!("[soak] load over; quiet for {} s, then the sweep", args.quiet_secs);
    settled(&stack, Duration::from_secs(300), false).await;
    tokio::time::sleep(Duration::from_secs(args.quiet_secs)).await;
    let mut sweep = stack.sweep_state().await;
    // Within the run, the sweep acts on what the quiet period left, not after hours.
    sweep.thresholds.unnamed_object_grace = Duration::from_secs(args.quiet_secs);
    sweep.thresholds.sync_stall_age = Duration::from_secs(args.quiet_secs);
    sweep.thresholds.removal_grace = Duration::ZERO;
    // Its clock is set past every upload link, so each intent left pending is either
    // rejected (no file came) or, its bytes there unjudged, handed to the parse again.
    sweep.thresholds.intent_grace = Duration::ZERO;
    let links_expired =
        time::OffsetDateTime::now_utc() + Duration::from_secs(sweep.config.upload_intent_ttl_secs + args.quiet_secs);
    let swept = sluice_sweep::handle(&sweep, links_expired).await.expect("the sweep");
    settled(&stack, Duration::from_secs(120), true).await;
    for (n, tenant) in tenants.iter().enumerate() {
        let drift = n == 0 && args.r#break.as_deref() == Some("unsynced-object");
        found.extend(tenant.source.breaches(&stack, &tenant.user, drift).await);
    }
    settled(&stack, Duration::from_secs(120), true).await;
    if let Some(kind) = args.r#break.as_ref().filter(|k| *k != "unsynced-object") {
        eprintln!("[soak] breaking it on purpose: {kind}");
        inject(&stack, kind).await;
    }

    let tally = std::mem::take(&mut *tally.lock().expect("tally"));
    found.extend(tally.breaches.iter().cloned());
    if tally.accepted.values().sum::<u64>() == 0 {
        found.push("nothing was accepted during the load: the stack never served".to_owned());
    }
    found.extend(recovered(&stack).await);
    found.extend(breaches(&stack).await);
    runner.kill().await;
    println!("| operation | sent | accepted | refused (4xx) | unavailable (clean 503) |");
    println!("|---|---|---|---|---|");
    for (operation, sent) in &tally.sent {
        let count = |m: &BTreeMap<&'static str, u64>| m.get(operation).copied().unwrap_or_default();
        let (accepted, refused, unavailable) =
            (count(&tally.accepted), count(&tally.refused), count(&tally.unavailable));
        println!("| {operation} | {sent} | {accepted} | {refused} | {unavailable} |");
    }
    for (what, count) in &tally.unanswered {
        println!("| {what} | {count} | | | |");
    }
    println!();
    println!("| fault | injected |");
    println!("|---|---|");
    for fault in FAULTS {
        println!("| {fault:?} | {} |", injected.get(&fault).copied().unwrap_or(0));
    }
    println!();
    println!("S3 requests of the functions answered 503 SlowDown: {}", s3_proxy.shed());
    println!("messages dead-lettered: {}", dead_letters(&stack).await);
    println!(
        "uploads the last sweep handed to the parse again (bytes there, unjudged): {}; intents it expired: {}",
        swept.redriven_uploads, swept.expired_intents
    );
    println!("breaches: {}", found.len());
    if !found.is_empty() {
        for breach in found.iter().take(20) {
            eprintln!("[soak] breach: {breach}");
        }
        std::process::exit(1);
    }
}
