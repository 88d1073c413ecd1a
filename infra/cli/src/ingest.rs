//! `sluice rag-ingest PATH --collection NAME [--knowledge-base ID] [--mode …]`: a local
//! directory ingested the way a sync source is. Each file is addressed by its absolute path
//! (`writer_kind = operator`), its name is only a label, and the same lookup and the same
//! modes decide it: a file whose bytes hash as its document's did is skipped, a changed one
//! replaces its document once indexed (counted as an update). Files are read on this
//! machine, so each one's original is kept under `documents/` (its document has a file) and
//! the deployment's parse and ingest do the rest. Nothing here removes: a file deleted from
//! the directory leaves its document until it is deleted through the API.
//!
//! The walk never follows a symbolic link, and each file is confirmed, once resolved, to
//! be inside the directory: a link planted in it cannot pull in a file from elsewhere.

use sha2::Digest;
use sluice_domain::safe_filename;
use sluice_domain::sync::{Decision, ListedObject, SyncMode, decide};
use sluice_store::{Accepted, Document, KnowledgeBase, SyncOrigin};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use time::OffsetDateTime;
use uuid::Uuid;

/// What became of the files, as printed at the end.
#[derive(Debug, Default, serde::Serialize)]
struct Tally {
    total: usize,
    ingested: usize,
    updated: usize,
    skipped: usize,
    failed: usize,
    /// `[{path, error}]` for each file that failed, here or in the deployment.
    failures: Vec<serde_json::Value>,
}

/// The base the documents go to: the one named, which must hold `collection`, or the one
/// base holding it.
async fn base_for(
    db: &sluice_store::Db,
    collection: &str,
    knowledge_base: Option<Uuid>,
) -> Result<KnowledgeBase, String> {
    let holders = db.bases_named(collection, Uuid::nil()).await.map_err(|e| format!("database: {e}"))?;
    match knowledge_base {
        Some(id) => holders
            .into_iter()
            .map(|held| held.base)
            .find(|base| base.id == id)
            .ok_or_else(|| format!("the knowledge base {id} does not hold the collection {collection}")),
        None => {
            let mut bases: Vec<KnowledgeBase> = holders.into_iter().map(|held| held.base).collect();
            match bases.len() {
                0 => Err(format!("no knowledge base holds the collection {collection}; create one first")),
                1 => Ok(bases.remove(0)),
                _ => {
                    let ids: Vec<String> = bases.iter().map(|b| b.id.to_string()).collect();
                    Err(format!(
                        "several knowledge bases hold {collection}; name one with --knowledge-base ({})",
                        ids.join(", ")
                    ))
                }
            }
        }
    }
}

/// The regular files under `root`, resolved, in a stable order; links are not followed.
fn files_under(root: &Path) -> Result<Vec<PathBuf>, String> {
    let root = root.canonicalize().map_err(|e| format!("{}: {e}", root.display()))?;
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(&root).follow_links(false).sort_by_file_name() {
        let entry = entry.map_err(|e| format!("walking {}: {e}", root.display()))?;
        if !entry.file_type().is_file() {
            continue;
        }
        match entry.path().canonicalize() {
            Ok(resolved) if resolved.starts_with(&root) => files.push(resolved),
            _ => {}
        }
    }
    Ok(files)
}

/// One file: decided, stored and accepted; the document id to wait for, if any.
async fn one_file(
    operator: &Operator,
    base: &KnowledgeBase,
    mode: SyncMode,
    path: &Path,
    tally: &mut Tally,
) -> Result<Option<(Uuid, bool)>, String> {
    let address = path.to_string_lossy().into_owned();
    let label = safe_filename(&path.file_name().unwrap_or_default().to_string_lossy());
    let Some(kind) = sluice_formats::kind_for_filename(&label).filter(|k| sluice_formats::ingestible(k)) else {
        tally.skipped += 1;
        return Ok(None);
    };
    let bytes = std::fs::read(path).map_err(|e| format!("read: {e}"))?;
    if bytes.len() as u64 > operator.config.max_upload_bytes {
        return Err(format!("the file is larger than {} bytes", operator.config.max_upload_bytes));
    }
    let hash = hex::encode(sha2::Sha256::digest(&bytes));
    // A local file's change signal is its content hash, read before anything is stored.
    let listed = ListedObject { key: address.clone(), size: bytes.len() as i64, etag: Some(hash.clone()) };
    let existing =
        operator.db.existing_document(base.id, &address, &label).await.map_err(|e| format!("database: {e}"))?;
    let replaces = match decide(mode, existing.as_ref(), &listed) {
        Decision::Skip { .. } => {
            tally.skipped += 1;
            return Ok(None);
        }
        Decision::Fetch { replaces } => replaces,
    };
    let accepted = sluice_formats::check_upload(&label, None, &bytes)
        .map_err(|r| format!("{}: {}", r.code.as_str(), r.message))?;
    let id = Uuid::new_v4();
    let now = OffsetDateTime::now_utc();
    let document = Document {
        id,
        collection_name: base.collection_name.clone(),
        kb_id: Some(base.id),
        org_id: base.org_id,
        owner_id: Some(base.owner_id),
        filename: label.clone(),
        filesize: bytes.len() as i64,
        filetype: kind.extension.to_owned(),
        mime_type: Some(accepted.canonical_mime().to_owned()),
        status: "processing".to_owned(),
        error_message: None,
        vector_document_id: None,
        chunk_count: 0,
        storage_path: Some(format!("documents/{}/{}/{label}", base.id, id.simple())),
        parsed_path: None,
        parsed_format: None,
        reparse_pending: false,
        organizational_unit: None,
        source: "operator".to_owned(),
        document_date: now.date(),
        date_source: "upload".to_owned(),
        truncated_chunks: 0,
        title: None,
        content_hash: Some(hash.clone()),
        ingestion_config: base.ingestion_config.clone().unwrap_or_else(|| serde_json::json!({})),
        replace_previous: false,
        source_path: Some(address),
        sync: Some(SyncOrigin { source_id: None, run_id: None, etag: Some(hash), replaces }),
        ocr_spans: Vec::new(),
        ocr_low_confidence_lines: 0,
        image_spans: Vec::new(),
        images: None,
        parser_job: None,
        parser_pages: None,
        page_starts: Vec::new(),
        bytes_judged: true,
        created_at: now,
        completed_at: None,
    };
    let key = document.storage_path.clone().unwrap_or_default();
    operator
        .blob
        .put_encrypted(&key, bytes.into(), accepted.canonical_mime())
        .await
        .map_err(|e| format!("storage: {e}"))?;
    match operator.db.accept_document(&document).await {
        Ok(Accepted::Recorded { outbox_id }) => {
            let job = serde_json::json!({"document_id": id});
            if operator.dispatcher.send(sluice_store::PARSE_DOCUMENT_TOPIC, &job).await.is_ok() {
                let _ = operator.db.mark_dispatched(outbox_id).await;
            }
            Ok(Some((id, existing.is_some_and(|e| e.status == "done"))))
        }
        outcome => {
            let _ = operator.blob.delete(&key).await;
            Err(match outcome {
                Ok(Accepted::Reserved) => "the collection is being torn down".to_owned(),
                Ok(_) => "the knowledge base was deleted".to_owned(),
                Err(error) => format!("database: {error}"),
            })
        }
    }
}

/// What one operator run works with.
struct Operator {
    config: sluice_domain::Config,
    db: sluice_store::Db,
    blob: sluice_blob::Blob,
    dispatcher: sluice_queue::jobs::Dispatcher,
}

/// `sluice rag-ingest`: see the module's comment.
pub async fn run(path: &Path, collection: &str, knowledge_base: Option<Uuid>, mode: SyncMode) -> ExitCode {
    let fail = |error: String| {
        eprintln!("{}", serde_json::json!({ "error": error }));
        ExitCode::FAILURE
    };
    let sdk = sluice_blob::sdk_config().await;
    let (config, db) = match crate::sync::operator(&sdk).await {
        Ok(operator) => operator,
        Err(error) => return fail(error),
    };
    let base = match base_for(&db, collection, knowledge_base).await {
        Ok(base) => base,
        Err(error) => return fail(error),
    };
    let files = match files_under(path) {
        Ok(files) => files,
        Err(error) => return fail(error),
    };
    let blob = sluice_blob::Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
    let dispatcher = sluice_queue::jobs::Dispatcher::new(aws_sdk_sqs::Client::new(&sdk), config.job_routes());
    let operator = Operator { config, db, blob, dispatcher };
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut tally = Tally { total: files.len(), ..Tally::default() };
    let mut waiting: HashMap<Uuid, (PathBuf, bool)> = HashMap::new();
    for file in &files {
        match one_file(&operator, &base, mode, file, &mut tally).await {
            Ok(Some((id, replaces_done))) => {
                waiting.insert(id, (file.clone(), replaces_done));
            }
            Ok(None) => {}
            Err(error) => {
                tally.failed += 1;
                tally.failures.push(serde_json::json!({"path": file, "error": format!("ingest: {error}")}));
            }
        }
        bar.inc(1);
        bar.set_message(format!("read: {} skipped, {} failed, {} sent", tally.skipped, tally.failed, waiting.len()));
    }
    // The deployment parses and indexes what was sent; wait for each to finish.
    while !waiting.is_empty() {
        let ids: Vec<Uuid> = waiting.keys().copied().collect();
        let statuses = match operator.db.document_statuses(&ids).await {
            Ok(statuses) => statuses,
            Err(error) => return fail(format!("database: {error}")),
        };
        for id in ids {
            let status = statuses.get(&id).map_or("gone", String::as_str);
            if status == "processing" {
                continue;
            }
            let Some((file, replaces_done)) = waiting.remove(&id) else { continue };
            match status {
                "done" if replaces_done => tally.updated += 1,
                "done" => tally.ingested += 1,
                _ => {
                    let error = operator.db.document(id).await.ok().flatten().and_then(|d| d.error_message);
                    tally.failed += 1;
                    tally
                        .failures
                        .push(serde_json::json!({"path": file, "error": error.unwrap_or_else(|| status.to_owned())}));
                }
            }
        }
        bar.set_message(format!(
            "{} ingested, {} updated, {} skipped, {} failed, {} pending",
            tally.ingested,
            tally.updated,
            tally.skipped,
            tally.failed,
            waiting.len()
        ));
        if !waiting.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    }
    bar.finish();
    println!("{}", serde_json::to_value(&tally).unwrap_or_default());
    if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
