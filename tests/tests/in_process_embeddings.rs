//! The keyless `local` provider in-process (how ingest and knowledge embed in AWS, from the
//! model layer): the same vectors as the local stack's embedding service, through the same
//! client entry point.

use sluice_embed::client::{EmbedError, RetryPolicy, Target, embed};

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[tokio::test]
async fn the_in_process_model_embeds_as_the_local_service_does() {
    let service_url = std::env::var("SLUICE_LOCAL_EMBEDDINGS_URL").expect("run with `infra/local/test`");
    let texts: Vec<String> = [
        "The quarterly budget was approved by the board.",
        "Cats sleep for most of the day.",
        "Die Sitzung wurde auf Donnerstag verschoben.",
    ]
    .map(str::to_owned)
    .to_vec();
    let http = sluice_embed::http_client();
    let service = Target {
        base_url: service_url,
        model: "all-minilm-l6-v2".to_owned(),
        dimensions: 384,
        api_key: None,
        api: Default::default(),
    };
    let in_process = Target { base_url: sluice_embed::in_process::base_url(), ..service.clone() };
    let expected = embed(&http, &service, &texts, RetryPolicy::default()).await.expect("the service embeds");
    let got = embed(&http, &in_process, &texts, RetryPolicy::default()).await.expect("the model embeds in-process");
    assert_eq!(got.len(), texts.len());
    for (a, b) in expected.iter().zip(&got) {
        assert_eq!(b.len(), 384);
        assert!(cosine(a, b) > 0.99999, "cosine {}", cosine(a, b));
    }
    // Different texts stay apart: the vectors are the texts', not a constant.
    assert!(cosine(&got[0], &got[1]) < 0.9);

    let other_model = Target { model: "text-embedding-3-small".to_owned(), ..in_process.clone() };
    let refused = embed(&http, &other_model, &texts, RetryPolicy::default()).await;
    assert!(matches!(refused, Err(EmbedError::ModelNotServed)), "{refused:?}");
}
