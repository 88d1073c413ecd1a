//! The local stack's identity provider and the front door's JWT authorizer. Tokens have the
//! shape AWS sees: RS256, signed by a key the stack generates (`SLUICE_LOCAL_JWT_KEY_FILE`),
//! with a `kid` that names it in the JWKS document the door serves under the issuer's
//! `/.well-known/` (as any OIDC issuer does). The authorizer checks them as API Gateway's JWT
//! authorizer does — the key by `kid` from the issuer's JWKS, RS256/ES256 only (an HS256
//! token is refused, as in AWS), issuer, audience, expiry — and flattens the claims into the
//! strings the authorizer passes on.

use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

/// The audience the local tokens carry (the template's `JwtAudience` in AWS).
pub const AUDIENCE: &str = "sluice";
/// The id of the local signing key in the JWKS.
pub const KEY_ID: &str = "sluice-local-1";

/// The claims of the identity table: `sub` is the IdP's subject, which need not be a UUID.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenClaims {
    pub sub: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub org_id: Option<uuid::Uuid>,
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
    pub fn new(
        issuer: &str,
        subject: &str,
        org: Option<uuid::Uuid>,
        permissions: &[String],
        app_admin: bool,
        ttl_secs: i64,
    ) -> Self {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        Self {
            sub: subject.to_owned(),
            org_id: org,
            permissions: permissions.join(" "),
            app_admin,
            iss: issuer.to_owned(),
            aud: AUDIENCE.to_owned(),
            iat: now,
            exp: now + ttl_secs,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid token: {0}")]
pub struct TokenError(String);

fn failed(error: impl std::fmt::Display) -> TokenError {
    TokenError(error.to_string())
}

/// The local identity provider: an issuer URL and its RSA signing key.
pub struct LocalIssuer {
    pub issuer: String,
    key: EncodingKey,
    jwks: JwkSet,
}

impl std::fmt::Debug for LocalIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalIssuer").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

impl LocalIssuer {
    /// The issuer from a PEM RSA private key (PKCS#1 or PKCS#8).
    pub fn from_pem(issuer: &str, pem: &[u8]) -> Result<Self, TokenError> {
        let key = EncodingKey::from_rsa_pem(pem).map_err(failed)?;
        let mut jwk = Jwk::from_encoding_key(&key, Algorithm::RS256).map_err(failed)?;
        jwk.common.key_id = Some(KEY_ID.to_owned());
        jwk.common.public_key_use = Some(PublicKeyUse::Signature);
        jwk.common.key_algorithm = Some(KeyAlgorithm::RS256);
        Ok(Self { issuer: issuer.trim_end_matches('/').to_owned(), key, jwks: JwkSet { keys: vec![jwk] } })
    }

    /// The stack's issuer: `SLUICE_LOCAL_JWT_ISSUER` and the key in `SLUICE_LOCAL_JWT_KEY_FILE`.
    pub fn from_env() -> Result<Self, TokenError> {
        let issuer = std::env::var("SLUICE_LOCAL_JWT_ISSUER")
            .map_err(|_| TokenError("SLUICE_LOCAL_JWT_ISSUER is missing (eval infra/local/stack.sh env)".into()))?;
        let path = std::env::var("SLUICE_LOCAL_JWT_KEY_FILE")
            .map_err(|_| TokenError("SLUICE_LOCAL_JWT_KEY_FILE is missing (eval infra/local/stack.sh env)".into()))?;
        let pem = std::fs::read(&path).map_err(|e| TokenError(format!("{path}: {e}")))?;
        Self::from_pem(&issuer, &pem)
    }

    pub fn issue(&self, claims: &TokenClaims) -> Result<String, TokenError> {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(KEY_ID.to_owned());
        jsonwebtoken::encode(&header, claims, &self.key).map_err(failed)
    }

    /// Claims for `subject` from this issuer.
    pub fn claims(
        &self,
        subject: &str,
        org: Option<uuid::Uuid>,
        permissions: &[String],
        app_admin: bool,
        ttl: i64,
    ) -> TokenClaims {
        TokenClaims::new(&self.issuer, subject, org, permissions, app_admin, ttl)
    }

    /// The public keys, as the issuer's `jwks_uri` serves them.
    pub fn jwks(&self) -> &JwkSet {
        &self.jwks
    }

    /// The OIDC discovery document's fields an authorizer reads.
    pub fn discovery(&self) -> Value {
        serde_json::json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}/.well-known/jwks.json", self.issuer),
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
        })
    }

    /// An authorizer that trusts this issuer's keys for `AUDIENCE`.
    pub fn authorizer(&self) -> Authorizer {
        Authorizer { issuer: self.issuer.clone(), audience: AUDIENCE.to_owned(), keys: self.jwks.clone() }
    }
}

/// API Gateway's JWT authorizer for one issuer and audience.
#[derive(Debug, Clone)]
pub struct Authorizer {
    issuer: String,
    audience: String,
    keys: JwkSet,
}

impl Authorizer {
    /// Validates `token` and returns its claims flattened to strings, as API Gateway puts
    /// them in `requestContext.authorizer.jwt.claims`.
    pub fn verify(&self, token: &str) -> Result<HashMap<String, String>, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(failed)?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(TokenError(format!("{:?} is not an algorithm the authorizer accepts", header.alg)));
        }
        let kid = header.kid.ok_or_else(|| TokenError("the token names no key (kid)".into()))?;
        let jwk = self.keys.find(&kid).ok_or_else(|| TokenError(format!("no key {kid} in the issuer's JWKS")))?;
        let key = DecodingKey::from_jwk(jwk).map_err(failed)?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 5;
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation).map_err(failed)?;
        Ok(data.claims.into_iter().map(|(k, v)| (k, flatten(&v))).collect())
    }
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

    /// A 2048-bit RSA key made for these tests by `openssl genpkey`.
    fn test_key() -> Vec<u8> {
        let dir = std::env::temp_dir().join(format!("sluice-jwt-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("key.pem");
        let made = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
            .arg(&path)
            .output()
            .expect("openssl");
        assert!(made.status.success());
        let pem = std::fs::read(&path).expect("key");
        std::fs::remove_dir_all(&dir).ok();
        pem
    }

    #[test]
    fn issued_tokens_verify_and_flatten() {
        let issuer = LocalIssuer::from_pem("http://127.0.0.1:1", &test_key()).expect("issuer");
        let claims = issuer.claims("auth0|abc", None, &["collections:view".to_owned()], true, 60);
        let token = issuer.issue(&claims).expect("token");
        let header = jsonwebtoken::decode_header(&token).expect("header");
        assert_eq!(header.alg, Algorithm::RS256);
        assert_eq!(header.kid.as_deref(), Some(KEY_ID));
        let flat = issuer.authorizer().verify(&token).expect("valid");
        assert_eq!(flat["sub"], "auth0|abc");
        assert_eq!(flat["app_admin"], "true");
        assert_eq!(flat["permissions"], "collections:view");

        let other = LocalIssuer::from_pem("http://127.0.0.1:1", &test_key()).expect("issuer");
        assert!(other.authorizer().verify(&token).is_err(), "another key's signature");
        let elsewhere = LocalIssuer::from_pem("http://127.0.0.1:2", &test_key()).expect("issuer");
        let foreign = elsewhere.issue(&elsewhere.claims("u", None, &[], false, 60)).expect("token");
        assert!(issuer.authorizer().verify(&foreign).is_err(), "another issuer");
    }

    #[test]
    fn expired_and_hs256_tokens_are_refused() {
        let issuer = LocalIssuer::from_pem("http://127.0.0.1:1", &test_key()).expect("issuer");
        let expired = issuer.issue(&issuer.claims("u", None, &[], false, -3600)).expect("token");
        assert!(issuer.authorizer().verify(&expired).is_err());
        let claims = issuer.claims("u", None, &[], false, 60);
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(KEY_ID.to_owned());
        let hs256 =
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(b"shared").expect("key")).expect("token");
        let refused = issuer.authorizer().verify(&hs256).expect_err("HS256 is refused");
        assert!(refused.to_string().contains("HS256"), "{refused}");
    }
}
