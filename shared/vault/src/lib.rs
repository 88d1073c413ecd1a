//! Credentials sealed with envelope encryption. KMS issues a fresh AES-256 data key per
//! secret under the deployment's key, with an encryption context naming the secret and its
//! organization; the value is sealed locally with AES-256-GCM and only the KMS-encrypted
//! data key is kept. Opening asks KMS with the same context, so a sealed row copied to
//! another organization's secret (or read with another organization's context) opens
//! nowhere. The context also names the secret's kind (`sluice:kind`), so a role may be
//! allowed to open one kind only: the parse function opens `aws_credentials` for sync
//! sources, never an organization's API keys. Values sealed before kinds were bound carry
//! no kind; the migrate step seals them again with theirs.

use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use uuid::Uuid;

/// Whose a secret is: the encryption context and the sealed value's associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub secret_id: Uuid,
    /// `None` for a private key of a caller outside any organization.
    pub org_id: Option<Uuid>,
    /// The secret's kind ([`API_KEY`] or [`AWS_CREDENTIALS`]); `None` only for a value
    /// sealed before kinds were bound.
    pub kind: Option<&'static str>,
}

/// An embedding provider's API key.
pub const API_KEY: &str = "api_key";
/// An access key pair a sync source reads its bucket with.
pub const AWS_CREDENTIALS: &str = "aws_credentials";

/// The kind a stored row names, as a binding carries it.
pub fn kind_named(kind: &str) -> Option<&'static str> {
    [API_KEY, AWS_CREDENTIALS].into_iter().find(|k| *k == kind)
}

impl Binding {
    /// The binding of a stored secret: its kind when it was sealed with one.
    pub fn stored(secret_id: Uuid, org_id: Option<Uuid>, kind: &str, kind_bound: bool) -> Self {
        Self { secret_id, org_id, kind: if kind_bound { kind_named(kind) } else { None } }
    }

    fn org(&self) -> String {
        self.org_id.map_or_else(|| "none".to_owned(), |org| org.to_string())
    }

    fn associated_data(&self) -> Vec<u8> {
        let mut data = format!("sluice:secret:{}:org:{}", self.secret_id, self.org());
        if let Some(kind) = self.kind {
            data.push_str(&format!(":kind:{kind}"));
        }
        data.into_bytes()
    }

    /// The KMS encryption context: the secret, its organization and (when bound) its kind.
    fn context(&self) -> Vec<(&'static str, String)> {
        let mut context = vec![("sluice:secret", self.secret_id.to_string()), ("sluice:org", self.org())];
        if let Some(kind) = self.kind {
            context.push(("sluice:kind", kind.to_owned()));
        }
        context
    }
}

/// A sealed value as stored: nothing here opens without KMS and the right binding.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    pub sealed_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed").field("ciphertext_bytes", &self.ciphertext.len()).finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// KMS could not be asked (network, throttling, permissions): worth a retry.
    #[error("the key service failed during {operation}")]
    KeyService { operation: &'static str, source: Box<dyn std::error::Error + Send + Sync> },
    /// The sealed value does not open with this binding: wrong organization, tampered, or
    /// its data key refused by KMS.
    #[error("the secret cannot be opened")]
    Unopenable,
}

/// Seals and opens secrets with the deployment's KMS key.
#[derive(Debug, Clone)]
pub struct Vault {
    kms: aws_sdk_kms::Client,
    key_id: String,
}

impl Vault {
    pub fn new(kms: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        Self { kms, key_id: key_id.into() }
    }

    /// Seals `value` for `binding` with a fresh data key.
    pub async fn seal(&self, binding: Binding, value: &str) -> Result<Sealed, VaultError> {
        let issued = self
            .kms
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .set_encryption_context(Some(binding.context().into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
            .send()
            .await
            .map_err(|e| VaultError::KeyService { operation: "GenerateDataKey", source: Box::new(e) })?;
        let (Some(plain_key), Some(sealed_key)) = (issued.plaintext(), issued.ciphertext_blob()) else {
            return Err(VaultError::KeyService { operation: "GenerateDataKey", source: "no key in the answer".into() });
        };
        let key = aead_key(plain_key.as_ref())?;
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| VaultError::KeyService {
            operation: "random nonce",
            source: "the system random source failed".into(),
        })?;
        let mut ciphertext = value.as_bytes().to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(binding.associated_data()),
            &mut ciphertext,
        )
        .map_err(|_| VaultError::Unopenable)?;
        Ok(Sealed { sealed_key: sealed_key.as_ref().to_vec(), nonce: nonce.to_vec(), ciphertext })
    }

    /// Opens a sealed value; `Unopenable` when the binding is not the one it was sealed for.
    pub async fn open(&self, binding: Binding, sealed: &Sealed) -> Result<String, VaultError> {
        let opened = self
            .kms
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(sealed.sealed_key.clone()))
            .set_encryption_context(Some(binding.context().into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
            .send()
            .await
            .map_err(|e| {
                let refused = e.as_service_error().is_some_and(|s| {
                    s.is_invalid_ciphertext_exception() || s.is_incorrect_key_exception() || s.is_not_found_exception()
                });
                if refused {
                    VaultError::Unopenable
                } else {
                    VaultError::KeyService { operation: "Decrypt", source: Box::new(e) }
                }
            })?;
        let plain_key = opened.plaintext().ok_or(VaultError::Unopenable)?;
        let key = aead_key(plain_key.as_ref())?;
        let nonce = Nonce::try_assume_unique_for_key(&sealed.nonce).map_err(|_| VaultError::Unopenable)?;
        let mut buffer = sealed.ciphertext.clone();
        let plain = key
            .open_in_place(nonce, Aad::from(binding.associated_data()), &mut buffer)
            .map_err(|_| VaultError::Unopenable)?;
        String::from_utf8(plain.to_vec()).map_err(|_| VaultError::Unopenable)
    }
}

fn aead_key(bytes: &[u8]) -> Result<LessSafeKey, VaultError> {
    UnboundKey::new(&AES_256_GCM, bytes).map(LessSafeKey::new).map_err(|_| VaultError::Unopenable)
}
