//! A document's chunks: staged a batch at a time as they are embedded, invisible to search,
//! then published whole in one transaction that holds the base's and the document's rows.

use super::tracking::Document;
use crate::names::teardown_reserved;
use crate::names::vector_width;
use crate::removals::queue_removal;
use crate::{Db, IngestClaim, StoreError};
use sluice_domain::collection::vector_table;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use uuid::Uuid;

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
    /// The attempt's claim on the document is no longer its own (its lease ran out, and
    /// another delivery may be ingesting it): nothing written.
    ClaimLost,
}

/// How staging one batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staging {
    /// The batch is staged.
    Staged,
    /// The document is gone or no longer processing: nothing staged, and the attempt stops.
    Stopped,
    /// The attempt's claim is no longer its own: nothing staged (see [`WriteOutcome::ClaimLost`]).
    ClaimLost,
}

impl Db {
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
    /// until `publish_chunks`, under `claim` (the row stays locked against a takeover of the
    /// claim until the batch is in).
    pub async fn stage_chunks(
        &self,
        doc: &Document,
        claim: IngestClaim,
        chunks: &[ChunkRow],
    ) -> Result<Staging, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let held: Option<bool> = tx
            .query_opt(
                "SELECT ingest_claim IS NOT DISTINCT FROM $2 FROM rag_documents \
                 WHERE id = $1 AND status = 'processing' FOR SHARE",
                &[&doc.id, &claim.token],
            )
            .await?
            .map(|row| row.get(0));
        match held {
            None => return Ok(Staging::Stopped),
            Some(false) => return Ok(Staging::ClaimLost),
            Some(true) => {}
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
        writer.finish().await?;
        tx.commit().await?;
        Ok(Staging::Staged)
    }

    /// Moves a document's staged chunks into its collection's vector table and completes its
    /// row, all or nothing, in one transaction that holds the base's row (a delete of the
    /// base waits for it, or it finds the base gone) and the document's row (likewise): the
    /// document becomes searchable whole, never in part. Chunks an earlier attempt published
    /// are replaced, so a redelivered message never duplicates a chunk. The table must exist.
    /// `truncated_chunks` is how many of them the model could not read whole. Only the holder
    /// of the document's `claim` publishes: the staged chunks may be another attempt's.
    pub async fn publish_chunks(
        &self,
        doc: &Document,
        claim: IngestClaim,
        truncated_chunks: i32,
    ) -> Result<WriteOutcome, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if tx.query_opt("SELECT 1 FROM knowledge_bases WHERE id = $1 FOR SHARE", &[&doc.kb_id]).await?.is_none() {
            return Ok(WriteOutcome::BaseGone);
        }
        if teardown_reserved(&tx, &doc.collection_name).await? {
            return Ok(WriteOutcome::Reserved);
        }
        let status: Option<(String, bool)> = tx
            .query_opt(
                "SELECT status, ingest_claim IS NOT DISTINCT FROM $2 FROM rag_documents WHERE id = $1 FOR UPDATE",
                &[&doc.id, &claim.token],
            )
            .await?
            .map(|r| (r.get(0), r.get(1)));
        match status {
            None => return Ok(WriteOutcome::DocumentGone),
            Some((status, _)) if status != "processing" => return Ok(WriteOutcome::AlreadyDone),
            Some((_, false)) => return Ok(WriteOutcome::ClaimLost),
            Some((_, true)) => {}
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
}
