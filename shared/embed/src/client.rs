//! The OpenAI-compatible `/embeddings` client every provider is reached through. `429` and
//! `5xx` are retried with exponential backoff that honours `Retry-After` (in seconds); what
//! no retry fixes is told apart, so the caller records it instead of retrying.

pub use crate::target::{EmbedApi, EmbedError, Target};
use std::time::Duration;

/// How long one embeddings request may take: a batch of long chunks on a CPU-bound local
/// service takes seconds, a hosted provider well under this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The most of a refusal's body that is read (for the log).
const ERROR_BODY_CAP: usize = 16 << 10;

/// How hard to try.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub first_delay: Duration,
    /// No single wait exceeds this, whatever `Retry-After` asks.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { attempts: 5, first_delay: Duration::from_millis(500), max_delay: Duration::from_secs(20) }
    }
}

#[derive(Debug, serde::Deserialize)]
struct Answer {
    data: Vec<Embedding>,
}

/// Ollama's own answer: the vectors in input order.
#[derive(Debug, serde::Deserialize)]
struct OllamaAnswer {
    embeddings: Vec<Vec<f32>>,
}

#[derive(Debug, serde::Deserialize)]
struct Embedding {
    index: usize,
    embedding: Vec<f32>,
}

/// The wait a `Retry-After` header asks for, in either form: whole seconds, or an HTTP date
/// (a date already past asks for no wait).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// Embeds `texts` (one request) against `target`, retrying what may pass later.
pub async fn embed(
    client: &reqwest::Client,
    target: &Target,
    texts: &[String],
    policy: RetryPolicy,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if let Some(model) = target.base_url.strip_prefix(crate::in_process::SCHEME) {
        return crate::in_process::embed(model, target, texts).await;
    }
    let base = target.base_url.trim_end_matches('/');
    let (url, body) = match target.api {
        EmbedApi::OpenAi => (format!("{base}/embeddings"), serde_json::json!({"model": target.model, "input": texts})),
        EmbedApi::Ollama => {
            (format!("{base}/api/embed"), serde_json::json!({"model": target.model, "input": texts, "truncate": false}))
        }
    };
    if let Err(why) = crate::network::NetworkPolicy::current().check_url(&url) {
        // Told apart from nothing else: a refused address reads as one that did not answer.
        tracing::warn!(why, "embedding address refused");
        return Err(EmbedError::Unreachable);
    }
    // Room for every vector written out in full, and a margin; an answer beyond it is no
    // answer to this request.
    let cap = (1 << 20) + texts.len() * target.dimensions.max(1) * 32;
    let mut delay = policy.first_delay;
    let mut last = EmbedError::Unreachable;
    for attempt in 1..=policy.attempts.max(1) {
        let mut request = client.post(&url).timeout(REQUEST_TIMEOUT).json(&body);
        if let Some(key) = &target.api_key {
            request = request.bearer_auth(key.expose());
        }
        let wait = match request.send().await {
            Ok(answer) if answer.status().is_success() => {
                let body = crate::read_capped(answer, cap).await.ok_or(EmbedError::Malformed)?;
                return match target.api {
                    EmbedApi::OpenAi => {
                        let answer: Answer = serde_json::from_slice(&body).map_err(|_| EmbedError::Malformed)?;
                        order(answer, texts.len(), target.dimensions)
                    }
                    EmbedApi::Ollama => {
                        let answer: OllamaAnswer = serde_json::from_slice(&body).map_err(|_| EmbedError::Malformed)?;
                        let whole = answer.embeddings.len() == texts.len()
                            && answer.embeddings.iter().all(|v| v.len() == target.dimensions);
                        if whole { Ok(answer.embeddings) } else { Err(EmbedError::Malformed) }
                    }
                };
            }
            Ok(answer) => {
                let status = answer.status().as_u16();
                let asked = retry_after(answer.headers());
                // The body is the provider's own words: logged (its start), never stored or answered.
                let text = crate::read_capped(answer, ERROR_BODY_CAP).await.unwrap_or_default();
                let text = String::from_utf8_lossy(&text);
                tracing::warn!(status, attempt, body = %text.chars().take(500).collect::<String>(), "embedding request failed");
                last = match status {
                    401 | 403 => return Err(EmbedError::CredentialRefused(status)),
                    404 => return Err(EmbedError::ModelNotServed),
                    429 => EmbedError::RateLimited { retry_after: asked },
                    500..=599 => EmbedError::ProviderFailing(status),
                    _ => return Err(EmbedError::RequestRefused(status)),
                };
                asked
            }
            Err(error) => {
                tracing::warn!(error = %error, attempt, "embedding endpoint unreachable");
                last = EmbedError::Unreachable;
                None
            }
        };
        if attempt < policy.attempts {
            tokio::time::sleep(wait.unwrap_or(delay).min(policy.max_delay)).await;
            delay = (delay * 2).min(policy.max_delay);
        }
    }
    Err(last)
}

/// The vectors in input order, each of the collection's width.
fn order(answer: Answer, count: usize, dimensions: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    if answer.data.len() != count {
        return Err(EmbedError::Malformed);
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; count];
    for item in answer.data {
        if item.embedding.len() != dimensions || item.index >= count || vectors[item.index].is_some() {
            return Err(EmbedError::Malformed);
        }
        vectors[item.index] = Some(item.embedding);
    }
    vectors.into_iter().collect::<Option<Vec<_>>>().ok_or(EmbedError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

    fn asking(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(value).expect("header"));
        retry_after(&headers)
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_as_an_http_date() {
        assert_eq!(asking("7"), Some(Duration::from_secs(7)));
        assert_eq!(asking("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO), "a date past asks no wait");
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(90));
        let wait = asking(&later).expect("a date");
        assert!((Duration::from_secs(85)..=Duration::from_secs(90)).contains(&wait), "{wait:?}");
        assert_eq!(asking("soon"), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }
}
