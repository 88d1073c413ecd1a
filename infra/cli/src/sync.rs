//! `sluice sync`: a sync source's run in the foreground.

use std::process::ExitCode;
use uuid::Uuid;

/// The deployment's configuration as an operator's shell has it: the key from
/// `SLUICE_KMS_KEY_ID` (else the local stack's alias), the parse and ingest queues from
/// `SLUICE_PARSE_QUEUE_URL` and `SLUICE_INGEST_QUEUE_URL` (else the local stack's
/// `sluice-parse` and `sluice-ingest`).
pub async fn operator_config(sdk: &aws_config::SdkConfig) -> Result<sluice_domain::Config, String> {
    let key = match std::env::var("SLUICE_KMS_KEY_ID") {
        Ok(key) => key,
        Err(_) => {
            let alias = std::env::var("SLUICE_KMS_KEY_ALIAS").map_err(|_| "SLUICE_KMS_KEY_ID is not set".to_owned())?;
            let described = aws_sdk_kms::Client::new(sdk).describe_key().key_id(alias).send().await;
            described.ok().and_then(|d| d.key_metadata?.arn).ok_or("the key alias does not resolve")?
        }
    };
    let parse_queue = queue_url(sdk, "SLUICE_PARSE_QUEUE_URL", "sluice-parse").await;
    let ingest_queue = queue_url(sdk, "SLUICE_INGEST_QUEUE_URL", "sluice-ingest").await;
    sluice_domain::Config::from_lookup(|name| match name {
        "SLUICE_KMS_KEY_ID" => Some(key.clone()),
        "SLUICE_PARSE_QUEUE_URL" => parse_queue.clone(),
        "SLUICE_INGEST_QUEUE_URL" => ingest_queue.clone(),
        other => std::env::var(other).ok(),
    })
    .map_err(|e| e.to_string())
}

/// What every operator command starts from: the deployment's configuration and its
/// database, or the error to print.
pub async fn operator(sdk: &aws_config::SdkConfig) -> Result<(sluice_domain::Config, sluice_store::Db), String> {
    let config = operator_config(sdk).await?;
    let db = sluice_store::Db::from_env(sdk, 2).await.map_err(|error| format!("database: {error}"))?;
    Ok((config, db))
}

/// What an operator command about one base starts from: the deployment's configuration,
/// its database and the base `kb_id`, or the error to print.
pub async fn operator_base(
    sdk: &aws_config::SdkConfig,
    kb_id: Uuid,
) -> Result<(sluice_domain::Config, sluice_store::Db, sluice_store::KnowledgeBase), String> {
    let (config, db) = operator(sdk).await?;
    match db.knowledge_base(kb_id, Uuid::nil()).await {
        Ok(Some(held)) => Ok((config, db, held.base)),
        Ok(None) => Err(format!("no knowledge base {kb_id}")),
        Err(error) => Err(format!("database: {error}")),
    }
}

/// A queue's URL from `variable`, else the URL of the queue `name`.
async fn queue_url(sdk: &aws_config::SdkConfig, variable: &str, name: &str) -> Option<String> {
    if let Ok(url) = std::env::var(variable) {
        return Some(url);
    }
    let sqs = aws_sdk_sqs::Client::new(sdk);
    sqs.get_queue_url().queue_name(name).send().await.ok().and_then(|o| o.queue_url)
}

/// `sluice sync SOURCE_ID`: see the command's description in `main.rs`.
pub async fn run(source_id: Uuid, confirm_removals: bool) -> ExitCode {
    let fail = |error: String| {
        eprintln!("{}", serde_json::json!({ "error": error }));
        ExitCode::FAILURE
    };
    let sdk = sluice_blob::sdk_config().await;
    let (config, db) = match operator(&sdk).await {
        Ok(operator) => operator,
        Err(error) => return fail(error),
    };
    let extractor = match sluice_isolate::Extractor::current_exe(config.parse_max_memory_bytes) {
        Ok(extractor) => extractor,
        Err(error) => return fail(format!("worker: {error}")),
    };
    let blob = sluice_blob::Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
    // An operator's run reads files in workers of this process.
    let state = sluice_parse::State::new(config, db.clone(), blob, sluice_extraction::Reader::Workers(extractor), &sdk);
    let run_id = match db.start_sync_run(source_id, "operator", confirm_removals).await {
        Ok(sluice_store::RunStart::Started { run_id, outbox_id }) => {
            // This process lists it: the outbox row is not for anyone else to send.
            if let Err(error) = db.mark_dispatched(outbox_id).await {
                return fail(format!("database: {error}"));
            }
            run_id
        }
        Ok(sluice_store::RunStart::AlreadyRunning(run_id)) => {
            return fail(format!("a run of this source is still going: {run_id}"));
        }
        Ok(sluice_store::RunStart::SourceGone) => return fail("no such sync source".to_owned()),
        Err(error) => return fail(format!("database: {error}")),
    };
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let (mut listed, mut skipped) = (0, 0);
    let job = sluice_store::SyncRunJob { run_id, step: 0 };
    let listing = sluice_parse::sync::list_pages(&state, job, None, |page_listed, page_skipped| {
        listed += page_listed;
        skipped += page_skipped;
        bar.set_message(format!("listing: {listed} files listed, {skipped} skipped"));
    })
    .await;
    if let Err(error) = listing {
        bar.abandon();
        return fail(format!("the listing stopped: {error}; the sweep goes on with it"));
    }
    loop {
        let run = match db.sync_run(run_id).await {
            Ok(Some(run)) => run,
            Ok(None) => return fail("the run is gone (its source was deleted)".to_owned()),
            Err(error) => return fail(format!("database: {error}")),
        };
        bar.set_message(format!(
            "{} listed, {} skipped, {} ingested, {} updated, {} failed, {} removed, {} pending",
            run.total, run.skipped, run.ingested, run.updated, run.failed, run.removed, run.pending
        ));
        if run.status != "running" {
            bar.finish();
            println!("{}", serde_json::to_value(&run).unwrap_or_default());
            return if run.status == "done" { ExitCode::SUCCESS } else { ExitCode::FAILURE };
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
