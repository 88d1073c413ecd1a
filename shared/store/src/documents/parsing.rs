//! What parsing records on a document: its parsed text's place and form, a cloud parser's
//! job, and the images' descriptions kept per base.

use crate::{Db, StoreError};
use sluice_domain::ingestion::OutputFormat;
use time::Date;
use uuid::Uuid;

/// A document's parsed text as recorded: where it is, how it was written, and what points
/// into it (OCR's spans, page starts, image descriptions' spans), with the file's own date
/// (and its source) when it gave one and the image report when images were described.
#[derive(Debug, Clone)]
pub struct ParsedText<'a> {
    pub path: &'a str,
    pub format: OutputFormat,
    pub ocr_spans: &'a [(usize, usize)],
    pub ocr_low_confidence_lines: u32,
    pub page_starts: &'a [(u32, usize)],
    pub own_date: Option<(Date, &'a str)>,
    pub image_spans: &'a [(usize, usize)],
    pub images: Option<serde_json::Value>,
    /// The pages a cloud parser parsed.
    pub parser_pages: Option<u32>,
    /// The document's title and where it was found (`TitleSource::as_str`).
    pub title: Option<(String, &'a str)>,
}

impl Db {
    /// Records where a document's parsed text is and what points into it; `false` when
    /// the row is gone (deleted meanwhile).
    pub async fn set_parsed_path(&self, id: Uuid, parsed: &ParsedText<'_>) -> Result<bool, StoreError> {
        let json_of = |spans: serde_json::Value, empty: bool| (!empty).then_some(spans);
        let pages = json_of(serde_json::json!(parsed.page_starts), parsed.page_starts.is_empty());
        let ocr_spans = json_of(serde_json::json!(parsed.ocr_spans), parsed.ocr_spans.is_empty());
        let image_spans = json_of(serde_json::json!(parsed.image_spans), parsed.image_spans.is_empty());
        let low_confidence_lines = i32::try_from(parsed.ocr_low_confidence_lines).unwrap_or(i32::MAX);
        let (date, source) = parsed.own_date.unzip();
        let client = self.client().await?;
        let updated = client
            .execute(
                "UPDATE rag_documents SET parsed_path = $2, parsed_format = $6, ocr_spans = $3, \
                 ocr_low_confidence_lines = $7, page_starts = $8, document_date = coalesce($4, document_date), \
                 date_source = coalesce($5, date_source), image_spans = $9, images = $10, parser_pages = $11, \
                 reparse_pending = false, title = $12, title_source = $13 \
                 WHERE id = $1",
                &[
                    &id,
                    &parsed.path,
                    &ocr_spans,
                    &date,
                    &source,
                    &parsed.format.as_str(),
                    &low_confidence_lines,
                    &pages,
                    &image_spans,
                    &parsed.images,
                    &parsed.parser_pages.map(|p| i32::try_from(p).unwrap_or(i32::MAX)),
                    &parsed.title.as_ref().map(|(title, _)| title),
                    &parsed.title.as_ref().map(|(_, source)| source),
                ],
            )
            .await?;
        Ok(updated == 1)
    }

    /// Records the cloud parser's job for a document being parsed: a later delivery polls it
    /// instead of sending the file again.
    pub async fn set_parser_job(&self, id: Uuid, job_id: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE rag_documents SET parser_job_id = $2, parser_job_started_at = now() WHERE id = $1",
                &[&id, &job_id],
            )
            .await?;
        Ok(())
    }

    /// The description of an image (its bytes' SHA-256) a collection already has from `model`
    /// at the address `target`: never one another address wrote.
    pub async fn image_description(
        &self,
        kb_id: Uuid,
        sha256: &str,
        target: &str,
        model: &str,
    ) -> Result<Option<String>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT description FROM rag_image_descriptions \
                 WHERE kb_id = $1 AND image_sha256 = $2 AND target = $3 AND model = $4",
                &[&kb_id, &sha256, &target, &model],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Keeps a description for the collection's next copy of the image (the first one
    /// written stays; a collection deleted meanwhile keeps nothing).
    pub async fn keep_image_description(
        &self,
        kb_id: Uuid,
        sha256: &str,
        (target, model): (&str, &str),
        description: &str,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO rag_image_descriptions (kb_id, image_sha256, target, model, description) \
                 SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM knowledge_bases WHERE id = $1) \
                 ON CONFLICT DO NOTHING",
                &[&kb_id, &sha256, &target, &model, &description],
            )
            .await?;
        Ok(())
    }
}
