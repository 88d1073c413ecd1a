//! Knowledge bases: create (claiming the collection name), list, read and grant. Every
//! answer about one base goes through `access::decide`; a base the caller may not reach is
//! answered exactly like one that does not exist.

use crate::{KnowledgeError, State};
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sluice_domain::access::{self, Access, Scope};
use sluice_domain::{Caller, catalog, collection};
use sluice_store::{Claim, GrantedBase, KnowledgeBase};
use sluice_web::{body_bytes, json_response};
use time::OffsetDateTime;
use uuid::Uuid;

/// A base as the API answers it.
#[derive(Debug, Serialize)]
struct BaseView {
    id: Uuid,
    name: String,
    scope: &'static str,
    owner_id: Uuid,
    org_id: Option<Uuid>,
    collection_name: String,
    is_default: bool,
    embedding_provider: String,
    embedding_model: String,
    embedding_dim: i32,
    embedding_endpoint_id: Option<Uuid>,
    embedding_base_url: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    access: &'static str,
}

fn view(base: KnowledgeBase, access: Access) -> BaseView {
    BaseView {
        id: base.id,
        name: base.name,
        scope: base.scope.as_str(),
        owner_id: base.owner_id,
        org_id: base.org_id,
        collection_name: base.collection_name,
        is_default: base.is_default,
        embedding_provider: base.embedding_provider,
        embedding_model: base.embedding_model,
        embedding_dim: base.embedding_dim,
        embedding_endpoint_id: base.embedding_endpoint_id,
        embedding_base_url: base.embedding_base_url,
        created_at: base.created_at,
        access: if access == Access::Edit { "edit" } else { "view" },
    }
}

#[derive(Debug, Deserialize)]
struct CreateRequest {
    name: Option<serde_json::Value>,
    scope: Option<serde_json::Value>,
    collection_name: Option<serde_json::Value>,
    is_default: Option<bool>,
    embedding_provider: Option<serde_json::Value>,
    embedding_model: Option<serde_json::Value>,
    embedding_secret_id: Option<serde_json::Value>,
    embedding_endpoint_id: Option<Uuid>,
    embedding_base_url: Option<String>,
}

fn invalid(field: &'static str, message: impl Into<String>) -> KnowledgeError {
    KnowledgeError::Invalid { field, message: message.into() }
}

fn text(value: Option<serde_json::Value>, field: &'static str) -> Result<String, KnowledgeError> {
    match value {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(invalid(field, format!("{field} must be a non-empty string"))),
    }
}

/// A collection name from a display name: lower case, underscores, six random hex digits.
fn derived_collection_name(display: &str) -> String {
    let mut stem: String = display
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '_' })
        .collect();
    stem = stem.split('_').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("_");
    if !stem.starts_with(|c: char| c.is_ascii_lowercase()) {
        stem = format!("kb_{stem}");
    }
    stem.truncate(collection::MAX_COLLECTION_NAME_CHARS - 7);
    let stem = stem.trim_end_matches('_');
    format!("{stem}_{}", &Uuid::new_v4().simple().to_string()[..6])
}

/// `POST /kb`.
pub async fn create(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let body: CreateRequest =
        serde_json::from_slice(body_bytes(request)).map_err(|_| invalid("body", "the body must be a JSON object"))?;
    let name = text(body.name, "name")?;
    let scope_text = text(body.scope, "scope")?;
    let scope = Scope::parse(&scope_text).ok_or_else(|| invalid("scope", "scope must be personal, org or app"))?;
    let org_id = match scope {
        Scope::Personal => caller.org_id,
        Scope::Org if caller.org_id.is_none() => return Err(invalid("scope", "an org base needs an organization")),
        Scope::Org if !caller.has_permission("collections:edit") => {
            return Err(invalid("scope", "creating an org base needs collections:edit"));
        }
        Scope::Org => caller.org_id,
        Scope::App if !caller.app_admin => return Err(invalid("scope", "only the app admin creates app bases")),
        Scope::App => None,
    };
    let collection_name = match body.collection_name {
        None | Some(serde_json::Value::Null) => derived_collection_name(&name),
        other => text(other, "collection_name")?,
    };
    let schema_tables = state.db.schema_tables().await?;
    collection::validate_collection_name(&collection_name, &schema_tables)
        .map_err(|e| invalid("collection_name", e.message))?;
    let provider_id = text(body.embedding_provider, "embedding_provider")?;
    let provider = catalog::provider(&provider_id)
        .ok_or_else(|| invalid("embedding_provider", format!("{provider_id:?} is not in the embedding catalog")))?;
    let model_id = text(body.embedding_model, "embedding_model")?;
    let model = provider
        .models
        .iter()
        .find(|m| m.model == model_id)
        .ok_or_else(|| invalid("embedding_model", format!("{model_id:?} is not a model {provider_id} serves")))?;
    let has_secret = !matches!(body.embedding_secret_id, None | Some(serde_json::Value::Null));
    if provider.keyless && has_secret {
        return Err(invalid(
            "embedding_secret_id",
            format!("{provider_id} is keyless: name a local service, not a key"),
        ));
    }
    if !provider.keyless && scope == Scope::App {
        return Err(invalid("embedding_provider", "an app base embeds only through a keyless provider"));
    }
    if !provider.keyless {
        // Credentials are not stored yet: no key can be one the caller may use.
        return Err(invalid("embedding_secret_id", format!("{provider_id} needs a credential you can use")));
    }
    let base = KnowledgeBase {
        id: Uuid::new_v4(),
        name,
        scope,
        owner_id: caller.user_id,
        org_id,
        collection_name,
        is_default: body.is_default.unwrap_or(false),
        embedding_provider: provider.id.clone(),
        embedding_model: model.model.clone(),
        embedding_dim: i32::try_from(model.dim).unwrap_or(i32::MAX),
        embedding_endpoint_id: body.embedding_endpoint_id,
        embedding_base_url: body.embedding_base_url,
        created_at: OffsetDateTime::now_utc(),
    };
    let may_write = |held: &GrantedBase| access::decide(caller, &held.base.ownership(), held.grant) == Access::Edit;
    match state.db.claim_knowledge_base(&base, may_write).await? {
        Claim::Created(base) => Ok(json_response(201, &view(base, Access::Edit))),
        Claim::Held => Err(KnowledgeError::Conflict {
            field: "collection_name",
            message: "the collection name is taken by a knowledge base you cannot write".to_owned(),
        }),
        Claim::Disagrees { model, provider } => Err(invalid(
            "embedding_model",
            format!("the collection already embeds with {model} on {provider}; a base on it adopts that"),
        )),
    }
}

/// `GET /kb`: the bases the caller can read.
pub async fn list(state: &State, caller: &Caller) -> Result<Response<Body>, KnowledgeError> {
    let candidates = state.db.candidate_knowledge_bases(caller.user_id, caller.org_id).await?;
    let bases: Vec<BaseView> = candidates
        .into_iter()
        .filter_map(|held| {
            let access = access::decide(caller, &held.base.ownership(), held.grant);
            (access != Access::None).then(|| view(held.base, access))
        })
        .collect();
    Ok(json_response(200, &serde_json::json!({ "knowledge_bases": bases })))
}

/// The base if the caller reaches it at `at_least`; otherwise exactly "not found".
async fn reach(
    state: &State,
    caller: &Caller,
    id: Uuid,
    at_least: Access,
) -> Result<(KnowledgeBase, Access), KnowledgeError> {
    let held = state.db.knowledge_base(id, caller.user_id).await?.ok_or(KnowledgeError::NotFound)?;
    let access = access::decide(caller, &held.base.ownership(), held.grant);
    if access < at_least || access == Access::None {
        return Err(KnowledgeError::NotFound);
    }
    Ok((held.base, access))
}

/// `GET /kb/{id}`.
pub async fn get(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, access) = reach(state, caller, id, Access::View).await?;
    Ok(json_response(200, &view(base, access)))
}

#[derive(Debug, Deserialize)]
struct GrantRequest {
    user_id: Option<Uuid>,
    level: Option<String>,
}

/// `POST /kb/{id}/grants`: only a caller who may write the base grants on it.
pub async fn grant(
    state: &State,
    caller: &Caller,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let (base, _) = reach(state, caller, id, Access::Edit).await?;
    let body: GrantRequest =
        serde_json::from_slice(body_bytes(request)).map_err(|_| invalid("body", "the body must be a JSON object"))?;
    let user = body.user_id.ok_or_else(|| invalid("user_id", "user_id must be a UUID"))?;
    let level = match body.level.as_deref() {
        Some("view") => Access::View,
        Some("edit") => Access::Edit,
        _ => return Err(invalid("level", "level must be view or edit")),
    };
    state.db.grant_knowledge_base(base.id, user, level).await?;
    Ok(json_response(201, &serde_json::json!({ "kb_id": base.id, "user_id": user, "level": body.level })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_collection_name_is_valid_and_unique() {
        for display in ["Team Handbook", "2024 Reports!", "Ünïcode ☃", &"Long name ".repeat(10)] {
            let name = derived_collection_name(display);
            assert_eq!(collection::validate_collection_name(&name, &[]), Ok(()), "{display:?} -> {name}");
        }
        assert_ne!(derived_collection_name("x"), derived_collection_name("x"));
        assert!(derived_collection_name("Team Handbook").starts_with("team_handbook_"));
    }
}
