//! The embedding client against a scripted provider and the stack's real local service.

use sluice_e2e::stub::{Scripted, StubProvider};
use sluice_embed::client::{EmbedError, RetryPolicy, Target, embed};
use std::time::{Duration, Instant};

fn target(base_url: &str, dimensions: usize) -> Target {
    Target { base_url: base_url.to_owned(), model: "m".to_owned(), dimensions, api_key: None, api: Default::default() }
}

fn quick() -> RetryPolicy {
    RetryPolicy { attempts: 3, first_delay: Duration::from_millis(10), max_delay: Duration::from_secs(3) }
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text {i}")).collect()
}

#[tokio::test]
async fn a_rate_limit_is_waited_out_as_the_provider_asks() {
    let stub =
        StubProvider::start(vec![Scripted::status(429, "{}").header("retry-after", "1"), StubProvider::sized()], 4)
            .await;
    let started = Instant::now();
    let vectors =
        embed(&sluice_embed::http_client(), &target(&stub.base_url, 4), &texts(3), quick()).await.expect("embedded");
    assert_eq!(vectors.len(), 3);
    assert!(started.elapsed() >= Duration::from_millis(950), "Retry-After was not honoured: {:?}", started.elapsed());
    assert_eq!(stub.requests(), 2);
}

#[tokio::test]
async fn a_refused_key_is_not_retried_and_a_failing_provider_is_retried_then_reported() {
    let client = sluice_embed::http_client();
    let refused =
        StubProvider::start(vec![Scripted::status(401, r#"{"error":"bad key sk-123 at internal-host"}"#)], 4).await;
    let error = embed(&client, &target(&refused.base_url, 4), &texts(1), quick()).await.expect_err("refused");
    assert_eq!((error.clone(), refused.requests()), (EmbedError::CredentialRefused(401), 1));
    assert!(!error.is_transient());
    assert!(!format!("{error} {}", error.advice()).contains("sk-123"), "the provider's words are not ours");

    let failing = StubProvider::start(vec![Scripted::status(500, "{}")], 4).await;
    let error = embed(&client, &target(&failing.base_url, 4), &texts(1), quick()).await.expect_err("failing");
    assert_eq!((error.clone(), failing.requests()), (EmbedError::ProviderFailing(500), 3));
    assert!(error.is_transient());

    let missing = StubProvider::start(vec![Scripted::status(404, "{}")], 4).await;
    let error = embed(&client, &target(&missing.base_url, 4), &texts(1), quick()).await.expect_err("404");
    assert_eq!(error, EmbedError::ModelNotServed);

    let narrow = StubProvider::start(vec![StubProvider::sized()], 3).await;
    let error = embed(&client, &target(&narrow.base_url, 4), &texts(2), quick()).await.expect_err("width");
    assert_eq!(error, EmbedError::Malformed);

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://127.0.0.1:{}/v1", listener.local_addr().expect("addr").port())
    };
    let error = embed(&client, &target(&closed, 4), &texts(1), quick()).await.expect_err("closed");
    assert_eq!(error, EmbedError::Unreachable);
}

#[tokio::test]
async fn the_local_service_embeds_meaning() {
    let base_url = std::env::var("SLUICE_LOCAL_EMBEDDINGS_URL").expect("run with infra/local/test");
    let target = Target {
        base_url,
        model: "all-minilm-l6-v2".to_owned(),
        dimensions: 384,
        api_key: None,
        api: Default::default(),
    };
    let texts = vec![
        "How do I reset my password?".to_owned(),
        "Steps to recover access when you forgot your login credentials".to_owned(),
        "Quarterly revenue grew by twelve percent".to_owned(),
    ];
    let vectors = embed(&sluice_embed::http_client(), &target, &texts, RetryPolicy::default()).await.expect("embedded");
    let cosine = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(cosine(&vectors[0], &vectors[1]) > cosine(&vectors[0], &vectors[2]) + 0.2);
}
