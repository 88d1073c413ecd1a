//! Forward-only migrations, embedded in the binary and applied by the deploy's migrate
//! step (`sluice migrate`, or the `migrate` function behind the stack's custom resource) with
//! the administrator's login — never in a function's cold start. The same step creates the
//! functions' two logins with the least privilege each needs: the application login
//! (upload, parse, sweep) reads and writes rows; the vector login (ingest, knowledge,
//! teardown) may also create and drop vector tables, through the owner's two functions.

use crate::{Db, Login, StoreError};

/// Every migration, in order. Never edit one that has shipped: add the next.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "chat_files", include_str!("../migrations/0001_chat_files.sql")),
    (2, "upload_intents", include_str!("../migrations/0002_upload_intents.sql")),
    (3, "knowledge_bases", include_str!("../migrations/0003_knowledge_bases.sql")),
    (4, "collections", include_str!("../migrations/0004_collections.sql")),
    (5, "attempts", include_str!("../migrations/0005_attempts.sql")),
    (6, "janitor", include_str!("../migrations/0006_janitor.sql")),
    (7, "vector_table_functions", include_str!("../migrations/0007_vector_table_functions.sql")),
    (8, "sync_sources", include_str!("../migrations/0008_sync_sources.sql")),
    (9, "ocr", include_str!("../migrations/0009_ocr.sql")),
    (10, "bounded_ingest", include_str!("../migrations/0010_bounded_ingest.sql")),
    (11, "fair_parse", include_str!("../migrations/0011_fair_parse.sql")),
    (12, "read_back_and_reindex", include_str!("../migrations/0012_read_back_and_reindex.sql")),
    (13, "vector_index_names", include_str!("../migrations/0013_vector_index_names.sql")),
    (14, "judged_bytes", include_str!("../migrations/0014_judged_bytes.sql")),
    (15, "source_external_ids", include_str!("../migrations/0015_source_external_ids.sql")),
    (16, "secret_kinds", include_str!("../migrations/0016_secret_kinds.sql")),
    (17, "keyword_search", include_str!("../migrations/0017_keyword_search.sql")),
    (18, "keyword_statistics", include_str!("../migrations/0018_keyword_statistics.sql")),
    (19, "output_format", include_str!("../migrations/0019_output_format.sql")),
    (20, "providers", include_str!("../migrations/0020_providers.sql")),
    (21, "reparse_pending", include_str!("../migrations/0021_reparse_pending.sql")),
    (22, "descriptions_by_target", include_str!("../migrations/0022_descriptions_by_target.sql")),
    (23, "document_titles", include_str!("../migrations/0023_document_titles.sql")),
    (24, "rerank", include_str!("../migrations/0024_rerank.sql")),
    (25, "ingest_claims", include_str!("../migrations/0025_ingest_claims.sql")),
    (26, "detached_sources", include_str!("../migrations/0026_detached_sources.sql")),
    (27, "minilm_chunk_size", include_str!("../migrations/0027_minilm_chunk_size.sql")),
    (28, "whole_chunk_rows", include_str!("../migrations/0028_whole_chunk_rows.sql")),
    (29, "denser_vector_graph", include_str!("../migrations/0029_denser_vector_graph.sql")),
];

/// The schema version this build's code is written against.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// An arbitrary constant naming Sluice's migration lock.
const MIGRATION_LOCK: i64 = 0x0005_11CE;

/// The lock one online phase holds (for its session): another finds the work taken.
const ONLINE_LOCK: i64 = 0x0005_11CF;

/// How many rows one backfill statement fills: a short transaction each, so writers of the
/// same rows wait for at most one batch.
const BACKFILL_BATCH: i64 = 2000;
/// An index build is not started with less time left than this.
const MIN_INDEX_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// The vector tables an upgrade gave trigger-filled keyword columns (migration 18) whose
/// online phase is unfinished: their GIN index is missing or invalid.
const PENDING_TABLES: &str = "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
    WHERE n.nspname = current_schema() AND c.relkind = 'r' \
      AND obj_description(c.oid, 'pg_class') = 'sluice:vector-table' \
      AND EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'search_filled') \
      AND NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid \
                      WHERE i.indrelid = c.oid AND ic.relname = c.relname || '$text' AND i.indisvalid) \
    ORDER BY 1";

/// What an online phase did: rows whose keyword columns it filled, the tables it finished
/// (filled and indexed), and those left for the next run (out of time, or another run holds
/// them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OnlineUpgrades {
    pub rows_filled: u64,
    pub tables_finished: Vec<String>,
    pub pending: Vec<String>,
}

/// What a migrate step did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MigrationReport {
    /// The versions applied by this run (empty when the schema was current).
    pub applied: Vec<i32>,
    pub schema_version: i32,
    /// The logins the step created or brought up to date.
    pub app_login: String,
    pub vector_login: String,
    pub search_login: String,
    /// What the online phase did, when the step ran it (`Db::finish_online_upgrades`).
    pub online: OnlineUpgrades,
}

impl Db {
    /// The deploy's migrate step, run with the administrator's login: applies every
    /// migration not yet applied (under an advisory lock, so concurrent runs apply each
    /// once), then creates or updates `app` and `vectors` as logins that read and write
    /// Sluice's rows and nothing more: no DDL on the schema, no writes to the migrations'
    /// ledger; `vectors` alone may run the two owner's functions of migration 7 that create
    /// and drop vector tables. Idempotent.
    pub async fn migrate_deploy(
        &self,
        app: &Login,
        vectors: &Login,
        search: &Login,
    ) -> Result<MigrationReport, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
        let admin: String = tx.query_one("SELECT current_user::text", &[]).await?.get(0);
        for login in [app, vectors, search] {
            if admin == login.username {
                return Err(StoreError::Config(format!(
                    "the login {:?} is the administrator's: the functions' logins are their own",
                    login.username
                )));
            }
        }
        if app.username == vectors.username || search.username == app.username || search.username == vectors.username {
            return Err(StoreError::Config("the application, vector and search logins must differ".to_owned()));
        }
        let applied = apply_migrations(&tx, SCHEMA_VERSION).await?;
        grant_login(&tx, app, false).await?;
        grant_login(&tx, vectors, true).await?;
        grant_search_login(&tx, search).await?;
        tx.commit().await?;
        Ok(MigrationReport {
            applied,
            schema_version: SCHEMA_VERSION,
            app_login: app.username.clone(),
            vector_login: vectors.username.clone(),
            search_login: search.username.clone(),
            online: OnlineUpgrades::default(),
        })
    }

    /// What an older release's migrate step left: the migrations up to `version` applied,
    /// and nothing else (no logins). Upgrade tests start from it.
    pub async fn migrate_schema_to(&self, version: i32) -> Result<Vec<i32>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
        let applied = apply_migrations(&tx, version).await?;
        tx.commit().await?;
        Ok(applied)
    }

    /// The online phase of an upgrade, after the migrations commit: the rows of every vector
    /// table migration 18 upgraded in place get their keyword columns, a batch per short
    /// statement in key order (the row trigger computes them; the statistics triggers count
    /// them), then the table's GIN index is built concurrently — reads and writes go on
    /// throughout. Stops at `deadline` (`None`: when done) and resumes where the rows are
    /// still unfilled; idempotent, and one run at a time.
    pub async fn finish_online_upgrades(
        &self,
        deadline: Option<std::time::Instant>,
    ) -> Result<OnlineUpgrades, StoreError> {
        let client = self.client().await?;
        let tables: Vec<String> = client.query(PENDING_TABLES, &[]).await?.iter().map(|r| r.get(0)).collect();
        if tables.is_empty() {
            return Ok(OnlineUpgrades::default());
        }
        let locked: bool = client.query_one("SELECT pg_try_advisory_lock($1)", &[&ONLINE_LOCK]).await?.get(0);
        if !locked {
            return Ok(OnlineUpgrades { pending: tables, ..OnlineUpgrades::default() });
        }
        let outcome = online_upgrades(&client, &tables, deadline).await;
        client.execute("SELECT pg_advisory_unlock($1)", &[&ONLINE_LOCK]).await?;
        outcome
    }

    /// The schema version the database is at (0 before the first migration).
    pub async fn schema_version(&self) -> Result<i32, StoreError> {
        let client = self.client().await?;
        let exists: bool = client.query_one("SELECT to_regclass('sluice_migrations') IS NOT NULL", &[]).await?.get(0);
        if !exists {
            return Ok(0);
        }
        Ok(client.query_one("SELECT coalesce(max(version), 0) FROM sluice_migrations", &[]).await?.get(0))
    }

    /// Refuses a database whose schema is older than this build's code: the function would
    /// fail on its first query of a missing column, so it refuses to start instead, saying
    /// what to run. Connecting here also proves the TLS and the login at init.
    pub async fn require_current_schema(&self) -> Result<(), StoreError> {
        let found = self.schema_version().await?;
        if found < SCHEMA_VERSION {
            return Err(StoreError::SchemaBehind { found, needed: SCHEMA_VERSION });
        }
        Ok(())
    }
}

/// Applies, in order, every migration up to `target` not yet applied; the versions applied.
async fn apply_migrations(tx: &deadpool_postgres::Transaction<'_>, target: i32) -> Result<Vec<i32>, StoreError> {
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS sluice_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let done: Vec<i32> =
        tx.query("SELECT version FROM sluice_migrations", &[]).await?.iter().map(|r| r.get(0)).collect();
    let mut applied = Vec::new();
    for (version, name, sql) in MIGRATIONS.iter().filter(|(version, _, _)| *version <= target) {
        if done.contains(version) {
            continue;
        }
        tracing::info!(version, name, "applying migration");
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO sluice_migrations (version, name) VALUES ($1, $2)", &[version, name]).await?;
        applied.push(*version);
    }
    Ok(applied)
}

/// Creates or updates a functions' login and its grants (`vector_tables`: may run the two
/// owner's functions and write chunks). The password is sent as a SCRAM verifier computed
/// here, so no statement or log on the server ever holds it. Each login gets the tables its
/// functions use (every table any store call of theirs names, transitively) and no more:
/// `audit_log` takes the vector login's inserts only (no login reads, changes or removes
/// what it recorded; the application login writes none), the application login (upload, parse, sweep) reads and deletes chunks of
/// vector tables but never writes one — only the vector login (ingest) does — and only
/// reads the vault (`secrets`), the registered services and the grants, which the knowledge
/// function alone changes; the vector login has no access to chat attachments or the
/// sweep's cursors, which only upload, parse and sweep use.
async fn grant_login(
    tx: &deadpool_postgres::Transaction<'_>,
    app: &Login,
    vector_tables: bool,
) -> Result<(), StoreError> {
    create_or_update_role(tx, app).await?;
    run_composed(
        tx,
        "SELECT format('GRANT CONNECT ON DATABASE %1$I TO %2$I;
                 REVOKE CREATE ON SCHEMA public FROM PUBLIC;
                 REVOKE ALL ON SCHEMA public FROM %2$I;
                 GRANT USAGE ON SCHEMA public TO %2$I;
                 GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %2$I;
                 REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON sluice_migrations FROM %2$I;
                 GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %2$I;
                 ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %2$I;
                 %3$s ON FUNCTION sluice_create_vector_table(text, integer, regconfig) %4$s %2$I;
                 %3$s ON FUNCTION sluice_drop_vector_table(text) %4$s %2$I;
                 REVOKE SELECT, UPDATE, DELETE, TRUNCATE ON audit_log FROM %2$I;',
                 current_database(), $1::text,
                 CASE WHEN $2 THEN 'GRANT EXECUTE' ELSE 'REVOKE EXECUTE' END,
                 CASE WHEN $2 THEN 'TO' ELSE 'FROM' END)",
        &[&app.username, &vector_tables],
    )
    .await?;
    // The keyword leg's term statistics are written by the vector tables' triggers alone.
    run_composed(
        tx,
        "SELECT coalesce(string_agg(format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.%I FROM %I;', \
             c.relname, $1::text), ''), '') \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'public' AND c.relkind = 'r' \
             AND obj_description(c.oid, 'pg_class') = 'sluice:term-statistics'",
        &[&app.username],
    )
    .await?;
    if vector_tables {
        // Ingest, knowledge and teardown never touch chat attachments or the sweep's cursors.
        run_composed(
            tx,
            "SELECT format('REVOKE ALL ON chat_files, sweep_cursors FROM %I;', $1::text)",
            &[&app.username],
        )
        .await?;
    } else {
        // Vector tables made later by the vector login get the default privileges: for this
        // login, reading and deleting only. Those that exist now, the same.
        run_composed(
            tx,
            "SELECT format('ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE INSERT, UPDATE ON TABLES FROM %1$I; \
             REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON secrets, embedding_endpoints, kb_grants FROM %1$I; \
             REVOKE ALL ON audit_log FROM %1$I;', $1::text) \
             || coalesce(string_agg(format('REVOKE INSERT, UPDATE ON public.%I FROM %I;', c.relname, $1::text), ''), '') \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = 'public' AND c.relkind = 'r' \
             AND obj_description(c.oid, 'pg_class') = 'sluice:vector-table'",
            &[&app.username],
        )
        .await?;
    }
    Ok(())
}

/// Creates `login`'s role or brings its password up to date, with no power but logging in.
/// The password is sent as a SCRAM verifier computed here.
async fn create_or_update_role(tx: &deadpool_postgres::Transaction<'_>, login: &Login) -> Result<(), StoreError> {
    let verifier = postgres_protocol::password::scram_sha_256(login.password.as_bytes());
    let exists = tx.query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&login.username]).await?.is_some();
    let verb = if exists { "ALTER" } else { "CREATE" };
    // Identifiers and literals quoted by the server itself.
    run_composed(
        tx,
        &format!(
            "SELECT format('{verb} ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION \
                 NOBYPASSRLS PASSWORD %L', $1::text, $2::text)"
        ),
        &[&login.username, &verifier],
    )
    .await
}

/// The search function's login: it reads and never writes. Every table of the schema and
/// every vector table made later (the owner's default privileges) to read, but not chat
/// attachments, the sweep's cursors or the audit log, which search never reads; no vector
/// table made or dropped. Its sessions plan with the database's own settings: a
/// `random_page_cost` of 1.1 set on the login cut the keyword leg's database time on a small
/// base but slowed the vector leg at a million chunks (BENCHMARKS.md, "Scale", twelfth run),
/// so a deployment that had it set by an earlier migrate step has it reset.
async fn grant_search_login(tx: &deadpool_postgres::Transaction<'_>, search: &Login) -> Result<(), StoreError> {
    create_or_update_role(tx, search).await?;
    run_composed(
        tx,
        "SELECT format('GRANT CONNECT ON DATABASE %1$I TO %2$I;
                 REVOKE ALL ON SCHEMA public FROM %2$I;
                 GRANT USAGE ON SCHEMA public TO %2$I;
                 REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %2$I;
                 GRANT SELECT ON ALL TABLES IN SCHEMA public TO %2$I;
                 ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO %2$I;
                 REVOKE ALL ON chat_files, sweep_cursors, audit_log FROM %2$I;
                 REVOKE EXECUTE ON FUNCTION sluice_create_vector_table(text, integer, regconfig) FROM %2$I;
                 REVOKE EXECUTE ON FUNCTION sluice_drop_vector_table(text) FROM %2$I;
                 ALTER ROLE %2$I RESET random_page_cost;',
                 current_database(), $1::text)",
        &[&search.username],
    )
    .await
}

async fn online_upgrades(
    client: &deadpool_postgres::Client,
    tables: &[String],
    deadline: Option<std::time::Instant>,
) -> Result<OnlineUpgrades, StoreError> {
    let out_of_time = || deadline.is_some_and(|d| std::time::Instant::now() >= d);
    let mut report = OnlineUpgrades::default();
    for (at, table) in tables.iter().enumerate() {
        // Vector table names are collection names (`rag_[a-z0-9_]+`), checked when made.
        let quoted = format!("\"{}\"", table.replace('"', "\"\""));
        let index = format!("\"{}\"", format!("{table}$text").replace('"', "\"\""));
        let fill = format!(
            "WITH batch AS (SELECT id FROM {quoted} WHERE id > $1 AND search_vector IS NULL ORDER BY id LIMIT $2), \
                  filled AS (UPDATE {quoted} AS c SET search_vector = NULL FROM batch WHERE c.id = batch.id \
                             RETURNING c.id) \
             SELECT count(*), (SELECT id FROM filled ORDER BY id DESC LIMIT 1) FROM filled"
        );
        let mut after = uuid::Uuid::nil();
        loop {
            if out_of_time() {
                report.pending.extend(tables[at..].iter().cloned());
                return Ok(report);
            }
            let row = client.query_one(&fill, &[&after, &BACKFILL_BATCH]).await?;
            let (filled, last): (i64, Option<uuid::Uuid>) = (row.get(0), row.get(1));
            report.rows_filled += u64::try_from(filled).unwrap_or_default();
            match last {
                Some(last) => after = last,
                None => break,
            }
        }
        // An index a failed concurrent build left invalid is dropped and built again.
        let invalid = client
            .query_opt(
                "SELECT 1 FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid \
                 WHERE ic.relname = $1 AND NOT i.indisvalid",
                &[&format!("{table}$text")],
            )
            .await?
            .is_some();
        if invalid {
            client.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {index}")).await?;
        }
        // The index is built only within the time left: a build the deadline stops leaves an
        // invalid index, which the next run drops and builds again; the table stays pending.
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        if left.is_some_and(|left| left < MIN_INDEX_TIME) {
            report.pending.extend(tables[at..].iter().cloned());
            return Ok(report);
        }
        let limit = left.map_or(0, |left| left.as_millis().max(1));
        client.batch_execute(&format!("SET statement_timeout = {limit}")).await?;
        let built = client
            .batch_execute(&format!(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON {quoted} USING gin (search_vector)"
            ))
            .await;
        client.batch_execute("RESET statement_timeout").await?;
        match built {
            Ok(()) => {}
            Err(error) if error.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) => {
                tracing::warn!(table, "the keyword index was not built in the time left; the next run builds it");
                report.pending.extend(tables[at..].iter().cloned());
                return Ok(report);
            }
            Err(error) => return Err(error.into()),
        }
        tracing::info!(table, "keyword columns filled and indexed");
        report.tables_finished.push(table.clone());
    }
    Ok(report)
}

/// Runs the statements `composer` (a query answering one text) writes: the server quotes
/// every identifier and literal in them itself.
async fn run_composed(
    tx: &deadpool_postgres::Transaction<'_>,
    composer: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<(), StoreError> {
    let statements: String = tx.query_one(composer, params).await?.get(0);
    tx.batch_execute(&statements).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for (index, (version, _, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version, index as i32 + 1);
        }
        assert_eq!(SCHEMA_VERSION, MIGRATIONS.len() as i32);
    }
}
