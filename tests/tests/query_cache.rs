//! A repeated search does not embed its query again: the search function keeps a keyless
//! model's query vectors per tenant, for its sandbox's life.

use serde_json::json;
use sluice_e2e::{Stack, User};
use std::sync::Arc;
use uuid::Uuid;

/// The stack's front door over the stack's database and emulator, with the search state's
/// query cache at hand.
async fn door(stack: &Stack) -> (String, Arc<sluice_search::query_cache::QueryCache>) {
    let config = stack.config().await;
    let db = sluice_store::Db::open(&stack.db_target, &stack.vector_login, 2).expect("a pool");
    // Search over its own read-only login, as the template gives it.
    let search_db = sluice_store::Db::open(&stack.db_target, &stack.search_login, 2).expect("a pool");
    let search = sluice_search::State::new(config, search_db, &stack.sdk);
    let cache = search.query_cache.clone();
    (stack.door(db, search).await, cache)
}

async fn vector_search(stack: &Stack, door: &str, user: &User, kb: &str, query: &str) {
    let body = json!({"query": query, "knowledge_base_ids": [kb], "mode": "vector", "top_k": 3});
    let answer = stack
        .http
        .post(format!("{door}/api/v1/rag/search"))
        .header("authorization", user.bearer())
        .json(&body)
        .send()
        .await
        .expect("search");
    assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap_or_default());
}

#[tokio::test]
async fn a_repeated_query_is_embedded_once_per_tenant() {
    let stack = Stack::from_env().await;
    let (door, cache) = door(&stack).await;
    let mut bases = Vec::new();
    let users = [
        User::with(Some(Uuid::new_v4()), &["collections:edit"], false),
        User::with(Some(Uuid::new_v4()), &["collections:edit"], false),
    ];
    for user in &users {
        let body = json!({"name": "Tides", "scope": "org", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
        let (status, base) = stack.call_json(user, reqwest::Method::POST, "/kb", Some(body)).await;
        assert_eq!(status, 201, "{base}");
        bases.push(base["id"].as_str().expect("id").to_owned());
    }
    vector_search(&stack, &door, &users[0], &bases[0], "when is high tide at the north quay").await;
    vector_search(&stack, &door, &users[0], &bases[0], "when is high tide at the north quay").await;
    assert_eq!(cache.counts(), (1, 2), "the second search found the first one's vector");
    // Another organization asking the same is embedded afresh.
    vector_search(&stack, &door, &users[1], &bases[1], "when is high tide at the north quay").await;
    assert_eq!(cache.counts(), (1, 3));
    // And a different question is too.
    vector_search(&stack, &door, &users[0], &bases[0], "who pilots the ferry").await;
    assert_eq!(cache.counts(), (1, 4));
}

#[tokio::test]
async fn an_app_bases_queries_are_kept_per_asking_organization() {
    let stack = Stack::from_env().await;
    let (door, cache) = door(&stack).await;
    let admin = User::with(None, &[], true);
    let body = json!({"name": "Handbook", "scope": "app", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2"});
    let (status, base) = stack.call_json(&admin, reqwest::Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    let kb = base["id"].as_str().expect("id").to_owned();
    let (first, second) = (User::with(Some(Uuid::new_v4()), &[], false), User::with(Some(Uuid::new_v4()), &[], false));
    let question = "may a contractor sign the harbour permit";
    vector_search(&stack, &door, &first, &kb, question).await;
    // The base is every organization's, but what one of them asked is not the other's.
    vector_search(&stack, &door, &second, &kb, question).await;
    assert_eq!(cache.counts(), (0, 2), "the second organization found the first one's question");
    vector_search(&stack, &door, &first, &kb, question).await;
    assert_eq!(cache.counts(), (1, 3), "the first organization finds its own");
}
