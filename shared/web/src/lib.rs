//! What the HTTP functions share: the caller from the JWT authorizer's claims, the one
//! error shape of docs/openapi.yaml, JSON responses and the JSON log format.

mod body;
pub use body::{BodyRefusal, FieldRefusal, NonBlank, typed_body};

use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::Serialize;
use serde_json::{Value, json};
use sluice_domain::Caller;
use std::collections::BTreeMap;

/// A refusal in the contract's shape (docs/openapi.yaml): `{"error": {"code", "message", "details": {"fields"}}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub fields: BTreeMap<String, String>,
    pub extra: BTreeMap<String, Value>,
    /// Seconds for a `Retry-After` header (a `503` that knows when to come back).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            fields: BTreeMap::new(),
            extra: BTreeMap::new(),
            retry_after: None,
        }
    }

    /// Names the input at fault.
    pub fn field(mut self, field: &str, why: impl Into<String>) -> Self {
        self.fields.insert(field.to_owned(), why.into());
        self
    }

    /// Adds a machine-readable detail beside `fields` (a reason code, a list of ids).
    pub fn detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "unauthorized", "a valid bearer token is required")
    }

    /// The one answer for an absent resource and for another tenant's.
    pub fn not_found(what: &str) -> Self {
        Self::new(404, "not_found", format!("{what} not found"))
    }

    pub fn internal() -> Self {
        Self::new(500, "internal", "the request could not be completed; it is safe to retry")
    }

    pub fn unavailable() -> Self {
        Self::new(503, "unavailable", "a storage service did not answer; retry shortly")
    }

    /// A `400` naming the field at fault.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(400, "invalid_request", message.clone()).field(field, message)
    }

    /// A `422` naming the field: well formed, but not what the service can honour as asked.
    pub fn unprocessable(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(422, "unprocessable", message.clone()).field(field, message)
    }

    /// The `503` for a collection's provider that cannot answer now, after its own wait.
    pub fn provider_unavailable(message: impl Into<String>, retry_after_secs: u64) -> Self {
        let message = message.into();
        Self::new(503, "provider_unavailable", message.clone())
            .field("collections", message)
            .retry_after(retry_after_secs)
    }

    /// The `503` for a database that did not answer: the failure logged in full, answered
    /// without its text.
    pub fn database_failure(error: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %error, "database failure");
        Self::unavailable()
    }

    /// The `503` for the key service (KMS) that did not answer, logged in full.
    pub fn key_service_failure(error: &dyn std::fmt::Debug) -> Self {
        tracing::error!(error = ?error, "key service failure");
        Self::new(503, "unavailable", "the key service did not answer; retry shortly")
    }

    pub fn to_json(&self) -> Value {
        let mut details = serde_json::Map::new();
        if !self.fields.is_empty() {
            details.insert("fields".to_owned(), json!(self.fields));
        }
        for (k, v) in &self.extra {
            details.insert(k.clone(), v.clone());
        }
        json!({"error": {"code": self.code, "message": self.message, "details": details}})
    }

    /// Answers with `Retry-After: seconds`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn into_response(self) -> Response<Body> {
        let mut response = json_response(self.status, &self.to_json());
        if let Some(seconds) = self.retry_after
            && let Ok(value) = lambda_http::http::HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(lambda_http::http::header::RETRY_AFTER, value);
        }
        response
    }
}

/// `302` to a short-lived presigned download, never cached.
pub fn presigned_redirect(url: String) -> Response<Body> {
    Response::builder()
        .status(302)
        .header("location", url)
        .header("cache-control", "no-store")
        .body(Body::Empty)
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

/// Example requests for a route table: each entry's method and its path with every
/// `{param}` filled (`{name}` a collection name, `{n}` a page number, any other a fresh
/// UUID), for the routers' tests that every entry is served.
pub fn route_examples(routes: &[&str]) -> Vec<(String, String)> {
    routes
        .iter()
        .filter_map(|entry| entry.split_once(' '))
        .map(|(method, template)| {
            let path = template
                .split('/')
                .map(|segment| match segment {
                    "{name}" => "docs".to_owned(),
                    "{n}" => "1".to_owned(),
                    s if s.starts_with('{') => uuid::Uuid::new_v4().to_string(),
                    s => s.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("/");
            (method.to_owned(), path)
        })
        .collect()
}

/// The route table entry (`"METHOD /api/v1/path/{param}"`) a request matches: the same
/// method, and the same segments where a `{param}` matches any one segment (a trailing `/`
/// is ignored). A function's router answers only what its table lists, and the table is
/// what `docs/openapi.yaml` and the deployment template are held against.
pub fn route_template<'a>(routes: &[&'a str], method: &str, path: &str) -> Option<&'a str> {
    let path = path.trim_end_matches('/');
    routes.iter().copied().find(|route| {
        let Some((route_method, template)) = route.split_once(' ') else { return false };
        let (mut wanted, mut given) = (template.split('/'), path.split('/'));
        route_method == method
            && loop {
                match (wanted.next(), given.next()) {
                    (None, None) => break true,
                    (Some(w), Some(g)) if w == g || (w.starts_with('{') && w.ends_with('}') && !g.is_empty()) => {}
                    _ => break false,
                }
            }
    })
}

/// A JSON response with `status`.
pub fn json_response(status: u16, value: &impl Serialize) -> Response<Body> {
    let body = serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned());
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::Text(body))
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

/// An empty `204 No Content`.
pub fn no_content() -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = lambda_http::http::StatusCode::NO_CONTENT;
    response
}

/// The caller, from the claims API Gateway's JWT authorizer put in the request context.
/// The function never sees a request the authorizer refused; a request without claims
/// (a misconfigured route) is still refused here.
pub fn caller(request: &Request) -> Result<Caller, ApiError> {
    let claims = match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => {
            context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|jwt| &jwt.claims)
        }
        _ => None,
    };
    let claims: std::collections::HashMap<String, String> =
        claims.map(|c| c.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    Caller::from_claims(&claims).ok_or_else(ApiError::unauthorized)
}

/// The request body's bytes, whether API Gateway sent it as text or base64.
pub fn body_bytes(request: &Request) -> &[u8] {
    match request.body() {
        Body::Empty => &[],
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        _ => &[],
    }
}

/// JSON logs for CloudWatch (and the local runner), filtered by `RUST_LOG`. A span logs one
/// line as it closes (`"message": "close"`, its `time.busy` and `time.idle`, its fields under
/// `span`), and an event inside a span carries that span's fields.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .try_init();
}

/// The span of one stage (of `function`) of a document's way to its chunks — `download`, `extract`,
/// `describe` and `store` in parse; `download`, `chunk`, `embed` and `write` in ingest. Its
/// closing line is what the ingestion benchmark adds up per stage; `extract` records the
/// pages read, those OCR read and the milliseconds it spent (`pages`, `ocr_pages`, `ocr_ms`)
/// once they are known.
pub fn stage_span(function: &'static str, stage: &'static str, document: &dyn std::fmt::Display) -> tracing::Span {
    tracing::info_span!(
        "stage",
        function,
        stage,
        document = %document,
        pages = tracing::field::Empty,
        ocr_pages = tracing::field::Empty,
        ocr_ms = tracing::field::Empty
    )
}

/// Logs why a function cannot start, as one JSON line, before its init error ends the
/// process: Lambda itself reports only that the runtime exited.
pub fn log_init_error<E: std::fmt::Display + ?Sized>(error: &E) {
    tracing::error!(error = %error, "the function cannot start");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_matches_its_template_segment_by_segment() {
        let routes = ["GET /api/v1/kb/{kb_id}", "POST /api/v1/kb/{kb_id}/reindex", "GET /api/v1/kb"];
        assert_eq!(route_template(&routes, "GET", "/api/v1/kb/abc/"), Some("GET /api/v1/kb/{kb_id}"));
        assert_eq!(route_template(&routes, "POST", "/api/v1/kb/abc/reindex"), Some("POST /api/v1/kb/{kb_id}/reindex"));
        assert_eq!(route_template(&routes, "GET", "/api/v1/kb"), Some("GET /api/v1/kb"));
        assert_eq!(route_template(&routes, "DELETE", "/api/v1/kb/abc"), None);
        assert_eq!(route_template(&routes, "GET", "/api/v1/kb/abc/reindex"), None);
        assert_eq!(route_template(&routes, "POST", "/api/v1/kb//reindex"), None);
    }

    #[test]
    fn errors_have_the_contract_shape() {
        let error = ApiError::new(415, "unsupported_media_type", "nope").field("file", "bad").detail("reason", "x");
        assert_eq!(
            error.to_json(),
            json!({"error": {"code": "unsupported_media_type", "message": "nope",
                   "details": {"fields": {"file": "bad"}, "reason": "x"}}})
        );
    }
}
