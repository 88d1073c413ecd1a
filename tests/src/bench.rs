//! What the search and scale benchmarks share: a bench base and its empty vector table
//! (HNSW index dropped, for a bulk load), and the exact top 10 a search is scored against.

use sluice_store::{Db, SearchFilters};
use uuid::Uuid;

/// A personal base of the keyless model (384 dimensions) in collection `name`, written
/// straight into the database; its id.
pub async fn bench_base(client: &tokio_postgres::Client, name: &str) -> Uuid {
    let kb = Uuid::new_v4();
    client
        .execute(
            "INSERT INTO knowledge_bases (id, name, scope, owner_id, collection_name, embedding_provider, \
             embedding_model, embedding_dim) VALUES ($1, 'bench', 'personal', $2, $3, 'local', 'all-minilm-l6-v2', 384)",
            &[&kb, &Uuid::new_v4(), &name],
        )
        .await
        .expect("base");
    kb
}

/// A personal base of the keyless model named `name`, with its vector table of 384
/// dimensions and no HNSW index yet; the base's id and the table's name.
pub async fn bench_collection(db: &Db, client: &tokio_postgres::Client, name: &str) -> (Uuid, String) {
    let kb = bench_base(client, name).await;
    db.ensure_vector_table(name, 384).await.expect("table");
    let table = format!("rag_{name}");
    // A bulk load builds its index after, as a re-index into a new table would.
    client.batch_execute(&format!("DROP INDEX \"{table}$embedding\"")).await.expect("drop");
    (kb, table)
}

/// The true top 10: the same scope and filters, the index switched off.
pub async fn exact_ids(
    client: &mut tokio_postgres::Client,
    table: &str,
    kb: Uuid,
    filters: &SearchFilters,
    probe: &[f32],
) -> Vec<Uuid> {
    nearest_ids(client, table, kb, filters, probe, None).await
}

/// The top 10 of the same scope and filters: exact (`ef_search` `None`, the index switched
/// off) or through the HNSW index's iterative scan with that search list, as search runs it.
pub async fn nearest_ids(
    client: &mut tokio_postgres::Client,
    table: &str,
    kb: Uuid,
    filters: &SearchFilters,
    probe: &[f32],
    ef_search: Option<i64>,
) -> Vec<Uuid> {
    let tx = client.transaction().await.expect("tx");
    let settings = match ef_search {
        None => "SET LOCAL enable_indexscan = off".to_owned(),
        Some(ef) => format!(
            "SET LOCAL hnsw.iterative_scan = strict_order; SET LOCAL hnsw.ef_search = {ef}; \
             SET LOCAL hnsw.max_scan_tuples = 50000"
        ),
    };
    tx.batch_execute(&settings).await.expect("set");
    // Ties broken by id where the order is exact; the index orders by distance alone.
    let ties = if ef_search.is_none() { ", id" } else { "" };
    let vector = pgvector::Vector::from(probe.to_vec());
    let rows = tx
        .query(
            &format!(
                "SELECT id FROM {table} WHERE kb_id = $1 AND ($2::text[] IS NULL OR organizational_unit = ANY($2)) \
                 AND ($3::text[] IS NULL OR document_type = ANY($3)) ORDER BY embedding <=> $4{ties} LIMIT 10"
            ),
            &[&kb, &filters.organizational_unit, &filters.document_type, &vector],
        )
        .await
        .expect("nearest");
    tx.commit().await.expect("commit");
    rows.iter().map(|r| r.get(0)).collect()
}
