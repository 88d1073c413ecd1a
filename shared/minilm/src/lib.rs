//! all-MiniLM-L6-v2 as sentence-transformers runs it: WordPiece tokens (truncated at 256,
//! padded to the batch's longest), BERT with zero token types and the attention mask,
//! mean pooling over the mask, L2 normalisation.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use std::path::Path;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The model's own limit, as sentence-transformers configures it (`max_seq_length`).
pub const MAX_TOKENS: usize = 256;
/// The model's width.
pub const DIMENSIONS: usize = 384;
/// The model id the service answers to.
pub const MODEL_ID: &str = "all-minilm-l6-v2";
/// The most texts embedded in one padded batch.
pub const MAX_BATCH_ROWS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model files cannot be read: {0}")]
    Files(String),
    #[error("the tokenizer failed: {0}")]
    Tokenizer(String),
    #[error("inference failed: {0}")]
    Inference(#[from] candle_core::Error),
}

/// The model's tokenizer alone, untruncated: how many tokens a text is, to tell whether the
/// model reads it whole.
pub struct TokenCounter {
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter").field("model", &MODEL_ID).finish_non_exhaustive()
    }
}

impl TokenCounter {
    /// Loads `tokenizer.json` from `dir`, with its own padding and truncation turned off.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok(Self { tokenizer })
    }

    /// The tokens `text` is, with the two special tokens the model adds.
    pub fn count(&self, text: &str) -> Result<usize, ModelError> {
        let encoding = self.tokenizer.encode(text, true).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().len())
    }
}

/// The loaded model and tokenizer.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("model", &MODEL_ID).finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let device = Device::Cpu;
        let config = std::fs::read_to_string(dir.join("config.json")).map_err(|e| ModelError::Files(e.to_string()))?;
        let config: Config = serde_json::from_str(&config).map_err(|e| ModelError::Files(e.to_string()))?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        // The file pads and truncates at 128 for another runtime; sentence-transformers pads
        // to the longest in the batch and truncates at 256.
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let weights = dir.join("model.safetensors");
        // The weights are read, not mapped: mapping needs `unsafe`, which this workspace forbids.
        let bytes = std::fs::read(&weights).map_err(|e| ModelError::Files(e.to_string()))?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)?;
        let model = BertModel::load(vb, &config)?;
        Ok(Self { model, tokenizer, device })
    }

    /// One unit vector per text, in order, and the tokens read. The texts are embedded in
    /// batches of similar length — sorted by length, a batch closed when its longest text
    /// would be more than a quarter longer than its shortest, or at [`MAX_BATCH_ROWS`] — so
    /// little padding is computed (a batch is padded to its longest text).
    pub fn embed(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, usize), ModelError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let mut tokens = 0;
        let mut start = 0;
        while start < order.len() {
            let shortest = texts[order[start]].len().max(1);
            let mut end = start + 1;
            while end < order.len() && end - start < MAX_BATCH_ROWS && texts[order[end]].len() * 4 <= shortest * 5 {
                end += 1;
            }
            let batch: Vec<String> = order[start..end].iter().map(|&i| texts[i].clone()).collect();
            let (embedded, read) = self.embed_batch(&batch)?;
            tokens += read;
            for (&index, vector) in order[start..end].iter().zip(embedded) {
                vectors[index] = vector;
            }
            start = end;
        }
        Ok((vectors, tokens))
    }

    /// One batch, padded to its longest text.
    fn embed_batch(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, usize), ModelError> {
        if texts.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let encodings =
            self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let tokens: usize = encodings.iter().map(|e| e.get_attention_mask().iter().filter(|m| **m == 1).count()).sum();
        let rows = encodings.len();
        let width = encodings[0].get_ids().len();
        let ids: Vec<u32> = encodings.iter().flat_map(|e| e.get_ids().to_vec()).collect();
        let mask: Vec<u32> = encodings.iter().flat_map(|e| e.get_attention_mask().to_vec()).collect();
        let ids = Tensor::from_vec(ids, (rows, width), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, width), &self.device)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens only.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        let pooled = summed.broadcast_div(&counts)?;
        let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let normalised = pooled.broadcast_div(&norms)?;
        Ok((normalised.to_vec2::<f32>()?, tokens))
    }
}
