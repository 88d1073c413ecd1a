//! The local stack's AWS resources, created through the real SDK against the emulator.
//! Locally the bucket gets neither the bucket policy nor default encryption (the emulator
//! misjudges conditioned policies), so an object that comes back `aws:kms` with the
//! configured key proves Sluice's own request asked for it. Both live in `template.yaml`.

use aws_sdk_kms::types::KeyUsageType;

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
