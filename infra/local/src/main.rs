//! `sluice-local`: prepares the local bucket and key, then serves the front door.

use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The parse function's SQS batch size, as `template.yaml` sets it.
const PARSE_BATCH_SIZE: i32 = 5;
/// The parse function's timeout, as `template.yaml` sets it.
const PARSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);
/// The ingest function's SQS batch size, as `template.yaml` sets it.
const INGEST_BATCH_SIZE: i32 = 1;
/// The teardown function's SQS batch size, as `template.yaml` sets it.
const TEARDOWN_BATCH_SIZE: i32 = 5;

fn main() -> Result<(), Error> {
    // The functions served here parse in workers that are this binary, as in Lambda.
    sluice_isolate::serve_if_worker();
    serve()
}

#[tokio::main]
async fn serve() -> Result<(), Error> {
    sluice_web::init_tracing();
    let addr = std::env::var("SLUICE_API_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let addr = sluice_local::door::loopback_only(&addr)?;
    // The upload and parse functions refuse to start without PDFium and OCR; so does their host.
    sluice_formats::pdf::ensure_available()?;
    sluice_ocr::ensure_installed()?;
    let sdk = sluice_blob::sdk_config().await;
    let s3 = sluice_blob::s3_client(&sdk);
    let kms = aws_sdk_kms::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let sluice_local::resources::Provisioned {
        bucket,
        key,
        parse_queue_url,
        parse_queue_arn,
        ingest_queue_url,
        teardown_queue_url,
    } = sluice_local::resources::provision(&s3, &kms, &sqs).await?;
    // The functions read their key from SLUICE_KMS_KEY_ID, as they do in AWS.
    // The queues the functions send jobs to, as template.yaml passes them.
    let config = sluice_domain::Config::from_lookup(|name| match name {
        "SLUICE_KMS_KEY_ID" => Some(key.clone()),
        "SLUICE_PARSE_QUEUE_URL" => Some(parse_queue_url.clone()),
        "SLUICE_INGEST_QUEUE_URL" => Some(ingest_queue_url.clone()),
        "SLUICE_TEARDOWN_QUEUE_URL" => Some(teardown_queue_url.clone()),
        other => std::env::var(other).ok(),
    })?;
    // The deploy's migrate step, then the functions' own login, as in AWS.
    // The local embedding service is registered deployment-wide by the same step, as the
    // in-process model is in AWS.
    let local_embeddings = std::env::var("SLUICE_LOCAL_EMBEDDINGS_URL").ok();
    let migrated = sluice_migrate::migrate_from_env(&sdk, local_embeddings.as_deref(), None).await?;
    tracing::info!(applied = ?migrated.applied, schema_version = migrated.schema_version, "migrated");
    // Each function with the login the template gives it: ingest, knowledge and teardown the
    // vector login, the others the application login.
    let db = sluice_store::Db::from_env(&sdk, 16).await?;
    let vector_db = sluice_store::Db::from_env_secret(&sdk, 16, sluice_store::VECTOR_SECRET_VARIABLE).await?;
    let blob = sluice_blob::Blob::new(s3, bucket.clone(), key.clone());
    // The extract function per tenant when SLUICE_EXTRACT_FUNCTION names it (this runner then
    // serves Lambda's Invoke API for it), else parse workers of this binary.
    let reader = sluice_extraction::Reader::from_env(&sdk, blob.clone(), config.parse_max_memory_bytes)?;
    let parse = Arc::new(sluice_parse::State::new(config.clone(), db.clone(), blob.clone(), reader.clone(), &sdk));
    let source = sluice_local::pollers::Source {
        queue_url: parse_queue_url,
        queue_arn: parse_queue_arn,
        batch_size: PARSE_BATCH_SIZE,
        region: sdk.region().map(|r| r.to_string()).unwrap_or_else(|| "us-east-1".to_owned()),
    };
    tokio::spawn(sluice_local::pollers::poll(sqs.clone(), source, move |event| {
        let parse = parse.clone();
        // The template's timeout for the parse function.
        let deadline = std::time::Instant::now() + PARSE_TIMEOUT;
        async move { sluice_parse::handle(&parse, event, deadline).await }
    }));
    let ingest =
        Arc::new(sluice_ingest::State::new(config.clone(), vector_db.clone(), blob.clone(), kms.clone(), sqs.clone()));
    let ingest_source = sluice_local::pollers::Source {
        queue_arn: sluice_local::resources::queue_arn(&sqs, &ingest_queue_url).await?,
        queue_url: ingest_queue_url,
        batch_size: INGEST_BATCH_SIZE,
        region: sdk.region().map(|r| r.to_string()).unwrap_or_else(|| "us-east-1".to_owned()),
    };
    // `SLUICE_LOCAL_INGEST_CONCURRENCY` ingest invocations at once (1 unless set; the
    // template lets SQS run up to 4): the ingestion benchmark runs 1, 2 and 4.
    let ingest_concurrency = std::env::var("SLUICE_LOCAL_INGEST_CONCURRENCY")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, 16);
    for _ in 0..ingest_concurrency {
        let ingest = ingest.clone();
        tokio::spawn(sluice_local::pollers::poll(sqs.clone(), ingest_source.clone(), move |event| {
            let ingest = ingest.clone();
            async move { sluice_ingest::handle(&ingest, event).await }
        }));
    }
    let teardown = Arc::new(sluice_teardown::State::new(config.clone(), vector_db.clone(), blob.clone()));
    let teardown_source = sluice_local::pollers::Source {
        queue_arn: sluice_local::resources::queue_arn(&sqs, &teardown_queue_url).await?,
        queue_url: teardown_queue_url,
        batch_size: TEARDOWN_BATCH_SIZE,
        region: sdk.region().map(|r| r.to_string()).unwrap_or_else(|| "us-east-1".to_owned()),
    };
    tokio::spawn(sluice_local::pollers::poll(sqs.clone(), teardown_source, move |event| {
        let teardown = teardown.clone();
        async move { sluice_teardown::handle(&teardown, event).await }
    }));
    // EventBridge's schedule, locally: the sweep runs every SLUICE_SWEEP_INTERVAL_SECS.
    let sweep = sluice_sweep::State::new(config.clone(), db.clone(), blob.clone(), sqs.clone());
    let every = std::env::var("SLUICE_SWEEP_INTERVAL_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    tokio::spawn(async move {
        let mut timer = tokio::time::interval(std::time::Duration::from_secs(every));
        loop {
            timer.tick().await;
            if sluice_local::faults::active(sluice_local::faults::SWEEP_HELD) {
                continue;
            }
            if let Err(error) = sluice_sweep::handle(&sweep, time::OffsetDateTime::now_utc()).await {
                tracing::warn!(error = %error, "sweep failed; the next tick retries");
            }
        }
    });
    let knowledge = sluice_knowledge::State::new(config.clone(), vector_db, &sdk);
    // The search function's own state, over its read-only login (as the template gives it).
    let search_db = sluice_store::Db::from_env_secret(&sdk, 16, sluice_store::SEARCH_SECRET_VARIABLE).await?;
    let search = sluice_search::State::new(config.clone(), search_db, &sdk);
    let issuer = sluice_local::jwt::LocalIssuer::from_env()?;
    let door = sluice_local::door::Door {
        body_cap_bytes: config.request_body_cap_bytes(),
        knowledge,
        search,
        upload: sluice_upload::AppState::new(config, db, blob, reader, sqs),
        authorizer: issuer.authorizer(),
        issuer,
        cors: sluice_local::cors::api_cors(&sluice_local::cors::allowed_origins()),
    };
    // Lambda's Invoke API for the extract function, which upload and parse call.
    if let (Ok(name), Ok(lambda_addr)) = (std::env::var("SLUICE_EXTRACT_FUNCTION"), std::env::var("SLUICE_LAMBDA_ADDR"))
    {
        let lambda_addr = sluice_local::door::loopback_only(&lambda_addr)?;
        let binary = match std::env::var_os("SLUICE_EXTRACT_BINARY") {
            Some(binary) => std::path::PathBuf::from(binary),
            None => std::env::current_exe()?.with_file_name("sluice-extract"),
        };
        let function = Arc::new(sluice_local::lambda::ExtractFunction::new(&name, binary, lambda_addr.port()));
        let listener = tokio::net::TcpListener::bind(lambda_addr).await?;
        tracing::info!(%lambda_addr, function = name, "serving Lambda's Invoke API");
        tokio::spawn(sluice_local::lambda::serve(listener, function));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, bucket, kms_key = key, "sluice-local is serving");
    sluice_local::door::serve(listener, Arc::new(door)).await?;
    Ok(())
}
