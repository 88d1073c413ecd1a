//! Knowledge-base documents: a `parse-document` job names a tracking row; its stored
//! original is read in a worker under the deployment's document budget, the text goes to
//! `parsed/{document_id}` under SSE-KMS, and the `ingest` job is sent. A document that
//! cannot be read is failed on its row with the stage, the type and advice; the message is
//! acknowledged. A redelivered job re-parses and re-sends, which ingest takes once. Round
//! robin between tenants: a delivery whose tenant has no fewer documents parsing than
//! another tenant with one waiting sends its job to the back of the queue and parses that
//! one instead.

use crate::{ParseError, State};
use sluice_blob::BlobError;
use sluice_domain::ingestion::{IngestionConfig, OutputFormat, Parser};
use sluice_domain::vision::ImageDescription;
use sluice_formats::budget::TextBudget;
use sluice_formats::images::ImageOptions;
use sluice_formats::{ExtractOptions, Extraction, OcrAlphabet, OcrOptions};
use sluice_queue::jobs::{DocumentJob, STAGE_LEASE};
use sluice_store::{Document, PARSE_DOCUMENT_TOPIC, ParsedText, Stage, Turn};
use sluice_vision::Parsed;
use sluice_web::stage_span;
use tracing::Instrument;

/// Where a document's parsed text is kept.
pub fn parsed_key(document: &Document) -> String {
    format!("parsed/{}", document.id)
}

async fn fail(state: &State, document: &Document, kind: &str, advice: &str) -> Result<(), ParseError> {
    let message = format!("parse: {kind}: {advice}");
    if state.db.fail_document(document.id, &message).await? {
        tracing::info!(id = %document.id, message, "document failed");
    }
    Ok(())
}

pub async fn parse_document(state: &State, job: DocumentJob) -> Result<(), ParseError> {
    let Some(document) = state.db.document(job.document_id).await? else {
        tracing::info!(id = %job.document_id, "document deleted before parsing; nothing to do");
        return Ok(());
    };
    if document.status != "processing" {
        return Ok(());
    }
    // Fairness: round robin between tenants (`Db::take_turn`).
    match state.db.take_turn(document.id, Stage::Parse, job.may_yield(), STAGE_LEASE).await? {
        Turn::Go => {}
        Turn::NotProcessing => return Ok(()),
        Turn::Yield { instead } => {
            // To the back of the queue, and this delivery parses the other tenant's document
            // now; its own job, still queued, finds it parsed (or parses it again, harmlessly).
            state
                .dispatcher
                .yield_turn(PARSE_DOCUMENT_TOPIC, &job)
                .await
                .map_err(|e| ParseError::Dispatch(e.to_string()))?;
            if let Some(other) = instead {
                // This delivery's own job is already re-sent: nothing here may fail it.
                let parsed = match state.db.document(other).await {
                    Ok(Some(other)) if other.status == "processing" => parse_taken(state, &other).await,
                    Ok(_) => Ok(()),
                    Err(error) => Err(error.into()),
                };
                if let Err(error) = parsed {
                    tracing::warn!(id = %other, error = %error, "parsing in another's turn failed for now; its own job retries");
                }
            }
            return Ok(());
        }
    }
    parse_taken(state, &document).await
}

/// Parses a document whose turn it is.
async fn parse_taken(state: &State, document: &Document) -> Result<(), ParseError> {
    if document.parsed_path.is_some() && !document.reparse_pending {
        // Parsed already, by another tenant's delivery in this one's turn or by an earlier
        // delivery that stopped before ingest's job went: that job is all that is left, and
        // the original (a synced object: a download counted to its run) is not read again.
        return send_ingest(state, document).await;
    }
    if document.storage_path.is_none() && document.sync.is_some() {
        return match crate::sync::fetch_document(state, document).await? {
            Some(bytes) => parse_bytes(state, document, bytes).await,
            None => Ok(()),
        };
    }
    let Some(key) = document.storage_path.clone() else {
        return fail(state, document, "NoOriginal", "the document has no stored original; upload it again").await;
    };
    let limit = u64::try_from(document.filesize).unwrap_or_default();
    let bytes = match state.blob.get(&key, limit).instrument(stage_span("parse", "download", &document.id)).await {
        Ok(bytes) => bytes,
        Err(BlobError::NotFound) => {
            return fail(state, document, "OriginalMissing", "the stored original is gone; upload the document again")
                .await;
        }
        Err(BlobError::TooLarge { .. }) => {
            return fail(
                state,
                document,
                "OriginalChanged",
                "the stored original is not the one uploaded; upload again",
            )
            .await;
        }
        Err(error) => return Err(error.into()),
    };
    parse_bytes(state, document, bytes).await
}

/// A presigned document upload landed: its bytes are judged as the inline path judges
/// them (the declared size exactly, the sniffed type against the name), then parsed. A
/// refused object is deleted; an object no document waits for is deleted too.
pub async fn document_landed(state: &State, key: &str) -> Result<(), ParseError> {
    let Some(document) = state.db.document_by_storage_path(key).await? else {
        tracing::warn!(key, "a document object no upload asked for; deleted");
        state.blob.delete(key).await?;
        return Ok(());
    };
    if document.status != "processing" || document.parsed_path.is_some() {
        return Ok(());
    }
    let declared = u64::try_from(document.filesize).unwrap_or_default();
    let bytes = match state.blob.get(key, declared).instrument(stage_span("parse", "download", &document.id)).await {
        Ok(bytes) if bytes.len() as u64 == declared => bytes,
        Ok(_) | Err(BlobError::TooLarge { .. }) => {
            fail(state, &document, "size_mismatch", "the bytes that landed are not the size declared; upload again")
                .await?;
            state.blob.delete(key).await?;
            return Ok(());
        }
        Err(BlobError::NotFound) => return Ok(()),
        Err(error) => return Err(error.into()),
    };
    if let Err(refusal) = sluice_formats::check_upload(&document.filename, document.mime_type.as_deref(), &bytes) {
        let advice = format!("{}; upload a file that is what its name says", refusal.message);
        fail(state, &document, refusal.code.as_str(), &advice).await?;
        state.blob.delete(key).await?;
        return Ok(());
    }
    state.db.mark_bytes_judged(document.id).await?;
    parse_bytes(state, &document, bytes).await
}

/// How a document is read: its collection's page limit and OCR settings, within the
/// deployment's document budgets. OCR reads every scanned page up to `max_pages`.
fn document_options(config: &sluice_domain::Config, ingestion: &IngestionConfig) -> ExtractOptions {
    let describing = ImageDescription::active(ingestion.image_description.as_ref());
    let mut options = ExtractOptions::new(config.document_text_max_chars)
        .with_markdown(ingestion.output_format == OutputFormat::Markdown)
        .with_images(describing.map(|s| ImageOptions { max_images: s.max_images }))
        .with_max_pages(ingestion.max_pages)
        .with_ocr(ingestion.auto_ocr.then_some(OcrOptions {
            dpi: ingestion.ocr_dpi,
            max_pages: ingestion.max_pages,
            alphabet: OcrAlphabet::for_languages(&ingestion.ocr_languages),
        }));
    options.time_limit = ingestion.parse_time_limit(config.document_parse_time_limit);
    options.limits = sluice_isolate::archive_limits(config);
    options
}

/// Extracts a document's text (with Sluice's parsers or the collection's cloud parser),
/// stores it and sends the ingest job.
pub(crate) async fn parse_bytes(state: &State, document: &Document, bytes: bytes::Bytes) -> Result<(), ParseError> {
    let Some(kind) = sluice_formats::kind_for_filename(&document.filename) else {
        return fail(state, document, "UnsupportedFormat", "ingestion cannot read this format").await;
    };
    let max_chars = state.config.document_text_max_chars;
    // Only the reading settings are used here, and no model changes them.
    let ingestion = IngestionConfig::from_stored(Some(&document.ingestion_config), None).unwrap_or_default();
    let options = document_options(&state.config, &ingestion);
    let mut parser_pages = None;
    let extraction = if ingestion.parser == Parser::Llamaparse {
        match crate::llamaparse::parse(state, document, &ingestion, bytes).await? {
            crate::llamaparse::Outcome::Parsed { text, page_starts, pages_billed } => {
                parser_pages = Some(pages_billed);
                let mut budget =
                    TextBudget::new(max_chars, ingestion.parse_time_limit(state.config.document_parse_time_limit));
                let _ = budget.push(&text);
                let (text, truncated) = budget.finish();
                let page_starts = page_starts.into_iter().map(|(page, at)| (page, at.min(text.len()))).collect();
                Extraction { text: Some(text), truncated, page_starts, markdown: true, ..Extraction::default() }
            }
            crate::llamaparse::Outcome::Failed { kind, advice } => return fail(state, document, kind, &advice).await,
            crate::llamaparse::Outcome::Pending => {
                let again = serde_json::json!({"document_id": document.id});
                let delay = i32::try_from(state.config.parser_poll_time_limit.as_secs()).unwrap_or(i32::MAX);
                return state
                    .dispatcher
                    .send_later(PARSE_DOCUMENT_TOPIC, &again, delay)
                    .await
                    .map_err(|e| ParseError::Dispatch(e.to_string()));
            }
        }
    } else {
        let tenant = sluice_extraction::Tenant::owner(document.org_id, document.owner_id);
        let span = stage_span("parse", "extract", &document.id);
        let extracted = state
            .reader
            .extract(&state.pool, &tenant, kind, bytes, document.storage_path.as_deref(), &options)
            .instrument(span.clone())
            .await?;
        match extracted {
            Ok(extraction) => {
                span.record("pages", extraction.pages.unwrap_or(0));
                span.record("ocr_pages", extraction.ocr_pages.unwrap_or(0));
                span.record("ocr_ms", extraction.ocr_ms.unwrap_or(0));
                extraction
            }
            Err(refusal) => {
                // A file the reader refused (an unsafe archive, say) is never handed out.
                state.db.mark_bytes_refused(document.id).await?;
                let advice = format!("{}; upload a file that is what its name says", refusal.message);
                return fail(state, document, refusal.code.as_str(), &advice).await;
            }
        }
    };
    let low_confidence_lines = extraction.ocr_low_confidence_lines.unwrap_or(0);
    let (format, content_type) = if extraction.markdown {
        (OutputFormat::Markdown, "text/markdown; charset=utf-8")
    } else {
        (OutputFormat::Text, "text/plain; charset=utf-8")
    };
    let own_date = extraction.date;
    let metadata_title = extraction.title;
    let unreadable = extraction.unreadable;
    let read = Parsed {
        text: extraction.text.unwrap_or_default(),
        page_starts: extraction.page_starts,
        ocr_spans: extraction.ocr_spans,
        image_spans: Vec::new(),
    };
    let images = (extraction.images, extraction.images_skipped);
    let setting = ImageDescription::active(ingestion.image_description.as_ref());
    let described = crate::images::describe(state, document, format, setting, read, images)
        .instrument(stage_span("parse", "describe", &document.id))
        .await?;
    let Parsed { text, page_starts, ocr_spans, image_spans } = described.parsed;
    // A picture with no words of its own is read by its description.
    let Some(text) = Some(text).filter(|t| !t.trim().is_empty()) else {
        let why = unreadable.unwrap_or_else(|| "the document holds no text".to_owned());
        let advice = if options.ocr.is_some() {
            format!("{why}; upload a version with a text layer or a clearer scan")
        } else {
            format!("{why}; upload a version with a text layer, or turn on the collection's auto_ocr")
        };
        return fail(state, document, "UnreadableDocument", &advice).await;
    };
    if extraction.truncated {
        tracing::warn!(id = %document.id, max_chars, "document text cut at the budget");
    }
    let outline = sluice_chunk::context::Outline::of(&document.filetype, format == OutputFormat::Markdown);
    let title = sluice_chunk::context::document_title(
        metadata_title.as_deref(),
        &text,
        outline,
        &document.filetype,
        &document.filename,
    );
    let parsed = parsed_key(document);
    state
        .blob
        .put_encrypted(&parsed, bytes::Bytes::from(text), content_type)
        .instrument(stage_span("parse", "store", &document.id))
        .await?;
    let recorded = ParsedText {
        path: &parsed,
        format,
        ocr_spans: &ocr_spans,
        ocr_low_confidence_lines: low_confidence_lines,
        page_starts: &page_starts,
        own_date: own_date.map(|own| (own.date, own.source.as_str())),
        image_spans: &image_spans,
        images: described.report,
        parser_pages,
        title: title.map(|(title, source)| (title, source.as_str())),
    };
    if !state.db.set_parsed_path(document.id, &recorded).await? {
        // Deleted while it was parsed: what was just written is garbage. The removal is
        // queued first, so it outlives a failure here and the sweep finishes it.
        let objects = [parsed];
        if let Some(removal) = state.db.queue_removal(&objects, "document deleted while parsing").await? {
            state.db.remove_now_or_later(removal, move |key| async move { state.blob.delete(&key).await }).await;
        }
        tracing::info!(id = %document.id, "document deleted while parsing; its text removed");
        return Ok(());
    }
    send_ingest(state, document).await?;
    tracing::info!(id = %document.id, "document parsed; ingest queued");
    Ok(())
}

/// Sends a parsed document's ingest job (ingest takes a document once, however often).
async fn send_ingest(state: &State, document: &Document) -> Result<(), ParseError> {
    state
        .dispatcher
        .send("ingest", &serde_json::json!({"document_id": document.id}))
        .await
        .map_err(|e| ParseError::Dispatch(e.to_string()))
}
