//! The embedding cache on the running stack: a collection's vectors are reused only for the
//! same target (provider, model, endpoint) and tenant. Two bases of one collection that
//! embed through different endpoints each pay their own endpoint — no endpoint's vectors
//! stand in for another's, and no endpoint's silence tells which texts the other holds —
//! while a second document of the same base with the same text embeds nothing new.

use reqwest::Method;
use serde_json::json;
use sluice_e2e::stub::StubProvider;
use sluice_e2e::{Stack, User};
use uuid::Uuid;

async fn endpoint(stack: &Stack, user: &User, stub: &StubProvider) -> String {
    let service = json!({"name": format!("stub {}", Uuid::new_v4()), "provider": "local",
        "base_url": stub.base_url, "scope": "org"});
    let (status, endpoint) = stack.call_json(user, Method::POST, "/embedding-endpoints", Some(service)).await;
    assert_eq!(status, 201, "{endpoint}");
    endpoint["id"].as_str().expect("id").to_owned()
}

async fn base(stack: &Stack, user: &User, collection: &str, endpoint: &str, scope: &str) -> String {
    let body = json!({"name": "Cache", "scope": scope, "collection_name": collection, "embedding_provider": "local",
        "embedding_model": "all-minilm-l6-v2", "embedding_endpoint_id": endpoint});
    let (status, base) = stack.call_json(user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    base["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn a_cached_vector_serves_only_the_target_that_made_it() {
    let stack = Stack::from_env().await;
    let (first, second) = (
        StubProvider::start(vec![StubProvider::sized()], 384).await,
        StubProvider::start(vec![StubProvider::sized()], 384).await,
    );
    let org = Some(Uuid::new_v4());
    let user = User::with(org, &["collections:edit"], false);
    let collection = format!("cache_{}", &Uuid::new_v4().simple().to_string()[..10]);
    let (first_endpoint, second_endpoint) =
        (endpoint(&stack, &user, &first).await, endpoint(&stack, &user, &second).await);
    let text = "The escalation path for a failed payroll run goes through the duty controller.\n";

    let org_base = base(&stack, &user, &collection, &first_endpoint, "org").await;
    stack.upload_document(&user, &org_base, "payroll.md", text.as_bytes()).await;
    stack.indexed(&user, &org_base).await;
    let paid = first.inputs();
    assert!(paid >= 1, "the first endpoint embedded the text");

    // The same text again in the same base (a second document of the same title, so the
    // same context is embedded with it): the cache serves it.
    stack.upload_document(&user, &org_base, "payroll.md", text.as_bytes()).await;
    stack.indexed(&user, &org_base).await;
    assert_eq!(first.inputs(), paid, "an unchanged text through the same target is never paid twice");

    // A base of the same collection through another endpoint pays its own endpoint.
    let own_base = base(&stack, &user, &collection, &second_endpoint, "personal").await;
    stack.upload_document(&user, &own_base, "payroll.md", text.as_bytes()).await;
    stack.indexed(&user, &own_base).await;
    assert!(second.inputs() >= 1, "the second endpoint was asked for its own vector");
    assert_eq!(first.inputs(), paid, "the first endpoint was not asked again");
}
