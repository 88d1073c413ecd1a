//! Knowledge bases. The store answers what exists; who may reach it is decided once, by
//! `sluice_domain::access`, on what these functions return.

use crate::names::{NAME_LOCK_SQL, holds_unfiled_content, teardown_reserved};
use crate::{Db, StoreError};
use sluice_domain::access::{Access, BaseOwnership, Scope};
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

/// A knowledge base as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct KnowledgeBase {
    pub id: Uuid,
    pub name: String,
    pub scope: Scope,
    pub owner_id: Uuid,
    pub org_id: Option<Uuid>,
    pub collection_name: String,
    pub is_default: bool,
    pub embedding_provider: String,
    pub embedding_model: String,
    pub embedding_dim: i32,
    pub embedding_endpoint_id: Option<Uuid>,
    pub embedding_base_url: Option<String>,
    pub embedding_secret_id: Option<Uuid>,
    pub ingestion_config: Option<serde_json::Value>,
    /// The PostgreSQL text search configuration the collection's words are read with
    /// (fixed at creation; the bases of a name agree).
    pub text_search_language: String,
    /// The reranker that reorders a search's first candidates (`sluice_domain::rerank::Rerank`).
    pub rerank: Option<serde_json::Value>,
    pub created_at: OffsetDateTime,
}

impl KnowledgeBase {
    pub fn ownership(&self) -> BaseOwnership {
        BaseOwnership { scope: self.scope, owner_id: self.owner_id, org_id: self.org_id }
    }

    /// The catalog's entry for the model the base embeds with.
    pub fn model(&self) -> Option<&'static sluice_domain::catalog::Model> {
        sluice_domain::catalog::model(&self.embedding_provider, &self.embedding_model)
    }

    pub fn rerank_setting(&self) -> Option<sluice_domain::rerank::Rerank> {
        // Written only by the API, which checks it; one that no longer reads reranks nothing.
        self.rerank.as_ref().and_then(|stored| serde_json::from_value(stored.clone()).ok())
    }

    /// The base's whole ingestion configuration: what it stores, over its model's defaults.
    pub fn chunking(&self) -> sluice_domain::ingestion::IngestionConfig {
        use sluice_domain::ingestion::IngestionConfig;
        IngestionConfig::from_stored(self.ingestion_config.as_ref(), self.model())
            .unwrap_or_else(|_| IngestionConfig::default_for(self.model()))
    }
}

/// A base with the caller's explicit grant on it, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantedBase {
    pub base: KnowledgeBase,
    pub grant: Option<Access>,
}

/// How a claim of a collection name ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    Created(Box<KnowledgeBase>),
    /// The name is held by bases the caller cannot write.
    Held,
    /// The name's collection embeds differently from what was asked.
    Disagrees {
        model: String,
        provider: String,
    },
    /// The name's collection reads words with another text search configuration.
    ReadsWordsAs(String),
    /// The name is reserved for a teardown that has not finished.
    Reserved,
    /// No base holds the name, but it holds content another tenant wrote with no base.
    Unfiled,
    /// A write held the name past the claim's one-second wait: try again.
    Busy,
}

/// Who is claiming: the facts the claim's own checks need beyond the access decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimant {
    pub user_id: Uuid,
    pub org_id: Option<Uuid>,
    pub app_admin: bool,
}

pub(crate) const COLUMNS: &str = "kb.id, kb.name, kb.scope, kb.owner_id, kb.org_id, kb.collection_name, kb.is_default, \
                       kb.embedding_provider, kb.embedding_model, kb.embedding_dim, kb.embedding_endpoint_id, \
                       kb.embedding_base_url, kb.embedding_secret_id, kb.ingestion_config, kb.text_search_language, \
                       kb.rerank, kb.created_at";

pub(crate) fn from_row(row: &Row) -> KnowledgeBase {
    let scope: String = row.get("scope");
    KnowledgeBase {
        id: row.get("id"),
        name: row.get("name"),
        scope: Scope::parse(&scope).unwrap_or(Scope::Personal),
        owner_id: row.get("owner_id"),
        org_id: row.get("org_id"),
        collection_name: row.get("collection_name"),
        is_default: row.get("is_default"),
        embedding_provider: row.get("embedding_provider"),
        embedding_model: row.get("embedding_model"),
        embedding_dim: row.get("embedding_dim"),
        embedding_endpoint_id: row.get("embedding_endpoint_id"),
        embedding_base_url: row.get("embedding_base_url"),
        embedding_secret_id: row.get("embedding_secret_id"),
        ingestion_config: row.get("ingestion_config"),
        text_search_language: row.get("text_search_language"),
        rerank: row.get("rerank"),
        created_at: row.get("created_at"),
    }
}

pub(crate) fn grant_of(level: Option<String>) -> Option<Access> {
    match level.as_deref() {
        Some("edit") => Some(Access::Edit),
        Some("view") => Some(Access::View),
        _ => None,
    }
}

impl Db {
    /// The tables the migrations own, read from the schema: a collection may not be named
    /// so that its `rag_` table would be one of them.
    pub async fn schema_tables(&self) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() \
                 AND obj_description(c.oid, 'pg_class') IS DISTINCT FROM 'sluice:vector-table'",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// The bases holding a collection name, oldest first, with the caller's grants.
    pub async fn bases_named(&self, name: &str, user: Uuid) -> Result<Vec<GrantedBase>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {COLUMNS}, g.level FROM knowledge_bases kb \
             LEFT JOIN kb_grants g ON g.kb_id = kb.id AND g.user_id = $2 WHERE kb.collection_name = $1 \
             ORDER BY kb.created_at, kb.id"
        );
        Ok(client
            .query(&sql, &[&name, &user])
            .await?
            .iter()
            .map(|row| GrantedBase { base: from_row(row), grant: grant_of(row.get("level")) })
            .collect())
    }

    /// Claims `base.collection_name` and records the base, one claim of a name at a time
    /// (a create waits at most a second for the name, then answers `Busy`): a name reserved
    /// for a teardown is refused; a new name is taken unless it holds another tenant's
    /// unfiled content; an existing one only by a caller who may write a base holding it,
    /// and only on that collection's embedding.
    pub async fn claim_knowledge_base(
        &self,
        base: &KnowledgeBase,
        claimant: Claimant,
        may_write: impl Fn(&GrantedBase) -> bool,
    ) -> Result<Claim, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.batch_execute("SET LOCAL lock_timeout = '1s'").await?;
        if let Err(error) = tx.execute(NAME_LOCK_SQL, &[&base.collection_name]).await {
            if error.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
                return Ok(Claim::Busy);
            }
            return Err(error.into());
        }
        if teardown_reserved(&tx, &base.collection_name).await? {
            return Ok(Claim::Reserved);
        }
        let sql = format!(
            "SELECT {COLUMNS}, g.level FROM knowledge_bases kb \
             LEFT JOIN kb_grants g ON g.kb_id = kb.id AND g.user_id = $2 WHERE kb.collection_name = $1 \
             ORDER BY kb.created_at"
        );
        let holders: Vec<GrantedBase> = tx
            .query(&sql, &[&base.collection_name, &base.owner_id])
            .await?
            .iter()
            .map(|row| GrantedBase { base: from_row(row), grant: grant_of(row.get("level")) })
            .collect();
        if let Some(first) = holders.first() {
            if !holders.iter().any(&may_write) {
                return Ok(Claim::Held);
            }
            let held = &first.base;
            if held.embedding_model != base.embedding_model || held.embedding_provider != base.embedding_provider {
                return Ok(Claim::Disagrees {
                    model: held.embedding_model.clone(),
                    provider: held.embedding_provider.clone(),
                });
            }
        } else if !claimant.app_admin && holds_unfiled_content(&tx, &base.collection_name, claimant.org_id).await? {
            return Ok(Claim::Unfiled);
        }
        // The collection's table, once made, reads words one way: every base on it agrees.
        let settled = match holders.first() {
            Some(first) => Some(first.base.text_search_language.clone()),
            None => crate::names::text_search_language(&tx, &base.collection_name).await?,
        };
        if let Some(settled) = settled.filter(|settled| *settled != base.text_search_language) {
            return Ok(Claim::ReadsWordsAs(settled));
        }
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO knowledge_bases AS kb (id, name, scope, owner_id, org_id, collection_name, is_default, \
                     embedding_provider, embedding_model, embedding_dim, embedding_endpoint_id, embedding_base_url, \
                     embedding_secret_id, ingestion_config, text_search_language, rerank) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING {COLUMNS}"
                ),
                &[
                    &base.id,
                    &base.name,
                    &base.scope.as_str(),
                    &base.owner_id,
                    &base.org_id,
                    &base.collection_name,
                    &base.is_default,
                    &base.embedding_provider,
                    &base.embedding_model,
                    &base.embedding_dim,
                    &base.embedding_endpoint_id,
                    &base.embedding_base_url,
                    &base.embedding_secret_id,
                    &base.ingestion_config,
                    &base.text_search_language,
                    &base.rerank,
                ],
            )
            .await?;
        tx.commit().await?;
        Ok(Claim::Created(Box::new(from_row(&row))))
    }

    /// A base and the caller's grant on it; `None` when there is no such base.
    pub async fn knowledge_base(&self, id: Uuid, user: Uuid) -> Result<Option<GrantedBase>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {COLUMNS}, g.level FROM knowledge_bases kb \
             LEFT JOIN kb_grants g ON g.kb_id = kb.id AND g.user_id = $2 WHERE kb.id = $1"
        );
        Ok(client
            .query_opt(&sql, &[&id, &user])
            .await?
            .map(|row| GrantedBase { base: from_row(&row), grant: grant_of(row.get("level")) }))
    }

    /// Every base the caller might reach: their own, their organization's, the app's and
    /// those granted to them (the access decision then picks).
    pub async fn candidate_knowledge_bases(
        &self,
        user: Uuid,
        org: Option<Uuid>,
    ) -> Result<Vec<GrantedBase>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {COLUMNS}, g.level FROM knowledge_bases kb \
             LEFT JOIN kb_grants g ON g.kb_id = kb.id AND g.user_id = $1 \
             WHERE kb.owner_id = $1 OR kb.scope = 'app' OR (kb.scope = 'org' AND kb.org_id = $2) \
             OR g.user_id IS NOT NULL ORDER BY kb.created_at, kb.id"
        );
        Ok(client
            .query(&sql, &[&user, &org])
            .await?
            .iter()
            .map(|row| GrantedBase { base: from_row(row), grant: grant_of(row.get("level")) })
            .collect())
    }

    /// Every base in the deployment, by collection name (the operator's `sluice rag-collections`).
    pub async fn all_knowledge_bases(&self) -> Result<Vec<KnowledgeBase>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {COLUMNS} FROM knowledge_bases kb ORDER BY kb.collection_name, kb.created_at, kb.id");
        Ok(client.query(&sql, &[]).await?.iter().map(from_row).collect())
    }

    /// Writes a base's changeable settings (never its scope, collection name or width).
    pub async fn update_knowledge_base(&self, base: &KnowledgeBase) -> Result<Option<KnowledgeBase>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "UPDATE knowledge_bases AS kb SET name = $2, embedding_provider = $3, embedding_model = $4, \
                     embedding_secret_id = $5, embedding_endpoint_id = $6, embedding_base_url = $7, \
                     ingestion_config = $8, rerank = $9, updated_at = now() WHERE kb.id = $1 RETURNING {COLUMNS}"
                ),
                &[
                    &base.id,
                    &base.name,
                    &base.embedding_provider,
                    &base.embedding_model,
                    &base.embedding_secret_id,
                    &base.embedding_endpoint_id,
                    &base.embedding_base_url,
                    &base.ingestion_config,
                    &base.rerank,
                ],
            )
            .await?;
        Ok(row.as_ref().map(from_row))
    }

    /// Grants `user` `level` on a base (replacing an earlier grant).
    pub async fn grant_knowledge_base(&self, kb_id: Uuid, user: Uuid, level: Access) -> Result<(), StoreError> {
        let client = self.client().await?;
        let level = if level == Access::Edit { "edit" } else { "view" };
        client
            .execute(
                "INSERT INTO kb_grants (kb_id, user_id, level) VALUES ($1, $2, $3) \
                 ON CONFLICT (kb_id, user_id) DO UPDATE SET level = EXCLUDED.level",
                &[&kb_id, &user, &level],
            )
            .await?;
        Ok(())
    }

    /// Removes `user`'s grant on a base; `false` when they held none.
    pub async fn revoke_knowledge_base(&self, kb_id: Uuid, user: Uuid) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let removed =
            client.execute("DELETE FROM kb_grants WHERE kb_id = $1 AND user_id = $2", &[&kb_id, &user]).await?;
        Ok(removed == 1)
    }
}
