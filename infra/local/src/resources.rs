//! The local stack's AWS resources, created through the real SDK against the emulator.
//! Locally the bucket gets neither the bucket policy nor default encryption (the emulator
//! misjudges conditioned policies), so an object that comes back `aws:kms` with the
//! configured key proves Sluice's own request asked for it. Both live in `template.yaml`.

use aws_sdk_kms::types::KeyUsageType;
use aws_sdk_sqs::types::QueueAttributeName;

#[derive(Debug, thiserror::Error)]
#[error("could not prepare local resource {what}: {detail}")]
pub struct ResourceError {
    what: &'static str,
    detail: String,
}

fn failed(what: &'static str, error: impl std::fmt::Debug) -> ResourceError {
    ResourceError { what, detail: format!("{error:?}") }
}

/// Creates the bucket if it does not exist.
pub async fn ensure_bucket(s3: &aws_sdk_s3::Client, bucket: &str) -> Result<(), ResourceError> {
    if s3.head_bucket().bucket(bucket).send().await.is_ok() {
        return Ok(());
    }
    s3.create_bucket().bucket(bucket).send().await.map_err(|e| failed("bucket", e))?;
    Ok(())
}

/// Puts `rules` as the bucket's CORS configuration (replacing any).
pub async fn put_bucket_cors(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    rules: &[crate::cors::BucketCorsRule],
) -> Result<(), ResourceError> {
    use aws_sdk_s3::types::{CorsConfiguration, CorsRule};
    let mut built = Vec::new();
    for rule in rules {
        let cors = CorsRule::builder()
            .set_allowed_methods(Some(rule.allowed_methods.clone()))
            .set_allowed_origins(Some(rule.allowed_origins.clone()))
            .set_allowed_headers(Some(rule.allowed_headers.clone()))
            .set_expose_headers(Some(rule.exposed_headers.clone()))
            .set_max_age_seconds(rule.max_age_seconds)
            .build()
            .map_err(|e| failed("bucket cors", e))?;
        built.push(cors);
    }
    let configuration =
        CorsConfiguration::builder().set_cors_rules(Some(built)).build().map_err(|e| failed("bucket cors", e))?;
    s3.put_bucket_cors()
        .bucket(bucket)
        .cors_configuration(configuration)
        .send()
        .await
        .map_err(|e| failed("bucket cors", e))?;
    Ok(())
}

/// The ARN of the key behind `alias`, creating key and alias on first use.
pub async fn ensure_kms_key(kms: &aws_sdk_kms::Client, alias: &str) -> Result<String, ResourceError> {
    if let Ok(found) = kms.describe_key().key_id(alias).send().await
        && let Some(arn) = found.key_metadata().and_then(|m| m.arn())
    {
        return Ok(arn.to_owned());
    }
    let created = kms
        .create_key()
        .description("Sluice local stack: encrypts stored files and credentials")
        .key_usage(KeyUsageType::EncryptDecrypt)
        .send()
        .await
        .map_err(|e| failed("kms key", e))?;
    let metadata = created.key_metadata().ok_or_else(|| failed("kms key", "no metadata"))?;
    kms.create_alias()
        .alias_name(alias)
        .target_key_id(metadata.key_id())
        .send()
        .await
        .map_err(|e| failed("kms alias", e))?;
    metadata.arn().map(str::to_owned).ok_or_else(|| failed("kms key", "no arn"))
}

/// The key the functions are configured with: `SLUICE_KMS_KEY_ID` when set, else the
/// local alias's key (created if missing).
pub async fn configured_kms_key(kms: &aws_sdk_kms::Client) -> Result<String, ResourceError> {
    if let Ok(key) = std::env::var("SLUICE_KMS_KEY_ID")
        && !key.is_empty()
    {
        return Ok(key);
    }
    let alias = std::env::var("SLUICE_KMS_KEY_ALIAS").unwrap_or_else(|_| "alias/sluice-local".to_owned());
    ensure_kms_key(kms, &alias).await
}

/// A work queue and its dead-letter queue, as `template.yaml` declares them.
#[derive(Debug, Clone, Copy)]
pub struct QueueSpec {
    pub name: &'static str,
    /// Above the consuming function's timeout, so a message is not redelivered mid-run.
    pub visibility_timeout_secs: u32,
    /// Deliveries before a message moves to the dead-letter queue.
    pub max_receive_count: u32,
}

/// The queues of the pipeline: S3 events to `parse`, then `ingest`, and `teardown`.
pub const QUEUES: &[QueueSpec] = &[
    QueueSpec { name: "sluice-parse", visibility_timeout_secs: 180, max_receive_count: 5 },
    QueueSpec { name: "sluice-ingest", visibility_timeout_secs: 900, max_receive_count: 5 },
    QueueSpec { name: "sluice-teardown", visibility_timeout_secs: 300, max_receive_count: 5 },
];

/// Creates `spec`'s queue and its `-dlq`, with the redrive policy; returns the queue URL.
pub async fn ensure_queue(sqs: &aws_sdk_sqs::Client, spec: &QueueSpec) -> Result<String, ResourceError> {
    // Dead letters are kept 14 days, longer than the source's 4, so none expire first.
    let dlq = sqs
        .create_queue()
        .queue_name(format!("{}-dlq", spec.name))
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .send()
        .await
        .map_err(|e| failed("dead-letter queue", e))?;
    let dlq_url = dlq.queue_url().ok_or_else(|| failed("dead-letter queue", "no url"))?;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| failed("dead-letter queue", e))?
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| failed("dead-letter queue", "no arn"))?;
    let redrive = format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"{}"}}"#, spec.max_receive_count);
    // The test stack shortens redelivery so that a poison message reaches its dead-letter
    // queue within seconds; every other setting is the deployed one.
    let visibility = std::env::var("SLUICE_LOCAL_VISIBILITY_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(spec.visibility_timeout_secs);
    let queue = sqs
        .create_queue()
        .queue_name(spec.name)
        .attributes(QueueAttributeName::VisibilityTimeout, visibility.to_string())
        .attributes(QueueAttributeName::MessageRetentionPeriod, "345600")
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await
        .map_err(|e| failed("queue", e))?;
    queue.queue_url().map(str::to_owned).ok_or_else(|| failed("queue", "no url"))
}

/// The ARN of the queue at `url`.
pub async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<String, ResourceError> {
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| failed("queue arn", e))?;
    attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| failed("queue arn", "none"))
}

/// S3 notifies the queue `queue_arn` of every object created or removed under `prefix`,
/// as `template.yaml` configures the bucket.
pub async fn ensure_upload_notifications(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    queue_arn: &str,
    prefixes: &[&str],
) -> Result<(), ResourceError> {
    use aws_sdk_s3::types::{
        Event, FilterRule, FilterRuleName, NotificationConfiguration, NotificationConfigurationFilter,
        QueueConfiguration, S3KeyFilter,
    };
    let mut queues = Vec::new();
    for (i, prefix) in prefixes.iter().enumerate() {
        let rule = FilterRule::builder().name(FilterRuleName::Prefix).value(*prefix).build();
        let queue = QueueConfiguration::builder()
            .id(format!("sluice-uploads-to-parse-{i}"))
            .queue_arn(queue_arn)
            .events(Event::from("s3:ObjectCreated:*"))
            .events(Event::from("s3:ObjectRemoved:*"))
            .filter(
                NotificationConfigurationFilter::builder()
                    .key(S3KeyFilter::builder().filter_rules(rule).build())
                    .build(),
            )
            .build()
            .map_err(|e| failed("bucket notification", e))?;
        queues.push(queue);
    }
    s3.put_bucket_notification_configuration()
        .bucket(bucket)
        .notification_configuration(NotificationConfiguration::builder().set_queue_configurations(Some(queues)).build())
        .send()
        .await
        .map_err(|e| failed("bucket notification", e))?;
    Ok(())
}

/// What the template creates around the functions, as the local stack has it.
#[derive(Debug, Clone)]
pub struct Provisioned {
    pub bucket: String,
    /// The ARN of the deployment's key.
    pub key: String,
    pub parse_queue_url: String,
    pub parse_queue_arn: String,
    pub ingest_queue_url: String,
    pub teardown_queue_url: String,
}

/// Creates what is missing of the bucket (`SLUICE_BUCKET`, with the template's CORS rules
/// and its notifications to the parse queue), the key and the queues.
pub async fn provision(
    s3: &aws_sdk_s3::Client,
    kms: &aws_sdk_kms::Client,
    sqs: &aws_sdk_sqs::Client,
) -> Result<Provisioned, ResourceError> {
    let bucket = std::env::var("SLUICE_BUCKET").map_err(|_| failed("bucket", "SLUICE_BUCKET is missing"))?;
    ensure_bucket(s3, &bucket).await?;
    // Browsers PUT presigned uploads and follow download links to the bucket under the
    // template's own CORS rules.
    let origins = crate::cors::allowed_origins();
    put_bucket_cors(s3, &bucket, &crate::cors::bucket_rules(&origins)).await?;
    let key = configured_kms_key(kms).await?;
    let mut urls = std::collections::HashMap::new();
    for spec in QUEUES {
        let url = ensure_queue(sqs, spec).await?;
        tracing::info!(queue = spec.name, url, "queue ready");
        urls.insert(spec.name, url);
    }
    let mut url_of = |name: &str| urls.remove(name).ok_or_else(|| failed("queue", format!("{name} is missing")));
    let (parse_queue_url, ingest_queue_url, teardown_queue_url) =
        (url_of("sluice-parse")?, url_of("sluice-ingest")?, url_of("sluice-teardown")?);
    let parse_queue_arn = queue_arn(sqs, &parse_queue_url).await?;
    ensure_upload_notifications(
        s3,
        &bucket,
        &parse_queue_arn,
        &[sluice_domain::CHAT_UPLOAD_PREFIX, sluice_store::DOCUMENT_UPLOAD_PREFIX],
    )
    .await?;
    Ok(Provisioned { bucket, key, parse_queue_url, parse_queue_arn, ingest_queue_url, teardown_queue_url })
}
