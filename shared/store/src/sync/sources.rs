//! Sync sources as stored: created, changed and deleted with an audit row each, read, found
//! by the bucket their events come from, and started when their schedule is due.

use super::claims::remove_unclaimed;
use super::runs::{RUN_COLUMNS, RunStart, SyncRun, SyncRunJob, run, start_run};
use crate::{Db, StoreError};
use deadpool_postgres::{GenericClient, Transaction};
use sluice_domain::sync::{S3Location, Schedule, SyncMode};
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

/// A sync source as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSource {
    pub id: Uuid,
    /// The base it feeds; `None` once that base was deleted (the source is detached, keeps
    /// its configuration and runs no more until it is pointed at another collection).
    pub kb_id: Option<Uuid>,
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
    /// When its base was deleted, for a detached source.
    pub detached_at: Option<OffsetDateTime>,
}

pub(super) const SOURCE_COLUMNS: &str = "s.id, s.kb_id, s.collection_name, s.org_id, s.created_by, s.name, s.config, s.role_arn, \
    s.external_id, s.secret_id, s.sync_mode, s.schedule, s.next_run_at, s.event_driven, s.organizational_unit, \
    s.max_removal_percent, s.created_at, s.updated_at, s.detached_at";

pub(super) fn source(row: &Row) -> Result<SyncSource, StoreError> {
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
        detached_at: row.get("detached_at"),
    })
}

/// Who changed a source, for the audit row written with the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    pub actor_id: Uuid,
    /// The collection a repointed source left.
    pub previous_collection: Option<String>,
}

pub(super) async fn audit(
    tx: &Transaction<'_>,
    action: &str,
    who: &Audit,
    source: &SyncSource,
) -> Result<(), StoreError> {
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
pub(super) fn next_run(schedule: Option<&str>, after: OffsetDateTime) -> Option<OffsetDateTime> {
    schedule.and_then(|s| Schedule::parse(s).ok()).and_then(|s| s.next_after(after))
}

/// What a page (or one event) needs of the source's base.
pub(super) struct BaseFacts {
    pub(super) kb_id: Uuid,
    pub(super) org_id: Option<Uuid>,
    pub(super) owner_id: Uuid,
    pub(super) ingestion_config: serde_json::Value,
}

pub(super) async fn base_facts(tx: &Transaction<'_>, kb_id: Uuid) -> Result<Option<BaseFacts>, StoreError> {
    let row = tx
        .query_opt("SELECT org_id, owner_id, ingestion_config FROM knowledge_bases WHERE id = $1 FOR SHARE", &[&kb_id])
        .await?;
    Ok(row.map(|r| BaseFacts {
        kb_id,
        org_id: r.get(0),
        owner_id: r.get(1),
        ingestion_config: r.get::<_, Option<serde_json::Value>>(2).unwrap_or_else(|| serde_json::json!({})),
    }))
}

impl Db {
    /// Stores a new source with its audit row; `false` when the base is gone.
    pub async fn insert_sync_source(&self, source: &SyncSource, who: &Audit) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(kb_id) = source.kb_id else { return Ok(false) };
        if base_facts(&tx, kb_id).await?.is_none() {
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
                 max_removal_percent = $11, external_id = $12, updated_at = now() WHERE id = $1 AND kb_id IS NOT NULL",
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

    /// The detached sources of organization `org_id` (every one, for a caller who manages
    /// its collections) or created by `creator`, oldest first.
    pub async fn detached_sync_sources(
        &self,
        org_id: Option<Uuid>,
        creator: Uuid,
    ) -> Result<Vec<SyncSource>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.kb_id IS NULL \
                     AND (s.created_by = $2 OR ($1::uuid IS NOT NULL AND s.org_id = $1)) ORDER BY s.created_at"
                ),
                &[&org_id, &creator],
            )
            .await?;
        rows.iter().map(source).collect()
    }

    /// Points `source` at `kb_id`'s collection `collection_name`, with its audit row naming
    /// the collection it left: attached again (a detached source) or moved (its claims are
    /// released, so the documents it brought stay where they are, no longer synced). `false`
    /// when the source or the base is gone, or a run of it is going.
    pub async fn repoint_sync_source(
        &self,
        source: &SyncSource,
        (kb_id, collection_name): (Uuid, &str),
        who: &Audit,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if base_facts(&tx, kb_id).await?.is_none() {
            return Ok(false);
        }
        let running =
            tx.query_opt("SELECT 1 FROM sync_logs WHERE source_id = $1 AND status = 'running'", &[&source.id]).await?;
        if running.is_some() {
            return Ok(false);
        }
        tx.execute("DELETE FROM rag_document_claims WHERE source_id = $1", &[&source.id]).await?;
        tx.execute("UPDATE rag_documents SET sync_source_id = NULL WHERE sync_source_id = $1", &[&source.id]).await?;
        let changed = tx
            .execute(
                "UPDATE sync_sources SET kb_id = $2, collection_name = $3, detached_at = NULL, next_run_at = $4, \
                 updated_at = now() WHERE id = $1",
                &[
                    &source.id,
                    &kb_id,
                    &collection_name,
                    &next_run(source.schedule.as_deref(), OffsetDateTime::now_utc()),
                ],
            )
            .await?;
        if changed == 0 {
            return Ok(false);
        }
        let moved = SyncSource { kb_id: Some(kb_id), collection_name: collection_name.to_owned(), ..source.clone() };
        audit(&tx, "sync_source.repointed", who, &moved).await?;
        tx.commit().await?;
        Ok(true)
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
                "SELECT count(*) FROM sync_sources WHERE event_driven AND kb_id IS NOT NULL AND config ->> 'bucket' = $1 \
                 AND id <> $4 \
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
                    "SELECT {SOURCE_COLUMNS} FROM sync_sources s WHERE s.event_driven AND s.kb_id IS NOT NULL \
                     AND s.config ->> 'bucket' = $1"
                ),
                &[&bucket],
            )
            .await?;
        rows.iter().map(source).collect()
    }

    /// The sweep: starts a run of every scheduled source that is due and not running (its
    /// next time moved on either way). Returns the first pages' jobs to send.
    pub async fn start_due_runs(&self, now: OffsetDateTime, limit: i64) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let due = tx
            .query(
                "SELECT id, schedule FROM sync_sources WHERE next_run_at <= $1 AND kb_id IS NOT NULL ORDER BY next_run_at \
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
}
