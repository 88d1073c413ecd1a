//! The OpenAI-compatible `/chat/completions` request that describes one image: the image
//! as a `data:` URL in an `image_url` content part, the collection's model, the key as a
//! bearer token. `429` is waited out as `Retry-After` asks (seconds or an HTTP date) and
//! `5xx` retried with backoff, both only while the description's deadline allows; what no
//! retry fixes is told apart and becomes the image's skip reason, never the provider's words.

use base64::Engine;
use sluice_embed::credentials::ApiKey;
use sluice_formats::images::FoundImage;
use std::time::{Duration, Instant};

/// Where and with what a collection describes its images.
#[derive(Debug, Clone)]
pub struct VisionTarget {
    /// The endpoint's base URL, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// OpenAI's own API takes `max_completion_tokens` (its newer models refuse
    /// `max_tokens`); other OpenAI-compatible servers know `max_tokens`.
    pub openai: bool,
}

/// What the model is asked.
pub const PROMPT: &str = "Describe this image from a document so that it can be found by search: \
    say what it shows, and give any text, labels, numbers and trends it contains. \
    Answer in plain prose of at most 120 words, without a preamble.";
/// The most tokens a description may take.
pub const MAX_DESCRIPTION_TOKENS: u32 = 300;
/// The most characters of a description kept.
pub const MAX_DESCRIPTION_CHARS: usize = 1500;
/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of an answer read.
const ANSWER_CAP: usize = 256 << 10;
/// The first wait before retrying a failing provider.
const FIRST_DELAY: Duration = Duration::from_millis(500);

/// Why an image was left undescribed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VisionError {
    #[error("the provider refused the credential")]
    CredentialRefused,
    #[error("the endpoint does not serve the model")]
    ModelNotServed,
    #[error("the provider refused the request")]
    RequestRefused,
    #[error("the model declined to describe the image")]
    Declined,
    #[error("the provider kept rate limiting past the document's time budget")]
    RateLimited,
    #[error("the provider kept failing")]
    ProviderFailing,
    #[error("the provider could not be reached")]
    Unreachable,
    #[error("the provider's answer held no description")]
    Malformed,
    #[error("the document's time for descriptions ran out")]
    OutOfTime,
}

impl VisionError {
    /// The reason recorded on the document, by which skipped images are counted.
    pub fn reason(self) -> &'static str {
        match self {
            Self::CredentialRefused => "credential_refused",
            Self::ModelNotServed => "model_not_served",
            Self::RequestRefused => "request_refused",
            Self::Declined => "declined",
            Self::RateLimited => "rate_limited",
            Self::ProviderFailing => "provider_failing",
            Self::Unreachable => "unreachable",
            Self::Malformed => "malformed_answer",
            Self::OutOfTime => "out_of_time",
        }
    }

    /// Whether the next image may fare better: a refused key or model refuses them all.
    pub fn ends_the_document(self) -> bool {
        matches!(self, Self::CredentialRefused | Self::ModelNotServed | Self::OutOfTime)
    }
}

#[derive(Debug, serde::Deserialize)]
struct Answer {
    choices: Vec<Choice>,
}

#[derive(Debug, serde::Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

/// The request body for `image`.
pub fn request_body(target: &VisionTarget, image: &FoundImage) -> serde_json::Value {
    let data = base64::engine::general_purpose::STANDARD.encode(&image.bytes);
    let url = format!("data:{};base64,{data}", image.media_type);
    let mut body = serde_json::json!({
        "model": target.model,
        "messages": [{
            "role": "user",
            "content": [
                {"type": "text", "text": PROMPT},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }],
    });
    let limit = if target.openai { "max_completion_tokens" } else { "max_tokens" };
    body[limit] = serde_json::json!(MAX_DESCRIPTION_TOKENS);
    body
}

/// Describes `image` at `target`, giving up at `deadline`.
pub async fn describe(
    client: &reqwest::Client,
    target: &VisionTarget,
    image: &FoundImage,
    deadline: Instant,
) -> Result<String, VisionError> {
    let url = format!("{}/chat/completions", target.base_url.trim_end_matches('/'));
    if let Err(why) = sluice_embed::network::NetworkPolicy::current().check_url(&url) {
        tracing::warn!(why, "vision address refused");
        return Err(VisionError::Unreachable);
    }
    let body = request_body(target, image);
    let mut delay = FIRST_DELAY;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(VisionError::OutOfTime);
        }
        let mut request = client.post(&url).timeout(REQUEST_TIMEOUT.min(left)).json(&body);
        if let Some(key) = &target.api_key {
            request = request.bearer_auth(key.expose());
        }
        let (failure, wait) = match request.send().await {
            Ok(answer) if answer.status().is_success() => {
                let body = sluice_embed::read_capped(answer, ANSWER_CAP).await.ok_or(VisionError::Malformed)?;
                return description(&body);
            }
            Ok(answer) => {
                let status = answer.status().as_u16();
                let asked = sluice_embed::client::retry_after(answer.headers());
                tracing::warn!(status, "image description request failed");
                match status {
                    401 | 403 => return Err(VisionError::CredentialRefused),
                    404 => return Err(VisionError::ModelNotServed),
                    429 => (VisionError::RateLimited, asked.unwrap_or(delay)),
                    500..=599 => (VisionError::ProviderFailing, delay),
                    _ => return Err(VisionError::RequestRefused),
                }
            }
            Err(error) if error.is_timeout() => return Err(VisionError::OutOfTime),
            Err(error) => {
                tracing::warn!(error = %error, "vision endpoint unreachable");
                (VisionError::Unreachable, delay)
            }
        };
        // A wait the deadline cannot hold is not waited: the image stays undescribed.
        if Instant::now() + wait >= deadline {
            return Err(failure);
        }
        tokio::time::sleep(wait).await;
        delay = (delay * 2).min(Duration::from_secs(20));
    }
}

/// The description in an answer: the first choice's text on one line, cut to
/// [`MAX_DESCRIPTION_CHARS`]; a refusal, a filtered answer or an empty one is none.
fn description(body: &[u8]) -> Result<String, VisionError> {
    let answer: Answer = serde_json::from_slice(body).map_err(|_| VisionError::Malformed)?;
    let choice = answer.choices.into_iter().next().ok_or(VisionError::Malformed)?;
    if choice.message.refusal.is_some_and(|r| !r.trim().is_empty())
        || choice.finish_reason.as_deref() == Some("content_filter")
    {
        return Err(VisionError::Declined);
    }
    let text = choice.message.content.unwrap_or_default();
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text: String = text.chars().filter(|c| !c.is_control()).take(MAX_DESCRIPTION_CHARS).collect();
    if text.is_empty() { Err(VisionError::Declined) } else { Ok(text) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_s_text_is_the_description_and_a_refusal_is_none() {
        let answer = |message: serde_json::Value, finish: &str| {
            serde_json::json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}]}).to_string()
        };
        let said = answer(serde_json::json!({"role": "assistant", "content": "A bar chart\n of  ships."}), "stop");
        assert_eq!(description(said.as_bytes()), Ok("A bar chart of ships.".to_owned()));
        let refused = answer(serde_json::json!({"role": "assistant", "content": null, "refusal": "I can't."}), "stop");
        assert_eq!(description(refused.as_bytes()), Err(VisionError::Declined));
        let filtered = answer(serde_json::json!({"role": "assistant", "content": "x"}), "content_filter");
        assert_eq!(description(filtered.as_bytes()), Err(VisionError::Declined));
        assert_eq!(description(b"{\"choices\": []}"), Err(VisionError::Malformed));
        assert_eq!(description(b"<html>"), Err(VisionError::Malformed));
        let long = answer(serde_json::json!({"role": "assistant", "content": "word ".repeat(1000)}), "length");
        assert_eq!(description(long.as_bytes()).map(|d| d.chars().count()), Ok(MAX_DESCRIPTION_CHARS));
    }
}
