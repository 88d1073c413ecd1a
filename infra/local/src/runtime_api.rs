//! A Lambda Runtime API on loopback, for running a function's `bootstrap` as Lambda does:
//! the process asks `GET /2018-06-01/runtime/invocation/next` for an event (the request is
//! held until there is one), answers it with `POST …/invocation/{id}/response` or
//! `…/error`, and reports a failed start with `POST …/runtime/init/error`. Each invocation
//! carries the headers Lambda sends: the request id, the deadline, the function's ARN and
//! a trace id.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, watch};

const NEXT: &str = "/2018-06-01/runtime/invocation/next";
const INVOCATION: &str = "/2018-06-01/runtime/invocation/";
const INIT_ERROR: &str = "/2018-06-01/runtime/init/error";

/// How an invocation ended: the function's answer, or the error it reported.
pub type Outcome = Result<Value, String>;

type Pending = (Value, oneshot::Sender<Outcome>);

struct Shared {
    function_arn: String,
    timeout: Duration,
    events: tokio::sync::Mutex<mpsc::Receiver<Pending>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    /// Set at the first poll for an event, or to the error a failed start reported.
    started: watch::Sender<Option<Result<(), String>>>,
}

/// One function's Runtime API: its address for `AWS_LAMBDA_RUNTIME_API`, and the means to
/// hand the function events.
#[derive(Debug)]
pub struct RuntimeApi {
    pub address: String,
    events: mpsc::Sender<Pending>,
    started: watch::Receiver<Option<Result<(), String>>>,
}

impl RuntimeApi {
    /// Serves a Runtime API on a free loopback port for the function `function_arn`, whose
    /// invocations may take `timeout`.
    pub async fn start(function_arn: &str, timeout: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("address").to_string();
        let (events, receiver) = mpsc::channel(16);
        let (started_tx, started) = watch::channel(None);
        let shared = Arc::new(Shared {
            function_arn: function_arn.to_owned(),
            timeout,
            events: tokio::sync::Mutex::new(receiver),
            waiting: Mutex::new(HashMap::new()),
            started: started_tx,
        });
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(answer(&shared, request).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Self { address, events, started }
    }

    /// Waits until the function asks for its first event (its init is over), at most
    /// `limit`; the error its start reported, if it did.
    pub async fn started(&self, limit: Duration) -> Result<(), String> {
        let mut started = self.started.clone();
        match tokio::time::timeout(limit, started.wait_for(Option::is_some)).await {
            Ok(Ok(state)) => state.clone().unwrap_or(Ok(())),
            Ok(Err(_)) => Err("the Runtime API stopped".to_owned()),
            Err(_) => Err(format!("it did not ask for an event within {limit:?}")),
        }
    }

    /// Hands the function `event` and waits at most `limit` for how it ends.
    pub async fn invoke(&self, event: Value, limit: Duration) -> Outcome {
        let (done, outcome) = oneshot::channel();
        self.events.send((event, done)).await.map_err(|_| "the Runtime API stopped".to_owned())?;
        match tokio::time::timeout(limit, outcome).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err("the invocation was dropped".to_owned()),
            Err(_) => Err(format!("no answer within {limit:?}")),
        }
    }
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

async fn answer(shared: &Shared, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    if request.method() == hyper::Method::GET && path == NEXT {
        shared.started.send_if_modified(|state| state.is_none() && state.replace(Ok(())).is_none());
        return next_event(shared).await;
    }
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return reply(StatusCode::BAD_REQUEST, "unreadable body"),
    };
    let text = String::from_utf8_lossy(&body).into_owned();
    if path == INIT_ERROR {
        shared.started.send_replace(Some(Err(text)));
        return reply(StatusCode::ACCEPTED, "{}");
    }
    let Some((id, kind)) = path.strip_prefix(INVOCATION).and_then(|rest| rest.split_once('/')) else {
        return reply(StatusCode::NOT_FOUND, "no such path");
    };
    let Some(waiting) = shared.waiting.lock().expect("waiting").remove(id) else {
        return reply(StatusCode::BAD_REQUEST, "no such invocation");
    };
    let outcome = match kind {
        "response" => serde_json::from_str(&text).map_err(|e| format!("the answer is not JSON ({e}): {text}")),
        "error" => Err(text),
        _ => return reply(StatusCode::NOT_FOUND, "no such path"),
    };
    let _ = waiting.send(outcome);
    reply(StatusCode::ACCEPTED, "{}")
}

/// Holds the poll until an event is handed over, then sends it with Lambda's headers.
async fn next_event(shared: &Shared) -> Response<Full<Bytes>> {
    let Some((event, done)) = shared.events.lock().await.recv().await else {
        return reply(StatusCode::GONE, "no more events");
    };
    let id = uuid::Uuid::new_v4().to_string();
    shared.waiting.lock().expect("waiting").insert(id.clone(), done);
    let deadline = SystemTime::now() + shared.timeout;
    let deadline_ms = deadline.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
    let hex = id.replace('-', "");
    let trace = format!("Root=1-{:08x}-{};Parent={};Sampled=0", deadline_ms / 1000, &hex[..24], &hex[8..24]);
    let mut response = reply(StatusCode::OK, event.to_string());
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-type", "application/json".to_owned()),
        ("lambda-runtime-aws-request-id", id),
        ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
        ("lambda-runtime-invoked-function-arn", shared.function_arn.clone()),
        ("lambda-runtime-trace-id", trace),
    ] {
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}
