//! Where a collection's images are described and with whose key: checked when the setting is
//! given (the caller may lend the key; the endpoint is one the organization may name), and
//! resolved when a document is parsed (the key opened by the vault). There is no
//! deployment-wide key to fall back to.

use crate::client::VisionTarget;
use sluice_domain::Caller;
use sluice_domain::vision::{self, ImageDescription};
pub use sluice_embed::credentials::ResolveError;
use sluice_embed::credentials::{Lending, check_lending, open_lending};
use sluice_store::{Db, StoreError};
use sluice_vault::Vault;
use uuid::Uuid;

/// A refusal of the setting, naming its field under `ingestion_config.image_description`.
pub type Refused = (String, String);

fn refused(field: &str, why: impl Into<String>) -> Refused {
    (format!("ingestion_config.image_description.{field}"), why.into())
}

/// Checks what a setting lends, for something of `org` (`check_lending`), naming the field
/// under `ingestion_config.image_description`.
pub async fn check_lendable(
    db: &Db,
    caller: &Caller,
    org: Option<Uuid>,
    setting: &ImageDescription,
) -> Result<Result<(), Refused>, StoreError> {
    let key_provider = setting.key_provider();
    let lending = Lending {
        secret_id: setting.secret_id,
        key_provider: key_provider.as_deref(),
        endpoint_id: setting.endpoint_id,
    };
    Ok(check_lending(db, caller, org, lending).await?.map_err(|(field, why)| refused(field, why)))
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

pub use sluice_embed::credentials::Unusable;
pub use sluice_embed::network::is_https;

/// Where `setting` (on, for a document of `org`) describes, with its key opened: only a key
/// stored for its provider or endpoint, and only to an `https` address (a setting stored
/// before these rules were kept describes nothing rather than send a key elsewhere).
pub async fn target_for(
    db: &Db,
    vault: &Vault,
    org: Option<Uuid>,
    setting: &ImageDescription,
) -> Result<Result<VisionTarget, Unusable>, ResolveError> {
    let key_provider = setting.key_provider();
    let lending = Lending {
        secret_id: setting.secret_id,
        key_provider: key_provider.as_deref(),
        endpoint_id: setting.endpoint_id,
    };
    let (api_key, endpoint) = match open_lending(db, vault, org, lending).await? {
        Ok(opened) => opened,
        Err(unusable) => return Ok(Err(unusable)),
    };
    let (base_url, openai) = match (&setting.provider, endpoint) {
        (Some(provider), _) => match vision::provider(provider) {
            Some(p) => (p.base_url.clone(), p.id == "openai"),
            None => return Ok(Err(Unusable::NoEndpoint)),
        },
        (None, Some(endpoint)) => (endpoint, false),
        (None, None) => return Ok(Err(Unusable::NoEndpoint)),
    };
    if setting.provider.is_some() && api_key.is_none() {
        return Ok(Err(Unusable::NoKey));
    }
    Ok(Ok(VisionTarget { base_url, model: setting.model.clone(), api_key, openai }))
}
