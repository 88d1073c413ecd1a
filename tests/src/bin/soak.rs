//! `soak`: a bounded, self-stopping mixed load against the local stack from several tenants
//! at once, then a quiet period and a sweep, then the invariants checked — and the run fails
//! on any breach, naming the first ones with the ids to look at. Run by `infra/local/soak`.
//!
//! Load, each step chosen from a seeded generator: chat uploads inline and presigned (some
//! of them hostile files from the corpus), knowledge bases created and deleted, documents
//! uploaded, replaced and deleted, re-indexes, and searches.
//!
//! Invariants: the stack recovered (a new tenant's document is indexed after the faults);
//! every upload ended (`ready`/`done`, or `rejected`/`error` with a stored
//! message that says stage, type and advice); every finished document's chunks are exactly
//! one copy of its current text (none duplicated, none of a replaced or deleted document);
//! every stored object is named by a row and every row's object exists, under `aws:kms`
//! with the deployment's key; no vector table outlives its base; no answer was a 5xx other
//! than a clean 503 of Sluice's shape (a 429 is a refusal like any 4xx).
//!
//! Faults, on a seeded schedule while the load runs, each logged with its time: the runner
//! (every function's host here) killed with SIGKILL and restarted; PostgreSQL restarted with
//! a fast and with an immediate shutdown; pgbouncer paused and resumed; for a stretch, every
//! SQS batch delivered twice, or put back so later messages go first
//! (`sluice_local::faults`, in the runner's pollers, not in the functions); the sweep held
//! back, then run. Not yet: S3 answering 503 (issue 31 is open).
//!
//! `--break KIND` injects one known breach before the checks (`duplicated-chunk`,
//! `orphan-object`, `stuck-row`): the run must fail naming it.

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{Value, json};
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
    #[arg(long, value_parser = ["duplicated-chunk", "orphan-object", "stuck-row"])]
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
}

const FAULTS: [Fault; 7] = [
    Fault::RunnerKilled,
    Fault::DatabaseFastRestart,
    Fault::DatabaseImmediateRestart,
    Fault::PoolerPaused,
    Fault::DuplicateDeliveries,
    Fault::LateDeliveries,
    Fault::SweepHeld,
];

/// The runner process the soak owns.
struct Runner {
    program: PathBuf,
    child: Option<tokio::process::Child>,
}

impl Runner {
    /// Starts the runner and waits for its door; a start that fails (its database login
    /// refused for a moment after a restart) is tried again, as Lambda starts a function
    /// whose init failed again at the next event.
    async fn start(&mut self, stack: &Stack) {
        let started = Instant::now();
        loop {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(format!("{}/sluice-local.log", std::env::var("SLUICE_RUN_DIR").expect("SLUICE_RUN_DIR")))
                .expect("the runner's log");
            let faults = format!("{}/faults", std::env::var("SLUICE_RUN_DIR").expect("SLUICE_RUN_DIR"));
            std::fs::create_dir_all(&faults).expect("the faults' folder");
            let mut child = tokio::process::Command::new(&self.program)
                .env("RUST_LOG", "warn")
                .env("SLUICE_LOCAL_FAULTS_DIR", &faults)
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .kill_on_drop(true)
                .spawn()
                .expect("start the runner");
            loop {
                assert!(started.elapsed() < Duration::from_secs(120), "the runner did not come back");
                if stack.http.get(&stack.api).send().await.is_ok() {
                    self.child = Some(child);
                    return;
                }
                if child.try_wait().ok().flatten().is_some() {
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
async fn inject_fault(fault: Fault, stack: &Stack, runner: &mut Runner, pg_bin: &std::path::Path) {
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
                Fault::DuplicateDeliveries => (sluice_local::faults::DUPLICATE_DELIVERIES, 10),
                Fault::LateDeliveries => (sluice_local::faults::LATE_DELIVERIES, 10),
                _ => (sluice_local::faults::SWEEP_HELD, 20),
            };
            let switch = format!("{run_dir}/faults/{name}");
            std::fs::write(&switch, b"").expect("switch the fault on");
            tokio::time::sleep(Duration::from_secs(stretch)).await;
            std::fs::remove_file(&switch).expect("switch the fault off");
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
}

/// One tenant's state: its user and its bases with their documents' names.
struct Tenant {
    user: User,
    bases: Vec<(String, Vec<String>)>,
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

/// One step of a tenant's load.
async fn step(
    stack: &Stack,
    tenant: &mut Tenant,
    rng: &mut StdRng,
    corpus: &[(String, Vec<u8>)],
    tally: &Mutex<Tally>,
) {
    let user = tenant.user.clone();
    let record = |operation, status, answer: &Value| tally.lock().expect("tally").record(operation, status, answer);
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
                let put = stack.put_presigned(&intent, bytes).await;
                record("presigned PUT", put, &Value::Null);
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
            let form = file_form(&name, Some("text/plain"), generated_text(rng).into_bytes())
                .text("replace", replace.to_string());
            let (status, answer) = stack.post_form(&user, &format!("/kb/{kb}/documents"), form).await;
            record(if replace { "replace document" } else { "upload document" }, status, &answer);
            if status == 202 && !replace {
                names.push(name);
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
        _ if !tenant.bases.is_empty() => {
            let ids: Vec<&String> = tenant.bases.iter().map(|(id, _)| id).collect();
            let mode = ["vector", "keyword", "hybrid"][rng.random_range(0..3)];
            let body = json!({"query": generated_text(rng).chars().take(60).collect::<String>(), "knowledge_base_ids": ids, "mode": mode});
            let (status, answer) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
            record("search", status, &answer);
        }
        _ => {}
    }
}

/// Waits until nothing is left to do: no document processing, no outbox row unsent, no
/// base's teardown unfinished; at most `limit`.
async fn settled(stack: &Stack, limit: Duration) {
    let started = Instant::now();
    let db = stack.db().await;
    while started.elapsed() < limit {
        let busy: i64 = db
            .query_one(
                "SELECT (SELECT count(*) FROM rag_documents WHERE status = 'processing') \
                      + (SELECT count(*) FROM outbox WHERE dispatched_at IS NULL) \
                      + (SELECT count(*) FROM collection_teardowns)",
                &[],
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

/// Every breach of the invariants, each with the ids to look at.
async fn breaches(stack: &Stack) -> Vec<String> {
    let db = stack.db().await;
    let mut found = Vec::new();
    let rows = db
        .query("SELECT id, status FROM chat_files WHERE status NOT IN ('ready', 'rejected')", &[])
        .await
        .expect("chat");
    found.extend(rows.iter().map(|r| format!("stuck chat file {}: {}", r.get::<_, Uuid>(0), r.get::<_, String>(1))));
    let rows = db
        .query(
            "SELECT id, status, coalesce(error_message, '') FROM rag_documents \
             WHERE status NOT IN ('done', 'error') \
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
    let mut runner = Runner { program: args.runner.clone(), child: None };
    runner.start(&stack).await;
    let corpus = Arc::new(corpus_files(args.corpus.as_ref()));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let deadline = Instant::now() + Duration::from_secs_f64(args.minutes * 60.0);
    let mut tasks = Vec::new();
    for n in 0..args.tenants {
        let (stack, corpus, tally) = (stack.clone(), corpus.clone(), tally.clone());
        let mut rng = StdRng::seed_from_u64(args.seed.wrapping_mul(1000).wrapping_add(n as u64));
        tasks.push(tokio::spawn(async move {
            let mut tenant =
                Tenant { user: User::with(Some(Uuid::new_v4()), &["collections:edit"], false), bases: Vec::new() };
            while Instant::now() < deadline {
                // A request that gets no answer at all (the door killed under it) panics in
                // the client; it is counted, as API Gateway would answer it 502.
                let stepped = std::panic::AssertUnwindSafe(step(&stack, &mut tenant, &mut rng, &corpus, &tally));
                if futures_util::FutureExt::catch_unwind(stepped).await.is_err() {
                    *tally.lock().expect("tally").unanswered.entry("no answer (the door was down)").or_default() += 1;
                    // A client retries after a moment, not in a tight loop.
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }));
    }
    // The faults, on a seeded schedule: every kind at least five times in a 15-minute run.
    let mut injected: BTreeMap<Fault, u32> = BTreeMap::new();
    if !args.no_faults {
        let mut rng = StdRng::seed_from_u64(args.seed.wrapping_add(7));
        let every = (args.minutes * 60.0 / (FAULTS.len() as f64 * 6.0)).clamp(5.0, 60.0);
        let began = Instant::now();
        while Instant::now() + Duration::from_secs_f64(every) < deadline {
            tokio::time::sleep(Duration::from_secs_f64(every * rng.random_range(0.5..1.5))).await;
            let least = FAULTS.iter().map(|f| injected.get(f).copied().unwrap_or(0)).min().unwrap_or(0);
            let due: Vec<Fault> =
                FAULTS.into_iter().filter(|f| injected.get(f).copied().unwrap_or(0) == least).collect();
            let fault = due[rng.random_range(0..due.len())];
            eprintln!("[soak] {:>7.1} s: {fault:?}", began.elapsed().as_secs_f64());
            inject_fault(fault, &stack, &mut runner, &args.pg_bin).await;
            *injected.entry(fault).or_default() += 1;
        }
    }
    for task in tasks {
        task.await.expect("a tenant's load");
    }
    eprintln!("[soak] load over; quiet for {} s, then the sweep", args.quiet_secs);
    settled(&stack, Duration::from_secs(300)).await;
    tokio::time::sleep(Duration::from_secs(args.quiet_secs)).await;
    let mut sweep = stack.sweep_state().await;
    // Within the run, the sweep acts on what the quiet period left, not after hours.
    sweep.thresholds.unnamed_object_grace = Duration::from_secs(args.quiet_secs);
    sweep.thresholds.removal_grace = Duration::ZERO;
    sluice_sweep::handle(&sweep, time::OffsetDateTime::now_utc()).await.expect("the sweep");
    settled(&stack, Duration::from_secs(120)).await;
    if let Some(kind) = &args.r#break {
        eprintln!("[soak] breaking it on purpose: {kind}");
        inject(&stack, kind).await;
    }

    let tally = std::mem::take(&mut *tally.lock().expect("tally"));
    let mut found = tally.breaches.clone();
    if tally.accepted.values().sum::<u64>() == 0 {
        found.push("nothing was accepted during the load: the stack never served".to_owned());
    }
    found.extend(recovered(&stack).await);
    found.extend(breaches(&stack).await);
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
    println!("breaches: {}", found.len());
    if !found.is_empty() {
        for breach in found.iter().take(20) {
            eprintln!("[soak] breach: {breach}");
        }
        std::process::exit(1);
    }
}
