//! The local stack's keyless embedding service: all-MiniLM-L6-v2 on CPU behind the
//! OpenAI-compatible `POST /v1/embeddings` (and `GET /v1/models`), so a `local` base embeds
//! with a real sentence model through the same client a keyed provider uses. One batch runs
//! at a time: the model already uses every core for one.

pub use sluice_minilm as model;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use model::{DIMENSIONS, Embedder, MODEL_ID};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// The largest request body: 2,048 inputs of a few kilobytes each.
pub const MAX_BODY_BYTES: usize = 16 << 20;
/// The most inputs one request may carry, as OpenAI's API allows.
pub const MAX_INPUTS: usize = 2048;

#[derive(Debug, Deserialize)]
struct EmbeddingsRequest {
    input: Input,
    model: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Many(Vec<String>),
}

/// The service over a loaded model.
#[derive(Debug, Clone)]
pub struct Service {
    embedder: Arc<Mutex<Embedder>>,
}

fn answer(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

fn refuse(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    answer(status, &json!({"error": {"message": message, "type": "invalid_request_error"}}))
}

impl Service {
    pub fn new(embedder: Embedder) -> Self {
        Self { embedder: Arc::new(Mutex::new(embedder)) }
    }

    /// Embeds `texts` one sub-batch at a time, on a blocking thread.
    pub async fn embed(&self, texts: Vec<String>) -> Result<(Vec<Vec<f32>>, usize), String> {
        let embedder = self.embedder.clone();
        tokio::task::spawn_blocking(move || {
            let embedder = embedder.lock().map_err(|_| "the model is unavailable".to_owned())?;
            // The model cuts the request into batches of similar length itself.
            embedder.embed(&texts).map_err(|e| e.to_string())
        })
        .await
        .map_err(|_| "inference stopped".to_owned())?
    }

    pub async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = request.uri().path().trim_end_matches('/').to_owned();
        match (request.method().clone(), path.as_str()) {
            (Method::GET, "/v1/models") => {
                answer(StatusCode::OK, &json!({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}))
            }
            (Method::POST, "/v1/embeddings") => self.embeddings(request).await,
            _ => refuse(StatusCode::NOT_FOUND, "no such route"),
        }
    }

    async fn embeddings(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let body = match Limited::new(request.into_body(), MAX_BODY_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large"),
        };
        let Ok(parsed) = serde_json::from_slice::<EmbeddingsRequest>(&body) else {
            return refuse(StatusCode::BAD_REQUEST, "the body must be {\"input\": string or [string], \"model\"}");
        };
        if let Some(model) = parsed.model.as_deref()
            && !model.eq_ignore_ascii_case(MODEL_ID)
            && !model.eq_ignore_ascii_case("sentence-transformers/all-MiniLM-L6-v2")
        {
            return refuse(StatusCode::NOT_FOUND, &format!("this service serves {MODEL_ID} only"));
        }
        let texts = match parsed.input {
            Input::One(text) => vec![text],
            Input::Many(texts) => texts,
        };
        if texts.is_empty() || texts.len() > MAX_INPUTS {
            return refuse(StatusCode::BAD_REQUEST, &format!("input must hold 1 to {MAX_INPUTS} texts"));
        }
        match self.embed(texts).await {
            Ok((vectors, tokens)) => {
                let data: Vec<Value> = vectors
                    .into_iter()
                    .enumerate()
                    .map(|(index, embedding)| json!({"object": "embedding", "index": index, "embedding": embedding}))
                    .collect();
                answer(
                    StatusCode::OK,
                    &json!({"object": "list", "data": data, "model": MODEL_ID,
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
                )
            }
            Err(error) => {
                tracing::error!(error, "inference failed");
                refuse(StatusCode::INTERNAL_SERVER_ERROR, "inference failed")
            }
        }
    }
}

/// Serves `service` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, service: Service) -> std::io::Result<()> {
    tracing::info!(model = MODEL_ID, dimensions = DIMENSIONS, "embedding service ready");
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request| {
                let service = service.clone();
                async move { Ok::<_, std::convert::Infallible>(service.handle(request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(error) = hyper::server::conn::http1::Builder::new().serve_connection(io, handler).await {
                tracing::debug!(error = %error, "connection ended");
            }
        });
    }
}
