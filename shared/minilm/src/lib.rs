//! all-MiniLM-L6-v2 as sentence-transformers runs it: WordPiece tokens (truncated at 256,
//! padded to the batch's longest), BERT with zero token types and the attention mask,
//! mean pooling over the mask, L2 normalisation.
//!
//! Two ways to run it, one embedding space ([`Precision`]): **int8** (the default), an ONNX
//! graph written at build time from the same weights with its matrix products quantized,
//! run by ONNX Runtime; and **fp32**, the weights as they are in candle — the fallback, and
//! the reference the int8 path is measured against.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sluice_onnx::ort;
use std::path::Path;
use std::sync::Mutex;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The model's own limit, as sentence-transformers configures it (`max_seq_length`).
pub const MAX_TOKENS: usize = 256;
/// The model's width.
pub const DIMENSIONS: usize = 384;
/// The model id the service answers to.
pub const MODEL_ID: &str = "all-minilm-l6-v2";
/// The most texts embedded in one padded batch.
pub const MAX_BATCH_ROWS: usize = 32;

/// The int8 graph's file, beside the weights it was written from.
pub const INT8_FILE: &str = "model-int8.onnx";

/// The arithmetic the model runs in. Both embed into the same space (cosine ≥ 0.99 between
/// them on every text measured), so a collection embedded by one is searched by the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Matrix products in int8 through ONNX Runtime (the feed-forward down-projections, whose
    /// inputs have outliers one scale cannot hold, stay fp32).
    Int8,
    /// Every product in fp32 through candle.
    Fp32,
}

impl Precision {
    /// The setting's variable: `int8` (default) or `fp32`.
    pub const VARIABLE: &str = "SLUICE_EMBED_PRECISION";

    /// The precision `SLUICE_EMBED_PRECISION` names, int8 when it is unset.
    pub fn from_env() -> Result<Self, ModelError> {
        match std::env::var(Self::VARIABLE) {
            Err(_) => Ok(Self::Int8),
            Ok(value) => Self::parse(&value)
                .ok_or_else(|| ModelError::Files(format!("{} is {value:?}; it must be int8 or fp32", Self::VARIABLE))),
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "int8" => Some(Self::Int8),
            "fp32" => Some(Self::Fp32),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Int8 => "int8",
            Self::Fp32 => "fp32",
        }
    }

    /// The files this precision reads from the model's folder.
    pub fn files(self) -> &'static [&'static str] {
        match self {
            Self::Int8 => &["tokenizer.json", INT8_FILE],
            Self::Fp32 => &["config.json", "tokenizer.json", "model.safetensors"],
        }
    }

    /// Which of [`Self::files`] `dir` lacks.
    pub fn missing_files(self, dir: &Path) -> Vec<&'static str> {
        self.files().iter().copied().filter(|file| !dir.join(file).is_file()).collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model files cannot be read: {0}")]
    Files(String),
    #[error("the tokenizer failed: {0}")]
    Tokenizer(String),
    #[error("inference failed: {0}")]
    Inference(#[from] candle_core::Error),
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
}

impl From<ort::Error> for ModelError {
    fn from(error: ort::Error) -> Self {
        Self::Runtime(error.to_string())
    }
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

/// The network, in the precision it was loaded in.
enum Network {
    /// The int8 graph answers unit vectors itself (pooling and normalisation are in it).
    Int8(Mutex<ort::session::Session>),
    Fp32(Box<BertModel>, Device),
}

/// The loaded model and tokenizer.
pub struct Embedder {
    network: Network,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("model", &MODEL_ID)
            .field("precision", &self.precision().as_str())
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the model from `dir` in `precision`: int8 runs its operators on `threads`
    /// threads; fp32 on candle's pool (`RAYON_NUM_THREADS`, else every CPU).
    pub fn load(dir: &Path, precision: Precision, threads: usize) -> Result<Self, ModelError> {
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        // The file pads and truncates at 128 for another runtime; sentence-transformers pads
        // to the longest in the batch and truncates at 256.
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let network = match precision {
            Precision::Int8 => {
                let graph =
                    std::fs::read(dir.join(INT8_FILE)).map_err(|e| ModelError::Files(format!("{INT8_FILE}: {e}")))?;
                Network::Int8(Mutex::new(sluice_onnx::session(&graph, threads).map_err(ModelError::Runtime)?))
            }
            Precision::Fp32 => {
                let device = Device::Cpu;
                let config =
                    std::fs::read_to_string(dir.join("config.json")).map_err(|e| ModelError::Files(e.to_string()))?;
                let config: Config = serde_json::from_str(&config).map_err(|e| ModelError::Files(e.to_string()))?;
                // The weights are read, not mapped: mapping needs `unsafe`, which this workspace forbids.
                let bytes =
                    std::fs::read(dir.join("model.safetensors")).map_err(|e| ModelError::Files(e.to_string()))?;
                let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)?;
                Network::Fp32(Box::new(BertModel::load(vb, &config)?), device)
            }
        };
        Ok(Self { network, tokenizer })
    }

    /// Loads the model from `dir` as the deployment configures it: the precision
    /// `SLUICE_EMBED_PRECISION` names, on the CPUs the process has.
    pub fn load_configured(dir: &Path) -> Result<Self, ModelError> {
        Self::load(dir, Precision::from_env()?, sluice_onnx::threads())
    }

    pub fn precision(&self) -> Precision {
        match self.network {
            Network::Int8(_) => Precision::Int8,
            Network::Fp32(..) => Precision::Fp32,
        }
    }

    /// One unit vector per text, in order, and the tokens read. The same text gets the same
    /// vector whatever it is embedded with. fp32 embeds in batches of similar length —
    /// sorted by length, a batch closed when its longest text would be more than a quarter
    /// longer than its shortest, or at [`MAX_BATCH_ROWS`] — so little padding is computed (a
    /// batch is padded to its longest text). int8 embeds each text alone: its activations'
    /// scale is computed over the whole input, so a batch mate would move a text's vector
    /// (cosine 0.994 seen), and alone it is faster too (no padding; measured 49 against 36
    /// texts/s in batches of 32, one thread).
    pub fn embed(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, usize), ModelError> {
        let rows_per_batch = match self.network {
            Network::Int8(_) => 1,
            Network::Fp32(..) => MAX_BATCH_ROWS,
        };
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let mut tokens = 0;
        let mut start = 0;
        while start < order.len() {
            let shortest = texts[order[start]].len().max(1);
            let mut end = start + 1;
            while end < order.len() && end - start < rows_per_batch && texts[order[end]].len() * 4 <= shortest * 5 {
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
        let vectors = match &self.network {
            Network::Int8(session) => {
                let ids: Vec<i32> = encodings.iter().flat_map(|e| e.get_ids().iter().map(|&id| id as i32)).collect();
                let mask: Vec<i32> =
                    encodings.iter().flat_map(|e| e.get_attention_mask().iter().map(|&m| m as i32)).collect();
                let ids = ort::value::Tensor::from_array(([rows, width], ids))?;
                let mask = ort::value::Tensor::from_array(([rows, width], mask))?;
                let mut session = session.lock().map_err(|_| ModelError::Runtime("a run panicked".to_owned()))?;
                let outputs = session.run(ort::inputs!["input_ids" => ids, "attention_mask" => mask])?;
                let (shape, values) = outputs["embeddings"].try_extract_tensor::<f32>()?;
                if shape[..] != [rows as i64, DIMENSIONS as i64] {
                    return Err(ModelError::Runtime(format!("the graph answered shape {shape:?}")));
                }
                values.chunks(DIMENSIONS).map(<[f32]>::to_vec).collect()
            }
            Network::Fp32(model, device) => {
                let ids: Vec<u32> = encodings.iter().flat_map(|e| e.get_ids().to_vec()).collect();
                let mask: Vec<u32> = encodings.iter().flat_map(|e| e.get_attention_mask().to_vec()).collect();
                fp32_forward(model, device, ids, mask, rows, width)?
            }
        };
        Ok((vectors, tokens))
    }
}

/// BERT in candle, then mean pooling over the real tokens and L2 normalisation.
fn fp32_forward(
    model: &BertModel,
    device: &Device,
    ids: Vec<u32>,
    mask: Vec<u32>,
    rows: usize,
    width: usize,
) -> Result<Vec<Vec<f32>>, ModelError> {
    let ids = Tensor::from_vec(ids, (rows, width), device)?;
    let mask = Tensor::from_vec(mask, (rows, width), device)?;
    let types = ids.zeros_like()?;
    let hidden = model.forward(&ids, &types, Some(&mask))?;
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
    let pooled = summed.broadcast_div(&counts)?;
    let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    Ok(pooled.broadcast_div(&norms)?.to_vec2::<f32>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_names_a_precision_or_is_refused() {
        assert_eq!(Precision::parse("int8"), Some(Precision::Int8));
        assert_eq!(Precision::parse(" FP32 "), Some(Precision::Fp32));
        assert_eq!(Precision::parse("fp16"), None);
        for precision in [Precision::Int8, Precision::Fp32] {
            assert_eq!(Precision::parse(precision.as_str()), Some(precision));
        }
    }

    #[test]
    fn each_precision_needs_its_own_files_and_says_which_are_missing() {
        let dir = std::env::temp_dir().join(format!("sluice-minilm-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("tokenizer.json"), "{}").expect("file");
        std::fs::write(dir.join("model.safetensors"), "").expect("file");
        assert_eq!(Precision::Int8.missing_files(&dir), vec![INT8_FILE]);
        assert_eq!(Precision::Fp32.missing_files(&dir), vec!["config.json"]);
        std::fs::write(dir.join(INT8_FILE), "").expect("file");
        assert!(Precision::Int8.missing_files(&dir).is_empty());
        std::fs::remove_dir_all(&dir).expect("cleaned");
    }
}
