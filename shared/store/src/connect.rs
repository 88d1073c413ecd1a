//! Where the database is and who Sluice is there. Every connection is TLS with the
//! server's certificate verified against the configured roots and its name checked (what
//! libpq calls `verify-full`); the login's password is read from Secrets Manager at init,
//! never from the environment.

use crate::{Db, StoreError};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The environment variable naming the application login's secret.
pub const APP_SECRET_VARIABLE: &str = "SLUICE_DB_SECRET_ID";
/// The environment variable naming the vector login's secret, for the migrate step (the
/// ingest, knowledge and teardown functions get it as their `SLUICE_DB_SECRET_ID`).
pub const VECTOR_SECRET_VARIABLE: &str = "SLUICE_DB_VECTOR_SECRET_ID";
/// The environment variable naming the administrator's secret (the migrate step only).
pub const ADMIN_SECRET_VARIABLE: &str = "SLUICE_DB_ADMIN_SECRET_ID";
/// The search function's read-only login, which the migrate step creates.
pub const SEARCH_SECRET_VARIABLE: &str = "SLUICE_DB_SEARCH_SECRET_ID";
/// How long the migrate step keeps trying its first connection (a new cluster's proxy may
/// still be registering its target).
pub const FIRST_CONNECTION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);
/// The pause between those tries.
const CONNECT_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_secs(5);

/// Which certificate authorities a database server's certificate must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustRoots {
    /// The public web roots: RDS Proxy endpoints present certificates under Amazon's public
    /// roots, which are among them.
    Public,
    /// Only the certificates of this PEM file: the RDS CA bundle for a direct RDS endpoint,
    /// or the local stack's own authority.
    Bundle(PathBuf),
}

/// The database's address: host, port, database name and the roots its certificate must
/// chain to. Read from `SLUICE_DB_HOST`, `SLUICE_DB_PORT` (5432), `SLUICE_DB_NAME`
/// (`sluice`) and `SLUICE_DB_CA_FILE` (unset: the public roots).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbTarget {
    pub host: String,
    pub port: u16,
    pub dbname: String,
    pub roots: TrustRoots,
}

impl DbTarget {
    pub fn from_env() -> Result<Self, StoreError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        let value = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let host = value("SLUICE_DB_HOST").ok_or_else(|| StoreError::Config("SLUICE_DB_HOST is missing".to_owned()))?;
        let port = match value("SLUICE_DB_PORT") {
            None => 5432,
            Some(port) => port
                .trim()
                .parse()
                .map_err(|_| StoreError::Config(format!("SLUICE_DB_PORT is not a port number: {port:?}")))?,
        };
        let dbname = value("SLUICE_DB_NAME").unwrap_or_else(|| "sluice".to_owned());
        let roots = value("SLUICE_DB_CA_FILE").map_or(TrustRoots::Public, |path| TrustRoots::Bundle(path.into()));
        Ok(Self { host, port, dbname, roots })
    }
}

/// A login and its password. The password never appears in `Debug`.
#[derive(Clone, serde::Deserialize)]
pub struct Login {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login").field("username", &self.username).finish_non_exhaustive()
    }
}

impl Login {
    /// Reads a login from a Secrets Manager secret whose value is JSON with `username` and
    /// `password` (the shape of RDS's managed master secret and of the secrets the template
    /// generates; other fields, such as RDS's `engine` or `host`, are ignored).
    pub async fn from_secret(sdk: &aws_config::SdkConfig, secret_id: &str) -> Result<Self, StoreError> {
        let client = aws_sdk_secretsmanager::Client::new(sdk);
        let answer = client.get_secret_value().secret_id(secret_id).send().await.map_err(|error| {
            // The SDK's own text names the cause (denied, not found, unreachable).
            let cause = aws_sdk_secretsmanager::error::DisplayErrorContext(&error);
            StoreError::Config(format!("the database secret {secret_id} cannot be read: {cause}"))
        })?;
        let text = answer
            .secret_string()
            .ok_or_else(|| StoreError::Config(format!("the database secret {secret_id} holds no text")))?;
        serde_json::from_str(text).map_err(|_| {
            StoreError::Config(format!("the database secret {secret_id} is not JSON with a username and a password"))
        })
    }

    /// The login named by the environment variable `variable` (a secret's id or ARN).
    pub async fn from_env_secret(sdk: &aws_config::SdkConfig, variable: &str) -> Result<Self, StoreError> {
        let secret_id = std::env::var(variable).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
            StoreError::Config(format!("{variable} is missing: the id of the database login's secret"))
        })?;
        Self::from_secret(sdk, &secret_id).await
    }
}

/// The TLS connector for `roots`: rustls over ring, TLS 1.2 and 1.3.
pub fn tls_connector(roots: &TrustRoots) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    let mut store = rustls::RootCertStore::empty();
    match roots {
        TrustRoots::Public => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        TrustRoots::Bundle(path) => {
            use rustls::pki_types::{CertificateDer, pem::PemObject};
            let unreadable =
                |detail: String| StoreError::Config(format!("SLUICE_DB_CA_FILE {}: {detail}", path.display()));
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|e| unreadable(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| unreadable(e.to_string()))?;
            if certificates.is_empty() {
                return Err(unreadable("holds no certificate".to_owned()));
            }
            for certificate in certificates {
                store.add(certificate).map_err(|e| unreadable(e.to_string()))?;
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Config(format!("TLS: {e}")))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The client configuration for `login` at `target`: TLS required, short connect timeout,
/// TCP keepalives so a peer that vanished is noticed.
pub fn client_config(target: &DbTarget, login: &Login) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&target.host)
        .port(target.port)
        .dbname(&target.dbname)
        .user(&login.username)
        .password(&login.password)
        .application_name("sluice")
        .ssl_mode(tokio_postgres::config::SslMode::Require)
        .connect_timeout(Duration::from_secs(5))
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30));
    config
}

/// One connection outside any pool, for tools and tests.
pub async fn connect_once(target: &DbTarget, login: &Login) -> Result<tokio_postgres::Client, StoreError> {
    let (client, connection) = client_config(target, login).connect(tls_connector(&target.roots)?).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "database connection closed");
        }
    });
    Ok(client)
}

impl Db {
    /// Builds the pool without connecting: the first query connects. A Lambda serves one
    /// request at a time, so a few connections are plenty and spare the database. Each
    /// connection is checked with a round trip before it is handed out: one that died while
    /// Lambda froze the sandbox is replaced, not used.
    pub fn open(target: &DbTarget, login: &Login, max_connections: usize) -> Result<Self, StoreError> {
        let manager = Manager::from_config(
            client_config(target, login),
            tls_connector(&target.roots)?,
            ManagerConfig { recycling_method: RecyclingMethod::Verified },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self { pool })
    }

    /// A pool whose database nothing answers for (port 9 on loopback): every query fails at
    /// once, as storage that is down does. For handler tests of refusals and outages.
    pub fn unreachable() -> Self {
        let target =
            DbTarget { host: "127.0.0.1".to_owned(), port: 9, dbname: "none".to_owned(), roots: TrustRoots::Public };
        let login = Login { username: "nobody".to_owned(), password: String::new() };
        Self::open(&target, &login, 1).expect("a pool needs no connection to be built")
    }

    /// The functions' database: the target from the environment, the application login from
    /// the secret `SLUICE_DB_SECRET_ID` names, and a schema no older than this build's
    /// migrations (else the function refuses to start: migrating is the deploy's step).
    pub async fn from_env(sdk: &aws_config::SdkConfig, max_connections: usize) -> Result<Self, StoreError> {
        Self::from_env_secret(sdk, max_connections, APP_SECRET_VARIABLE).await
    }

    /// `from_env` with the login the secret in `variable` holds (the local stack hosts every
    /// function in one process, each with its own login).
    pub async fn from_env_secret(
        sdk: &aws_config::SdkConfig,
        max_connections: usize,
        variable: &str,
    ) -> Result<Self, StoreError> {
        let target = DbTarget::from_env()?;
        let login = Login::from_env_secret(sdk, variable).await?;
        let db = Self::open(&target, &login, max_connections)?;
        db.require_current_schema().await?;
        Ok(db)
    }

    /// Connects, trying again every few seconds for up to `patience`: on a first deploy the
    /// database (or its proxy's target) may still be coming up when the migrate step runs.
    pub async fn wait_until_reachable(&self, patience: std::time::Duration) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        loop {
            match self.client().await {
                Ok(_) => return Ok(()),
                Err(error) if started.elapsed() + CONNECT_RETRY_PAUSE < patience => {
                    tracing::warn!(%error, "the database is not reachable yet; trying again");
                    tokio::time::sleep(CONNECT_RETRY_PAUSE).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The deploy's migrate step as configured by the environment: the administrator's
    /// login from `SLUICE_DB_ADMIN_SECRET_ID` migrates and creates the two logins the
    /// functions use, `SLUICE_DB_SECRET_ID`'s and `SLUICE_DB_VECTOR_SECRET_ID`'s.
    /// `sluice migrate`, the `migrate` function and the local stack all run this. With
    /// `local_embeddings`, the same connection then registers that URL as the deployment's
    /// keyless `local` service (the in-process model in AWS, the local stack's service).
    pub async fn migrate_from_env(
        sdk: &aws_config::SdkConfig,
        local_embeddings: Option<&str>,
    ) -> Result<crate::MigrationReport, StoreError> {
        let target = DbTarget::from_env()?;
        let admin = Login::from_env_secret(sdk, ADMIN_SECRET_VARIABLE).await?;
        let app = Login::from_env_secret(sdk, APP_SECRET_VARIABLE).await?;
        let vectors = Login::from_env_secret(sdk, VECTOR_SECRET_VARIABLE).await?;
        let search = Login::from_env_secret(sdk, SEARCH_SECRET_VARIABLE).await?;
        let db = Self::open(&target, &admin, 1)?;
        db.wait_until_reachable(FIRST_CONNECTION_PATIENCE).await?;
        let report = db.migrate_deploy(&app, &vectors, &search).await?;
        if let Some(url) = local_embeddings {
            db.register_local_embeddings(url).await?;
        }
        Ok(report)
    }
}
