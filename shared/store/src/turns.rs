//! Whose turn it is: which document a stage takes up next, fairly between tenants, and the
//! claim that keeps one ingest attempt per document at a time.

use crate::{Db, StoreError};
use uuid::Uuid;

/// The stages a document waits its turn for, fairly between tenants (`Db::take_turn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Parse,
    Ingest,
}

/// Whether a stage may take a document up now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    Go,
    /// Its tenant has its share in the stage while another tenant waits: let that one go
    /// first — `instead`, taken for this delivery to do now, when one was free to take.
    Yield {
        instead: Option<Uuid>,
    },
    /// Deleted, done or failed meanwhile, or not the stage's yet (a document a re-index
    /// parses again is not ingest's until its new text is written).
    NotProcessing,
}

/// One delivery's hold on a document's ingest: while it is live no other delivery ingests the
/// document (`Db::claim_ingest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestClaim {
    pub document_id: Uuid,
    /// This attempt's own token: a late release never frees another attempt's claim, and an
    /// attempt whose claim another took stages and publishes nothing.
    pub(crate) token: Uuid,
}

impl Db {
    /// A stage's turn for a document still `processing`, round robin between tenants (a
    /// tenant is its organization, else its owner): it yields (when `may_yield`) if another
    /// tenant has a document waiting for the stage and no more documents in it (started
    /// within `lease`, unfinished) than this tenant has besides this one. A document already
    /// started never yields. Taking the turn marks the attempt live now and the stage as
    /// started.
    pub async fn take_turn(
        &self,
        id: Uuid,
        stage: Stage,
        may_yield: bool,
        lease: std::time::Duration,
    ) -> Result<Turn, StoreError> {
        // The column a stage stamps, what a document in the stage (waiting or started)
        // looks like, and whether this one may be in it: parse ends with the parsed text,
        // ingest with the row's status. A presigned upload (it keeps its deadline) is parsed
        // where its bytes land, judged there, and never taken by another's delivery. A
        // document a re-index parses again is parse's until its new text is written.
        let (started, unfinished, ready) = match stage {
            Stage::Parse => (
                "parse_started_at",
                "(d.parsed_path IS NULL OR d.reparse_pending) AND d.upload_expires_at IS NULL",
                "true",
            ),
            Stage::Ingest => {
                ("ingest_started_at", "d.parsed_path IS NOT NULL AND NOT d.reparse_pending", "NOT reparse_pending")
            }
        };
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "WITH me AS (SELECT id, COALESCE(org_id, owner_id) AS tenant, {started} AS started \
                         FROM rag_documents WHERE id = $1 AND status = 'processing' AND {ready}), \
                     tenants AS (SELECT COALESCE(d.org_id, d.owner_id) AS tenant, \
                         count(*) FILTER (WHERE d.{started} > now() - make_interval(secs => $3) AND d.id <> $1) AS busy, \
                         bool_or(d.{started} IS NULL AND d.id <> $1) AS waits \
                         FROM rag_documents d WHERE d.status = 'processing' AND {unfinished} GROUP BY 1) \
                     SELECT me.started IS NULL AND $2 AND EXISTS (SELECT 1 FROM tenants t \
                         WHERE t.tenant IS DISTINCT FROM me.tenant AND t.waits AND t.busy <= COALESCE( \
                             (SELECT m.busy FROM tenants m WHERE m.tenant IS NOT DISTINCT FROM me.tenant), 0)) \
                     FROM me"
                ),
                &[&id, &may_yield, &lease.as_secs_f64()],
            )
            .await?;
        match row.map(|r| r.get::<_, bool>(0)) {
            None => Ok(Turn::NotProcessing),
            Some(true) => {
                // The turn goes to the oldest waiting document of another tenant, taken here
                // (one taker wins it), so the yielding delivery can do its work at once
                // instead of that document waiting for its own job behind the backlog.
                let taken = client
                    .query_opt(
                        &format!(
                            "UPDATE rag_documents SET attempt_started_at = now(), {started} = now() WHERE id = ( \
                                 SELECT d.id FROM rag_documents d, rag_documents me WHERE me.id = $1 \
                                 AND d.status = 'processing' AND {unfinished} AND d.{started} IS NULL \
                                 AND COALESCE(d.org_id, d.owner_id) IS DISTINCT FROM COALESCE(me.org_id, me.owner_id) \
                                 ORDER BY d.created_at LIMIT 1 FOR UPDATE OF d SKIP LOCKED) \
                             AND {started} IS NULL RETURNING id"
                        ),
                        &[&id],
                    )
                    .await?;
                Ok(Turn::Yield { instead: taken.map(|r| r.get(0)) })
            }
            Some(false) => {
                client
                    .execute(
                        &format!(
                            "UPDATE rag_documents SET attempt_started_at = now(), {started} = COALESCE({started}, now()) \
                             WHERE id = $1 AND status = 'processing'"
                        ),
                        &[&id],
                    )
                    .await?;
                Ok(Turn::Go)
            }
        }
    }

    /// Claims `id`'s ingest for `lease`, unless another delivery's claim is live: `None` then.
    /// The attempt renews it while it runs (`renew_ingest`); a claim past its lease belongs to
    /// an attempt that died, and the next delivery takes it.
    pub async fn claim_ingest(&self, id: Uuid, lease: std::time::Duration) -> Result<Option<IngestClaim>, StoreError> {
        let token = Uuid::new_v4();
        let client = self.client().await?;
        let claimed = client
            .execute(
                "UPDATE rag_documents SET ingest_claim = $2, ingest_claimed_until = now() + make_interval(secs => $3) \
                 WHERE id = $1 AND (ingest_claimed_until IS NULL OR ingest_claimed_until <= now())",
                &[&id, &token, &lease.as_secs_f64()],
            )
            .await?;
        Ok((claimed == 1).then_some(IngestClaim { document_id: id, token }))
    }

    /// Extends this attempt's claim to `lease` from now: `false` when it is no longer this
    /// attempt's (its lease ran out and another delivery took it, or it was released).
    pub async fn renew_ingest(&self, claim: IngestClaim, lease: std::time::Duration) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let renewed = client
            .execute(
                "UPDATE rag_documents SET ingest_claimed_until = now() + make_interval(secs => $3) \
                 WHERE id = $1 AND ingest_claim = $2",
                &[&claim.document_id, &claim.token, &lease.as_secs_f64()],
            )
            .await?;
        Ok(renewed == 1)
    }

    /// Ends an attempt's claim, so the next delivery may go at once; a claim that expired and
    /// was taken by another delivery meanwhile is theirs and stays.
    pub async fn release_ingest(&self, claim: IngestClaim) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE rag_documents SET ingest_claim = NULL, ingest_claimed_until = NULL \
                 WHERE id = $1 AND ingest_claim = $2",
                &[&claim.document_id, &claim.token],
            )
            .await?;
        Ok(())
    }
}
