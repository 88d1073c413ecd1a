//! `POST /kb/{kb_id}/reindex`: every indexed document of the base is chunked again from its
//! parsed text under the base's current configuration (never parsed or fetched again), and
//! only chunk texts the collection has not embedded before are embedded (the collection's
//! vectors are its cache). Each document's old chunks stay searchable until its new ones
//! replace them in one transaction. Progress is `reindexing` on `GET /kb/{kb_id}/ingestion`.
//! One run at a time per base: another request while one runs is `409`.

use crate::bases::reach;
use crate::{KnowledgeError, State};
use lambda_http::{Body, Response};
use serde_json::json;
use sluice_domain::Caller;
use sluice_domain::access::Access;
use sluice_store::{OutboxMessage, ReindexStart};
use sluice_web::json_response;
use uuid::Uuid;

/// How long a request spends sending its run's jobs: well inside API Gateway's 29 s.
const SEND_BUDGET: std::time::Duration = std::time::Duration::from_secs(15);

/// `POST /kb/{kb_id}/reindex`: `202` with the run and how many documents it takes up.
pub async fn start(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, _) = reach(state, caller, id, Access::Edit).await?;
    let config = base.chunking();
    match state.db.start_reindex(base.id, &config.to_value()).await? {
        ReindexStart::Started { run_id, jobs } => {
            send_within_budget(state, run_id, &jobs).await;
            Ok(json_response(
                202,
                &json!({"kb_id": base.id, "run_id": run_id, "total": jobs.len(), "chunk_size": config.chunk_size,
                    "chunk_overlap": config.chunk_overlap,
                    "message": "the documents are being re-chunked; GET /kb/{kb_id}/ingestion reports reindexing"}),
            ))
        }
        ReindexStart::Running(progress) => Err(KnowledgeError::Conflict {
            field: "kb_id",
            message: format!(
                "a re-index of this base is running ({} of {} documents done); start another once it ends",
                progress.done, progress.total
            ),
        }),
        ReindexStart::BaseGone => Err(KnowledgeError::NotFound),
        ReindexStart::Reserved => Err(KnowledgeError::Conflict {
            field: "collection_name",
            message: "the collection is being torn down".to_owned(),
        }),
    }
}

/// Sends the run's committed jobs, a hundred at a time, while the budget lasts; what is
/// left unsent (a very large base, or a send that fails) the sweep sends from the outbox.
async fn send_within_budget(state: &State, run_id: Uuid, jobs: &[sluice_store::OutboxMessage]) {
    let started = std::time::Instant::now();
    for batch in jobs.chunks(100) {
        if started.elapsed() > SEND_BUDGET {
            tracing::info!(%run_id, "re-index jobs left for the sweep to send");
            return;
        }
        // Most go to ingest; a document to be written in another output format, to parse.
        for (topic, payloads, ids) in OutboxMessage::by_topic(batch) {
            if let Err(error) = state.dispatcher.send_all(topic, &payloads).await {
                tracing::warn!(%error, %run_id, "re-index jobs not all sent; the sweep will send them");
                return;
            }
            if let Err(error) = state.db.mark_all_dispatched(&ids).await {
                tracing::warn!(%error, %run_id, "re-index jobs sent but not marked; the sweep may send them again");
            }
        }
    }
}
