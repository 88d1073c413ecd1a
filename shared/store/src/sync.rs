//! Sync sources, their runs, and the claims that decide what a run may remove.
//!
//! A run is a `sync_logs` row written before any work. Its listing is recorded a page at a
//! time (`record_sync_page`), each page one transaction that looks up every listed object's
//! document in one query, renews the claims of what is unchanged, and writes a tracking
//! row, a claim and a parse job for each object to fetch. When the listing completes
//! (`finish_listing`), the claims the run did not renew are dropped — unless that would
//! remove more than the source's `max_removal_percent`, when nothing is removed until the
//! run is confirmed — and a document no source claims any more is removed. The documents'
//! own outcomes (`write_chunks`, `fail_document`, `skip_unchanged_download`) count into the
//! run, and the last one finishes it.

use crate::names::vector_width;
use crate::removals::queue_removal;
use crate::{Db, Document, StoreError};
use deadpool_postgres::{GenericClient, Transaction};
use serde::Serialize;
use sluice_domain::collection::vector_table;
use sluice_domain::sync::{Decision, Existing, ListedObject, S3Location, Schedule, SyncMode, decide, removal_allowed};
use std::collections::HashMap;
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

/// The outbox topic (on the parse queue) that carries a run's next page of listing.
pub const SYNC_RUN_TOPIC: &str = "sync-run";

/// Failed files named in one run's log; the count goes on past it.
pub const MAX_LOGGED_FAILURES: i32 = 100;

/// A sync source as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSource {
    pub id: Uuid,
    pub kb_id: Uuid,
    pub collection_name: String,
    pub org_id: Option<Uuid>,
    pub created_by: Uuid,
    pub name: String,
    pub location: S3Location,
    pub role_arn: Option<String>,
    /// With a role: the source's own external id, which the role's trust policy requires.
    pub external_id: Option<String>,
    pub secret_id: Option<Uuid>,
    pub sync_mode: SyncMode,
    pub schedule: Option<String>,
    pub next_run_at: Option<OffsetDateTime>,
    pub event_driven: bool,
    pub organizational_unit: Option<String>,
    pub max_removal_percent: i32,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

const SOURCE_COLUMNS: &str = "s.id, s.kb_id, s.collection_name, s.org_id, s.created_by, s.name, s.config, s.role_arn, \
    s.external_id, s.secret_id, s.sync_mode, s.schedule, s.next_run_at, s.event_driven, s.organizational_unit, \
    s.max_removal_percent, s.created_at, s.updated_at";

fn source(row: &Row) -> Result<SyncSource, StoreError> {
    let config: serde_json::Value = row.get("config");
    let mode: String = row.get("sync_mode");
    Ok(SyncSource {
        id: row.get("id"),
        kb_id: row.get("kb_id"),
        collection_name: row.get("collection_name"),
        org_id: row.get("org_id"),
        created_by: row.get("created_by"),
        name: row.get("name"),
        location: serde_json::from_value(config)
            .map_err(|e| StoreError::Config(format!("a stored source's config does not read: {e}")))?,
        role_arn: row.get("role_arn"),
        external_id: row.get("external_id"),
        secret_id: row.get("secret_id"),
        sync_mode: SyncMode::parse(&mode).unwrap_or(SyncMode::NewOnly),
        schedule: row.get("schedule"),
        next_run_at: row.get("next_run_at"),
        event_driven: row.get("event_driven"),
        organizational_unit: row.get("organizational_unit"),
        max_removal_percent: row.get("max_removal_percent"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    })
}

/// Who changed a source, for the audit row written with the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    pub actor_id: Uuid,
    /// The collection a repointed source left.
    pub previous_collection: Option<String>,
}

/// One run, as its log answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncRun {
    pub id: Uuid,
    pub source_id: Uuid,
    pub kb_id: Option<Uuid>,
    pub collection_name: String,
    pub mode: String,
    pub trigger: String,
    pub confirm_removals: bool,
    pub status: String,
    pub listing_complete: bool,
    #[serde(skip)]
    pub step: i32,
    pub total: i32,
    pub ingested: i32,
    pub updated: i32,
    pub skipped: i32,
    pub failed: i32,
    pub removed: i32,
    /// Documents sent to be fetched and indexed that have not finished.
    pub pending: i32,
    /// Objects downloaded (GetObject calls).
    pub fetched: i32,
    /// Documents the run would have removed past the source's threshold, removed none of.
    pub removals_held: Option<i32>,
    pub message: Option<String>,
    /// `[{key, error}]`, the first `MAX_LOGGED_FAILURES` failed files.
    pub failures: serde_json::Value,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

const RUN_COLUMNS: &str = "id, source_id, kb_id, collection_name, mode, trigger, confirm_removals, status, \
    listing_complete, step, total, ingested, updated, skipped, failed, removed, pending, fetched, removals_held, \
    message, failures, started_at, finished_at";

fn run(row: &Row) -> SyncRun {
    SyncRun {
        id: row.get("id"),
        source_id: row.get("source_id"),
        kb_id: row.get("kb_id"),
        collection_name: row.get("collection_name"),
        mode: row.get("mode"),
        trigger: row.get("trigger"),
        confirm_removals: row.get("confirm_removals"),
        status: row.get("status"),
        listing_complete: row.get("listing_complete"),
        step: row.get("step"),
        total: row.get("total"),
        ingested: row.get("ingested"),
        updated: row.get("updated"),
        skipped: row.get("skipped"),
        failed: row.get("failed"),
        removed: row.get("removed"),
        pending: row.get("pending"),
        fetched: row.get("fetched"),
        removals_held: row.get("removals_held"),
        message: row.get("message"),
        failures: row.get("failures"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
    }
}

/// Whose runs a log answers: one source's, or those of sources on any of some bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunScope<'a> {
    Source(Uuid),
    Bases(&'a [Uuid]),
}

/// How asking for a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStart {
    /// The log row and the first page's job are committed; the job is to be sent.
    Started {
        run_id: Uuid,
        outbox_id: Uuid,
    },
    /// A run of this source is still going: it is not started twice.
    AlreadyRunning(Uuid),
    SourceGone,
}

/// The job that lists a run's next page; `step` is the page it expects, so a job delivered
/// twice finds the run moved on and does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncRunJob {
    pub run_id: Uuid,
    pub step: i32,
}

/// The outbox and queue topic of [`SourceEventJob`]s (the parse queue's).
pub const SOURCE_EVENT_TOPIC: &str = "sync-event";

/// One bucket event for one event-driven source. An event naming a bucket fans out to a
/// job per source whose prefix holds the key, each delivered, retried and dead-lettered on
/// its own: one tenant's source that cannot read its bucket never holds up or fails another
/// tenant's. The job names no change: the bucket, asked with the source's credential, says
/// what is there now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceEventJob {
    pub source_id: Uuid,
    pub key: String,
}

/// One listed object that is a file, its label made safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    pub object: ListedObject,
    pub label: String,
    pub filetype: String,
}

/// What recording a page did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageOutcome {
    /// Recorded; the parse jobs of the documents to fetch are to be sent (outbox id, payload).
    Recorded { jobs: Vec<(Uuid, serde_json::Value)>, skipped: usize },
    /// The run moved on (a repeated job), finished, or its source or base is gone.
    Stale,
}

/// What a completed listing removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingEnd {
    pub removed: usize,
    /// Removals past the threshold, not made.
    pub held: Option<usize>,
    /// The stored objects of removed documents, queued for removal.
    pub removal: Option<Uuid>,
}

/// The SQL that closes a run whose listing completed once its last document finished;
/// used in an `UPDATE sync_logs SET … pending = pending - 1, <this>`.
const FINISH_WHEN_DRAINED: &str = "status = CASE WHEN listing_complete AND pending <= 1 AND status = 'running' \
    THEN 'done' ELSE status END, finished_at = CASE WHEN listing_complete AND pending <= 1 AND status = 'running' \
    THEN now() ELSE finished_at END";

/// Counts one finished document of a run into `column` (`ingested`, `updated`, `skipped`).
async fn count_finished(client: &impl GenericClient, run_id: Uuid, column: &str) -> Result<(), StoreError> {
    client
        .execute(
            &format!(
                "UPDATE sync_logs SET {column} = {column} + 1, pending = greatest(pending - 1, 0), \
                 {FINISH_WHEN_DRAINED} WHERE id = $1"
            ),
            &[&run_id],
        )
        .await?;
    Ok(())
}

async fn audit(tx: &Transaction<'_>, action: &str, who: &Audit, source: &SyncSource) -> Result<(), StoreError> {
    let credential = source.role_arn.clone().or_else(|| source.secret_id.map(|id| id.to_string()));
    tx.execute(
        "INSERT INTO audit_log (id, action, actor_id, org_id, kb_id, subject_id, collection_name, \
         previous_collection, credential_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &Uuid::new_v4(),
            &action,
            &who.actor_id,
            &source.org_id,
            &source.kb_id,
            &source.id,
            &source.collection_name,
            &who.previous_collection,
            &credential,
        ],
    )
    .await?;
    Ok(())
}

/// The next time a source's schedule names after `after` (none without a schedule).
fn next_run(schedule: Option<&str>, after: OffsetDateTime) -> Option<OffsetDateTime> {
    schedule.and_then(|s| Schedule::parse(s).ok()).and_then(|s| s.next_after(after))
}

/// Deletes those of `ids` that no source claims any more (rows, then their chunks), and
/// queues the removal of their stored objects. Returns how many went, and the removal.
async fn remove_unclaimed(tx: &Transaction<'_>, ids: &[Uuid]) -> Result<(usize, Option<Uuid>), StoreError> {
    if ids.is_empty() {
        return Ok((0, None));
    }
    let removed = tx
        .query(
            "DELETE FROM rag_documents d WHERE d.id = ANY($1) \
             AND NOT EXISTS (SELECT 1 FROM rag_document_claims c WHERE c.document_id = d.id) \
             RETURNING id, collection_name, storage_path, parsed_path",
            &[&ids],
        )
        .await?;
    let mut by_collection: HashMap<String, Vec<Uuid>> = HashMap::new();
    let mut objects = Vec::new();
    for row in &removed {
        by_collection.entry(row.get(1)).or_default().push(row.get(0));
        objects.extend(row.get::<_, Option<String>>(2));
        objects.extend(row.get::<_, Option<String>>(3));
    }
    for (collection, ids) in by_collection {
        if vector_width(tx, &collection).await?.is_some() {
            let table = vector_table(&collection);
            tx.execute(&format!("DELETE FROM {table} WHERE document_id = ANY($1)"), &[&ids]).await?;
        }
    }
    let removal = queue_removal(tx, &objects, "documents no source lists").await?;
    Ok((removed.len(), removal))
}

/// Retires what an indexed synced document replaces, inside its chunk write: the document
/// it names and earlier finished or failed rows of the same address in the same base (never
/// a row still `processing`, which is another attempt's). Their claims pass to the new
/// document first. The run counts it as an update when a finished document was replaced.
/// Returns the retired rows' stored objects.
pub(crate) async fn retire_replaced(
    tx: &Transaction<'_>,
    doc: &Document,
    table: &str,
) -> Result<Vec<String>, StoreError> {
    let replaces = doc.sync.as_ref().and_then(|s| s.replaces);
    let retired = tx
        .query(
            "SELECT id, status, storage_path, parsed_path FROM rag_documents WHERE kb_id = $1 AND id <> $2 \
             AND created_at <= $3 AND (id = $4 OR (source_path = $5 AND status IN ('done', 'error'))) FOR UPDATE",
            &[&doc.kb_id, &doc.id, &doc.created_at, &replaces, &doc.source_path],
        )
        .await?;
    let ids: Vec<Uuid> = retired.iter().map(|r| r.get(0)).collect();
    let replaced_finished = retired.iter().any(|r| r.get::<_, String>(1) == "done");
    let mut objects = Vec::new();
    if !ids.is_empty() {
        tx.execute(
            "INSERT INTO rag_document_claims (source_id, document_id, claimed_at, seen_at) \
             SELECT source_id, $2, min(claimed_at), max(seen_at) FROM rag_document_claims \
             WHERE document_id = ANY($1) GROUP BY source_id \
             ON CONFLICT (source_id, document_id) DO UPDATE SET \
             claimed_at = least(rag_document_claims.claimed_at, excluded.claimed_at), \
             seen_at = greatest(rag_document_claims.seen_at, excluded.seen_at)",
            &[&ids, &doc.id],
        )
        .await?;
        tx.execute("DELETE FROM rag_documents WHERE id = ANY($1)", &[&ids]).await?;
        tx.execute(&format!("DELETE FROM {table} WHERE document_id = ANY($1)"), &[&ids]).await?;
        for row in &retired {
            objects.extend(row.get::<_, Option<String>>(2));
            objects.extend(row.get::<_, Option<String>>(3));
        }
    }
    if let Some(run_id) = doc.sync.as_ref().and_then(|s| s.run_id) {
        count_finished(tx, run_id, if replaced_finished { "updated" } else { "ingested" }).await?;
    }
    Ok(objects)
}

/// The stored documents `files` may correspond to, in the seed's precedence: by address,
/// then by a filename no address claims; one answer per file with id and change signals
/// together. Within one address a finished document is preferred, then the newest.
async fn existing_documents(
    client: &impl GenericClient,
    kb_id: Uuid,
    addresses: &[String],
    labels: &[String],
) -> Result<Vec<Option<Existing>>, StoreError> {
    let rows = client
        .query(
            "SELECT l.ord, d.id, d.status, d.source_etag, d.filesize, d.content_hash, true AS addressed, d.created_at \
             FROM unnest($2::text[]) WITH ORDINALITY AS l(address, ord) \
             JOIN rag_documents d ON d.source_path = l.address AND d.kb_id = $1 \
             UNION ALL \
             SELECT l.ord, d.id, d.status, d.source_etag, d.filesize, d.content_hash, false, d.created_at \
             FROM unnest($3::text[]) WITH ORDINALITY AS l(label, ord) \
             JOIN rag_documents d ON d.kb_id = $1 AND d.source_path IS NULL AND d.filename = l.label",
            &[&kb_id, &addresses, &labels],
        )
        .await?;
    let rank = |addressed: bool, status: &str| {
        (
            addressed,
            match status {
                "done" => 2,
                "processing" => 1,
                _ => 0,
            },
        )
    };
    /// A candidate, its rank (addressed, then finished over running over failed), its age.
    type Ranked = (Existing, (bool, i32), OffsetDateTime);
    let mut best: Vec<Option<Ranked>> = vec![None; addresses.len()];
    for row in &rows {
        let index = usize::try_from(row.get::<_, i64>(0) - 1).unwrap_or(usize::MAX);
        let Some(slot) = best.get_mut(index) else { continue };
        let existing = Existing {
            id: row.get(1),
            status: row.get(2),
            etag: row.get(3),
            size: row.get(4),
            content_hash: row.get(5),
            addressed: row.get(6),
        };
        let key = rank(existing.addressed, &existing.status);
        let created: OffsetDateTime = row.get(7);
        let better = match slot {
            None => true,
            Some((_, held, at)) => key > *held || (key == *held && created > *at),
        };
        if better {
            *slot = Some((existing, key, created));
        }
    }
    Ok(best.into_iter().map(|b| b.map(|(e, _, _)| e)).collect())
}

/// What a page (or one event) needs of the source's base.
struct BaseFacts {
    org_id: Option<Uuid>,
    owner_id: Uuid,
    ingestion_config: serde_json::Value,
}

async fn base_facts(tx: &Transaction<'_>, kb_id: Uuid) -> Result<Option<BaseFacts>, StoreError> {
    let row = tx
        .query_opt("SELECT org_id, owner_id, ingestion_config FROM knowledge_bases WHERE id = $1 FOR SHARE", &[&kb_id])
        .await?;
    Ok(row.map(|r| BaseFacts {
        org_id: r.get(0),
        owner_id: r.get(1),
        ingestion_config: r.get::<_, Option<serde_json::Value>>(2).unwrap_or_else(|| serde_json::json!({})),
    }))
}

/// Decides and records `files` for `source`: claims renewed for what is unchanged, a
/// tracking row, a claim and a parse job for what is to be fetched. Returns the jobs to
/// send and how many files were skipped.
async fn record_listed(
    tx: &Transaction<'_>,
    source: &SyncSource,
    base: &BaseFacts,
    files: &[ListedFile],
    run_id: Option<Uuid>,
) -> Result<(Vec<(Uuid, serde_json::Value)>, usize), StoreError> {
    let addresses: Vec<String> = files.iter().map(|f| source.location.address(&f.object.key)).collect();
    let labels: Vec<String> = files.iter().map(|f| f.label.clone()).collect();
    let existing = existing_documents(tx, source.kb_id, &addresses, &labels).await?;
    let mut claims = Vec::new();
    let mut skipped = 0;
    let mut new_rows: Vec<(Uuid, &ListedFile, &String, Option<Uuid>)> = Vec::new();
    for ((file, address), found) in files.iter().zip(&addresses).zip(&existing) {
        match decide(source.sync_mode, found.as_ref(), &file.object) {
            Decision::Skip { claim } => {
                skipped += 1;
                claims.extend(claim);
            }
            Decision::Fetch { replaces } => {
                let id = Uuid::new_v4();
                new_rows.push((id, file, address, replaces));
                claims.push(id);
                // What it replaces stays claimed until the new document retires it.
                if found.as_ref().is_some_and(|f| f.addressed) {
                    claims.extend(replaces);
                }
            }
        }
    }
    let mut jobs = Vec::with_capacity(new_rows.len());
    if !new_rows.is_empty() {
        let ids: Vec<Uuid> = new_rows.iter().map(|r| r.0).collect();
        let names: Vec<&str> = new_rows.iter().map(|r| r.1.label.as_str()).collect();
        let sizes: Vec<i64> = new_rows.iter().map(|r| r.1.object.size).collect();
        let types: Vec<&str> = new_rows.iter().map(|r| r.1.filetype.as_str()).collect();
        let paths: Vec<&str> = new_rows.iter().map(|r| r.2.as_str()).collect();
        let etags: Vec<Option<&str>> = new_rows.iter().map(|r| r.1.object.etag.as_deref()).collect();
        let replaces: Vec<Option<Uuid>> = new_rows.iter().map(|r| r.3).collect();
        tx.execute(
            "INSERT INTO rag_documents (id, collection_name, kb_id, org_id, owner_id, filename, filesize, filetype, \
             status, source_path, organizational_unit, source, ingestion_config, sync_source_id, sync_run_id, \
             source_etag, replaces_document_id) \
             SELECT n.id, $1, $2, $3, $4, n.name, n.size, n.kind, 'processing', n.path, $5, 's3', $6, $7, $8, n.etag, \
             n.replaces \
             FROM unnest($9::uuid[], $10::text[], $11::int8[], $12::text[], $13::text[], $14::text[], $15::uuid[]) \
             AS n(id, name, size, kind, path, etag, replaces)",
            &[
                &source.collection_name,
                &source.kb_id,
                &base.org_id,
                &base.owner_id,
                &source.organizational_unit,
                &base.ingestion_config,
                &source.id,
                &run_id,
                &ids,
                &names,
                &sizes,
                &types,
                &paths,
                &etags,
                &replaces,
            ],
        )
        .await?;
        let outbox_ids: Vec<Uuid> = ids.iter().map(|_| Uuid::new_v4()).collect();
        let payloads: Vec<serde_json::Value> = ids.iter().map(|id| serde_json::json!({"document_id": id})).collect();
        tx.execute(
            "INSERT INTO outbox (id, topic, payload) SELECT o.id, $1, o.payload \
             FROM unnest($2::uuid[], $3::jsonb[]) AS o(id, payload)",
            &[&crate::PARSE_DOCUMENT_TOPIC, &outbox_ids, &payloads],
        )
        .await?;
        jobs = outbox_ids.into_iter().zip(payloads).collect();
    }
    if !claims.is_empty() {
        tx.execute(
            "INSERT INTO rag_document_claims (source_id, document_id) SELECT $1, unnest($2::uuid[]) \
             ON CONFLICT (source_id, document_id) DO UPDATE SET seen_at = now()",
            &[&source.id, &claims],
        )
        .await?;
    }
    Ok((jobs, skipped))
}

impl Db {
    /// Stores a new source with its audit row; `false` when the base is gone.
    pub async fn insert_sync_source(&self, source: &SyncSource, who: &Audit) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if base_facts(&tx, source.kb_id).await?.is_none() {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO sync_sources (id, kb_id, collection_name, org_id, created_by, name, source_type, config, \
             role_arn, secret_id, sync_mode, schedule, next_run_at, event_driven, organizational_unit, \
             max_removal_percent, external_id) \
             VALUES ($1, $2, $3, $4, $5, $6, 's3', $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
            &[
                &source.id,
                &source.kb_id,
                &source.collection_name,
                &source.org_id,
                &source.created_by,
                &source.name,
                &serde_json::to_value(&source.location).unwrap_or_default(),
                &source.role_arn,
                &source.secret_id,
                &source.sync_mode.as_str(),
                &source.schedule,
                &next_run(source.schedule.as_deref(), OffsetDateTime::now_utc()),
                &source.event_driven,
                &source.organizational_unit,
                &source.max_removal_percent,
                &source.external_id,
            ],
        )
        .await?;
        audit(&tx, "sync_source.created", who, source).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Saves a changed source with its audit row, `action` (`sync_source.updated`, or
    /// `sync_source.moved` when its location changed); `false` when it is gone.
    pub async fn update_sync_source(&self, source: &SyncSource, who: &Audit, action: &str) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let changed = tx
            .execute(
                "UPDATE sync_sources SET name = $2, config = $3, role_arn = $4, secret_id = $5, sync_mode = $6, \
                 schedule = $7, next_run_at = CASE WHEN schedule IS NOT DISTINCT FROM $7 AND next_run_at IS NOT NULL \
                 THEN next_run_at ELSE $8 END, event_driven = $9, organizational_unit = $10, \
                 max_removal_percent = $11, external_id = $12, updated_at = now() WHERE id = $1",
                &[
                    &source.id,
                    &source.name,
                    &serde_json::to_value(&source.location).unwrap_or_default(),
                    &source.role_arn,
                    &source.secret_id,
                    &source.sync_mode.as_str(),
                    &source.schedule,
                    &next_run(source.schedule.as_deref(), OffsetDateTime::now_utc()),
                    &source.event_driven,
                    &source.organizational_unit,
                    &source.max_removal_percent,
                    &source.external_id,
                ],
            )
            .await?;
        if changed == 0 {
            return Ok(false);
        }
        audit(&tx, action, who, source).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes a source with its audit row: its claims go with it, and the documents no
    /// other source claims are removed (rows and chunks; their objects' removal returned).
    /// `None` when it was already gone.
    pub async fn delete_sync_source(&self, id: Uuid, who: &Audit) -> Result<Option<(usize, Option<Uuid>)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(&format!("SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.id = $1 FOR UPDATE"), &[&id])
            .await?
        else {
            return Ok(None);
        };
        let gone = source(&row)?;
        let claimed: Vec<Uuid> = tx
            .query("SELECT document_id FROM rag_document_claims WHERE source_id = $1", &[&id])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.execute("DELETE FROM sync_sources WHERE id = $1", &[&id]).await?;
        let outcome = remove_unclaimed(&tx, &claimed).await?;
        audit(&tx, "sync_source.deleted", who, &gone).await?;
        tx.commit().await?;
        Ok(Some(outcome))
    }

    pub async fn sync_source(&self, id: Uuid) -> Result<Option<SyncSource>, StoreError> {
        let client = self.client().await?;
        let row =
            client.query_opt(&format!("SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.id = $1"), &[&id]).await?;
        row.as_ref().map(source).transpose()
    }

    pub async fn sync_sources_of(&self, kb_id: Uuid) -> Result<Vec<SyncSource>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.kb_id = $1 ORDER BY s.created_at"),
                &[&kb_id],
            )
            .await?;
        rows.iter().map(source).collect()
    }

    /// How many other event-driven sources of the tenant (`org_id`, or the owner outside
    /// any) read `bucket`, `except` the one being saved.
    pub async fn tenant_event_sources_on(
        &self,
        bucket: &str,
        org_id: Option<Uuid>,
        owner: Uuid,
        except: Uuid,
    ) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*) FROM sync_sources WHERE event_driven AND config ->> 'bucket' = $1 AND id <> $4 \
                 AND CASE WHEN $2::uuid IS NULL THEN org_id IS NULL AND created_by = $3 ELSE org_id = $2 END",
                &[&bucket, &org_id, &owner, &except],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Event-driven sources reading `bucket` (their prefixes are checked by the caller).
    pub async fn event_sources(&self, bucket: &str) -> Result<Vec<SyncSource>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.event_driven AND s.config ->> 'bucket' = $1"
                ),
                &[&bucket],
            )
            .await?;
        rows.iter().map(source).collect()
    }

    /// Writes a run's log row and its first page's job, unless one is still going.
    pub async fn start_sync_run(
        &self,
        source_id: Uuid,
        trigger: &str,
        confirm_removals: bool,
    ) -> Result<RunStart, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let start = start_run(&tx, source_id, trigger, confirm_removals).await?;
        if matches!(start, RunStart::Started { .. }) {
            tx.commit().await?;
        }
        Ok(start)
    }

    pub async fn sync_run(&self, id: Uuid) -> Result<Option<SyncRun>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt(&format!("SELECT {RUN_COLUMNS} FROM sync_logs WHERE id = $1"), &[&id]).await?;
        Ok(row.as_ref().map(run))
    }

    /// The runs of `scope`, newest first, `limit` after `offset`, with how many there are.
    pub async fn sync_runs(
        &self,
        scope: RunScope<'_>,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<SyncRun>, i64), StoreError> {
        let client = self.client().await?;
        let (filter, value): (&str, &(dyn tokio_postgres::types::ToSql + Sync)) = match &scope {
            RunScope::Source(id) => ("source_id = $1", id),
            RunScope::Bases(ids) => ("kb_id = ANY($1)", ids),
        };
        let rows = client
            .query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM sync_logs WHERE {filter} ORDER BY started_at DESC, id LIMIT $2 OFFSET $3"
                ),
                &[value, &limit, &offset],
            )
            .await?;
        let total: i64 =
            client.query_one(&format!("SELECT count(*) FROM sync_logs WHERE {filter}"), &[value]).await?.get(0);
        Ok((rows.iter().map(run).collect(), total))
    }

    /// The run and its source, for the worker that lists its next page; `None` unless the
    /// run is still going at `step`.
    pub async fn sync_run_at(
        &self,
        job: SyncRunJob,
    ) -> Result<Option<(SyncRun, SyncSource, Option<String>)>, StoreError> {
        let client = self.client().await?;
        let Some(row) = client
            .query_opt(&format!("SELECT {RUN_COLUMNS}, cursor FROM sync_logs WHERE id = $1"), &[&job.run_id])
            .await?
        else {
            return Ok(None);
        };
        let found = run(&row);
        if found.status != "running" || found.step != job.step || found.listing_complete {
            return Ok(None);
        }
        let cursor: Option<String> = row.get("cursor");
        let Some(source) = self.sync_source(found.source_id).await? else { return Ok(None) };
        Ok(Some((found, source, cursor)))
    }

    /// Records one page of a run's listing at `step` (see the module's comment); `cursor`
    /// is the last key listed, `not_synced` the listed keys that are no file Sluice reads.
    pub async fn record_sync_page(
        &self,
        job: SyncRunJob,
        files: &[ListedFile],
        not_synced: usize,
        cursor: &str,
    ) -> Result<PageOutcome, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                "SELECT source_id FROM sync_logs WHERE id = $1 AND step = $2 AND status = 'running' \
                 AND NOT listing_complete FOR UPDATE",
                &[&job.run_id, &job.step],
            )
            .await?
        else {
            return Ok(PageOutcome::Stale);
        };
        let source_id: Uuid = row.get(0);
        let Some(found) = tx
            .query_opt(&format!("SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.id = $1"), &[&source_id])
            .await?
        else {
            return Ok(PageOutcome::Stale);
        };
        let source = source(&found)?;
        let Some(base) = base_facts(&tx, source.kb_id).await? else { return Ok(PageOutcome::Stale) };
        let (jobs, skipped) = record_listed(&tx, &source, &base, files, Some(job.run_id)).await?;
        let counted = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        tx.execute(
            "UPDATE sync_logs SET step = step + 1, cursor = $2, total = total + $3, skipped = skipped + $4, \
             pending = pending + $5, heartbeat_at = now() WHERE id = $1",
            &[
                &job.run_id,
                &cursor,
                &counted(files.len() + not_synced),
                &counted(skipped + not_synced),
                &counted(jobs.len()),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(PageOutcome::Recorded { jobs, skipped: skipped + not_synced })
    }

    /// Closes a run's listing at `step` as complete and makes its removals (see the
    /// module's comment). `None` when the run moved on or ended.
    pub async fn finish_listing(&self, job: SyncRunJob) -> Result<Option<ListingEnd>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                "SELECT l.source_id, l.started_at, l.confirm_removals, s.max_removal_percent FROM sync_logs l \
                 JOIN sync_sources s ON s.id = l.source_id \
                 WHERE l.id = $1 AND l.step = $2 AND l.status = 'running' AND NOT l.listing_complete FOR UPDATE OF l",
                &[&job.run_id, &job.step],
            )
            .await?
        else {
            return Ok(None);
        };
        let (source_id, started_at, confirmed, max_percent): (Uuid, OffsetDateTime, bool, i32) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let prior: i64 = tx
            .query_one(
                "SELECT count(*) FROM rag_document_claims WHERE source_id = $1 AND claimed_at < $2",
                &[&source_id, &started_at],
            )
            .await?
            .get(0);
        let stale: Vec<Uuid> = tx
            .query(
                "SELECT document_id FROM rag_document_claims WHERE source_id = $1 AND seen_at < $2",
                &[&source_id, &started_at],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let stale_count = i64::try_from(stale.len()).unwrap_or(i64::MAX);
        let end = if removal_allowed(stale_count, prior, max_percent, confirmed) {
            tx.execute(
                "DELETE FROM rag_document_claims WHERE source_id = $1 AND seen_at < $2",
                &[&source_id, &started_at],
            )
            .await?;
            let (removed, removal) = remove_unclaimed(&tx, &stale).await?;
            ListingEnd { removed, held: None, removal }
        } else {
            ListingEnd { removed: 0, held: Some(stale.len()), removal: None }
        };
        let message = end.held.map(|held| {
            format!(
                "sync: RemovalsHeld: the source no longer lists {held} of its {prior} documents, more than its \
                 max_removal_percent ({max_percent}%); nothing was removed. If that is intended, run it again with \
                 confirm_removals: true"
            )
        });
        let counted = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        tx.execute(
            "UPDATE sync_logs SET listing_complete = true, step = step + 1, removed = $2, removals_held = $3, \
             message = coalesce($4, message), heartbeat_at = now(), \
             status = CASE WHEN pending = 0 THEN 'done' ELSE status END, \
             finished_at = CASE WHEN pending = 0 THEN now() ELSE finished_at END WHERE id = $1",
            &[&job.run_id, &counted(end.removed), &end.held.map(counted), &message],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(end))
    }

    /// Ends a run whose listing could not complete: it removes nothing, and says why.
    pub async fn fail_sync_run(&self, run_id: Uuid, message: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE sync_logs SET status = 'failed', message = $2, finished_at = now() \
                 WHERE id = $1 AND status = 'running'",
                &[&run_id, &message],
            )
            .await?;
        Ok(changed == 1)
    }

    /// Records a synced document's download: its content hash and the ETag fetched, and the
    /// GetObject requests it took counted to its run.
    pub async fn record_download(
        &self,
        doc: &Document,
        hash: &str,
        etag: Option<&str>,
        requests: i32,
    ) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE rag_documents SET content_hash = $2, source_etag = coalesce($3, source_etag) WHERE id = $1",
                &[&doc.id, &hash, &etag],
            )
            .await?;
        if let Some(run_id) = doc.sync.as_ref().and_then(|s| s.run_id) {
            client.execute("UPDATE sync_logs SET fetched = fetched + $2 WHERE id = $1", &[&run_id, &requests]).await?;
        }
        Ok(())
    }

    /// A downloaded object whose bytes hash as the document it would replace: that document
    /// stays (recording the ETag now listed, so the next run skips it unread), and the new
    /// row goes. Counted as skipped. `false` when either row changed meanwhile.
    pub async fn skip_unchanged_download(
        &self,
        doc: &Document,
        kept: Uuid,
        etag: Option<&str>,
        requests: i32,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let deleted =
            tx.execute("DELETE FROM rag_documents WHERE id = $1 AND status = 'processing'", &[&doc.id]).await?;
        if deleted == 0 {
            return Ok(false);
        }
        tx.execute(
            "UPDATE rag_documents SET source_etag = $2, source_path = coalesce(source_path, $3) WHERE id = $1",
            &[&kept, &etag, &doc.source_path],
        )
        .await?;
        if let Some(source_id) = doc.sync.as_ref().and_then(|s| s.source_id) {
            tx.execute(
                "INSERT INTO rag_document_claims (source_id, document_id) VALUES ($1, $2) \
                 ON CONFLICT (source_id, document_id) DO UPDATE SET seen_at = now()",
                &[&source_id, &kept],
            )
            .await?;
        }
        if let Some(run_id) = doc.sync.as_ref().and_then(|s| s.run_id) {
            tx.execute("UPDATE sync_logs SET fetched = fetched + $2 WHERE id = $1", &[&run_id, &requests]).await?;
            count_finished(&tx, run_id, "skipped").await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Applies one object an event reported present, through the same decision as a run.
    /// Returns the parse jobs to send (empty when it is unchanged).
    pub async fn apply_object_event(
        &self,
        source: &SyncSource,
        file: &ListedFile,
    ) -> Result<Vec<(Uuid, serde_json::Value)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(base) = base_facts(&tx, source.kb_id).await? else { return Ok(Vec::new()) };
        let (jobs, _) = record_listed(&tx, source, &base, std::slice::from_ref(file), None).await?;
        tx.commit().await?;
        Ok(jobs)
    }

    /// An object an event reported removed (and that is indeed gone): the source's claims on
    /// the documents at its address go, and those no source claims any more are removed.
    pub async fn apply_removal_event(
        &self,
        source: &SyncSource,
        key: &str,
    ) -> Result<(usize, Option<Uuid>), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let released: Vec<Uuid> = tx
            .query(
                "DELETE FROM rag_document_claims c USING rag_documents d WHERE c.document_id = d.id \
                 AND c.source_id = $1 AND d.kb_id = $2 AND d.source_path = $3 RETURNING c.document_id",
                &[&source.id, &source.kb_id, &source.location.address(key)],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let outcome = remove_unclaimed(&tx, &released).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    /// The sweep: starts a run of every scheduled source that is due and not running (its
    /// next time moved on either way). Returns the first pages' jobs to send.
    pub async fn start_due_runs(&self, now: OffsetDateTime, limit: i64) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let due = tx
            .query(
                "SELECT id, schedule FROM sync_sources WHERE next_run_at <= $1 ORDER BY next_run_at \
                 LIMIT $2 FOR UPDATE SKIP LOCKED",
                &[&now, &limit],
            )
            .await?;
        let mut started = Vec::new();
        for row in &due {
            let (id, schedule): (Uuid, Option<String>) = (row.get(0), row.get(1));
            tx.execute(
                "UPDATE sync_sources SET next_run_at = $2 WHERE id = $1",
                &[&id, &next_run(schedule.as_deref(), now)],
            )
            .await?;
            match start_run(&tx, id, "schedule", false).await? {
                RunStart::Started { run_id, outbox_id } => started.push((run_id, outbox_id)),
                RunStart::AlreadyRunning(_) | RunStart::SourceGone => {}
            }
        }
        tx.commit().await?;
        Ok(started)
    }

    /// The sweep: runs whose listing stopped with no page recorded for `older_than` (the
    /// worker died between pages): their next page's job, to send again.
    pub async fn stalled_sync_runs(&self, older_than: std::time::Duration) -> Result<Vec<SyncRunJob>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, step FROM sync_logs WHERE status = 'running' AND NOT listing_complete \
                 AND heartbeat_at < now() - make_interval(secs => $1) LIMIT 100",
                &[&older_than.as_secs_f64()],
            )
            .await?;
        Ok(rows.iter().map(|r| SyncRunJob { run_id: r.get(0), step: r.get(1) }).collect())
    }

    /// The sweep: closes runs whose listing completed and which have no document left
    /// `processing` (one deleted or failed by the sweep is not counted by its own path).
    pub async fn finish_drained_runs(&self) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "UPDATE sync_logs l SET status = 'done', pending = 0, finished_at = now() \
                 WHERE l.status = 'running' AND l.listing_complete AND NOT EXISTS \
                 (SELECT 1 FROM rag_documents d WHERE d.sync_run_id = l.id AND d.status = 'processing')",
                &[],
            )
            .await?)
    }

    /// The stored document in a base that a file at `address` named `label` corresponds
    /// to (the one lookup a run makes, for one file).
    pub async fn existing_document(
        &self,
        kb_id: Uuid,
        address: &str,
        label: &str,
    ) -> Result<Option<Existing>, StoreError> {
        let client = self.client().await?;
        let found = existing_documents(&client, kb_id, &[address.to_owned()], &[label.to_owned()]).await?;
        Ok(found.into_iter().next().flatten())
    }

    /// A finished document of the base that no address claims (an upload) whose bytes hash
    /// as `hash`: the last resort of the lookup, once a download has a hash to ask with.
    pub async fn unaddressed_document_with_hash(&self, kb_id: Uuid, hash: &str) -> Result<Option<Uuid>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id FROM rag_documents WHERE kb_id = $1 AND content_hash = $2 AND source_path IS NULL \
                 AND status = 'done' ORDER BY created_at DESC LIMIT 1",
                &[&kb_id, &hash],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The status of each of `ids` that still exists.
    pub async fn document_statuses(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, String>, StoreError> {
        let client = self.client().await?;
        let rows = client.query("SELECT id, status FROM rag_documents WHERE id = ANY($1)", &[&ids]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Audit rows about one subject, oldest first: (action, actor, collection, credential).
    pub async fn audit_entries(&self, subject: Uuid) -> Result<Vec<serde_json::Value>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT json_build_object('action', action, 'actor_id', actor_id, 'collection_name', collection_name, \
                 'previous_collection', previous_collection, 'credential_id', credential_id) \
                 FROM audit_log WHERE subject_id = $1 ORDER BY at, id",
                &[&subject],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// Writes a run's log row and the outbox row of its first page, in `tx`.
async fn start_run(
    tx: &Transaction<'_>,
    source_id: Uuid,
    trigger: &str,
    confirm_removals: bool,
) -> Result<RunStart, StoreError> {
    let Some(row) =
        tx.query_opt("SELECT kb_id, collection_name, sync_mode FROM sync_sources WHERE id = $1", &[&source_id]).await?
    else {
        return Ok(RunStart::SourceGone);
    };
    let (kb_id, collection, mode): (Uuid, String, String) = (row.get(0), row.get(1), row.get(2));
    if let Some(running) =
        tx.query_opt("SELECT id FROM sync_logs WHERE source_id = $1 AND status = 'running'", &[&source_id]).await?
    {
        return Ok(RunStart::AlreadyRunning(running.get(0)));
    }
    let run_id = Uuid::new_v4();
    // Two starts racing: the unique index lets one in; the other reads as already running.
    let inserted = tx
        .execute(
            "INSERT INTO sync_logs (id, source_id, kb_id, collection_name, mode, trigger, confirm_removals, status) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'running') ON CONFLICT DO NOTHING",
            &[&run_id, &source_id, &kb_id, &collection, &mode, &trigger, &confirm_removals],
        )
        .await?;
    if inserted == 0 {
        let running: Uuid = tx
            .query_one("SELECT id FROM sync_logs WHERE source_id = $1 AND status = 'running'", &[&source_id])
            .await?
            .get(0);
        return Ok(RunStart::AlreadyRunning(running));
    }
    let outbox_id = Uuid::new_v4();
    tx.execute(
        "INSERT INTO outbox (id, topic, payload) VALUES ($1, $2, $3)",
        &[&outbox_id, &SYNC_RUN_TOPIC, &serde_json::to_value(SyncRunJob { run_id, step: 0 }).unwrap_or_default()],
    )
    .await?;
    Ok(RunStart::Started { run_id, outbox_id })
}
