//! The search Lambda: wires the runtime to `sluice_search::handle`, with the in-process
//! model checked at the cold start (it embeds the keyless collections' queries).

use lambda_http::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sluice_web::init_tracing();
    let state = sluice_search::State::from_env().await.inspect_err(sluice_web::log_init_error)?;
    let state = &state;
    lambda_http::run(service_fn(move |request| async move {
        Ok::<_, std::convert::Infallible>(sluice_search::handle(state, request).await)
    }))
    .await
}
