//! A run's listing, a page at a time: every listed object decided in one transaction (its
//! claim renewed, or a tracking row, a claim and a parse job written), the unrenewed claims
//! dropped when the listing completes, and single bucket events applied the same way.

use super::claims::remove_unclaimed;
use super::runs::SyncRunJob;
use super::sources::{BaseFacts, SOURCE_COLUMNS, SyncSource, base_facts, source};
use crate::{Db, StoreError};
use deadpool_postgres::{GenericClient, Transaction};
use serde::Serialize;
use sluice_domain::sync::{Decision, Existing, ListedObject, decide, removal_allowed};
use time::OffsetDateTime;
use uuid::Uuid;

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

/// The stored documents `files` may correspond to, in the seed's precedence: by address,
/// then by a filename no address claims; one answer per file with id and change signals
/// together. Within one address a finished document is preferred, then the newest.
pub(super) async fn existing_documents(
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

/// Decides and records `files` for `source`: claims renewed for what is unchanged, a
/// tracking row, a claim and a parse job for what is to be fetched. Returns the jobs to
/// send and how many files were skipped.
pub(super) async fn record_listed(
    tx: &Transaction<'_>,
    source: &SyncSource,
    base: &BaseFacts,
    files: &[ListedFile],
    run_id: Option<Uuid>,
) -> Result<(Vec<(Uuid, serde_json::Value)>, usize), StoreError> {
    let addresses: Vec<String> = files.iter().map(|f| source.location.address(&f.object.key)).collect();
    let labels: Vec<String> = files.iter().map(|f| f.label.clone()).collect();
    let existing = existing_documents(tx, base.kb_id, &addresses, &labels).await?;
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
                &base.kb_id,
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
            .query_opt(
                &format!("SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.id = $1 AND s.kb_id IS NOT NULL"),
                &[&source_id],
            )
            .await?
        else {
            return Ok(PageOutcome::Stale);
        };
        let source = source(&found)?;
        let Some(kb_id) = source.kb_id else { return Ok(PageOutcome::Stale) };
        let Some(base) = base_facts(&tx, kb_id).await? else { return Ok(PageOutcome::Stale) };
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

    /// Applies one object an event reported present, through the same decision as a run.
    /// Returns the parse jobs to send (empty when it is unchanged).
    pub async fn apply_object_event(
        &self,
        source: &SyncSource,
        file: &ListedFile,
    ) -> Result<Vec<(Uuid, serde_json::Value)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(kb_id) = source.kb_id else { return Ok(Vec::new()) };
        let Some(base) = base_facts(&tx, kb_id).await? else { return Ok(Vec::new()) };
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
}
