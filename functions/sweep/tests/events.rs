//! The sweep against its EventBridge sample, with no network: a run that cannot reach the
//! database fails (so the schedule runs it again) instead of reporting nothing was due, and
//! every task is tried and named — one failing task does not stop the others.

use sluice_blob::Blob;
use sluice_domain::Config;
use sluice_store::Db;
use sluice_sweep::{State, handle};

#[tokio::test]
async fn a_run_that_cannot_reach_the_database_fails() {
    let path = format!("{}/../../events/eventbridge-scheduled.json", env!("CARGO_MANIFEST_DIR"));
    let event: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("json");
    assert_eq!(event["detail-type"], "Scheduled Event");
    let config = Config::from_lookup(|name| match name {
        "SLUICE_BUCKET" | "SLUICE_KMS_KEY_ID" => Some("x".to_owned()),
        _ => None,
    })
    .expect("config");
    let db = Db::unreachable();
    let blob = Blob::new(sluice_blob::static_s3_client("http://127.0.0.1:9"), "x", "x");
    let state = State::new(config, db, blob, sluice_blob::static_sqs_client("http://127.0.0.1:9"));
    let Err(sluice_sweep::SweepError::Incomplete(report)) = handle(&state, time::OffsetDateTime::now_utc()).await
    else {
        panic!("a run that reached nothing must fail with its report");
    };
    let failed: Vec<&str> = report.failed_tasks.iter().filter_map(|t| t.split(':').next()).collect();
    let mut tasks = vec![
        "expired_intents",
        "removed_intents",
        "resent_jobs",
        "retried_teardowns",
        "stale_documents",
        "removals_run",
        "expired_chat_files",
        "sync_runs_started",
        "sync_runs_resumed",
        "sync_runs_closed",
    ];
    tasks.extend(std::iter::repeat_n("unnamed_objects", sluice_sweep::SCANNED_PREFIXES.len()));
    assert_eq!(failed, tasks);
    assert_eq!((report.expired_chat_files, report.unnamed_objects), (0, 0), "nothing removed without the scan");
}
