//! `POST /embedding-endpoints` and `GET /embedding-endpoints`: keyless local embedding
//! services. An organization registers its own (`collections:edit`); only the app admin
//! registers deployment-wide ones.

use crate::State;
use crate::error::{KnowledgeError, invalid};
use crate::fields;
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sluice_domain::{Caller, catalog};
use sluice_store::EmbeddingEndpoint;
use sluice_web::json_response;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Debug, Serialize)]
struct EndpointView {
    id: Uuid,
    name: String,
    provider: String,
    /// Shown only to those who manage collections: an internal address is a map of the
    /// organization's network, not something every member needs to choose a service.
    #[serde(skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    scope: &'static str,
    org_id: Option<Uuid>,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
}

fn view(endpoint: EmbeddingEndpoint, caller: &Caller) -> EndpointView {
    let sees_address = caller.app_admin || caller.has_permission("collections:edit");
    EndpointView {
        scope: if endpoint.is_deployment_wide() { "app" } else { "org" },
        id: endpoint.id,
        name: endpoint.name,
        provider: endpoint.provider,
        base_url: sees_address.then_some(endpoint.base_url),
        org_id: endpoint.org_id,
        created_at: endpoint.created_at,
    }
}

/// `POST /embedding-endpoints`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewEndpoint {
    name: Option<String>,
    provider: Option<String>,
    base_url: Option<String>,
    scope: Option<String>,
}

pub async fn create(state: &State, caller: &Caller, request: &Request) -> Result<Response<Body>, KnowledgeError> {
    let body: NewEndpoint = fields::typed(request, fields::not_text)?;
    let name = fields::required(body.name, "name")?;
    let provider = fields::required(body.provider, "provider")?;
    match catalog::provider(&provider) {
        Some(p) if p.keyless => {}
        Some(_) => return Err(invalid("provider", format!("{provider} is keyed: it is reached at its own address"))),
        None => return Err(invalid("provider", format!("{provider:?} is not in the embedding catalog"))),
    }
    let base_url = fields::required(body.base_url, "base_url")?;
    // Resolved now, and again at every connection: a name that leads inward is refused.
    state
        .endpoint_policy
        .networks
        .check_resolved(&base_url)
        .await
        .map_err(|why| invalid("base_url", format!("base_url must be a reachable http(s) address: {why}")))?;
    let org_id = match fields::required(body.scope, "scope")?.as_str() {
        "app" if caller.app_admin => None,
        "app" => return Err(invalid("scope", "only the app admin registers deployment-wide services")),
        "org" => match caller.org_id {
            Some(org) if caller.has_permission("collections:edit") => Some(org),
            Some(_) => return Err(invalid("scope", "registering an organization's service needs collections:edit")),
            None => return Err(invalid("scope", "an org service needs an organization")),
        },
        _ => return Err(invalid("scope", "scope must be org or app")),
    };
    let endpoint = EmbeddingEndpoint {
        id: Uuid::new_v4(),
        name,
        provider,
        base_url: base_url.trim_end_matches('/').to_owned(),
        org_id,
        created_by: caller.user_id,
        created_at: OffsetDateTime::now_utc(),
    };
    if !state.db.insert_embedding_endpoint(&endpoint).await? {
        return Err(KnowledgeError::Conflict {
            field: "name",
            message: format!("a deployment-wide {} service of that name exists", endpoint.provider),
        });
    }
    Ok(json_response(201, &view(endpoint, caller)))
}

pub async fn list(state: &State, caller: &Caller) -> Result<Response<Body>, KnowledgeError> {
    let endpoints: Vec<EndpointView> =
        state.db.visible_embedding_endpoints(caller.org_id).await?.into_iter().map(|e| view(e, caller)).collect();
    Ok(json_response(200, &serde_json::json!({ "embedding_endpoints": endpoints })))
}
