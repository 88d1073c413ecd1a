//! The sweep Lambda: wires the EventBridge schedule to `sluice_sweep::handle`.

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sluice_web::init_tracing();
    let state = sluice_sweep::State::from_env().await.inspect_err(sluice_web::log_init_error)?;
    let state = &state;
    lambda_runtime::run(service_fn(move |_: LambdaEvent<serde_json::Value>| async move {
        // The error's text goes to the log; the run fails, and the schedule runs it again.
        sluice_sweep::handle(state, time::OffsetDateTime::now_utc())
            .await
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
    }))
    .await
}
