//! The parse Lambda: wires the runtime to `sluice_parse::handle`.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use sluice_queue::SqsEvent;

fn main() -> Result<(), Error> {
    // This binary is also its own parse worker; a worker serves one file and exits here.
    sluice_isolate::serve_if_worker();
    serve()
}

#[tokio::main]
async fn serve() -> Result<(), Error> {
    sluice_web::init_tracing();
    let state = sluice_parse::State::from_env().await.inspect_err(sluice_web::log_init_error)?;
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // The invocation's deadline, on this process's monotonic clock.
        let left = event.context.deadline().duration_since(std::time::SystemTime::now()).unwrap_or_default();
        let deadline = std::time::Instant::now() + left;
        Ok::<_, std::convert::Infallible>(sluice_parse::handle(state, event.payload, deadline).await)
    }))
    .await
}
