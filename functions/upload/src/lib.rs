//! The `upload` function: every route that takes a file's bytes in or hands them out.
//!
//! `handle` is what the Lambda runtime, the local runner and the tests all call.

mod bodies;
mod documents;
mod error;
mod files;
mod intents;
mod multipart;
mod readback;

pub use error::UploadError;

use lambda_http::{Body, Request, Response};
use sluice_blob::Blob;
use sluice_domain::{BlockingPool, Config};
use sluice_extraction::Reader;
use sluice_queue::jobs::Dispatcher;
use sluice_store::Db;
use uuid::Uuid;

/// Everything a request needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    pub config: Config,
    pub db: Db,
    pub blob: Blob,
    pub pool: BlockingPool,
    /// Reads each file: the extract function for the file's owner, or a worker process.
    pub reader: Reader,
    /// Sends the jobs the outbox records (document parses) after their commit.
    pub dispatcher: Dispatcher,
}

impl AppState {
    pub fn new(config: Config, db: Db, blob: Blob, reader: Reader, sqs: aws_sdk_sqs::Client) -> Self {
        let pool = BlockingPool::new(config.file_io_max_workers);
        let dispatcher = Dispatcher::new(sqs, config.job_routes());
        Self { config, db, blob, pool, reader, dispatcher }
    }

    /// Builds the state from the environment: the SDK's standard settings, the database
    /// (`Db::from_env`), the configuration `Config::from_env` reads, and the reader
    /// (`Reader::from_env`: the extract function, or workers that are this binary, so its
    /// `main` calls `sluice_isolate::serve_if_worker` first).
    pub async fn from_env() -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let config = Config::from_env()?;
        let sdk = sluice_blob::sdk_config().await;
        let db = Db::from_env(&sdk, 4).await?;
        let blob = Blob::new(sluice_blob::s3_client(&sdk), config.bucket.clone(), config.kms_key_id.clone());
        let reader = Reader::from_env(&sdk, blob.clone(), config.parse_max_memory_bytes)?;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        Ok(Self::new(config, db, blob, reader, sqs))
    }
}

/// The routes this function serves, decided from the method and the path.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Upload,
    UploadIntent,
    File(Uuid),
    FileContent(Uuid),
    FileText(Uuid),
    FilePage(Uuid, u32),
    DeleteFile(Uuid),
    LinkAttachments(String),
    /// A file route naming an id that cannot exist: answered like an absent file.
    NoSuchFile,
    IngestIntoBase(Uuid),
    DocumentIntent(Uuid),
    IngestIntoCollection(String),
    /// A base route naming an id that cannot exist: answered like an absent collection.
    NoSuchBase,
    SupportedFormats,
    RetryDocument(Uuid),
    DeleteDocument(Uuid),
    /// A document by its id, or by the `tracking_id` an upload answered (the same id).
    Document(Uuid),
    DocumentText(Uuid),
    DocumentFile(Uuid),
    /// A document route naming an id that cannot exist.
    NoSuchDocument,
}

/// Every route this function serves: its router answers nothing else, and the test in
/// `tests/tests/contract.rs` holds the table against `docs/openapi.yaml` and the template.
pub const ROUTES: &[&str] = &[
    "POST /api/v1/files/upload",
    "POST /api/v1/files/uploads",
    "GET /api/v1/files/{id}",
    "GET /api/v1/files/{id}/content",
    "GET /api/v1/files/{id}/text",
    "GET /api/v1/files/{id}/pages/{n}",
    "DELETE /api/v1/files/{id}",
    "POST /api/v1/messages/{message_id}/attachments",
    "POST /api/v1/kb/{kb_id}/documents",
    "POST /api/v1/kb/{kb_id}/documents/uploads",
    "POST /api/v1/rag/collections/{name}/ingest",
    "GET /api/v1/rag/supported-formats",
    "GET /api/v1/rag/documents/{id}",
    "GET /api/v1/rag/documents/by-tracking/{tracking_id}",
    "GET /api/v1/rag/documents/{id}/text",
    "GET /api/v1/rag/documents/{id}/file",
    "POST /api/v1/rag/documents/{id}/retry",
    "DELETE /api/v1/rag/documents/{id}",
];

fn route(method: &str, path: &str) -> Option<Route> {
    sluice_web::route_template(ROUTES, method, path)?;
    let path = path.strip_prefix("/api/v1/")?.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').collect();
    let file_id = |s: &str| Uuid::parse_str(s).ok();
    // A chat file is also named by its attachment id (32 hex digits, maybe an extension).
    let attachment_id = sluice_domain::attachment::parse_id;
    Some(match (method, segments.as_slice()) {
        ("POST", ["files", "upload"]) => Route::Upload,
        ("POST", ["files", "uploads"]) => Route::UploadIntent,
        ("GET", ["files", id]) => attachment_id(id).map_or(Route::NoSuchFile, Route::File),
        ("GET", ["files", id, "content"]) => attachment_id(id).map_or(Route::NoSuchFile, Route::FileContent),
        ("GET", ["files", id, "text"]) => attachment_id(id).map_or(Route::NoSuchFile, Route::FileText),
        ("GET", ["files", id, "pages", n]) => match (attachment_id(id), n.parse::<u32>()) {
            (Some(id), Ok(n)) => Route::FilePage(id, n),
            _ => Route::NoSuchFile,
        },
        ("DELETE", ["files", id]) => attachment_id(id).map_or(Route::NoSuchFile, Route::DeleteFile),
        ("POST", ["messages", message_id, "attachments"]) => Route::LinkAttachments((*message_id).to_owned()),
        ("POST", ["kb", id, "documents"]) => file_id(id).map_or(Route::NoSuchBase, Route::IngestIntoBase),
        ("POST", ["kb", id, "documents", "uploads"]) => file_id(id).map_or(Route::NoSuchBase, Route::DocumentIntent),
        ("POST", ["rag", "collections", name, "ingest"]) => Route::IngestIntoCollection((*name).to_owned()),
        ("GET", ["rag", "supported-formats"]) => Route::SupportedFormats,
        ("POST", ["rag", "documents", id, "retry"]) => file_id(id).map_or(Route::NoSuchDocument, Route::RetryDocument),
        ("DELETE", ["rag", "documents", id]) => file_id(id).map_or(Route::NoSuchDocument, Route::DeleteDocument),
        ("GET", ["rag", "documents", "by-tracking", id]) | ("GET", ["rag", "documents", id]) => {
            file_id(id).map_or(Route::NoSuchDocument, Route::Document)
        }
        ("GET", ["rag", "documents", id, "text"]) => file_id(id).map_or(Route::NoSuchDocument, Route::DocumentText),
        ("GET", ["rag", "documents", id, "file"]) => file_id(id).map_or(Route::NoSuchDocument, Route::DocumentFile),
        _ => return None,
    })
}

/// Serves one API Gateway request.
pub async fn handle(state: &AppState, request: Request) -> Response<Body> {
    let result = async {
        let caller = sluice_web::caller(&request).map_err(|_| UploadError::Unauthorized)?;
        let method = request.method().as_str().to_owned();
        let path = request.uri().path().to_owned();
        match route(&method, &path).ok_or(UploadError::NoRoute)? {
            Route::Upload => files::upload(state, &caller, request).await,
            Route::UploadIntent => intents::create(state, &caller, &request).await,
            Route::File(id) => files::get(state, &caller, id).await,
            Route::FileContent(id) => files::content(state, &caller, id).await,
            Route::FileText(id) => files::text(state, &caller, id).await,
            Route::FilePage(id, n) => files::page(state, &caller, id, n).await,
            Route::DeleteFile(id) => files::delete(state, &caller, id).await,
            Route::LinkAttachments(message_id) => files::link(state, &caller, &message_id, &request).await,
            Route::NoSuchFile => Err(UploadError::NotFound("file")),
            Route::IngestIntoBase(id) => documents::ingest(state, &caller, documents::Target::Base(id), request).await,
            Route::DocumentIntent(id) => documents::create_intent(state, &caller, id, &request).await,
            Route::IngestIntoCollection(name) => {
                documents::ingest(state, &caller, documents::Target::Collection(name), request).await
            }
            Route::NoSuchBase => Err(UploadError::NotFound("collection")),
            Route::SupportedFormats => {
                let query = lambda_http::RequestExt::query_string_parameters(&request);
                documents::supported_formats(query.first("parser"))
            }
            Route::RetryDocument(id) => documents::retry(state, &caller, id).await,
            Route::DeleteDocument(id) => documents::delete(state, &caller, id).await,
            Route::Document(id) => readback::get(state, &caller, id).await,
            Route::DocumentText(id) => readback::text(state, &caller, id, &request).await,
            Route::DocumentFile(id) => readback::file(state, &caller, id).await,
            Route::NoSuchDocument => Err(UploadError::NotFound("document")),
        }
    }
    .await;
    result.unwrap_or_else(UploadError::into_response)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_markdown_formats_a_reindex_parses_again_are_those_the_readers_write() {
        assert_eq!(sluice_domain::ingestion::MARKDOWN_FILETYPES, sluice_formats::kinds::MARKDOWN_EXTENSIONS);
    }

    use super::*;

    #[test]
    fn routes_are_decided_by_method_and_path() {
        let id = Uuid::new_v4();
        assert_eq!(route("POST", "/api/v1/files/upload"), Some(Route::Upload));
        assert_eq!(route("POST", "/api/v1/files/uploads"), Some(Route::UploadIntent));
        assert_eq!(route("GET", &format!("/api/v1/files/{id}")), Some(Route::File(id)));
        assert_eq!(route("GET", &format!("/api/v1/files/{id}/content")), Some(Route::FileContent(id)));
        assert_eq!(route("DELETE", &format!("/api/v1/files/{id}/")), Some(Route::DeleteFile(id)));
        assert_eq!(route("GET", "/api/v1/files/not-a-uuid"), Some(Route::NoSuchFile));
        assert_eq!(route("GET", &format!("/api/v1/files/{id}/pages/2")), Some(Route::FilePage(id, 2)));
        assert_eq!(route("GET", &format!("/api/v1/files/{id}/pages/x")), Some(Route::NoSuchFile));
        assert_eq!(route("GET", &format!("/api/v1/rag/documents/{id}")), Some(Route::Document(id)));
        assert_eq!(route("GET", &format!("/api/v1/rag/documents/by-tracking/{id}")), Some(Route::Document(id)));
        assert_eq!(route("GET", "/api/v1/rag/documents/by-tracking/nope"), Some(Route::NoSuchDocument));
        assert_eq!(route("GET", &format!("/api/v1/rag/documents/{id}/text")), Some(Route::DocumentText(id)));
        assert_eq!(route("GET", &format!("/api/v1/rag/documents/{id}/file")), Some(Route::DocumentFile(id)));
        assert_eq!(route("PUT", "/api/v1/files/upload"), None);
        assert_eq!(route("GET", "/files/upload"), None);
    }

    #[test]
    fn every_route_in_the_table_is_served_and_nothing_else_is() {
        for (method, path) in sluice_web::route_examples(ROUTES) {
            let routed = route(&method, &path);
            let refused = matches!(routed, Some(Route::NoSuchFile | Route::NoSuchBase | Route::NoSuchDocument));
            assert!(routed.is_some() && !refused, "{method} {path}: {routed:?}");
        }
        assert_eq!(route("POST", "/api/v1/files/upload/extra"), None);
    }
}
