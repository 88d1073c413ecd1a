//! The extract Lambda: wires the runtime to `sluice_extract::handle`.

use lambda_runtime::{Error, LambdaEvent, service_fn};

fn main() -> Result<(), Error> {
    // This binary is also its own parse worker; a worker serves one file and exits here.
    sluice_isolate::serve_if_worker();
    serve()
}

#[tokio::main]
async fn serve() -> Result<(), Error> {
    sluice_web::init_tracing();
    let state = sluice_extract::State::from_env().inspect_err(sluice_web::log_init_error)?;
    let state = &state;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<sluice_extract::Request>| async move {
        // Lambda reports the error to the caller as the invocation's function error.
        sluice_extract::handle(state, event.payload).await.map_err(Error::from)
    }))
    .await
}
