//! PostgreSQL: TLS connections with logins from Secrets Manager, the migrate step, and the
//! repositories of Sluice's rows.

mod chat_files;
mod collections;
mod connect;
mod credentials;
mod documents;
mod keyword_feedback;
mod keyword_scoring;
mod knowledge;
mod migrate;
mod names;
mod reach;
mod reindex;
mod removals;
mod search;
mod sync;
mod turns;
mod vectors;

pub use chat_files::{ChatFile, LandedFile, NewChatFile, NewUploadIntent};
pub use collections::{CollectionCounts, NameDrop, TEARDOWN_TOPIC, TeardownJob, TeardownQueued};
pub use connect::{
    ADMIN_SECRET_VARIABLE, APP_SECRET_VARIABLE, DbTarget, Login, SEARCH_SECRET_VARIABLE, TrustRoots,
    VECTOR_SECRET_VARIABLE, client_config, connect_once, tls_connector,
};
pub use credentials::{EmbeddingEndpoint, SealedValue, SecretMeta};
pub use documents::{
    Accepted, ChunkRow, DOCUMENT_UPLOAD_PREFIX, Document, OutboxMessage, PARSE_DOCUMENT_TOPIC, ParsedText, Staging,
    SyncOrigin, WriteOutcome,
};
pub use knowledge::{Claim, Claimant, GrantedBase, KnowledgeBase};
pub use migrate::{MigrationReport, OnlineUpgrades, SCHEMA_VERSION};
pub use names::VECTOR_TABLE_COMMENT;
pub use reindex::{INGEST_TOPIC, ReindexProgress, ReindexStart};
pub use removals::Reaped;
pub use search::{Hit, ScopeBase, SearchFilters};
pub use sync::{
    Audit, ListedFile, ListingEnd, MAX_LOGGED_FAILURES, PageOutcome, RunScope, RunStart, SOURCE_EVENT_TOPIC,
    SYNC_RUN_TOPIC, SourceEventJob, SyncRun, SyncRunJob, SyncSource,
};
pub use turns::{IngestClaim, Stage, Turn};
pub use vectors::VectorTableError;

use deadpool_postgres::Pool;

/// A database failure. Every variant is transient from a caller's point of view except a
/// broken configuration, which no retry fixes.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database configuration is invalid: {0}")]
    Config(String),
    #[error("no database connection: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("database error: {0}")]
    Query(#[from] tokio_postgres::Error),
    #[error(
        "the database schema is at migration {found} and this build needs {needed}: run the deploy's \
         migrate step (`sluice migrate`, or the stack's Migrate resource) before these functions serve"
    )]
    SchemaBehind { found: i32, needed: i32 },
}

/// The pool every repository runs on.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("status", &self.pool.status()).finish()
    }
}

impl Db {
    /// The installed pgvector version, proving the database is reachable.
    pub async fn pgvector_version(&self) -> Result<Option<String>, StoreError> {
        let client = self.pool.get().await?;
        let row = client.query_opt("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[]).await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The server process behind the connection the pool hands out next: which connection
    /// served (operators and tests).
    pub async fn backend_pid(&self) -> Result<i32, StoreError> {
        Ok(self.client().await?.query_one("SELECT pg_backend_pid()", &[]).await?.get(0))
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}
