//! A knowledge base's S3 sync sources: create, list, read, change and delete them, start a
//! run, and read the runs' logs. Writing needs write access to the base, as an upload does;
//! reading needs view access; every refusal of a base, or of a source that is not that
//! base's, is the base's "not found". Creating, changing and deleting write an audit row
//! naming the actor, the collection and the credential's id, never the configuration.

use crate::State;
use crate::error::{KnowledgeError, invalid};
use crate::fields;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_domain::Caller;
use sluice_domain::access::{self, Access, SecretOwnership};
use sluice_domain::sync::{S3Location, Schedule, SyncMode, check_role_account, check_role_arn, new_external_id};
use sluice_store::{Audit, KnowledgeBase, RunScope, RunStart, SYNC_RUN_TOPIC, SyncSource};
use sluice_web::json_response;
use time::OffsetDateTime;
use uuid::Uuid;

/// A source as the API answers it: where it reads, which credential it names (never a
/// value), and — to those who may edit it — the external id its role's trust policy must
/// require.
#[derive(Debug, Serialize)]
struct SourceView {
    id: Uuid,
    /// `None` for a detached source (its base was deleted).
    kb_id: Option<Uuid>,
    collection_name: Option<String>,
    /// Whether it runs: attached to a base.
    active: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    detached_at: Option<OffsetDateTime>,
    name: String,
    #[serde(rename = "type")]
    source_type: &'static str,
    config: S3Location,
    credential: Value,
    sync_mode: &'static str,
    schedule: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    next_run_at: Option<OffsetDateTime>,
    event_driven: bool,
    organizational_unit: Option<String>,
    max_removal_percent: i32,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
}

fn view(source: SyncSource, may_edit: bool) -> SourceView {
    let credential = match (&source.role_arn, source.secret_id) {
        (Some(role), _) if may_edit => serde_json::json!({ "role_arn": role, "external_id": source.external_id }),
        (Some(role), _) => serde_json::json!({ "role_arn": role }),
        (None, secret) => serde_json::json!({ "secret_id": secret }),
    };
    SourceView {
        id: source.id,
        kb_id: source.kb_id,
        collection_name: source.kb_id.map(|_| source.collection_name),
        active: source.kb_id.is_some(),
        detached_at: source.detached_at,
        name: source.name,
        source_type: "s3",
        config: source.location,
        credential,
        sync_mode: source.sync_mode.as_str(),
        schedule: source.schedule,
        next_run_at: source.next_run_at,
        event_driven: source.event_driven,
        organizational_unit: source.organizational_unit,
        max_removal_percent: source.max_removal_percent,
        created_at: source.created_at,
    }
}

/// The base, when the caller reaches it at `at_least`; otherwise the base's "not found".
async fn base_for(
    state: &State,
    caller: &Caller,
    kb_id: Uuid,
    at_least: Access,
) -> Result<KnowledgeBase, KnowledgeError> {
    Ok(base_and_access(state, caller, kb_id, at_least).await?.0)
}

/// The base and the caller's access to it, when that is at least `at_least`.
async fn base_and_access(
    state: &State,
    caller: &Caller,
    kb_id: Uuid,
    at_least: Access,
) -> Result<(KnowledgeBase, Access), KnowledgeError> {
    let held = state.db.knowledge_base(kb_id, caller.user_id).await?.ok_or(KnowledgeError::NotFound)?;
    let access = access::decide(caller, &held.base.ownership(), held.grant);
    if access < at_least {
        return Err(KnowledgeError::NotFound);
    }
    Ok((held.base, access))
}

/// The source, when it is this base's; another base's source is answered as missing.
async fn source_of(state: &State, base: &KnowledgeBase, id: Uuid) -> Result<SyncSource, KnowledgeError> {
    state.db.sync_source(id).await?.filter(|s| s.kb_id == Some(base.id)).ok_or(KnowledgeError::Missing("Sync source"))
}

/// A refusal naming a field that is not a fixed name (`config.bucket`).
fn refused(field: impl Into<String>, message: impl Into<String>) -> KnowledgeError {
    let message = message.into();
    KnowledgeError::InvalidFields { message: message.clone(), fields: vec![(field.into(), message)] }
}

/// The credential a source names: `{role_arn}` or `{secret_id}`, exactly one. A secret
/// must be an `aws_credentials` pair the caller may see, of the base's organization.
async fn credential(
    state: &State,
    caller: &Caller,
    base: &KnowledgeBase,
    value: &Value,
) -> Result<(Option<String>, Option<Uuid>), KnowledgeError> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid("credential", "credential is {\"role_arn\": …} or {\"secret_id\": …}"))?;
    if let Some(unknown) = object.keys().find(|k| !["role_arn", "secret_id"].contains(&k.as_str())) {
        return Err(refused(
            format!("credential.{unknown}"),
            "a source names its credential by role_arn or secret_id; a key pair goes in the vault (POST /secrets)",
        ));
    }
    match (object.get("role_arn"), object.get("secret_id")) {
        (Some(Value::String(role)), None) => {
            check_role_arn(role).map_err(|why| refused("credential.role_arn", why))?;
            check_role_account(role, state.config.deployment_account_id.as_deref())
                .map_err(|why| refused("credential.role_arn", why))?;
            Ok((Some(role.clone()), None))
        }
        (None, Some(Value::String(id))) => {
            let not_found = || refused("credential.secret_id", "no aws_credentials secret you may use has this id");
            let id = Uuid::parse_str(id).map_err(|_| not_found())?;
            let secret = state.db.secret_meta(id).await?.ok_or_else(not_found)?;
            let ownership = SecretOwnership {
                owner_id: secret.owner_id,
                org_id: secret.org_id,
                shared_with_org: secret.visibility == "org",
            };
            if !access::may_see_secret(caller, &ownership) || secret.org_id != base.org_id {
                return Err(not_found());
            }
            if secret.kind != "aws_credentials" {
                return Err(refused("credential.secret_id", "the secret is not an aws_credentials key pair"));
            }
            Ok((None, Some(id)))
        }
        _ => Err(invalid("credential", "credential names exactly one of role_arn and secret_id")),
    }
}

/// The most sources one base may have: each is listed, scheduled and audited on its own.
pub const MAX_SOURCES_PER_BASE: usize = 20;

/// The most event-driven sources one tenant may point at one bucket: every event in that
/// bucket becomes a job per source, so this bounds what one event costs.
pub const MAX_EVENT_SOURCES_PER_BUCKET: i64 = 10;

/// Refuses a source that would pass either cap.
async fn within_caps(
    state: &State,
    base: &KnowledgeBase,
    source: &SyncSource,
    new: bool,
) -> Result<(), KnowledgeError> {
    if new && state.db.sync_sources_of(base.id).await?.len() >= MAX_SOURCES_PER_BASE {
        return Err(KnowledgeError::Conflict {
            field: "kb_id",
            message: format!("a knowledge base has at most {MAX_SOURCES_PER_BASE} sync sources; delete one first"),
        });
    }
    if source.event_driven {
        let others = state
            .db
            .tenant_event_sources_on(&source.location.bucket, source.org_id, source.created_by, source.id)
            .await?;
        if others >= MAX_EVENT_SOURCES_PER_BUCKET {
            return Err(invalid(
                "event_driven",
                format!(
                    "at most {MAX_EVENT_SOURCES_PER_BUCKET} event-driven sources may read one bucket; \
                     widen an existing source's prefix or schedule this one instead"
                ),
            ));
        }
    }
    Ok(())
}

/// A source about to follow its bucket's events is checked first, with its own credential:
/// the bucket exists, answers in the region the source names, and lets the credential in.
/// Otherwise every event would fail in the parse queue, out of the owner's sight.
async fn reachable(state: &State, source: &SyncSource) -> Result<(), KnowledgeError> {
    let client = match state.remote.client_for(&state.db, &state.vault, source).await {
        Ok(client) => client,
        Err(error) => return Err(source_refusal(error)),
    };
    client.check_bucket().await.map_err(source_refusal)
}

/// How a check of a source's bucket reads to the caller: the field to fix, or a retry.
fn source_refusal(error: sluice_sources::SourceError) -> KnowledgeError {
    use sluice_sources::SourceError as E;
    let field = match &error {
        _ if error.is_transient() => {
            tracing::warn!(error = %error, "a source's bucket could not be checked");
            return KnowledgeError::ProviderBusy {
                message: "the source's bucket could not be reached to check it; retry shortly".to_owned(),
                retry_after_secs: 5,
            };
        }
        E::NoSuchBucket(_) => "config.bucket",
        E::WrongRegion { .. } => "config.region",
        _ => "credential",
    };
    refused(field, format!("an event-driven source must read its bucket first: {error}"))
}

/// A source's body, as `POST` and `PATCH` send it; every field optional here (create
/// requires its own). `type`, `config` and `credential` count as given even as `null` (and
/// are judged); `schedule` and `organizational_unit` are cleared by `null`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceBody {
    #[serde(rename = "type", default, deserialize_with = "fields::present")]
    kind: Option<Value>,
    name: Option<String>,
    #[serde(default, deserialize_with = "fields::present")]
    config: Option<Value>,
    #[serde(default, deserialize_with = "fields::present")]
    credential: Option<Value>,
    sync_mode: Option<String>,
    #[serde(default, deserialize_with = "fields::nullable")]
    schedule: Option<Option<String>>,
    #[serde(default, deserialize_with = "fields::nullable")]
    organizational_unit: Option<Option<String>>,
    #[serde(default, deserialize_with = "fields::nullable")]
    event_driven: Option<Option<bool>>,
    #[serde(default, deserialize_with = "fields::nullable")]
    max_removal_percent: Option<Option<u64>>,
    /// Only a patch names it, and only as its base's own collection.
    #[serde(default, deserialize_with = "fields::present")]
    collection_name: Option<Value>,
}

const SCHEDULE_RULE: &str = "a schedule is rate(<n> <unit>) or cron(<six fields>)";
const UNIT_RULE: &str = "an organizational unit is text of at most 200 characters";
const EVENT_DRIVEN_RULE: &str = "event_driven must be true or false";
const REMOVAL_RULE: &str = "max_removal_percent is a whole number from 0 to 100";

/// How a source field of the wrong type is refused.
fn wrong_type(field: &str) -> String {
    match field {
        "schedule" => SCHEDULE_RULE.to_owned(),
        "organizational_unit" => UNIT_RULE.to_owned(),
        "event_driven" => EVENT_DRIVEN_RULE.to_owned(),
        "max_removal_percent" => REMOVAL_RULE.to_owned(),
        other => fields::not_text(other),
    }
}

/// A text field that, given, must not be blank.
fn given_text<'a>(value: &'a Option<String>, field: &'static str) -> Result<Option<&'a String>, KnowledgeError> {
    match value {
        Some(text) if text.trim().is_empty() => Err(invalid(field, fields::not_text(field))),
        other => Ok(other.as_ref()),
    }
}

/// The credential `source` names, as a request would name it (to be judged again).
fn existing_credential(source: &SyncSource) -> Option<Value> {
    match (&source.role_arn, source.secret_id) {
        (Some(role), _) => Some(serde_json::json!({ "role_arn": role })),
        (None, Some(id)) => Some(serde_json::json!({ "secret_id": id })),
        (None, None) => None,
    }
}

/// Applies a body's fields to `source` (every field optional: the caller fills defaults).
async fn apply_fields(
    state: &State,
    caller: &Caller,
    base: &KnowledgeBase,
    body: &SourceBody,
    source: &mut SyncSource,
) -> Result<(), KnowledgeError> {
    match &body.kind {
        None => {}
        Some(Value::String(t)) if t == "s3" => {}
        Some(_) => return Err(invalid("type", "type must be s3, the one connector of this deployment")),
    }
    if let Some(name) = given_text(&body.name, "name")? {
        if name.chars().count() > 200 {
            return Err(invalid("name", "a name is at most 200 characters"));
        }
        source.name = name.clone();
    }
    let previous_location = source.location.clone();
    if let Some(config) = &body.config {
        source.location = S3Location::from_config(config).map_err(|r| refused(r.field, r.message))?;
    }
    // A source moved to another bucket, prefix or region is a credential change: what its
    // credential was lent to read is not what it reads now.
    let moved = source.location != previous_location;
    let named = match &body.credential {
        Some(value) => Some(value.clone()),
        None if moved => existing_credential(source),
        None => None,
    };
    if let Some(value) = named {
        let previous_role = source.role_arn.clone();
        (source.role_arn, source.secret_id) = credential(state, caller, base, &value).await?;
        // A new role (or the first), or a new place, gets a new id: a trust policy written
        // for the old id never carries over to another role or another bucket.
        source.external_id = match &source.role_arn {
            Some(role) if moved || previous_role.as_ref() != Some(role) || source.external_id.is_none() => {
                Some(new_external_id())
            }
            Some(_) => source.external_id.take(),
            None => None,
        };
    }
    if let Some(mode) = given_text(&body.sync_mode, "sync_mode")? {
        source.sync_mode =
            SyncMode::parse(mode).ok_or_else(|| invalid("sync_mode", "sync_mode is new_only, update_only or full"))?;
    }
    match &body.schedule {
        None => {}
        Some(None) => source.schedule = None,
        Some(Some(schedule)) if !schedule.trim().is_empty() => {
            Schedule::parse(schedule).map_err(|why| invalid("schedule", why))?;
            source.schedule = Some(schedule.clone());
        }
        Some(Some(_)) => return Err(invalid("schedule", SCHEDULE_RULE)),
    }
    match &body.organizational_unit {
        None => {}
        Some(None) => source.organizational_unit = None,
        Some(Some(unit)) if !unit.trim().is_empty() && unit.chars().count() <= 200 => {
            source.organizational_unit = Some(unit.trim().to_owned())
        }
        Some(Some(_)) => return Err(invalid("organizational_unit", UNIT_RULE)),
    }
    match body.event_driven {
        None => {}
        Some(Some(flag)) => source.event_driven = flag,
        Some(None) => return Err(invalid("event_driven", EVENT_DRIVEN_RULE)),
    }
    match body.max_removal_percent {
        None => {}
        Some(Some(percent)) if percent <= 100 => source.max_removal_percent = i32::try_from(percent).unwrap_or(50),
        Some(_) => return Err(invalid("max_removal_percent", REMOVAL_RULE)),
    }
    Ok(())
}

/// `POST /kb/{kb_id}/sync-sources`.
pub async fn create(
    state: &State,
    caller: &Caller,
    kb_id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let base = base_for(state, caller, kb_id, Access::Edit).await?;
    let body: SourceBody = fields::typed(request, wrong_type)?;
    if body.collection_name.is_some() {
        return Err(fields::not_a_field("collection_name"));
    }
    let given = [
        ("type", body.kind.is_some()),
        ("name", body.name.is_some()),
        ("config", body.config.is_some()),
        ("credential", body.credential.is_some()),
    ];
    if let Some((required, _)) = given.iter().find(|(_, given)| !given) {
        return Err(refused(*required, format!("{required} is required")));
    }
    let now = OffsetDateTime::now_utc();
    let mut source = SyncSource {
        id: Uuid::new_v4(),
        kb_id: Some(base.id),
        collection_name: base.collection_name.clone(),
        org_id: base.org_id,
        created_by: caller.user_id,
        name: String::new(),
        location: S3Location { bucket: String::new(), prefix: String::new(), region: None },
        role_arn: None,
        external_id: None,
        secret_id: None,
        sync_mode: SyncMode::NewOnly,
        schedule: None,
        next_run_at: None,
        event_driven: false,
        organizational_unit: None,
        max_removal_percent: 50,
        created_at: now,
        updated_at: now,
        detached_at: None,
    };
    apply_fields(state, caller, &base, &body, &mut source).await?;
    within_caps(state, &base, &source, true).await?;
    if source.event_driven {
        reachable(state, &source).await?;
    }
    let who = Audit { actor_id: caller.user_id, previous_collection: None };
    if !state.db.insert_sync_source(&source, &who).await? {
        return Err(KnowledgeError::NotFound);
    }
    let stored = state.db.sync_source(source.id).await?.ok_or(KnowledgeError::NotFound)?;
    Ok(json_response(201, &view(stored, true)))
}

/// `GET /kb/{kb_id}/sync-sources`.
pub async fn list(state: &State, caller: &Caller, kb_id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, access) = base_and_access(state, caller, kb_id, Access::View).await?;
    let may_edit = access >= Access::Edit;
    let sources: Vec<SourceView> =
        state.db.sync_sources_of(base.id).await?.into_iter().map(|s| view(s, may_edit)).collect();
    Ok(json_response(200, &serde_json::json!({ "sources": sources })))
}

/// `GET /kb/{kb_id}/sync-sources/{id}`.
pub async fn get(state: &State, caller: &Caller, kb_id: Uuid, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, access) = base_and_access(state, caller, kb_id, Access::View).await?;
    Ok(json_response(200, &view(source_of(state, &base, id).await?, access >= Access::Edit)))
}

/// `PATCH /kb/{kb_id}/sync-sources/{id}`: a `collection_name` naming another base is
/// refused (repointing a source changes who can read what it ingests).
pub async fn patch(
    state: &State,
    caller: &Caller,
    kb_id: Uuid,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let base = base_for(state, caller, kb_id, Access::Edit).await?;
    let mut source = source_of(state, &base, id).await?;
    let body: SourceBody = fields::typed(request, wrong_type)?;
    if let Some(name) = &body.collection_name
        && name.as_str() != Some(base.collection_name.as_str())
    {
        return Err(invalid(
            "collection_name",
            "a source of this base feeds this base's collection; it cannot be repointed from here",
        ));
    }
    let before = (source.event_driven, source.location.clone(), source.role_arn.clone(), source.secret_id);
    apply_fields(state, caller, &base, &body, &mut source).await?;
    within_caps(state, &base, &source, false).await?;
    let after = (source.event_driven, source.location.clone(), source.role_arn.clone(), source.secret_id);
    if source.event_driven && before != after {
        reachable(state, &source).await?;
    }
    let who = Audit { actor_id: caller.user_id, previous_collection: None };
    // A move is audited as one: who pointed the source's credential at what.
    let action = if source.location != before.1 { "sync_source.moved" } else { "sync_source.updated" };
    if !state.db.update_sync_source(&source, &who, action).await? {
        return Err(KnowledgeError::Missing("Sync source"));
    }
    let stored = state.db.sync_source(id).await?.ok_or(KnowledgeError::Missing("Sync source"))?;
    Ok(json_response(200, &view(stored, true)))
}

/// `DELETE /kb/{kb_id}/sync-sources/{id}`: its claims go, and the documents no other
/// source claims are removed with their chunks.
pub async fn delete(state: &State, caller: &Caller, kb_id: Uuid, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let base = base_for(state, caller, kb_id, Access::Edit).await?;
    source_of(state, &base, id).await?;
    let who = Audit { actor_id: caller.user_id, previous_collection: None };
    // The removed documents' stored objects were queued for removal with the delete; the
    // sweep runs the queue.
    let Some((removed, _removal)) = state.db.delete_sync_source(id, &who).await? else {
        return Err(KnowledgeError::Missing("Sync source"));
    };
    Ok(json_response(200, &serde_json::json!({ "deleted": true, "documents_removed": removed })))
}

/// `POST …/sync`'s body: `null` is refused, as a value that is not true or false.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunBody {
    #[serde(default, deserialize_with = "fields::nullable")]
    confirm_removals: Option<Option<bool>>,
}

/// `POST /kb/{kb_id}/sync-sources/{id}/sync` `{confirm_removals?}`: `202` with the run's
/// id; the log row exists before the work. A run still going is not started twice (`409`).
pub async fn sync(
    state: &State,
    caller: &Caller,
    kb_id: Uuid,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let base = base_for(state, caller, kb_id, Access::Edit).await?;
    let source = source_of(state, &base, id).await?;
    let confirm = if sluice_web::body_bytes(request).is_empty() {
        false
    } else {
        let body: RunBody = fields::typed(request, |_| "confirm_removals must be true or false".to_owned())?;
        match body.confirm_removals {
            None => false,
            Some(Some(flag)) => flag,
            Some(None) => return Err(invalid("confirm_removals", "confirm_removals must be true or false")),
        }
    };
    match state.db.start_sync_run(source.id, "manual", confirm).await? {
        RunStart::Started { run_id, outbox_id } => {
            let payload = serde_json::json!({ "run_id": run_id, "step": 0 });
            match state.dispatcher.send(SYNC_RUN_TOPIC, &payload).await {
                Ok(()) => state.db.mark_dispatched(outbox_id).await?,
                Err(error) => tracing::warn!(error = %error, %run_id, "run not sent; the sweep sends it"),
            }
            Ok(json_response(202, &serde_json::json!({ "run_id": run_id, "status": "running" })))
        }
        RunStart::AlreadyRunning(run_id) => Err(KnowledgeError::Conflict {
            field: "source",
            message: format!("a run of this source is still going ({run_id}); it is not started twice"),
        }),
        RunStart::SourceGone => Err(KnowledgeError::Missing("Sync source")),
    }
}

/// A page of `scope`'s runs, as the query's `limit` and `offset` ask.
async fn logs_of(state: &State, scope: RunScope<'_>, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let (limit, offset) = page(request)?;
    let (runs, total) = state.db.sync_runs(scope, limit, offset).await?;
    Ok(json_response(200, &serde_json::json!({ "logs": runs, "total": total, "limit": limit, "offset": offset })))
}

/// `limit` (1–100, default 20) and `offset` from the query.
fn page(request: &Request) -> Result<(i64, i64), KnowledgeError> {
    let query = request.query_string_parameters();
    let number = |name: &'static str, default: i64, max: i64| match query.first(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| (0..=max).contains(n))
            .ok_or_else(|| invalid(name, format!("{name} is a whole number from 0 to {max}"))),
    };
    Ok((number("limit", 20, 100)?.max(1), number("offset", 0, i64::MAX)?))
}

/// `GET /kb/{kb_id}/sync-sources/{id}/logs`: another base's source is `404`, not an empty list.
pub async fn logs(
    state: &State,
    caller: &Caller,
    kb_id: Uuid,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let base = base_for(state, caller, kb_id, Access::View).await?;
    let source = source_of(state, &base, id).await?;
    logs_of(state, RunScope::Source(source.id), request).await
}

/// `GET /rag/sync/logs`: the runs of every base the caller can view.
pub async fn all_logs(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let bases: Vec<Uuid> = state
        .db
        .candidate_knowledge_bases(caller.user_id, caller.org_id)
        .await?
        .into_iter()
        .filter(|held| access::decide(caller, &held.base.ownership(), held.grant) >= Access::View)
        .map(|held| held.base.id)
        .collect();
    logs_of(state, RunScope::Bases(&bases), request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Result<SourceBody, sluice_web::BodyRefusal> {
        sluice_web::typed_body(body.as_bytes())
    }

    #[test]
    fn a_source_body_tells_null_from_absent() {
        let body = read(r#"{"schedule": null, "credential": null, "event_driven": null}"#).expect("read");
        assert_eq!(body.schedule, Some(None), "null clears the schedule");
        assert_eq!(body.organizational_unit, None, "absent keeps the unit");
        assert_eq!(body.credential, Some(Value::Null), "a null credential is given, and judged");
        assert_eq!(body.config, None);
        assert_eq!(body.event_driven, Some(None), "a null flag is given, and refused");
        let body = read(r#"{"type": "s3", "max_removal_percent": 20, "organizational_unit": "Ops"}"#).expect("read");
        assert_eq!(body.kind, Some(Value::String("s3".to_owned())));
        assert_eq!(
            (body.max_removal_percent, body.organizational_unit),
            (Some(Some(20)), Some(Some("Ops".to_owned())))
        );
    }

    #[test]
    fn a_source_field_of_the_wrong_type_is_refused_by_its_rule() {
        for (body, field, rule) in [
            (r#"{"max_removal_percent": 50.5}"#, "max_removal_percent", REMOVAL_RULE),
            (r#"{"max_removal_percent": -1}"#, "max_removal_percent", REMOVAL_RULE),
            (r#"{"schedule": 5}"#, "schedule", SCHEDULE_RULE),
            (r#"{"organizational_unit": ["Ops"]}"#, "organizational_unit", UNIT_RULE),
            (r#"{"event_driven": "yes"}"#, "event_driven", EVENT_DRIVEN_RULE),
        ] {
            let refused = read(body).expect_err(body);
            assert_eq!(refused.field(), Some(field), "{body}");
            assert_eq!(wrong_type(field), rule);
        }
        assert_eq!(wrong_type("name"), "name must be a non-empty string");
        assert_eq!(read(r#"{"colour": 1}"#).expect_err("unknown").unknown.as_deref(), Some("colour"));
    }
}

/// A source by its id alone, and the caller's access to it: an attached source through its
/// base (at least `at_least`); a detached one to whoever created it and to whoever manages
/// its organization's collections. Anything else is "not found".
async fn reach_source(
    state: &State,
    caller: &Caller,
    id: Uuid,
    at_least: Access,
) -> Result<(SyncSource, Access), KnowledgeError> {
    let missing = || KnowledgeError::Missing("Sync source");
    let source = state.db.sync_source(id).await?.ok_or_else(missing)?;
    match source.kb_id {
        Some(kb_id) => {
            let (_, access) = base_and_access(state, caller, kb_id, at_least).await.map_err(|_| missing())?;
            Ok((source, access))
        }
        None => {
            let manages =
                source.org_id.is_some() && source.org_id == caller.org_id && caller.has_permission("collections:edit");
            if source.created_by == caller.user_id || manages { Ok((source, Access::Edit)) } else { Err(missing()) }
        }
    }
}

/// `GET /rag/sync/sources`: every source the caller reaches, the detached ones (whose base
/// was deleted) included, oldest first.
pub async fn list_all(state: &State, caller: &Caller) -> Result<Response<Body>, KnowledgeError> {
    let mut views = Vec::new();
    for (base, access) in crate::bases::reachable(state, caller).await? {
        for source in state.db.sync_sources_of(base.id).await? {
            views.push(view(source, access >= Access::Edit));
        }
    }
    // The query applies `reach_source`'s rule for detached sources: the creator's, and the
    // organization's to whoever manages its collections.
    let org = caller.org_id.filter(|_| caller.has_permission("collections:edit"));
    for source in state.db.detached_sync_sources(org, caller.user_id).await? {
        views.push(view(source, true));
    }
    views.sort_by_key(|v| v.created_at);
    Ok(json_response(200, &serde_json::json!({ "sources": views })))
}

/// `GET /rag/sync/sources/{id}`.
pub async fn get_any(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (source, access) = reach_source(state, caller, id, Access::View).await?;
    Ok(json_response(200, &view(source, access >= Access::Edit)))
}

/// `PATCH /rag/sync/sources/{id}`'s body: the collection the source is to feed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepointBody {
    collection_name: Option<String>,
}

/// `PATCH /rag/sync/sources/{id}` `{collection_name}`: points the source at another
/// collection (the caller's base of that name they may edit) — a detached source is attached
/// and runs again on its schedule; an attached one moves, and the documents it brought stay
/// where they are, no longer synced. Its credential is judged for the new base as a new
/// source's is, and it moves only within its organization, whose external id its role's
/// trust policy names. Audited with the collection it left.
pub async fn repoint(
    state: &State,
    caller: &Caller,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let (source, _) = reach_source(state, caller, id, Access::Edit).await?;
    let body: RepointBody = fields::typed(request, |_| {
        "send {\"collection_name\": …}; change the rest at /kb/{kb_id}/sync-sources/{source_id}".to_owned()
    })?;
    let name = body
        .collection_name
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| invalid("collection_name", "name the collection the source is to feed"))?;
    let (target, _) = crate::collections::resolve(state, caller, &name, Access::Edit).await?;
    if source.kb_id == Some(target.id) {
        return Ok(json_response(200, &view(source, true)));
    }
    if target.org_id != source.org_id {
        return Err(invalid(
            "collection_name",
            "a source moves only within its organization: its credential and its role's external id are that organization's",
        ));
    }
    let named = match (&source.role_arn, source.secret_id) {
        (Some(role), _) => serde_json::json!({ "role_arn": role }),
        (None, secret) => serde_json::json!({ "secret_id": secret }),
    };
    credential(state, caller, &target, &named).await?;
    let moved =
        SyncSource { kb_id: Some(target.id), collection_name: target.collection_name.clone(), ..source.clone() };
    within_caps(state, &target, &moved, true).await?;
    let who = Audit { actor_id: caller.user_id, previous_collection: Some(source.collection_name.clone()) };
    if !state.db.repoint_sync_source(&source, (target.id, &target.collection_name), &who).await? {
        return Err(KnowledgeError::Conflict {
            field: "source",
            message: "a run of this source is still going; point it elsewhere when the run has ended".to_owned(),
        });
    }
    let stored = state.db.sync_source(id).await?.ok_or(KnowledgeError::Missing("Sync source"))?;
    Ok(json_response(200, &view(stored, true)))
}
