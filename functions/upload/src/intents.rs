//! Presigned uploads: `POST /files/uploads` judges the declared name, type and size by
//! the inline path's rules, records a `pending` row that expires, and answers a PUT whose
//! signature covers the exact length, the type and the encryption. The bytes are judged
//! again by the `parse` function when they land.

use crate::bodies::{ChatIntent, Declared};
use crate::{AppState, UploadError};
use lambda_http::{Body, Request, Response};
use serde::Serialize;
use sluice_domain::{CHAT_UPLOAD_PREFIX, Caller, safe_filename};
use sluice_formats::RefusalCode;
use sluice_store::NewUploadIntent;
use sluice_web::{body_bytes, json_response};
use std::collections::BTreeMap;
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

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
    let ChatIntent { declared: Declared { filename, size, mime_type }, hints } = ChatIntent::read(body_bytes(request))?;
    let kind = sluice_formats::check_declared(&filename, Some(&mime_type)).map_err(|refusal| {
        let field = if refusal.code == RefusalCode::DeclaredTypeMismatch { "mime_type" } else { "filename" };
        UploadError::DeclarationRefused(field, refusal)
    })?;
    if size > state.config.chat_max_upload_bytes {
        return Err(UploadError::DeclaredTooLarge { limit_bytes: state.config.chat_max_upload_bytes });
    }
    let hints = hints.judged(kind.file_type == sluice_formats::FileType::Image)?;
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
