//! A **stand-in** for a vision provider (OpenAI's chat completions API), started by the
//! tests on loopback: it proves what Sluice sends and what it does with each answer, never
//! the quality of a description. Every request is validated against the documented shape —
//! `POST …/chat/completions`, JSON with `model`, `messages` whose user content holds text
//! parts and exactly one `image_url` part with a `data:image/png|jpeg;base64,` URL that
//! decodes to an image of that type, and `max_tokens` or `max_completion_tokens` — and
//! recorded; a request off the shape is answered `400` and recorded as a violation.
//!
//! Answers follow a script, then the default: a description naming the image's size and the
//! first eight hex digits of its bytes' SHA-256, after the stand-in's `prefix`.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use sha2::Digest;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `200` with this description.
    Describe(String),
    /// `200` with a refusal (`message.refusal`, no content).
    Refuse,
    /// `429` with this `Retry-After` value (seconds, or an HTTP date).
    RateLimited(String),
    /// Any other status, with an OpenAI-style error body.
    Status(u16),
}

/// What one valid request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub model: String,
    pub authorization: Option<String>,
    pub media_type: String,
    pub image_sha256: String,
    pub width: u32,
    pub height: u32,
    /// `max_tokens` or `max_completion_tokens`, whichever was sent.
    pub token_limit_field: String,
}

#[derive(Debug, Default)]
struct Log {
    script: VecDeque<Answer>,
    seen: Vec<Seen>,
    violations: Vec<String>,
}

/// The stand-in's handle.
#[derive(Debug, Clone)]
pub struct VisionStandIn {
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
    prefix: String,
    log: Arc<Mutex<Log>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatRequest {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatMessage {
    role: String,
    content: Content,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Part {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageUrl {
    url: String,
    #[serde(default)]
    detail: Option<String>,
}

impl VisionStandIn {
    /// Starts a stand-in whose default descriptions begin with `prefix`.
    pub async fn start(prefix: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let stand_in =
            Self { base_url: format!("http://127.0.0.1:{port}/v1"), prefix: prefix.to_owned(), log: Arc::default() };
        let serving = stand_in.clone();
        serve(listener, move |request| {
            let serving = serving.clone();
            async move { serving.answer(request).await }
        });
        stand_in
    }

    /// Answers the next requests with `answers`, in order, before the default.
    pub fn script(&self, answers: Vec<Answer>) {
        self.log.lock().expect("lock").script.extend(answers);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().expect("lock").seen.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.log.lock().expect("lock").violations.clone()
    }

    /// The default description of an image whose bytes hash to `sha256`.
    pub fn description_of(&self, seen: &Seen) -> String {
        format!("{} ({}x{}, image {})", self.prefix, seen.width, seen.height, &seen.image_sha256[..8])
    }

    async fn answer(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let seen = match validate(&parts, &body) {
            Ok(seen) => seen,
            Err(violation) => {
                self.log.lock().expect("lock").violations.push(violation.clone());
                return respond(StatusCode::BAD_REQUEST, &[], error_body(&violation));
            }
        };
        let scripted = {
            let mut log = self.log.lock().expect("lock");
            log.seen.push(seen.clone());
            log.script.pop_front()
        };
        match scripted.unwrap_or_else(|| Answer::Describe(self.description_of(&seen))) {
            Answer::Describe(text) => respond(StatusCode::OK, &[], completion(&seen.model, Some(&text), None)),
            Answer::Refuse => {
                respond(StatusCode::OK, &[], completion(&seen.model, None, Some("I can't help with that.")))
            }
            Answer::RateLimited(after) => {
                respond(StatusCode::TOO_MANY_REQUESTS, &[("retry-after", after)], error_body("Rate limit reached"))
            }
            Answer::Status(code) => {
                respond(StatusCode::from_u16(code).expect("status"), &[], error_body("scripted failure"))
            }
        }
    }
}

/// Serves HTTP/1 on `listener` until the test ends, each request answered by `answer`.
pub fn serve<F, Fut>(listener: tokio::net::TcpListener, answer: F)
where
    F: Fn(Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let answer = answer.clone();
                    async move { Ok::<_, Infallible>(answer(request).await) }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
}

/// Checks a request against the chat completions shape; what it carried, or why not.
fn validate(parts: &hyper::http::request::Parts, body: &[u8]) -> Result<Seen, String> {
    if parts.method != hyper::Method::POST || !parts.uri.path().ends_with("/chat/completions") {
        return Err(format!("{} {} is not POST …/chat/completions", parts.method, parts.uri.path()));
    }
    let json = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !json.starts_with("application/json") {
        return Err(format!("content-type {json:?} is not application/json"));
    }
    let request: ChatRequest = serde_json::from_slice(body).map_err(|e| format!("not a chat request: {e}"))?;
    if request.model.trim().is_empty() {
        return Err("model is empty".to_owned());
    }
    let token_limit_field = match (request.max_tokens, request.max_completion_tokens) {
        (Some(_), None) => "max_tokens",
        (None, Some(_)) => "max_completion_tokens",
        _ => return Err("send exactly one of max_tokens and max_completion_tokens".to_owned()),
    };
    let _ = request.temperature;
    let mut images = Vec::new();
    for message in &request.messages {
        if !matches!(message.role.as_str(), "system" | "user" | "assistant") {
            return Err(format!("role {:?} is not a chat role", message.role));
        }
        if let Content::Text(text) = &message.content
            && text.trim().is_empty()
        {
            return Err("an empty message".to_owned());
        }
        if let Content::Parts(parts) = &message.content {
            for part in parts {
                match part {
                    Part::Text { text } if text.trim().is_empty() => return Err("an empty text part".to_owned()),
                    Part::Text { .. } => {}
                    Part::ImageUrl { image_url } => {
                        if image_url.detail.as_deref().is_some_and(|d| !matches!(d, "auto" | "low" | "high")) {
                            return Err(format!("detail {:?} is not auto, low or high", image_url.detail));
                        }
                        images.push(image_url.url.clone());
                    }
                }
            }
        }
    }
    let [url] = images.as_slice() else { return Err(format!("{} images where one was expected", images.len())) };
    let (media_type, data) = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
        .ok_or_else(|| "the image is not a base64 data URL".to_owned())?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| format!("bad base64: {e}"))?;
    let format = match media_type {
        "image/png" => image::ImageFormat::Png,
        "image/jpeg" => image::ImageFormat::Jpeg,
        other => return Err(format!("media type {other:?} is not image/png or image/jpeg")),
    };
    let decoded = image::load_from_memory_with_format(&bytes, format)
        .map_err(|e| format!("the data URL is not the {media_type} it says: {e}"))?;
    Ok(Seen {
        model: request.model,
        authorization: parts.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned),
        media_type: media_type.to_owned(),
        image_sha256: sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect(),
        width: decoded.width(),
        height: decoded.height(),
        token_limit_field: token_limit_field.to_owned(),
    })
}

fn completion(model: &str, content: Option<&str>, refusal: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-stand-in",
        "object": "chat.completion",
        "created": 1_764_633_600,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": refusal},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    })
}

fn error_body(message: &str) -> serde_json::Value {
    serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": null}})
}

pub fn respond(
    status: StatusCode,
    headers: &[(&'static str, String)],
    body: serde_json::Value,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().expect("value"));
    for (name, value) in headers {
        response.headers_mut().insert(*name, value.parse().expect("value"));
    }
    response
}
