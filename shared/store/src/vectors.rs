//! The per-collection vector tables, `rag_<name>`, created at run time on the first write.
//! Migrations never declare them; each carries the comment `sluice:vector-table`, the one
//! predicate by which the schema check and the listings tell them from the schema's own.

use crate::names::{NAME_LOCK_SQL, vector_width};
use crate::{Db, StoreError};
use sluice_domain::collection::{self, vector_table};

/// pgvector's HNSW index takes `vector` up to 2,000 dimensions; wider models are indexed
/// as `halfvec` (up to 4,000), the same cosine order at half the bytes (the choice is made
/// in `sluice_create_vector_table`).
pub const HNSW_MAX_HALFVEC_DIM: i32 = 4000;

#[derive(Debug, thiserror::Error)]
pub enum VectorTableError {
    #[error("{0}")]
    Name(#[from] collection::CollectionNameError),
    #[error("the collection's vectors are {existing} wide, not {wanted}")]
    Width { existing: i32, wanted: i32 },
    #[error("{0} dimensions is wider than pgvector can index")]
    TooWide(i32),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<tokio_postgres::Error> for VectorTableError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Store(error.into())
    }
}

impl Db {
    /// Creates `rag_<name>` at `dim` unless it exists; concurrent first writers create it
    /// once (they queue on the name's lock). An existing table of another width is refused.
    /// The name is validated here too: an operator's command reaches the store with no
    /// route in between.
    pub async fn ensure_vector_table(&self, name: &str, dim: i32) -> Result<(), VectorTableError> {
        self.validate_table(name, dim).await?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(NAME_LOCK_SQL, &[&name]).await?;
        create_unless_present(&tx, name, dim, collection::DEFAULT_TEXT_SEARCH_LANGUAGE).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `ensure_vector_table` for a write filed under base `kb_id`, with the base's text
    /// search configuration (`language`) for a table made now: under the name's lock,
    /// the table is created only while the base still exists and no teardown has reserved
    /// the name — a write that lost the race to a delete must not bring back the table the
    /// teardown drops. `Some(outcome)` says why nothing may be written.
    pub async fn ensure_base_table(
        &self,
        kb_id: uuid::Uuid,
        name: &str,
        dim: i32,
        language: &str,
    ) -> Result<Option<crate::WriteOutcome>, VectorTableError> {
        self.validate_table(name, dim).await?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(NAME_LOCK_SQL, &[&name]).await?;
        if tx.query_opt("SELECT 1 FROM knowledge_bases WHERE id = $1", &[&kb_id]).await?.is_none() {
            return Ok(Some(crate::WriteOutcome::BaseGone));
        }
        if crate::names::teardown_reserved(&tx, name).await? {
            return Ok(Some(crate::WriteOutcome::Reserved));
        }
        create_unless_present(&tx, name, dim, language).await?;
        tx.commit().await?;
        Ok(None)
    }

    async fn validate_table(&self, name: &str, dim: i32) -> Result<(), VectorTableError> {
        let schema_tables = self.schema_tables().await?;
        collection::validate_collection_name(name, &schema_tables)?;
        if dim <= 0 || dim > HNSW_MAX_HALFVEC_DIM {
            return Err(VectorTableError::TooWide(dim));
        }
        Ok(())
    }

    /// The vectors the collection `name` already holds under these cache keys: its embedding
    /// cache. The caller's keys bind the text to the target and tenant that embedded it
    /// (ingest's `CacheScope`), so a text embedded before by the same target for the same
    /// tenant is never paid for again — a re-index, a replacement, a document sharing
    /// paragraphs with another. Empty when the table does not exist yet.
    pub async fn cached_vectors(
        &self,
        name: &str,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, Vec<f32>>, StoreError> {
        if hashes.is_empty() {
            return Ok(std::collections::HashMap::new());
        }
        let client = self.client().await?;
        let table = vector_table(name);
        let query = format!(
            "SELECT DISTINCT ON (content_hash) content_hash, embedding FROM \"{table}\" WHERE content_hash = ANY($1)"
        );
        // One round trip a batch: a table not created yet is an empty cache.
        let rows = match client.query(&query, &[&hashes]).await {
            Err(error) if error.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => Vec::new(),
            other => other?,
        };
        Ok(rows.iter().map(|row| (row.get::<_, String>(0), row.get::<_, pgvector::Vector>(1).to_vec())).collect())
    }

    /// The width of `rag_<name>`, or `None` when there is no such vector table.
    pub async fn vector_table_width(&self, name: &str) -> Result<Option<i32>, StoreError> {
        let client = self.client().await?;
        Ok(vector_width(&client, name).await?)
    }
}

/// Creates the vector table at `dim` unless it exists; one of another width is refused.
/// The caller holds the name's lock.
async fn create_unless_present(
    tx: &deadpool_postgres::Transaction<'_>,
    name: &str,
    dim: i32,
    language: &str,
) -> Result<(), VectorTableError> {
    match vector_width(tx, name).await? {
        Some(existing) if existing == dim => Ok(()),
        Some(existing) => Err(VectorTableError::Width { existing, wanted: dim }),
        // The table's shape lives in the owner's function (migration 7): the application's
        // login may create nothing else.
        None => {
            tx.execute("SELECT sluice_create_vector_table($1, $2, $3::text::regconfig)", &[&name, &dim, &language])
                .await?;
            Ok(())
        }
    }
}
