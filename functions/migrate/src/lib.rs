//! The deploy's migrate step as a CloudFormation custom resource. On `Create` and `Update`
//! (every deploy changes the function's version, a property of the resource, so every
//! deploy runs it) the migrations are applied with the administrator's login and the
//! application login is created or brought up to date; `Delete` keeps the data. The answer
//! goes to CloudFormation's presigned URL; a failure is `FAILED` with a reason that names
//! the step, never a silent timeout: the migration runs within the invocation's time less
//! what the answer needs, and the answer itself has a timeout, so a database or network
//! that never answers ends in `FAILED`, not in CloudFormation waiting out its hour. The first
//! connection is tried for up to two minutes (a new proxy may still be registering its
//! target). The answer stays within CloudFormation's 4,096 bytes: what the online phase left
//! is a count, and a reason is cut to fit. With `SLUICE_DEPLOYMENT_EMBEDDINGS_URL` set (the
//! template sets the in-process model's `model://all-minilm-l6-v2`), the step also registers
//! it as the deployment-wide keyless `local` service, so an `app` base can embed.
//!
//! What the online phase leaves (keyword columns to fill, indexes to build) is resumed by the
//! same function on its schedule ([`resume_online_upgrades`]) until nothing is pending: a
//! deploy that changes no code does not run the custom resource again.

use aws_lambda_events::event::cloudformation::{
    CloudFormationCustomResourceRequest, CloudFormationCustomResourceResponse as Response,
    CloudFormationCustomResourceResponseStatus as Status,
};

pub type Request = CloudFormationCustomResourceRequest;

/// The one physical id: the schema is one resource whatever its version.
pub const PHYSICAL_ID: &str = "sluice-schema";

/// How long the answer to CloudFormation may take, connection included.
pub const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs the step for `request` within `time_limit`; the URL to answer at and the answer.
pub async fn handle(
    sdk: &aws_config::SdkConfig,
    request: Request,
    deployment_embeddings: Option<&str>,
    time_limit: std::time::Duration,
) -> (String, Response) {
    // The online phase ends in time for the answer; what it leaves, the next deploy (or
    // `sluice migrate`) finishes.
    let online_deadline = std::time::Instant::now() + time_limit.saturating_sub(ONLINE_MARGIN);
    // Boxed: the whole step's future is deep enough to pass the compiler's layout limit.
    handle_with(request, time_limit, Box::pin(migrate_from_env(sdk, deployment_embeddings, Some(online_deadline))))
        .await
}

/// What the online phase leaves of the step's time: the answer, and the batch under way.
pub const ONLINE_MARGIN: std::time::Duration = std::time::Duration::from_secs(20);

/// The longest reason sent to CloudFormation, whose whole answer is capped at 4,096 bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The schedule's run: the online phase of an upgrade, until `deadline`, with the
/// administrator's login; what it did (nothing once nothing is pending).
pub async fn resume_online_upgrades(
    sdk: &aws_config::SdkConfig,
    deadline: std::time::Instant,
) -> Result<sluice_store::OnlineUpgrades, String> {
    let db = sluice_store::Db::from_env_secret(sdk, 1, sluice_store::ADMIN_SECRET_VARIABLE)
        .await
        .map_err(|e| e.to_string())?;
    let online = db.finish_online_upgrades(Some(deadline)).await.map_err(|e| e.to_string())?;
    tracing::info!(
        rows_filled = online.rows_filled,
        finished = online.tables_finished.len(),
        pending = online.pending.len(),
        "online upgrades resumed"
    );
    Ok(online)
}

/// The whole step as the environment configures it: the migrations and logins, every
/// secret sealed before kinds were bound sealed again with its kind, then the online phase
/// of an upgrade until `online_deadline` (`None`: until it is done).
pub async fn migrate_from_env(
    sdk: &aws_config::SdkConfig,
    deployment_embeddings: Option<&str>,
    online_deadline: Option<std::time::Instant>,
) -> Result<sluice_store::MigrationReport, String> {
    let mut report = sluice_store::Db::migrate_from_env(sdk, deployment_embeddings).await.map_err(|e| e.to_string())?;
    // The deployment's key (the local stack names it by its alias).
    let key = ["SLUICE_KMS_KEY_ID", "SLUICE_KMS_KEY_ALIAS"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .ok_or_else(|| "SLUICE_KMS_KEY_ID is missing".to_owned())?;
    let db = sluice_store::Db::from_env_secret(sdk, 1, sluice_store::ADMIN_SECRET_VARIABLE)
        .await
        .map_err(|e| e.to_string())?;
    let vault = sluice_vault::Vault::new(aws_sdk_kms::Client::new(sdk), key);
    let bound = bind_secret_kinds(&db, &vault).await?;
    if bound > 0 {
        tracing::info!(bound, "secrets sealed again, bound to their kind");
    }
    report.online = db.finish_online_upgrades(online_deadline).await.map_err(|e| e.to_string())?;
    if !report.online.pending.is_empty() {
        tracing::warn!(pending = ?report.online.pending, "keyword columns still being filled; the next migrate run goes on");
    }
    Ok(report)
}

/// Seals every secret sealed before kinds were bound again, with its kind in the
/// encryption context, so a role allowed one kind only (the parse function's) opens it. A
/// value that does not open is left as it is and logged. The number bound.
pub async fn bind_secret_kinds(db: &sluice_store::Db, vault: &sluice_vault::Vault) -> Result<usize, String> {
    let mut bound = 0;
    let mut unopenable = std::collections::HashSet::new();
    loop {
        let batch = db.unbound_secrets(100 + unopenable.len() as i64).await.map_err(|e| e.to_string())?;
        let todo: Vec<_> = batch.into_iter().filter(|(meta, _)| !unopenable.contains(&meta.id)).collect();
        if todo.is_empty() {
            return Ok(bound);
        }
        for (meta, sealed) in todo {
            let old = sluice_vault::Binding::stored(meta.id, meta.org_id, &meta.kind, false);
            let sealed = sluice_vault::Sealed {
                sealed_key: sealed.sealed_key,
                nonce: sealed.nonce,
                ciphertext: sealed.ciphertext,
            };
            let value = match vault.open(old, &sealed).await {
                Ok(value) => value,
                Err(sluice_vault::VaultError::Unopenable) => {
                    tracing::error!(secret = %meta.id, "a secret does not open; left unbound");
                    unopenable.insert(meta.id);
                    continue;
                }
                Err(error) => return Err(error.to_string()),
            };
            let new = sluice_vault::Binding { kind: sluice_vault::kind_named(&meta.kind), ..old };
            let resealed = vault.seal(new, &value).await.map_err(|e| e.to_string())?;
            let stored = sluice_store::SealedValue {
                sealed_key: resealed.sealed_key,
                nonce: resealed.nonce,
                ciphertext: resealed.ciphertext,
            };
            if db.bind_secret(meta.id, &stored).await.map_err(|e| e.to_string())? {
                bound += 1;
            }
        }
    }
}

/// [`handle`] with the migration given: it is awaited at most `time_limit`.
pub async fn handle_with<E: std::fmt::Display>(
    request: Request,
    time_limit: std::time::Duration,
    migration: impl std::future::Future<Output = Result<sluice_store::MigrationReport, E>>,
) -> (String, Response) {
    let mut response = Response::default();
    response.physical_resource_id = PHYSICAL_ID.to_owned();
    let (url, migrate) = match request {
        CloudFormationCustomResourceRequest::Create(r) => {
            (response.stack_id, response.request_id, response.logical_resource_id) =
                (r.stack_id, r.request_id, r.logical_resource_id);
            (r.response_url, true)
        }
        CloudFormationCustomResourceRequest::Update(r) => {
            (response.stack_id, response.request_id, response.logical_resource_id) =
                (r.stack_id, r.request_id, r.logical_resource_id);
            (r.response_url, true)
        }
        CloudFormationCustomResourceRequest::Delete(r) => {
            (response.stack_id, response.request_id, response.logical_resource_id) =
                (r.stack_id, r.request_id, r.logical_resource_id);
            (r.response_url, false)
        }
        _ => {
            response.status = Status::Failed;
            response.reason = Some("migrate: unknown request type".to_owned());
            return (String::new(), response);
        }
    };
    if !migrate {
        response.status = Status::Success;
        response.reason = Some("the database and its data are kept".to_owned());
        return (url, response);
    }
    let Ok(outcome) = tokio::time::timeout(time_limit, migration).await else {
        tracing::error!(seconds = time_limit.as_secs(), "migration did not finish in time");
        response.status = Status::Failed;
        response.reason = Some(format!(
            "migrate: Timeout: the database or Secrets Manager did not answer within {} s; check that the \
             functions' subnets reach them (security groups, route tables, endpoints), then deploy again",
            time_limit.as_secs()
        ));
        return (url, response);
    };
    match outcome {
        Ok(report) => {
            tracing::info!(applied = ?report.applied, schema_version = report.schema_version, "migrated");
            response.status = Status::Success;
            response.data.insert("SchemaVersion".to_owned(), report.schema_version.to_string());
            response.data.insert("AppLogin".to_owned(), report.app_login);
            response.data.insert("VectorLogin".to_owned(), report.vector_login);
            response.data.insert("SearchLogin".to_owned(), report.search_login);
            // A count: the collections' names could pass the answer's 4,096 bytes. The
            // schedule finishes them; the log names them.
            response.data.insert("PendingBackfill".to_owned(), report.online.pending.len().to_string());
        }
        Err(error) => {
            tracing::error!(%error, "migration failed");
            response.status = Status::Failed;
            response.reason = Some(cut(format!("migrate: {error}"), MAX_REASON_BYTES));
        }
    }
    (url, response)
}

/// `text` within `max` bytes, cut at a character and marked so.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut at = max - 3;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push_str("...");
    }
    text
}

/// PUTs the answer to CloudFormation's presigned URL (with no content type, which the
/// signature does not cover), giving up after `timeout`.
pub async fn respond(url: &str, response: &Response, timeout: std::time::Duration) -> Result<(), String> {
    let body = serde_json::to_vec(response).map_err(|e| e.to_string())?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(timeout.min(std::time::Duration::from_secs(10)))
        .timeout(timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let answer = client
        .put(url)
        .header("content-type", "")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("the answer to CloudFormation could not be sent: {e}"))?;
    if !answer.status().is_success() {
        return Err(format!("CloudFormation's URL refused the answer: {}", answer.status()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create() -> Request {
        serde_json::from_value(serde_json::json!({
            "RequestType": "Create", "ResponseURL": "http://127.0.0.1:9/r", "StackId": "arn:aws:cloudformation:us-east-1:1:stack/s/1",
            "RequestId": "r", "ResourceType": "Custom::SchemaMigration", "LogicalResourceId": "SchemaMigration",
            "ServiceToken": "arn", "ResourceProperties": {"ServiceToken": "arn"}
        }))
        .expect("a Create request")
    }

    #[tokio::test]
    async fn the_answer_fits_cloudformation_s_4096_bytes_however_much_is_pending_or_wrong() {
        let pending: Vec<String> = (0..5000).map(|n| format!("rag_collection_number_{n}")).collect();
        let report = sluice_store::MigrationReport {
            applied: vec![22],
            schema_version: 22,
            app_login: "sluice_app".to_owned(),
            vector_login: "sluice_vectors".to_owned(),
            search_login: "sluice_search".to_owned(),
            online: sluice_store::OnlineUpgrades { pending, ..Default::default() },
        };
        let limit = std::time::Duration::from_secs(5);
        let (_, answer) = handle_with(create(), limit, async { Ok::<_, String>(report) }).await;
        assert_eq!(answer.data.get("PendingBackfill").map(String::as_str), Some("5000"));
        assert!(serde_json::to_vec(&answer).expect("json").len() <= 4096);
        let error = "é".repeat(10_000);
        let (_, answer) = handle_with(create(), limit, async { Err::<sluice_store::MigrationReport, _>(error) }).await;
        assert_eq!(answer.status, Status::Failed);
        assert!(serde_json::to_vec(&answer).expect("json").len() <= 4096);
        assert!(answer.reason.expect("reason").ends_with("..."));
    }
}
