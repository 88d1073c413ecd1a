//! The knowledge Lambda: wires the runtime to `sluice_knowledge::handle`.

use lambda_http::{Error, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    sluice_web::init_tracing();
    lambda_http::run(service_fn(|request| async move {
        Ok::<_, std::convert::Infallible>(sluice_knowledge::handle(request).await)
    }))
    .await
}
