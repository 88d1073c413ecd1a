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

fn sluice_rag_ingest(dir: &std::path::Path, collection: &str) -> (bool, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("rag-ingest")
        .arg(dir)
        .args(["--collection", collection])
        .output()
        .expect("run");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tally = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("stdout {stdout:?}, stderr {stderr}"));
    (output.status.success(), tally)
}

#[tokio::test]
async fn a_local_directory_is_ingested_by_address_and_a_second_run_skips_what_did_not_change() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let body = json!({"name": "Operator disk", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let (kb, collection) = (base["id"].as_str().expect("id"), base["collection_name"].as_str().expect("name"));
    let dir = std::env::temp_dir().join(format!("sluice-rag-ingest-{}", Uuid::new_v4().simple()));
    for (path, text) in [
        ("a/readme.md", "The first team's readme."),
        ("b/readme.md", "The second team's readme."),
        ("notes.txt", "Notes, first version."),
        ("tool.exe", "not a document"),
    ] {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("dir");
        std::fs::write(file, text).expect("write");
    }
    // A link planted in the directory is not followed out of it.
    std::os::unix::fs::symlink("/etc/hostname", dir.join("planted.md")).expect("symlink");

    let (ok, first) = sluice_rag_ingest(&dir, collection);
    assert!(ok, "{first}");
    assert_eq!(
        (first["total"].as_i64(), first["ingested"].as_i64(), first["skipped"].as_i64()),
        (Some(4), Some(3), Some(1)),
        "{first}"
    );
    let (ok, second) = sluice_rag_ingest(&dir, collection);
    assert!(ok, "{second}");
    assert_eq!((second["ingested"].as_i64(), second["skipped"].as_i64()), (Some(0), Some(4)), "{second}");
    std::fs::write(dir.join("notes.txt"), "Notes, second version, longer.").expect("rewrite");
    let (ok, third) = sluice_rag_ingest(&dir, collection);
    assert!(ok, "{third}");
    assert_eq!((third["updated"].as_i64(), third["skipped"].as_i64()), (Some(1), Some(3)), "{third}");

    let rows = stack
        .db()
        .await
        .query(
            "SELECT source_path, writer_kind, storage_path IS NOT NULL FROM rag_documents WHERE kb_id = $1::text::uuid \
             ORDER BY source_path",
            &[&kb],
        )
        .await
        .expect("rows");
    let root = dir.canonicalize().expect("root");
    let paths: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let expected: Vec<String> = ["a/readme.md", "b/readme.md", "notes.txt"]
        .iter()
        .map(|p| root.join(p).to_string_lossy().into_owned())
        .collect();
    assert_eq!(paths, expected);
    assert!(rows.iter().all(|r| r.get::<_, String>(1) == "operator" && r.get::<_, bool>(2)));
    std::fs::remove_dir_all(&dir).expect("clean up");
}
