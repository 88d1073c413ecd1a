//! The bounds on what one request may list or name: a search reads at most 20 collections
//! and each filter lists at most 100 values (checked before any is resolved); a presigned
//! intent's filename is held to the inline upload's 255 characters.

use reqwest::Method;
use serde_json::json;
use sluice_e2e::{Stack, User};
use uuid::Uuid;

#[tokio::test]
async fn a_search_names_at_most_twenty_collections_and_a_hundred_values_a_filter() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let names: Vec<String> = (0..21).map(|n| format!("nowhere_{n}")).collect();
    let (status, refused) =
        stack.call_json(&user, Method::POST, "/rag/search", Some(json!({"query": "x", "collections": names}))).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["collections"].as_str().expect("field").contains("at most 20"));
    let ids: Vec<String> = (0..15).map(|_| Uuid::new_v4().to_string()).collect();
    let body = json!({"query": "x", "collections": ["a", "b", "c", "d", "e", "f"], "knowledge_base_ids": ids});
    let (status, refused) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["knowledge_base_ids"].is_string(), "{refused}");
    // Repeats are one collection: twenty-one mentions of one missing name is that name's 404.
    let repeated = vec!["nowhere_at_all"; 21];
    let (status, _) =
        stack.call_json(&user, Method::POST, "/rag/search", Some(json!({"query": "x", "collections": repeated}))).await;
    assert_eq!(status, 404);
    let units: Vec<String> = (0..101).map(|n| format!("unit {n}")).collect();
    let body = json!({"query": "x", "collections": ["nowhere"], "filters": {"organizational_unit": units}});
    let (status, refused) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["organizational_unit"].is_string(), "{refused}");
}

#[tokio::test]
async fn a_presigned_filename_is_held_to_255_characters() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let long = format!("{}.txt", "n".repeat(252));
    let (status, refused) = stack.intent(&user, json!({"filename": long, "size": 10, "mime_type": "text/plain"})).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["filename"].as_str().expect("field").contains("255"));
    let fits = format!("{}.txt", "n".repeat(251));
    let (status, intent) = stack.intent(&user, json!({"filename": fits, "size": 10, "mime_type": "text/plain"})).await;
    assert_eq!(status, 201, "{intent}");

    let (status, base) = stack
        .call_json(
            &user,
            Method::POST,
            "/kb",
            Some(json!({"name": "Long names", "scope": "personal",
            "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"})),
        )
        .await;
    assert_eq!(status, 201, "{base}");
    let path = format!("/kb/{}/documents/uploads", base["id"].as_str().expect("id"));
    let (status, refused) = stack
        .call_json(&user, Method::POST, &path, Some(json!({"filename": long, "size": 10, "mime_type": "text/plain"})))
        .await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["filename"].is_string(), "{refused}");
}

#[tokio::test]
async fn a_message_is_named_by_one_canonical_uuid_only() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let id = Uuid::new_v4();
    let file = json!({"file_ids": [Uuid::new_v4()]});
    for message in [
        id.simple().to_string(),
        format!("{{{id}}}"),
        format!("urn:uuid:{id}"),
        format!("{id}{}", "0".repeat(300)),
        "not-a-message".to_owned(),
    ] {
        let path = format!("/messages/{}/attachments", braces_escaped(&message));
        let (status, refused) = stack.call_json(&user, Method::POST, &path, Some(file.clone())).await;
        assert_eq!(status, 400, "{message}: {refused}");
        assert!(refused["error"]["details"]["fields"]["message_id"].is_string(), "{message}: {refused}");
    }
    // The canonical form reaches the files check (the file is not the caller's to link).
    let (status, answer) =
        stack.call_json(&user, Method::POST, &format!("/messages/{id}/attachments"), Some(file)).await;
    assert_ne!(status, 400, "{answer}");
}

/// Braces and colons as a client would send them in a path.
fn braces_escaped(segment: &str) -> String {
    segment.replace('{', "%7B").replace('}', "%7D")
}
