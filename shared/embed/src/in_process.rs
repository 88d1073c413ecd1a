//! The keyless `local` provider inside the function itself: in AWS the functions have no
//! route to a separate embedding service (private subnets, no NAT by default), so ingest and
//! knowledge run all-MiniLM-L6-v2 in-process from the model layer. A deployment-wide endpoint
//! whose base URL is `model://all-minilm-l6-v2` (the migrate step registers it) is served
//! here; the model is read from `SLUICE_MODEL_DIR` once per process, on first use, so a
//! cold start that embeds nothing does not pay for it.

use crate::target::{EmbedError, Target};
use sluice_minilm::{DIMENSIONS, Embedder, MODEL_ID};
use std::sync::{Arc, OnceLock};

/// The base-URL scheme of an in-process model.
pub const SCHEME: &str = "model://";

/// The base URL of the in-process all-MiniLM-L6-v2.
pub fn base_url() -> String {
    format!("{SCHEME}{MODEL_ID}")
}

/// The model's files, checked at a function's start where this deployment carries the model
/// (`SLUICE_MODEL_DIR` set), for the precision it runs in (int8 also needs ONNX Runtime): a
/// missing layer stops the function at init, loudly, rather than
/// failing documents one by one. Loading waits for the first embedding.
pub fn ensure_available() -> Result<(), String> {
    let Ok(dir) = std::env::var("SLUICE_MODEL_DIR") else {
        return Ok(());
    };
    let precision = sluice_minilm::Precision::from_env().map_err(|e| e.to_string())?;
    let missing = precision.missing_files(std::path::Path::new(&dir));
    if !missing.is_empty() {
        return Err(format!(
            "the embedding model is missing from {dir} ({}): this deployment cannot embed for the keyless local provider (check its model layer or SLUICE_MODEL_DIR)",
            missing.join(", ")
        ));
    }
    if precision == sluice_minilm::Precision::Int8 {
        sluice_onnx::runtime().map_err(|reason| {
            format!("the int8 embedding model needs ONNX Runtime: {reason} (check the runtime layer and ORT_DYLIB_PATH, or set SLUICE_EMBED_PRECISION=fp32)")
        })?;
    }
    Ok(())
}

static MODEL: OnceLock<Result<Arc<Embedder>, String>> = OnceLock::new();

/// The process's model, loaded on first use from `SLUICE_MODEL_DIR`.
fn model() -> Result<Arc<Embedder>, EmbedError> {
    let loaded = MODEL.get_or_init(|| {
        let dir = std::env::var("SLUICE_MODEL_DIR").unwrap_or_else(|_| "/opt/minilm".to_owned());
        let started = std::time::Instant::now();
        let loaded = Embedder::load_configured(std::path::Path::new(&dir)).map(Arc::new).map_err(|e| e.to_string());
        match &loaded {
            Ok(model) => tracing::info!(
                dir,
                precision = model.precision().as_str(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "embedding model loaded"
            ),
            Err(error) => tracing::error!(dir, error, "the embedding model cannot be loaded"),
        }
        loaded
    });
    loaded.clone().map_err(|_| EmbedError::ModelMissing)
}

/// Embeds `texts` with the in-process model named `model`, off the async threads.
pub async fn embed(model_name: &str, target: &Target, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
    // Only the one model this build carries, at its own width.
    if model_name != MODEL_ID || !target.model.eq_ignore_ascii_case(MODEL_ID) {
        return Err(EmbedError::ModelNotServed);
    }
    if target.dimensions != DIMENSIONS {
        return Err(EmbedError::Malformed);
    }
    let texts = texts.to_vec();
    let vectors = tokio::task::spawn_blocking(move || -> Result<Vec<Vec<f32>>, EmbedError> {
        let embedder = model()?;
        embedder.embed(&texts).map(|(vectors, _)| vectors).map_err(|error| {
            tracing::error!(%error, "in-process embedding failed");
            EmbedError::RequestRefused(500)
        })
    })
    .await
    .map_err(|_| EmbedError::RequestRefused(500))??;
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_is_retried_never_held_against_the_document() {
        assert!(EmbedError::ModelMissing.is_transient());
        assert_eq!(base_url(), "model://all-minilm-l6-v2");
    }
}
