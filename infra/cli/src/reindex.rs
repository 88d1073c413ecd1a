//! `sluice reindex --knowledge-base ID`: a base's documents chunked again under its current
//! configuration, as `POST /kb/{kb_id}/reindex` does, with a progress bar until the last
//! one is indexed again. The deployment's ingest function does the work; this starts the
//! run, sends its jobs and watches.

use sluice_store::{OutboxMessage, ReindexStart};
use std::process::ExitCode;
use std::time::Duration;
use uuid::Uuid;

pub async fn run(kb_id: Uuid) -> ExitCode {
    let fail = |error: String| {
        eprintln!("{}", serde_json::json!({ "error": error }));
        ExitCode::FAILURE
    };
    let sdk = sluice_blob::sdk_config().await;
    let (config, db, base) = match crate::sync::operator_base(&sdk, kb_id).await {
        Ok(operator) => operator,
        Err(error) => return fail(error),
    };
    let chunking = base.chunking();
    let (run_id, jobs) = match db.start_reindex(kb_id, &chunking.to_value()).await {
        Ok(ReindexStart::Started { run_id, jobs }) => (run_id, jobs),
        Ok(ReindexStart::Running(p)) => return fail(format!("a re-index is running ({} of {} done)", p.done, p.total)),
        Ok(ReindexStart::BaseGone) => return fail(format!("no knowledge base {kb_id}")),
        Ok(ReindexStart::Reserved) => return fail("the collection is being torn down".to_owned()),
        Err(error) => return fail(format!("database: {error}")),
    };
    let dispatcher = sluice_queue::jobs::Dispatcher::new(aws_sdk_sqs::Client::new(&sdk), config.job_routes());
    for (topic, payloads, ids) in OutboxMessage::by_topic(&jobs) {
        if dispatcher.send_all(topic, &payloads).await.is_ok() {
            let _ = db.mark_all_dispatched(&ids).await;
        }
    }
    let bar = indicatif::ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} documents re-chunked at {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("chunk_size {}", chunking.chunk_size));
    loop {
        match db.reindex_progress(kb_id).await {
            Ok(Some(progress)) => {
                bar.set_position(u64::try_from(progress.done).unwrap_or_default());
                if progress.complete() {
                    break;
                }
            }
            Ok(None) => break,
            Err(error) => return fail(format!("database: {error}")),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bar.finish();
    let failed = match db.reindex_failures(run_id).await {
        Ok(failed) => failed,
        Err(error) => return fail(format!("database: {error}")),
    };
    println!("{}", serde_json::json!({"kb_id": kb_id, "run_id": run_id, "total": jobs.len(), "failed": failed}));
    if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
