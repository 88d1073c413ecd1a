//! LlamaParse as a collection's parser: its job API with the organization's key. The
//! original is uploaded once (`POST /api/v1/parsing/upload`, multipart, with `max_pages`),
//! the job polled (`GET /api/v1/parsing/job/{id}`), and its result read page by page as
//! markdown (`GET /api/v1/parsing/job/{id}/result/json`), so chunks cite pages as they do
//! for Sluice's own PDF reader. Every failure is told in Sluice's words: the kind, and what to
//! do — never LlamaParse's text.

use serde::Deserialize;
use sluice_embed::credentials::ApiKey;
use std::time::Duration;

/// LlamaParse's API unless the deployment names another region (`SLUICE_LLAMAPARSE_URL`).
pub const DEFAULT_BASE_URL: &str = "https://api.cloud.llamaindex.ai";
pub const BASE_URL_VARIABLE: &str = "SLUICE_LLAMAPARSE_URL";
/// How long one request may take (the upload carries the whole file).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a result read: far more than any text budget keeps.
const RESULT_CAP: usize = 64 << 20;

/// The deployment's LlamaParse address.
pub fn base_url() -> String {
    std::env::var(BASE_URL_VARIABLE)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned())
}

/// Why LlamaParse did not parse a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlamaError {
    /// 401/403: the key was refused.
    #[error("LlamaParse refused the key")]
    BadKey,
    /// 402, or a 429 that says the plan's credits are spent.
    #[error("the organization's LlamaParse plan is exhausted")]
    PlanExhausted,
    /// Another 4xx, or a job that ended in error: the file itself.
    #[error("LlamaParse refused the file")]
    FileRefused,
    /// 429 or 5xx, or no answer: worth asking again later.
    #[error("LlamaParse is unavailable")]
    Unavailable,
    /// An answer that is not what the API documents.
    #[error("LlamaParse answered something unreadable")]
    Malformed,
}

impl LlamaError {
    /// Whether a later delivery may fare better.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable)
    }

    /// The stored error's type.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadKey => "ParserCredentialRefused",
            Self::PlanExhausted => "ParserPlanExhausted",
            Self::FileRefused => "ParserRefusedFile",
            Self::Unavailable => "ParserUnavailable",
            Self::Malformed => "ParserMalformedAnswer",
        }
    }

    /// What the user can do about it.
    pub fn advice(&self) -> &'static str {
        match self {
            Self::BadKey => {
                "LlamaParse refused the collection's key; choose a valid key (ingestion_config.llamaparse_secret_id), then retry the document"
            }
            Self::PlanExhausted => {
                "the organization's LlamaParse plan has no pages left; add credits or switch the collection to parser sluice, then retry"
            }
            Self::FileRefused => {
                "LlamaParse could not parse this file; check that it opens, or upload it to a collection that uses parser sluice"
            }
            Self::Unavailable => "LlamaParse did not finish in time; retry the document later",
            Self::Malformed => "LlamaParse answered something that is not a result; retry the document, or report it",
        }
    }
}

/// Where a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Pending,
    Success,
    Failed,
}

/// A job's result: each page's markdown, in order, with its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPages {
    pub pages: Vec<(u32, String)>,
    /// The pages LlamaParse says it parsed (billed).
    pub pages_billed: u32,
}

#[derive(Deserialize)]
struct JobAnswer {
    id: String,
    #[serde(default)]
    status: Option<String>,
}

#[derive(Deserialize)]
struct ResultAnswer {
    pages: Vec<PageAnswer>,
    #[serde(default)]
    job_metadata: Option<JobMetadata>,
}

#[derive(Deserialize)]
struct PageAnswer {
    page: u32,
    #[serde(default)]
    md: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct JobMetadata {
    #[serde(default)]
    job_pages: Option<u32>,
}

/// Maps a refusal's status to what it means; the body is LlamaParse's and only logged.
async fn refusal(answer: reqwest::Response) -> LlamaError {
    let status = answer.status().as_u16();
    let body = sluice_embed::read_capped(answer, 16 << 10).await.unwrap_or_default();
    let body = String::from_utf8_lossy(&body).to_ascii_lowercase();
    tracing::warn!(status, "LlamaParse refused a request");
    match status {
        401 | 403 => LlamaError::BadKey,
        402 => LlamaError::PlanExhausted,
        429 if body.contains("credit") || body.contains("quota") => LlamaError::PlanExhausted,
        429 | 500..=599 => LlamaError::Unavailable,
        _ => LlamaError::FileRefused,
    }
}

fn unreachable(error: reqwest::Error) -> LlamaError {
    tracing::warn!(error = %error, "LlamaParse unreachable");
    LlamaError::Unavailable
}

/// Uploads a file for parsing, at most `max_pages` of it; the job's id.
pub async fn upload(
    client: &reqwest::Client,
    key: &ApiKey,
    (filename, bytes): (&str, Vec<u8>),
    max_pages: u32,
) -> Result<String, LlamaError> {
    let url = format!("{}/api/v1/parsing/upload", base_url().trim_end_matches('/'));
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned()))
        .text("max_pages", max_pages.to_string());
    let answer = client
        .post(&url)
        .bearer_auth(key.expose())
        .timeout(REQUEST_TIMEOUT)
        .multipart(form)
        .send()
        .await
        .map_err(unreachable)?;
    if !answer.status().is_success() {
        return Err(refusal(answer).await);
    }
    let body = sluice_embed::read_capped(answer, 1 << 20).await.ok_or(LlamaError::Malformed)?;
    let job: JobAnswer = serde_json::from_slice(&body).map_err(|_| LlamaError::Malformed)?;
    if job.id.is_empty() || job.id.len() > 200 || !job.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(LlamaError::Malformed);
    }
    Ok(job.id)
}

/// Where job `id` stands.
pub async fn status(client: &reqwest::Client, key: &ApiKey, id: &str) -> Result<JobStatus, LlamaError> {
    let url = format!("{}/api/v1/parsing/job/{id}", base_url().trim_end_matches('/'));
    let answer =
        client.get(&url).bearer_auth(key.expose()).timeout(REQUEST_TIMEOUT).send().await.map_err(unreachable)?;
    if !answer.status().is_success() {
        return Err(refusal(answer).await);
    }
    let body = sluice_embed::read_capped(answer, 1 << 20).await.ok_or(LlamaError::Malformed)?;
    let job: JobAnswer = serde_json::from_slice(&body).map_err(|_| LlamaError::Malformed)?;
    Ok(match job.status.as_deref() {
        Some("SUCCESS") => JobStatus::Success,
        Some("PENDING") => JobStatus::Pending,
        Some("ERROR" | "CANCELED" | "CANCELLED") => JobStatus::Failed,
        _ => return Err(LlamaError::Malformed),
    })
}

/// A finished job's pages as markdown.
pub async fn result(client: &reqwest::Client, key: &ApiKey, id: &str) -> Result<ParsedPages, LlamaError> {
    let url = format!("{}/api/v1/parsing/job/{id}/result/json", base_url().trim_end_matches('/'));
    let answer =
        client.get(&url).bearer_auth(key.expose()).timeout(REQUEST_TIMEOUT).send().await.map_err(unreachable)?;
    if !answer.status().is_success() {
        return Err(refusal(answer).await);
    }
    let body = sluice_embed::read_capped(answer, RESULT_CAP).await.ok_or(LlamaError::Malformed)?;
    let result: ResultAnswer = serde_json::from_slice(&body).map_err(|_| LlamaError::Malformed)?;
    let pages_billed = result.job_metadata.and_then(|m| m.job_pages).unwrap_or(result.pages.len() as u32);
    let pages = result.pages.into_iter().map(|p| (p.page, p.md.or(p.text).unwrap_or_default())).collect();
    Ok(ParsedPages { pages, pages_billed })
}

/// The pages as one markdown text with where each begins (for `pages` citations); pages
/// with nothing on them still begin where the next does.
pub fn joined(pages: &[(u32, String)]) -> (String, Vec<(u32, usize)>) {
    let mut text = String::new();
    let mut starts = Vec::with_capacity(pages.len());
    for (number, page) in pages {
        starts.push((*number, text.len()));
        let page = page.trim();
        if !page.is_empty() {
            text.push_str(page);
            text.push_str("\n\n");
        }
    }
    let trimmed = text.trim_end().len();
    text.truncate(trimmed);
    for start in &mut starts {
        start.1 = start.1.min(text.len());
    }
    (text, starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> reqwest::Response {
        reqwest::Response::from(http::Response::builder().status(status).body(body.to_owned()).expect("response"))
    }

    #[tokio::test]
    async fn each_refusal_reads_as_what_it_means_and_only_unavailability_is_retried() {
        for (status, body, meant) in [
            (401, "Invalid API Key", LlamaError::BadKey),
            (403, "", LlamaError::BadKey),
            (402, "Payment required", LlamaError::PlanExhausted),
            (429, "You have exhausted your credits", LlamaError::PlanExhausted),
            (429, "Too many requests", LlamaError::Unavailable),
            (503, "", LlamaError::Unavailable),
            (400, "Unsupported file type", LlamaError::FileRefused),
        ] {
            let error = refusal(answer(status, body)).await;
            assert_eq!(error, meant, "{status} {body}");
            assert_eq!(error.is_transient(), meant == LlamaError::Unavailable);
            assert!(!error.advice().to_ascii_lowercase().contains(&body.to_ascii_lowercase()) || body.is_empty());
        }
    }

    #[test]
    fn pages_join_into_one_text_that_says_where_each_begins() {
        let pages = vec![(1, "# Title\n\nIntro.".to_owned()), (2, "  ".to_owned()), (3, "Page three.\n".to_owned())];
        let (text, starts) = joined(&pages);
        assert_eq!(text, "# Title\n\nIntro.\n\nPage three.");
        assert_eq!(starts, [(1, 0), (2, 17), (3, 17)]);
    }
}
