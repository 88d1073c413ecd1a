//! `sluice`: the operator command.
//!
//! - `sluice token --user U [--org O] [--perm P]... [--app-admin]` prints a token the local
//!   front door accepts.
//! - `sluice doctor` prints the storage backend, the bucket, whether and with which key
//!   SSE-KMS is enforced, database reachability and the pgvector version.
//! - `sluice parse FILE [--mime TYPE] [--text] [--markdown]` runs the upload path's
//!   validation, classification and extraction on a local file and prints one JSON object
//!   (or the text; as a knowledge base's `output_format: markdown` writes it with
//!   `--markdown`). Like the upload path it parses in a worker process (this binary again) under
//!   the same hard time and memory limits. It never needs the stack.
//! - `sluice rag-drop NAME [--knowledge-base ID]` tears a collection name down through the
//!   same teardown `DELETE /kb/{id}` queues: the one base holding it (or the one named);
//!   refused, listing the ids, when several hold it and none is named; with no base holding
//!   it (what `rag-ingest` leaves), every document row under the name goes and its table is
//!   dropped. It commits the teardown, sends its job and prints one JSON object.
//! - `sluice rag-collections` lists every collection name in the deployment with the bases
//!   that hold it (id, name, scope, organization, provider, model, width) and their counts
//!   (documents by state, vectors), as one JSON object; the reference product's operator
//!   command of the same name.
//! - `sluice rag-ingest PATH --collection NAME [--knowledge-base ID] [--mode MODE]` ingests
//!   a local directory the way a sync source does (see `ingest.rs`), with a progress bar,
//!   and prints what became of the files as JSON.
//! - `sluice sync SOURCE_ID [--confirm-removals]` runs a sync source in the foreground: it
//!   lists the source's bucket here, page by page, through the same decisions as a run the
//!   API starts, hands the files to fetch to the deployment's parse queue, and shows a
//!   progress bar (files listed, skipped, ingested, failed) until the last one finished; it
//!   prints the run's log as JSON. Another run of the source still going refuses it.
//! - `sluice search --knowledge-base ID "query" [--mode hybrid|vector|keyword] [--explain]
//!   [--top-k N]` searches one base as `POST /rag/search` does and prints its answer.
//! - `sluice migrate` is the deploy's migrate step: with the administrator's login
//!   (`SLUICE_DB_ADMIN_SECRET_ID`) it applies the migrations and creates or updates the
//!   application login (`SLUICE_DB_SECRET_ID`); it prints what it applied as JSON.

mod ingest;
mod reindex;
mod search;
mod sync;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(name = "sluice", about = "Operate a Sluice deployment or the local stack")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a bearer token from the local stack's issuer (RS256, SLUICE_LOCAL_JWT_KEY_FILE).
    Token {
        /// The subject the token names: a UUID, or any other IdP subject (`auth0|…`).
        #[arg(long)]
        user: String,
        /// The organization the caller acts in.
        #[arg(long)]
        org: Option<Uuid>,
        /// A permission, e.g. collections:view (repeatable).
        #[arg(long = "perm")]
        perms: Vec<String>,
        /// The deployment's superadmin.
        #[arg(long)]
        app_admin: bool,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 12 * 3600)]
        ttl: i64,
    },
    /// Check the storage, encryption and database configuration of this environment.
    Doctor,
    /// Validate, classify and extract a local file exactly as an upload would.
    Parse {
        /// The file to read.
        file: std::path::PathBuf,
        /// The declared MIME type (as a browser would send it); none by default.
        #[arg(long)]
        mime: Option<String>,
        /// Print the extracted text instead of the JSON verdict.
        #[arg(long)]
        text: bool,
        /// Write the formats that have structure as markdown (a knowledge base's default).
        #[arg(long)]
        markdown: bool,
    },
    /// Apply the migrations and create the application login (the deploy's migrate step).
    Migrate,
    /// Re-chunk every indexed document of a knowledge base under its current configuration
    /// (from the parsed text; only chunk texts the collection has not embedded are embedded),
    /// with a progress bar until the last one is indexed again.
    Reindex {
        /// The knowledge base.
        #[arg(long = "knowledge-base")]
        knowledge_base: Uuid,
    },
    /// Ingest a local directory into a collection, addressed by absolute path, with a progress bar.
    RagIngest {
        /// The directory (or one file).
        path: std::path::PathBuf,
        /// The collection the documents go to.
        #[arg(long)]
        collection: String,
        /// The base to file them under when several hold the collection.
        #[arg(long = "knowledge-base")]
        knowledge_base: Option<Uuid>,
        /// new_only (default), update_only or full.
        #[arg(long, default_value = "new_only", value_parser = parse_mode)]
        mode: sluice_domain::sync::SyncMode,
    },
    /// Run a sync source in the foreground, with a progress bar.
    Sync {
        /// The source's id.
        source_id: Uuid,
        /// Make the removals past the source's max_removal_percent.
        #[arg(long)]
        confirm_removals: bool,
    },
    /// Search one knowledge base as POST /rag/search does, and print the hits as JSON.
    Search {
        /// The knowledge base.
        #[arg(long = "knowledge-base")]
        knowledge_base: Uuid,
        /// What to look for.
        query: String,
        /// hybrid (default), vector or keyword.
        #[arg(long, default_value = "hybrid", value_parser = parse_search_mode)]
        mode: sluice_search::Mode,
        /// Each hit's place in each leg and its fused score.
        #[arg(long)]
        explain: bool,
        /// How many hits (1 to 100).
        #[arg(long = "top-k", default_value_t = 5, value_parser = clap::value_parser!(i64).range(1..=100))]
        top_k: i64,
    },
    /// List every collection name with its bases, models and counts.
    RagCollections,
    /// Tear down a collection name: its base's teardown, or everything under a name no base holds.
    RagDrop {
        /// The collection name.
        name: String,
        /// The base to tear down when several hold the name.
        #[arg(long = "knowledge-base")]
        knowledge_base: Option<Uuid>,
    },
}

fn parse_mode(value: &str) -> Result<sluice_domain::sync::SyncMode, String> {
    sluice_domain::sync::SyncMode::parse(value).ok_or_else(|| "new_only, update_only or full".to_owned())
}

fn parse_search_mode(value: &str) -> Result<sluice_search::Mode, String> {
    sluice_search::Mode::from_name(value).ok_or_else(|| "hybrid, vector or keyword".to_owned())
}

fn main() -> ExitCode {
    sluice_isolate::serve_if_worker();
    run()
}

#[tokio::main]
async fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Token { user, org, perms, app_admin, ttl } => {
            let token = sluice_local::jwt::LocalIssuer::from_env().and_then(|issuer| {
                let claims = issuer.claims(&user, org, &perms, app_admin, ttl);
                issuer.issue(&claims)
            });
            match token {
                Ok(token) => {
                    println!("{token}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("sluice token: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Doctor => doctor().await,
        Command::Parse { file, mime, text, markdown } => parse(&file, mime.as_deref(), text, markdown),
        Command::RagDrop { name, knowledge_base } => rag_drop(&name, knowledge_base).await,
        Command::RagCollections => rag_collections().await,
        Command::Migrate => migrate().await,
        Command::RagIngest { path, collection, knowledge_base, mode } => {
            ingest::run(&path, &collection, knowledge_base, mode).await
        }
        Command::Sync { source_id, confirm_removals } => sync::run(source_id, confirm_removals).await,
        Command::Reindex { knowledge_base } => reindex::run(knowledge_base).await,
        Command::Search { knowledge_base, query, mode, explain, top_k } => {
            search::run(knowledge_base, query, mode, explain, top_k).await
        }
    }
}

/// `sluice migrate`: the deploy's migrate step; the report on stdout, a failure on stderr.
async fn migrate() -> ExitCode {
    match sluice_migrate::migrate_from_env(&sluice_blob::sdk_config().await, None, None).await {
        Ok(report) => {
            println!("{}", serde_json::json!(report));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("sluice migrate: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `sluice rag-collections`: `{"collections": [{name, knowledge_bases: [...], totals}]}` on
/// stdout; a database failure on stderr, exit code 1.
async fn rag_collections() -> ExitCode {
    let listed = async {
        let db = sluice_store::Db::from_env(&sluice_blob::sdk_config().await, 1).await?;
        let mut by_name: std::collections::BTreeMap<String, Vec<serde_json::Value>> = Default::default();
        for base in db.all_knowledge_bases().await? {
            let counts = db.collection_counts(&base).await?;
            by_name.entry(base.collection_name.clone()).or_default().push(serde_json::json!({
                "id": base.id, "name": base.name, "scope": base.scope.as_str(), "org_id": base.org_id,
                "embedding_provider": base.embedding_provider, "embedding_model": base.embedding_model,
                "embedding_dim": base.embedding_dim, "document_count": counts.documents,
                "processing_count": counts.processing, "indexed_count": counts.indexed,
                "failed_count": counts.failed, "total_vectors": counts.vectors,
            }));
        }
        Ok::<_, sluice_store::StoreError>(by_name)
    };
    match listed.await {
        Ok(by_name) => {
            let collections: Vec<serde_json::Value> = by_name
                .into_iter()
                .map(|(name, bases)| {
                    let sum = |field: &str| bases.iter().filter_map(|b| b[field].as_i64()).sum::<i64>();
                    serde_json::json!({"name": name, "document_count": sum("document_count"),
                        "total_vectors": sum("total_vectors"), "knowledge_bases": bases})
                })
                .collect();
            println!("{}", serde_json::json!({ "collections": collections }));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{}", serde_json::json!({"error": format!("database: {error}")}));
            ExitCode::FAILURE
        }
    }
}

/// `sluice rag-drop`: commits the teardown, sends its job (a failed send is the sweep's to
/// repeat from the outbox) and prints what it did; refusals go to stderr, exit code 1.
async fn rag_drop(name: &str, knowledge_base: Option<Uuid>) -> ExitCode {
    let refuse = |answer: serde_json::Value| {
        eprintln!("{answer}");
        ExitCode::FAILURE
    };
    let db = match sluice_store::Db::from_env(&sluice_blob::sdk_config().await, 1).await {
        Ok(db) => db,
        Err(error) => return refuse(serde_json::json!({"error": format!("database: {error}")})),
    };
    let (queued, payload) = match db.queue_name_drop(name, knowledge_base).await {
        Ok(sluice_store::NameDrop::Queued(queued, payload)) => (queued, payload),
        Ok(sluice_store::NameDrop::Ambiguous(ids)) => {
            return refuse(serde_json::json!({
                "error": "several knowledge bases hold this name; name one with --knowledge-base",
                "collection_name": name, "knowledge_base_ids": ids}));
        }
        Ok(sluice_store::NameDrop::NoSuchBase) => {
            return refuse(serde_json::json!({"error": "no such knowledge base holds this name",
                "collection_name": name, "knowledge_base_id": knowledge_base}));
        }
        Ok(sluice_store::NameDrop::Reserved) => {
            return refuse(serde_json::json!({"error": "a teardown of this name is already under way",
                "collection_name": name}));
        }
        Ok(sluice_store::NameDrop::Nothing) => {
            return refuse(serde_json::json!({"error": "nothing holds this name", "collection_name": name}));
        }
        Err(error) => return refuse(serde_json::json!({"error": format!("database: {error}")})),
    };
    // The job goes to SLUICE_TEARDOWN_QUEUE_URL (the deployment's), else to the queue the
    // local stack names `sluice-teardown`; unsent, the sweep sends it from the outbox.
    let sqs = aws_sdk_sqs::Client::new(&sluice_blob::sdk_config().await);
    let queue_url = match std::env::var("SLUICE_TEARDOWN_QUEUE_URL") {
        Ok(url) => Some(url),
        Err(_) => sqs.get_queue_url().queue_name("sluice-teardown").send().await.ok().and_then(|o| o.queue_url),
    };
    let routes = queue_url.map(|url| vec![(sluice_store::TEARDOWN_TOPIC.to_owned(), url)]).unwrap_or_default();
    let dispatcher = sluice_queue::jobs::Dispatcher::new(sqs, routes);
    let sent = match dispatcher.send(sluice_store::TEARDOWN_TOPIC, &payload).await {
        Ok(()) => db.mark_dispatched(queued.teardown_id).await.is_ok(),
        Err(_) => false,
    };
    println!(
        "{}",
        serde_json::json!({
            "status": "queued",
            "teardown_id": queued.teardown_id,
            "collection_name": queued.collection_name,
            "kb_id": queued.kb_id,
            "drops_table": queued.drop_table,
            "cleared": queued.cleared,
            "job_sent": sent,
        })
    );
    ExitCode::SUCCESS
}

/// `sluice parse`: one JSON object with the verdict, or the text with `--text`.
fn parse(path: &std::path::Path, mime: Option<&str>, print_text: bool, markdown: bool) -> ExitCode {
    let started = std::time::Instant::now();
    let config = sluice_domain::Config::from_lookup(|name| match name {
        "SLUICE_BUCKET" | "SLUICE_KMS_KEY_ID" => Some("unused".to_owned()),
        other => std::env::var(other).ok(),
    });
    let config = match config {
        Ok(config) => config,
        Err(error) => {
            eprintln!("sluice parse: {error}");
            return ExitCode::FAILURE;
        }
    };
    let filename = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let size = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(error) => {
            eprintln!("sluice parse: cannot read {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let elapsed = |started: std::time::Instant| started.elapsed().as_millis() as u64;
    if size > config.chat_max_upload_bytes {
        let verdict = serde_json::json!({
            "verdict": "refused", "reason": "file_too_large", "file_type": null, "mime_type": null,
            "preview": null, "chars": 0, "truncated": false, "elapsed_ms": elapsed(started),
        });
        println!("{verdict}");
        return ExitCode::SUCCESS;
    }
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("sluice parse: cannot read {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    };
    // As a chat upload is read: OCR of at most CHAT_OCR_MAX_PAGES scanned pages.
    let options = sluice_isolate::chat_options(&config).with_markdown(markdown);
    let extractor = match sluice_isolate::Extractor::current_exe(config.parse_max_memory_bytes) {
        Ok(extractor) => extractor,
        Err(error) => {
            eprintln!("sluice parse: cannot find this binary to run a parse worker: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match sluice_formats::check_upload(&filename, mime, &bytes) {
        Err(refusal) => Err(refusal),
        Ok(accepted) => match extractor.extract(accepted.kind, &bytes, &options) {
            Ok(extracted) => extracted.map(|e| (accepted, e)),
            Err(error) => {
                eprintln!("sluice parse: {error}");
                return ExitCode::FAILURE;
            }
        },
    };
    let verdict = match outcome {
        Err(refusal) => serde_json::json!({
            "verdict": "refused", "reason": refusal.code.as_str(), "message": refusal.message,
            "file_type": null, "mime_type": null, "preview": null, "chars": 0, "truncated": false,
            "elapsed_ms": elapsed(started),
        }),
        Ok((accepted, extraction)) => {
            if print_text {
                match &extraction.text {
                    Some(text) => {
                        println!("{text}");
                        return ExitCode::SUCCESS;
                    }
                    None => {
                        eprintln!("sluice parse: no text: {}", extraction.unreadable.as_deref().unwrap_or("an image"));
                        return ExitCode::FAILURE;
                    }
                }
            }
            let mut verdict = serde_json::json!({
                "verdict": "accepted",
                "file_type": accepted.file_type().as_str(),
                "mime_type": accepted.canonical_mime(),
                "preview": extraction.text.as_deref().and_then(sluice_formats::preview),
                "chars": extraction.text.as_deref().map_or(0, |t| t.chars().count()),
                "truncated": extraction.truncated,
                "elapsed_ms": elapsed(started),
            });
            if let Some(reason) = extraction.unreadable {
                verdict["unreadable"] = reason.into();
            }
            // The confinement steps the platform refused the worker (it read the file anyway).
            if let Some(grants) = sluice_isolate::grants() {
                verdict["confinement_refused"] = grants.refused().into();
            }
            if let Some(pages) = extraction.pages {
                verdict["pages"] = pages.into();
            }
            if let Some(cells) = extraction.cells {
                verdict["cells"] = cells.into();
            }
            if let Some(members) = extraction.members {
                verdict["members"] = members.into();
            }
            if let Some(ocr_pages) = extraction.ocr_pages {
                verdict["ocr_pages"] = ocr_pages.into();
            }
            if let Some(encoding) = extraction.encoding {
                verdict["encoding"] = encoding.into();
            }
            verdict
        }
    };
    println!("{verdict}");
    ExitCode::SUCCESS
}

/// Prints one line per check; exits non-zero when any check fails.
async fn doctor() -> ExitCode {
    let mut healthy = true;
    let sdk = sluice_blob::sdk_config().await;
    let s3 = sluice_blob::s3_client(&sdk);
    let kms = aws_sdk_kms::Client::new(&sdk);
    let bucket = std::env::var("SLUICE_BUCKET").unwrap_or_default();
    println!("storage backend: s3");
    println!("endpoint: {}", sdk.endpoint_url().unwrap_or("AWS default"));
    println!("bucket: {}", if bucket.is_empty() { "(SLUICE_BUCKET is not set)" } else { &bucket });
    match s3.head_bucket().bucket(&bucket).send().await {
        Ok(_) => println!("bucket reachable: yes"),
        Err(error) => {
            healthy = false;
            println!("bucket reachable: no ({})", aws_sdk_s3::error::DisplayErrorContext(&error));
        }
    }
    let key = match std::env::var("SLUICE_KMS_KEY_ID").ok().filter(|k| !k.is_empty()) {
        Some(key) => Some(key),
        None => {
            let alias = std::env::var("SLUICE_KMS_KEY_ALIAS").unwrap_or_default();
            kms.describe_key()
                .key_id(&alias)
                .send()
                .await
                .ok()
                .and_then(|d| d.key_metadata().and_then(|m| m.arn()).map(str::to_owned))
        }
    };
    match &key {
        Some(key) => println!("sse-kms enforced by sluice: yes, every write asks for aws:kms with key {key}"),
        None => {
            healthy = false;
            println!("sse-kms enforced by sluice: no key configured (SLUICE_KMS_KEY_ID)");
        }
    }
    match s3.get_bucket_encryption().bucket(&bucket).send().await {
        Ok(out) => {
            let rules = out.server_side_encryption_configuration().map(|c| c.rules()).unwrap_or_default();
            let described: Vec<String> = rules
                .iter()
                .filter_map(|r| r.apply_server_side_encryption_by_default())
                .map(|d| format!("{} {}", d.sse_algorithm().as_str(), d.kms_master_key_id().unwrap_or("")))
                .collect();
            println!("bucket default encryption: {}", described.join(", ").trim());
        }
        Err(_) => println!("bucket default encryption: none (template.yaml sets it in AWS)"),
    }
    match sluice_formats::pdf::ensure_available() {
        Ok(()) => println!("pdfium: loaded"),
        Err(error) => {
            healthy = false;
            println!("pdfium: {error}");
        }
    }
    match sluice_ocr::ensure_installed() {
        Ok(()) => println!("ocr: runtime loaded, models present"),
        Err(error) => {
            healthy = false;
            println!("ocr: {error}");
        }
    }
    if std::env::var("SLUICE_MODEL_DIR").is_ok() {
        match sluice_embed::in_process::ensure_available() {
            Ok(()) => println!("embedding model: present"),
            Err(error) => {
                healthy = false;
                println!("embedding model: {error}");
            }
        }
    }
    // The functions' own path: TLS, the login from Secrets Manager, the schema version.
    match sluice_store::Db::from_env(&sdk, 1).await {
        Ok(db) => match db.pgvector_version().await {
            Ok(Some(version)) => {
                println!("database reachable: yes (TLS, schema {})\npgvector: {version}", sluice_store::SCHEMA_VERSION)
            }
            Ok(None) => {
                healthy = false;
                println!("database reachable: yes\npgvector: not installed (run `sluice migrate`)");
            }
            Err(error) => {
                healthy = false;
                println!("database reachable: no ({error})");
            }
        },
        Err(error) => {
            healthy = false;
            println!("database reachable: no ({error})");
        }
    }
    if healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
