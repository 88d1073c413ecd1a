//! Reading a knowledge-base document back: its row (`GET /rag/documents/{id}`, also by the
//! `tracking_id` an upload answered with), the parsed text its chunks came from, in pages
//! by character offset, and its stored original through a short-lived presigned link. Who
//! may read the base may read its documents; anyone else is answered "Document not found",
//! exactly as for a document that does not exist.

use crate::{AppState, UploadError};
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::json;
use sluice_blob::BlobError;
use sluice_domain::Caller;
use sluice_domain::access::{self, Access};
use sluice_domain::ingestion::OutputFormat;
use sluice_store::Document;
use sluice_web::json_response;
use std::time::Duration;
use uuid::Uuid;

/// Characters of text one page holds unless the caller asks for fewer.
pub const DEFAULT_TEXT_PAGE_CHARS: usize = 100_000;
/// The most characters one page holds: at four bytes each, well inside Lambda's 6 MB answer.
pub const MAX_TEXT_PAGE_CHARS: usize = 1_000_000;

/// A document whose base grants the caller at least `needed`, or exactly "Document not
/// found" (a document outside any base included).
pub async fn document_for(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    needed: Access,
) -> Result<Document, UploadError> {
    let not_found = || UploadError::NotFound("document");
    let document = state.db.document(id).await?.ok_or_else(not_found)?;
    let kb_id = document.kb_id.ok_or_else(not_found)?;
    let held = state.db.knowledge_base(kb_id, caller.user_id).await?.ok_or_else(not_found)?;
    let granted = access::decide(caller, &held.base.ownership(), held.grant);
    let enough = match needed {
        Access::Edit => granted == Access::Edit,
        Access::View => granted != Access::None,
        Access::None => true,
    };
    if enough { Ok(document) } else { Err(not_found()) }
}

async fn readable_document(state: &AppState, caller: &Caller, id: Uuid) -> Result<Document, UploadError> {
    document_for(state, caller, id, Access::View).await
}

/// `GET /rag/documents/{id}` and `GET /rag/documents/by-tracking/{tracking_id}` (the
/// tracking id an upload answers with is the document's id).
pub async fn get(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let document = readable_document(state, caller, id).await?;
    Ok(json_response(200, &document.api_view()))
}

/// `GET /rag/documents/{id}/text?offset&limit`: `limit` characters of the parsed text from
/// character `offset`, with `total_chars`, the `format` it was written in (`text` or
/// `markdown`) and the `next_offset` to ask for (`null` at the end). `404` while the document has no parsed text (not parsed yet, or failed before).
pub async fn text(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, UploadError> {
    let (offset, limit) = text_page(request)?;
    let document = readable_document(state, caller, id).await?;
    let Some(path) = document.parsed_path.as_deref() else { return Err(UploadError::NotFound("document text")) };
    // The parser never writes more than its character budget (four bytes a character at
    // most) and the left-out marker.
    let cap = (state.config.document_text_max_chars as u64).saturating_mul(4).saturating_add(4096);
    let bytes = match state.blob.get(path, cap).await {
        Ok(bytes) => bytes,
        Err(BlobError::NotFound) => return Err(UploadError::NotFound("document text")),
        Err(error) => return Err(error.into()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let page = TextPage::cut(&text, offset, limit);
    Ok(json_response(
        200,
        &json!({
            "document_id": document.id,
            "offset": offset,
            "limit": limit,
            "total_chars": page.total_chars,
            "format": document.parsed_format.unwrap_or(OutputFormat::Text).as_str(),
            "text": page.text,
            "next_offset": page.next_offset,
        }),
    ))
}

/// The `offset` and `limit` a text request asks for, each refused by name when unusable.
fn text_page(request: &Request) -> Result<(usize, usize), UploadError> {
    let query = request.query_string_parameters();
    let number = |field: &'static str, default: usize, range: std::ops::RangeInclusive<usize>| match query.first(field)
    {
        None | Some("") => Ok(default),
        Some(text) => text.parse::<usize>().ok().filter(|n| range.contains(n)).ok_or_else(|| {
            UploadError::invalid(
                field,
                format!("{field} must be a whole number from {} to {}", range.start(), range.end()),
            )
        }),
    };
    let offset = number("offset", 0, 0..=usize::MAX >> 1)?;
    let limit = number("limit", DEFAULT_TEXT_PAGE_CHARS, 1..=MAX_TEXT_PAGE_CHARS)?;
    Ok((offset, limit))
}

/// One page of a text, counted in characters (Unicode scalar values).
#[derive(Debug, PartialEq, Eq)]
struct TextPage<'a> {
    text: &'a str,
    total_chars: usize,
    next_offset: Option<usize>,
}

impl<'a> TextPage<'a> {
    fn cut(text: &'a str, offset: usize, limit: usize) -> Self {
        let total_chars = text.chars().count();
        let byte_at = |chars: usize| text.char_indices().nth(chars).map_or(text.len(), |(at, _)| at);
        let start = byte_at(offset);
        let end = start + text[start..].char_indices().nth(limit).map_or(text.len() - start, |(at, _)| at);
        let next = offset.saturating_add(limit);
        Self { text: &text[start..end], total_chars, next_offset: (next < total_chars).then_some(next) }
    }
}

/// `GET /rag/documents/{id}/file`: `302` to a short-lived presigned GET of the stored
/// original, downloaded under its (sanitized) filename; `404` when the document keeps no
/// original (a synced document is read from its source), it has not landed yet, or its
/// landed bytes have not passed the upload check: a link to unjudged bytes is never made.
pub async fn file(state: &AppState, caller: &Caller, id: Uuid) -> Result<Response<Body>, UploadError> {
    let document = readable_document(state, caller, id).await?;
    let Some(key) = document.storage_path.as_deref().filter(|_| document.bytes_judged) else {
        return Err(UploadError::NotFound("document file"));
    };
    // A presigned upload not yet made has a key and no object: never hand out a dead link.
    match state.blob.head(key).await {
        Ok(_) => {}
        Err(BlobError::NotFound) => return Err(UploadError::NotFound("document file")),
        Err(error) => return Err(error.into()),
    }
    let ttl = Duration::from_secs(state.config.download_url_ttl_secs);
    let url = state.blob.presign_download(key, &document.filename, ttl).await?;
    Ok(sluice_web::presigned_redirect(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_cut_on_characters_and_join_back_into_the_whole_text() {
        let text = "héllo wörld — ünïcode ✓ text";
        let total = text.chars().count();
        for limit in 1..=total + 1 {
            let mut joined = String::new();
            let mut offset = Some(0);
            while let Some(at) = offset {
                let page = TextPage::cut(text, at, limit);
                assert_eq!(page.total_chars, total);
                assert!(page.text.chars().count() <= limit);
                joined.push_str(page.text);
                offset = page.next_offset;
            }
            assert_eq!(joined, text, "limit {limit}");
        }
        assert_eq!(TextPage::cut(text, total + 5, 3), TextPage { text: "", total_chars: total, next_offset: None });
    }
}
