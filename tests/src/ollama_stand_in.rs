//! A **stand-in** for an Ollama server, started by a test on a free loopback port: it proves
//! what Sluice sends to an `ollama` collection's service and what it does with the answer,
//! never the quality of a vector. It serves Ollama's two documented embedding APIs and
//! validates every request against its own shape:
//!
//! - `POST /api/embed`, Ollama's own: JSON `{model, input}` (`input` a string or a list of
//!   strings; `truncate`, `options`, `keep_alive` and `dimensions` allowed), answered
//!   `{model, embeddings, total_duration, load_duration, prompt_eval_count}`; an input past
//!   the model's context with `truncate: false` is `400`, as Ollama answers it;
//! - `POST /v1/embeddings`, its OpenAI-compatible one: JSON `{model, input}`
//!   (`encoding_format`, `dimensions`, `user` allowed), answered `{object: list, data:
//!   [{object: embedding, index, embedding}], model, usage}`.
//!
//! A model it does not serve is `404`. Its vectors are a hashed bag of each text's words,
//! normalised, so a text is nearest to those sharing its words. A request off its shape is
//! answered `400` and recorded as a violation.

use crate::vision_stand_in::{respond, serve};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// The models the stand-in serves: name, width, context in tokens (a word is a token here).
const MODELS: &[(&str, usize, usize)] = &[("nomic-embed-text", 768, 2048), ("all-minilm", 384, 256)];

/// Which of Ollama's APIs a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OllamaApi {
    Own,
    OpenAiCompatible,
}

/// What one valid request carried.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub api: OllamaApi,
    pub authorization: Option<String>,
    pub model: String,
    pub inputs: Vec<String>,
    /// `truncate` as sent (Ollama's own API only).
    pub truncate: Option<bool>,
}

#[derive(Debug, Default)]
struct Log {
    seen: Vec<Seen>,
    violations: Vec<String>,
}

/// The stand-in's handle; it serves until the test ends.
#[derive(Debug, Clone)]
pub struct OllamaStandIn {
    /// `http://127.0.0.1:<port>`: the address an Ollama is registered at.
    pub base_url: String,
    log: Arc<Mutex<Log>>,
}

impl OllamaStandIn {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the Ollama stand-in");
        let base_url = format!("http://{}", listener.local_addr().expect("address"));
        let log = Arc::new(Mutex::new(Log::default()));
        let shared = log.clone();
        serve(listener, move |request| answer(shared.clone(), request));
        Self { base_url, log }
    }

    /// The valid requests since the last call.
    pub fn take_seen(&self) -> Vec<Seen> {
        std::mem::take(&mut self.log.lock().expect("log").seen)
    }

    /// Every request that was off its API's shape.
    pub fn violations(&self) -> Vec<String> {
        self.log.lock().expect("log").violations.clone()
    }
}

async fn answer(log: Arc<Mutex<Log>>, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    match validate(&parts, &body) {
        Ok(seen) => {
            let Some(&(_, width, context)) = MODELS.iter().find(|(name, ..)| *name == seen.model) else {
                let error = format!("model \"{}\" not found, try pulling it first", seen.model);
                return respond(StatusCode::NOT_FOUND, &[], json!({ "error": error }));
            };
            if seen.truncate == Some(false) && seen.inputs.iter().any(|t| t.split_whitespace().count() > context) {
                return respond(
                    StatusCode::BAD_REQUEST,
                    &[],
                    json!({"error": "the input length exceeds the context length"}),
                );
            }
            let vectors: Vec<Vec<f32>> = seen.inputs.iter().map(|t| hashed_words(t, width)).collect();
            let words: usize = seen.inputs.iter().map(|t| t.split_whitespace().count()).sum();
            let answer = match seen.api {
                OllamaApi::Own => json!({"model": seen.model, "embeddings": vectors, "total_duration": 1_000_000,
                    "load_duration": 1_000, "prompt_eval_count": words}),
                OllamaApi::OpenAiCompatible => {
                    let data: Vec<Value> = vectors
                        .iter()
                        .enumerate()
                        .map(|(index, v)| json!({"object": "embedding", "index": index, "embedding": v}))
                        .collect();
                    json!({"object": "list", "data": data, "model": seen.model,
                        "usage": {"prompt_tokens": words, "total_tokens": words}})
                }
            };
            log.lock().expect("log").seen.push(seen);
            respond(StatusCode::OK, &[], answer)
        }
        Err(why) => {
            log.lock().expect("log").violations.push(why.clone());
            respond(StatusCode::BAD_REQUEST, &[], json!({ "error": why }))
        }
    }
}

/// Checks a request against the API its path names; what it carried, or why not.
fn validate(parts: &hyper::http::request::Parts, body: &[u8]) -> Result<Seen, String> {
    let api = match (parts.method.as_str(), parts.uri.path()) {
        ("POST", "/api/embed") => OllamaApi::Own,
        ("POST", "/v1/embeddings") => OllamaApi::OpenAiCompatible,
        (method, path) => return Err(format!("{method} {path} is neither POST /api/embed nor POST /v1/embeddings")),
    };
    let content_type = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !content_type.starts_with("application/json") {
        return Err(format!("content-type {content_type:?} is not JSON"));
    }
    let body: Value = serde_json::from_slice(body).map_err(|_| "the body is not JSON".to_owned())?;
    let fields = body.as_object().ok_or("the body is not a JSON object")?;
    let allowed: &[&str] = match api {
        OllamaApi::Own => &["model", "input", "truncate", "options", "keep_alive", "dimensions"],
        OllamaApi::OpenAiCompatible => &["model", "input", "encoding_format", "dimensions", "user"],
    };
    if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("{unknown:?} is not a field of this API"));
    }
    let model = fields.get("model").and_then(Value::as_str).ok_or("model must be a string")?.to_owned();
    let inputs = match fields.get("input") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) if !many.is_empty() => many
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("input must list strings")?,
        _ => return Err("input must be a string or a non-empty list of strings".to_owned()),
    };
    let truncate = match fields.get("truncate") {
        None => None,
        Some(Value::Bool(truncate)) => Some(*truncate),
        Some(_) => return Err("truncate must be true or false".to_owned()),
    };
    let authorization = parts.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    Ok(Seen { api, authorization, model, inputs, truncate })
}

/// A unit vector of `width` from the text's lower-cased words, each hashed to one place.
fn hashed_words(text: &str, width: usize) -> Vec<f32> {
    use std::hash::{Hash, Hasher};
    let mut vector = vec![0.0f32; width];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        word.to_lowercase().hash(&mut hasher);
        vector[(hasher.finish() % width as u64) as usize] += 1.0;
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm == 0.0 {
        vector[0] = 1.0;
        return vector;
    }
    vector.iter().map(|v| v / norm).collect()
}
