//! HS256 tokens for the local stack: issued by `sluice token`, checked by the front door
//! exactly as the HTTP API's JWT authorizer checks them in AWS (signature, issuer,
//! audience, expiry), and flattened into string claims the way the authorizer passes them.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

/// The secret used when `SLUICE_LOCAL_JWT_SECRET` is not set. Local only: AWS validates
/// tokens from the deployment's identity provider instead.
pub const DEFAULT_LOCAL_SECRET: &str = "sluice-local-development-secret";
pub const ISSUER: &str = "sluice-local";
pub const AUDIENCE: &str = "sluice";

/// The secret the local stack signs and checks with.
pub fn local_secret() -> String {
    std::env::var("SLUICE_LOCAL_JWT_SECRET")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_LOCAL_SECRET.to_owned())
}

/// The claims of API.md's identity table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenClaims {
    pub sub: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org_id: Option<Uuid>,
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub permissions: String,
    #[serde(default)]
    pub app_admin: bool,
    pub iss: String,
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
}

impl TokenClaims {
    pub fn new(user: Uuid, org: Option<Uuid>, permissions: &[String], app_admin: bool, ttl_secs: i64) -> Self {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        Self {
            sub: user,
            org_id: org,
            permissions: permissions.join(" "),
            app_admin,
            iss: ISSUER.to_owned(),
            aud: AUDIENCE.to_owned(),
            iat: now,
            exp: now + ttl_secs,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid token: {0}")]
pub struct TokenError(String);

pub fn issue(secret: &str, claims: &TokenClaims) -> Result<String, TokenError> {
    let key = EncodingKey::from_secret(secret.as_bytes()).map_err(|e| TokenError(e.to_string()))?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).map_err(|e| TokenError(e.to_string()))
}

/// Validates `token` and returns its claims flattened to strings, as API Gateway puts them
/// in `requestContext.authorizer.jwt.claims`.
pub fn verify(secret: &str, token: &str) -> Result<HashMap<String, String>, TokenError> {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&[ISSUER]);
    validation.set_audience(&[AUDIENCE]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.leeway = 5;
    let key = DecodingKey::from_secret(secret.as_bytes()).map_err(|e| TokenError(e.to_string()))?;
    let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation)
        .map_err(|e| TokenError(e.to_string()))?;
    Ok(data.claims.into_iter().map(|(k, v)| (k, flatten(&v))).collect())
}

fn flatten(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(flatten).collect::<Vec<_>>().join(" ")),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_verify_and_flatten() {
        let user = Uuid::new_v4();
        let claims = TokenClaims::new(user, None, &["collections:view".to_owned()], true, 60);
        let token = issue("s", &claims).expect("token");
        let flat = verify("s", &token).expect("valid");
        assert_eq!(flat["sub"], user.to_string());
        assert_eq!(flat["app_admin"], "true");
        assert_eq!(flat["permissions"], "collections:view");
        assert!(verify("other-secret", &token).is_err());
    }

    #[test]
    fn expired_tokens_are_refused() {
        let claims = TokenClaims::new(Uuid::new_v4(), None, &[], false, -3600);
        let token = issue("s", &claims).expect("token");
        assert!(verify("s", &token).is_err());
    }
}
