//! The `ingest` function: for each document job, chunk the parsed text under the
//! document's chunking, embed the chunks in batches through the collection's provider with
//! its resolved key, staging each batch as it comes back (memory stays flat in the
//! document's size), then publish them with the completed row in one transaction that holds
//! the base's row (the document becomes searchable whole). A document's own failure is
//! recorded on its row as `stage: Type: advice` and acknowledged; a failure that may pass
//! later is retried by SQS until the last delivery (`SLUICE_INGEST_MAX_RECEIVES`), where it
//! is recorded instead, so no document is left `processing`; a redelivery resumes after
//! the chunks already staged.
//!
//! Bounds: at most `SLUICE_MAX_CHUNKS_PER_DOCUMENT` chunks (counted before anything is
//! embedded), `SLUICE_DOCUMENT_EMBED_SECS` of embedding a document, and round robin between
//! tenants: a delivery whose tenant has no fewer documents ingesting than another tenant
//! with one waiting sends its job to the back of the queue and ingests that one instead.

mod error;

pub use error::IngestError;

use sluice_blob::{Blob, BlobError};
use sluice_chunk::chunk_to_fit;
use sluice_domain::Config;
use sluice_domain::catalog::Model;
use sluice_domain::ingestion::{IngestionConfig, OutputFormat};
use sluice_embed::client::{RetryPolicy, Target, embed};
use sluice_embed::credentials::target_for;
use sluice_embed::tokens;
use sluice_queue::SqsBatchResponse;
use sluice_queue::jobs::{Dispatcher, DocumentJob, STAGE_LEASE, receive_count};
use sluice_store::{ChunkRow, Db, Document, IngestClaim, KnowledgeBase, Stage, Staging, Turn, WriteOutcome};
use sluice_vault::Vault;
use sluice_web::stage_span;
use std::time::{Duration, Instant};
use tracing::Instrument;
use uuid::Uuid;

/// Chunks sent to the provider per request, and staged per transaction.
pub const EMBED_BATCH: usize = 64;

/// How long an ingest claim holds unrenewed: a document whose attempt died (a crash, the
/// function's timeout) is free for the next delivery this long after the last renewal.
pub const CLAIM_LEASE: Duration = Duration::from_secs(120);

/// How often a running attempt renews its claim: four times a lease, so one slow database
/// answer or a long step between awaits does not lose it.
const CLAIM_RENEWAL: Duration = Duration::from_secs(30);

/// Everything a batch needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct State {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
    pub vault: Vault,
    pub http: reqwest::Client,
    pub retry: RetryPolicy,
    /// Sends a yielded job back to the ingest queue.
    pub dispatcher: Dispatcher,
}

impl State {
    pub fn new(config: Config, db: Db, blob: Blob, kms: aws_sdk_kms::Client, sqs: aws_sdk_sqs::Client) -> Self {
        let vault = Vault::new(kms, config.kms_key_id.clone());
        let dispatcher = Dispatcher::new(sqs, config.job_routes());
        Self { config, db, blob, vault, http: sluice_embed::http_client(), retry: retry_policy_from_env(), dispatcher }
    }

    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        sluice_embed::network::NetworkPolicy::from_env()?;
        sluice_embed::in_process::ensure_available()?;
        let sdk = sluice_blob::sdk_config().await;
        let db = Db::from_env(&sdk, 4).await?;
        let blob = Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
        Ok(Self::new(config, db, blob, aws_sdk_kms::Client::new(&sdk), aws_sdk_sqs::Client::new(&sdk)))
    }
}

/// `RetryPolicy::default()`, unless `SLUICE_EMBED_RETRY_ATTEMPTS` or
/// `SLUICE_EMBED_RETRY_FIRST_DELAY_MS` say otherwise (the test stack shortens both).
fn retry_policy_from_env() -> RetryPolicy {
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let mut policy = RetryPolicy::default();
    if let Some(attempts) = number("SLUICE_EMBED_RETRY_ATTEMPTS") {
        policy.attempts = u32::try_from(attempts.clamp(1, 20)).unwrap_or(1);
    }
    if let Some(ms) = number("SLUICE_EMBED_RETRY_FIRST_DELAY_MS") {
        policy.first_delay = std::time::Duration::from_millis(ms);
    }
    policy
}

/// Handles one SQS batch; only messages that should be delivered again are reported.
pub async fn handle(state: &State, event: sluice_queue::SqsEvent) -> SqsBatchResponse {
    // One document at a time: each embeds in batches and holds a connection to write.
    sluice_queue::run_batch(event, 1, |message| async move {
        let deliveries = receive_count(&message);
        let job: DocumentJob =
            serde_json::from_str(message.body.as_deref().unwrap_or_default()).map_err(|_| IngestError::Undecodable)?;
        ingest(state, job, deliveries).await
    })
    .await
}

/// A failure recorded on the row: the stage, the type and what to do.
fn failure(stage: &str, kind: &str, advice: &str) -> String {
    format!("{stage}: {kind}: {advice}")
}

async fn fail(state: &State, document: &Document, message: &str) -> Result<(), IngestError> {
    if state.db.fail_document(document.id, message).await? {
        tracing::info!(id = %document.id, message, "document failed");
    }
    Ok(())
}

/// Ingests one document; `deliveries` is how many times SQS has handed this job over.
pub async fn ingest(state: &State, job: DocumentJob, deliveries: u32) -> Result<(), IngestError> {
    let Some(document) = state.db.document(job.document_id).await? else {
        tracing::info!(id = %job.document_id, "document deleted before ingesting; nothing written");
        return Ok(());
    };
    if document.status != "processing" {
        return Ok(());
    }
    match state.db.take_turn(document.id, Stage::Ingest, job.may_yield(), STAGE_LEASE).await? {
        Turn::Go => {}
        Turn::NotProcessing => return Ok(()),
        Turn::Yield { instead } => {
            // To the back of the queue (this delivery counts against nothing), and this
            // delivery does the other tenant's document now.
            state.dispatcher.yield_turn("ingest", &job).await?;
            if let Some(other) = instead {
                ingest_in_turn_of(state, other).await;
            }
            return Ok(());
        }
    }
    // One attempt per document at a time: another delivery of this job (SQS delivers at
    // least once) or another tenant's delivery ingesting it in its place is not run beside.
    let Some(claim) = state.db.claim_ingest(document.id, CLAIM_LEASE).await? else {
        state.dispatcher.send_after_claim("ingest", &job).await?;
        return Ok(());
    };
    let outcome = renewing(state, claim, claimed_attempt(state, &document, claim, deliveries)).await;
    release(state, claim).await;
    match outcome {
        Ok(Claimed::Done) => Ok(()),
        // Another delivery may be ingesting the document (or will): this one comes back
        // later, as when the claim was held at the start, and counts against nothing.
        Ok(Claimed::Lost) => {
            tracing::warn!(id = %document.id, "the attempt's claim lapsed; nothing published, the job comes back later");
            state.dispatcher.send_after_claim("ingest", &job).await?;
            Ok(())
        }
        Err(error) => Err(error),
    }
}

/// Runs `attempt` while renewing `claim` every [`CLAIM_RENEWAL`]. A renewal that finds the
/// claim taken stops renewing; the attempt learns it when it next stages or publishes, as
/// both check the claim.
async fn renewing<T>(state: &State, claim: IngestClaim, attempt: impl Future<Output = T>) -> T {
    let renewals = async {
        let start = tokio::time::Instant::now() + CLAIM_RENEWAL;
        let mut every = tokio::time::interval_at(start, CLAIM_RENEWAL);
        loop {
            every.tick().await;
            match state.db.renew_ingest(claim, CLAIM_LEASE).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    tracing::warn!(id = %claim.document_id, error = %error, "the ingest claim was not renewed; trying again");
                }
            }
        }
        std::future::pending().await
    };
    tokio::select! {
        outcome = attempt => outcome,
        never = renewals => never,
    }
}

/// How a claimed attempt ended, when not in a transient error.
enum Claimed {
    /// Ingested, or the document's own failure recorded.
    Done,
    /// Its claim lapsed and another attempt may hold it: nothing written.
    Lost,
}

/// Ends a claim; one left behind only delays the next delivery until its lease runs out.
async fn release(state: &State, claim: IngestClaim) {
    if let Err(error) = state.db.release_ingest(claim).await {
        tracing::warn!(id = %claim.document_id, error = %error, "the ingest claim was not released; it expires with its lease");
    }
}

async fn claimed_attempt(
    state: &State,
    document: &Document,
    claim: IngestClaim,
    deliveries: u32,
) -> Result<Claimed, IngestError> {
    let last_delivery = deliveries >= state.config.ingest_max_receives;
    match attempt(state, document, claim).await {
        Ok(()) => Ok(Claimed::Done),
        Err(Attempt::ClaimLost) => Ok(Claimed::Lost),
        Err(Attempt::Failed(message)) => fail(state, document, &message).await.map(|()| Claimed::Done),
        Err(Attempt::Transient(error)) if last_delivery => {
            tracing::warn!(id = %document.id, error = %error, "last delivery failed; recorded");
            let message = match &error {
                IngestError::Embed(e) => failure("embed", e.type_name(), e.advice()),
                _ => {
                    failure("ingest", "ServiceUnavailable", "a storage service kept failing; retry the document later")
                }
            };
            fail(state, document, &message).await.map(|()| Claimed::Done)
        }
        Err(Attempt::Transient(error)) => Err(error),
    }
}

/// Ingests another tenant's document in a yielding delivery's place. Its own job is still
/// queued: a failure that may pass later is left to that job's deliveries (which count
/// them), and the job finds the document done if this succeeds.
async fn ingest_in_turn_of(state: &State, id: uuid::Uuid) {
    let document = match state.db.document(id).await {
        Ok(Some(document)) if document.status == "processing" => document,
        Ok(_) => return,
        Err(error) => {
            tracing::warn!(%id, error = %error, "the document given the turn could not be read; its own job will");
            return;
        }
    };
    let claim = match state.db.claim_ingest(id, CLAIM_LEASE).await {
        Ok(Some(claim)) => claim,
        Ok(None) => return,
        Err(error) => {
            tracing::warn!(%id, error = %error, "the document given the turn could not be claimed; its own job will");
            return;
        }
    };
    let outcome = match renewing(state, claim, attempt(state, &document, claim)).await {
        // A lapsed claim is left to the document's own job, as a transient failure is.
        Ok(()) | Err(Attempt::ClaimLost) => Ok(()),
        Err(Attempt::Failed(message)) => fail(state, &document, &message).await,
        Err(Attempt::Transient(error)) => Err(error),
    };
    release(state, claim).await;
    if let Err(error) = outcome {
        tracing::warn!(%id, error = %error, "ingesting in another's turn failed for now; its own job retries");
    }
}

/// How one attempt ended short of success.
enum Attempt {
    /// The document's own failure: recorded, not retried.
    Failed(String),
    Transient(IngestError),
    /// The document's claim is no longer this attempt's: nothing was staged or published.
    ClaimLost,
}

impl<E: Into<IngestError>> From<E> for Attempt {
    fn from(error: E) -> Self {
        Self::Transient(error.into())
    }
}

async fn attempt(state: &State, document: &Document, claim: IngestClaim) -> Result<(), Attempt> {
    let Some(kb_id) = document.kb_id else {
        return Err(Attempt::Failed(failure("ingest", "KnowledgeBaseDeleted", "the knowledge base was deleted")));
    };
    let Some(held) = state.db.knowledge_base(kb_id, uuid::Uuid::nil()).await? else {
        tracing::info!(id = %document.id, "base deleted before ingesting; nothing written");
        return Ok(());
    };
    let base = held.base;
    let text = match &document.parsed_path {
        Some(path) => {
            match state.blob.get(path, u64::MAX).instrument(stage_span("ingest", "download", &document.id)).await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(BlobError::NotFound) => {
                    return Err(Attempt::Failed(failure("ingest", "ParsedTextMissing", "retry the document")));
                }
                Err(error) => return Err(error.into()),
            }
        }
        None => return Err(Attempt::Failed(failure("ingest", "NotParsed", "retry the document"))),
    };
    let model = base.model();
    let config =
        IngestionConfig::from_stored(Some(&document.ingestion_config), model).unwrap_or_else(|_| base.chunking());
    let chunks =
        stage_span("ingest", "chunk", &document.id).in_scope(|| contextual_chunks(&text, &config, document, model));
    // Counted, never hidden: a chunk the model cuts is embedded by its start alone.
    let truncated = chunks.iter().filter(|c| !c.read_whole).count();
    if truncated > 0 {
        tracing::warn!(id = %document.id, truncated, chunks = chunks.len(), size = config.chunk_size,
            "chunks longer than the model reads whole; only their start is embedded");
    }
    for oversize in chunks.iter().filter(|c| c.chunk.oversize) {
        tracing::warn!(id = %document.id, chars = oversize.chunk.text.chars().count(), size = config.chunk_size,
            "a piece with no separator left is over chunk_size; kept whole");
    }
    if chunks.len() > state.config.max_chunks_per_document {
        return Err(Attempt::Failed(failure(
            "ingest",
            "TooManyChunks",
            &format!(
                "the document makes {} chunks at chunk_size {}, more than this deployment's {}; raise the base's \
                 chunk_size or split the document, then retry it",
                chunks.len(),
                config.chunk_size,
                state.config.max_chunks_per_document
            ),
        )));
    }
    let target = target(state, &base).await?;
    let cache = CacheScope::of(&base, &target);
    let deadline = Instant::now() + state.config.document_embed_time_limit;
    // A redelivery resumes after what an earlier attempt staged: those chunks are paid for.
    let staged = state.db.staged_chunks(document.id).await?.min(chunks.len());
    for (n, batch) in chunks[staged..].chunks(EMBED_BATCH).enumerate() {
        let first = staged + n * EMBED_BATCH;
        // Keyed by what is embedded: a chunk under a new title or heading is embedded anew.
        let hashes: Vec<String> = batch.iter().map(|c| cache.key(&c.embedded)).collect();
        // Texts this target has embedded for this tenant before reuse their vectors; each
        // other text is embedded once.
        let mut vectors = state.db.cached_vectors(&base.collection_name, &hashes).await?;
        let mut missing: Vec<(&String, &String)> = Vec::new();
        for (piece, hash) in batch.iter().zip(&hashes) {
            if !vectors.contains_key(hash) && !missing.iter().any(|(h, _)| *h == hash) {
                missing.push((hash, &piece.embedded));
            }
        }
        if !missing.is_empty() {
            let texts: Vec<String> = missing.iter().map(|(_, text)| (*text).clone()).collect();
            let embedded = embed_within(state, &target, &texts, deadline)
                .instrument(stage_span("ingest", "embed", &document.id))
                .await?;
            vectors.extend(missing.iter().map(|(hash, _)| (*hash).clone()).zip(embedded));
        }
        let mut rows: Vec<ChunkRow> = Vec::with_capacity(batch.len());
        for (i, (piece, content_hash)) in batch.iter().zip(hashes).enumerate() {
            let Some(embedding) = vectors.get(&content_hash).cloned() else {
                return Err(Attempt::Failed(failure(
                    "embed",
                    "Malformed",
                    "the service answered too few vectors; retry it",
                )));
            };
            let mut metadata = chunk_metadata(piece.chunk.start, piece.chunk.end, piece.chars, document);
            if !piece.heading.is_empty() {
                metadata["heading"] = serde_json::json!(piece.heading);
            }
            if let Some((field, value)) = &piece.section {
                metadata[*field] = value.clone();
            }
            rows.push(ChunkRow {
                chunk_index: i32::try_from(first + i).unwrap_or(i32::MAX),
                content: piece.chunk.text.replace('\0', ""),
                context: piece.context.as_ref().map(|c| c.replace('\0', "")),
                content_hash,
                metadata,
                embedding,
            });
        }
        match state
            .db
            .stage_chunks(document, claim, &rows)
            .instrument(stage_span("ingest", "write", &document.id))
            .await?
        {
            Staging::Staged => {}
            Staging::Stopped => {
                tracing::info!(id = %document.id, "document deleted or finished while embedding; nothing published");
                return Ok(());
            }
            Staging::ClaimLost => return Err(Attempt::ClaimLost),
        }
    }
    let stopped = state
        .db
        .ensure_base_table(base.id, &base.collection_name, base.embedding_dim, &base.text_search_language)
        .await?;
    let outcome = match stopped {
        Some(outcome) => outcome,
        None => {
            let truncated = i32::try_from(truncated).unwrap_or(i32::MAX);
            let publish = state.db.publish_chunks(document, claim, truncated);
            publish.instrument(stage_span("ingest", "write", &document.id)).await?
        }
    };
    match outcome {
        WriteOutcome::Written { chunks, retired, removal } => {
            tracing::info!(id = %document.id, chunks, retired, collection = %base.collection_name, "document indexed");
            // The replaced documents' rows are gone; their objects' removal was queued with
            // the write, and one that fails here is the sweep's to finish.
            if let Some(removal) = removal {
                state.db.remove_now_or_later(removal, move |key| async move { state.blob.delete(&key).await }).await;
            }
            Ok(())
        }
        WriteOutcome::ClaimLost => Err(Attempt::ClaimLost),
        WriteOutcome::Reserved => Err(Attempt::Failed(failure(
            "ingest",
            "CollectionReserved",
            "the collection is being torn down; upload the document again once it is recreated",
        ))),
        outcome => {
            tracing::info!(id = %document.id, ?outcome, "nothing written");
            Ok(())
        }
    }
}

/// A chunk with what it is indexed by besides its text (`chunk_context`).
struct ContextualChunk {
    chunk: sluice_chunk::Chunk,
    /// The title and heading path, when the setting adds any.
    context: Option<String>,
    /// The headings the chunk sits under (its metadata's `heading`).
    heading: Vec<String>,
    /// What the model embeds: the context, a blank line, the text.
    embedded: String,
    /// The chunk's place in the parsed text in characters: `(start, end)`.
    chars: (usize, usize),
    /// The slide (its number) or sheet (its name) the chunk begins in, for those formats.
    section: Option<(&'static str, serde_json::Value)>,
    /// The model reads `embedded` whole (counted once, when the chunk was fitted).
    read_whole: bool,
}

/// The document's non-blank chunks under `config`, each with its context; each chunk
/// `model` would not read whole, context and all, is split until it does.
fn contextual_chunks(
    text: &str,
    config: &IngestionConfig,
    document: &Document,
    model: Option<&Model>,
) -> Vec<ContextualChunk> {
    use sluice_chunk::context::{Outline, chunk_context, heading_paths, path_at};
    let outline = Outline::of(&document.filetype, document.parsed_format == Some(OutputFormat::Markdown));
    let paths = heading_paths(text, outline);
    let title = indexed_title(document);
    // What the model embeds: the context, a blank line, the text.
    let embedded = |chunk: &sluice_chunk::Chunk| {
        let context = chunk_context(config.chunk_context, &title, path_at(&paths, chunk.start));
        let embedded = match &context {
            Some(context) => format!("{context}\n\n{}", chunk.text),
            None => chunk.text.clone(),
        };
        (context, embedded)
    };
    let fits = |chunk: &sluice_chunk::Chunk| model.is_none_or(|model| tokens::read_whole(model, &embedded(chunk).1));
    // Character offsets counted once through the text: chunks come in order.
    let (mut byte_at, mut char_at) = (0usize, 0usize);
    chunk_to_fit(text, config, fits)
        .into_iter()
        .filter(|(c, _)| !c.text.trim().is_empty())
        .map(|(chunk, read_whole)| {
            if chunk.start < byte_at {
                (byte_at, char_at) = (0, 0);
            }
            char_at += text.get(byte_at..chunk.start).map_or(0, |t| t.chars().count());
            byte_at = chunk.start;
            let chars = (char_at, char_at + text.get(chunk.start..chunk.end).map_or(0, |t| t.chars().count()));
            let heading = path_at(&paths, chunk.start).to_vec();
            let (context, embedded) = embedded(&chunk);
            // A deck's or a workbook's section, whether its text marks it as text does
            // (`--- Slide N ---`, `Sheet: name`) or as markdown (`## Slide N — title`,
            // `## Sheet: name`).
            let section = match (Outline::of(&document.filetype, false), heading.first()) {
                (Outline::Slides, Some(slide)) => slide
                    .strip_prefix("Slide ")
                    .and_then(|rest| rest.split(' ').next())
                    .and_then(|number| number.parse::<u32>().ok())
                    .map(|number| ("slide", serde_json::json!(number))),
                (Outline::Sheets, Some(sheet)) => {
                    Some(("sheet", serde_json::json!(sheet.strip_prefix("Sheet: ").unwrap_or(sheet))))
                }
                _ => None,
            };
            ContextualChunk { chunk, context, heading, embedded, chars, section, read_whole }
        })
        .collect()
}

/// What a chunk text's cached vector is keyed by: the text and the embedding target that
/// made the vector — provider, model, the endpoint's address — and the tenant (the base's
/// organization, or its owner outside any). Two bases of one collection that embed through
/// different endpoints, or belong to different tenants, never share a vector: no tenant's
/// endpoint can plant vectors for another's texts, and no tenant can learn through its own
/// endpoint's traffic which texts another tenant holds.
#[derive(Debug, Clone)]
struct CacheScope(String);

impl CacheScope {
    fn of(base: &KnowledgeBase, target: &Target) -> Self {
        Self::new(&base.embedding_provider, &target.model, &target.base_url, base.org_id, base.owner_id)
    }

    fn new(provider: &str, model: &str, endpoint: &str, org_id: Option<Uuid>, owner_id: Uuid) -> Self {
        let tenant = match org_id {
            Some(org) => format!("org:{org}"),
            None => format!("user:{owner_id}"),
        };
        // Each field length-prefixed, so no field can absorb its neighbour.
        Self([provider, model, endpoint, &tenant].iter().map(|f| format!("{}:{f};", f.len())).collect())
    }

    /// The hash a chunk text is cached under, within this scope.
    fn key(&self, text: &str) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.0.as_bytes());
        hash.update(text.as_bytes());
        hex::encode(hash.finalize())
    }
}

/// Embeds `texts` within what is left of the document's time budget.
async fn embed_within(
    state: &State,
    target: &Target,
    texts: &[String],
    deadline: Instant,
) -> Result<Vec<Vec<f32>>, Attempt> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(remaining, embed(&state.http, target, texts, state.retry)).await {
        Err(_) => {
            let advice = format!(
                "embedding the document took longer than {} s (the service answered too slowly); retry it later",
                state.config.document_embed_time_limit.as_secs()
            );
            Err(Attempt::Failed(failure("embed", "TimeBudgetExceeded", &advice)))
        }
        Ok(Ok(vectors)) if vectors.len() == texts.len() => Ok(vectors),
        Ok(Ok(_)) => Err(Attempt::Failed(failure(
            "embed",
            "Malformed",
            "the service answered a different number of vectors; retry it",
        ))),
        Ok(Err(error)) if error.is_transient() => Err(Attempt::Transient(error.into())),
        Ok(Err(error)) => Err(Attempt::Failed(failure("embed", error.type_name(), error.advice()))),
    }
}

/// A chunk's metadata: where it sits in the parsed text (`start`/`end` in bytes,
/// `char_start`/`char_end` in characters, as `GET /rag/documents/{id}/text?offset=` counts),
/// the pages it came from (`pages`: first and last, for PDF and TIFF), whether OCR read it,
/// whether it holds an image's description (`image_described`), and where the document's
/// date came from.
/// The title a document's chunks are indexed and shown with: the one its parse found, else
/// (a document parsed before titles were recorded) its file name where that reads as words.
fn indexed_title(document: &Document) -> String {
    match &document.title {
        Some((title, _)) => title.clone(),
        None => sluice_chunk::context::title_from_filename(&document.filename),
    }
}

fn chunk_metadata(start: usize, end: usize, chars: (usize, usize), document: &Document) -> serde_json::Value {
    let (char_start, char_end) = chars;
    let mut metadata = serde_json::json!({"start": start, "end": end, "char_start": char_start,
        "char_end": char_end, "date_source": document.date_source});
    let title = indexed_title(document);
    if !title.is_empty() {
        metadata["title"] = serde_json::json!(title);
    }
    if let Some(pages) = pages_of(&document.page_starts, start, end) {
        metadata["pages"] = serde_json::json!(pages);
    }
    if document.ocr_spans.iter().any(|&(from, to)| from < end && start < to) {
        metadata["ocr"] = serde_json::Value::Bool(true);
    }
    if document.image_spans.iter().any(|&(from, to)| from < end && start < to) {
        metadata["image_described"] = serde_json::Value::Bool(true);
    }
    metadata
}

/// The first and last page a chunk spanning bytes `start..end` came from.
fn pages_of(page_starts: &[(u32, usize)], start: usize, end: usize) -> Option<[u32; 2]> {
    let page_at = |offset: usize| page_starts.iter().take_while(|(_, begins)| *begins <= offset).last().map(|p| p.0);
    let first = page_at(start).or_else(|| page_starts.first().map(|p| p.0))?;
    let last = page_at(end.saturating_sub(1).max(start)).unwrap_or(first);
    Some([first, last.max(first)])
}

/// Where the base embeds and with whose key; `Failed` when it cannot (no key, no service).
async fn target(state: &State, base: &KnowledgeBase) -> Result<Target, Attempt> {
    match target_for(&state.db, &state.vault, base).await? {
        Ok(target) => Ok(target),
        Err(refusal) => Err(Attempt::Failed(format!("embed: NoUsableCredential: {refusal}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_names_the_first_and_last_page_it_came_from() {
        let starts = [(1, 0), (2, 100), (3, 250)];
        assert_eq!(pages_of(&starts, 10, 90), Some([1, 1]));
        assert_eq!(pages_of(&starts, 90, 120), Some([1, 2]));
        assert_eq!(pages_of(&starts, 100, 250), Some([2, 2]), "a chunk ending where page 3 begins");
        assert_eq!(pages_of(&starts, 260, 300), Some([3, 3]));
        // A page skipped (unreadable) keeps the numbering of those around it.
        assert_eq!(pages_of(&[(1, 0), (3, 50)], 60, 70), Some([3, 3]));
        assert_eq!(pages_of(&[], 0, 10), None);
    }

    #[test]
    fn a_cached_vector_is_shared_only_by_the_same_target_and_tenant() {
        let (org, other_org, owner) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let scope = |provider: &str, model: &str, endpoint: &str, org: Option<Uuid>, owner: Uuid| {
            CacheScope::new(provider, model, endpoint, org, owner).key("The same paragraph.")
        };
        let base = scope("openai", "m", "https://a.example/v1", Some(org), owner);
        // Another member of the same organization, through the same target: shared.
        assert_eq!(base, scope("openai", "m", "https://a.example/v1", Some(org), Uuid::new_v4()));
        for other in [
            scope("openai", "m", "https://a.example/v1", Some(other_org), owner),
            scope("openai", "m", "https://b.example/v1", Some(org), owner),
            scope("openai", "m2", "https://a.example/v1", Some(org), owner),
            scope("endpoint", "m", "https://a.example/v1", Some(org), owner),
            scope("openai", "m", "https://a.example/v1", None, owner),
        ] {
            assert_ne!(base, other);
        }
        // Outside any organization each owner is a tenant of their own.
        assert_ne!(scope("local", "m", "u", None, owner), scope("local", "m", "u", None, Uuid::new_v4()));
        // No separator games: a field cannot absorb its neighbour.
        assert_ne!(scope("a", "b\0c", "d", None, owner), scope("a", "b", "c\0d", None, owner));
    }
}
