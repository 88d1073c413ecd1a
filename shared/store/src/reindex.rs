//! Re-indexing a base: every indexed document is chunked again from its parsed text under
//! the base's current configuration and goes through ingestion again — or through parse
//! first, when its text was written in another `output_format` than the configuration asks
//! and its format has one to write (its stored original is read again) — its
//! old chunks searchable until the new ones replace them in one transaction. A run counts
//! its documents, so progress reads as done/total.

use crate::names::teardown_reserved;
use crate::{Db, OutboxMessage, PARSE_DOCUMENT_TOPIC, StoreError};
use sluice_domain::ingestion::IngestionConfig;
use uuid::Uuid;

/// The outbox topic the ingest function consumes.
pub const INGEST_TOPIC: &str = "ingest";

/// Whether a document of a re-index is parsed again: its format writes markdown (`$4`), its
/// original is kept, and its text is in another format than the run asks (`$5`).
const REPARSE: &str = "(filetype = ANY($4) AND storage_path IS NOT NULL AND coalesce(parsed_format, 'text') <> $5)";

/// How a request to re-index ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ReindexStart {
    /// The run and the ingest jobs its documents wait for (committed in the outbox).
    Started {
        run_id: Uuid,
        jobs: Vec<OutboxMessage>,
    },
    /// An earlier run still has documents to do.
    Running(ReindexProgress),
    BaseGone,
    /// The collection is being torn down.
    Reserved,
}

/// A run's progress: documents finished (indexed again, or failed) of those it took up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ReindexProgress {
    pub done: i64,
    pub total: i64,
}

impl ReindexProgress {
    pub fn complete(&self) -> bool {
        self.done >= self.total
    }
}

impl Db {
    /// Starts a re-index of base `kb_id` under `config` (the base's whole configuration):
    /// each of its indexed documents with parsed text is set to `processing` with that
    /// configuration, and its ingest job is written to the outbox, all in one transaction
    /// that holds the base's row. Refused while an earlier run is unfinished.
    pub async fn start_reindex(&self, kb_id: Uuid, config: &serde_json::Value) -> Result<ReindexStart, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(base) = tx
            .query_opt(
                "SELECT collection_name, reindex_run_id FROM knowledge_bases WHERE id = $1 FOR UPDATE",
                &[&kb_id],
            )
            .await?
        else {
            return Ok(ReindexStart::BaseGone);
        };
        let (collection, previous): (String, Option<Uuid>) = (base.get(0), base.get(1));
        if teardown_reserved(&tx, &collection).await? {
            return Ok(ReindexStart::Reserved);
        }
        if let Some(progress) = progress_of(&tx, kb_id, previous).await?.filter(|p| !p.complete()) {
            return Ok(ReindexStart::Running(progress));
        }
        let run_id = Uuid::new_v4();
        // Synced documents leave their sync run: a re-index is not the run's to count.
        let reparsed = sluice_domain::ingestion::MARKDOWN_FILETYPES;
        let format =
            serde_json::from_value::<IngestionConfig>(config.clone()).map(|c| c.output_format).unwrap_or_default();
        let taken = tx
            .query(
                &format!(
                    "UPDATE rag_documents SET status = 'processing', ingestion_config = $3, reindex_run_id = $2, \
                     error_message = NULL, completed_at = NULL, attempt_started_at = now(), ingest_started_at = NULL, \
                     parse_started_at = CASE WHEN {REPARSE} THEN NULL ELSE parse_started_at END, \
                     parser_job_id = CASE WHEN {REPARSE} THEN NULL ELSE parser_job_id END, \
                     parser_job_started_at = CASE WHEN {REPARSE} THEN NULL ELSE parser_job_started_at END, \
                     reparse_pending = {REPARSE}, sync_run_id = NULL \
                     WHERE kb_id = $1 AND status = 'done' AND parsed_path IS NOT NULL \
                     RETURNING id, CASE WHEN {REPARSE} THEN $6 ELSE $7 END AS topic"
                ),
                &[&kb_id, &run_id, config, &reparsed, &format.as_str(), &PARSE_DOCUMENT_TOPIC, &INGEST_TOPIC],
            )
            .await?;
        let ids: Vec<Uuid> = taken.iter().map(|row| row.get(0)).collect();
        let topics: Vec<String> = taken.iter().map(|row| row.get(1)).collect();
        tx.execute("DELETE FROM rag_chunk_staging WHERE document_id = ANY($1)", &[&ids]).await?;
        let jobs = tx
            .query(
                "INSERT INTO outbox (id, topic, payload) \
                 SELECT gen_random_uuid(), t, jsonb_build_object('document_id', d) \
                 FROM unnest($1::uuid[], $2::text[]) AS j(d, t) \
                 RETURNING id, topic, payload",
                &[&ids, &topics],
            )
            .await?
            .iter()
            .map(|r| OutboxMessage { id: r.get("id"), topic: r.get("topic"), payload: r.get("payload") })
            .collect();
        let total = i32::try_from(ids.len()).unwrap_or(i32::MAX);
        tx.execute(
            "UPDATE knowledge_bases SET reindex_run_id = $2, reindex_total = $3 WHERE id = $1",
            &[&kb_id, &run_id, &total],
        )
        .await?;
        tx.commit().await?;
        Ok(ReindexStart::Started { run_id, jobs })
    }

    /// The documents of run `run_id` that failed: `[{document_id, filename, error}]`.
    pub async fn reindex_failures(&self, run_id: Uuid) -> Result<Vec<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, filename, error_message FROM rag_documents WHERE reindex_run_id = $1 AND status = 'error'",
                &[&run_id],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let (id, filename, error): (Uuid, String, Option<String>) = (r.get(0), r.get(1), r.get(2));
                serde_json::json!({"document_id": id, "filename": filename, "error": error})
            })
            .collect())
    }

    /// The progress of base `kb_id`'s latest re-index; `None` when it never had one.
    pub async fn reindex_progress(&self, kb_id: Uuid) -> Result<Option<ReindexProgress>, StoreError> {
        let client = self.client().await?;
        let Some(row) = client.query_opt("SELECT reindex_run_id FROM knowledge_bases WHERE id = $1", &[&kb_id]).await?
        else {
            return Ok(None);
        };
        progress_of(&client, kb_id, row.get(0)).await
    }
}

/// A run's progress: its documents no longer `processing` (a document deleted meanwhile
/// counts as done).
async fn progress_of(
    client: &impl deadpool_postgres::GenericClient,
    kb_id: Uuid,
    run_id: Option<Uuid>,
) -> Result<Option<ReindexProgress>, StoreError> {
    let Some(run_id) = run_id else { return Ok(None) };
    let row = client
        .query_one(
            "SELECT b.reindex_total::bigint, \
                    (SELECT count(*) FROM rag_documents d WHERE d.reindex_run_id = $2 AND d.status = 'processing') \
             FROM knowledge_bases b WHERE b.id = $1",
            &[&kb_id, &run_id],
        )
        .await?;
    let (total, waiting): (i64, i64) = (row.get(0), row.get(1));
    Ok(Some(ReindexProgress { done: (total - waiting).max(0), total }))
}
