//! The migrate Lambda: wires CloudFormation's custom-resource events to `sluice_migrate`, and
//! its EventBridge schedule to the online upgrades a deploy left pending.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use sluice_migrate::Request;

#[tokio::main]
async fn main() -> Result<(), Error> {
    sluice_web::init_tracing();
    let sdk = sluice_blob::sdk_config().await;
    let sdk = &sdk;
    let embeddings = std::env::var("SLUICE_DEPLOYMENT_EMBEDDINGS_URL").ok().filter(|v| !v.is_empty());
    let embeddings = embeddings.as_deref();
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        let left = event.context.deadline().duration_since(std::time::SystemTime::now()).unwrap_or_default();
        if event.payload["detail-type"] == "Scheduled Event" {
            // The schedule: what the last deploy's online phase left, until the invocation's end.
            let deadline = std::time::Instant::now() + left.saturating_sub(sluice_migrate::ONLINE_MARGIN);
            return sluice_migrate::resume_online_upgrades(sdk, deadline).await.map(|_| ()).map_err(Error::from);
        }
        let request: Request = serde_json::from_value(event.payload)?;
        // The migration gets what is left of the invocation less the answer's own time.
        let budget = left.saturating_sub(sluice_migrate::ANSWER_TIMEOUT + std::time::Duration::from_secs(5));
        let (url, response) = sluice_migrate::handle(sdk, request, embeddings, budget).await;
        // CloudFormation waits for this answer; a lost one fails the stack after its timeout.
        sluice_migrate::respond(&url, &response, sluice_migrate::ANSWER_TIMEOUT).await.map_err(Error::from)
    }))
    .await
}
