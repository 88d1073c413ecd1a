//! A **stand-in** for the rerankers Sluice reaches, started by the tests at the address the
//! test stack names (`SLUICE_RERANK_STAND_IN_ADDR`; the stack points `SLUICE_COHERE_URL` and
//! Bedrock Agent Runtime's endpoint there): it proves what Sluice sends and what it does with
//! each answer, never the quality of an order. It serves three documented shapes and
//! validates every request against its own:
//!
//! - `POST /v2/rerank`, Cohere's: a bearer key, JSON `{model, query, documents, top_n}`
//!   (`max_tokens_per_doc` allowed), answered `{id, results: [{index, relevance_score}], meta}`;
//! - `POST /v1/rerank`, the self-hosted servers' common shape (text-embeddings-inference,
//!   Infinity, vLLM): the same body, answered `{results: [{index, relevance_score}]}`;
//! - `POST /rerank`, Amazon Bedrock Agent Runtime's `Rerank`: SigV4-signed for the `bedrock`
//!   service, JSON `{queries: [{type: TEXT, textQuery}], sources: [{type: INLINE,
//!   inlineDocumentSource: {type: TEXT, textDocument}}], rerankingConfiguration: {type:
//!   BEDROCK_RERANKING_MODEL, bedrockRerankingConfiguration: {numberOfResults,
//!   modelConfiguration: {modelArn}}}}`, answered `{results: [{index, relevanceScore}]}`.
//!
//! Its order (`stand_in_order`): documents by how many of the query's words they hold, a
//! tie going to the later document — so it differs from the order it was sent. A request
//! off its shape is answered `400` and recorded as a violation; a scripted fault answers the
//! next request instead.

use crate::vision_stand_in::{respond, serve};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which shape a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Cohere,
    Common,
    Bedrock,
}

/// A scripted answer to the next request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// This status, with an error body.
    Status(u16),
    /// The stand-in's order, after this long.
    Delay(Duration),
}

/// What one valid request carried.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub shape: Shape,
    /// The `Authorization` header as sent.
    pub authorization: Option<String>,
    /// The model, or Bedrock's model ARN.
    pub model: String,
    pub query: String,
    pub documents: Vec<String>,
    /// `top_n`, or Bedrock's `numberOfResults`.
    pub top_n: usize,
}

#[derive(Debug, Default)]
struct Log {
    script: VecDeque<Fault>,
    seen: Vec<Seen>,
    violations: Vec<String>,
}

/// The stand-in's handle; it serves until the test ends.
#[derive(Debug, Clone)]
pub struct RerankStandIn {
    /// The key Cohere's shape accepts; any other is `401`.
    pub cohere_key: String,
    log: Arc<Mutex<Log>>,
}

impl RerankStandIn {
    /// Starts the stand-in at the test stack's `SLUICE_RERANK_STAND_IN_ADDR`.
    pub async fn start(cohere_key: &str) -> Self {
        let addr = std::env::var("SLUICE_RERANK_STAND_IN_ADDR").expect("the test stack names the stand-in's address");
        let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind the rerank stand-in's address");
        let stand_in = Self { cohere_key: cohere_key.to_owned(), log: Arc::default() };
        let serving = stand_in.clone();
        serve(listener, move |request| {
            let serving = serving.clone();
            async move { serving.answer(request).await }
        });
        stand_in
    }

    /// The base URL an endpoint serving the common shape is registered with.
    pub fn common_base_url() -> String {
        let addr = std::env::var("SLUICE_RERANK_STAND_IN_ADDR").expect("the test stack names the stand-in's address");
        format!("http://{addr}/v1")
    }

    pub fn script(&self, faults: Vec<Fault>) {
        self.log.lock().expect("lock").script.extend(faults);
    }

    /// Takes what was seen so far.
    pub fn take_seen(&self) -> Vec<Seen> {
        std::mem::take(&mut self.log.lock().expect("lock").seen)
    }

    pub fn violations(&self) -> Vec<String> {
        self.log.lock().expect("lock").violations.clone()
    }

    async fn answer(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let seen = match validate(&parts, &body) {
            Ok(seen) => seen,
            Err(violation) => {
                self.log.lock().expect("lock").violations.push(violation.clone());
                return respond(StatusCode::BAD_REQUEST, &[], json!({"message": violation}));
            }
        };
        let fault = {
            let mut log = self.log.lock().expect("lock");
            log.seen.push(seen.clone());
            log.script.pop_front()
        };
        if seen.shape == Shape::Cohere && seen.authorization.as_deref() != Some(&format!("Bearer {}", self.cohere_key))
        {
            return respond(StatusCode::UNAUTHORIZED, &[], json!({"message": "invalid api token"}));
        }
        match fault {
            Some(Fault::Status(code)) => {
                return respond(
                    StatusCode::from_u16(code).expect("status"),
                    &[],
                    json!({"message": "scripted failure"}),
                );
            }
            Some(Fault::Delay(wait)) => tokio::time::sleep(wait).await,
            None => {}
        }
        let order = stand_in_order(&seen.query, &seen.documents);
        let scored = |index: usize, rank: usize| (index, 1.0 - rank as f64 / (order.len() as f64 + 1.0));
        let results: Vec<Value> = order
            .iter()
            .enumerate()
            .take(seen.top_n)
            .map(|(rank, &index)| {
                let (index, score) = scored(index, rank);
                match seen.shape {
                    Shape::Bedrock => json!({"index": index, "relevanceScore": score}),
                    Shape::Cohere | Shape::Common => json!({"index": index, "relevance_score": score}),
                }
            })
            .collect();
        let body = match seen.shape {
            Shape::Cohere => {
                json!({"id": "stand-in", "results": results, "meta": {"billed_units": {"search_units": 1}}})
            }
            Shape::Common | Shape::Bedrock => json!({"results": results}),
        };
        respond(StatusCode::OK, &[], body)
    }
}

/// The stand-in's order of `documents` for `query`: by how many of the query's words each
/// holds, a tie to the later document.
pub fn stand_in_order(query: &str, documents: &[String]) -> Vec<usize> {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let asked = words(query);
    let mut order: Vec<(usize, usize)> = documents
        .iter()
        .enumerate()
        .map(|(index, document)| (index, words(document).iter().filter(|w| asked.contains(w)).count()))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    order.into_iter().map(|(index, _)| index).collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommonRequest {
    model: String,
    query: String,
    documents: Vec<String>,
    top_n: usize,
    #[serde(default)]
    max_tokens_per_doc: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BedrockRequest {
    queries: Vec<Value>,
    sources: Vec<Value>,
    reranking_configuration: Value,
}

/// Checks a request against its shape; what it carried, or why not.
fn validate(parts: &hyper::http::request::Parts, body: &[u8]) -> Result<Seen, String> {
    let shape = match (parts.method.as_str(), parts.uri.path()) {
        ("POST", "/v2/rerank") => Shape::Cohere,
        ("POST", "/v1/rerank") => Shape::Common,
        ("POST", "/rerank") => Shape::Bedrock,
        (method, path) => return Err(format!("{method} {path} is no reranking route")),
    };
    let content_type = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !content_type.starts_with("application/json") {
        return Err(format!("content-type {content_type:?} is not application/json"));
    }
    let authorization = parts.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let nonblank = |what: &str, text: &str| {
        if text.trim().is_empty() { Err(format!("{what} is empty")) } else { Ok(()) }
    };
    match shape {
        Shape::Cohere | Shape::Common => {
            let request: CommonRequest =
                serde_json::from_slice(body).map_err(|e| format!("not a rerank request: {e}"))?;
            nonblank("model", &request.model)?;
            nonblank("query", &request.query)?;
            if request.documents.is_empty() || request.documents.len() > 1000 {
                return Err(format!("{} documents; send 1 to 1000", request.documents.len()));
            }
            for document in &request.documents {
                nonblank("a document", document)?;
            }
            if !(1..=request.documents.len()).contains(&request.top_n) {
                return Err(format!("top_n {} is not 1 to the documents' count", request.top_n));
            }
            let _ = request.max_tokens_per_doc;
            Ok(Seen {
                shape,
                authorization,
                model: request.model,
                query: request.query,
                top_n: request.top_n,
                documents: request.documents,
            })
        }
        Shape::Bedrock => {
            let signed = authorization
                .as_deref()
                .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential=") && a.contains("/bedrock/aws4_request"));
            if !signed || parts.headers.get("x-amz-date").is_none() {
                return Err("the request is not SigV4-signed for bedrock".to_owned());
            }
            let request: BedrockRequest =
                serde_json::from_slice(body).map_err(|e| format!("not a Rerank request: {e}"))?;
            let [query] = request.queries.as_slice() else { return Err("send exactly one query".to_owned()) };
            if query["type"] != "TEXT" {
                return Err("the query's type is not TEXT".to_owned());
            }
            let query = query["textQuery"]["text"].as_str().ok_or("the query has no textQuery.text")?.to_owned();
            nonblank("query", &query)?;
            if request.sources.is_empty() || request.sources.len() > 1000 {
                return Err(format!("{} sources; send 1 to 1000", request.sources.len()));
            }
            let mut documents = Vec::new();
            for source in &request.sources {
                let inline = &source["inlineDocumentSource"];
                if source["type"] != "INLINE" || inline["type"] != "TEXT" {
                    return Err("a source is not an INLINE TEXT document".to_owned());
                }
                let text = inline["textDocument"]["text"].as_str().ok_or("a source has no textDocument.text")?;
                nonblank("a source", text)?;
                documents.push(text.to_owned());
            }
            let configuration = &request.reranking_configuration;
            if configuration["type"] != "BEDROCK_RERANKING_MODEL" {
                return Err("rerankingConfiguration.type is not BEDROCK_RERANKING_MODEL".to_owned());
            }
            let bedrock = &configuration["bedrockRerankingConfiguration"];
            let model = bedrock["modelConfiguration"]["modelArn"].as_str().unwrap_or_default().to_owned();
            let known = ["amazon.rerank-v1:0", "cohere.rerank-v3-5:0"];
            let valid_arn = model
                .strip_prefix("arn:aws:bedrock:")
                .and_then(|rest| rest.split_once("::foundation-model/"))
                .is_some_and(|(region, model)| !region.is_empty() && known.contains(&model));
            if !valid_arn {
                return Err(format!("{model:?} is not a Bedrock reranking model's ARN"));
            }
            let top_n = bedrock["numberOfResults"].as_u64().unwrap_or(0) as usize;
            if !(1..=documents.len()).contains(&top_n) {
                return Err(format!("numberOfResults {top_n} is not 1 to the sources' count"));
            }
            Ok(Seen { shape, authorization, model, query, documents, top_n })
        }
    }
}
