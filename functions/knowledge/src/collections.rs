//! The `/rag/collections` routes: a collection name resolved through the bases that hold
//! it, under the caller's reach, before anything about it is read or written.

use crate::State;
use crate::bases::{self, reach, reachable};
use crate::error::KnowledgeError;
use crate::fields::{Field, NonBlank};
use lambda_http::{Body, Request, Response};
use serde_json::{Value, json};
use sluice_domain::Caller;
use sluice_domain::access::Access;
use sluice_store::KnowledgeBase;
use sluice_web::json_response;
use std::collections::BTreeMap;
use uuid::Uuid;

/// The base a name means for this caller, at `at_least` (`access::resolve_named`); an
/// unreachable name is exactly "not found".
pub async fn resolve(
    state: &State,
    caller: &Caller,
    name: &str,
    at_least: Access,
) -> Result<(KnowledgeBase, Access), KnowledgeError> {
    state.db.reach_named(caller, name, at_least).await?.ok_or(KnowledgeError::NotFound)
}

/// `GET /rag/collections`: one entry per name the caller reaches.
pub async fn list(state: &State, caller: &Caller) -> Result<Response<Body>, KnowledgeError> {
    let mut by_name: BTreeMap<String, Vec<(KnowledgeBase, Access)>> = BTreeMap::new();
    for (base, access) in reachable(state, caller).await? {
        by_name.entry(base.collection_name.clone()).or_default().push((base, access));
    }
    let collections: Vec<Value> = by_name
        .into_iter()
        .map(|(name, bases)| {
            let first = &bases[0].0;
            json!({
                "name": name,
                "knowledge_base_ids": bases.iter().map(|(b, _)| b.id).collect::<Vec<Uuid>>(),
                "embedding_provider": first.embedding_provider,
                "embedding_model": first.embedding_model,
                "embedding_dim": first.embedding_dim,
                "access": if bases.iter().any(|(_, a)| *a == Access::Edit) { "edit" } else { "view" },
            })
        })
        .collect();
    Ok(json_response(200, &json!({ "collections": collections })))
}

/// `POST /rag/collections/{name}`: a base on that name, as `POST /kb` creates it; the
/// display name defaults to the collection name and the scope to the caller's organization
/// (personal outside one).
pub async fn create(
    state: &State,
    caller: &Caller,
    name: &str,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    let bytes = sluice_web::body_bytes(request);
    let mut body: bases::CreateBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        bases::CreateBody::default()
    } else {
        crate::fields::typed_bytes(bytes, bases::wrong_type)?
    };
    if body.collection_name.is_given() {
        return Err(crate::error::invalid("collection_name", "the collection name is the one in the path"));
    }
    body.collection_name = Field::Set(NonBlank(name.to_owned()));
    if !body.name.is_given() {
        body.name = Field::Set(NonBlank(name.to_owned()));
    }
    let scope = if caller.org_id.is_some() && caller.has_permission("collections:edit") { "org" } else { "personal" };
    if !body.scope.is_given() {
        body.scope = Field::Set(NonBlank(scope.to_owned()));
    }
    bases::create_from(state, caller, body).await
}

/// `DELETE /rag/collections/{name}`: the caller's base on the name goes, as `DELETE /kb`.
pub async fn drop(state: &State, caller: &Caller, name: &str) -> Result<Response<Body>, KnowledgeError> {
    let (base, _) = resolve(state, caller, name, Access::Edit).await?;
    bases::queue_teardown(state, base.id).await
}

fn status(processing: i64) -> &'static str {
    if processing > 0 { "indexing" } else { "complete" }
}

/// `GET /rag/collections/{name}/info`: the documents of every base on the name the caller
/// reaches, counted together (as the reference product counts everything under a collection
/// name); `GET /kb/{id}/ingestion` counts one base's.
pub async fn info(state: &State, caller: &Caller, name: &str) -> Result<Response<Body>, KnowledgeError> {
    let bases: Vec<KnowledgeBase> =
        reachable(state, caller).await?.into_iter().map(|(b, _)| b).filter(|b| b.collection_name == name).collect();
    let Some(first) = bases.first() else { return Err(KnowledgeError::NotFound) };
    let mut total = sluice_store::CollectionCounts::default();
    for base in &bases {
        let counts = state.db.collection_counts(base).await?;
        total.processing += counts.processing;
        total.indexed += counts.indexed;
        total.failed += counts.failed;
        total.documents += counts.documents;
        total.vectors += counts.vectors;
    }
    Ok(json_response(
        200,
        &json!({
            "name": first.collection_name,
            "knowledge_base_ids": bases.iter().map(|b| b.id).collect::<Vec<Uuid>>(),
            "indexing_status": status(total.processing),
            "processing_count": total.processing,
            "indexed_count": total.indexed,
            "failed_count": total.failed,
            "document_count": total.documents,
            "total_vectors": total.vectors,
            "embedding_model": first.embedding_model,
            "embedding_dim": first.embedding_dim,
        }),
    ))
}

/// The most documents one page lists.
const MAX_PAGE: i64 = 200;

/// `GET /kb/{id}/documents?limit&cursor`: the base's documents, newest first; `next_cursor`
/// is the cursor of the next page, `null` on the last.
pub async fn documents(
    state: &State,
    caller: &Caller,
    id: Uuid,
    request: &Request,
) -> Result<Response<Body>, KnowledgeError> {
    use lambda_http::RequestExt;
    let (base, _) = reach(state, caller, id, Access::View).await?;
    let query = request.query_string_parameters();
    let limit = match query.first("limit") {
        None => 50,
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| crate::error::invalid("limit", format!("limit must be 1 to {MAX_PAGE}")))?,
    };
    let after = match query.first("cursor").filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => {
            Some(Uuid::parse_str(text).map_err(|_| crate::error::invalid("cursor", "not a cursor this listing gave"))?)
        }
    };
    let mut page = state.db.documents_of(base.id, after, limit + 1).await?;
    let next = (page.len() as i64 > limit).then(|| page.truncate(limit as usize)).and(page.last().map(|d| d.id));
    let documents: Vec<Value> = page.iter().map(sluice_store::Document::api_view).collect();
    Ok(json_response(200, &json!({ "documents": documents, "next_cursor": next })))
}

/// `GET /kb/{id}/ingestion`.
pub async fn ingestion(state: &State, caller: &Caller, id: Uuid) -> Result<Response<Body>, KnowledgeError> {
    let (base, _) = reach(state, caller, id, Access::View).await?;
    let counts = state.db.collection_counts(&base).await?;
    // The latest re-index while it runs; `null` once it is done (or there was none).
    let reindexing = state.db.reindex_progress(base.id).await?.filter(|p| !p.complete());
    Ok(json_response(
        200,
        &json!({
            "indexing_status": status(counts.processing),
            "processing_count": counts.processing,
            "indexed_count": counts.indexed,
            "failed_count": counts.failed,
            "reindexing": reindexing,
        }),
    ))
}
