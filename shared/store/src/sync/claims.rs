//! Claims: which sources still list a document. A document no source claims is removed;
//! a synced document that replaces another takes over its claims.

use super::runs::count_finished;
use crate::names::vector_width;
use crate::removals::queue_removal;
use crate::{Document, StoreError};
use deadpool_postgres::{GenericClient, Transaction};
use sluice_domain::collection::vector_table;
use std::collections::HashMap;
use uuid::Uuid;

/// Deletes those of `ids` that no source claims any more (rows, then their chunks), and
/// queues the removal of their stored objects. Returns how many went, and the removal.
pub(super) async fn remove_unclaimed(tx: &Transaction<'_>, ids: &[Uuid]) -> Result<(usize, Option<Uuid>), StoreError> {
    if ids.is_empty() {
        return Ok((0, None));
    }
    let removed = tx
        .query(
            "DELETE FROM rag_documents d WHERE d.id = ANY($1) \
             AND NOT EXISTS (SELECT 1 FROM rag_document_claims c WHERE c.document_id = d.id) \
             RETURNING id, collection_name, storage_path, parsed_path",
            &[&ids],
        )
        .await?;
    let mut by_collection: HashMap<String, Vec<Uuid>> = HashMap::new();
    let mut objects = Vec::new();
    for row in &removed {
        by_collection.entry(row.get(1)).or_default().push(row.get(0));
        objects.extend(row.get::<_, Option<String>>(2));
        objects.extend(row.get::<_, Option<String>>(3));
    }
    for (collection, ids) in by_collection {
        if vector_width(tx, &collection).await?.is_some() {
            let table = vector_table(&collection);
            tx.execute(&format!("DELETE FROM {table} WHERE document_id = ANY($1)"), &[&ids]).await?;
        }
    }
    let removal = queue_removal(tx, &objects, "documents no source lists").await?;
    Ok((removed.len(), removal))
}

/// Retires what an indexed synced document replaces, inside its chunk write: the document
/// it names and earlier finished or failed rows of the same address in the same base (never
/// a row still `processing`, which is another attempt's). Their claims pass to the new
/// document first. The run counts it as an update when a finished document was replaced.
/// Returns the retired rows' stored objects.
pub(crate) async fn retire_replaced(
    tx: &Transaction<'_>,
    doc: &Document,
    table: &str,
) -> Result<Vec<String>, StoreError> {
    let replaces = doc.sync.as_ref().and_then(|s| s.replaces);
    let retired = tx
        .query(
            "SELECT id, status, storage_path, parsed_path FROM rag_documents WHERE kb_id = $1 AND id <> $2 \
             AND created_at <= $3 AND (id = $4 OR (source_path = $5 AND status IN ('done', 'error'))) FOR UPDATE",
            &[&doc.kb_id, &doc.id, &doc.created_at, &replaces, &doc.source_path],
        )
        .await?;
    let ids: Vec<Uuid> = retired.iter().map(|r| r.get(0)).collect();
    let replaced_finished = retired.iter().any(|r| r.get::<_, String>(1) == "done");
    let mut objects = Vec::new();
    if !ids.is_empty() {
        tx.execute(
            "INSERT INTO rag_document_claims (source_id, document_id, claimed_at, seen_at) \
             SELECT source_id, $2, min(claimed_at), max(seen_at) FROM rag_document_claims \
             WHERE document_id = ANY($1) GROUP BY source_id \
             ON CONFLICT (source_id, document_id) DO UPDATE SET \
             claimed_at = least(rag_document_claims.claimed_at, excluded.claimed_at), \
             seen_at = greatest(rag_document_claims.seen_at, excluded.seen_at)",
            &[&ids, &doc.id],
        )
        .await?;
        tx.execute("DELETE FROM rag_documents WHERE id = ANY($1)", &[&ids]).await?;
        tx.execute(&format!("DELETE FROM {table} WHERE document_id = ANY($1)"), &[&ids]).await?;
        for row in &retired {
            objects.extend(row.get::<_, Option<String>>(2));
            objects.extend(row.get::<_, Option<String>>(3));
        }
    }
    if let Some(run_id) = doc.sync.as_ref().and_then(|s| s.run_id) {
        count_finished(tx, run_id, if replaced_finished { "updated" } else { "ingested" }).await?;
    }
    Ok(objects)
}
