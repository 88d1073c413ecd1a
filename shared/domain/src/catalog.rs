//! The embedding catalog: which providers serve which models at which width. It is a data
//! file in the repository (`catalog/embedding-models.json`), compiled in, so every function
//! and the API answer from the same list.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Provider {
    pub id: String,
    pub name: String,
    /// A keyless provider is a service on the deployment's own network: a base names a
    /// local service for it, never a credential.
    pub keyless: bool,
    pub base_url: Option<String>,
    pub models: Vec<Model>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Model {
    pub model: String,
    pub dim: u32,
    /// The embedding space: one model served by several providers (OpenAI's own and
    /// through OpenRouter) writes vectors in one space, so a base may move between them.
    pub space: String,
    /// The most tokens of one input the model reads (special tokens included); the rest
    /// of a longer input is cut off before embedding.
    pub max_input_tokens: u32,
}

/// Characters a token is counted as when sizing chunks: English prose runs at four or
/// more, so a chunk this many characters a token fits the model with room to spare.
pub const CHARS_PER_TOKEN: u32 = 4;

impl Model {
    /// The longest chunk, in characters, the model is taken to read whole.
    pub fn max_chunk_chars(&self) -> u32 {
        self.max_input_tokens.saturating_sub(2).saturating_mul(CHARS_PER_TOKEN)
    }
}

/// A provider's model, from the catalog.
pub fn model(provider_id: &str, model_id: &str) -> Option<&'static Model> {
    provider(provider_id)?.model(model_id)
}

#[derive(Debug, Deserialize)]
struct CatalogFile {
    providers: Vec<Provider>,
}

/// The catalog compiled into this build.
pub fn providers() -> &'static [Provider] {
    static CATALOG: OnceLock<Vec<Provider>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let file: CatalogFile = serde_json::from_str(include_str!("../catalog/embedding-models.json"))
            .unwrap_or_else(|e| panic!("catalog/embedding-models.json is not a valid catalog: {e}"));
        file.providers
    })
}

pub fn provider(id: &str) -> Option<&'static Provider> {
    providers().iter().find(|p| p.id == id)
}

impl Provider {
    pub fn model(&self, id: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.model == id)
    }

    /// This provider's name for a model of `space` at `dim`, if it serves one.
    pub fn model_in_space(&self, space: &str, dim: u32) -> Option<&Model> {
        self.models.iter().find(|m| m.space == space && m.dim == dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_file_is_whole() {
        assert!(providers().len() >= 3);
        for p in providers() {
            assert!(!p.models.is_empty(), "{}", p.id);
            assert!(p.models.iter().all(|m| m.dim > 0 && m.dim <= 4_000), "{}: pgvector's HNSW limit (halfvec)", p.id);
            assert_eq!(p.keyless, p.base_url.is_none(), "{}: a keyed provider has its endpoint", p.id);
        }
        let local = provider("local").expect("the keyless local service");
        assert!(local.keyless);
        assert_eq!(local.models.len(), 1);
        assert_eq!((local.models[0].model.as_str(), local.models[0].dim), ("all-minilm-l6-v2", 384));
        let openrouter = provider("openrouter").expect("openrouter");
        let small = provider("openai").and_then(|p| p.model("text-embedding-3-small")).expect("small");
        assert_eq!(
            openrouter.model_in_space(&small.space, small.dim).map(|m| m.model.as_str()),
            Some("openai/text-embedding-3-small")
        );
        assert_eq!(crate::ingestion::catalog_entries(Some("nope")), None);
        assert_eq!(crate::ingestion::catalog_entries(Some("local")).expect("local").len(), 1);
        // The reference product's keyless provider, with the models its users pull.
        let ollama = provider("ollama").expect("ollama");
        assert!(ollama.keyless);
        let nomic = ollama.model("nomic-embed-text").expect("nomic-embed-text");
        assert_eq!((nomic.dim, nomic.max_input_tokens), (768, 2048));
        let minilm = ollama.model("all-minilm").expect("all-minilm");
        assert_eq!(minilm.space, local.models[0].space, "one model's vectors, wherever it is served");
    }
}
