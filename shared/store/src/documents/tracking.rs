//! A knowledge-base document's tracking row: written with its outbox row before any work
//! (holding the base's row, refusing a name reserved for a teardown), read, listed, retried,
//! failed with the first failure kept, and deleted with its chunks.

use crate::names::teardown_reserved;
use crate::names::vector_width;
use crate::removals::queue_removal;
use crate::{Db, StoreError};
use sluice_domain::collection::vector_table;
use sluice_domain::ingestion::OutputFormat;
use time::{Date, OffsetDateTime};
use tokio_postgres::Row;
use uuid::Uuid;

/// A knowledge-base document's tracking row.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub id: Uuid,
    pub collection_name: String,
    pub kb_id: Option<Uuid>,
    pub org_id: Option<Uuid>,
    pub owner_id: Option<Uuid>,
    pub filename: String,
    pub filesize: i64,
    pub filetype: String,
    pub mime_type: Option<String>,
    pub status: String,
    pub error_message: Option<String>,
    pub vector_document_id: Option<Uuid>,
    pub chunk_count: i32,
    pub storage_path: Option<String>,
    pub parsed_path: Option<String>,
    /// How the stored parsed text is written (`None` before it is parsed; text parsed
    /// before the setting existed reads as `text`).
    pub parsed_format: Option<OutputFormat>,
    /// A re-index is writing the text again in another format: the parsed text is old.
    pub reparse_pending: bool,
    pub organizational_unit: Option<String>,
    pub source: String,
    pub document_date: Date,
    /// Where `document_date` came from: the file's own metadata (`pdf_creation_date`,
    /// `pdf_mod_date`, `dcterms_created`, `odf_creation_date`, `msg_date`,
    /// `exif_date_time_original`) or `upload`, the day it arrived.
    pub date_source: String,
    /// Chunks longer than the embedding model reads whole (counted, never hidden).
    pub truncated_chunks: i32,
    /// The title the parse found and where (`metadata`, `heading`, `first_line`, `filename`).
    pub title: Option<(String, String)>,
    pub content_hash: Option<String>,
    pub ingestion_config: serde_json::Value,
    /// Once indexed, it retires the base's earlier documents of the same filename.
    pub replace_previous: bool,
    /// A synced document's address (`s3://bucket/key`, or an operator's absolute path).
    pub source_path: Option<String>,
    /// What brought it and counts it, when a sync did: see `crate::sync`.
    pub sync: Option<SyncOrigin>,
    /// Byte spans of the parsed text that OCR read.
    pub ocr_spans: Vec<(usize, usize)>,
    /// Lines OCR kept though it read them with low confidence.
    pub ocr_low_confidence_lines: i32,
    /// Where each page begins in the parsed text: (page number from 1, byte offset).
    pub page_starts: Vec<(u32, usize)>,
    /// Byte spans of the parsed text that are images' descriptions.
    pub image_spans: Vec<(usize, usize)>,
    /// How many images were described and skipped, with why (when description was on).
    pub images: Option<serde_json::Value>,
    /// A cloud parser's job for the document (LlamaParse), and when it was started.
    pub parser_job: Option<(String, OffsetDateTime)>,
    /// The pages a cloud parser parsed (and billed).
    pub parser_pages: Option<i32>,
    /// Whether the stored bytes passed the upload check (a presigned upload's only once
    /// they land and are checked): only judged bytes are ever handed out.
    pub bytes_judged: bool,
    pub created_at: OffsetDateTime,
    pub completed_at: Option<OffsetDateTime>,
}

pub(super) const DOCUMENT_COLUMNS: &str = "id, collection_name, kb_id, org_id, owner_id, filename, filesize, filetype, \
    mime_type, status, error_message, vector_document_id, chunk_count, storage_path, parsed_path, \
    organizational_unit, source, document_date, content_hash, ingestion_config, replace_previous, created_at, \
    completed_at, source_path, sync_source_id, sync_run_id, source_etag, replaces_document_id, ocr_spans, date_source, \
    truncated_chunks, bytes_judged, parsed_format, ocr_low_confidence_lines, page_starts, image_spans, images, parser_job_id, \
    parser_job_started_at, parser_pages, reparse_pending, title, title_source";

pub(super) fn document(row: &Row) -> Document {
    Document {
        id: row.get("id"),
        collection_name: row.get("collection_name"),
        kb_id: row.get("kb_id"),
        org_id: row.get("org_id"),
        owner_id: row.get("owner_id"),
        filename: row.get("filename"),
        filesize: row.get("filesize"),
        filetype: row.get("filetype"),
        mime_type: row.get("mime_type"),
        status: row.get("status"),
        error_message: row.get("error_message"),
        vector_document_id: row.get("vector_document_id"),
        chunk_count: row.get("chunk_count"),
        storage_path: row.get("storage_path"),
        parsed_path: row.get("parsed_path"),
        parsed_format: row.get::<_, Option<String>>("parsed_path").map(|_| {
            match row.get::<_, Option<String>>("parsed_format").as_deref() {
                Some("markdown") => OutputFormat::Markdown,
                _ => OutputFormat::Text,
            }
        }),
        reparse_pending: row.get("reparse_pending"),
        organizational_unit: row.get("organizational_unit"),
        source: row.get("source"),
        document_date: row.get("document_date"),
        date_source: row.get("date_source"),
        truncated_chunks: row.get("truncated_chunks"),
        title: row.get::<_, Option<String>>("title").zip(row.get("title_source")),
        content_hash: row.get("content_hash"),
        ingestion_config: row.get("ingestion_config"),
        replace_previous: row.get("replace_previous"),
        source_path: row.get("source_path"),
        sync: sync_origin(row),
        ocr_spans: row
            .get::<_, Option<serde_json::Value>>("ocr_spans")
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        ocr_low_confidence_lines: row.get("ocr_low_confidence_lines"),
        page_starts: row
            .get::<_, Option<serde_json::Value>>("page_starts")
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        image_spans: row
            .get::<_, Option<serde_json::Value>>("image_spans")
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default(),
        images: row.get("images"),
        parser_job: row.get::<_, Option<String>>("parser_job_id").zip(row.get("parser_job_started_at")),
        parser_pages: row.get("parser_pages"),
        bytes_judged: row.get("bytes_judged"),
        created_at: row.get("created_at"),
        completed_at: row.get("completed_at"),
    }
}

/// Where a synced document came from: the source whose credential fetches it, the run
/// that counts it, the ETag listed, and the document it retires once indexed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncOrigin {
    pub source_id: Option<Uuid>,
    pub run_id: Option<Uuid>,
    pub etag: Option<String>,
    pub replaces: Option<Uuid>,
}

impl Document {
    /// `operator` for an operator's ingest from disk (addressed by an absolute path),
    /// `document` for every other writer.
    pub fn writer_kind(&self) -> &'static str {
        if self.source_path.as_deref().is_some_and(|p| p.starts_with('/')) { "operator" } else { "document" }
    }
}

impl Document {
    /// The document as the HTTP API shows it, in a base's listing and read back alone.
    /// `tracking_id` is the id the upload answered with; `ocr` counts the spans of the text
    /// OCR read, when any.
    pub fn api_view(&self) -> serde_json::Value {
        let rfc3339 = |t: OffsetDateTime| t.format(&time::format_description::well_known::Rfc3339).ok();
        let ocr = (!self.ocr_spans.is_empty()).then(|| {
            let characters: usize = self.ocr_spans.iter().map(|(start, end)| end - start).sum();
            serde_json::json!({"spans": self.ocr_spans.len(), "bytes": characters,
                "low_confidence_lines": self.ocr_low_confidence_lines})
        });
        serde_json::json!({
            "id": self.id,
            "tracking_id": self.id,
            "kb_id": self.kb_id,
            "collection_name": self.collection_name,
            "filename": self.filename,
            "title": self.title.as_ref().map(|(title, _)| title),
            "title_source": self.title.as_ref().map(|(_, source)| source),
            "filesize": self.filesize,
            "filetype": self.filetype,
            "mime_type": self.mime_type,
            "status": self.status,
            "error_message": self.error_message,
            "chunk_count": self.chunk_count,
            "truncated_chunks": self.truncated_chunks,
            "vector_document_id": self.vector_document_id,
            "organizational_unit": self.organizational_unit,
            "has_file": self.storage_path.is_some(),
            "has_text": self.parsed_path.is_some(),
            "ocr": ocr,
            "images": self.images,
            "parser_pages": self.parser_pages,
            "source": self.source,
            "source_path": self.source_path,
            "document_date": self.document_date.to_string(),
            "date_source": self.date_source,
            "created_at": rfc3339(self.created_at),
            "completed_at": self.completed_at.and_then(rfc3339),
        })
    }
}

pub(super) fn sync_origin(row: &Row) -> Option<SyncOrigin> {
    let origin = SyncOrigin {
        source_id: row.get("sync_source_id"),
        run_id: row.get("sync_run_id"),
        etag: row.get("source_etag"),
        replaces: row.get("replaces_document_id"),
    };
    (origin != SyncOrigin::default()).then_some(origin)
}

/// How recording an accepted document ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// The row and its outbox row are committed.
    Recorded { outbox_id: Uuid },
    /// The base was deleted meanwhile.
    BaseGone,
    /// The collection name is reserved for a teardown.
    Reserved,
}

/// The outbox topic the parse function consumes for documents.
pub const PARSE_DOCUMENT_TOPIC: &str = "parse-document";

/// Where presigned document uploads land: the bucket notifies the parse queue of objects
/// created here, and their arrival starts the ingestion.
pub const DOCUMENT_UPLOAD_PREFIX: &str = "document-uploads/";

impl Db {
    /// Writes the tracking row and its outbox row in one transaction, holding the base's row
    /// so a concurrent delete waits, and refusing a name reserved for a teardown.
    pub async fn accept_document(&self, new: &Document) -> Result<Accepted, StoreError> {
        self.record_document(new, None).await
    }

    /// Writes the tracking row of a presigned upload, which waits for its bytes until
    /// `expires_at`; their arrival, not an outbox row, starts the work.
    pub async fn accept_document_intent(
        &self,
        new: &Document,
        expires_at: OffsetDateTime,
    ) -> Result<Accepted, StoreError> {
        self.record_document(new, Some(expires_at)).await
    }

    async fn record_document(
        &self,
        new: &Document,
        expires_at: Option<OffsetDateTime>,
    ) -> Result<Accepted, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if tx.query_opt("SELECT 1 FROM knowledge_bases WHERE id = $1 FOR SHARE", &[&new.kb_id]).await?.is_none() {
            return Ok(Accepted::BaseGone);
        }
        if teardown_reserved(&tx, &new.collection_name).await? {
            return Ok(Accepted::Reserved);
        }
        tx.execute(
            "INSERT INTO rag_documents (id, collection_name, kb_id, org_id, owner_id, filename, filesize, filetype, \
             mime_type, status, storage_path, organizational_unit, source, document_date, content_hash, ingestion_config, \
             upload_expires_at, replace_previous, source_path, writer_kind, source_etag, replaces_document_id, \
             bytes_judged) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'processing', $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
             $20, $21, $16::timestamptz IS NULL)",
            &[
                &new.id,
                &new.collection_name,
                &new.kb_id,
                &new.org_id,
                &new.owner_id,
                &new.filename,
                &new.filesize,
                &new.filetype,
                &new.mime_type,
                &new.storage_path,
                &new.organizational_unit,
                &new.source,
                &new.document_date,
                &new.content_hash,
                &new.ingestion_config,
                &expires_at,
                &new.replace_previous,
                &new.source_path,
                &new.writer_kind(),
                &new.sync.as_ref().and_then(|s| s.etag.clone()),
                &new.sync.as_ref().and_then(|s| s.replaces),
            ],
        )
        .await?;
        let outbox_id = Uuid::new_v4();
        if expires_at.is_none() {
            tx.execute(
                "INSERT INTO outbox (id, topic, payload) VALUES ($1, $2, $3)",
                &[&outbox_id, &PARSE_DOCUMENT_TOPIC, &serde_json::json!({"document_id": new.id})],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Accepted::Recorded { outbox_id })
    }

    /// A base's documents, newest first, `limit` at a time after the document `after`.
    pub async fn documents_of(
        &self,
        kb_id: Uuid,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Document>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {DOCUMENT_COLUMNS} FROM rag_documents WHERE kb_id = $1 AND ($2::uuid IS NULL OR \
                     (created_at, id) < (SELECT created_at, id FROM rag_documents WHERE id = $2 AND kb_id = $1)) \
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                ),
                &[&kb_id, &after, &limit],
            )
            .await?;
        Ok(rows.iter().map(document).collect())
    }

    /// The document a presigned upload lands for.
    pub async fn document_by_storage_path(&self, key: &str) -> Result<Option<Document>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(&format!("SELECT {DOCUMENT_COLUMNS} FROM rag_documents WHERE storage_path = $1"), &[&key])
            .await?;
        Ok(row.as_ref().map(document))
    }

    pub async fn document(&self, id: Uuid) -> Result<Option<Document>, StoreError> {
        let client = self.client().await?;
        let row =
            client.query_opt(&format!("SELECT {DOCUMENT_COLUMNS} FROM rag_documents WHERE id = $1"), &[&id]).await?;
        Ok(row.as_ref().map(document))
    }

    /// Puts a failed document back to `processing` (clearing its failure, parsed text and
    /// any cloud parser's job, which a retry sends again) with a new parse job in the outbox; `None` unless it had failed.
    pub async fn retry_document(&self, id: Uuid) -> Result<Option<Uuid>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let reopened = tx
            .execute(
                "UPDATE rag_documents SET status = 'processing', error_message = NULL, completed_at = NULL, \
                 parsed_path = NULL, attempt_started_at = now(), parse_started_at = NULL, ingest_started_at = NULL, \
                 parser_job_id = NULL, parser_job_started_at = NULL, reparse_pending = false \
                 WHERE id = $1 AND status = 'error' AND storage_path IS NOT NULL",
                &[&id],
            )
            .await?;
        if reopened == 0 {
            return Ok(None);
        }
        // Parsed again, so chunked again: nothing staged from the old text may be published.
        tx.execute("DELETE FROM rag_chunk_staging WHERE document_id = $1", &[&id]).await?;
        let outbox_id = Uuid::new_v4();
        tx.execute(
            "INSERT INTO outbox (id, topic, payload) VALUES ($1, $2, $3)",
            &[&outbox_id, &PARSE_DOCUMENT_TOPIC, &serde_json::json!({"document_id": id})],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(outbox_id))
    }

    /// Deletes a document's row and its chunks in one transaction, and queues the removal
    /// of its stored objects with them. It waits for a chunk write holding the row; a write
    /// that comes after finds the row gone and writes nothing. Returns the row as it was and
    /// the removal to run; `None` if already gone.
    pub async fn delete_document(&self, id: Uuid) -> Result<Option<(Document, Option<Uuid>)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(&format!("SELECT {DOCUMENT_COLUMNS} FROM rag_documents WHERE id = $1 FOR UPDATE"), &[&id])
            .await?
        else {
            return Ok(None);
        };
        let doc = document(&row);
        if vector_width(&tx, &doc.collection_name).await?.is_some() {
            let table = vector_table(&doc.collection_name);
            tx.execute(&format!("DELETE FROM {table} WHERE document_id = $1"), &[&id]).await?;
        }
        tx.execute("DELETE FROM rag_documents WHERE id = $1", &[&id]).await?;
        let objects: Vec<String> = [doc.storage_path.clone(), doc.parsed_path.clone()].into_iter().flatten().collect();
        let removal = queue_removal(&tx, &objects, "deleted document").await?;
        tx.commit().await?;
        Ok(Some((doc, removal)))
    }

    /// Fails a document still `processing`; the first failure recorded is kept. A synced
    /// document's run counts it, with its address and the message, in the same statement.
    pub async fn fail_document(&self, id: Uuid, message: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed: i64 = client
            .query_one(
                "WITH failed AS (UPDATE rag_documents SET status = 'error', error_message = $2, completed_at = now() \
                     WHERE id = $1 AND status = 'processing' RETURNING id, sync_run_id, source_path), \
                 unstaged AS (DELETE FROM rag_chunk_staging WHERE document_id IN (SELECT id FROM failed)), \
                 counted AS (UPDATE sync_logs s SET failed = failed + 1, pending = greatest(pending - 1, 0), \
                     failures = CASE WHEN jsonb_array_length(failures) < $3 \
                         THEN failures || jsonb_build_array(jsonb_build_object('key', f.source_path, 'error', $2::text)) \
                         ELSE failures END, \
                     status = CASE WHEN listing_complete AND pending <= 1 AND status = 'running' THEN 'done' ELSE status END, \
                     finished_at = CASE WHEN listing_complete AND pending <= 1 AND status = 'running' THEN now() \
                         ELSE finished_at END \
                     FROM failed f WHERE s.id = f.sync_run_id RETURNING 1) \
                 SELECT count(*) FROM failed",
                &[&id, &message, &crate::sync::MAX_LOGGED_FAILURES],
            )
            .await?
            .get(0);
        Ok(changed == 1)
    }

    /// Fails documents `processing` whose attempt began more than `older_than` ago and
    /// which wait for no upload: whatever ran them died without recording it.
    pub async fn fail_stale_documents(
        &self,
        older_than: std::time::Duration,
        message: &str,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "UPDATE rag_documents SET status = 'error', error_message = $2, completed_at = now() \
                 WHERE status = 'processing' AND attempt_started_at < now() - make_interval(secs => $1) \
                 AND (upload_expires_at IS NULL OR parsed_path IS NOT NULL)",
                &[&older_than.as_secs_f64(), &message],
            )
            .await?)
    }
}
