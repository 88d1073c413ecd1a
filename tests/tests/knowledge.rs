//! The knowledge function on the running stack: the embedding catalog over HTTP.

use serde_json::Value;
use sluice_e2e::{Stack, User};

async fn get(stack: &Stack, user: &User, path: &str) -> (u16, Value) {
    let response =
        stack.http.get(stack.url(path)).header("authorization", user.bearer()).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test]
async fn the_embedding_catalog_lists_models_with_their_width_and_provider() {
    let stack = Stack::from_env().await;
    let user = User::new();
    let (status, all) = get(&stack, &user, "/rag/embedding-models").await;
    assert_eq!(status, 200, "{all}");
    let models = all["models"].as_array().expect("models");
    assert!(
        models.iter().any(|m| m["provider"] == "openai" && m["model"] == "text-embedding-3-small" && m["dim"] == 1536)
    );
    let (status, local) = get(&stack, &user, "/rag/embedding-models?provider=local").await;
    assert_eq!(status, 200);
    assert_eq!(
        local["models"],
        serde_json::json!([{"provider": "local", "model": "all-minilm-l6-v2", "dim": 384, "keyless": true}])
    );
    let (status, unknown) = get(&stack, &user, "/rag/embedding-models?provider=nobody").await;
    assert_eq!(status, 400, "{unknown}");
    assert!(unknown["error"]["details"]["fields"]["provider"].is_string(), "{unknown}");
}

#[tokio::test]
async fn the_catalog_needs_a_token() {
    let stack = Stack::from_env().await;
    let response = stack.http.get(stack.url("/rag/embedding-models")).send().await.expect("request");
    assert_eq!(response.status().as_u16(), 401);
}
