//! The remote side of an S3 sync source: the client it reads its bucket through, built
//! from what the source names and nothing else — an IAM role assumed with the tenant's
//! external id, or an `aws_credentials` vault secret opened for the source's own
//! organization. There is no fallback to the deployment's own identity: a source whose
//! credential is gone cannot run, and says which credential it was.

use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use serde::Deserialize;
use sluice_domain::sync::ListedObject;
use sluice_store::{Db, SyncSource};
use sluice_vault::{Binding, Sealed, Vault, VaultError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// How long an assumed role's session lasts: one job's work (a page run or one file).
const SESSION_SECONDS: i32 = 900;

/// Why a source's bucket could not be read. Each says what the reader can do; the SDK's
/// own text (which names hosts and requests) goes only to the log.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the source's credential {0} was deleted; name another credential for the source")]
    CredentialDeleted(String),
    #[error("the source's credential {0} is not an access key pair that opens for its organization")]
    CredentialUnusable(String),
    #[error(
        "the role {role} could not be assumed; its trust policy must allow this deployment with external id {external_id}"
    )]
    AssumeRoleRefused { role: String, external_id: String },
    #[error(
        "the bucket {bucket} refused the source's credential ({operation}); grant it s3:ListBucket and s3:GetObject on the prefix"
    )]
    AccessDenied { bucket: String, operation: &'static str },
    #[error("the bucket {0} does not exist")]
    NoSuchBucket(String),
    /// A redirect or a malformed request: the source names the wrong region (or the
    /// request can never succeed as made). Asking again changes nothing.
    #[error(
        "the bucket {bucket} answered {status} to {operation}; set the source's config.region to the bucket's region"
    )]
    WrongRegion { bucket: String, operation: &'static str, status: u16 },
    #[error("the object is gone")]
    NotFound,
    #[error("the object is larger than {0} bytes")]
    TooLarge(u64),
    /// Network, throttling, a service error: worth a retry.
    #[error("{operation} failed; retried later")]
    Unavailable { operation: &'static str },
    #[error(transparent)]
    Vault(VaultError),
    #[error(transparent)]
    Store(#[from] sluice_store::StoreError),
}

impl SourceError {
    /// A failure that may pass by itself (retry), as opposed to one the source's owner fixes.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Store(_) | Self::Vault(VaultError::KeyService { .. }))
    }

    /// The type a stored message names.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::CredentialDeleted(_) => "CredentialDeleted",
            Self::CredentialUnusable(_) | Self::Vault(_) => "CredentialUnusable",
            Self::AssumeRoleRefused { .. } => "AssumeRoleRefused",
            Self::AccessDenied { .. } => "AccessDenied",
            Self::NoSuchBucket(_) => "NoSuchBucket",
            Self::WrongRegion { .. } => "WrongRegion",
            Self::NotFound => "ObjectGone",
            Self::TooLarge(_) => "TooLarge",
            Self::Unavailable { .. } | Self::Store(_) => "ServiceUnavailable",
        }
    }

    /// `stage: Type: advice`, as a row or a run log stores it.
    pub fn stored(&self, stage: &str) -> String {
        format!("{stage}: {}: {self}", self.type_name())
    }
}

/// What an S3 refusal means for a source: only a failure that may pass by itself (a
/// timeout, throttling, a 5xx) is retried; the rest is the source owner's to fix.
fn classify(bucket: &str, operation: &'static str, code: Option<&str>, status: Option<u16>) -> SourceError {
    match (code, status) {
        (Some("NoSuchBucket"), _) => SourceError::NoSuchBucket(bucket.to_owned()),
        (Some("NoSuchKey"), _) | (_, Some(404)) => SourceError::NotFound,
        (Some("AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "ExpiredToken"), _)
        | (_, Some(401 | 403)) => SourceError::AccessDenied { bucket: bucket.to_owned(), operation },
        // A redirect (the bucket is in another region) or a 400 is permanent: a retry asks
        // the same and gets the same.
        (_, Some(status @ 300..=400)) => SourceError::WrongRegion { bucket: bucket.to_owned(), operation, status },
        _ => SourceError::Unavailable { operation },
    }
}

/// The access key pair an `aws_credentials` secret holds (sealed as this JSON).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for AccessKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKeys").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

impl AccessKeys {
    /// Reads a pair as a caller sends it; `None` when it is not one.
    pub fn from_json(value: &serde_json::Value) -> Option<Self> {
        let keys: Self = serde_json::from_value(value.clone()).ok()?;
        let printable = |s: &str| !s.is_empty() && s.len() <= 256 && s.chars().all(|c| c.is_ascii_graphic());
        (printable(&keys.access_key_id) && printable(&keys.secret_access_key)).then_some(keys)
    }
}

/// An assumed role's session is reused while it has at least this long left, so a run's
/// thousands of downloads assume the role once per warm function, not once a file.
const SESSION_REUSE_MARGIN: std::time::Duration = std::time::Duration::from_secs(300);

/// Builds source clients: the deployment's SDK configuration (region, endpoint, HTTP
/// client) with the source's own credential in place of the deployment's.
#[derive(Debug, Clone)]
pub struct Remote {
    sdk: aws_config::SdkConfig,
    sts: aws_sdk_sts::Client,
    path_style: bool,
    /// Live sessions by (role, external id).
    sessions: Arc<Mutex<HashMap<(String, String), Credentials>>>,
}

impl Remote {
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self::with_sts(sdk, aws_sdk_sts::Client::new(sdk))
    }

    /// With a given STS client (a test's, which records what it sends).
    pub fn with_sts(sdk: &aws_config::SdkConfig, sts: aws_sdk_sts::Client) -> Self {
        let path_style = std::env::var("SLUICE_S3_FORCE_PATH_STYLE").is_ok_and(|v| v == "true" || v == "1");
        Self { sdk: sdk.clone(), sts, path_style, sessions: Arc::default() }
    }

    /// The client `source` reads its bucket through.
    pub async fn client_for(&self, db: &Db, vault: &Vault, source: &SyncSource) -> Result<SourceClient, SourceError> {
        let credentials = match (&source.role_arn, source.secret_id) {
            (Some(role), _) => self.assume(role, source).await?,
            (None, Some(secret_id)) => open_access_keys(db, vault, secret_id, source.org_id).await?,
            (None, None) => return Err(SourceError::CredentialDeleted("(none)".to_owned())),
        };
        let mut config = aws_sdk_s3::config::Builder::from(&self.sdk)
            .credentials_provider(credentials)
            .force_path_style(self.path_style);
        if let Some(region) = &source.location.region {
            config = config.region(aws_sdk_s3::config::Region::new(region.clone()));
        }
        let get_requests = Arc::new(AtomicU64::new(0));
        let config = config.interceptor(CountGets(get_requests.clone())).build();
        Ok(SourceClient {
            s3: aws_sdk_s3::Client::from_conf(config),
            bucket: source.location.bucket.clone(),
            get_requests,
        })
    }

    async fn assume(&self, role: &str, source: &SyncSource) -> Result<Credentials, SourceError> {
        // A role source always has its own id (the schema requires it); none means no session.
        let external_id = source
            .external_id
            .clone()
            .ok_or(SourceError::AssumeRoleRefused { role: role.to_owned(), external_id: String::new() })?;
        let key = (role.to_owned(), external_id.clone());
        let fresh_until = std::time::SystemTime::now() + SESSION_REUSE_MARGIN;
        if let Some(live) = self.sessions().get(&key).filter(|c| c.expiry().is_some_and(|e| e > fresh_until)) {
            return Ok(live.clone());
        }
        let answer = self
            .sts
            .assume_role()
            .role_arn(role)
            .role_session_name(format!("sluice-sync-{}", source.id.simple()))
            .external_id(&external_id)
            .duration_seconds(SESSION_SECONDS)
            .send()
            .await
            .map_err(|e| {
                tracing::warn!(error = ?e, role, "AssumeRole failed");
                match e.raw_response().map(|r| r.status().as_u16()) {
                    Some(400..=499) => SourceError::AssumeRoleRefused { role: role.to_owned(), external_id },
                    _ => SourceError::Unavailable { operation: "AssumeRole" },
                }
            })?;
        let session = answer.credentials.ok_or(SourceError::Unavailable { operation: "AssumeRole" })?;
        let expiry = std::time::SystemTime::try_from(session.expiration).ok();
        let credentials = Credentials::new(
            session.access_key_id,
            session.secret_access_key,
            Some(session.session_token),
            expiry,
            "sluice-assumed-role",
        );
        let mut sessions = self.sessions();
        sessions.retain(|_, c| c.expiry().is_some_and(|e| e > fresh_until));
        sessions.insert(key, credentials.clone());
        Ok(credentials)
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Credentials>> {
        self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Opens an `aws_credentials` secret for `org_id` (the source's organization): a secret of
/// another kind or another organization does not open.
async fn open_access_keys(
    db: &Db,
    vault: &Vault,
    secret_id: Uuid,
    org_id: Option<Uuid>,
) -> Result<Credentials, SourceError> {
    let Some((meta, sealed)) = db.sealed_secret(secret_id).await? else {
        return Err(SourceError::CredentialDeleted(secret_id.to_string()));
    };
    if meta.kind != "aws_credentials" || meta.org_id != org_id {
        return Err(SourceError::CredentialUnusable(secret_id.to_string()));
    }
    let sealed = Sealed { sealed_key: sealed.sealed_key, nonce: sealed.nonce, ciphertext: sealed.ciphertext };
    let binding = Binding::stored(secret_id, meta.org_id, &meta.kind, meta.kind_bound);
    let value = match vault.open(binding, &sealed).await {
        Ok(value) => value,
        Err(VaultError::Unopenable) => return Err(SourceError::CredentialUnusable(secret_id.to_string())),
        Err(error) => return Err(SourceError::Vault(error)),
    };
    let keys = serde_json::from_str::<serde_json::Value>(&value)
        .ok()
        .as_ref()
        .and_then(AccessKeys::from_json)
        .ok_or_else(|| SourceError::CredentialUnusable(secret_id.to_string()))?;
    Ok(Credentials::new(keys.access_key_id, keys.secret_access_key, None, None, "sluice-vault-secret"))
}

/// Counts the GetObject requests a client sends (each attempt), so a run can say how many
/// objects it downloaded rather than how many it meant to.
#[derive(Debug)]
struct CountGets(Arc<AtomicU64>);

impl Intercept for CountGets {
    fn name(&self) -> &'static str {
        "CountGets"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Metadata>().is_some_and(|m| m.name() == "GetObject") {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// One page of a source's listing, in key order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub objects: Vec<ListedObject>,
    /// More keys follow the last one.
    pub truncated: bool,
}

/// An object's bytes and the ETag of the version they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: bytes::Bytes,
    pub etag: Option<String>,
}

/// A source's bucket, read with the source's credential.
#[derive(Debug, Clone)]
pub struct SourceClient {
    s3: aws_sdk_s3::Client,
    bucket: String,
    get_requests: Arc<AtomicU64>,
}

fn unquoted(etag: Option<&str>) -> Option<String> {
    etag.map(|e| e.trim_matches('"').to_owned())
}

impl SourceClient {
    /// How many GetObject requests this client has sent.
    pub fn get_requests(&self) -> u64 {
        self.get_requests.load(Ordering::Relaxed)
    }

    fn failure<E: ProvideErrorMetadata + std::fmt::Debug>(
        &self,
        operation: &'static str,
        error: &aws_sdk_s3::error::SdkError<E>,
    ) -> SourceError {
        tracing::warn!(error = ?error, bucket = %self.bucket, operation, "source request failed");
        classify(&self.bucket, operation, error.code(), error.raw_response().map(|r| r.status().as_u16()))
    }

    /// Up to `max_keys` keys under `prefix` after `start_after`, directory markers included
    /// (the caller decides what a key is).
    pub async fn list_page(&self, prefix: &str, start_after: Option<&str>, max_keys: i32) -> Result<Page, SourceError> {
        let page = self
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_start_after(start_after.map(str::to_owned))
            .max_keys(max_keys)
            .send()
            .await
            .map_err(|e| self.failure("ListObjectsV2", &e))?;
        let objects = page
            .contents()
            .iter()
            .filter_map(|o| {
                Some(ListedObject {
                    key: o.key()?.to_owned(),
                    size: o.size().unwrap_or_default(),
                    etag: unquoted(o.e_tag()),
                })
            })
            .collect();
        Ok(Page { objects, truncated: page.is_truncated().unwrap_or(false) })
    }

    /// What the bucket says of one key now; `None` when there is no such object.
    /// Whether the bucket answers this credential where the source says it is: `Ok` when
    /// it does; a missing bucket, a refused credential or a wrong region otherwise.
    pub async fn check_bucket(&self) -> Result<(), SourceError> {
        match self.s3.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            // HeadBucket answers with a status and no body: a 404 is the bucket, not a key.
            Err(error) if error.raw_response().is_some_and(|r| r.status().as_u16() == 404) => {
                Err(SourceError::NoSuchBucket(self.bucket.clone()))
            }
            Err(error) => Err(self.failure("HeadBucket", &error)),
        }
    }

    pub async fn head(&self, key: &str) -> Result<Option<ListedObject>, SourceError> {
        match self.s3.head_object().bucket(&self.bucket).key(key).send().await {
            Ok(head) => Ok(Some(ListedObject {
                key: key.to_owned(),
                size: head.content_length().unwrap_or_default(),
                etag: unquoted(head.e_tag()),
            })),
            Err(error) => match self.failure("HeadObject", &error) {
                SourceError::NotFound => Ok(None),
                other => Err(other),
            },
        }
    }

    /// An object's bytes, refused past `max_bytes` (never read whole when too large).
    pub async fn get(&self, key: &str, max_bytes: u64) -> Result<Fetched, SourceError> {
        let object = self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| self.failure("GetObject", &e))?;
        let etag = unquoted(object.e_tag());
        if object.content_length().is_some_and(|len| u64::try_from(len).unwrap_or(u64::MAX) > max_bytes) {
            return Err(SourceError::TooLarge(max_bytes));
        }
        let bytes = sluice_blob::read_within(object.body, max_bytes)
            .await
            .map_err(|_| SourceError::Unavailable { operation: "GetObject" })?
            .ok_or(SourceError::TooLarge(max_bytes))?;
        Ok(Fetched { bytes, etag })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_passing_failure_is_retried() {
        for (code, status) in [
            (Some("PermanentRedirect"), Some(301)),
            (None, Some(307)),
            (Some("AuthorizationHeaderMalformed"), Some(400)),
        ] {
            let error = classify("b", "ListObjectsV2", code, status);
            assert!(matches!(error, SourceError::WrongRegion { .. }), "{code:?} {status:?}: {error}");
            assert!(!error.is_transient());
            assert!(error.to_string().contains("config.region"), "{error}");
        }
        assert!(!classify("b", "HeadObject", Some("AccessDenied"), Some(403)).is_transient());
        for status in [Some(500), Some(503), None] {
            assert!(classify("b", "HeadObject", None, status).is_transient(), "{status:?}");
        }
    }
}
