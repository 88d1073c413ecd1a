//! The keyless model's two paths measured in one run: int8 (ONNX Runtime) against fp32
//! (candle), on the texts of a BEIR-layout test collection.
//!
//! - `bench-embed faithfulness --collection DIR`: every corpus text embedded by both; the
//!   cosine between each text's two vectors (min and mean), and nDCG@10 of exact cosine
//!   retrieval on the dev queries for each (the retrieval benchmark's scoring: gain 2^g − 1).
//! - `bench-embed speed --collection DIR --precision P --threads N`: chunks a second for
//!   700- and 1,000-character chunks cut from the corpus, a one-line query's p50, the same
//!   query's p50 through the search function's query cache once warm, and the process's
//!   peak resident memory. Run one process per precision and thread count: candle's pool
//!   is sized once per process (`RAYON_NUM_THREADS`).
//!
//! - `bench-embed candle-q8 --collection DIR --threads N`: the other int8 candidate, candle's
//!   quantized products, where the time goes: each of the model's 36 linear layers on a
//!   700-character chunk's tokens as fp32 products (the baseline: what candle's BERT runs)
//!   and as candle's `Q8_0` `QMatMul` (weights and activations in 8-bit blocks), their outputs'
//!   cosine, and the whole fp32 embedding of the same chunk and the int8 (ONNX Runtime) one:
//!   the end-to-end gain candle's products could give at most is bounded by the linear layers'
//!   share of the fp32 time.
//!
//! Reads the model from `SLUICE_MODEL_DIR`; prints Markdown rows.

use sluice_minilm::{Embedder, Precision};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

type Error = Box<dyn std::error::Error>;

const QUERY: &str = "what is the effect of sweep on the lift of a wing at supersonic speed";
const SPEED_CHUNKS: usize = 120;
const QUERY_RUNS: usize = 60;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let collection = PathBuf::from(value("--collection").ok_or("--collection DIR is required")?);
    let dir = PathBuf::from(std::env::var("SLUICE_MODEL_DIR").map_err(|_| "SLUICE_MODEL_DIR is not set")?);
    match args.get(1).map(String::as_str) {
        Some("faithfulness") => faithfulness(&dir, &collection),
        Some("speed") => {
            let precision = value("--precision").and_then(|p| Precision::parse(&p)).ok_or("--precision int8|fp32")?;
            let threads: usize = value("--threads").ok_or("--threads N")?.parse()?;
            speed(&dir, &collection, precision, threads)
        }
        Some("candle-q8") => {
            let threads: usize = value("--threads").ok_or("--threads N")?.parse()?;
            candle_q8(&dir, &collection, threads)
        }
        _ => {
            Err("usage: bench-embed faithfulness|speed|candle-q8 --collection DIR [--precision P] [--threads N]".into())
        }
    }
}

fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>, Error> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect::<Result<_, _>>()?)
}

fn field(value: &serde_json::Value, name: &str) -> String {
    match &value[name] {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn corpus(collection: &Path) -> Result<Vec<(String, String)>, Error> {
    Ok(read_jsonl(&collection.join("corpus.jsonl"))?.iter().map(|d| (field(d, "_id"), field(d, "text"))).collect())
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn faithfulness(dir: &Path, collection: &Path) -> Result<(), Error> {
    let threads = sluice_onnx::threads();
    let documents = corpus(collection)?;
    let queries: Vec<(String, String)> = read_jsonl(&collection.join("queries-dev.jsonl"))?
        .iter()
        .map(|q| (field(q, "_id"), field(q, "text")))
        .collect();
    let mut judged: HashMap<String, HashMap<String, u32>> = HashMap::new();
    for line in std::fs::read_to_string(collection.join("qrels/dev.tsv"))?.lines().skip(1) {
        let parts: Vec<&str> = line.split('\t').collect();
        if let [query, document, grade] = parts[..] {
            judged.entry(query.to_owned()).or_default().insert(document.to_owned(), grade.trim().parse()?);
        }
    }
    let texts: Vec<String> = documents.iter().map(|(_, t)| t.clone()).collect();
    let asked: Vec<String> = queries.iter().map(|(_, t)| t.clone()).collect();
    let mut embedded = Vec::new();
    for precision in [Precision::Fp32, Precision::Int8] {
        let embedder = Embedder::load(dir, precision, threads)?;
        let started = Instant::now();
        let (vectors, _) = embedder.embed(&texts)?;
        let seconds = started.elapsed().as_secs_f64();
        let (questions, _) = embedder.embed(&asked)?;
        let mut ndcg = 0.0;
        let mut scored = 0;
        for ((id, _), question) in queries.iter().zip(&questions) {
            let Some(grades) = judged.get(id) else { continue };
            let mut ranked: Vec<(f32, &str)> =
                vectors.iter().zip(&documents).map(|(v, (doc, _))| (dot(question, v), doc.as_str())).collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            ndcg += ndcg_at_10(ranked.iter().map(|(_, doc)| *doc), grades);
            scored += 1;
        }
        let ndcg = ndcg / f64::from(scored);
        println!(
            "| {} | {} texts in {seconds:.1} s ({:.1}/s, {threads} threads) | nDCG@10 {ndcg:.4} over {scored} queries |",
            precision.as_str(),
            texts.len(),
            texts.len() as f64 / seconds
        );
        embedded.push((vectors, ndcg));
    }
    let (fp32, int8) = (&embedded[0], &embedded[1]);
    let cosines: Vec<f32> = fp32.0.iter().zip(&int8.0).map(|(a, b)| dot(a, b)).collect();
    let min = cosines.iter().copied().fold(f32::INFINITY, f32::min);
    let mean = cosines.iter().map(|&c| f64::from(c)).sum::<f64>() / cosines.len() as f64;
    let worst = cosines.iter().position(|&c| c == min).map(|i| documents[i].0.clone()).unwrap_or_default();
    println!();
    println!(
        "int8 against fp32 over {} texts: cosine min {min:.4} (document {worst}), mean {mean:.4}; texts below 0.99: {}; nDCG@10 difference {:+.4}",
        cosines.len(),
        cosines.iter().filter(|&&c| c < 0.99).count(),
        int8.1 - fp32.1
    );
    Ok(())
}

fn ndcg_at_10<'a>(ranked: impl Iterator<Item = &'a str>, grades: &HashMap<String, u32>) -> f64 {
    let gain = |g: u32| 2f64.powi(g as i32) - 1.0;
    let dcg: f64 = ranked
        .take(10)
        .enumerate()
        .map(|(i, doc)| gain(grades.get(doc).copied().unwrap_or(0)) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<u32> = grades.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal.iter().take(10).enumerate().map(|(i, &g)| gain(g) / ((i + 2) as f64).log2()).sum();
    if idcg > 0.0 { dcg / idcg } else { 0.0 }
}

/// Chunks of about `size` characters, cut at word boundaries from the corpus run together.
fn chunks_of(documents: &[(String, String)], size: usize, count: usize) -> Vec<String> {
    let mut chunks = Vec::with_capacity(count);
    let mut current = String::new();
    for word in documents.iter().flat_map(|(_, text)| text.split_whitespace()) {
        if current.len() + word.len() + 1 > size {
            chunks.push(std::mem::take(&mut current));
            if chunks.len() == count {
                break;
            }
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
    }
    chunks
}

fn speed(dir: &Path, collection: &Path, precision: Precision, threads: usize) -> Result<(), Error> {
    let documents = corpus(collection)?;
    let started = Instant::now();
    let embedder = Embedder::load(dir, precision, threads)?;
    let load_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut row = vec![precision.as_str().to_owned(), threads.to_string(), format!("{load_ms:.0}")];
    for size in [700, 1000] {
        let chunks = chunks_of(&documents, size, SPEED_CHUNKS);
        embedder.embed(&chunks[..4])?;
        let started = Instant::now();
        embedder.embed(&chunks)?;
        row.push(format!("{:.1}", chunks.len() as f64 / started.elapsed().as_secs_f64()));
    }
    let query = vec![QUERY.to_owned()];
    embedder.embed(&query)?;
    let mut times: Vec<f64> = (0..QUERY_RUNS)
        .map(|_| {
            let started = Instant::now();
            embedder.embed(&query).map(|_| started.elapsed().as_secs_f64() * 1000.0)
        })
        .collect::<Result<_, _>>()?;
    times.sort_by(f64::total_cmp);
    row.push(format!("{:.2}", times[times.len() / 2]));
    // A warm cache: the search function's own cache, holding this query.
    let cache = sluice_search::query_cache::QueryCache::new(1024);
    let key = (uuid::Uuid::nil(), "model://all-minilm-l6-v2".to_owned(), QUERY.to_owned());
    let (vectors, _) = embedder.embed(&query)?;
    cache.put(key.clone(), vectors[0].clone());
    let mut warm: Vec<f64> = (0..QUERY_RUNS)
        .map(|_| {
            let started = Instant::now();
            let found = cache.get(&key).is_some();
            (started.elapsed().as_secs_f64() * 1000.0, found)
        })
        .map(|(ms, found)| if found { ms } else { f64::NAN })
        .collect();
    warm.sort_by(f64::total_cmp);
    row.push(format!("{:.4}", warm[warm.len() / 2]));
    row.push(format!("{}", peak_resident_mib()?));
    println!("| {} |", row.join(" | "));
    Ok(())
}

/// The process's peak resident memory so far, in whole MiB (`VmHWM`).
fn peak_resident_mib() -> Result<u64, Error> {
    let mib = sluice_e2e::process_memory_mib("self", "VmHWM").ok_or("no VmHWM in /proc/self/status")?;
    Ok(mib as u64)
}

/// The linear layers' time under candle fp32 and candle `Q8_0`, against whole embeddings.
fn candle_q8(dir: &Path, collection: &Path, threads: usize) -> Result<(), Error> {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};
    const RUNS: usize = 20;
    let documents = corpus(collection)?;
    let chunk = chunks_of(&documents, 700, 1).remove(0);
    let fp32 = Embedder::load(dir, Precision::Fp32, threads)?;
    let int8 = Embedder::load(dir, Precision::Int8, threads)?;
    let tokens = sluice_minilm::TokenCounter::load(dir)?.count(&chunk)?.min(256);
    let time = |f: &dyn Fn() -> Result<(), Error>| -> Result<f64, Error> {
        f()?;
        let started = Instant::now();
        for _ in 0..RUNS {
            f()?;
        }
        Ok(started.elapsed().as_secs_f64() * 1000.0 / RUNS as f64)
    };
    let whole_fp32 = time(&|| fp32.embed(std::slice::from_ref(&chunk)).map(|_| ()).map_err(Into::into))?;
    let whole_int8 = time(&|| int8.embed(std::slice::from_ref(&chunk)).map(|_| ()).map_err(Into::into))?;
    let weights = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu)?;
    let mut linear: Vec<(&String, &Tensor)> =
        weights.iter().filter(|(name, w)| name.contains("encoder.layer.") && w.rank() == 2).collect();
    linear.sort_by_key(|(name, _)| name.as_str());
    let (mut fp32_ms, mut q8_ms, mut cosines) = (0.0, 0.0, Vec::new());
    for (_, weight) in &linear {
        let (_, inputs) = weight.dims2()?;
        let x = Tensor::randn(0f32, 1f32, (1, tokens, inputs), &Device::Cpu)?;
        let plain = QMatMul::Tensor((*weight).clone());
        let quantized = QMatMul::from_qtensor(QTensor::quantize(weight, GgmlDType::Q8_0)?)?;
        fp32_ms += time(&|| plain.forward(&x).map(|_| ()).map_err(Into::into))?;
        q8_ms += time(&|| quantized.forward(&x).map(|_| ()).map_err(Into::into))?;
        let (a, b) = (plain.forward(&x)?.flatten_all()?, quantized.forward(&x)?.flatten_all()?);
        let dot = (&a * &b)?.sum_all()?.to_scalar::<f32>()?;
        let norms = a.sqr()?.sum_all()?.to_scalar::<f32>()?.sqrt() * b.sqr()?.sum_all()?.to_scalar::<f32>()?.sqrt();
        cosines.push(dot / norms);
    }
    let share = fp32_ms / whole_fp32;
    let bound = whole_fp32 / (whole_fp32 - fp32_ms + q8_ms);
    let min_cosine = cosines.iter().copied().fold(f32::MAX, f32::min);
    println!(
        "| {threads} | {tokens} | {} | {fp32_ms:.2} | {q8_ms:.2} ({:.2}×) | {min_cosine:.4} | {whole_fp32:.2} ({:.0}%) | {bound:.2}× | {whole_int8:.2} ({:.2}×) |",
        linear.len(),
        fp32_ms / q8_ms,
        share * 100.0,
        whole_fp32 / whole_int8
    );
    Ok(())
}
