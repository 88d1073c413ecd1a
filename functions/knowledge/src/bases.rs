//! Knowledge bases: create (claiming the collection name), list, read, move, grant and
//! delete. Every answer about one base goes through `access::decide`; a base the caller may
//! not reach is answered exactly like one that does not exist.

use crate::State;
use crate::embedding::{self, Moment, Requested};
use crate::error::{KnowledgeError, invalid};
use crate::fields::{self, Field, NonBlank};
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_domain::access::{self, Access, Scope};
use sluice_domain::catalog::Model;
use sluice_domain::ingestion::{IngestionConfig, IngestionConfigError};
use sluice_domain::rerank::Rerank;
use sluice_domain::{Caller, catalog, collection};
use sluice_store::{Claim, Claimant, GrantedBase, KnowledgeBase};
use sluice_web::json_response;
use time::OffsetDateTime;
use uuid::Uuid;

/// A base as the API answers it.
#[derive(Debug, Serialize)]
pub struct BaseView {
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
    embedding_secret_id: Option<Uuid>,
    embedding_endpoint_id: Option<Uuid>,
    embedding_base_url: Option<String>,
    ingestion_config: IngestionConfig,
    text_search_language: String,
    rerank: Option<Rerank>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    access: &'static str,
}

pub fn view(base: KnowledgeBase, access: Access) -> BaseView {
    let ingestion_config = base.chunking();
    let rerank = base.rerank_setting();
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
        embedding_secret_id: base.embedding_secret_id,
        embedding_endpoint_id: base.embedding_endpoint_id,
        embedding_base_url: base.embedding_base_url,
        ingestion_config,
        text_search_language: base.text_search_language,
        rerank,
        created_at: base.created_at,
        access: if access == Access::Edit { "edit" } else { "view" },
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

/// `POST /kb`'s body (and `POST /rag/collections/{name}`'s, the name and scope filled in).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    #[serde(default)]
    pub name: Field<NonBlank>,
    #[serde(default)]
    pub scope: Field<NonBlank>,
    #[serde(default)]
    pub collection_name: Field<NonBlank>,
    #[serde(default)]
    is_default: Field<bool>,
    #[serde(default)]
    embedding_provider: Field<NonBlank>,
    #[serde(default)]
    embedding_model: Field<NonBlank>,
    #[serde(default)]
    embedding_secret_id: Field<Uuid>,
    #[serde(default)]
    embedding_endpoint_id: Field<Uuid>,
    #[serde(default)]
    embedding_base_url: Field<NonBlank>,
    #[serde(default)]
    ingestion_config: Field<Value>,
    #[serde(default)]
    text_search_language: Field<NonBlank>,
    #[serde(default)]
    rerank: Field<Value>,
}

/// `PATCH /kb/{id}`'s body: what may move (the width and language only as they are).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    #[serde(default)]
    name: Field<NonBlank>,
    #[serde(default)]
    embedding_provider: Field<NonBlank>,
    #[serde(default)]
    embedding_model: Field<NonBlank>,
    #[serde(default)]
    embedding_dim: Field<Value>,
    #[serde(default)]
    embedding_secret_id: Field<Uuid>,
    #[serde(default)]
    embedding_endpoint_id: Field<Uuid>,
    #[serde(default)]
    embedding_base_url: Field<NonBlank>,
    #[serde(default)]
    ingestion_config: Field<Value>,
    #[serde(default)]
    text_search_language: Field<NonBlank>,
    #[serde(default)]
    rerank: Field<Value>,
}

/// `POST /kb/{id}/grants`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    user_id: Option<Uuid>,
    level: Option<GrantLevel>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum GrantLevel {
    View,
    Edit,
}

/// How a base's field of the wrong type is refused.
pub fn wrong_type(field: &str) -> String {
    match field {
        "is_default" => "is_default must be true or false".to_owned(),
        "embedding_secret_id" | "embedding_endpoint_id" | "user_id" => format!("{field} must be a UUID"),
        "level" => "level must be view or edit".to_owned(),
        "embedding_dim" => "embedding_dim must be a whole number".to_owned(),
        other => fields::not_text(other),
    }
}

/// `text_search_language` as asked: one of PostgreSQL's own configurations.
fn text_search_language(given: &Field<NonBlank>) -> Result<Option<String>, KnowledgeError> {
    match given.clone().text() {
        Field::Set(language) if collection::TEXT_SEARCH_LANGUAGES.contains(&language.as_str()) => Ok(Some(language)),
        Field::Set(language) => Err(invalid(
            "text_search_language",
            format!(
                "{language:?} is not a text search configuration; use one of {} (simple for a language without one)",
                collection::TEXT_SEARCH_LANGUAGES.join(", ")
            ),
        )),
        Field::Null => Err(invalid("text_search_language", "a base always reads words with some configuration")),
        Field::Absent => Ok(None),
    }
}

/// A stored ingestion configuration from a request's field (`null`: the defaults), merged
/// onto the current one (or `model`'s defaults) and refused when `model` would cut its chunks
/// or its image description lends what the caller may not lend for a base of `org`.
async fn ingestion_config(
    (state, caller, org): (&State, &Caller, Option<Uuid>),
    given: &Field<Value>,
    current: Option<&Value>,
    model: &Model,
) -> Result<Field<Value>, KnowledgeError> {
    let refused = |e: IngestionConfigError| KnowledgeError::InvalidConfig { message: e.message(), fields: e.fields };
    match given {
        Field::Absent => Ok(Field::Absent),
        Field::Null => Ok(Field::Null),
        Field::Set(changes) => {
            let base = IngestionConfig::from_stored(current, Some(model))
                .unwrap_or_else(|_| IngestionConfig::default_for(Some(model)));
            let merged = IngestionConfig::merged(base, changes).map_err(refused)?;
            merged.fits(model).map_err(refused)?;
            merged.within(state.config.document_parse_time_limit).map_err(|e| refused(e.as_sent(changes)))?;
            if let Err((field, why)) =
                sluice_vision::check_requested(&state.db, caller, org, Some(changes), &merged).await?
            {
                return Err(KnowledgeError::InvalidConfig {
                    message: format!("{field}: {why}"),
                    fields: vec![(field, why)],
                });
            }
            Ok(Field::Set(merged.to_value()))
        }
    }
}

/// A rerank setting from a request's field (`null`: none), checked: its shape, and that the
/// caller may lend its key and endpoint to a base of `org`.
async fn rerank_setting(
    (state, caller, org): (&State, &Caller, Option<Uuid>),
    given: &Field<Value>,
) -> Result<Field<Value>, KnowledgeError> {
    let given = match given {
        Field::Absent => return Ok(Field::Absent),
        Field::Null => &Value::Null,
        Field::Set(value) => value,
    };
    let refused = |field: String, why: String| KnowledgeError::InvalidFields {
        message: format!("{field}: {why}"),
        fields: vec![(field, why)],
    };
    let setting = Rerank::parse(given).map_err(|(field, why)| {
        let field = if field == "rerank" { field.to_owned() } else { format!("rerank.{field}") };
        refused(field, why)
    })?;
    let Some(setting) = setting else { return Ok(Field::Null) };
    // Bedrock serves each reranking model in some Regions only: refused here, as its API would.
    if setting.provider.as_deref() == Some("bedrock")
        && let Some(why) = sluice_domain::rerank::bedrock_refuses(&setting.model, &state.region)
    {
        return Err(refused("rerank.model".to_owned(), why));
    }
    if let Err((field, why)) = sluice_rerank::target::check_lendable(&state.db, caller, org, &setting).await? {
        return Err(refused(field, why));
    }
    // Strings, ids and a number: it always serializes.
    Ok(Field::Set(serde_json::to_value(&setting).unwrap_or_default()))
}

/// The one answer to a claim of a name the caller may not take as asked: held by bases they
/// cannot write, or lending a key they may not lend.
fn name_taken() -> KnowledgeError {
    KnowledgeError::Conflict {
        field: "collection_name",
        message: "the collection name is taken by a knowledge base you cannot write, or whose embedding key you \
                  cannot use; choose another name, or name your own key (embedding_secret_id)"
            .to_owned(),
    }
}

/// `POST /kb`.
pub async fn create(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    create_from(state, caller, fields::typed(request, wrong_type)?).await
}

/// Creates a base from a JSON body: `POST /kb`, and `POST /rag/collections/{name}` with
/// the name and scope filled in.
pub async fn create_from(state: &State, caller: &Caller, body: CreateBody) -> Result<Response<Body>, KnowledgeError> {
    let name = fields::required(body.name.text().set(), "name")?;
    let scope_text = fields::required(body.scope.text().set(), "scope")?;
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
    let is_default = body.is_default.set().unwrap_or(false);
    let collection_name = body.collection_name.text().set().unwrap_or_else(|| derived_collection_name(&name));
    let schema_tables = state.db.schema_tables().await?;
    collection::validate_collection_name(&collection_name, &schema_tables)
        .map_err(|e| invalid("collection_name", e.message))?;

    // A name that exists lends its embedding, what the caller leaves out adopted — but only
    // to a caller who may write a base holding it (the claim's own rule, asked before
    // anything is adopted so a refusal tells nothing about the collection), and its key only
    // to one who may lend that key to this base. Every refusal reads the same.
    let may_write = |held: &GrantedBase| access::decide(caller, &held.base.ownership(), held.grant) == Access::Edit;
    let holders = state.db.bases_named(&collection_name, caller.user_id).await?;
    let held = match holders.iter().find(|h| may_write(h)) {
        Some(writable) => Some(&writable.base),
        None if holders.is_empty() => None,
        None => return Err(name_taken()),
    };
    let provider = match body.embedding_provider.text().set() {
        Some(provider) => provider,
        None => held.map(|b| b.embedding_provider.clone()).ok_or_else(|| {
            invalid("embedding_provider", "embedding_provider is required (GET /rag/embedding-models lists them)")
        })?,
    };
    let same_provider = held.filter(|b| b.embedding_provider == provider);
    let model = match body.embedding_model.text().set() {
        Some(model) => model,
        None => same_provider
            .map(|b| b.embedding_model.clone())
            .ok_or_else(|| invalid("embedding_model", "embedding_model is required"))?,
    };
    let secret = body.embedding_secret_id;
    let adopted_secret = same_provider.and_then(|b| b.embedding_secret_id).filter(|_| !secret.is_given());
    if let Some(adopted) = adopted_secret
        && embedding::lendable(state, caller, org_id, adopted).await?.is_none()
    {
        return Err(name_taken());
    }
    let requested = Requested {
        secret_id: secret.or_keep(same_provider.and_then(|b| b.embedding_secret_id)),
        endpoint_id: body.embedding_endpoint_id.or_keep(same_provider.and_then(|b| b.embedding_endpoint_id)),
        base_url: body.embedding_base_url.text().or_keep(same_provider.and_then(|b| b.embedding_base_url.clone())),
        provider,
        model,
        // An adopted key was checked above (`lendable`), and is for this provider, its
        // holder's; a key named in the request is checked by the resolution.
        secret_inherited: adopted_secret.is_some(),
    };
    let resolved = embedding::resolve(state, caller, scope, org_id, requested, Moment::Create).await?;
    let ingestion =
        ingestion_config((state, caller, org_id), &body.ingestion_config, None, resolved.model).await?.or_keep(None);
    let rerank = rerank_setting((state, caller, org_id), &body.rerank).await?.or_keep(None);
    // Left out, a name's collection lends the way it reads words, as it lends its embedding.
    let language = match text_search_language(&body.text_search_language)? {
        Some(language) => language,
        None => held.map_or(collection::DEFAULT_TEXT_SEARCH_LANGUAGE.to_owned(), |b| b.text_search_language.clone()),
    };
    let base = KnowledgeBase {
        id: Uuid::new_v4(),
        name,
        scope,
        owner_id: caller.user_id,
        org_id,
        collection_name,
        is_default,
        embedding_provider: resolved.provider.id.clone(),
        embedding_model: resolved.model.model.clone(),
        embedding_dim: i32::try_from(resolved.model.dim).unwrap_or(i32::MAX),
        embedding_endpoint_id: resolved.endpoint_id,
        embedding_base_url: resolved.base_url,
        embedding_secret_id: resolved.secret_id,
        ingestion_config: ingestion,
        text_search_language: language,
        rerank,
        created_at: OffsetDateTime::now_utc(),
    };
    let claimant = Claimant { user_id: caller.user_id, org_id: caller.org_id, app_admin: caller.app_admin };
    let conflict = |message: &str| KnowledgeError::Conflict { field: "collection_name", message: message.to_owned() };
    match state.db.claim_knowledge_base(&base, claimant, may_write).await? {
        Claim::Created(base) => Ok(json_response(201, &view(*base, Access::Edit))),
        Claim::Held => Err(name_taken()),
        Claim::Reserved => {
            Err(conflict("the collection name is reserved while its teardown finishes; try again later"))
        }
        Claim::Unfiled => Err(conflict("the collection name holds content no knowledge base owns")),
        Claim::Busy => Err(conflict("the collection name is busy with a write; try again in a moment")),
        Claim::Disagrees { model, provider } => Err(invalid(
            "embedding_model",
            format!("the collection already embeds with {model} on {provider}; a base on it adopts that"),
        )),
        Claim::ReadsWordsAs(language) => Err(invalid(
            "text_search_language",
            format!("the collection already reads its words as {language}; a base on it adopts that"),
        )),
    }
}

/// `GET /kb`: the bases the caller can read.
pub async fn list(state: &State, caller: &Caller) -> Result<Response<Body>, KnowledgeError> {
    let bases: Vec<BaseView> =
        reachable(state, caller).await?.into_iter().map(|(base, access)| view(base, access)).collect();
    Ok(json_response(200, &serde_json::json!({ "knowledge_bases": bases })))
}

/// Every base the caller can read, with their access, oldest first.
pub async fn reachable(state: &State, caller: &Caller) -> Result<Vec<(KnowledgeBase, Access)>, KnowledgeError> {
    Ok(state.db.reachable_bases(caller).await?)
}

/// The base if the caller reaches it at `at_least`; otherwise exactly "not found".
pub async fn reach(
    state: &State,
    caller: &Caller,
    id: Uuid,
    at_least: Access,
) -> Result<(KnowledgeBase, Access), KnowledgeError> {
    state.db.reach_base(caller, id, at_least).await?.ok_or(KnowledgeError::NotFound)
}

/// `GET /kb/{id}`.
pub async fn get(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, access) = reach(state, caller, id, Access::View).await?;
    Ok(json_response(200, &view(base, access)))
}

/// `PATCH /kb/{id}`: provider, endpoint, base URL, credential and ingestion configuration
/// move; the model and width never change (a move to another provider keeps the same
/// embedding space, under that provider's name for it).
pub async fn patch(
    state: &State,
    caller: &Caller,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let (base, access) = reach(state, caller, id, Access::Edit).await?;
    let body: PatchBody = fields::typed(request, wrong_type)?;
    if body.embedding_dim.is_given()
        && body.embedding_dim.clone().set().and_then(|dim| dim.as_i64()) != Some(i64::from(base.embedding_dim))
    {
        return Err(invalid("embedding_dim", format!("the width is fixed at creation ({})", base.embedding_dim)));
    }
    if let Some(language) = text_search_language(&body.text_search_language)?
        && language != base.text_search_language
    {
        return Err(invalid(
            "text_search_language",
            format!(
                "the collection's words are indexed as {} (fixed at creation); re-ingest into a new base to change it",
                base.text_search_language
            ),
        ));
    }
    let space = catalog::provider(&base.embedding_provider)
        .and_then(|p| p.model(&base.embedding_model))
        .map(|m| m.space.clone())
        .unwrap_or_else(|| base.embedding_model.clone());
    let provider_id = match body.embedding_provider.text() {
        Field::Set(provider) => provider,
        Field::Null => return Err(invalid("embedding_provider", "a base always has a provider")),
        Field::Absent => base.embedding_provider.clone(),
    };
    let provider = catalog::provider(&provider_id)
        .ok_or_else(|| invalid("embedding_provider", format!("{provider_id:?} is not in the embedding catalog")))?;
    let dim = u32::try_from(base.embedding_dim).unwrap_or_default();
    let model = provider.model_in_space(&space, dim).ok_or_else(|| {
        invalid("embedding_provider", format!("{provider_id} does not serve the collection's model ({space})"))
    })?;
    if let Field::Set(asked) = body.embedding_model.text()
        && asked != model.model
        && asked != base.embedding_model
    {
        return Err(invalid(
            "embedding_model",
            format!(
                "the model is fixed at creation ({}); re-ingest into a new base to change it",
                base.embedding_model
            ),
        ));
    }
    let moved = provider.id != base.embedding_provider;
    let keep = |value: Option<Uuid>| if moved { None } else { value };
    let secret = body.embedding_secret_id;
    let requested = Requested {
        provider: provider.id.clone(),
        model: model.model.clone(),
        secret_inherited: !secret.is_given() && !moved,
        secret_id: secret.or_keep(keep(base.embedding_secret_id)),
        endpoint_id: body.embedding_endpoint_id.or_keep(keep(base.embedding_endpoint_id)),
        base_url: body.embedding_base_url.text().or_keep(if moved { None } else { base.embedding_base_url.clone() }),
    };
    let resolved = embedding::resolve(state, caller, base.scope, base.org_id, requested, Moment::Move).await?;
    let ingestion = ingestion_config(
        (state, caller, base.org_id),
        &body.ingestion_config,
        base.ingestion_config.as_ref(),
        resolved.model,
    )
    .await?
    .or_keep(base.ingestion_config.clone());
    let rerank = rerank_setting((state, caller, base.org_id), &body.rerank).await?.or_keep(base.rerank.clone());
    let name = match body.name.text() {
        Field::Set(name) => name,
        Field::Null => return Err(invalid("name", "a base always has a name")),
        Field::Absent => base.name.clone(),
    };
    let updated = KnowledgeBase {
        name,
        embedding_provider: resolved.provider.id.clone(),
        embedding_model: resolved.model.model.clone(),
        embedding_secret_id: resolved.secret_id,
        embedding_endpoint_id: resolved.endpoint_id,
        embedding_base_url: resolved.base_url,
        ingestion_config: ingestion,
        rerank,
        ..base
    };
    let stored = state.db.update_knowledge_base(&updated).await?.ok_or(KnowledgeError::NotFound)?;
    Ok(json_response(200, &view(stored, access)))
}

/// `DELETE /kb/{id}`: the rows change in the request, with the teardown reservation and
/// its outbox row; the teardown function finishes after the commit.
pub async fn delete(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, _) = reach(state, caller, id, Access::Edit).await?;
    queue_teardown(state, base.id).await
}

pub async fn queue_teardown(state: &State, kb_id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (queued, payload) = state.db.queue_teardown(kb_id).await?.ok_or(KnowledgeError::NotFound)?;
    // After the commit: a failed send is the sweep's to repeat.
    match state.dispatcher.send(sluice_store::TEARDOWN_TOPIC, &payload).await {
        Ok(()) => {
            if let Err(error) = state.db.mark_dispatched(queued.teardown_id).await {
                tracing::warn!(error = %error, "teardown sent but not marked; the sweep may send it again");
            }
        }
        Err(error) => tracing::warn!(error = %error, "teardown not sent; the sweep will send it"),
    }
    Ok(json_response(
        202,
        &serde_json::json!({
            "kb_id": queued.kb_id,
            "collection_name": queued.collection_name,
            "teardown_id": queued.teardown_id,
            "status": "queued",
            "cleared": queued.cleared,
            "drops_table": queued.drop_table,
        }),
    ))
}

/// The base if the caller manages it (`access::manages`). One who cannot even read it is
/// told it does not exist; a reader or grantee who does not manage it, that they may not.
async fn managed(state: &State, caller: &Caller, id: Uuid) -> Result<KnowledgeBase, KnowledgeError> {
    let held = state.db.knowledge_base(id, caller.user_id).await?.ok_or(KnowledgeError::NotFound)?;
    let ownership = held.base.ownership();
    if access::decide(caller, &ownership, held.grant) < Access::Edit {
        return Err(KnowledgeError::NotFound);
    }
    if !access::manages(caller, &ownership, held.grant) {
        return Err(KnowledgeError::Forbidden(
            "only the base's owner, its organization's collection editors and the app admin grant or revoke access"
                .to_owned(),
        ));
    }
    Ok(held.base)
}

/// `POST /kb/{id}/grants`: only those who manage the base grant on it.
pub async fn grant(
    state: &State,
    caller: &Caller,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let base = managed(state, caller, id).await?;
    let body: GrantBody = fields::typed(request, wrong_type)?;
    let user = body.user_id.ok_or_else(|| invalid("user_id", wrong_type("user_id")))?;
    let level = match body.level {
        Some(GrantLevel::View) => Access::View,
        Some(GrantLevel::Edit) => Access::Edit,
        None => return Err(invalid("level", wrong_type("level"))),
    };
    state.db.grant_knowledge_base(base.id, user, level).await?;
    let level = if level == Access::Edit { "edit" } else { "view" };
    Ok(json_response(201, &serde_json::json!({ "kb_id": base.id, "user_id": user, "level": level })))
}

/// `DELETE /kb/{id}/grants/{user_id}`: `204`, or `404` naming the grant when the user held
/// none; only those who manage the base revoke.
pub async fn revoke(state: &State, caller: &Caller, id: Uuid, user: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let base = managed(state, caller, id).await?;
    if !state.db.revoke_knowledge_base(base.id, user).await? {
        return Err(KnowledgeError::Missing("Grant"));
    }
    Ok(sluice_web::no_content())
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

    /// The refusal a body gets, as (field, message).
    fn refused<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: &str) -> (String, String) {
        match fields::typed_bytes::<T>(body.as_bytes(), wrong_type) {
            Err(KnowledgeError::Invalid { field, message }) => (field, message),
            Err(KnowledgeError::InvalidFields { message, mut fields }) => (fields.remove(0).0, message),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn a_base_body_tells_null_from_absent_and_blank_from_text() {
        let body: CreateBody = fields::typed_bytes(
            br#"{"name": "Handbook", "embedding_secret_id": null, "rerank": null, "is_default": true}"#,
            wrong_type,
        )
        .expect("read");
        assert_eq!(body.name.text(), Field::Set("Handbook".to_owned()));
        assert_eq!(body.embedding_secret_id, Field::Null, "null names no key (adopting none)");
        assert_eq!(body.embedding_endpoint_id, Field::Absent, "absent adopts the collection's");
        assert_eq!(body.rerank, Field::Null, "null clears the reranker");
        assert_eq!(body.ingestion_config, Field::Absent);
        assert_eq!(body.is_default, Field::Set(true));
        let patch: PatchBody =
            fields::typed_bytes(br#"{"embedding_dim": null, "text_search_language": "german"}"#, wrong_type)
                .expect("read");
        assert_eq!(patch.embedding_dim, Field::Null, "a null width is given, and judged against the base's");
        assert_eq!(patch.text_search_language.text(), Field::Set("german".to_owned()));
    }

    #[test]
    fn a_base_field_of_the_wrong_type_or_unknown_is_refused_naming_it() {
        for (body, field, message) in [
            (r#"{"name": "  "}"#, "name", "name must be a non-empty string"),
            (r#"{"name": 7}"#, "name", "name must be a non-empty string"),
            (r#"{"is_default": "yes"}"#, "is_default", "is_default must be true or false"),
            (r#"{"embedding_secret_id": "not-a-uuid"}"#, "embedding_secret_id", "embedding_secret_id must be a UUID"),
            (r#"{"embedding_endpoint_id": 5}"#, "embedding_endpoint_id", "embedding_endpoint_id must be a UUID"),
            (r#"{"chunk_size": 500}"#, "chunk_size", "chunk_size is not a field of this request"),
            (r#"{"embedding_dim": 384}"#, "embedding_dim", "embedding_dim is not a field of this request"),
        ] {
            assert_eq!(refused::<CreateBody>(body), (field.to_owned(), message.to_owned()), "{body}");
        }
        for (body, field, message) in [
            (r#"{"scope": "org"}"#, "scope", "scope is not a field of this request"),
            (r#"{"embedding_provider": ""}"#, "embedding_provider", "embedding_provider must be a non-empty string"),
        ] {
            assert_eq!(refused::<PatchBody>(body), (field.to_owned(), message.to_owned()), "{body}");
        }
        for (body, field, message) in [
            (r#"{"user_id": "x", "level": "view"}"#, "user_id", "user_id must be a UUID"),
            (
                r#"{"user_id": "7f1c8a52-0d4e-4a51-9a38-2b7f8f0c9e11", "level": "own"}"#,
                "level",
                "level must be view or edit",
            ),
            (r#"{"user": "x"}"#, "user", "user is not a field of this request"),
        ] {
            assert_eq!(refused::<GrantBody>(body), (field.to_owned(), message.to_owned()), "{body}");
        }
        assert_eq!(refused::<CreateBody>("[1]"), ("body".to_owned(), "the body must be a JSON object".to_owned()));
    }
}
