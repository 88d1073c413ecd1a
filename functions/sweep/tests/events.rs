//! The sweep against its EventBridge sample, with no network: a run that cannot reach the
//! database fails (so the schedule runs it again) instead of reporting nothing was due.

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
    let db = Db::connect_lazy("postgres://nobody@127.0.0.1:9/none", 1).expect("pool");
    let blob = Blob::new(sluice_blob::static_s3_client("http://127.0.0.1:9"), "x", "x");
    let state = State::new(config, db, blob, sluice_blob::static_sqs_client("http://127.0.0.1:9"));
    assert!(handle(&state, time::OffsetDateTime::now_utc()).await.is_err());
}
