//! The real model from the wheel the stack provisions, in both precisions: unit vectors of
//! its width, meaning over wording, the same answer alone and in a padded batch, and int8
//! faithful to fp32.

use sluice_embedder::model::{DIMENSIONS, Embedder, Precision};

fn load(precision: Precision) -> Embedder {
    let dir = std::env::var("SLUICE_EMBEDDER_MODEL_DIR")
        .expect("SLUICE_EMBEDDER_MODEL_DIR is not set: run the tests with `infra/local/test`");
    Embedder::load(std::path::Path::new(&dir), precision, 2).expect("the model loads")
}

fn embedders() -> [Embedder; 2] {
    [load(Precision::Int8), load(Precision::Fp32)]
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn sentences_of_one_meaning_are_nearer_than_sentences_of_another() {
    for embedder in embedders() {
        let texts: Vec<String> = [
            "The invoice must be paid within thirty days.",
            "Payment of the bill is due in a month.",
            "Our cat sleeps on the warm windowsill all afternoon.",
        ]
        .map(str::to_owned)
        .to_vec();
        let (vectors, tokens) = embedder.embed(&texts).expect("embedded");
        assert!(tokens > 20);
        for vector in &vectors {
            assert_eq!(vector.len(), DIMENSIONS);
            assert!((cosine(vector, vector) - 1.0).abs() < 1e-5, "unit length");
        }
        let (near, far) = (cosine(&vectors[0], &vectors[1]), cosine(&vectors[0], &vectors[2]));
        assert!(near > 0.5 && far < 0.2 && near > far + 0.3, "{embedder:?}: near {near}, far {far}");

        // Padding a text in a batch with a longer one changes nothing: the mask holds.
        let (alone, _) = embedder.embed(&texts[..1]).expect("embedded");
        assert!(cosine(&alone[0], &vectors[0]) > 1.0 - 1e-5);
    }
}

#[test]
fn a_text_past_the_model_limit_is_truncated_not_refused() {
    for embedder in embedders() {
        let long = "word ".repeat(5_000);
        let (vectors, tokens) = embedder.embed(&[long]).expect("embedded");
        assert_eq!(vectors[0].len(), DIMENSIONS);
        assert_eq!(tokens, sluice_embedder::model::MAX_TOKENS);
    }
}

#[test]
fn texts_of_many_lengths_come_back_in_order_as_each_would_alone() {
    for embedder in embedders() {
        let texts: Vec<String> =
            (0..40).map(|i| format!("Berth {i} is dredged to {} metres. ", i % 7).repeat(1 + (i * 7) % 13)).collect();
        let (together, tokens) = embedder.embed(&texts).expect("embedded");
        assert_eq!(together.len(), texts.len());
        let mut alone_tokens = 0;
        for (text, vector) in texts.iter().zip(&together) {
            let (alone, read) = embedder.embed(std::slice::from_ref(text)).expect("embedded");
            alone_tokens += read;
            assert!(cosine(&alone[0], vector) > 1.0 - 1e-5, "{text}");
        }
        assert_eq!(tokens, alone_tokens, "every text's tokens counted once");
    }
}

/// The int8 graph embeds into the fp32 model's space: a collection embedded by one is
/// searched by the other. (The benchmark measures this over the whole Cranfield corpus.)
#[test]
fn int8_embeddings_are_the_fp32_embeddings_to_within_a_hundredth() {
    let [int8, fp32] = embedders();
    let texts: Vec<String> = [
        "The invoice must be paid within thirty days.",
        "Boundary-layer transition on a swept wing at supersonic speeds was measured in the wind tunnel.",
        "Ein Satz auf Deutsch, damit nicht nur Englisch geprüft wird.",
        "Quarterly revenue: 4,210,000 EUR (+12% YoY); margin 31.4%.",
        "fn main() { println!(\"hello\"); }",
        "",
    ]
    .map(str::to_owned)
    .into_iter()
    .chain(std::iter::once("The harbour's berths are dredged every spring to eleven metres. ".repeat(20)))
    .collect();
    let (quantized, quantized_tokens) = int8.embed(&texts).expect("embedded");
    let (reference, reference_tokens) = fp32.embed(&texts).expect("embedded");
    assert_eq!(quantized_tokens, reference_tokens);
    for ((text, a), b) in texts.iter().zip(&quantized).zip(&reference) {
        let similarity = cosine(a, b);
        assert!(similarity >= 0.99, "cosine {similarity} for {text:?}");
    }
}
