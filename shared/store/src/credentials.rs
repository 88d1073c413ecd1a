//! Credentials and keyless embedding services. The store keeps sealed bytes only; sealing
//! and opening are `sluice_vault`'s, and who may see which is `sluice_domain::access`'s.

use crate::{Db, StoreError};
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

/// What anybody allowed to see a secret may know about it: never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretMeta {
    pub id: Uuid,
    pub name: String,
    pub kind: String,
    pub provider: String,
    pub visibility: String,
    pub owner_id: Uuid,
    pub org_id: Option<Uuid>,
    /// Sealed with its kind in the encryption context (every value sealed since migration
    /// 16; the migrate step binds the older ones).
    pub kind_bound: bool,
    pub created_at: OffsetDateTime,
}

/// The sealed value: the KMS-encrypted data key, the nonce and the ciphertext.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedValue {
    pub sealed_key: Vec<u8>,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

impl std::fmt::Debug for SealedValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealedValue(..)")
    }
}

/// A keyless embedding service: an organization's own, or deployment-wide (`org_id` none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingEndpoint {
    pub id: Uuid,
    pub name: String,
    pub provider: String,
    pub base_url: String,
    pub org_id: Option<Uuid>,
    pub created_by: Uuid,
    pub created_at: OffsetDateTime,
}

impl EmbeddingEndpoint {
    pub fn is_deployment_wide(&self) -> bool {
        self.org_id.is_none()
    }

    /// Whether something of `org` may name it: the deployment's, or that organization's own.
    pub fn serves(&self, org: Option<Uuid>) -> bool {
        self.is_deployment_wide() || self.org_id == org
    }
}

const SECRET_COLUMNS: &str = "id, name, kind, provider, visibility, owner_id, org_id, kind_bound, created_at";
const ENDPOINT_COLUMNS: &str = "id, name, provider, base_url, org_id, created_by, created_at";

fn secret_meta(row: &Row) -> SecretMeta {
    SecretMeta {
        id: row.get("id"),
        name: row.get("name"),
        kind: row.get("kind"),
        provider: row.get("provider"),
        visibility: row.get("visibility"),
        owner_id: row.get("owner_id"),
        org_id: row.get("org_id"),
        kind_bound: row.get("kind_bound"),
        created_at: row.get("created_at"),
    }
}

fn endpoint(row: &Row) -> EmbeddingEndpoint {
    EmbeddingEndpoint {
        id: row.get("id"),
        name: row.get("name"),
        provider: row.get("provider"),
        base_url: row.get("base_url"),
        org_id: row.get("org_id"),
        created_by: row.get("created_by"),
        created_at: row.get("created_at"),
    }
}

impl Db {
    pub async fn insert_secret(&self, meta: &SecretMeta, sealed: &SealedValue) -> Result<SecretMeta, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                &format!(
                    "INSERT INTO secrets (id, name, kind, provider, visibility, owner_id, org_id, sealed_key, nonce, \
                     ciphertext, kind_bound) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                     RETURNING {SECRET_COLUMNS}"
                ),
                &[
                    &meta.id,
                    &meta.name,
                    &meta.kind,
                    &meta.provider,
                    &meta.visibility,
                    &meta.owner_id,
                    &meta.org_id,
                    &sealed.sealed_key,
                    &sealed.nonce,
                    &sealed.ciphertext,
                    &meta.kind_bound,
                ],
            )
            .await?;
        Ok(secret_meta(&row))
    }

    /// Up to `limit` secrets sealed before kinds were bound, with their sealed values.
    pub async fn unbound_secrets(&self, limit: i64) -> Result<Vec<(SecretMeta, SealedValue)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {SECRET_COLUMNS}, sealed_key, nonce, ciphertext FROM secrets WHERE NOT kind_bound \
                     ORDER BY created_at, id LIMIT $1"
                ),
                &[&limit],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                let sealed = SealedValue {
                    sealed_key: row.get("sealed_key"),
                    nonce: row.get("nonce"),
                    ciphertext: row.get("ciphertext"),
                };
                (secret_meta(row), sealed)
            })
            .collect())
    }

    /// Replaces an unbound secret's sealed value by one bound to its kind; `false` when it
    /// was bound (or deleted) meanwhile.
    pub async fn bind_secret(&self, id: Uuid, sealed: &SealedValue) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE secrets SET sealed_key = $2, nonce = $3, ciphertext = $4, kind_bound = true \
                 WHERE id = $1 AND NOT kind_bound",
                &[&id, &sealed.sealed_key, &sealed.nonce, &sealed.ciphertext],
            )
            .await?;
        Ok(changed == 1)
    }

    /// A secret's description, without its sealed value.
    pub async fn secret_meta(&self, id: Uuid) -> Result<Option<SecretMeta>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt(&format!("SELECT {SECRET_COLUMNS} FROM secrets WHERE id = $1"), &[&id]).await?;
        Ok(row.as_ref().map(secret_meta))
    }

    /// A secret with its sealed value: for the embedding path only, which opens it.
    /// The key `id` if `caller` may lend it to something of `org` (a collection, its image
    /// description): they may see it, and it is that organization's. `None` otherwise, so a
    /// refusal cannot tell another's key from a missing one.
    pub async fn lendable_secret(
        &self,
        caller: &sluice_domain::Caller,
        org: Option<Uuid>,
        id: Uuid,
    ) -> Result<Option<SecretMeta>, StoreError> {
        let Some(secret) = self.secret_meta(id).await? else { return Ok(None) };
        let ownership = sluice_domain::access::SecretOwnership {
            owner_id: secret.owner_id,
            org_id: secret.org_id,
            shared_with_org: secret.visibility == "org",
        };
        Ok((sluice_domain::access::may_see_secret(caller, &ownership) && secret.org_id == org).then_some(secret))
    }

    pub async fn sealed_secret(&self, id: Uuid) -> Result<Option<(SecretMeta, SealedValue)>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!("SELECT {SECRET_COLUMNS}, sealed_key, nonce, ciphertext FROM secrets WHERE id = $1"),
                &[&id],
            )
            .await?;
        Ok(row.map(|row| {
            let sealed = SealedValue {
                sealed_key: row.get("sealed_key"),
                nonce: row.get("nonce"),
                ciphertext: row.get("ciphertext"),
            };
            (secret_meta(&row), sealed)
        }))
    }

    /// Deletes a secret; `false` when there was none.
    pub async fn delete_secret(&self, id: Uuid) -> Result<bool, StoreError> {
        let client = self.client().await?;
        Ok(client.execute("DELETE FROM secrets WHERE id = $1", &[&id]).await? == 1)
    }

    /// Every secret the caller might see: their own and their organization's.
    pub async fn candidate_secrets(&self, user: Uuid, org: Option<Uuid>) -> Result<Vec<SecretMeta>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {SECRET_COLUMNS} FROM secrets WHERE owner_id = $1 OR ($2::uuid IS NOT NULL AND org_id = $2) \
                     ORDER BY created_at, id"
                ),
                &[&user, &org],
            )
            .await?;
        Ok(rows.iter().map(secret_meta).collect())
    }

    /// Records a service; `false` when a deployment-wide one of that provider and name exists.
    pub async fn insert_embedding_endpoint(&self, endpoint: &EmbeddingEndpoint) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let scope = if endpoint.org_id.is_some() { "org" } else { "app" };
        let inserted = client
            .execute(
                "INSERT INTO embedding_endpoints (id, name, provider, base_url, scope, org_id, created_by) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                &[
                    &endpoint.id,
                    &endpoint.name,
                    &endpoint.provider,
                    &endpoint.base_url,
                    &scope,
                    &endpoint.org_id,
                    &endpoint.created_by,
                ],
            )
            .await?;
        Ok(inserted == 1)
    }

    /// Registers (or moves) a deployment-wide service by provider and name; for the local
    /// stack, which registers its embedding service at start.
    pub async fn upsert_deployment_endpoint(&self, endpoint: &EmbeddingEndpoint) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO embedding_endpoints (id, name, provider, base_url, scope, org_id, created_by) \
                 VALUES ($1, $2, $3, $4, 'app', NULL, $5) \
                 ON CONFLICT (provider, name) WHERE scope = 'app' DO UPDATE SET base_url = EXCLUDED.base_url",
                &[&endpoint.id, &endpoint.name, &endpoint.provider, &endpoint.base_url, &endpoint.created_by],
            )
            .await?;
        Ok(())
    }

    /// Registers the deployment's keyless `local` embedding service at `base_url` (the local
    /// stack's HTTP service at start; the in-process model in AWS, at deploy time).
    pub async fn register_local_embeddings(&self, base_url: &str) -> Result<(), StoreError> {
        self.upsert_deployment_endpoint(&EmbeddingEndpoint {
            id: Uuid::new_v4(),
            name: "local-embeddings".to_owned(),
            provider: "local".to_owned(),
            base_url: base_url.to_owned(),
            org_id: None,
            created_by: Uuid::nil(),
            created_at: time::OffsetDateTime::now_utc(),
        })
        .await
    }

    pub async fn embedding_endpoint(&self, id: Uuid) -> Result<Option<EmbeddingEndpoint>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(&format!("SELECT {ENDPOINT_COLUMNS} FROM embedding_endpoints WHERE id = $1"), &[&id])
            .await?;
        Ok(row.as_ref().map(endpoint))
    }

    /// The services a caller may name: the deployment's and their organization's.
    pub async fn visible_embedding_endpoints(&self, org: Option<Uuid>) -> Result<Vec<EmbeddingEndpoint>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM embedding_endpoints WHERE org_id IS NULL \
                     OR ($1::uuid IS NOT NULL AND org_id = $1) ORDER BY created_at, id"
                ),
                &[&org],
            )
            .await?;
        Ok(rows.iter().map(endpoint).collect())
    }
}
