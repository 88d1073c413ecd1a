//! Reranking a search's first candidates with a collection's reranker (`rerank` setting,
//! `sluice_domain::rerank`). Two wire shapes: the common `POST …/rerank` body
//! `{model, query, documents, top_n}` answered `{results: [{index, relevance_score}]}` —
//! Cohere's v2 API and the self-hosted servers (text-embeddings-inference, Infinity, vLLM)
//! alike — and Amazon Bedrock's `Rerank`, through the AWS SDK with the deployment's own role.
//!
//! A reranker is an optional stage: it gets one try within the search's time, no retries,
//! and any failure is told apart (`RerankError::reason`) so the search answers the fused
//! order with `reranked: false` and why, never the provider's own words.

pub mod target;

use sluice_embed::credentials::ApiKey;
use std::time::Duration;

/// Where and with what a collection reranks.
#[derive(Debug, Clone)]
pub enum RerankTarget {
    /// The common `/rerank` shape at `base_url` (`/rerank` is appended), with a bearer key
    /// when the setting lends one.
    Http { base_url: String, model: String, api_key: Option<ApiKey> },
    /// Amazon Bedrock's `Rerank` with the foundation model `model_arn`.
    Bedrock { model_arn: String },
}

/// The most of an answer read: a score per candidate, and the documents where a server
/// sends them back unasked.
const ANSWER_CAP: usize = 4 << 20;

/// Why reranking gave no order. Each names what happened, never the provider's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RerankError {
    #[error("the reranker refused the credential (HTTP {0})")]
    CredentialRefused(u16),
    #[error("the reranker is rate limiting")]
    RateLimited,
    #[error("the reranker failed (HTTP {0})")]
    ProviderFailing(u16),
    #[error("the reranker refused the request (HTTP {0})")]
    RequestRefused(u16),
    #[error("the reranker did not answer in time")]
    TimedOut,
    #[error("the reranker could not be reached")]
    Unreachable,
    #[error("the reranker's answer is not an order of the candidates")]
    Malformed,
}

impl RerankError {
    /// A short, stable name: the `reason` a search answers.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::CredentialRefused(_) => "credential_refused",
            Self::RateLimited => "rate_limited",
            Self::ProviderFailing(_) => "provider_failing",
            Self::RequestRefused(_) => "request_refused",
            Self::TimedOut => "timed_out",
            Self::Unreachable => "unreachable",
            Self::Malformed => "malformed_answer",
        }
    }
}

/// One candidate's place as the reranker scored it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The candidate's index in the list sent.
    pub index: usize,
    pub score: f64,
}

/// `documents` scored against `query`, best first: every candidate once. `time_limit`
/// bounds the one request.
pub async fn rerank(
    http: &reqwest::Client,
    bedrock: &aws_sdk_bedrockagentruntime::Client,
    target: &RerankTarget,
    query: &str,
    documents: &[String],
    time_limit: Duration,
) -> Result<Vec<Scored>, RerankError> {
    if documents.is_empty() {
        return Ok(Vec::new());
    }
    let scored = match target {
        RerankTarget::Http { base_url, model, api_key } => {
            let asked = http_rerank(http, base_url, model, api_key.as_ref(), query, documents);
            tokio::time::timeout(time_limit, asked).await.map_err(|_| RerankError::TimedOut)??
        }
        RerankTarget::Bedrock { model_arn } => {
            let asked = bedrock_rerank(bedrock, model_arn, query, documents);
            tokio::time::timeout(time_limit, asked).await.map_err(|_| RerankError::TimedOut)??
        }
    };
    in_order(scored, documents.len())
}

/// The scores best first, when they are an order of the `count` candidates: each index
/// once, none past the end, every one there, every score a number.
fn in_order(mut scored: Vec<Scored>, count: usize) -> Result<Vec<Scored>, RerankError> {
    let mut seen = vec![false; count];
    for place in &scored {
        if place.index >= count || seen[place.index] || !place.score.is_finite() {
            return Err(RerankError::Malformed);
        }
        seen[place.index] = true;
    }
    if seen.iter().any(|s| !s) {
        return Err(RerankError::Malformed);
    }
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    Ok(scored)
}

#[derive(serde::Deserialize)]
struct HttpAnswer {
    results: Vec<HttpResult>,
}

#[derive(serde::Deserialize)]
struct HttpResult {
    index: usize,
    relevance_score: f64,
}

async fn http_rerank(
    http: &reqwest::Client,
    base_url: &str,
    model: &str,
    api_key: Option<&ApiKey>,
    query: &str,
    documents: &[String],
) -> Result<Vec<Scored>, RerankError> {
    let url = format!("{}/rerank", base_url.trim_end_matches('/'));
    if let Err(why) = sluice_embed::network::NetworkPolicy::current().check_url(&url) {
        tracing::warn!(why, "reranking address refused");
        return Err(RerankError::Unreachable);
    }
    let body = serde_json::json!({"model": model, "query": query, "documents": documents, "top_n": documents.len()});
    let mut request = http.post(&url).json(&body);
    if let Some(key) = api_key {
        request = request.bearer_auth(key.expose());
    }
    let answer = request.send().await.map_err(|error| {
        tracing::warn!(error = %error, "reranker unreachable");
        RerankError::Unreachable
    })?;
    let status = answer.status().as_u16();
    if !answer.status().is_success() {
        tracing::warn!(status, "reranking request failed");
        return Err(match status {
            401 | 403 => RerankError::CredentialRefused(status),
            429 => RerankError::RateLimited,
            500..=599 => RerankError::ProviderFailing(status),
            _ => RerankError::RequestRefused(status),
        });
    }
    let body = sluice_embed::read_capped(answer, ANSWER_CAP).await.ok_or(RerankError::Malformed)?;
    let answer: HttpAnswer = serde_json::from_slice(&body).map_err(|_| RerankError::Malformed)?;
    Ok(answer.results.into_iter().map(|r| Scored { index: r.index, score: r.relevance_score }).collect())
}

async fn bedrock_rerank(
    client: &aws_sdk_bedrockagentruntime::Client,
    model_arn: &str,
    query: &str,
    documents: &[String],
) -> Result<Vec<Scored>, RerankError> {
    use aws_sdk_bedrockagentruntime::error::SdkError;
    use aws_sdk_bedrockagentruntime::types::{
        BedrockRerankingConfiguration, BedrockRerankingModelConfiguration, RerankDocument, RerankDocumentType,
        RerankQuery, RerankQueryContentType, RerankSource, RerankSourceType, RerankTextDocument,
        RerankingConfiguration, RerankingConfigurationType,
    };
    let malformed = |_| RerankError::Malformed;
    let text = |text: &str| RerankTextDocument::builder().text(text).build();
    let query = RerankQuery::builder()
        .r#type(RerankQueryContentType::Text)
        .text_query(text(query))
        .build()
        .map_err(malformed)?;
    let sources = documents
        .iter()
        .map(|document| {
            let inline =
                RerankDocument::builder().r#type(RerankDocumentType::Text).text_document(text(document)).build()?;
            RerankSource::builder().r#type(RerankSourceType::Inline).inline_document_source(inline).build()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(malformed)?;
    let model = BedrockRerankingModelConfiguration::builder().model_arn(model_arn).build().map_err(malformed)?;
    let configuration = RerankingConfiguration::builder()
        .r#type(RerankingConfigurationType::BedrockRerankingModel)
        .bedrock_reranking_configuration(
            BedrockRerankingConfiguration::builder()
                .number_of_results(i32::try_from(documents.len()).unwrap_or(i32::MAX))
                .model_configuration(model)
                .build(),
        )
        .build()
        .map_err(malformed)?;
    let answer = client
        .rerank()
        .queries(query)
        .set_sources(Some(sources))
        .reranking_configuration(configuration)
        .send()
        .await
        .map_err(|error| match &error {
            SdkError::ServiceError(service) => {
                let status = service.raw().status().as_u16();
                tracing::warn!(status, code = ?service.err().meta().code(), "Bedrock refused the reranking");
                match status {
                    401 | 403 => RerankError::CredentialRefused(status),
                    429 => RerankError::RateLimited,
                    500..=599 => RerankError::ProviderFailing(status),
                    _ => RerankError::RequestRefused(status),
                }
            }
            SdkError::TimeoutError(_) => RerankError::TimedOut,
            SdkError::ResponseError(_) => RerankError::Malformed,
            _ => {
                tracing::warn!(error = %error, "Bedrock unreachable for reranking");
                RerankError::Unreachable
            }
        })?;
    answer
        .results()
        .iter()
        .map(|r| {
            let index = usize::try_from(r.index()).map_err(|_| RerankError::Malformed)?;
            Ok(Scored { index, score: f64::from(r.relevance_score()) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_an_order_only_when_it_scores_every_candidate_once() {
        let place = |index, score| Scored { index, score };
        let ordered = in_order(vec![place(0, 0.1), place(2, 0.9), place(1, 0.5)], 3).expect("an order");
        assert_eq!(ordered.iter().map(|s| s.index).collect::<Vec<_>>(), [2, 1, 0]);
        assert_eq!(in_order(vec![place(0, 0.1), place(0, 0.2)], 2), Err(RerankError::Malformed));
        assert_eq!(in_order(vec![place(0, 0.1)], 2), Err(RerankError::Malformed), "a candidate left out");
        assert_eq!(in_order(vec![place(3, 0.1)], 1), Err(RerankError::Malformed));
        assert_eq!(in_order(vec![place(0, f64::NAN)], 1), Err(RerankError::Malformed));
    }
}
