//! Where a collection's images are described and with whose key: checked when the setting is
//! given (the caller may lend the key; the endpoint is one the organization may name), and
//! resolved when a document is parsed (the key opened by the vault). There is no
//! deployment-wide key to fall back to.

use crate::client::VisionTarget;
use sluice_domain::Caller;
use sluice_domain::vision::{self, ImageDescription};
pub use sluice_embed::credentials::ResolveError;
use sluice_embed::credentials::open_api_key;
use sluice_store::{Db, StoreError};
use sluice_vault::Vault;
use uuid::Uuid;

/// A refusal of the setting, naming its field under `ingestion_config.image_description`.
pub type Refused = (String, String);

fn refused(field: &str, why: impl Into<String>) -> Refused {
    (format!("ingestion_config.image_description.{field}"), why.into())
}

/// Checks what a setting lends, for something of `org`: its key is one `caller` may see,
/// of that organization, an API key stored for the provider or the endpoint it names; its
/// endpoint is the organization's or the deployment's, and one given a key is reached over
/// `https`. A key or endpoint the caller may not use is refused exactly as a missing one.
pub async fn check_lendable(
    db: &Db,
    caller: &Caller,
    org: Option<Uuid>,
    setting: &ImageDescription,
) -> Result<Result<(), Refused>, StoreError> {
    if let Some(secret_id) = setting.secret_id {
        let provider = setting.key_provider();
        let lendable = sluice_embed::credentials::lendable_api_key(db, caller, org, secret_id, provider.as_deref());
        if let Err(why) = lendable.await? {
            return Ok(Err(refused("secret_id", why)));
        }
    }
    if let Some(endpoint_id) = setting.endpoint_id {
        let endpoint = db.embedding_endpoint(endpoint_id).await?.filter(|e| e.serves(org));
        let Some(endpoint) = endpoint else {
            return Ok(Err(refused(
                "endpoint_id",
                format!("no endpoint {endpoint_id} is registered for this organization"),
            )));
        };
        if setting.secret_id.is_some() && !is_https(&endpoint.base_url) {
            return Ok(Err(refused("secret_id", "a key is sent only over https, and this endpoint is not")));
        }
    }
    Ok(Ok(()))
}

/// Checks what a request's ingestion `changes` lend, as merged into `merged`: the image
/// description's key and endpoint (`check_lendable`), and the cloud parser's key (an API key
/// for `llamaparse` the caller can see). A setting the request leaves alone was checked when
/// it was given, and is not asked again.
pub async fn check_requested(
    db: &Db,
    caller: &Caller,
    org: Option<Uuid>,
    changes: Option<&serde_json::Value>,
    merged: &sluice_domain::ingestion::IngestionConfig,
) -> Result<Result<(), Refused>, StoreError> {
    let named = |field: &str| changes.and_then(|c| c.get(field)).is_some_and(|d| !d.is_null());
    if let (Some(secret_id), true) = (merged.llamaparse_secret_id, named("llamaparse_secret_id")) {
        let lendable = sluice_embed::credentials::lendable_api_key(db, caller, org, secret_id, Some("llamaparse"));
        if let Err(why) = lendable.await? {
            return Ok(Err(("ingestion_config.llamaparse_secret_id".to_owned(), why)));
        }
    }
    match (&merged.image_description, named("image_description")) {
        (Some(setting), true) => check_lendable(db, caller, org, setting).await,
        _ => Ok(Ok(())),
    }
}

pub use sluice_embed::network::is_https;

/// Why a setting that is on describes nothing now: its key or endpoint is gone, or its key
/// would travel in the clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    NoKey,
    NoEndpoint,
    KeyInTheClear,
}

impl Unusable {
    /// The reason its images are counted under.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NoKey => "no_usable_key",
            Self::NoEndpoint => "no_endpoint",
            Self::KeyInTheClear => "key_needs_https",
        }
    }
}

/// Where `setting` (on, for a document of `org`) describes, with its key opened: only a key
/// stored for its provider or endpoint, and only to an `https` address (a setting stored
/// before these rules were kept describes nothing rather than send a key elsewhere).
pub async fn target_for(
    db: &Db,
    vault: &Vault,
    org: Option<Uuid>,
    setting: &ImageDescription,
) -> Result<Result<VisionTarget, Unusable>, ResolveError> {
    let api_key = match setting.secret_id {
        Some(secret_id) => match open_api_key(db, vault, org, secret_id, setting.key_provider().as_deref()).await? {
            Some(key) => Some(key),
            None => return Ok(Err(Unusable::NoKey)),
        },
        None => None,
    };
    let (base_url, openai) = match (&setting.provider, setting.endpoint_id) {
        (Some(provider), _) => match vision::provider(provider) {
            Some(p) => (p.base_url.clone(), p.id == "openai"),
            None => return Ok(Err(Unusable::NoEndpoint)),
        },
        (None, Some(id)) => match db.embedding_endpoint(id).await?.filter(|e| e.serves(org)) {
            Some(endpoint) => (endpoint.base_url, false),
            None => return Ok(Err(Unusable::NoEndpoint)),
        },
        (None, None) => return Ok(Err(Unusable::NoEndpoint)),
    };
    if setting.provider.is_some() && api_key.is_none() {
        return Ok(Err(Unusable::NoKey));
    }
    if api_key.is_some() && !is_https(&base_url) {
        return Ok(Err(Unusable::KeyInTheClear));
    }
    Ok(Ok(VisionTarget { base_url, model: setting.model.clone(), api_key, openai }))
}
