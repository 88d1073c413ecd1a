//! The handler against the SQS samples in `events/`, with no network: records that need no
//! storage are judged alone, and a record that meets storage that is down is reported for
//! redelivery — in both cases only the failing record.

use sluice_blob::Blob;
use sluice_domain::Config;
use sluice_isolate::Extractor;
use sluice_parse::{State, handle};
use sluice_queue::SqsEvent;
use sluice_store::Db;

/// A port nothing listens on: storage calls fail at once.
const CLOSED: &str = "127.0.0.1:9";

fn offline_state() -> State {
    let config = Config::from_lookup(|name| match name {
        "SLUICE_BUCKET" => Some("bucket".to_owned()),
        "SLUICE_KMS_KEY_ID" => Some("arn:aws:kms:us-east-1:123456789012:key/test".to_owned()),
        _ => None,
    })
    .expect("config");
    let db = Db::unreachable();
    let blob = Blob::new(sluice_blob::static_s3_client(&format!("http://{CLOSED}")), "bucket", &config.kms_key_id);
    let extractor = Extractor::new(env!("CARGO_BIN_EXE_sluice-parse"), config.parse_max_memory_bytes);
    let sdk = sluice_blob::static_sdk_config(&format!("http://{CLOSED}"));
    State::new(config, db, blob, sluice_extraction::Reader::Workers(extractor), &sdk)
}

fn sample(name: &str) -> SqsEvent {
    let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not an SQS event: {e}"))
}

async fn failures(name: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
    let response = handle(&offline_state(), sample(name), deadline).await;
    response.batch_item_failures.into_iter().map(|f| f.item_identifier).collect()
}

#[tokio::test]
async fn a_malformed_record_fails_alone_and_a_foreign_bucket_s_waits_for_the_database() {
    // The test event is acknowledged; the malformed record fails; another bucket's object is
    // looked up among the event-driven sync sources, which takes the database (down here).
    assert_eq!(
        failures("sqs-batch-with-malformed-record.json").await,
        ["a1b2c3d4-0005-4000-8000-000000000005", "a1b2c3d4-0006-4000-8000-000000000006"]
    );
}

#[tokio::test]
async fn the_test_event_s3_sends_first_is_acknowledged() {
    assert!(failures("sqs-s3-test-event.json").await.is_empty());
}

#[tokio::test]
async fn a_record_that_meets_storage_that_is_down_is_delivered_again() {
    assert_eq!(failures("sqs-s3-object-created.json").await, ["a1b2c3d4-0001-4000-8000-000000000001"]);
    assert_eq!(failures("sqs-s3-object-removed.json").await, ["a1b2c3d4-0002-4000-8000-000000000002"]);
}
