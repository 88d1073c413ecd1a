//! Presigned uploads: `POST /files/uploads` judges the declared name, type and size by
//! the inline path's rules, records a `pending` row that expires, and answers a PUT whose
//! signature covers the exact length, the type and the encryption. The bytes are judged
//! again by the `parse` function when they land.

use crate::{AppState, UploadError};
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sluice_domain::{CHAT_UPLOAD_PREFIX, Caller, ImageHints, safe_filename};
use sluice_formats::RefusalCode;
use sluice_store::NewUploadIntent;
use sluice_web::{body_bytes, json_response};
use std::collections::BTreeMap;
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Debug, Deserialize)]
struct IntentRequest {
    filename: Option<serde_json::Value>,
    size: Option<serde_json::Value>,
    mime_type: Option<serde_json::Value>,
    vision: Option<serde_json::Value>,
    vision_model: Option<serde_json::Value>,
    gallery_id: Option<serde_json::Value>,
}

#[derive(Debug, Serialize)]
struct UploadInstructions {
    method: &'static str,
    url: String,
    headers: BTreeMap<String, String>,
    #[serde(with = "time::serde::rfc3339")]
    expires_at: OffsetDateTime,
}

#[derive(Debug, Serialize)]
struct IntentView {
    id: Uuid,
    status: &'static str,
    upload: UploadInstructions,
}

/// `POST /files/uploads`.
pub async fn create(state: &AppState, caller: &Caller, request: &Request) -> Result<Response<Body>, UploadError> {
    let body: IntentRequest = serde_json::from_slice(body_bytes(request))
        .map_err(|_| UploadError::invalid("body", "the body must be a JSON object {filename, size, mime_type} (and for an image vision, vision_model, gallery_id)"))?;
    let filename = match body.filename {
        Some(serde_json::Value::String(name)) if !name.trim().is_empty() => name,
        _ => return Err(UploadError::invalid("filename", "filename must be a non-empty string")),
    };
    crate::multipart::filename_fits("filename", &filename)?;
    let mime_type = match body.mime_type {
        Some(serde_json::Value::String(mime)) if !mime.trim().is_empty() => mime,
        _ => return Err(UploadError::invalid("mime_type", "mime_type must be a non-empty string")),
    };
    let size = match body.size.as_ref().and_then(serde_json::Value::as_u64) {
        Some(size) if size > 0 => size,
        _ => return Err(UploadError::invalid("size", "size must be a positive whole number of bytes")),
    };
    let kind = sluice_formats::check_declared(&filename, Some(&mime_type)).map_err(|refusal| {
        let field = if refusal.code == RefusalCode::DeclaredTypeMismatch { "mime_type" } else { "filename" };
        UploadError::DeclarationRefused(field, refusal)
    })?;
    if size > state.config.chat_max_upload_bytes {
        return Err(UploadError::DeclaredTooLarge { limit_bytes: state.config.chat_max_upload_bytes });
    }
    // JSON gives the hints typed: a boolean and strings, read as the form's text.
    let text = |value: &Option<serde_json::Value>| match value {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(text)) => Some(text.clone()),
        Some(serde_json::Value::Bool(flag)) => Some(flag.to_string()),
        Some(other) => Some(format!("{other} (not a string)")),
    };
    let (vision, vision_model, gallery_id) = (text(&body.vision), text(&body.vision_model), text(&body.gallery_id));
    let is_image = kind.file_type == sluice_formats::FileType::Image;
    let hints = ImageHints::parse(vision.as_deref(), vision_model.as_deref(), gallery_id.as_deref(), is_image)
        .map_err(|(name, why)| UploadError::invalid(name, why))?;
    let id = Uuid::new_v4();
    let ttl = Duration::from_secs(state.config.upload_intent_ttl_secs);
    let expires_at = OffsetDateTime::now_utc() + ttl;
    let storage_path = format!("{CHAT_UPLOAD_PREFIX}{}/{}_{}", caller.user_id, id.simple(), safe_filename(&filename));
    let presigned = state.blob.presign_upload(&storage_path, size, kind.canonical_mime, ttl).await?;
    let intent = NewUploadIntent {
        id,
        user_id: caller.user_id,
        filename,
        mime_type: kind.canonical_mime.to_owned(),
        size: size as i64,
        storage_path,
        file_type: kind.file_type.as_str().to_owned(),
        expires_at,
        hints,
    };
    state.db.insert_upload_intent(&intent).await?;
    let headers = presigned.headers.into_iter().collect();
    let upload = UploadInstructions { method: "PUT", url: presigned.url, headers, expires_at };
    Ok(json_response(201, &IntentView { id, status: "pending", upload }))
}
