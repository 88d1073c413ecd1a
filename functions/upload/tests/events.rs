//! The handler against the API Gateway samples in `events/`, with no network: every
//! request here is refused before storage is touched, or meets storage that is down.

use lambda_http::{Body, Response};
use serde_json::Value;
use sluice_blob::Blob;
use sluice_domain::Config;
use sluice_isolate::Extractor;
use sluice_store::Db;
use sluice_upload::{AppState, handle};

/// A port nothing listens on: storage calls fail at once.
const CLOSED: &str = "127.0.0.1:9";

fn offline_state(chat_max_upload_bytes: u64) -> AppState {
    let mut config = Config::from_lookup(|name| match name {
        "SLUICE_BUCKET" => Some("bucket".to_owned()),
        "SLUICE_KMS_KEY_ID" => Some("arn:aws:kms:us-east-1:123456789012:key/test".to_owned()),
        _ => None,
    })
    .expect("config");
    config.chat_max_upload_bytes = chat_max_upload_bytes;
    let db = Db::unreachable();
    let blob =
        Blob::new(sluice_blob::static_s3_client(&format!("http://{CLOSED}")), "bucket", config.kms_key_id.clone());
    // The function's own binary is its parse worker, as in Lambda.
    let extractor = Extractor::new(env!("CARGO_BIN_EXE_sluice-upload"), config.parse_max_memory_bytes);
    let sqs = sluice_blob::static_sqs_client(&format!("http://{CLOSED}"));
    AppState::new(config, db, blob, sluice_extraction::Reader::Workers(extractor), sqs)
}

fn sample(name: &str) -> lambda_http::Request {
    let path = format!("{}/../../events/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name} is not an API Gateway v2 event: {e}"))
}

fn json_of(response: &Response<Body>) -> Value {
    match response.body() {
        Body::Text(text) => serde_json::from_str(text).expect("json body"),
        other => panic!("expected a JSON text body, got {other:?}"),
    }
}

async fn call(name: &str, chat_max: u64) -> (u16, Value) {
    let response = handle(&offline_state(chat_max), sample(name)).await;
    let status = response.status().as_u16();
    (status, json_of(&response))
}

#[tokio::test]
async fn a_request_without_authorizer_claims_is_401() {
    let (status, body) = call("apigw-v2-upload-no-authorizer.json", 1 << 20).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "unauthorized");
}

#[tokio::test]
async fn a_type_off_the_allowlist_is_415_naming_the_file() {
    let (status, body) = call("apigw-v2-upload-disallowed.json", 1 << 20).await;
    assert_eq!(status, 415);
    assert_eq!(body["error"]["details"]["reason"], "extension_not_allowed");
    assert!(body["error"]["details"]["fields"]["file"].is_string());
}

#[tokio::test]
async fn bytes_that_contradict_the_name_are_415() {
    let (status, body) = call("apigw-v2-upload-mislabelled.json", 1 << 20).await;
    assert_eq!(status, 415);
    assert_eq!(body["error"]["details"]["reason"], "content_mismatch");
    let (status, body) = call("apigw-v2-upload-wrong-declared-type.json", 1 << 20).await;
    assert_eq!(status, 415);
    assert_eq!(body["error"]["details"]["reason"], "declared_type_mismatch");
}

#[tokio::test]
async fn a_file_over_the_chat_limit_is_413() {
    let (status, body) = call("apigw-v2-upload-csv.json", 16).await;
    assert_eq!(status, 413);
    assert_eq!(body["error"]["code"], "file_too_large");
    assert!(body["error"]["details"]["fields"]["file"].is_string());
}

#[tokio::test]
async fn a_file_over_the_inline_cap_is_sent_to_the_presigned_path() {
    let mut state = offline_state(1 << 20);
    state.config.inline_upload_max_bytes = Some(16);
    let response = handle(&state, sample("apigw-v2-upload-csv.json")).await;
    assert_eq!(response.status().as_u16(), 413);
    let body = json_of(&response);
    assert_eq!(body["error"]["code"], "file_too_large");
    assert_eq!(body["error"]["details"]["reason"], "use_presigned_upload");
    assert_eq!(body["error"]["details"]["upload_route"], "POST /api/v1/files/uploads");
    let advice = body["error"]["details"]["fields"]["file"].as_str().expect("the field names the file");
    assert!(advice.contains("presigned"), "{advice}");
    // Within the cap, the ceiling alone decides, as before.
    state.config.inline_upload_max_bytes = Some(2 << 20);
    assert_eq!(state.config.inline_limit(1 << 20), (1 << 20, false));
}

#[tokio::test]
async fn an_id_that_cannot_exist_is_the_plain_404() {
    let (status, body) = call("apigw-v2-get-file-bad-id.json", 1 << 20).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["message"], "File not found");
}

#[tokio::test]
async fn linking_nothing_is_400_naming_file_ids() {
    let (status, body) = call("apigw-v2-link-attachments-empty.json", 1 << 20).await;
    assert_eq!(status, 400);
    assert!(body["error"]["details"]["fields"]["file_ids"].is_string());
}

#[tokio::test]
async fn storage_that_is_down_is_503_without_upstream_text() {
    let (status, body) = call("apigw-v2-upload-csv.json", 1 << 20).await;
    assert_eq!(status, 503);
    let text = body.to_string();
    assert!(!text.contains("127.0.0.1") && !text.contains("bucket"), "leaked upstream detail: {text}");
    let (status, _) = call("apigw-v2-get-file.json", 1 << 20).await;
    assert_eq!(status, 503);
}
