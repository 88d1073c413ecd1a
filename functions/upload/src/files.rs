//! Chat files: upload, read back, delete and link to a message. Ownership is the whole
//! rule: another user's file is answered exactly like an absent one.

use crate::bodies::{Hints, LINK_RULE, typed};
use crate::multipart::read_form;
use crate::{AppState, UploadError};
use bytes::Bytes;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_domain::{AttachmentRef, Caller, safe_filename, workspace_folder};
use sluice_store::{ChatFile, NewChatFile};
use sluice_web::{body_bytes, json_response};
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

/// The most files one message may take in one request.
const MAX_ATTACHMENTS_PER_REQUEST: usize = 100;

/// A file as the API answers it.
#[derive(Debug, Serialize)]
struct FileView {
    id: Uuid,
    filename: String,
    mime_type: String,
    size: i64,
    file_type: String,
    status: String,
    preview: Option<String>,
    checksum_sha256: Option<String>,
    rejection: Option<String>,
    /// Why an accepted file holds no text, or less than it shows (a parser that failed, OCR
    /// that ran out of time); `None` when nothing is amiss, or the file simply has none.
    parse_note: Option<String>,
    message_id: Option<Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(rename = "ref")]
    reference: AttachmentRef,
}

impl From<ChatFile> for FileView {
    fn from(file: ChatFile) -> Self {
        let dimensions = file.width.zip(file.height).map(|(w, h)| (w.max(0) as u32, h.max(0) as u32));
        let reference = AttachmentRef::new(
            file.id,
            &file.filename,
            &file.mime_type,
            file.size,
            file.checksum_sha256.as_deref().unwrap_or_default(),
            file.created_at,
            dimensions,
        )
        .with_hints(file.hints);
        let reference = if file.file_type == "archive" {
            reference.unpacked_into(workspace_folder(file.id, &file.filename))
        } else {
            reference
        };
        Self {
            id: file.id,
            filename: file.filename,
            mime_type: file.mime_type,
            size: file.size,
            file_type: file.file_type,
            status: file.status,
            preview: file.preview,
            checksum_sha256: file.checksum_sha256,
            rejection: file.rejection,
            parse_note: file.parse_note,
            message_id: file.message_id,
            created_at: file.created_at,
            reference,
        }
    }
}

/// `POST /files/upload`: validate, classify, parse, store encrypted, record, answer.
pub async fn upload(state: &AppState, caller: &Caller, request: Request) -> Result<Response<Body>, UploadError> {
    let content_type = request.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = match request.into_body() {
        Body::Binary(bytes) => Bytes::from(bytes),
        Body::Text(text) => Bytes::from(text),
        _ => Bytes::new(),
    };
    let (limit, inline_cap) = state.config.inline_limit(state.config.chat_max_upload_bytes);
    let (file, hints) =
        read_form::<Hints>(content_type.as_deref(), body, limit).await.map_err(|error| match error {
            UploadError::TooLarge { limit_bytes } if inline_cap => {
                UploadError::UsePresignedUpload { limit_bytes, route: "POST /api/v1/files/uploads" }
            }
            other => other,
        })?;
    let options = sluice_isolate::chat_options(&state.config);
    let tenant = sluice_extraction::Tenant::user(caller.user_id);
    let content = state
        .reader
        .inspect(
            &state.pool,
            &tenant,
            &file.filename,
            file.declared_mime.as_deref(),
            file.bytes.clone(),
            None,
            &options,
        )
        .await?
        .map_err(UploadError::Refused)?;
    let hints = hints.judged(content.file_type == "image")?;

    let id = Uuid::new_v4();
    let storage_path = format!("media/{}/{}_{}", caller.user_id, id.simple(), safe_filename(&file.filename));
    let new = NewChatFile { id, user_id: caller.user_id, filename: file.filename, storage_path, content, hints };
    let row = store_and_record(state, new, file.bytes).await?;
    Ok(json_response(201, &FileView::from(row)))
}

/// Writes the object and then its row, as one unit that outlives the request: a request
/// cancelled half-way still finishes (or undoes) the pair, so an object never stays
/// without its row nor a row without its object.
async fn store_and_record(state: &AppState, new: NewChatFile, bytes: Bytes) -> Result<ChatFile, UploadError> {
    let (db, blob) = (state.db.clone(), state.blob.clone());
    let unit = tokio::spawn(async move {
        blob.put_encrypted(&new.storage_path, bytes, &new.content.mime_type).await?;
        match db.insert_chat_file(&new).await {
            Ok(row) => Ok(row),
            Err(error) => {
                if let Err(cleanup) = blob.delete(&new.storage_path).await {
                    tracing::error!(error = ?cleanup, key = %new.storage_path, "could not remove an unrecorded object");
                }
                Err(UploadError::from(error))
            }
        }
    });
    unit.await.map_err(|_| UploadError::Blocking)?
}

async fn owned_file(state: &AppState, caller: &Caller, id: Uuid) -> Result<ChatFile, UploadError> {
    state.db.chat_file(id, caller.user_id).await?.ok_or(UploadError::NotFound("file"))
}

/// `GET /files/{id}`.
pub async fn get(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let file = owned_file(state, caller, id).await?;
    Ok(json_response(200, &FileView::from(file)))
}

/// `GET /files/{id}/content`: a redirect to a short-lived presigned download.
pub async fn content(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let file = owned_file(state, caller, id).await?;
    if file.status != "ready" {
        return Err(UploadError::NotFound("file"));
    }
    let ttl = Duration::from_secs(state.config.download_url_ttl_secs);
    let url = state.blob.presign_download(&file.storage_path, &file.filename, ttl).await?;
    Ok(sluice_web::presigned_redirect(url))
}

/// `GET /files/{id}/text`: the extracted text, `404` when the file has none.
pub async fn text(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let text = state.db.chat_file_text(id, caller.user_id).await?.ok_or(UploadError::NotFound("file"))?;
    let text = text.ok_or(UploadError::NotFound("file text"))?;
    Ok(Response::builder()
        .status(200)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Body::Text(text))
        .unwrap_or_else(|_| Response::new(Body::Empty)))
}

/// `GET /files/{id}/pages/{n}`: page `n` (from 1) of a TIFF as PNG, for the chat runner,
/// up to `CHAT_TIFF_MAX_INLINE_PAGES`. Anything else (not a TIFF, past the cap or the last
/// page) is the plain 404.
pub async fn page(state: &AppState, caller: &Caller, id: Uuid, n: u32) -> Result<Response<Body>, UploadError> {
    let file = owned_file(state, caller, id).await?;
    if file.mime_type != "image/tiff" || file.status != "ready" || n == 0 || n > state.config.chat_tiff_max_inline_pages
    {
        return Err(UploadError::NotFound("page"));
    }
    let bytes = state.blob.get(&file.storage_path, state.config.max_upload_bytes).await?;
    let png = state
        .pool
        .run(move || sluice_formats::tiff_pages::page_png(&bytes, n - 1))
        .await
        .map_err(|_| UploadError::Blocking)?
        .map_err(|_| UploadError::NotFound("page"))?;
    Ok(Response::builder()
        .status(200)
        .header("content-type", "image/png")
        .header("cache-control", "private, max-age=300")
        .body(Body::Binary(png))
        .unwrap_or_else(|_| Response::new(Body::Empty)))
}

/// `DELETE /files/{id}`: the row goes first, then the object; the row is restored when
/// the object cannot be removed.
pub async fn delete(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let blob = state.blob.clone();
    let deleted = state.db.delete_chat_file(id, caller.user_id, async |key: &str| blob.delete(key).await).await?;
    match deleted {
        Ok(true) => Ok(sluice_web::no_content()),
        Ok(false) => Err(UploadError::NotFound("file")),
        Err(blob_error) => Err(UploadError::Blob(blob_error)),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkRequest {
    file_ids: Option<Vec<String>>,
}

/// `POST /messages/{message_id}/attachments`: all of the caller's own unlinked, ready
/// files, or nothing.
pub async fn link(
    state: &AppState,
    caller: &Caller,
    message_id: &str,
    request: &Request,
) -> Result<Response<Body>, UploadError> {
    // Only the hyphenated form (36 characters): the braced, URN and bare forms `Uuid` also
    // reads would let one message be named many ways.
    let message_id = Some(message_id)
        .filter(|id| id.len() == 36)
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or_else(|| UploadError::invalid("message_id", "the message id must be a UUID (8-4-4-4-12 hex digits)"))?;
    let body: LinkRequest = typed(body_bytes(request))?;
    let file_ids = body.file_ids.ok_or_else(|| UploadError::invalid("file_ids", LINK_RULE))?;
    if file_ids.is_empty() {
        return Err(UploadError::invalid("file_ids", "name at least one file"));
    }
    if file_ids.len() > MAX_ATTACHMENTS_PER_REQUEST {
        return Err(UploadError::invalid("file_ids", format!("at most {MAX_ATTACHMENTS_PER_REQUEST} files at once")));
    }
    let mut ids: Vec<Uuid> = Vec::with_capacity(file_ids.len());
    for raw in &file_ids {
        let id = sluice_domain::attachment::parse_id(raw).ok_or_else(|| {
            UploadError::invalid("file_ids", format!("{raw:?} is neither a file id nor an attachment id"))
        })?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let refused = state.db.link_chat_files(message_id, caller.user_id, &ids).await?;
    if !refused.is_empty() {
        return Err(UploadError::NotAttachable(refused));
    }
    Ok(json_response(200, &json!({"message_id": message_id, "file_ids": ids})))
}
