//! Where a collection reranks and with whose key: checked when the setting is given (the
//! caller may lend the key; the endpoint is one the organization may name, reached over
//! `https` when it is given a key), and resolved at each search (the key opened by the
//! vault). Bedrock needs no key: the deployment's role signs.

use crate::RerankTarget;
use sluice_domain::Caller;
use sluice_domain::rerank::Rerank;
pub use sluice_embed::credentials::ResolveError;
use sluice_embed::credentials::{lendable_api_key, open_api_key};
use sluice_embed::network::is_https;
use sluice_store::{Db, StoreError};
use sluice_vault::Vault;
use uuid::Uuid;

/// Cohere's API, unless the deployment names another address (`SLUICE_COHERE_URL`: a
/// region's, or the test stack's stand-in).
pub const COHERE_URL: &str = "https://api.cohere.com/v2";
pub const COHERE_URL_VARIABLE: &str = "SLUICE_COHERE_URL";

/// A refusal of the setting, naming its field under `rerank`.
pub type Refused = (String, String);

fn refused(field: &str, why: impl Into<String>) -> Refused {
    (format!("rerank.{field}"), why.into())
}

/// Checks what a setting lends, for a base of `org`: its key is one `caller` may see, of
/// that organization, an API key stored for the provider or endpoint it names; its endpoint
/// is the organization's or the deployment's, reached over `https` when given a key. A key
/// or endpoint the caller may not use is refused exactly as a missing one.
pub async fn check_lendable(
    db: &Db,
    caller: &Caller,
    org: Option<Uuid>,
    setting: &Rerank,
) -> Result<Result<(), Refused>, StoreError> {
    if let Some(secret_id) = setting.secret_id {
        let provider = setting.key_provider();
        if let Err(why) = lendable_api_key(db, caller, org, secret_id, provider.as_deref()).await? {
            return Ok(Err(refused("secret_id", why)));
        }
    }
    if let Some(endpoint_id) = setting.endpoint_id {
        let Some(endpoint) = db.embedding_endpoint(endpoint_id).await?.filter(|e| e.serves(org)) else {
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

/// Why a collection's setting reranks nothing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    NoKey,
    NoEndpoint,
    KeyInTheClear,
}

impl Unusable {
    /// The `reason` a search answers.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NoKey => "no_usable_key",
            Self::NoEndpoint => "no_endpoint",
            Self::KeyInTheClear => "key_needs_https",
        }
    }
}

/// Where `setting` (a base of `org`'s) reranks, its key opened: only a key stored for its
/// provider or endpoint, and only to an `https` endpoint. `region` names Bedrock's model.
pub async fn target_for(
    db: &Db,
    vault: &Vault,
    org: Option<Uuid>,
    setting: &Rerank,
    region: &str,
) -> Result<Result<RerankTarget, Unusable>, ResolveError> {
    if setting.provider.as_deref() == Some("bedrock") {
        let model_arn = format!("arn:aws:bedrock:{region}::foundation-model/{}", setting.model);
        return Ok(Ok(RerankTarget::Bedrock { model_arn }));
    }
    let api_key = match setting.secret_id {
        Some(secret_id) => match open_api_key(db, vault, org, secret_id, setting.key_provider().as_deref()).await? {
            Some(key) => Some(key),
            None => return Ok(Err(Unusable::NoKey)),
        },
        None => None,
    };
    let base_url = match (setting.provider.as_deref(), setting.endpoint_id) {
        (Some("cohere"), _) => std::env::var(COHERE_URL_VARIABLE).unwrap_or_else(|_| COHERE_URL.to_owned()),
        (None, Some(id)) => match db.embedding_endpoint(id).await?.filter(|e| e.serves(org)) {
            Some(endpoint) if api_key.is_some() && !is_https(&endpoint.base_url) => {
                return Ok(Err(Unusable::KeyInTheClear));
            }
            Some(endpoint) => endpoint.base_url,
            None => return Ok(Err(Unusable::NoEndpoint)),
        },
        _ => return Ok(Err(Unusable::NoEndpoint)),
    };
    if setting.provider.is_some() && api_key.is_none() {
        return Ok(Err(Unusable::NoKey));
    }
    Ok(Ok(RerankTarget::Http { base_url, model: setting.model.clone(), api_key }))
}
