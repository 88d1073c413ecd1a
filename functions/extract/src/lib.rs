//! The `extract` function: the only one that opens untrusted bytes with a parser.
//!
//! It runs in Lambda's tenant isolation mode: every invocation names a tenant (the owner of
//! the bytes), and Lambda never lets two tenants share an execution environment (each a
//! Firecracker microVM). That is the boundary a hostile file meets on AWS, where Lambda
//! refuses the calls a process would confine itself with; the parse worker's own confinement
//! (`sluice_isolate`) is defence in depth wherever the platform grants it. The function holds
//! nothing worth stealing: its role grants only its own logs, its input comes inline or
//! through a presigned `GET` of exactly one object, and an answer too large for Lambda's
//! response goes out through a presigned `PUT` of a one-time key the caller chose.
//!
//! After every job — whatever its outcome — the environment is swept: every process a
//! hostile file left behind is killed (`sluice_isolate::sweep`) and the scratch folder is
//! emptied, so nothing of one job meets the next.

use base64::Engine;
use serde_json::value::RawValue;
use sluice_extraction::protocol::{INLINE_ANSWER_MAX_BYTES, Input, PresignedPut};
pub use sluice_extraction::protocol::{Request, Response};
use sluice_formats::Refusal;
use sluice_isolate::Extractor;
use std::path::PathBuf;
use std::time::Duration;

/// How long a presigned `GET` or `PUT` may take to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a job could not be done: the service's failure, never the file's (a file that cannot
/// be read is an answer, not an error). Lambda reports it to the caller as a function error.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("the input is not valid base64")]
    InputEncoding,
    #[error("the input could not be fetched: {0}")]
    Fetch(String),
    #[error("the input is larger than the {0} bytes it was said to be")]
    InputTooLarge(u64),
    #[error("the answer ({0} bytes) is too large to return and no upload was given")]
    AnswerTooLarge(usize),
    #[error("the answer could not be written: {0}")]
    Store(String),
    #[error("the parse worker could not be started: {0}")]
    Worker(String),
}

/// Everything a job needs, built once per execution environment.
#[derive(Debug, Clone)]
pub struct State {
    pub extractor: Extractor,
    pub http: reqwest::Client,
    /// The folder emptied after every job (`SLUICE_EXTRACT_SCRATCH_DIR`; `/tmp` on Lambda).
    pub scratch: Option<PathBuf>,
    /// Whether every other process of this user is the environment's own, so the sweep may
    /// kill them all (`SLUICE_EXTRACT_SWEEP_USER=1`: Lambda's sandbox user, or a user the
    /// local stack gives one environment).
    pub sweep_user: bool,
}

impl State {
    /// Builds the state from the environment, probes what confinement the platform grants
    /// (logged once) and makes this process the reaper of whatever its workers orphan.
    pub fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let memory_mb = sluice_domain::config::worker_memory_limit_mb(
            number("SLUICE_PARSE_MAX_MEMORY_MB").unwrap_or(sluice_domain::config::DEFAULT_PARSE_MAX_MEMORY_MB).max(16),
            number("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"),
            1,
        );
        sluice_formats::pdf::ensure_available()?;
        sluice_ocr::ensure_installed()?;
        // The workers are this binary, unless the stand-alone worker is named.
        let extractor = match std::env::var_os("SLUICE_EXTRACT_WORKER_PROGRAM") {
            Some(program) => Extractor::new(program, memory_mb << 20),
            None => Extractor::current_exe(memory_mb << 20)?,
        };
        let state = Self {
            extractor,
            http: http_client()?,
            scratch: std::env::var_os("SLUICE_EXTRACT_SCRATCH_DIR").map(PathBuf::from),
            sweep_user: std::env::var("SLUICE_EXTRACT_SWEEP_USER").is_ok_and(|v| v == "1"),
        };
        let subreaper = sluice_isolate::become_subreaper();
        let workers = state.extractor.probe();
        tracing::info!(subreaper, ?workers, sweep_user = state.sweep_user, "extract environment ready");
        Ok(state)
    }
}

/// The client for presigned URLs: rustls over ring, no redirects, no proxy.
pub fn http_client() -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
}

/// Serves one job, then sweeps the environment whatever came of it. The answer is JSON
/// already (its size decided where it goes), handed to the runtime as it is.
pub async fn handle(state: &State, request: Request) -> Result<Box<RawValue>, ExtractError> {
    let outcome = serve(state, request).await;
    let swept = sluice_isolate::sweep::sweep_environment(state.sweep_user);
    let emptied = state.scratch.as_deref().map_or(0, sluice_isolate::sweep::empty_dir);
    if swept > 0 || emptied > 0 {
        tracing::warn!(swept, emptied, "a job left processes or files behind; removed");
    }
    outcome
}

async fn serve(state: &State, request: Request) -> Result<Box<RawValue>, ExtractError> {
    let bytes = fetch(&state.http, request.input).await?;
    let (extractor, options, extension) = (state.extractor.clone(), request.options, request.extension);
    let answer =
        tokio::task::spawn_blocking(move || match sluice_formats::kind_for_filename(&format!("f.{extension}")) {
            Some(kind) => extractor.extract(kind, &bytes, &options).map(Response::Extracted),
            None => Ok(Response::Extracted(Err(Refusal {
                code: sluice_formats::RefusalCode::ExtensionNotAllowed,
                message: format!("no file kind has the extension {extension:?}"),
            }))),
        })
        .await
        .map_err(|e| ExtractError::Worker(e.to_string()))?
        .map_err(|e| ExtractError::Worker(e.to_string()))?;
    deliver(&state.http, answer, request.answer_upload.as_ref()).await
}

async fn fetch(http: &reqwest::Client, input: Input) -> Result<Vec<u8>, ExtractError> {
    match input {
        Input::Inline { base64 } => {
            base64::engine::general_purpose::STANDARD.decode(base64).map_err(|_| ExtractError::InputEncoding)
        }
        Input::Presigned { url, size } => {
            let mut response =
                http.get(&url).send().await.map_err(|e| ExtractError::Fetch(e.without_url().to_string()))?;
            if !response.status().is_success() {
                return Err(ExtractError::Fetch(format!("status {}", response.status())));
            }
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(64 << 20));
            while let Some(chunk) =
                response.chunk().await.map_err(|e| ExtractError::Fetch(e.without_url().to_string()))?
            {
                if (bytes.len() + chunk.len()) as u64 > size {
                    return Err(ExtractError::InputTooLarge(size));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(bytes)
        }
    }
}

/// The answer inline when Lambda's response can carry it, else written through the upload.
async fn deliver(
    http: &reqwest::Client,
    answer: Response,
    upload: Option<&PresignedPut>,
) -> Result<Box<RawValue>, ExtractError> {
    let json = serde_json::to_string(&answer).map_err(|e| ExtractError::Store(e.to_string()))?;
    if json.len() <= INLINE_ANSWER_MAX_BYTES {
        return RawValue::from_string(json).map_err(|e| ExtractError::Store(e.to_string()));
    }
    let Some(upload) = upload else { return Err(ExtractError::AnswerTooLarge(json.len())) };
    let bytes = json.len() as u64;
    let mut put = http.put(&upload.url);
    for (name, value) in &upload.headers {
        put = put.header(name, value);
    }
    let stored = put.body(json).send().await.map_err(|e| ExtractError::Store(e.without_url().to_string()))?;
    if !stored.status().is_success() {
        return Err(ExtractError::Store(format!("status {}", stored.status())));
    }
    serde_json::value::to_raw_value(&Response::Stored { bytes }).map_err(|e| ExtractError::Store(e.to_string()))
}
