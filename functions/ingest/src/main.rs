//! The ingest Lambda: wires the SQS event source to `sluice_ingest::handle`.

use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sluice_web::init_tracing();
    let state = sluice_ingest::State::from_env().await.inspect_err(sluice_web::log_init_error)?;
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<sluice_queue::SqsEvent>| async move {
        Ok::<_, Error>(sluice_ingest::handle(state, event.payload).await)
    }))
    .await
}
