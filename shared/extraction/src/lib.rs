//! Reading a file's text where it cannot hurt the caller.
//!
//! Upload and parse hand every file they read to a [`Reader`]. Deployed, that is the
//! `extract` function (`SLUICE_EXTRACT_FUNCTION`), invoked synchronously with the tenant that
//! owns the bytes, so Lambda's tenant isolation mode never lets one tenant's file meet
//! another's in an execution environment; the caller's credentials, database and queues are
//! never in the process that parses. Where no function is named (the CLI, some tests and
//! benchmarks) it is parse workers started by this process (`sluice_isolate`).
//!
//! The upload check by name, declared type and magic bytes stays with the caller (it opens
//! no container); every parser runs in the extract function. A failed invocation, a timeout or
//! an answer that cannot be read leaves the file unreadable (a TIFF or an archive refused),
//! exactly as a crashed worker does.

pub mod protocol;

use base64::Engine;
use bytes::Bytes;
use protocol::{INLINE_ANSWER_MAX_BYTES, INLINE_INPUT_MAX_BYTES, Input, PresignedPut, Request, Response};
use sluice_blob::{Blob, BlobError};
use sluice_domain::{BlockingPool, FileContent};
use sluice_formats::{ExtractOptions, Extraction, FileKind, Refusal};
use sluice_isolate::{Extractor, IsolateError};
use std::time::Duration;
use uuid::Uuid;

/// How long past the job's own hard limit a caller waits for the function's answer (the
/// invocation's start, a cold start, the transfer of the answer).
const INVOCATION_MARGIN: Duration = Duration::from_secs(20);

/// Whose bytes these are: the execution environment a file is read in serves no other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(String);

impl Tenant {
    /// A chat file's owner: chat files are each user's own.
    pub fn user(user: Uuid) -> Self {
        Self(format!("user-{}", user.simple()))
    }

    /// A document's owner: the base's organization, else its user; an app base (neither) is
    /// the one `app` tenant.
    pub fn owner(org: Option<Uuid>, user: Option<Uuid>) -> Self {
        match (org, user) {
            (Some(org), _) => Self(format!("org-{}", org.simple())),
            (None, Some(user)) => Self::user(user),
            (None, None) => Self("app".to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a file could not be handed over at all: the service's failure, not the file's.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Isolate(#[from] IsolateError),
    #[error("blocking work panicked or was cancelled")]
    Blocking,
    #[error("the extract function's input or answer could not be stored: {0}")]
    Scratch(#[from] BlobError),
}

/// Where files are read.
#[derive(Debug, Clone)]
pub enum Reader {
    /// Parse workers of this process.
    Workers(Extractor),
    /// The extract function, an execution environment per tenant.
    Function(ExtractFunction),
}

/// The extract function, invoked through the Lambda API; `blob` holds the inputs too large
/// for the request and the answers too large for the response.
#[derive(Debug, Clone)]
pub struct ExtractFunction {
    pub lambda: aws_sdk_lambda::Client,
    pub name: String,
    pub blob: Blob,
}

impl Reader {
    /// The extract function `SLUICE_EXTRACT_FUNCTION` names, else workers of this binary
    /// (whose `main` calls `sluice_isolate::serve_if_worker` first), which need PDFium and
    /// OCR installed here: a function without them refuses to start.
    pub fn from_env(
        sdk: &aws_config::SdkConfig,
        blob: Blob,
        worker_memory_bytes: u64,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        match std::env::var("SLUICE_EXTRACT_FUNCTION").ok().filter(|name| !name.is_empty()) {
            Some(name) => Ok(Self::Function(ExtractFunction { lambda: aws_sdk_lambda::Client::new(sdk), name, blob })),
            None => {
                sluice_formats::pdf::ensure_available()?;
                sluice_ocr::ensure_installed()?;
                Ok(Self::Workers(Extractor::current_exe(worker_memory_bytes)?))
            }
        }
    }

    /// Extracts `bytes` accepted as `kind`, read for `tenant`. `key` is where the same bytes
    /// are stored, if they are (a large file is then fetched from there).
    pub async fn extract(
        &self,
        pool: &BlockingPool,
        tenant: &Tenant,
        kind: &'static FileKind,
        bytes: Bytes,
        key: Option<&str>,
        options: &ExtractOptions,
    ) -> Result<Result<Extraction, Refusal>, ReadError> {
        match self {
            Self::Workers(extractor) => {
                let (extractor, options) = (extractor.clone(), *options);
                let extracted = pool.run(move || extractor.extract(kind, &bytes, &options)).await;
                Ok(extracted.map_err(|_| ReadError::Blocking)??)
            }
            Self::Function(function) => function.extract(tenant, kind, bytes, key, options).await,
        }
    }

    /// The whole upload check: name, declared type and magic bytes here, then extraction.
    /// The inner `Err` refuses the file; `Ok` is the content its row records.
    #[allow(clippy::too_many_arguments)]
    pub async fn inspect(
        &self,
        pool: &BlockingPool,
        tenant: &Tenant,
        filename: &str,
        declared_mime: Option<&str>,
        bytes: Bytes,
        key: Option<&str>,
        options: &ExtractOptions,
    ) -> Result<Result<FileContent, Refusal>, ReadError> {
        let accepted = match sluice_formats::check_upload(filename, declared_mime, &bytes) {
            Ok(accepted) => accepted,
            Err(refusal) => return Ok(Err(refusal)),
        };
        let extracted = self.extract(pool, tenant, accepted.kind, bytes.clone(), key, options).await?;
        Ok(extracted.map(|extraction| sluice_isolate::file_content(&accepted, &bytes, extraction)))
    }
}

impl ExtractFunction {
    async fn extract(
        &self,
        tenant: &Tenant,
        kind: &'static FileKind,
        bytes: Bytes,
        key: Option<&str>,
        options: &ExtractOptions,
    ) -> Result<Result<Extraction, Refusal>, ReadError> {
        let job = Uuid::new_v4().simple().to_string();
        let limit = options.time_limit + sluice_isolate::GRACE + INVOCATION_MARGIN;
        let mut scratch = Vec::new();
        let input = if bytes.len() <= INLINE_INPUT_MAX_BYTES {
            Input::Inline { base64: base64::engine::general_purpose::STANDARD.encode(&bytes) }
        } else {
            let size = bytes.len() as u64;
            let key = match key {
                Some(key) => key.to_owned(),
                None => {
                    let key = format!("extract/{job}.input");
                    self.blob.put_encrypted(&key, bytes, "application/octet-stream").await?;
                    scratch.push(key.clone());
                    key
                }
            };
            Input::Presigned { url: self.blob.presign_download(&key, "input", limit).await?, size }
        };
        // A place for the answer only where it may outgrow Lambda's response (a chat file's
        // never does): presigning it and deleting it after are round trips a read can spare.
        let answer_key = (sluice_isolate::reply_cap(options) > INLINE_ANSWER_MAX_BYTES as u64)
            .then(|| format!("extract/{job}.json"));
        let answer_upload = match &answer_key {
            Some(key) => {
                let upload = self.blob.presign_json_upload(key, limit).await?;
                scratch.push(key.clone());
                Some(PresignedPut { url: upload.url, headers: upload.headers })
            }
            None => None,
        };
        let request = Request { extension: kind.extension.to_owned(), options: *options, input, answer_upload };
        let outcome = self.invoke(tenant, &request, answer_key.as_deref(), limit).await;
        for key in scratch {
            // An object left by a failed delete is removed by the sweep (no row names it).
            let _ = self.blob.delete(&key).await;
        }
        Ok(match outcome {
            Ok(extracted) => extracted,
            Err(reason) => {
                tracing::warn!(tenant = tenant.as_str(), reason, "the extract function did not read a file");
                sluice_isolate::unread(kind, reason.to_owned())
            }
        })
    }

    /// The function's answer, or why there is none (a sentence for the file's note).
    async fn invoke(
        &self,
        tenant: &Tenant,
        request: &Request,
        answer_key: Option<&str>,
        limit: Duration,
    ) -> Result<Result<Extraction, Refusal>, &'static str> {
        let payload =
            serde_json::to_vec(request).map_err(|_| "the file could not be handed to the extract function")?;
        let call = self
            .lambda
            .invoke()
            .function_name(&self.name)
            .tenant_id(tenant.as_str())
            .payload(aws_smithy_types::Blob::new(payload))
            .send();
        let output = match tokio::time::timeout(limit, call).await {
            Err(_) => return Err("the extract function did not answer in time"),
            Ok(Err(error)) => {
                tracing::warn!(error = %aws_sdk_lambda::error::DisplayErrorContext(&error), "invoking the extract function");
                return Err("the extract function could not be invoked");
            }
            Ok(Ok(output)) => output,
        };
        if let Some(kind) = output.function_error() {
            let detail = output.payload().map(|p| String::from_utf8_lossy(p.as_ref()).into_owned()).unwrap_or_default();
            tracing::warn!(kind, detail, "the extract function failed");
            return Err("the extract function failed on this file");
        }
        let answer: Response = output
            .payload()
            .and_then(|p| serde_json::from_slice(p.as_ref()).ok())
            .ok_or("the extract function's answer could not be read")?;
        let answer = match answer {
            Response::Stored { bytes } => {
                let key = answer_key.ok_or("the extract function stored an answer it was given no place for")?;
                let stored =
                    self.blob.get(key, bytes).await.map_err(|_| "the extract function's answer was not found")?;
                serde_json::from_slice(&stored).map_err(|_| "the extract function's answer could not be read")?
            }
            inline => inline,
        };
        match answer {
            Response::Extracted(extracted) => Ok(extracted),
            Response::Stored { .. } => Err("the extract function's answer could not be read"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_languages_offered_for_tesseract_are_those_ocr_reads_with_it() {
        let offered = sluice_domain::ingestion::TESSERACT_LANGUAGES;
        assert_eq!(
            &sluice_ocr::TESSERACT_LANGUAGES[1..],
            offered,
            "English is read beside them, not by Tesseract alone"
        );
        for language in offered {
            assert!(sluice_domain::ingestion::OCR_LANGUAGES.contains(language), "{language} offered");
            assert!(sluice_ocr::Alphabet::for_languages(&[language]).by_tesseract(), "{language}");
        }
        assert!(!sluice_ocr::Alphabet::for_languages(&["eng"]).by_tesseract());
    }

    #[test]
    fn a_documents_tenant_is_its_organization_else_its_user_else_the_app() {
        let (org, user) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(Tenant::owner(Some(org), Some(user)).as_str(), "org-00000000000000000000000000000001");
        assert_eq!(Tenant::owner(None, Some(user)), Tenant::user(user));
        assert_eq!(Tenant::owner(None, None).as_str(), "app");
    }
}
