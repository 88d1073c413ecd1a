//! Knowledge-base documents: `POST /kb/{kb_id}/documents` and
//! `POST /rag/collections/{name}/ingest`. Before anything is stored: write access to the
//! base, the teardown reservation, a format ingestion can route, bytes that are what the
//! name says, and the upload's chunking override merged onto the base's and judged as a
//! whole. Then the original is stored, the tracking row and its outbox row are committed
//! together, and the parse job is sent after the commit (the sweep re-sends it if that
//! send fails). The answer is `202` with every field of `RAGIngestResponse`. With
//! `replace=true` the document, once indexed, retires the base's earlier documents of the
//! same filename (their rows, chunks and stored copies); without it nothing is retired: a
//! filename is not an address, and two uploads of one name may both be meant.

use crate::bodies::{Declared, DocumentIntent, DocumentOptions};
use crate::multipart::read_form;
use crate::{AppState, UploadError};
use bytes::Bytes;
use lambda_http::{Body, Request, Response};
use serde_json::json;
use sha2::Digest;
use sluice_domain::access::{self, Access};
use sluice_domain::ingestion::{IngestionConfig, IngestionConfigError, LLAMAPARSE_FILETYPES, Parser};
use sluice_domain::{Caller, safe_filename};
use sluice_store::{Accepted, DOCUMENT_UPLOAD_PREFIX, Document, KnowledgeBase, PARSE_DOCUMENT_TOPIC};
use sluice_web::json_response;
use time::OffsetDateTime;
use uuid::Uuid;

/// Which base an upload names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Base(Uuid),
    Collection(String),
}

/// The base the caller may write, or exactly "Collection not found".
async fn writable_base(state: &AppState, caller: &Caller, target: &Target) -> Result<KnowledgeBase, UploadError> {
    let not_found = || UploadError::NotFound("collection");
    match target {
        Target::Base(id) => {
            let held = state.db.knowledge_base(*id, caller.user_id).await?.ok_or_else(not_found)?;
            match access::decide(caller, &held.base.ownership(), held.grant) {
                Access::Edit => Ok(held.base),
                _ => Err(not_found()),
            }
        }
        Target::Collection(name) => {
            let holders = state.db.bases_named(name, caller.user_id).await?.into_iter().map(|held| {
                let ownership = held.base.ownership();
                (held.base, ownership, held.grant)
            });
            access::resolve_named(caller, holders, Access::Edit).map(|(base, _)| base).ok_or_else(not_found)
        }
    }
}

/// `POST /kb/{kb_id}/documents` and `POST /rag/collections/{name}/ingest`.
pub async fn ingest(
    state: &AppState,
    caller: &Caller,
    target: Target,
    request: Request,
) -> Result<Response<Body>, UploadError> {
    let base = writable_base(state, caller, &target).await?;
    if state.db.teardown_reserved(&base.collection_name).await? {
        return Err(reserved());
    }
    let content_type = request.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = match request.into_body() {
        Body::Binary(bytes) => Bytes::from(bytes),
        Body::Text(text) => Bytes::from(text),
        _ => Bytes::new(),
    };
    let (limit, inline_cap) = state.config.inline_limit(state.config.max_upload_bytes);
    let (file, options) =
        read_form::<DocumentOptions>(content_type.as_deref(), body, limit).await.map_err(|error| match error {
            UploadError::TooLarge { limit_bytes } if inline_cap => {
                UploadError::UsePresignedUpload { limit_bytes, route: "POST /api/v1/kb/{kb_id}/documents/uploads" }
            }
            UploadError::TooLarge { limit_bytes } => UploadError::DocumentTooLarge { limit_bytes },
            other => other,
        })?;

    let kind = sluice_formats::kind_for_filename(&file.filename).filter(|k| sluice_formats::ingestible(k));
    if kind.is_none() {
        return Err(UploadError::Refused(sluice_formats::Refusal {
            code: sluice_formats::RefusalCode::ExtensionNotAllowed,
            message: format!(
                "{:?} is not a format ingestion can read; GET /rag/supported-formats lists them",
                file.filename
            ),
        }));
    }
    let accepted = sluice_formats::check_upload(&file.filename, file.declared_mime.as_deref(), &file.bytes)
        .map_err(UploadError::Refused)?;
    let config = chunking(state, caller, &base, options.ingestion.as_ref()).await?;
    parser_reads(&config, &file.filename)?;
    let DocumentOptions { organizational_unit: unit, replace: replace_previous, .. } = options;

    let id = Uuid::new_v4();
    let storage_path = format!("documents/{}/{}/{}", base.id, id.simple(), safe_filename(&file.filename));
    let document = Document {
        id,
        collection_name: base.collection_name.clone(),
        kb_id: Some(base.id),
        org_id: base.org_id,
        owner_id: Some(caller.user_id),
        filename: file.filename.clone(),
        filesize: file.bytes.len() as i64,
        filetype: accepted.kind.extension.to_owned(),
        mime_type: Some(accepted.canonical_mime().to_owned()),
        status: "processing".to_owned(),
        error_message: None,
        vector_document_id: None,
        chunk_count: 0,
        storage_path: Some(storage_path.clone()),
        parsed_path: None,
        parsed_format: None,
        reparse_pending: false,
        organizational_unit: unit,
        source: "upload".to_owned(),
        document_date: OffsetDateTime::now_utc().date(),
        date_source: "upload".to_owned(),
        truncated_chunks: 0,
        title: None,
        content_hash: Some(hex::encode(sha2::Sha256::digest(&file.bytes))),
        ingestion_config: config.to_value(),
        replace_previous,
        source_path: None,
        sync: None,
        ocr_spans: Vec::new(),
        ocr_low_confidence_lines: 0,
        image_spans: Vec::new(),
        images: None,
        parser_job: None,
        parser_pages: None,
        page_starts: Vec::new(),
        // Checked above, before the row exists.
        bytes_judged: true,
        created_at: OffsetDateTime::now_utc(),
        completed_at: None,
    };
    let outbox_id = store_and_accept(state, &document, file.bytes, accepted.canonical_mime()).await?;
    // After the commit: a failed send is the sweep's to repeat, never the caller's problem.
    dispatch(state, outbox_id, id).await;
    Ok(json_response(
        202,
        &json!({
            "status": "processing",
            "tracking_id": id,
            "document_id": null,
            "filename": document.filename,
            "collection_name": base.collection_name,
            "kb_id": base.id,
            "message": "the document is being processed; GET /kb/{kb_id}/ingestion reports when it is indexed",
        }),
    ))
}

fn reserved() -> UploadError {
    UploadError::Conflict {
        field: "collection_name",
        message: "the collection is being torn down; upload again once it is recreated".to_owned(),
    }
}

/// The base's chunking with the upload's override merged on, judged as a whole; an
/// override whose chunks the base's model would cut is refused (the base's own setting was
/// judged when it was set).
/// An image description the override sets is checked for what it lends, as on the base.
async fn chunking(
    state: &AppState,
    caller: &Caller,
    base: &KnowledgeBase,
    changes: Option<&serde_json::Value>,
) -> Result<IngestionConfig, UploadError> {
    let base_config = base.chunking();
    let Some(value) = changes else { return Ok(base_config) };
    let refused = |e: IngestionConfigError| UploadError::InvalidFields { message: e.message(), fields: e.fields };
    let merged = IngestionConfig::merged(base_config, value).map_err(refused)?;
    if let Some(model) = base.model() {
        merged.fits(model).map_err(refused)?;
    }
    merged.within(state.config.document_parse_time_limit).map_err(|e| refused(e.as_sent(value)))?;
    if let Err((field, why)) =
        sluice_vision::check_requested(&state.db, caller, base.org_id, Some(value), &merged).await?
    {
        return Err(UploadError::InvalidFields { message: format!("{field}: {why}"), fields: vec![(field, why)] });
    }
    Ok(merged)
}

/// A collection read by LlamaParse takes only the formats LlamaParse reads.
fn parser_reads(config: &IngestionConfig, filename: &str) -> Result<(), UploadError> {
    let extension = sluice_formats::kind_for_filename(filename).map(|kind| kind.extension).unwrap_or_default();
    if config.parser == Parser::Llamaparse && !LLAMAPARSE_FILETYPES.contains(&extension) {
        return Err(UploadError::invalid(
            "file",
            format!(
                "{filename:?} is not a format LlamaParse reads, and this collection parses with it; \
                 GET /rag/supported-formats?parser=llamaparse lists them"
            ),
        ));
    }
    Ok(())
}

/// Stores the original, then commits the row with its outbox row; undoes the object when
/// the row cannot be written. Runs as one unit that outlives a cancelled request.
async fn store_and_accept(
    state: &AppState,
    document: &Document,
    bytes: Bytes,
    mime: &str,
) -> Result<Uuid, UploadError> {
    let (db, blob, document, mime) = (state.db.clone(), state.blob.clone(), document.clone(), mime.to_owned());
    let unit = tokio::spawn(async move {
        let key = document.storage_path.clone().unwrap_or_default();
        blob.put_encrypted(&key, bytes, &mime).await?;
        let outcome = db.accept_document(&document).await;
        let undo = || async {
            if let Err(cleanup) = blob.delete(&key).await {
                tracing::error!(error = ?cleanup, key, "could not remove an unrecorded document");
            }
        };
        match outcome {
            Ok(Accepted::Recorded { outbox_id }) => Ok(outbox_id),
            Ok(Accepted::BaseGone) => {
                undo().await;
                Err(UploadError::NotFound("collection"))
            }
            Ok(Accepted::Reserved) => {
                undo().await;
                Err(reserved())
            }
            Err(error) => {
                undo().await;
                Err(UploadError::from(error))
            }
        }
    });
    unit.await.map_err(|_| UploadError::Blocking)?
}

/// `POST /kb/{kb_id}/documents/uploads` `{filename, size, mime_type, ingestion?,
/// organizational_unit?}`: the same checks as the inline path on what is declared, a row
/// that waits for its bytes until the link expires, and a presigned PUT whose signature
/// covers the exact length, the type and the encryption. The bytes are judged again when
/// they land (by `parse`), and their arrival starts the ingestion.
pub async fn create_intent(
    state: &AppState,
    caller: &Caller,
    kb_id: Uuid,
    request: &Request,
) -> Result<Response<Body>, UploadError> {
    let base = writable_base(state, caller, &Target::Base(kb_id)).await?;
    if state.db.teardown_reserved(&base.collection_name).await? {
        return Err(reserved());
    }
    let DocumentIntent { declared: Declared { filename, size, mime_type }, options } =
        DocumentIntent::read(sluice_web::body_bytes(request))?;
    let kind = sluice_formats::check_declared(&filename, Some(&mime_type)).map_err(|refusal| {
        let field =
            if refusal.code == sluice_formats::RefusalCode::DeclaredTypeMismatch { "mime_type" } else { "filename" };
        UploadError::DeclarationRefused(field, refusal)
    })?;
    if !sluice_formats::ingestible(kind) {
        return Err(UploadError::DeclarationRefused(
            "filename",
            sluice_formats::Refusal {
                code: sluice_formats::RefusalCode::ExtensionNotAllowed,
                message: format!(
                    "{filename:?} is not a format ingestion can read; GET /rag/supported-formats lists them"
                ),
            },
        ));
    }
    if size > state.config.max_upload_bytes {
        return Err(UploadError::DeclaredDocumentTooLarge { limit_bytes: state.config.max_upload_bytes });
    }
    let config = chunking(state, caller, &base, options.ingestion.as_ref()).await?;
    parser_reads(&config, &filename)?;
    let DocumentOptions { organizational_unit: unit, replace: replace_previous, .. } = options;

    let id = Uuid::new_v4();
    let ttl = std::time::Duration::from_secs(state.config.upload_intent_ttl_secs);
    let expires_at = OffsetDateTime::now_utc() + ttl;
    let storage_path = format!("{DOCUMENT_UPLOAD_PREFIX}{}/{}/{}", base.id, id.simple(), safe_filename(&filename));
    let presigned = state.blob.presign_upload(&storage_path, size, kind.canonical_mime, ttl).await?;
    let document = Document {
        id,
        collection_name: base.collection_name.clone(),
        kb_id: Some(base.id),
        org_id: base.org_id,
        owner_id: Some(caller.user_id),
        filename: filename.clone(),
        filesize: size as i64,
        filetype: kind.extension.to_owned(),
        mime_type: Some(kind.canonical_mime.to_owned()),
        status: "processing".to_owned(),
        error_message: None,
        vector_document_id: None,
        chunk_count: 0,
        storage_path: Some(storage_path),
        parsed_path: None,
        parsed_format: None,
        reparse_pending: false,
        organizational_unit: unit,
        source: "upload".to_owned(),
        document_date: OffsetDateTime::now_utc().date(),
        date_source: "upload".to_owned(),
        truncated_chunks: 0,
        title: None,
        content_hash: None,
        ingestion_config: config.to_value(),
        replace_previous,
        source_path: None,
        sync: None,
        ocr_spans: Vec::new(),
        ocr_low_confidence_lines: 0,
        image_spans: Vec::new(),
        images: None,
        parser_job: None,
        parser_pages: None,
        page_starts: Vec::new(),
        // Judged only when they land.
        bytes_judged: false,
        created_at: OffsetDateTime::now_utc(),
        completed_at: None,
    };
    match state.db.accept_document_intent(&document, expires_at).await? {
        Accepted::Recorded { .. } => {}
        Accepted::BaseGone => return Err(UploadError::NotFound("collection")),
        Accepted::Reserved => return Err(reserved()),
    }
    let headers: std::collections::BTreeMap<String, String> = presigned.headers.into_iter().collect();
    let expires = expires_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    Ok(json_response(
        201,
        &json!({
            "status": "processing",
            "tracking_id": id,
            "document_id": null,
            "filename": filename,
            "collection_name": base.collection_name,
            "kb_id": base.id,
            "message": "PUT the bytes to upload.url with exactly upload.headers; ingestion starts when they land",
            "upload": {"method": "PUT", "url": presigned.url, "headers": headers, "expires_at": expires},
        }),
    ))
}

/// A document the caller may write (through its base), or exactly "Document not found".
async fn writable_document(state: &AppState, caller: &Caller, id: Uuid) -> Result<Document, UploadError> {
    crate::readback::document_for(state, caller, id, Access::Edit).await
}

/// `POST /rag/documents/{id}/retry`: a failed document is read again from its stored
/// original; `400` for one that did not fail or has no original.
pub async fn retry(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let document = writable_document(state, caller, id).await?;
    if document.status != "error" {
        return Err(UploadError::invalid("document_id", format!("the document is {}, not failed", document.status)));
    }
    if document.storage_path.is_none() {
        return Err(UploadError::invalid("document_id", "the document has no stored original to read again"));
    }
    if state.db.teardown_reserved(&document.collection_name).await? {
        return Err(reserved());
    }
    let Some(outbox_id) = state.db.retry_document(id).await? else {
        return Err(UploadError::invalid("document_id", "the document is no longer failed"));
    };
    dispatch(state, outbox_id, id).await;
    Ok(json_response(
        202,
        &json!({"status": "processing", "tracking_id": id, "document_id": null, "filename": document.filename,
            "collection_name": document.collection_name, "kb_id": document.kb_id,
            "message": "the document is being processed again"}),
    ))
}

/// `DELETE /rag/documents/{id}`: the row and its chunks first (waiting for a write in
/// flight), with the removal of its stored original and parsed text queued, then run.
pub async fn delete(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    writable_document(state, caller, id).await?;
    let Some((_, removal)) = state.db.delete_document(id).await? else {
        return Err(UploadError::NotFound("document"));
    };
    // The row is gone; its objects' removal was queued with the delete, and one that fails
    // here is the sweep's to finish.
    if let Some(removal) = removal {
        state.db.remove_now_or_later(removal, move |key| async move { state.blob.delete(&key).await }).await;
    }
    Ok(sluice_web::no_content())
}

/// Sends a committed outbox row's job, marking it sent; a failure is the sweep's to repeat.
async fn dispatch(state: &AppState, outbox_id: Uuid, id: Uuid) {
    let job = json!({"document_id": id});
    match state.dispatcher.send(PARSE_DOCUMENT_TOPIC, &job).await {
        Ok(()) => {
            if let Err(error) = state.db.mark_dispatched(outbox_id).await {
                tracing::warn!(error = %error, %id, "sent but not marked; the sweep may send it again");
            }
        }
        Err(error) => tracing::warn!(error = %error, %id, "parse job not sent; the sweep will send it"),
    }
}

/// `GET /rag/supported-formats`: exactly what ingestion can route here; with
/// `?parser=llamaparse`, what a collection read by LlamaParse takes. The reference product's
/// `pymupdf` and `liteparse` are read by Sluice's parsers, so they answer Sluice's formats,
/// with the output each of them writes by default.
pub fn supported_formats(parser: Option<&str>) -> Result<Response<Body>, UploadError> {
    let dotted = |e: &str| format!(".{e}");
    let (llamaparse, default_output) = match parser {
        None | Some("sluice") | Some("liteparse") => (false, sluice_domain::ingestion::OutputFormat::default()),
        Some("pymupdf") => (false, sluice_domain::ingestion::OutputFormat::Text),
        Some("llamaparse") => (true, sluice_domain::ingestion::OutputFormat::Markdown),
        Some(_) => {
            return Err(UploadError::invalid(
                "parser",
                "parser must be sluice or llamaparse (or the reference's pymupdf or liteparse)",
            ));
        }
    };
    let extensions: Vec<String> = sluice_formats::ingestible_extensions()
        .into_iter()
        .filter(|e| !llamaparse || LLAMAPARSE_FILETYPES.contains(e))
        .map(dotted)
        .collect();
    if llamaparse {
        return Ok(json_response(
            200,
            &json!({"parser": "llamaparse", "formats": extensions,
                "output_formats": {"markdown": extensions, "text": []}, "default_output_format": "markdown"}),
        ));
    }
    let markdown: Vec<String> = sluice_formats::kinds::MARKDOWN_EXTENSIONS.iter().map(|e| dotted(e)).collect();
    Ok(json_response(
        200,
        &json!({
            "parser": "sluice",
            "formats": extensions,
            "output_formats": {"markdown": markdown, "text": extensions},
            "default_output_format": default_output.as_str(),
        }),
    ))
}
