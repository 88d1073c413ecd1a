//! `sluice search` against the running local stack: the operator's search of one base
//! answers as `/rag/search` does, explained, in each mode; a base that does not exist is an
//! error naming it.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::{Stack, User};
use std::process::Command;
use uuid::Uuid;

fn sluice_search(args: &[&str]) -> (bool, Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice")).arg("search").args(args).output().expect("run");
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let answer = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (output.status.success(), answer, stderr)
}

#[tokio::test]
async fn an_operator_searches_a_base_in_each_mode_and_sees_why_each_passage_came_back() {
    let stack = Stack::from_env().await;
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);
    let body = json!({"name": "Operator search", "scope": "org", "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id").to_owned();
    for (name, text) in [
        ("valves.txt", "Replace gasket QX-778 on the intake valve every spring."),
        ("garden.txt", "Tomatoes want sun, water in the morning and a stake to climb."),
    ] {
        stack.upload_document(&user, &kb, name, text.as_bytes()).await;
    }
    stack.indexed(&user, &kb).await;

    for mode in ["hybrid", "keyword", "vector"] {
        let (ok, answer, stderr) =
            sluice_search(&["--knowledge-base", &kb, "QX-778 gasket", "--mode", mode, "--explain"]);
        assert!(ok, "{mode}: {stderr}");
        let first = &answer["results"][0];
        assert_eq!(first["filename"], "valves.txt", "{mode}: {answer}");
        let explain = &first["explain"];
        assert_eq!(explain["keyword"].is_null(), mode == "vector", "{mode}: {answer}");
        assert_eq!(explain["vector"].is_null(), mode == "keyword", "{mode}: {answer}");
        // The route's own answer for the same search is the same passage, same score.
        let body = json!({"query": "QX-778 gasket", "knowledge_base_ids": [kb], "mode": mode});
        let (status, routed) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
        assert_eq!(status, 200, "{routed}");
        assert_eq!(routed["results"][0]["metadata"]["chunk_id"], first["metadata"]["chunk_id"], "{mode}");
        assert_eq!(routed["results"][0]["score"], first["score"], "{mode}");
    }
    let (ok, _, stderr) = sluice_search(&["--knowledge-base", &kb, "gasket", "--mode", "fuzzy"]);
    assert!(!ok && stderr.contains("hybrid, vector or keyword"), "{stderr}");
    let missing = Uuid::new_v4().to_string();
    let (ok, _, stderr) = sluice_search(&["--knowledge-base", &missing, "gasket"]);
    assert!(!ok && stderr.contains(&missing), "{stderr}");
}
