//! The deploy's migrate step as a CloudFormation custom resource. On `Create` and `Update`
//! (every deploy changes the function's version, a property of the resource, so every
//! deploy runs it) the migrations are applied with the administrator's login and the
//! application login is created or brought up to date; `Delete` keeps the data. The answer
//! goes to CloudFormation's presigned URL; a failure is `FAILED` with a reason that names
//! the step, never a silent timeout: the migration runs within the invocation's time less
//! what the answer needs, and the answer itself has a timeout, so a database or network
//! that never answers ends in `FAILED`, not in CloudFormation waiting out its hour. With `SLUICE_DEPLOYMENT_EMBEDDINGS_URL` set (the
//! template sets the in-process model's `model://all-minilm-l6-v2`), the step also registers
//! it as the deployment-wide keyless `local` service, so an `app` base can embed.

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
    handle_with(request, time_limit, sluice_store::Db::migrate_from_env(sdk, deployment_embeddings)).await
}

/// [`handle`] with the migration given: it is awaited at most `time_limit`.
pub async fn handle_with(
    request: Request,
    time_limit: std::time::Duration,
    migration: impl std::future::Future<Output = Result<sluice_store::MigrationReport, sluice_store::StoreError>>,
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
        }
        Err(error) => {
            tracing::error!(%error, "migration failed");
            response.status = Status::Failed;
            response.reason = Some(format!("migrate: {error}"));
        }
    }
    (url, response)
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
