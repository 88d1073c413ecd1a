//! What a collection name holds: the lock every writer of it takes, its teardown
//! reservation, its vector table's marking, width and words, and content filed under no
//! base. The modules that claim, write, search and tear down names all ask here.

use crate::StoreError;
use deadpool_postgres::GenericClient;
use sluice_domain::collection::vector_table;
use uuid::Uuid;

/// The comment that marks a runtime vector table.
pub const VECTOR_TABLE_COMMENT: &str = "sluice:vector-table";

/// A statement selecting `$select` from the catalogue row `c` of one runtime vector table in
/// the current schema — its name in `$1`, [`VECTOR_TABLE_COMMENT`] in `$2` — with an optional
/// join onto it: a table of that name without the marking comment is not one. Every "is this
/// a vector table" lookup by name goes through it, so they cannot drift apart.
macro_rules! on_vector_table {
    ($select:literal $(, $join:literal)?) => {
        concat!(
            "SELECT ", $select, " FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema() ",
            $($join, " ",)?
            "WHERE c.relname = $1 AND obj_description(c.oid, 'pg_class') = $2"
        )
    };
}
pub(crate) use on_vector_table;

/// The advisory-lock key every writer of a collection name takes: claims, table creation,
/// teardowns and chunk writes serialise on it.
pub(crate) const NAME_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock(hashtext('sluice:collection:' || $1))";

/// Whether `name` is reserved for a teardown that drops its table.
pub(crate) async fn teardown_reserved(client: &impl GenericClient, name: &str) -> Result<bool, StoreError> {
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM collection_teardowns WHERE collection_name = $1 AND drop_table)",
            &[&name],
        )
        .await?;
    Ok(row.get(0))
}

/// Whether `name`, held by no base, holds content written with no base by a tenant other
/// than `org` (any such content, for a caller outside an organization): tracking rows that
/// describe chunks (or may yet), or chunks in the vector table.
pub(crate) async fn holds_unfiled_content(
    client: &impl GenericClient,
    name: &str,
    org: Option<Uuid>,
) -> Result<bool, StoreError> {
    let rows: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM rag_documents WHERE collection_name = $1 AND kb_id IS NULL \
             AND (vector_document_id IS NOT NULL OR status = 'processing') \
             AND ($2::uuid IS NULL OR org_id IS DISTINCT FROM $2))",
            &[&name, &org],
        )
        .await?
        .get(0);
    if rows {
        return Ok(true);
    }
    if vector_width(client, name).await?.is_none() {
        return Ok(false);
    }
    let table = vector_table(name);
    let chunks: bool = client
        .query_one(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM {table} WHERE kb_id IS NULL \
                 AND ($1::uuid IS NULL OR org_id IS DISTINCT FROM $1))"
            ),
            &[&org],
        )
        .await?
        .get(0);
    Ok(chunks)
}

/// The vector table's width; a table of that name without the marking comment is not one.
pub(crate) async fn vector_width(
    client: &impl deadpool_postgres::GenericClient,
    name: &str,
) -> Result<Option<i32>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            on_vector_table!("a.atttypmod", "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'embedding'"),
            &[&vector_table(name), &VECTOR_TABLE_COMMENT],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// The text search configuration `collection`'s table reads words with (the comment of
/// its `search_vector` column), or `None` when there is no such vector table.
pub(crate) async fn text_search_language(
    client: &impl deadpool_postgres::GenericClient,
    collection: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    let row = client.query_opt(TEXT_SEARCH_LANGUAGE, &[&vector_table(collection), &VECTOR_TABLE_COMMENT]).await?;
    Ok(row.map(|r| r.get(0)))
}

/// The query behind [`text_search_language`], the table's name in `$1` and the marking comment
/// in `$2`: one row (`language`), or none. Other statements read it as a sub-query, so a
/// search learns the language in the statement that uses it.
pub(crate) const TEXT_SEARCH_LANGUAGE: &str = on_vector_table!(
    "coalesce(col_description(c.oid, a.attnum), 'english') AS language",
    "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'search_vector'"
);
