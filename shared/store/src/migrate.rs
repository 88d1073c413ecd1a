//! Forward-only migrations, embedded in the binary and applied at cold start.

use crate::StoreError;

/// Every migration, in order. Never edit one that has shipped: add the next.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "chat_files", include_str!("../migrations/0001_chat_files.sql")),
    (2, "upload_intents", include_str!("../migrations/0002_upload_intents.sql")),
    (3, "knowledge_bases", include_str!("../migrations/0003_knowledge_bases.sql")),
    (4, "collections", include_str!("../migrations/0004_collections.sql")),
    (5, "attempts", include_str!("../migrations/0005_attempts.sql")),
    (6, "janitor", include_str!("../migrations/0006_janitor.sql")),
];

/// An arbitrary constant naming Sluice's migration lock.
const MIGRATION_LOCK: i64 = 0x0005_11CE;

pub(crate) async fn run(client: &mut deadpool_postgres::Object) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS sluice_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let applied: Vec<i32> =
        tx.query("SELECT version FROM sluice_migrations", &[]).await?.iter().map(|r| r.get(0)).collect();
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tracing::info!(version, name, "applying migration");
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO sluice_migrations (version, name) VALUES ($1, $2)", &[version, name]).await?;
    }
    tx.commit().await?;
    Ok(())
}
