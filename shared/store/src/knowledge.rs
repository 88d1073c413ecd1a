//! Knowledge bases. The store answers what exists; who may reach it is decided once, by
//! `sluice_domain::access`, on what these functions return.

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
    pub created_at: OffsetDateTime,
}

impl KnowledgeBase {
    pub fn ownership(&self) -> BaseOwnership {
        BaseOwnership { scope: self.scope, owner_id: self.owner_id, org_id: self.org_id }
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
    Created(KnowledgeBase),
    /// The name is held by bases the caller cannot write.
    Held,
    /// The name's collection embeds differently from what was asked.
    Disagrees {
        model: String,
        provider: String,
    },
}

const COLUMNS: &str = "kb.id, kb.name, kb.scope, kb.owner_id, kb.org_id, kb.collection_name, kb.is_default, \
                       kb.embedding_provider, kb.embedding_model, kb.embedding_dim, kb.embedding_endpoint_id, \
                       kb.embedding_base_url, kb.created_at";

fn from_row(row: &Row) -> KnowledgeBase {
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
        created_at: row.get("created_at"),
    }
}

fn grant_of(level: Option<String>) -> Option<Access> {
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
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v') \
                 AND NOT (c.relname LIKE 'rag\\_%' AND obj_description(c.oid, 'pg_class') = 'sluice:vector-table')",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Claims `base.collection_name` and records the base, one claim of a name at a time:
    /// a new name is taken; an existing one only by a caller who may write a base holding
    /// it, and only on that collection's embedding.
    pub async fn claim_knowledge_base(
        &self,
        base: &KnowledgeBase,
        may_write: impl Fn(&GrantedBase) -> bool,
    ) -> Result<Claim, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock(hashtext('sluice:collection:' || $1))", &[&base.collection_name])
            .await?;
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
        }
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO knowledge_bases AS kb (id, name, scope, owner_id, org_id, collection_name, is_default, \
                     embedding_provider, embedding_model, embedding_dim, embedding_endpoint_id, embedding_base_url) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING {COLUMNS}"
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
                ],
            )
            .await?;
        tx.commit().await?;
        Ok(Claim::Created(from_row(&row)))
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
}
