//! Reranking on the running stack, against the **stand-in** rerankers the test starts
//! (`sluice_e2e::rerank_stand_in`): Cohere's rerank API, Amazon Bedrock's `Rerank` and an
//! endpoint serving the common `/rerank` shape. It proves what Sluice sends — the model, the
//! query, the first candidates, `top_n`, the Cohere key to Cohere alone, a SigV4 signature
//! and no key to Bedrock, nothing to a keyless endpoint — that the answer's order is the
//! reranker's, and that a refused key, a rate limit, a failing or a silent reranker leaves
//! the fused order with `reranked: false` and why. Never the quality of an order.

use reqwest::Method;
use serde_json::{Value, json};
use sluice_e2e::rerank_stand_in::{Fault, RerankStandIn, Shape, stand_in_order};
use sluice_e2e::{Stack, User};
use std::time::Duration;
use uuid::Uuid;

const COHERE_KEY: &str = "co-rerank-test-key";
const QUERY: &str = "harbour dredging schedule";

/// Passages that hold the query's words in different measure, so the stand-in's order is
/// not the fused one.
const PASSAGES: &[&str] = &[
    "The harbour dredging schedule for spring is posted at the harbour office each March.",
    "Dredging the harbour mouth takes three weeks when the tides allow it.",
    "The schedule of ferry crossings changes in winter.",
    "Harbour dues are paid at the office by the quay.",
    "A dredging contractor from the north coast won the tender this year.",
    "Fishing boats moor along the harbour wall during the dredging.",
    "The lighthouse keeper's schedule follows the tides.",
    "Volunteers clean the beach every Sunday morning.",
];

async fn secret(stack: &Stack, user: &User, provider: &str, value: &str) -> String {
    let body = json!({"name": format!("{provider} key {}", Uuid::new_v4().simple()), "kind": "api_key",
        "provider": provider, "value": value, "visibility": "org"});
    let (status, secret) = stack.call_json(user, Method::POST, "/secrets", Some(body)).await;
    assert_eq!(status, 201, "{secret}");
    secret["id"].as_str().expect("id").to_owned()
}

async fn search(stack: &Stack, user: &User, kb: &str, extra: Value) -> Value {
    let mut body = json!({"query": QUERY, "knowledge_base_ids": [kb], "top_k": 8, "explain": true});
    for (field, value) in extra.as_object().expect("fields") {
        body[field] = value.clone();
    }
    let (status, found) = stack.call_json(user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 200, "{found}");
    found
}

async fn set_rerank(stack: &Stack, user: &User, kb: &str, rerank: Value) -> (u16, Value) {
    stack.call_json(user, Method::PATCH, &format!("/kb/{kb}"), Some(json!({ "rerank": rerank }))).await
}

/// The candidates the stand-in was sent, in the order it ranked them, as the passages' texts.
fn stand_in_ranked(query: &str, documents: &[String]) -> Vec<String> {
    stand_in_order(query, documents).into_iter().map(|i| documents[i].clone()).collect()
}

#[tokio::test]
async fn a_reranked_search_answers_the_rerankers_order_sends_what_each_api_documents_and_degrades_cleanly() {
    let stack = Stack::from_env().await;
    let stand_in = RerankStandIn::start(COHERE_KEY).await;
    let user = User::with(Some(Uuid::new_v4()), &["secrets:edit", "collections:edit"], false);
    let cohere_key = secret(&stack, &user, "cohere", COHERE_KEY).await;
    let openai_key = secret(&stack, &user, "openai", "sk-openai-never-for-reranking").await;

    // A base of eight one-passage documents, reranked by Cohere over its first five candidates.
    let body = json!({"name": format!("harbour {}", Uuid::new_v4().simple()), "scope": "org",
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2",
        "rerank": {"provider": "cohere", "model": "rerank-v3.5", "secret_id": cohere_key, "candidates": 5}});
    let (status, base) = stack.call_json(&user, Method::POST, "/kb", Some(body)).await;
    assert_eq!(status, 201, "{base}");
    assert_eq!(base["rerank"]["candidates"], 5, "{base}");
    let kb = base["id"].as_str().expect("id").to_owned();
    for (n, passage) in PASSAGES.iter().enumerate() {
        stack.upload_document(&user, &kb, &format!("note-{n}.txt"), passage.as_bytes()).await;
    }
    stack.indexed(&user, &kb).await;

    // Without reranking: the fused order, and nothing sent.
    let fused = search(&stack, &user, &kb, json!({"rerank": false})).await;
    assert!(fused.get("reranked").is_none(), "{fused}");
    assert!(stand_in.take_seen().is_empty());
    let fused_order = sluice_e2e::result_contents(&fused);
    assert!(fused_order.len() >= 5, "{fused}");

    // With it: Cohere's shape, the first five candidates, the Cohere key, the stand-in's order.
    let found = search(&stack, &user, &kb, json!({})).await;
    assert_eq!(
        (found["reranked"].as_bool(), found["rerank"][0]["candidates"].as_u64()),
        (Some(true), Some(5)),
        "{found}"
    );
    let seen = stand_in.take_seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let sent = &seen[0];
    assert_eq!((sent.shape, sent.model.as_str(), sent.query.as_str()), (Shape::Cohere, "rerank-v3.5", QUERY));
    assert_eq!(
        sent.authorization.as_deref(),
        Some(format!("Bearer {COHERE_KEY}").as_str()),
        "Cohere's key, none other"
    );
    assert_eq!((sent.documents.len(), sent.top_n), (5, 5));
    for (document, candidate) in sent.documents.iter().zip(&fused_order) {
        assert!(document.ends_with(candidate.as_str()), "the first candidates in fused order: {document:?}");
    }
    let ranked = stand_in_ranked(QUERY, &sent.documents);
    let answered = sluice_e2e::result_contents(&found);
    for (rank, (hit, expected)) in answered.iter().zip(&ranked).enumerate() {
        assert!(expected.ends_with(hit.as_str()), "place {rank}: {hit:?} where the stand-in put {expected:?}");
        assert_eq!(found["results"][rank]["explain"]["rerank"]["rank"], rank + 1, "{found}");
    }
    assert_ne!(answered[..5], fused_order[..5], "the stand-in's order is not the fused one");
    assert_eq!(answered[5..], fused_order[5..], "the candidates not reranked follow in fused order");
    assert!(found["results"][5]["explain"]["rerank"].is_null(), "{found}");

    // Each failure: the fused order, `reranked: false` and why — one try, no retry.
    for (fault, reason) in [
        (Fault::Status(401), "credential_refused"),
        (Fault::Status(429), "rate_limited"),
        (Fault::Status(500), "provider_failing"),
        (Fault::Status(503), "provider_failing"),
        (Fault::Delay(Duration::from_secs(7)), "timed_out"),
    ] {
        stand_in.script(vec![fault.clone()]);
        let started = std::time::Instant::now();
        let degraded = search(&stack, &user, &kb, json!({})).await;
        assert_eq!(degraded["reranked"], false, "{fault:?}: {degraded}");
        assert_eq!(degraded["rerank"][0]["reason"], reason, "{fault:?}: {degraded}");
        assert_eq!(sluice_e2e::result_contents(&degraded), fused_order, "{fault:?}: the fused order stands");
        assert_eq!(stand_in.take_seen().len(), 1, "{fault:?}: one try");
        assert!(started.elapsed() < Duration::from_secs(7), "{fault:?}: within the reranking's time limit");
    }

    // Bedrock: the deployment's role signs, no key travels, the model by its ARN.
    let bedrock = |extra: Value| {
        let mut setting = json!({"provider": "bedrock", "model": "cohere.rerank-v3-5:0"});
        setting.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        setting
    };
    let (status, refused) = set_rerank(&stack, &user, &kb, bedrock(json!({"secret_id": cohere_key}))).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["details"]["fields"]["rerank.secret_id"].is_string(), "{refused}");
    // The stack's region is us-east-1, where Bedrock serves Cohere Rerank 3.5 but not Amazon
    // Rerank 1.0: refused here as Bedrock's API would refuse it.
    let (status, refused) = set_rerank(&stack, &user, &kb, bedrock(json!({"model": "amazon.rerank-v1:0"}))).await;
    assert_eq!(status, 400, "{refused}");
    let why = refused["error"]["details"]["fields"]["rerank.model"].as_str().unwrap_or_default();
    assert!(why.contains("us-east-1"), "{refused}");
    let (status, _) = set_rerank(&stack, &user, &kb, bedrock(json!({"candidates": 6}))).await;
    assert_eq!(status, 200);
    let found = search(&stack, &user, &kb, json!({})).await;
    assert_eq!(found["reranked"], true, "{found}");
    let seen = stand_in.take_seen();
    let sent = &seen[0];
    assert_eq!(sent.shape, Shape::Bedrock);
    assert_eq!(sent.model, "arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0");
    assert!(!sent.authorization.as_deref().unwrap_or_default().contains(COHERE_KEY), "no key travels to Bedrock");
    assert_eq!((sent.documents.len(), sent.top_n), (6, 6));
    let ranked = stand_in_ranked(QUERY, &sent.documents);
    for (hit, expected) in sluice_e2e::result_contents(&found).iter().zip(&ranked) {
        assert!(expected.ends_with(hit.as_str()), "{hit:?} where the stand-in put {expected:?}");
    }

    // An endpoint serving the common shape, registered keyless: nothing but the request.
    let endpoint = json!({"name": format!("reranker {}", Uuid::new_v4().simple()), "provider": "local",
        "base_url": RerankStandIn::common_base_url(), "scope": "org"});
    let (status, endpoint) = stack.call_json(&user, Method::POST, "/embedding-endpoints", Some(endpoint)).await;
    assert_eq!(status, 201, "{endpoint}");
    let endpoint_id = endpoint["id"].as_str().expect("id").to_owned();
    let (status, _) =
        set_rerank(&stack, &user, &kb, json!({"endpoint_id": endpoint_id, "model": "BAAI/bge-reranker-base"})).await;
    assert_eq!(status, 200);
    let found = search(&stack, &user, &kb, json!({})).await;
    assert_eq!(found["reranked"], true, "{found}");
    let seen = stand_in.take_seen();
    assert_eq!(
        (seen[0].shape, seen[0].authorization.as_deref()),
        (Shape::Common, None),
        "a keyless endpoint gets no key"
    );
    assert_eq!(seen[0].model, "BAAI/bge-reranker-base");

    // Keys go only where they were stored for, and to an endpoint only over https.
    let body = json!({"name": "endpoint key", "kind": "api_key", "provider": format!("endpoint:{endpoint_id}"),
        "value": "endpoint-key", "visibility": "org"});
    let (status, refused) = stack.call_json(&user, Method::POST, "/secrets", Some(body)).await;
    assert_eq!(status, 400, "no key is kept for an endpoint reached in the clear: {refused}");
    for key in [&openai_key, &cohere_key] {
        let (status, refused) =
            set_rerank(&stack, &user, &kb, json!({"endpoint_id": endpoint_id, "model": "bge", "secret_id": key})).await;
        assert_eq!(status, 400, "{refused}");
        assert!(refused["error"]["details"]["fields"]["rerank.secret_id"].is_string(), "{refused}");
    }
    let (status, refused) =
        set_rerank(&stack, &user, &kb, json!({"provider": "cohere", "model": "rerank-v3.5", "secret_id": openai_key}))
            .await;
    assert_eq!(status, 400, "an OpenAI key is not Cohere's: {refused}");

    // Switched off for the base: a request that asks for reranking names the field.
    let (status, _) = set_rerank(&stack, &user, &kb, Value::Null).await;
    assert_eq!(status, 200);
    let body = json!({"query": QUERY, "knowledge_base_ids": [kb], "rerank": true});
    let (status, refused) = stack.call_json(&user, Method::POST, "/rag/search", Some(body)).await;
    assert_eq!(status, 422, "{refused}");
    let found = search(&stack, &user, &kb, json!({})).await;
    assert!(found.get("reranked").is_none() && stand_in.take_seen().is_empty(), "{found}");
    assert_eq!(stand_in.violations(), Vec::<String>::new());
}
