//! Where a collection reranks and with whose key: checked when the setting is given (the
//! caller may lend the key; the endpoint is one the organization may name, reached over
//! `https` when it is given a key), and resolved at each search (the key opened by the
//! vault). Bedrock needs no key: the deployment's role signs.

use crate::RerankTarget;
use sluice_domain::Caller;
use sluice_domain::rerank::Rerank;
pub use sluice_embed::credentials::ResolveError;
pub use sluice_embed::credentials::Unusable;
use sluice_embed::credentials::{Lending, check_lending, open_lending};
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

/// Checks what a setting lends, for a base of `org` (`check_lending`), naming the field
/// under `rerank`.
pub async fn check_lendable(
    db: &Db,
    caller: &Caller,
    org: Option<Uuid>,
    setting: &Rerank,
) -> Result<Result<(), Refused>, StoreError> {
    let key_provider = setting.key_provider();
    let lending = Lending {
        secret_id: setting.secret_id,
        key_provider: key_provider.as_deref(),
        endpoint_id: setting.endpoint_id,
    };
    Ok(check_lending(db, caller, org, lending).await?.map_err(|(field, why)| refused(field, why)))
}

/// Where `setting` (a base of `org`'s) reranks, its key opened (`open_lending`'s rules).
/// `region` names Bedrock's model; Bedrock takes no key, the role signs.
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
    let base_url = match (setting.provider.as_deref(), endpoint) {
        (Some("cohere"), _) => std::env::var(COHERE_URL_VARIABLE).unwrap_or_else(|_| COHERE_URL.to_owned()),
        (None, Some(endpoint)) => endpoint,
        _ => return Ok(Err(Unusable::NoEndpoint)),
    };
    if setting.provider.is_some() && api_key.is_none() {
        return Ok(Err(Unusable::NoKey));
    }
    Ok(Ok(RerankTarget::Http { base_url, model: setting.model.clone(), api_key }))
}
