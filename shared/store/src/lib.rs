//! PostgreSQL: the connection pool, migrations and the repositories of Sluice's rows.

mod chat_files;
mod collections;
mod credentials;
mod documents;
mod knowledge;
mod migrate;
mod removals;
mod search;
mod vectors;

pub use chat_files::{ChatFile, LandedFile, NewChatFile, NewUploadIntent};
pub use collections::{CollectionCounts, NameDrop, TEARDOWN_TOPIC, TeardownJob, TeardownQueued};
pub use credentials::{EmbeddingEndpoint, SealedValue, SecretMeta};
pub use documents::{
    Accepted, ChunkRow, DOCUMENT_UPLOAD_PREFIX, Document, OutboxMessage, PARSE_DOCUMENT_TOPIC, WriteOutcome,
};
pub use knowledge::{Claim, Claimant, GrantedBase, KnowledgeBase};
pub use removals::Reaped;
pub use search::{Hit, ScopeBase, SearchFilters};
pub use vectors::{VECTOR_TABLE_COMMENT, VectorTableError, vector_table_ddl};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

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
    /// Builds the pool without connecting: the first query connects. A Lambda serves one
    /// request at a time, so a few connections are plenty and spare the database.
    pub fn connect_lazy(url: &str, max_connections: usize) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|e: tokio_postgres::Error| StoreError::Config(e.to_string()))?;
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(std::time::Duration::from_secs(10)))
            .create_timeout(Some(std::time::Duration::from_secs(5)))
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self { pool })
    }

    /// Connects and brings the schema up to date (idempotent; safe from many processes).
    pub async fn connect(url: &str, max_connections: usize) -> Result<Self, StoreError> {
        let db = Self::connect_lazy(url, max_connections)?;
        db.migrate().await?;
        Ok(db)
    }

    /// Connects to `DATABASE_URL`, as every function is configured, and migrates.
    pub async fn connect_from_env(max_connections: usize) -> Result<Self, StoreError> {
        let url =
            std::env::var("DATABASE_URL").map_err(|_| StoreError::Config("DATABASE_URL is missing".to_owned()))?;
        Self::connect(&url, max_connections).await
    }

    /// Applies every migration not yet applied, under an advisory lock.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.pool.get().await?;
        migrate::run(&mut client).await
    }

    /// The installed pgvector version, proving the database is reachable.
    pub async fn pgvector_version(&self) -> Result<Option<String>, StoreError> {
        let client = self.pool.get().await?;
        let row = client.query_opt("SELECT extversion FROM pg_extension WHERE extname = 'vector'", &[]).await?;
        Ok(row.map(|r| r.get(0)))
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}
