//! A **stand-in** for LlamaParse's parsing job API, started by the tests at the address the
//! test stack names (`SLUICE_LLAMAPARSE_STAND_IN_ADDR`, which the stack's
//! `SLUICE_LLAMAPARSE_URL` points at): it proves what Sluice sends and what it does with
//! each answer, never the quality of a parse. It validates every request against the
//! documented shapes — `POST /api/v1/parsing/upload` as multipart with one `file` part (a
//! file name and bytes) and an optional numeric `max_pages`; `GET /api/v1/parsing/job/{id}`;
//! `GET /api/v1/parsing/job/{id}/result/json`; a bearer key on each — and records them.
//!
//! A job is `PENDING` for `pending_for` after its upload, then `SUCCESS`; its result is the
//! stand-in's pages, at most `max_pages` of them. A key other than the accepted one is `401`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One upload as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub filename: String,
    pub bytes: usize,
    pub max_pages: Option<u32>,
}

#[derive(Debug, Default)]
struct Log {
    uploads: Vec<Upload>,
    polls: usize,
    results: usize,
    violations: Vec<String>,
    /// Each job: when it was uploaded and how many pages it may have.
    jobs: HashMap<String, (Instant, Option<u32>)>,
}

/// The stand-in's handle; it serves until the test ends.
#[derive(Debug, Clone)]
pub struct LlamaParseStandIn {
    key: String,
    pages: Vec<String>,
    pending_for: Duration,
    log: Arc<Mutex<Log>>,
}

impl LlamaParseStandIn {
    /// Starts the stand-in at the test stack's address, accepting `key` and answering
    /// `pages` once a job has been pending for `pending_for`.
    pub async fn start(key: &str, pages: &[&str], pending_for: Duration) -> Self {
        let address =
            std::env::var("SLUICE_LLAMAPARSE_STAND_IN_ADDR").expect("the test stack's env (stack.sh env test)");
        let listener = tokio::net::TcpListener::bind(&address).await.expect("the LlamaParse stand-in's address");
        let stand_in = Self {
            key: key.to_owned(),
            pages: pages.iter().map(|p| (*p).to_owned()).collect(),
            pending_for,
            log: Arc::default(),
        };
        let serving = stand_in.clone();
        crate::vision_stand_in::serve(listener, move |request| {
            let serving = serving.clone();
            async move { serving.answer(request).await }
        });
        stand_in
    }

    pub fn uploads(&self) -> Vec<Upload> {
        self.log.lock().expect("lock").uploads.clone()
    }

    pub fn polls(&self) -> usize {
        self.log.lock().expect("lock").polls
    }

    pub fn violations(&self) -> Vec<String> {
        self.log.lock().expect("lock").violations.clone()
    }

    fn violation(&self, why: String) -> Response<Full<Bytes>> {
        self.log.lock().expect("lock").violations.push(why.clone());
        respond(StatusCode::BAD_REQUEST, serde_json::json!({"detail": why}))
    }

    async fn answer(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let bearer = parts.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let Some(key) = bearer.strip_prefix("Bearer ") else {
            return self.violation(format!("{} {} without a bearer key", parts.method, parts.uri.path()));
        };
        if key != self.key {
            return respond(StatusCode::UNAUTHORIZED, serde_json::json!({"detail": "Invalid API Key"}));
        }
        let path = parts.uri.path().to_owned();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        match (parts.method.as_str(), path.strip_prefix("/api/v1/parsing/")) {
            ("POST", Some("upload")) => {
                let content_type =
                    parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                match read_upload(&content_type, body).await {
                    Ok(upload) => {
                        let id = uuid::Uuid::new_v4().to_string();
                        let mut log = self.log.lock().expect("lock");
                        log.jobs.insert(id.clone(), (Instant::now(), upload.max_pages));
                        log.uploads.push(upload);
                        respond(StatusCode::OK, serde_json::json!({"id": id, "status": "PENDING"}))
                    }
                    Err(why) => self.violation(why),
                }
            }
            ("GET", Some(rest)) if rest.starts_with("job/") => {
                let rest = &rest["job/".len()..];
                let (id, result) = match rest.split_once('/') {
                    Some((id, "result/json")) => (id, true),
                    Some((_, other)) => return self.violation(format!("no such job route: {other}")),
                    None => (rest, false),
                };
                let mut log = self.log.lock().expect("lock");
                let Some(&(uploaded, max_pages)) = log.jobs.get(id) else {
                    return respond(StatusCode::NOT_FOUND, serde_json::json!({"detail": "Job not found"}));
                };
                let done = uploaded.elapsed() >= self.pending_for;
                if !result {
                    log.polls += 1;
                    let status = if done { "SUCCESS" } else { "PENDING" };
                    return respond(StatusCode::OK, serde_json::json!({"id": id, "status": status}));
                }
                if !done {
                    drop(log);
                    return self.violation(format!("result of job {id} asked before it succeeded"));
                }
                log.results += 1;
                let count = max_pages.map_or(self.pages.len(), |m| self.pages.len().min(m as usize));
                let pages: Vec<serde_json::Value> = self.pages[..count]
                    .iter()
                    .enumerate()
                    .map(|(i, md)| serde_json::json!({"page": i + 1, "md": md, "text": md}))
                    .collect();
                respond(StatusCode::OK, serde_json::json!({"pages": pages, "job_metadata": {"job_pages": count}}))
            }
            (method, _) => self.violation(format!("{method} {path} is not a LlamaParse route")),
        }
    }
}

/// The upload's `file` part and `max_pages`, or why the form is not LlamaParse's.
async fn read_upload(content_type: &str, body: Bytes) -> Result<Upload, String> {
    let boundary = multer::parse_boundary(content_type).map_err(|_| format!("not multipart: {content_type:?}"))?;
    let stream = futures_util::stream::once(async move { Ok::<Bytes, Infallible>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut file = None;
    let mut max_pages = None;
    while let Some(field) = form.next_field().await.map_err(|e| format!("a bad form: {e}"))? {
        match field.name() {
            Some("file") => {
                let filename = field.file_name().map(str::to_owned).ok_or("the file part has no file name")?;
                let bytes = field.bytes().await.map_err(|e| e.to_string())?;
                if file.is_some() || bytes.is_empty() {
                    return Err("one non-empty file part is expected".to_owned());
                }
                file = Some((filename, bytes.len()));
            }
            Some("max_pages") => {
                let text = field.text().await.map_err(|e| e.to_string())?;
                max_pages = Some(text.parse::<u32>().map_err(|_| format!("max_pages {text:?} is not a number"))?);
            }
            other => return Err(format!("an unexpected form field {other:?}")),
        }
    }
    let (filename, bytes) = file.ok_or("no file part")?;
    Ok(Upload { filename, bytes, max_pages })
}

fn respond(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", "application/json".parse().expect("value"));
    response
}
