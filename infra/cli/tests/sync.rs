//! `sluice sync` against the running local stack: a source run in the foreground lists its
//! bucket here, and the stack's parse and ingest finish what it hands them.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use std::process::Command;
use uuid::Uuid;

fn sluice_sync(source: &str) -> (bool, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["sync", source]).output().expect("run");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("stdout {stdout:?}, stderr {stderr}"));
    (output.status.success(), log)
}

#[tokio::test]
async fn a_source_runs_in_the_foreground_and_a_second_run_reads_nothing() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit", "secrets:edit"], false);
    let body = json!({"name": "Operator drive", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id");
    let bucket = format!("operator-docs-{}", &Uuid::new_v4().simple().to_string()[..12]);
    stack.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    for key in ["d/one.md", "d/two.txt"] {
        let body = format!("The operator's file {key}.").into_bytes();
        stack.s3.put_object().bucket(&bucket).key(key).body(body.into()).send().await.expect("put");
    }
    let secret = json!({"name": "operator reader", "kind": "aws_credentials", "visibility": "org",
        "value": {"access_key_id": "AKIAEXAMPLE", "secret_access_key": "example"}});
    let (_, secret) = stack.call_json(&user, Method::POST, "/secrets", Some(secret)).await;
    let source = json!({"type": "s3", "name": "d", "config": {"bucket": bucket, "prefix": "d/"},
        "credential": {"secret_id": secret["id"]}});
    let (status, source) = stack.call_json(&user, Method::POST, &format!("/kb/{kb}/sync-sources"), Some(source)).await;
    assert_eq!(status, 201, "{source}");
    let source = source["id"].as_str().expect("id");

    let (ok, first) = sluice_sync(source);
    assert!(ok, "{first}");
    assert_eq!(
        (first["status"].as_str(), first["ingested"].as_i64(), first["trigger"].as_str()),
        (Some("done"), Some(2), Some("operator")),
        "{first}"
    );
    let (ok, second) = sluice_sync(source);
    assert!(ok, "{second}");
    assert_eq!((second["skipped"].as_i64(), second["fetched"].as_i64()), (Some(2), Some(0)), "{second}");
}
