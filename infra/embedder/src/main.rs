//! `sluice-embedder`: loads the model from `SLUICE_EMBEDDER_MODEL_DIR` and serves it on
//! `SLUICE_EMBEDDER_ADDR`, in the precision `SLUICE_EMBED_PRECISION` names (int8 unless fp32).

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    sluice_web::init_tracing();
    let dir = std::env::var("SLUICE_EMBEDDER_MODEL_DIR").map_err(|_| "SLUICE_EMBEDDER_MODEL_DIR is missing")?;
    let addr = std::env::var("SLUICE_EMBEDDER_ADDR").unwrap_or_else(|_| "127.0.0.1:3100".to_owned());
    let embedder = sluice_embedder::model::Embedder::load_configured(std::path::Path::new(&dir))?;
    tracing::info!(precision = embedder.precision().as_str(), "model loaded");
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    tracing::info!(addr, "sluice-embedder listening");
    sluice_embedder::serve(listener, sluice_embedder::Service::new(embedder)).await?;
    Ok(())
}
