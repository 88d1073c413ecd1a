//! The HTTP front door: what API Gateway's HTTP API does in AWS, on loopback.

use crate::event::{HttpParts, api_gateway_v2};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;

/// The functions behind the door and what it needs to check callers.
#[derive(Debug)]
pub struct Door {
    pub upload: sluice_upload::AppState,
    pub knowledge: sluice_knowledge::State,
    /// The search function's state (in AWS its own function, with the model).
    pub search: sluice_search::State,
    /// The local identity provider, whose discovery document and keys the door serves, and
    /// whose tokens its authorizer accepts.
    pub issuer: crate::jwt::LocalIssuer,
    pub authorizer: crate::jwt::Authorizer,
    /// API Gateway's own payload ceiling is replaced by Sluice's request body cap.
    pub body_cap_bytes: u64,
    /// The HTTP API's CORS configuration, as the template gives it.
    pub cors: crate::cors::ApiCors,
}

/// Which function a path belongs to (API Gateway's route table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Function {
    Upload,
    Knowledge,
    Search,
}

fn function_for(method: &str, path: &str) -> Option<Function> {
    if sluice_web::route_template(sluice_search::ROUTES, method, path).is_some() {
        return Some(Function::Search);
    }
    let rest = path.strip_prefix("/api/v1/")?;
    let segments: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        // Documents taken in or changed: the upload function's, as template.yaml routes them.
        ("POST", ["kb", _, "documents"] | ["kb", _, "documents", "uploads"])
        | (_, ["rag", "collections", _, "ingest"] | ["rag", "supported-formats"] | ["rag", "documents", ..]) => {
            return Some(Function::Upload);
        }
        _ => {}
    }
    match segments[0] {
        "files" | "messages" => Some(Function::Upload),
        "kb" | "rag" | "secrets" | "embedding-endpoints" => Some(Function::Knowledge),
        _ => None,
    }
}

/// The address the door may listen on: loopback only. Its identity provider signs a token for
/// anyone who can run `sluice token` on this machine, and the emulator's credentials are
/// well known; on any other interface they would be everyone's.
pub fn loopback_only(addr: &str) -> Result<SocketAddr, String> {
    let parsed: SocketAddr =
        addr.parse().map_err(|_| format!("SLUICE_API_ADDR={addr:?} is not an address and port (127.0.0.1:3000)"))?;
    if !parsed.ip().is_loopback() {
        return Err(format!(
            "SLUICE_API_ADDR={addr} is not a loopback address: sluice-local serves a development identity \
             provider and emulator credentials, so it listens on 127.0.0.1 or ::1 only"
        ));
    }
    Ok(parsed)
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, door: Arc<Door>) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        let door = door.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let door = door.clone();
                async move { Ok::<_, Infallible>(door.answer(request, peer).await) }
            });
            if let Err(error) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(%error, "connection ended");
            }
        });
    }
}

/// API Gateway's own answers (not the functions'), in its own shape.
fn gateway_answer(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(json!({"message": message}).to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

impl Door {
    async fn answer(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let method = request.method().to_string();
        let path = request.uri().path().to_owned();
        let origin = request.headers().get("origin").and_then(|v| v.to_str().ok()).map(str::to_owned);
        // API Gateway answers a preflight itself, before any route or authorizer.
        let preflight =
            (request.method() == hyper::Method::OPTIONS).then(|| self.cors.preflight(request.headers())).flatten();
        let response = match preflight {
            Some(headers) => {
                let mut response = Response::new(Full::new(Bytes::new()));
                *response.status_mut() = StatusCode::NO_CONTENT;
                append(&mut response, headers);
                response
            }
            None => {
                let mut response = self.dispatch(request, peer).await;
                append(&mut response, self.cors.answer_headers(origin.as_deref()));
                response
            }
        };
        tracing::info!(
            method,
            path,
            status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request"
        );
        response
    }

    async fn dispatch(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        // The issuer's own documents (an OIDC issuer serves them; API Gateway reads them).
        if request.method() == hyper::Method::GET {
            match request.uri().path() {
                "/.well-known/openid-configuration" => return json_document(&self.issuer.discovery()),
                "/.well-known/jwks.json" => return json_document(&json!(self.issuer.jwks())),
                _ => {}
            }
        }
        let Some(function) = function_for(request.method().as_str(), request.uri().path()) else {
            return gateway_answer(StatusCode::NOT_FOUND, "Not Found");
        };
        let token = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim);
        let claims = match token.map(|t| self.authorizer.verify(t)) {
            Some(Ok(claims)) => claims,
            _ => return gateway_answer(StatusCode::UNAUTHORIZED, "Unauthorized"),
        };
        let (parts, body) = request.into_parts();
        let body = match read_body(body, self.body_cap_bytes).await {
            Ok(Some(body)) => body,
            Ok(None) => return too_large(self.body_cap_bytes),
            Err(()) => return gateway_answer(StatusCode::BAD_REQUEST, "Bad Request"),
        };
        let headers = parts
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        let http = HttpParts {
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query(),
            headers,
            body: &body,
            source_ip: peer.ip().to_string(),
        };
        let event = api_gateway_v2(&http, Some(&claims)).to_string();
        let lambda_request = match lambda_http::request::from_str(&event) {
            Ok(request) => request,
            Err(error) => {
                tracing::error!(%error, "could not build an API Gateway event");
                return gateway_answer(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error");
            }
        };
        let response = match function {
            Function::Upload => sluice_upload::handle(&self.upload, lambda_request).await,
            Function::Knowledge => sluice_knowledge::handle(&self.knowledge, lambda_request).await,
            Function::Search => sluice_search::handle(&self.search, lambda_request).await,
        };
        into_hyper(response)
    }
}

/// How much of an oversize body is read and thrown away before answering 413, so the
/// client, still sending, gets the answer instead of a reset connection.
const DRAIN_LIMIT_BYTES: u64 = 128 * 1024 * 1024;

/// Reads the body up to `cap` bytes; past that, drains (bounded) and returns `None`.
async fn read_body(mut body: Incoming, cap: u64) -> Result<Option<Bytes>, ()> {
    let mut collected = bytes::BytesMut::new();
    let mut seen: u64 = 0;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        // A body that stalls past the deadline is answered 400, never half-read.
        let Some(frame) = tokio::time::timeout_at(deadline, body.frame()).await.map_err(|_| ())? else {
            break;
        };
        let frame = frame.map_err(|_| ())?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len() as u64;
        if seen > cap {
            if seen > cap + DRAIN_LIMIT_BYTES {
                return Ok(None);
            }
            collected.clear();
            continue;
        }
        collected.extend_from_slice(&data);
    }
    Ok(if seen > cap { None } else { Some(collected.freeze()) })
}

/// Adds headers to an answer (a value that is no header value is left out).
fn append(response: &mut Response<Full<Bytes>>, headers: Vec<(&'static str, String)>) {
    for (name, value) in headers {
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
}

fn json_document(value: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

fn too_large(cap: u64) -> Response<Full<Bytes>> {
    let body = json!({"error": {"code": "payload_too_large", "message": format!("the request body is larger than {cap} bytes"),
        "details": {"fields": {"file": "the request body is too large"}}}});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

fn into_hyper(response: lambda_http::Response<lambda_http::Body>) -> Response<Full<Bytes>> {
    let (parts, body) = response.into_parts();
    let bytes = match body {
        lambda_http::Body::Text(text) => Bytes::from(text),
        lambda_http::Body::Binary(bytes) => Bytes::from(bytes),
        _ => Bytes::new(),
    };
    Response::from_parts(parts, Full::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_door_listens_on_loopback_only() {
        for ok in ["127.0.0.1:3000", "127.0.0.2:0", "[::1]:3000"] {
            assert!(loopback_only(ok).is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0:3000", "[::]:3000", "192.168.1.5:3000", "10.0.0.1:80", "localhost:3000", "3000"] {
            assert!(loopback_only(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn paths_map_to_their_function() {
        assert_eq!(function_for("GET", "/api/v1/files/upload"), Some(Function::Upload));
        assert_eq!(function_for("GET", "/api/v1/messages/x/attachments"), Some(Function::Upload));
        assert_eq!(function_for("GET", "/api/v1/kb"), Some(Function::Knowledge));
        assert_eq!(function_for("GET", "/api/v1/rag/embedding-models"), Some(Function::Knowledge));
        assert_eq!(function_for("POST", "/api/v1/kb/x/documents/uploads"), Some(Function::Upload));
        assert_eq!(function_for("POST", "/api/v1/kb/x/documents"), Some(Function::Upload));
        assert_eq!(function_for("GET", "/api/v1/kb/x/documents"), Some(Function::Knowledge));
        assert_eq!(function_for("GET", "/api/v1/kb/x/ingestion"), Some(Function::Knowledge));
        assert_eq!(function_for("POST", "/api/v1/rag/collections/c/ingest"), Some(Function::Upload));
        assert_eq!(function_for("GET", "/api/v1/rag/collections/c/info"), Some(Function::Knowledge));
        assert_eq!(function_for("GET", "/api/v1/rag/supported-formats"), Some(Function::Upload));
        assert_eq!(function_for("POST", "/api/v1/rag/search"), Some(Function::Search));
        assert_eq!(function_for("GET", "/api/v1/rag/search"), Some(Function::Knowledge));
        assert_eq!(function_for("GET", "/api/v1/rag/collections/c/filter-values"), Some(Function::Search));
        assert_eq!(function_for("GET", "/api/v1/elsewhere"), None);
        assert_eq!(function_for("GET", "/files"), None);
    }
}
