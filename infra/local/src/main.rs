//! `sluice-local`: prepares the local bucket and key, then serves the front door.

use std::sync::Arc;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    // The functions served here parse in workers that are this binary, as in Lambda.
    sluice_isolate::serve_if_worker();
    serve()
}

#[tokio::main]
async fn serve() -> Result<(), Error> {
    sluice_web::init_tracing();
    let sdk = sluice_blob::sdk_config().await;
    let s3 = sluice_blob::s3_client(&sdk);
    let kms = aws_sdk_kms::Client::new(&sdk);
    let bucket = std::env::var("SLUICE_BUCKET").map_err(|_| "SLUICE_BUCKET is missing")?;
    sluice_local::resources::ensure_bucket(&s3, &bucket).await?;
    let key = sluice_local::resources::configured_kms_key(&kms).await?;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    for spec in sluice_local::resources::QUEUES {
        let url = sluice_local::resources::ensure_queue(&sqs, spec).await?;
        tracing::info!(queue = spec.name, url, "queue ready");
    }
    // The functions read their key from SLUICE_KMS_KEY_ID, as they do in AWS.
    let config = sluice_domain::Config::from_lookup(|name| match name {
        "SLUICE_KMS_KEY_ID" => Some(key.clone()),
        other => std::env::var(other).ok(),
    })?;
    let database_url = std::env::var("DATABASE_URL").map_err(|_| "DATABASE_URL is missing")?;
    let db = sluice_store::Db::connect(&database_url, 16).await?;
    let blob = sluice_blob::Blob::new(s3, bucket.clone(), key.clone());
    let extractor = sluice_isolate::Extractor::current_exe(config.parse_max_memory_bytes)?;
    let door = sluice_local::door::Door {
        body_cap_bytes: config.request_body_cap_bytes(),
        upload: sluice_upload::AppState::new(config, db, blob, extractor),
        jwt_secret: sluice_local::jwt::local_secret(),
    };
    let addr = std::env::var("SLUICE_API_ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    tracing::info!(addr, bucket, kms_key = key, "sluice-local is serving");
    sluice_local::door::serve(listener, Arc::new(door)).await?;
    Ok(())
}
