//! Object storage: S3 with SSE-KMS asked for on every write, and the AWS SDK configuration
//! every function shares. The code reaches AWS only through the SDK's standard settings
//! (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials), so the emulator and AWS take one path.

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use std::time::Duration;

/// An S3 failure. The service's own message stays in the log; callers see the kind.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("object storage request {operation} failed")]
    Request { operation: &'static str, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("presigning failed: {0}")]
    Presign(String),
    #[error("the object is larger than {max_bytes} bytes")]
    TooLarge { max_bytes: u64 },
    #[error("no such object")]
    NotFound,
}

impl BlobError {
    fn request(operation: &'static str, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Request { operation, source: Box::new(source) }
    }
}

/// Loads the SDK configuration from the standard environment, with a rustls (ring) HTTP
/// client: one TLS stack, built quickly.
pub async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(http_client()).load().await
}

/// The HTTP client every SDK client uses: hyper with rustls over ring.
pub fn http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::Ring)).build_https()
}

/// An S3 client for a fixed endpoint with static credentials, for tools and tests that
/// must not read the environment.
pub fn static_s3_client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_s3::config::Credentials::new("local", "local", None, None, "static"))
        .force_path_style(true)
        .http_client(http_client())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The shared configuration for a fixed endpoint with static credentials, for tools and
/// tests that must not read the environment.
pub fn static_sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    let credentials = aws_sdk_s3::config::Credentials::new("local", "local", None, None, "static");
    aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_s3::config::SharedCredentialsProvider::new(credentials))
        .http_client(http_client())
        .build()
}

/// An SQS client for a fixed endpoint with static credentials, for tools and tests that
/// must not read the environment.
pub fn static_sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("local", "local", None, None, "static"))
        .http_client(http_client())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

/// An S3 client from the shared configuration. `SLUICE_S3_FORCE_PATH_STYLE=true` selects
/// path-style addressing, which emulators on loopback need and AWS also serves.
pub fn s3_client(config: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let path_style = std::env::var("SLUICE_S3_FORCE_PATH_STYLE").is_ok_and(|v| v == "true" || v == "1");
    let s3_config = aws_sdk_s3::config::Builder::from(config).force_path_style(path_style).build();
    aws_sdk_s3::Client::from_conf(s3_config)
}

/// A response body read whole, or `None` as soon as it passes `max_bytes` (what is past
/// the cap is never held).
pub async fn read_within(
    mut body: ByteStream,
    max_bytes: u64,
) -> Result<Option<bytes::Bytes>, aws_sdk_s3::primitives::ByteStreamError> {
    let mut out = bytes::BytesMut::new();
    while let Some(chunk) = body.try_next().await? {
        if (out.len() + chunk.len()) as u64 > max_bytes {
            return Ok(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Some(out.freeze()))
}

/// The bucket, and the KMS key every write names.
#[derive(Debug, Clone)]
pub struct Blob {
    s3: aws_sdk_s3::Client,
    bucket: String,
    kms_key_id: String,
}

/// What `HeadObject` says about a stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: i64,
    pub etag: Option<String>,
    pub server_side_encryption: Option<String>,
    pub kms_key_id: Option<String>,
}

/// An object's bytes and the ETag of the version they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: bytes::Bytes,
    pub etag: Option<String>,
}

/// One page of a listing: keys in order, each with when it was written (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    pub objects: Vec<(String, i64)>,
    /// More keys follow the last one.
    pub truncated: bool,
}

fn unquoted(etag: Option<&str>) -> Option<String> {
    etag.map(|e| e.trim_matches('"').to_owned())
}

impl Blob {
    pub fn new(s3: aws_sdk_s3::Client, bucket: impl Into<String>, kms_key_id: impl Into<String>) -> Self {
        Self { s3, bucket: bucket.into(), kms_key_id: kms_key_id.into() }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn kms_key_id(&self) -> &str {
        &self.kms_key_id
    }

    pub fn s3(&self) -> &aws_sdk_s3::Client {
        &self.s3
    }

    /// Writes an object under SSE-KMS with the configured key and a bucket key. The
    /// request asks for it on every write rather than trusting the bucket default.
    pub async fn put_encrypted(&self, key: &str, body: bytes::Bytes, content_type: &str) -> Result<(), BlobError> {
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(body))
            .server_side_encryption(ServerSideEncryption::AwsKms)
            .ssekms_key_id(&self.kms_key_id)
            .bucket_key_enabled(true)
            .send()
            .await
            .map_err(|e| BlobError::request("PutObject", e))?;
        Ok(())
    }

    /// An object's bytes, refused past `max_bytes` (never read whole when too large).
    pub async fn get(&self, key: &str, max_bytes: u64) -> Result<bytes::Bytes, BlobError> {
        Ok(self.fetch(key, max_bytes).await?.bytes)
    }

    /// An object's bytes with their ETag, refused past `max_bytes`.
    pub async fn fetch(&self, key: &str, max_bytes: u64) -> Result<Fetched, BlobError> {
        let object = self.s3.get_object().bucket(&self.bucket).key(key).send().await.map_err(|e| {
            if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
                BlobError::NotFound
            } else {
                BlobError::request("GetObject", e)
            }
        })?;
        let etag = unquoted(object.e_tag());
        if object.content_length().is_some_and(|len| len as u64 > max_bytes) {
            return Err(BlobError::TooLarge { max_bytes });
        }
        let bytes = read_within(object.body, max_bytes)
            .await
            .map_err(|e| BlobError::request("GetObject", e))?
            .ok_or(BlobError::TooLarge { max_bytes })?;
        Ok(Fetched { bytes, etag })
    }

    /// Deletes an object; deleting one that is already gone succeeds.
    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        self.s3
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| BlobError::request("DeleteObject", e))?;
        Ok(())
    }

    /// Up to `max_keys` keys under `prefix` that sort after `start_after`.
    pub async fn list(&self, prefix: &str, start_after: Option<&str>, max_keys: i32) -> Result<Listing, BlobError> {
        let page = self
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_start_after(start_after.map(str::to_owned))
            .max_keys(max_keys)
            .send()
            .await
            .map_err(|e| BlobError::request("ListObjectsV2", e))?;
        let objects = page
            .contents()
            .iter()
            .filter_map(|o| Some((o.key()?.to_owned(), o.last_modified().map_or(0, |t| t.secs()))))
            .collect();
        Ok(Listing { objects, truncated: page.is_truncated().unwrap_or(false) })
    }

    /// Deletes up to 1,000 objects in one request; keys already gone count as deleted. Any
    /// key S3 could not delete fails the whole call (the caller runs it again).
    pub async fn delete_many(&self, keys: &[String]) -> Result<(), BlobError> {
        use aws_sdk_s3::types::{Delete, ObjectIdentifier};
        if keys.is_empty() {
            return Ok(());
        }
        let objects = keys
            .iter()
            .map(|key| ObjectIdentifier::builder().key(key).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BlobError::request("DeleteObjects", e))?;
        let delete = Delete::builder()
            .set_objects(Some(objects))
            .quiet(true)
            .build()
            .map_err(|e| BlobError::request("DeleteObjects", e))?;
        let answer = self
            .s3
            .delete_objects()
            .bucket(&self.bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| BlobError::request("DeleteObjects", e))?;
        match answer.errors().first() {
            None => Ok(()),
            Some(error) => Err(BlobError::Request {
                operation: "DeleteObjects",
                source: format!("{} keys not deleted (first: {:?})", answer.errors().len(), error.code()).into(),
            }),
        }
    }

    /// What S3 says of an object; `BlobError::NotFound` when there is none.
    pub async fn head(&self, key: &str) -> Result<ObjectInfo, BlobError> {
        let head = self.s3.head_object().bucket(&self.bucket).key(key).send().await.map_err(|e| {
            if e.as_service_error().is_some_and(|s| s.is_not_found()) {
                BlobError::NotFound
            } else {
                BlobError::request("HeadObject", e)
            }
        })?;
        Ok(ObjectInfo {
            size: head.content_length().unwrap_or_default(),
            etag: unquoted(head.e_tag()),
            server_side_encryption: head.server_side_encryption().map(|s| s.as_str().to_owned()),
            kms_key_id: head.ssekms_key_id().map(str::to_owned),
        })
    }

    /// A short-lived presigned GET that downloads the object under its original name.
    pub async fn presign_download(&self, key: &str, filename: &str, ttl: Duration) -> Result<String, BlobError> {
        let config = PresigningConfig::expires_in(ttl).map_err(|e| BlobError::Presign(e.to_string()))?;
        let request = self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .response_content_disposition(content_disposition(filename))
            .presigned(config)
            .await
            .map_err(|e| BlobError::Presign(e.to_string()))?;
        Ok(request.uri().to_owned())
    }
}

/// A presigned PUT and the headers the client must send with it, exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedUpload {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

impl Blob {
    /// A presigned PUT for exactly `size` bytes of `content_type`, encrypted with the
    /// configured key: the length, the type and both SSE-KMS headers are signed, so S3
    /// refuses any other body size or encryption.
    pub async fn presign_upload(
        &self,
        key: &str,
        size: u64,
        content_type: &str,
        ttl: Duration,
    ) -> Result<PresignedUpload, BlobError> {
        let length = i64::try_from(size).map_err(|e| BlobError::Presign(e.to_string()))?;
        self.presign_put(key, Some(length), content_type, ttl).await
    }

    /// A presigned PUT of one JSON object of any length, encrypted with the configured key and
    /// written once: where the extract function writes an answer too large to return.
    pub async fn presign_json_upload(&self, key: &str, ttl: Duration) -> Result<PresignedUpload, BlobError> {
        self.presign_put(key, None, "application/json", ttl).await
    }

    async fn presign_put(
        &self,
        key: &str,
        length: Option<i64>,
        content_type: &str,
        ttl: Duration,
    ) -> Result<PresignedUpload, BlobError> {
        let config = PresigningConfig::expires_in(ttl).map_err(|e| BlobError::Presign(e.to_string()))?;
        let request = self
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .set_content_length(length)
            .content_type(content_type)
            .server_side_encryption(ServerSideEncryption::AwsKms)
            .ssekms_key_id(&self.kms_key_id)
            .bucket_key_enabled(true)
            // Written once: a URL used again (within its life) cannot swap bytes already judged.
            .if_none_match("*")
            .presigned(config)
            .await
            .map_err(|e| BlobError::Presign(e.to_string()))?;
        let headers = request.headers().map(|(name, value)| (name.to_owned(), value.to_owned())).collect();
        Ok(PresignedUpload { url: request.uri().to_owned(), headers })
    }
}

/// `attachment` with an ASCII fallback name and the RFC 5987 UTF-8 name.
fn content_disposition(filename: &str) -> String {
    let ascii: String =
        filename.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' { c } else { '_' }).collect();
    let mut encoded = String::new();
    for byte in filename.bytes() {
        if byte.is_ascii_alphanumeric() || b".-_~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_presigned_upload_signs_the_length_the_type_the_encryption_and_one_write() {
        let blob = Blob::new(static_s3_client("http://127.0.0.1:9"), "bucket", "arn:aws:kms:us-east-1:1:key/k");
        let upload = blob
            .presign_upload("uploads/u/f_a.pdf", 9_000_000, "application/pdf", Duration::from_secs(900))
            .await
            .expect("presigned");
        let signed = upload.url.split(['?', '&']).find_map(|p| p.strip_prefix("X-Amz-SignedHeaders=")).expect("signed");
        let signed: Vec<&str> = signed.split("%3B").collect();
        for header in [
            "content-length",
            "content-type",
            "host",
            "x-amz-server-side-encryption",
            "x-amz-server-side-encryption-aws-kms-key-id",
            "if-none-match",
        ] {
            assert!(signed.contains(&header), "{header} is not signed: {signed:?}");
        }
        let sent =
            |name: &str| upload.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
        assert_eq!(sent("content-length"), Some("9000000"));
        assert_eq!(sent("x-amz-server-side-encryption"), Some("aws:kms"));
        // Written once: the key cannot be overwritten through the same URL.
        assert_eq!(sent("if-none-match"), Some("*"));
        assert!(upload.url.contains("X-Amz-Expires=900"));
    }

    #[test]
    fn content_disposition_is_safe_for_any_name() {
        assert_eq!(
            content_disposition("raport zażółć.pdf"),
            "attachment; filename=\"raport_za____.pdf\"; filename*=UTF-8''raport%20za%C5%BC%C3%B3%C5%82%C4%87.pdf"
        );
        assert!(!content_disposition("a\"b\r\n.txt").contains('\n'));
    }
}
