//! Ingested documents: the tracking row written with its outbox row before any work, the
//! chunks written in one transaction that holds the base's row, and the outbox itself.

use crate::names::teardown_reserved;
use crate::names::vector_width;
use crate::removals::queue_removal;
use crate::{Db, StoreError};
use sluice_domain::collection::vector_table;
use sluice_domain::ingestion::OutputFormat;
use time::{Date, OffsetDateTime};
use tokio_postgres::Row;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use uuid::Uuid;

/// A tracking row (the seed's "Document tracking").
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

const DOCUMENT_COLUMNS: &str = "id, collection_name, kb_id, org_id, owner_id, filename, filesize, filetype, \
    mime_type, status, error_message, vector_document_id, chunk_count, storage_path, parsed_path, \
    organizational_unit, source, document_date, content_hash, ingestion_config, replace_previous, created_at, \
    completed_at, source_path, sync_source_id, sync_run_id, source_etag, replaces_document_id, ocr_spans, date_source, \
    truncated_chunks, bytes_judged, parsed_format, ocr_low_confidence_lines, page_starts, image_spans, images, parser_job_id, \
    parser_job_started_at, parser_pages, reparse_pending, title, title_source";

fn document(row: &Row) -> Document {
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

fn sync_origin(row: &Row) -> Option<SyncOrigin> {
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

/// An outbox row not yet sent.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMessage {
    pub id: Uuid,
    pub topic: String,
    pub payload: serde_json::Value,
}

impl OutboxMessage {
    /// `messages` grouped by topic (in the order each topic first appears): each topic's
    /// payloads and row ids, to send with one call a topic.
    pub fn by_topic(messages: &[Self]) -> Vec<(&str, Vec<serde_json::Value>, Vec<Uuid>)> {
        let mut groups: Vec<(&str, Vec<serde_json::Value>, Vec<Uuid>)> = Vec::new();
        for message in messages {
            let at = match groups.iter().position(|(topic, _, _)| *topic == message.topic) {
                Some(at) => at,
                None => {
                    groups.push((&message.topic, Vec::new(), Vec::new()));
                    groups.len() - 1
                }
            };
            groups[at].1.push(message.payload.clone());
            groups[at].2.push(message.id);
        }
        groups
    }
}

/// One chunk to write, with its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRow {
    pub chunk_index: i32,
    pub content: String,
    /// What the chunk is keyword-indexed by besides its content (its title and headings).
    pub context: Option<String>,
    pub content_hash: String,
    pub metadata: serde_json::Value,
    pub embedding: Vec<f32>,
}

/// How a chunk write ended: only `Written` changed anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The chunks written; with `replace`, the count of stored objects of the documents
    /// this one replaced (their rows and chunks are gone) and the removal of those objects,
    /// queued in the same transaction, for the caller to run.
    Written {
        chunks: usize,
        retired: usize,
        removal: Option<Uuid>,
    },
    /// The document was deleted (or already finished) before the write: nothing written.
    DocumentGone,
    AlreadyDone,
    /// The base was deleted: nothing written.
    BaseGone,
    /// The name is reserved for a teardown: nothing written.
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

    /// The document's bytes were refused by the reader: `/file` serves only what was accepted.
    pub async fn mark_bytes_refused(&self, id: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE rag_documents SET bytes_judged = false WHERE id = $1", &[&id]).await?;
        Ok(())
    }

    /// The landed bytes of a presigned document passed the upload check: from now on its
    /// original may be handed out.
    pub async fn mark_bytes_judged(&self, id: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE rag_documents SET bytes_judged = true WHERE id = $1", &[&id]).await?;
        Ok(())
    }

    /// Moves a presigned document upload's deadline to `until` while no text is parsed: its
    /// bytes were handed to the parse again.
    pub async fn postpone_document_intent(&self, id: Uuid, until: OffsetDateTime) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE rag_documents SET upload_expires_at = $2 \
                 WHERE id = $1 AND status = 'processing' AND parsed_path IS NULL",
                &[&id, &until],
            )
            .await?;
        Ok(())
    }

    /// Presigned document uploads whose deadline passed before `before` with no text parsed:
    /// each id, stored key and when it was asked for.
    pub async fn expired_document_intents(
        &self,
        before: OffsetDateTime,
        limit: i64,
    ) -> Result<Vec<(Uuid, String, OffsetDateTime)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, storage_path, created_at FROM rag_documents WHERE status = 'processing' \
                 AND parsed_path IS NULL AND upload_expires_at < $1 ORDER BY upload_expires_at LIMIT $2",
                &[&before, &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default(), r.get(2))).collect())
    }

    /// Removes the rows of document intents that expired with no file before `before`:
    /// failed by the sweep with `reason` when their link expired (so the base lists why),
    /// they describe nothing once the retention has passed. Late objects went then.
    pub async fn remove_expired_document_intents(
        &self,
        before: OffsetDateTime,
        reason: &str,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "DELETE FROM rag_documents WHERE status = 'error' AND parsed_path IS NULL \
                 AND upload_expires_at < $1 AND error_message = $2",
                &[&before, &reason],
            )
            .await?)
    }

    pub async fn document(&self, id: Uuid) -> Result<Option<Document>, StoreError> {
        let client = self.client().await?;
        let row =
            client.query_opt(&format!("SELECT {DOCUMENT_COLUMNS} FROM rag_documents WHERE id = $1"), &[&id]).await?;
        Ok(row.as_ref().map(document))
    }

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

    /// How many of a document's chunks are staged (a prefix from index 0: batches are staged
    /// in order, each in one transaction), so a redelivery resumes after them.
    pub async fn staged_chunks(&self, document_id: Uuid) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let count: i64 = client
            .query_one("SELECT count(*) FROM rag_chunk_staging WHERE document_id = $1", &[&document_id])
            .await?
            .get(0);
        Ok(usize::try_from(count).unwrap_or_default())
    }

    /// Stages one batch of a document's embedded chunks (binary `COPY`), invisible to search
    /// until `publish_chunks`. `None` when the document is gone or no longer processing:
    /// nothing is staged, and the caller stops.
    pub async fn stage_chunks(&self, doc: &Document, chunks: &[ChunkRow]) -> Result<Option<usize>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let processing = tx
            .query_opt("SELECT 1 FROM rag_documents WHERE id = $1 AND status = 'processing' FOR SHARE", &[&doc.id])
            .await?;
        if processing.is_none() {
            return Ok(None);
        }
        let vector_type = tx.prepare("SELECT $1::vector").await?.params()[0].clone();
        let sink = tx
            .copy_in(
                "COPY rag_chunk_staging (document_id, chunk_index, content, context, metadata, content_hash, \
                 embedding) FROM STDIN BINARY",
            )
            .await?;
        let types = [Type::UUID, Type::INT4, Type::TEXT, Type::TEXT, Type::JSONB, Type::TEXT, vector_type];
        let writer = BinaryCopyInWriter::new(sink, &types);
        futures_util::pin_mut!(writer);
        for chunk in chunks {
            let embedding = pgvector::Vector::from(chunk.embedding.clone());
            writer
                .as_mut()
                .write(&[
                    &doc.id,
                    &chunk.chunk_index,
                    &chunk.content,
                    &chunk.context,
                    &chunk.metadata,
                    &chunk.content_hash,
                    &embedding,
                ])
                .await?;
        }
        let staged = writer.finish().await?;
        tx.commit().await?;
        Ok(Some(usize::try_from(staged).unwrap_or(usize::MAX)))
    }

    /// Moves a document's staged chunks into its collection's vector table and completes its
    /// row, all or nothing, in one transaction that holds the base's row (a delete of the
    /// base waits for it, or it finds the base gone) and the document's row (likewise): the
    /// document becomes searchable whole, never in part. Chunks an earlier attempt published
    /// are replaced, so a redelivered message never duplicates a chunk. The table must exist.
    /// `truncated_chunks` is how many of them the model could not read whole.
    pub async fn publish_chunks(&self, doc: &Document, truncated_chunks: i32) -> Result<WriteOutcome, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if tx.query_opt("SELECT 1 FROM knowledge_bases WHERE id = $1 FOR SHARE", &[&doc.kb_id]).await?.is_none() {
            return Ok(WriteOutcome::BaseGone);
        }
        if teardown_reserved(&tx, &doc.collection_name).await? {
            return Ok(WriteOutcome::Reserved);
        }
        let status: Option<String> = tx
            .query_opt("SELECT status FROM rag_documents WHERE id = $1 FOR UPDATE", &[&doc.id])
            .await?
            .map(|r| r.get(0));
        match status.as_deref() {
            None => return Ok(WriteOutcome::DocumentGone),
            Some("processing") => {}
            Some(_) => return Ok(WriteOutcome::AlreadyDone),
        }
        if vector_width(&tx, &doc.collection_name).await?.is_none() {
            return Ok(WriteOutcome::BaseGone);
        }
        let table = vector_table(&doc.collection_name);
        tx.execute(&format!("DELETE FROM {table} WHERE document_id = $1"), &[&doc.id]).await?;
        let written = tx
            .execute(
                &format!(
                    "INSERT INTO {table} (id, kb_id, org_id, document_id, chunk_index, content, context, metadata, \
                     source, document_type, organizational_unit, document_date, source_path, filename, content_hash, \
                     embedding) \
                     SELECT gen_random_uuid(), $2, $3, document_id, chunk_index, content, context, metadata, $4, $5, $6, \
                     $7, $8, $9, content_hash, embedding FROM rag_chunk_staging WHERE document_id = $1 \
                     ORDER BY chunk_index"
                ),
                &[
                    &doc.id,
                    &doc.kb_id,
                    &doc.org_id,
                    &doc.source,
                    &doc.filetype,
                    &doc.organizational_unit,
                    &doc.document_date,
                    &doc.source_path,
                    &doc.filename,
                ],
            )
            .await?;
        tx.execute("DELETE FROM rag_chunk_staging WHERE document_id = $1", &[&doc.id]).await?;
        let count = i32::try_from(written).unwrap_or(i32::MAX);
        tx.execute(
            "UPDATE rag_documents SET status = 'done', chunk_count = $2, truncated_chunks = $3, vector_document_id = id, \
             error_message = NULL, completed_at = now() WHERE id = $1",
            &[&doc.id, &count, &truncated_chunks],
        )
        .await?;
        // A replacement: the new vectors are in; the older documents of the same name in
        // the same base go, rows first (waiting for any write of theirs in flight), then
        // their chunks.
        let mut retired_objects = Vec::new();
        if doc.source_path.is_some() {
            retired_objects = crate::sync::retire_replaced(&tx, doc, &table).await?;
        } else if doc.replace_previous {
            let retired = tx
                .query(
                    "DELETE FROM rag_documents WHERE kb_id = $1 AND filename = $2 AND id <> $3 AND created_at <= $4 \
                     RETURNING id, storage_path, parsed_path",
                    &[&doc.kb_id, &doc.filename, &doc.id, &doc.created_at],
                )
                .await?;
            let ids: Vec<Uuid> = retired.iter().map(|r| r.get(0)).collect();
            tx.execute(&format!("DELETE FROM {table} WHERE document_id = ANY($1)"), &[&ids]).await?;
            for row in &retired {
                retired_objects.extend(row.get::<_, Option<String>>(1));
                retired_objects.extend(row.get::<_, Option<String>>(2));
            }
        }
        let removal = queue_removal(&tx, &retired_objects, "replaced documents").await?;
        tx.commit().await?;
        Ok(WriteOutcome::Written {
            chunks: usize::try_from(written).unwrap_or(usize::MAX),
            retired: retired_objects.len(),
            removal,
        })
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

    /// Outbox rows not sent `older_than` after they were written.
    pub async fn undispatched(&self, older_than: std::time::Duration) -> Result<Vec<OutboxMessage>, StoreError> {
        let client = self.client().await?;
        let seconds = older_than.as_secs_f64();
        let rows = client
            .query(
                "SELECT id, topic, payload FROM outbox WHERE dispatched_at IS NULL \
                 AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT 500",
                &[&seconds],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| OutboxMessage { id: r.get("id"), topic: r.get("topic"), payload: r.get("payload") })
            .collect())
    }

    pub async fn mark_all_dispatched(&self, ids: &[Uuid]) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE outbox SET dispatched_at = now() WHERE id = ANY($1)", &[&ids]).await?;
        Ok(())
    }

    pub async fn mark_dispatched(&self, id: Uuid) -> Result<(), StoreError> {
        let client = self.client().await?;
        client.execute("UPDATE outbox SET dispatched_at = now() WHERE id = $1", &[&id]).await?;
        Ok(())
    }
}
