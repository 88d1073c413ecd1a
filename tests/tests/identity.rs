//! Tokens as the HTTP API's JWT authorizer sees them in AWS: RS256 from an OIDC issuer whose
//! discovery document and keys are served under its URL; HS256 refused; a subject that is
//! not a UUID (Auth0's) is a caller of its own.

use sluice_e2e::{Stack, User};

#[tokio::test]
async fn the_issuer_publishes_its_discovery_document_and_keys() {
    let stack = Stack::from_env().await;
    let issuer = sluice_e2e::local_issuer();
    let discovery: serde_json::Value = stack
        .http
        .get(format!("{}/.well-known/openid-configuration", issuer.issuer))
        .send()
        .await
        .expect("discovery")
        .json()
        .await
        .expect("JSON");
    assert_eq!(discovery["issuer"], issuer.issuer);
    let jwks_uri = discovery["jwks_uri"].as_str().expect("jwks_uri");
    let jwks: jsonwebtoken::jwk::JwkSet =
        stack.http.get(jwks_uri).send().await.expect("jwks").json().await.expect("a JWKS");
    let key = jwks.find(sluice_local::jwt::KEY_ID).expect("the signing key is published");
    // A token verifies with the published key alone, as API Gateway verifies it.
    let user = User::new();
    let header = jsonwebtoken::decode_header(&user.token).expect("header");
    assert_eq!(header.alg, jsonwebtoken::Algorithm::RS256);
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[sluice_local::jwt::AUDIENCE]);
    validation.set_issuer(&[&issuer.issuer]);
    let decoded = jsonwebtoken::decode::<serde_json::Value>(
        &user.token,
        &jsonwebtoken::DecodingKey::from_jwk(key).expect("key"),
        &validation,
    )
    .expect("verifies with the JWKS key");
    assert_eq!(decoded.claims["sub"], user.id.to_string());
}

#[tokio::test]
async fn an_hs256_token_is_refused_like_no_token() {
    let stack = Stack::from_env().await;
    let issuer = sluice_e2e::local_issuer();
    let claims = issuer.claims(&uuid::Uuid::new_v4().to_string(), None, &[], false, 600);
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some(sluice_local::jwt::KEY_ID.to_owned());
    let token = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(b"a shared secret").expect("key"),
    )
    .expect("token");
    let response = stack
        .http
        .get(stack.url("/files/00000000-0000-4000-8000-000000000000"))
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 401);
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(body, serde_json::json!({"message": "Unauthorized"}));
}

#[tokio::test]
async fn a_subject_that_is_not_a_uuid_owns_what_it_uploads() {
    let stack = Stack::from_env().await;
    let subject = format!("auth0|{}", uuid::Uuid::new_v4().simple());
    let user = User::with_subject(&subject);
    let (status, file) = stack.upload(&user, "notes.txt", Some("text/plain"), b"from an Auth0 user\n".to_vec()).await;
    assert_eq!(status, 201, "{file}");
    let id = file["id"].as_str().expect("id");
    let owner: uuid::Uuid = stack
        .db()
        .await
        .query_one("SELECT user_id FROM chat_files WHERE id = $1::text::uuid", &[&id])
        .await
        .expect("row")
        .get(0);
    assert_eq!(owner, user.id, "the derived id owns the row");
    let again = User::with_subject(&subject);
    let read = stack.http.get(stack.url(&format!("/files/{id}"))).header("authorization", again.bearer()).send().await;
    assert_eq!(read.expect("read").status().as_u16(), 200, "the same subject is the same user");
    let stranger = User::with_subject(&format!("auth0|{}", uuid::Uuid::new_v4().simple()));
    let refused =
        stack.http.get(stack.url(&format!("/files/{id}"))).header("authorization", stranger.bearer()).send().await;
    assert_eq!(refused.expect("read").status().as_u16(), 404);
}
