//! Which model a base embeds with, through which provider, at whose address and on whose
//! key: checked when a base is created and when it is moved. The catalog decides what a
//! provider serves; the vault rows decide which key the caller may lend; the endpoint rows
//! decide which local service a keyless provider reaches.

use crate::State;
use crate::error::{KnowledgeError, invalid};
use sluice_domain::Caller;
use sluice_domain::access::Scope;
use sluice_domain::catalog::{self, Model, Provider};
use sluice_embed::Listing;
use uuid::Uuid;

/// What the caller asked for, after defaults (and adoption) were applied.
#[derive(Debug, Clone)]
pub struct Requested {
    pub provider: String,
    pub model: String,
    pub secret_id: Option<Uuid>,
    pub endpoint_id: Option<Uuid>,
    pub base_url: Option<String>,
    /// The key came with the collection (adopted or already on the base): the caller lends
    /// nothing new, so their sight of it is not asked.
    pub secret_inherited: bool,
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub provider: &'static Provider,
    pub model: &'static Model,
    pub secret_id: Option<Uuid>,
    pub endpoint_id: Option<Uuid>,
    pub base_url: Option<String>,
}

/// Where a model the endpoint does not serve is reported: on the model when a base is
/// created, on the address when an existing one is moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    Create,
    Move,
}

/// Checks `requested` for a base of `scope` belonging to `org` (the base's organization,
/// never the caller's: a grantee from elsewhere must not point a base at their own services).
pub async fn resolve(
    state: &State,
    caller: &Caller,
    scope: Scope,
    org: Option<Uuid>,
    requested: Requested,
    moment: Moment,
) -> Result<Resolved, KnowledgeError> {
    let provider = catalog::provider(&requested.provider).ok_or_else(|| {
        invalid("embedding_provider", format!("{:?} is not in the embedding catalog", requested.provider))
    })?;
    let model = provider.model(&requested.model).ok_or_else(|| {
        invalid("embedding_model", format!("{:?} is not a model {} serves", requested.model, provider.id))
    })?;
    if provider.keyless {
        return keyless(state, org, scope, provider, model, requested).await;
    }
    if scope == Scope::App {
        return Err(invalid(
            "embedding_provider",
            "an app base belongs to no organization and embeds only through a keyless provider",
        ));
    }
    if requested.endpoint_id.is_some() {
        return Err(invalid(
            "embedding_endpoint_id",
            format!("{} is reached at its own address; a local service is for keyless providers", provider.id),
        ));
    }
    let secret_id = requested.secret_id.ok_or_else(|| {
        invalid("embedding_secret_id", format!("{} needs an API key from your organization's vault", provider.id))
    })?;
    if !requested.secret_inherited {
        check_secret(state, caller, org, provider, secret_id).await?;
    }
    if let Some(base_url) = &requested.base_url {
        if provider.id != "openrouter" {
            return Err(invalid("embedding_base_url", format!("{} takes no endpoint of its own", provider.id)));
        }
        state.endpoint_policy.check_openrouter(base_url).map_err(|why| invalid("embedding_base_url", why))?;
        if let Listing::Served(models) = sluice_embed::openrouter_models(&state.http, base_url).await
            && !models.contains(&model.model)
        {
            let field = if moment == Moment::Create { "embedding_model" } else { "embedding_base_url" };
            return Err(invalid(field, format!("{base_url} does not serve {}", model.model)));
        }
    }
    Ok(Resolved { provider, model, secret_id: Some(secret_id), endpoint_id: None, base_url: requested.base_url })
}

async fn keyless(
    state: &State,
    org: Option<Uuid>,
    scope: Scope,
    provider: &'static Provider,
    model: &'static Model,
    requested: Requested,
) -> Result<Resolved, KnowledgeError> {
    if requested.secret_id.is_some() && !requested.secret_inherited {
        return Err(invalid(
            "embedding_secret_id",
            format!("{} is keyless: name a local service (embedding_endpoint_id), not a key", provider.id),
        ));
    }
    if requested.base_url.is_some() {
        return Err(invalid(
            "embedding_base_url",
            format!("{} is reached at its local service (embedding_endpoint_id)", provider.id),
        ));
    }
    let visible = state.db.visible_embedding_endpoints(org).await?;
    let usable: Vec<_> = visible
        .iter()
        .filter(|e| e.provider == provider.id && (scope != Scope::App || e.is_deployment_wide()))
        .collect();
    let endpoint = match requested.endpoint_id {
        Some(id) => usable.iter().find(|e| e.id == id).ok_or_else(|| {
            invalid(
                "embedding_endpoint_id",
                format!("no local {} service {id} is registered for this base's organization", provider.id),
            )
        })?,
        None => match usable.iter().filter(|e| e.is_deployment_wide()).collect::<Vec<_>>().as_slice() {
            [only] => *only,
            [] => {
                return Err(invalid(
                    "embedding_endpoint_id",
                    format!("no deployment-wide {} service is registered: name one", provider.id),
                ));
            }
            _ => {
                return Err(invalid(
                    "embedding_endpoint_id",
                    format!("several deployment-wide {} services are registered: name one", provider.id),
                ));
            }
        },
    };
    Ok(Resolved { provider, model, secret_id: None, endpoint_id: Some(endpoint.id), base_url: None })
}

/// A key the caller cannot see, or one of another organization than the base's, is refused
/// exactly as one the vault does not hold, so the refusal cannot enumerate somebody else's
/// private keys.
async fn check_secret(
    state: &State,
    caller: &Caller,
    org: Option<Uuid>,
    provider: &Provider,
    secret_id: Uuid,
) -> Result<(), KnowledgeError> {
    let unknown = || invalid("embedding_secret_id", "the vault holds no such key that you can use");
    let secret = lendable(state, caller, org, secret_id).await?.ok_or_else(unknown)?;
    if secret.provider != provider.id {
        return Err(invalid(
            "embedding_secret_id",
            format!("the key is for {}, not {}: a key goes only to its own provider", secret.provider, provider.id),
        ));
    }
    Ok(())
}

/// The key `secret_id` if `caller` may lend it to a base of `org`.
pub async fn lendable(
    state: &State,
    caller: &Caller,
    org: Option<Uuid>,
    secret_id: Uuid,
) -> Result<Option<sluice_store::SecretMeta>, KnowledgeError> {
    Ok(state.db.lendable_secret(caller, org, secret_id).await?)
}
