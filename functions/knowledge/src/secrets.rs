//! `POST /secrets` and `GET /secrets`: embedding API keys and S3 sources' access key pairs
//! (`aws_credentials`), sealed by the vault (KMS envelope encryption bound to the
//! organization). Nothing here opens one: only the embedding path and a source's fetch do,
//! and no answer ever carries a value.

use crate::State;
use crate::error::{KnowledgeError, invalid};
use crate::fields;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sluice_domain::access::{self, SecretOwnership};
use sluice_domain::{Caller, catalog};
use sluice_store::{SealedValue, SecretMeta};
use sluice_vault::Binding;
use sluice_web::json_response;
use time::OffsetDateTime;
use uuid::Uuid;

/// The longest API key accepted; real ones are well under 300 characters.
const MAX_SECRET_CHARS: usize = 4096;

#[derive(Debug, Serialize)]
struct SecretView {
    id: Uuid,
    name: String,
    kind: String,
    provider: String,
    visibility: String,
    owner_id: Uuid,
    org_id: Option<Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
}

fn view(meta: SecretMeta) -> SecretView {
    SecretView {
        id: meta.id,
        name: meta.name,
        kind: meta.kind,
        provider: meta.provider,
        visibility: meta.visibility,
        owner_id: meta.owner_id,
        org_id: meta.org_id,
        created_at: meta.created_at,
    }
}

/// `POST /secrets`'s body: `value` is a string for an API key and an object for an access
/// key pair.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSecret {
    name: Option<String>,
    kind: Option<String>,
    provider: Option<String>,
    value: Option<serde_json::Value>,
    visibility: Option<String>,
}

/// An API key: for an embedding provider of the catalog, for LlamaParse (a collection's
/// cloud parser), or for one registered endpoint (`endpoint:<id>`: one the caller's
/// organization may name, at an `https` address, since a key never travels in the clear);
/// and the key.
async fn api_key(state: &State, caller: &Caller, body: NewSecret) -> Result<(String, String), KnowledgeError> {
    let provider = fields::required(body.provider, "provider")?;
    match catalog::provider(&provider) {
        // A cloud parser's and a reranker's keys, beside the embedding catalog's.
        None if provider == "llamaparse" || provider == "cohere" => {}
        None if provider.starts_with("endpoint:") => {
            let id = sluice_domain::vision::endpoint_of_key_provider(&provider);
            let endpoint = match id {
                Some(id) => state.db.embedding_endpoint(id).await?,
                None => None,
            };
            let Some(endpoint) = endpoint.filter(|e| e.serves(caller.org_id)) else {
                return Err(invalid(
                    "provider",
                    format!("{provider:?} names no endpoint registered for your organization"),
                ));
            };
            if !sluice_vision::target::is_https(&endpoint.base_url) {
                return Err(invalid("provider", "a key is sent only over https, and this endpoint's address is not"));
            }
        }
        None => {
            return Err(invalid(
                "provider",
                format!("{provider:?} is not in the embedding catalog, nor llamaparse, cohere or endpoint:<id>"),
            ));
        }
        Some(p) if p.keyless => return Err(invalid("provider", format!("{provider} is keyless and takes no key"))),
        Some(_) => {}
    }
    let value = match body.value {
        None | Some(serde_json::Value::Null) => return Err(invalid("value", "value is required")),
        Some(serde_json::Value::String(value)) if !value.trim().is_empty() => value,
        Some(_) => return Err(invalid("value", fields::not_text("value"))),
    };
    if value.chars().count() > MAX_SECRET_CHARS || value.chars().any(char::is_control) {
        return Err(invalid("value", "an API key is one line of printable characters, at most 4096"));
    }
    Ok((provider, value))
}

/// An S3 sync source's access key pair (`provider` `aws`, the default): `value` is
/// `{access_key_id, secret_access_key}`, sealed as that JSON.
fn access_keys(body: NewSecret) -> Result<(String, String), KnowledgeError> {
    match body.provider {
        Some(p) if p.trim().is_empty() => return Err(invalid("provider", fields::not_text("provider"))),
        Some(p) if p != "aws" => {
            return Err(invalid("provider", "an aws_credentials secret's provider is aws"));
        }
        _ => {}
    }
    let keys = body.value.as_ref().and_then(sluice_sources::AccessKeys::from_json).ok_or_else(|| {
        invalid("value", "an aws_credentials value is {\"access_key_id\": …, \"secret_access_key\": …}")
    })?;
    let sealed = serde_json::json!({"access_key_id": keys.access_key_id, "secret_access_key": keys.secret_access_key});
    Ok(("aws".to_owned(), sealed.to_string()))
}

/// `POST /secrets`: storing a key needs `secrets:edit`; an `org` key needs an organization.
pub async fn create(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    if !caller.has_permission("secrets:edit") {
        return Err(KnowledgeError::Forbidden("storing a credential needs secrets:edit".to_owned()));
    }
    let mut body: NewSecret = fields::typed(request, fields::not_text)?;
    let name = fields::required(body.name.take(), "name")?;
    let kind = fields::required(body.kind.take(), "kind")?;
    let visibility = body.visibility.take();
    let (provider, value) = match kind.as_str() {
        "api_key" => api_key(state, caller, body).await?,
        "aws_credentials" => access_keys(body)?,
        _ => return Err(invalid("kind", "kind must be api_key or aws_credentials")),
    };
    let visibility = fields::required(visibility, "visibility")?;
    match visibility.as_str() {
        "private" => {}
        "org" if caller.org_id.is_some() => {}
        "org" => return Err(invalid("visibility", "an org key needs an organization")),
        _ => return Err(invalid("visibility", "visibility must be private or org")),
    }
    let id = Uuid::new_v4();
    // Bound to its kind: a role may be allowed to open one kind only.
    let binding = Binding { secret_id: id, org_id: caller.org_id, kind: sluice_vault::kind_named(&kind) };
    let sealed = state.vault.seal(binding, &value).await?;
    let meta = SecretMeta {
        id,
        name,
        kind,
        provider,
        visibility,
        owner_id: caller.user_id,
        org_id: caller.org_id,
        kind_bound: true,
        created_at: OffsetDateTime::now_utc(),
    };
    let sealed = SealedValue { sealed_key: sealed.sealed_key, nonce: sealed.nonce, ciphertext: sealed.ciphertext };
    let stored = state.db.insert_secret(&meta, &sealed).await?;
    Ok(json_response(201, &view(stored)))
}

/// `DELETE /secrets/{id}`: by its owner, or by `secrets:edit` for a key shared with the
/// organization. A key the caller cannot see is answered as one that does not exist. Bases
/// that chose it keep its id and, from then on, embed with no key (and say so).
pub async fn delete(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let not_found = || KnowledgeError::Missing("Secret");
    let secret = state.db.secret_meta(id).await?.ok_or_else(not_found)?;
    let ownership = SecretOwnership {
        owner_id: secret.owner_id,
        org_id: secret.org_id,
        shared_with_org: secret.visibility == "org",
    };
    if !access::may_see_secret(caller, &ownership) {
        return Err(not_found());
    }
    if secret.owner_id != caller.user_id && !caller.has_permission("secrets:edit") {
        return Err(KnowledgeError::Forbidden("deleting a shared credential needs secrets:edit".to_owned()));
    }
    state.db.delete_secret(id).await?;
    Ok(sluice_web::no_content())
}

/// `GET /secrets`: the keys the caller may see, never a value.
pub async fn list(state: &State, caller: &Caller) -> Result<Response<Body>, KnowledgeError> {
    let secrets: Vec<SecretView> = state
        .db
        .candidate_secrets(caller.user_id, caller.org_id)
        .await?
        .into_iter()
        .filter(|s| {
            let ownership =
                SecretOwnership { owner_id: s.owner_id, org_id: s.org_id, shared_with_org: s.visibility == "org" };
            access::may_see_secret(caller, &ownership)
        })
        .map(view)
        .collect();
    Ok(json_response(200, &serde_json::json!({ "secrets": secrets })))
}
