//! A document of a collection whose parser is LlamaParse: the original is sent once with
//! the organization's key, the job polled for `SLUICE_PARSER_POLL_SECS`, and a job that
//! outlives that is polled again by a new parse job sent as many seconds later (the job's id
//! is on the row), never uploaded again. Sending a new job, rather than failing the delivery,
//! waits neither for the queue's visibility timeout (90 minutes on AWS) nor spends a receive
//! of its dead-letter count. A job still unfinished [`JOB_GIVE_UP`] after it started fails
//! the document.

use crate::{ParseError, State};
use sluice_domain::ingestion::IngestionConfig;
use sluice_embed::credentials::ApiKey;
use sluice_llamaparse::{JobStatus, LlamaError};
use sluice_store::Document;
use std::time::{Duration, Instant};

/// How long a job may run, over every delivery, before the document fails.
const JOB_GIVE_UP: Duration = Duration::from_secs(3600);
/// The first wait between two polls; it doubles up to [`MAX_POLL_WAIT`].
const FIRST_POLL_WAIT: Duration = Duration::from_millis(250);
const MAX_POLL_WAIT: Duration = Duration::from_secs(5);

/// What LlamaParse made of a document, or why it made nothing.
pub(crate) enum Outcome {
    Parsed {
        text: String,
        page_starts: Vec<(u32, usize)>,
        pages_billed: u32,
    },
    Failed {
        kind: &'static str,
        advice: String,
    },
    /// The job has not finished (or its result did not come): poll again later.
    Pending,
}

fn failed(error: &LlamaError) -> Outcome {
    Outcome::Failed { kind: error.kind(), advice: error.advice().to_owned() }
}

pub(crate) async fn parse(
    state: &State,
    document: &Document,
    ingestion: &IngestionConfig,
    bytes: bytes::Bytes,
) -> Result<Outcome, ParseError> {
    let Some(key) = key(state, document, ingestion).await? else {
        return Ok(Outcome::Failed {
            kind: "NoUsableCredential",
            advice: "the collection's LlamaParse key is gone or not one of your organization's; choose one \
                     (ingestion_config.llamaparse_secret_id), then retry the document"
                .to_owned(),
        });
    };
    let client = sluice_embed::http_client();
    let job = match &document.parser_job {
        Some((job, started)) => {
            if (time::OffsetDateTime::now_utc() - *started).unsigned_abs() > JOB_GIVE_UP {
                return Ok(Outcome::Failed {
                    kind: "ParserTimeout",
                    advice: "LlamaParse did not finish within an hour; retry the document later".to_owned(),
                });
            }
            job.clone()
        }
        None => {
            match sluice_llamaparse::upload(&client, &key, (&document.filename, bytes.to_vec()), ingestion.max_pages)
                .await
            {
                Ok(job) => {
                    state.db.set_parser_job(document.id, &job).await?;
                    job
                }
                Err(error) if error.is_transient() => return Err(ParseError::ParserUnavailable),
                Err(error) => return Ok(failed(&error)),
            }
        }
    };
    let deadline = Instant::now() + state.config.parser_poll_time_limit;
    let mut wait = FIRST_POLL_WAIT;
    loop {
        match sluice_llamaparse::status(&client, &key, &job).await {
            Ok(JobStatus::Success) => break,
            Ok(JobStatus::Failed) => return Ok(failed(&LlamaError::FileRefused)),
            Ok(JobStatus::Pending) => {}
            Err(error) if error.is_transient() => {}
            Err(error) => return Ok(failed(&error)),
        }
        // Out of this delivery's time: a later job polls the same one.
        if Instant::now() + wait >= deadline {
            tracing::info!(id = %document.id, job, "LlamaParse job still running; polled again later");
            return Ok(Outcome::Pending);
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_POLL_WAIT);
    }
    match sluice_llamaparse::result(&client, &key, &job).await {
        Ok(result) => {
            let (text, page_starts) = sluice_llamaparse::joined(&result.pages);
            Ok(Outcome::Parsed { text, page_starts, pages_billed: result.pages_billed })
        }
        Err(error) if error.is_transient() => Ok(Outcome::Pending),
        Err(error) => Ok(failed(&error)),
    }
}

/// The collection's LlamaParse key, opened; `None` when it cannot be used.
async fn key(state: &State, document: &Document, ingestion: &IngestionConfig) -> Result<Option<ApiKey>, ParseError> {
    let Some(secret_id) = ingestion.llamaparse_secret_id else { return Ok(None) };
    let (db, vault) = (&state.db, &state.vault);
    Ok(sluice_embed::credentials::open_api_key(db, vault, document.org_id, secret_id, Some("llamaparse")).await?)
}
