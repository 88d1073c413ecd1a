//! Whose key pays for a collection's embeddings: the key its base chose, opened by the
//! vault — or no key, saying why. Nothing here refuses: a key that was deleted, cannot be
//! opened or belongs elsewhere resolves to "no key", because whose key pays must never
//! decide whether the base's row can be read. The embedding client then refuses the index
//! or the search with `NoKey::refusal`. There is no deployment-wide key to fall back to.

use sluice_store::{Db, KnowledgeBase, StoreError};
use sluice_vault::{Binding, Sealed, Vault, VaultError};

pub use crate::target::ApiKey;

/// Why a keyed collection has no usable key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoKey {
    /// The base names no key.
    NoneChosen,
    /// The key it chose has been deleted from the vault.
    Deleted,
    /// The key does not open (its sealed value or its binding is not intact).
    Unopenable,
    /// The key belongs to another organization or another provider.
    NotThisCollections,
}

impl NoKey {
    /// The stored, user-facing refusal: the collection, its provider, what happened and
    /// what to do — never a variable to set.
    pub fn refusal(self, base: &KnowledgeBase) -> String {
        let what = match self {
            Self::NoneChosen => "names no API key",
            Self::Deleted => "chose an API key that has since been deleted",
            Self::Unopenable => "chose an API key that can no longer be unsealed",
            Self::NotThisCollections => {
                "chose an API key that is not one for this collection's provider and organization"
            }
        };
        format!(
            "embedding refused: collection {} on {} {what}; choose a key from your organization's vault for it \
             (PATCH /kb/{} with embedding_secret_id), then retry",
            base.collection_name, base.embedding_provider, base.id
        )
    }
}

/// What a base embeds with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyResolution {
    /// A keyless provider: the base names a local service instead.
    Keyless,
    Key(ApiKey),
    NoKey(NoKey),
}

/// A failure worth retrying: the database or the key service did not answer.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the key service did not answer")]
    KeyService(#[source] VaultError),
}

/// Where `base` embeds and with whose key: `Ok(Err(refusal))` when it cannot (no usable key,
/// no registered local service), the refusal naming the collection and what to do.
pub async fn target_for(
    db: &Db,
    vault: &Vault,
    base: &KnowledgeBase,
) -> Result<Result<crate::target::Target, String>, ResolveError> {
    let Some(provider) = sluice_domain::catalog::provider(&base.embedding_provider) else {
        return Ok(Err(format!(
            "collection {} embeds through {}, which the catalog no longer has; move it to a catalog provider",
            base.collection_name, base.embedding_provider
        )));
    };
    let dimensions = usize::try_from(base.embedding_dim).unwrap_or_default();
    let mut api = crate::target::EmbedApi::OpenAi;
    let (base_url, api_key) = match resolve_key(db, vault, base).await? {
        KeyResolution::Keyless => {
            // Only the deployment's services and the base's own organization's: a row naming
            // another organization's service (however it got there) embeds nowhere.
            let endpoint = match base.embedding_endpoint_id {
                Some(id) => db.embedding_endpoint(id).await?.filter(|e| e.serves(base.org_id)),
                None => None,
            };
            let Some(endpoint) = endpoint else {
                return Ok(Err(format!(
                    "collection {} names no registered {} service; choose one (PATCH /kb/{} embedding_endpoint_id)",
                    base.collection_name, provider.id, base.id
                )));
            };
            if provider.id == "ollama" {
                api = crate::target::EmbedApi::of_ollama(&endpoint.base_url);
            }
            (endpoint.base_url, None)
        }
        KeyResolution::Key(key) => {
            let url = base.embedding_base_url.clone().or_else(|| provider.base_url.clone()).unwrap_or_default();
            (url, Some(key))
        }
        KeyResolution::NoKey(why) => return Ok(Err(why.refusal(base))),
    };
    Ok(Ok(crate::target::Target { base_url, model: base.embedding_model.clone(), dimensions, api_key, api }))
}

/// Resolves the key `base` embeds with.
pub async fn resolve_key(db: &Db, vault: &Vault, base: &KnowledgeBase) -> Result<KeyResolution, ResolveError> {
    let keyless = sluice_domain::catalog::provider(&base.embedding_provider).is_some_and(|p| p.keyless);
    if keyless {
        return Ok(KeyResolution::Keyless);
    }
    let Some(secret_id) = base.embedding_secret_id else {
        return Ok(KeyResolution::NoKey(NoKey::NoneChosen));
    };
    let Some((meta, sealed)) = db.sealed_secret(secret_id).await? else {
        return Ok(KeyResolution::NoKey(NoKey::Deleted));
    };
    if meta.org_id != base.org_id || meta.provider != base.embedding_provider {
        return Ok(KeyResolution::NoKey(NoKey::NotThisCollections));
    }
    Ok(open(vault, secret_id, &meta, sealed).await?.map_or(KeyResolution::NoKey(NoKey::Unopenable), KeyResolution::Key))
}

/// A stored key's value, unsealed under its binding; `None` when it does not open.
async fn open(
    vault: &Vault,
    secret_id: uuid::Uuid,
    meta: &sluice_store::SecretMeta,
    sealed: sluice_store::SealedValue,
) -> Result<Option<ApiKey>, ResolveError> {
    let sealed = Sealed { sealed_key: sealed.sealed_key, nonce: sealed.nonce, ciphertext: sealed.ciphertext };
    match vault.open(Binding::stored(secret_id, meta.org_id, &meta.kind, meta.kind_bound), &sealed).await {
        Ok(value) => Ok(Some(ApiKey(value))),
        Err(VaultError::Unopenable) => Ok(None),
        Err(error) => Err(ResolveError::KeyService(error)),
    }
}

/// The organization's API key `secret_id`, opened, for a use other than a base's
/// embeddings (describing images, a cloud parser); `None` when it is gone, another
/// organization's, not an API key, for another provider than `provider` (when given), or
/// does not open.
pub async fn open_api_key(
    db: &Db,
    vault: &Vault,
    org: Option<uuid::Uuid>,
    secret_id: uuid::Uuid,
    provider: Option<&str>,
) -> Result<Option<ApiKey>, ResolveError> {
    let Some((meta, sealed)) = db.sealed_secret(secret_id).await? else { return Ok(None) };
    if meta.org_id != org || meta.kind != sluice_vault::API_KEY || provider.is_some_and(|p| p != meta.provider) {
        return Ok(None);
    }
    open(vault, secret_id, &meta, sealed).await
}

/// Whether `caller` may lend the API key `secret_id` to something of `org` for `provider`
/// (any provider when `None`): why not, when not. A key the caller may not see is refused
/// exactly as a missing one.
pub async fn lendable_api_key(
    db: &Db,
    caller: &sluice_domain::Caller,
    org: Option<uuid::Uuid>,
    secret_id: uuid::Uuid,
    provider: Option<&str>,
) -> Result<Result<(), String>, StoreError> {
    let Some(secret) = db.lendable_secret(caller, org, secret_id).await? else {
        return Ok(Err("the vault holds no such key that you can use".to_owned()));
    };
    if secret.kind != sluice_vault::API_KEY {
        return Ok(Err(format!("the key is {}, not an API key", secret.kind)));
    }
    if let Some(provider) = provider
        && secret.provider != provider
    {
        return Ok(Err(format!(
            "the key is for {}, not {provider}: a key goes only to its own provider",
            secret.provider
        )));
    }
    Ok(Ok(()))
}

/// What a setting that calls out on a tenant's behalf (describing images, reranking) lends:
/// a key from the vault, stored for `key_provider` (a catalog provider, or `endpoint:<id>`),
/// and an endpoint the organization registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lending<'a> {
    pub secret_id: Option<uuid::Uuid>,
    pub key_provider: Option<&'a str>,
    pub endpoint_id: Option<uuid::Uuid>,
}

/// Checks what `lending` lends to something of `org`: its key is one `caller` may see, of
/// that organization, an API key stored for its provider or endpoint; its endpoint is the
/// organization's or the deployment's, reached over `https` when it is given a key. A key
/// or endpoint the caller may not use is refused exactly as a missing one; the refusal names
/// the setting's field (`secret_id`, `endpoint_id`).
pub async fn check_lending(
    db: &Db,
    caller: &sluice_domain::Caller,
    org: Option<uuid::Uuid>,
    lending: Lending<'_>,
) -> Result<Result<(), (&'static str, String)>, StoreError> {
    if let Some(secret_id) = lending.secret_id
        && let Err(why) = lendable_api_key(db, caller, org, secret_id, lending.key_provider).await?
    {
        return Ok(Err(("secret_id", why)));
    }
    if let Some(endpoint_id) = lending.endpoint_id {
        let Some(endpoint) = db.embedding_endpoint(endpoint_id).await?.filter(|e| e.serves(org)) else {
            return Ok(Err(("endpoint_id", format!("no endpoint {endpoint_id} is registered for this organization"))));
        };
        if lending.secret_id.is_some() && !crate::network::is_https(&endpoint.base_url) {
            return Ok(Err(("secret_id", "a key is sent only over https, and this endpoint is not".to_owned())));
        }
    }
    Ok(Ok(()))
}

/// Why a setting that is on reaches nothing now: its key or endpoint is gone, or its key
/// would travel in the clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    NoKey,
    NoEndpoint,
    KeyInTheClear,
}

impl Unusable {
    /// A short, stable name for it.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NoKey => "no_usable_key",
            Self::NoEndpoint => "no_endpoint",
            Self::KeyInTheClear => "key_needs_https",
        }
    }
}

/// The key `lending` lends, opened, and its endpoint's address when it names one (for
/// something of `org`): only a key stored for its provider or endpoint, only an endpoint the
/// organization may name, and a key to an endpoint only over `https` (a setting stored before
/// these rules were kept reaches nothing rather than send a key elsewhere).
pub async fn open_lending(
    db: &Db,
    vault: &Vault,
    org: Option<uuid::Uuid>,
    lending: Lending<'_>,
) -> Result<Result<(Option<ApiKey>, Option<String>), Unusable>, ResolveError> {
    let api_key = match lending.secret_id {
        Some(secret_id) => match open_api_key(db, vault, org, secret_id, lending.key_provider).await? {
            Some(key) => Some(key),
            None => return Ok(Err(Unusable::NoKey)),
        },
        None => None,
    };
    let endpoint = match lending.endpoint_id {
        Some(id) => match db.embedding_endpoint(id).await?.filter(|e| e.serves(org)) {
            Some(endpoint) if api_key.is_some() && !crate::network::is_https(&endpoint.base_url) => {
                return Ok(Err(Unusable::KeyInTheClear));
            }
            Some(endpoint) => Some(endpoint.base_url),
            None => return Ok(Err(Unusable::NoEndpoint)),
        },
        None => None,
    };
    Ok(Ok((api_key, endpoint)))
}
