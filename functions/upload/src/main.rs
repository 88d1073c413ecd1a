//! The upload Lambda: wires the runtime to `sluice_upload::handle`.

use lambda_http::{Error, service_fn};

fn main() -> Result<(), Error> {
    // This binary is also its own parse worker; a worker serves one file and exits here.
    sluice_isolate::serve_if_worker();
    serve()
}

#[tokio::main]
async fn serve() -> Result<(), Error> {
    sluice_web::init_tracing();
    let state = sluice_upload::AppState::from_env().await.inspect_err(sluice_web::log_init_error)?;
    let state = &state;
    lambda_http::run(service_fn(move |request| async move {
        Ok::<_, std::convert::Infallible>(sluice_upload::handle(state, request).await)
    }))
    .await
}
