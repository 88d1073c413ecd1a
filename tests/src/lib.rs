//! Helpers for the end-to-end tests and benchmarks: they drive the running local stack
//! (`infra/local/test` starts it) over HTTP with real tokens, and look behind it with the
//! real S3 client and a real PostgreSQL connection.

pub mod bench;
pub mod browser;
pub mod built_template;
pub mod contract;
pub mod corpus;
pub mod llamaparse_stand_in;
pub mod ollama_stand_in;
pub use sluice_local::runtime_api;
pub mod rerank_stand_in;
pub mod s3_fault_proxy;
pub mod stub;
pub mod vectors;
pub mod vision_stand_in;

use std::collections::BTreeSet;
use uuid::Uuid;

/// The running stack, as the test command's environment describes it.
#[derive(Debug, Clone)]
pub struct Stack {
    pub api: String,
    pub http: reqwest::Client,
    pub s3: aws_sdk_s3::Client,
    pub kms: aws_sdk_kms::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub bucket: String,
    /// The database behind the stack's TLS front (pgbouncer, as RDS Proxy in AWS).
    pub db_target: sluice_store::DbTarget,
    /// The functions' least-privileged login and the administrator's, from Secrets Manager.
    pub app_login: sluice_store::Login,
    pub vector_login: sluice_store::Login,
    /// The search function's read-only login.
    pub search_login: sluice_store::Login,
    pub admin_login: sluice_store::Login,
    pub sdk: aws_config::SdkConfig,
}

fn required(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: these tests drive the local stack; run them with `infra/local/test`")
    })
}

impl Stack {
    pub async fn from_env() -> Self {
        let sdk = sluice_blob::sdk_config().await;
        Self {
            api: required("SLUICE_API_URL"),
            http: {
                sluice_embed::install_tls_provider();
                reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("http client")
            },
            s3: sluice_blob::s3_client(&sdk),
            kms: aws_sdk_kms::Client::new(&sdk),
            sqs: aws_sdk_sqs::Client::new(&sdk),
            bucket: required("SLUICE_BUCKET"),
            db_target: sluice_store::DbTarget::from_env().expect("SLUICE_DB_HOST and friends"),
            app_login: sluice_store::Login::from_env_secret(&sdk, sluice_store::APP_SECRET_VARIABLE)
                .await
                .expect("the application login's secret"),
            vector_login: sluice_store::Login::from_env_secret(&sdk, sluice_store::VECTOR_SECRET_VARIABLE)
                .await
                .expect("the vector login's secret"),
            search_login: sluice_store::Login::from_env_secret(&sdk, sluice_store::SEARCH_SECRET_VARIABLE)
                .await
                .expect("the search login's secret"),
            admin_login: sluice_store::Login::from_env_secret(&sdk, sluice_store::ADMIN_SECRET_VARIABLE)
                .await
                .expect("the administrator's secret"),
            sdk,
        }
    }

    /// The store as ingest, knowledge and teardown open it: TLS, the vector login (rows and
    /// vector tables), the schema checked.
    pub async fn store(&self, max_connections: usize) -> sluice_store::Db {
        self.store_as(&self.vector_login, max_connections).await
    }

    /// The store with the search login: what the search function connects as.
    pub async fn search_store(&self, max_connections: usize) -> sluice_store::Db {
        self.store_as(&self.search_login, max_connections).await
    }

    /// The store with the application login: what upload, parse and sweep connect as.
    pub async fn app_store(&self, max_connections: usize) -> sluice_store::Db {
        self.store_as(&self.app_login, max_connections).await
    }

    /// A pool as `login` on a migrated schema.
    async fn store_as(&self, login: &sluice_store::Login, max_connections: usize) -> sluice_store::Db {
        let db = sluice_store::Db::open(&self.db_target, login, max_connections).expect("pool");
        db.require_current_schema().await.expect("a migrated schema");
        db
    }

    /// The store as the administrator sees it: for what no function's login may read
    /// (the audit log is insert-only to them).
    pub async fn admin_store(&self) -> sluice_store::Db {
        sluice_store::Db::open(&self.db_target, &self.admin_login, 1).expect("pool")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.api)
    }

    /// The ARN of the key the stack encrypts with.
    pub async fn kms_key_arn(&self) -> String {
        let alias = required("SLUICE_KMS_KEY_ALIAS");
        let described = self.kms.describe_key().key_id(alias).send().await.expect("the local key exists");
        described.key_metadata().and_then(|m| m.arn()).expect("arn").to_owned()
    }

    /// Every object key under `prefix`.
    pub async fn keys_under(&self, prefix: &str) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        let mut pages = self.s3.list_objects_v2().bucket(&self.bucket).prefix(prefix).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.expect("list objects");
            keys.extend(page.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
        }
        keys
    }

    /// `POST /files/upload` of one file as `user`: the status and the JSON answer.
    pub async fn upload(
        &self,
        user: &User,
        name: &str,
        mime: Option<&str>,
        bytes: Vec<u8>,
    ) -> (u16, serde_json::Value) {
        self.post_form(user, "/files/upload", file_form(name, mime, bytes)).await
    }

    /// `POST /files/uploads`: the status and the JSON answer.
    pub async fn intent(&self, user: &User, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.call_json(user, reqwest::Method::POST, "/files/uploads", Some(body)).await
    }

    /// PUTs `bytes` to an intent's presigned URL with exactly the headers it names; the
    /// status S3 answered.
    pub async fn put_presigned(&self, intent: &serde_json::Value, bytes: Vec<u8>) -> u16 {
        let upload = &intent["upload"];
        let mut request = self.http.put(upload["url"].as_str().expect("a url"));
        for (name, value) in upload["headers"].as_object().expect("headers") {
            if !name.eq_ignore_ascii_case("content-length") {
                request = request.header(name.as_str(), value.as_str().expect("a header value"));
            }
        }
        request.body(bytes).send().await.expect("PUT").status().as_u16()
    }

    /// `GET /files/{id}` once the parse step has judged the file (status no longer
    /// `pending`); fails after 60 seconds.
    pub async fn settled(&self, user: &User, id: &str) -> serde_json::Value {
        self.settled_every(user, id, std::time::Duration::from_millis(100)).await
    }

    /// `settled`, polling every `pause`.
    pub async fn settled_every(&self, user: &User, id: &str, pause: std::time::Duration) -> serde_json::Value {
        let started = std::time::Instant::now();
        loop {
            let response = self
                .http
                .get(self.url(&format!("/files/{id}")))
                .header("authorization", user.bearer())
                .send()
                .await
                .expect("GET file");
            assert_eq!(response.status().as_u16(), 200, "the file is gone");
            let file: serde_json::Value = response.json().await.expect("JSON");
            if file["status"] != "pending" {
                return file;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(60), "still pending after 60 s: {file}");
            tokio::time::sleep(pause).await;
        }
    }

    /// Waits until the queue `name` holds no message, visible or in flight; fails after 60 s.
    pub async fn drained(&self, name: &str) {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let url = self.sqs.get_queue_url().queue_name(name).send().await.expect("queue url");
        let url = url.queue_url().expect("url").to_owned();
        let started = std::time::Instant::now();
        loop {
            let attributes = self
                .sqs
                .get_queue_attributes()
                .queue_url(&url)
                .attribute_names(A::ApproximateNumberOfMessages)
                .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
                .send()
                .await
                .expect("queue attributes");
            let count = |name: A| {
                attributes.attributes().and_then(|a| a.get(&name)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            };
            if count(A::ApproximateNumberOfMessages) + count(A::ApproximateNumberOfMessagesNotVisible) == 0 {
                return;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(60), "{name} did not drain");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// What is stored for `user`: objects under their prefix and rows in `chat_files`.
    pub async fn stored_for(&self, user: &User) -> (usize, i64) {
        let objects = self.keys_under(&format!("media/{}/", user.id)).await.len();
        let rows = self
            .db()
            .await
            .query_one("SELECT count(*) FROM chat_files WHERE user_id = $1", &[&user.id])
            .await
            .expect("count rows")
            .get(0);
        (objects, rows)
    }

    /// One API call as `user`: the status and the body, byte for byte.
    pub async fn call(
        &self,
        user: &User,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, String) {
        let mut request = self.http.request(method, self.url(path)).header("authorization", user.bearer());
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        (response.status().as_u16(), response.text().await.expect("body"))
    }

    /// One API call whose answer is JSON.
    pub async fn call_json(
        &self,
        user: &User,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let (status, text) = self.call(user, method.clone(), path, body).await;
        let answer: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
        self.holds_to_contract(method.as_str(), path, status, &answer);
        (status, answer)
    }

    /// Posts a multipart form as `user`: the status and the JSON answer, held to the contract.
    pub async fn post_form(&self, user: &User, path: &str, form: reqwest::multipart::Form) -> (u16, serde_json::Value) {
        let request = self.http.post(self.url(path)).header("authorization", user.bearer()).multipart(form);
        let response = request.send().await.expect("upload");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        let answer: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
        self.holds_to_contract("POST", path, status, &answer);
        (status, answer)
    }

    /// Uploads a document into a base (`POST /kb/{kb_id}/documents`); its `202` answer.
    pub async fn upload_document(&self, user: &User, kb_id: &str, filename: &str, bytes: &[u8]) -> serde_json::Value {
        let form = file_form(filename, None, bytes.to_vec());
        let (status, answer) = self.post_form(user, &format!("/kb/{kb_id}/documents"), form).await;
        assert_eq!(status, 202, "{answer}");
        answer
    }

    /// Fails the test when an answer breaks `docs/openapi.yaml`.
    pub fn holds_to_contract(&self, method: &str, path: &str, status: u16, answer: &serde_json::Value) {
        let path = format!("/api/v1{}", path.split('?').next().unwrap_or_default());
        if let Err(broken) = contract::contract().check(method, &path, status, answer) {
            panic!("{broken}");
        }
    }

    /// Waits until a base reports `complete` (nothing processing); its ingestion counts.
    /// Fails after 90 seconds.
    pub async fn indexed(&self, user: &User, kb_id: &str) -> serde_json::Value {
        let started = std::time::Instant::now();
        loop {
            let path = format!("/kb/{kb_id}/ingestion");
            let (status, answer) = self.call_json(user, reqwest::Method::GET, &path, None).await;
            assert_eq!(status, 200, "{answer}");
            if answer["indexing_status"] == "complete" {
                return answer;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(90), "still indexing: {answer}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Waits until knowledge-base document `id` is no longer processing (done or failed) and
    /// returns it as `GET /rag/documents/{id}` answers; fails after `limit`.
    pub async fn document_settled(&self, user: &User, id: &str, limit: std::time::Duration) -> serde_json::Value {
        let started = std::time::Instant::now();
        loop {
            let path = format!("/rag/documents/{id}");
            let (status, document) = self.call_json(user, reqwest::Method::GET, &path, None).await;
            assert_eq!(status, 200, "{document}");
            if document["status"] != "processing" {
                return document;
            }
            assert!(started.elapsed() < limit, "still processing: {document}");
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }

    /// Writes an object as a stray would land: plain bytes, no row, no encryption asked.
    pub async fn put_plain(&self, key: &str, bytes: &[u8]) {
        self.s3.put_object().bucket(&self.bucket).key(key).body(bytes.to_vec().into()).send().await.expect("put");
    }

    /// Waits until a message whose body satisfies `matches` is in the dead-letter queue
    /// `queue` (its name), and takes it off; fails after `limit`.
    pub async fn dead_letter(&self, queue: &str, limit: std::time::Duration, matches: impl Fn(&str) -> bool) {
        let url = self.sqs.get_queue_url().queue_name(queue).send().await.expect("queue").queue_url;
        let url = url.expect("url");
        let started = std::time::Instant::now();
        loop {
            assert!(started.elapsed() < limit, "no such message reached {queue}");
            let received = self
                .sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .expect("receive dead letters");
            if let Some(message) = received.messages().iter().find(|m| m.body().is_some_and(&matches)) {
                let handle = message.receipt_handle().expect("handle");
                self.sqs.delete_message().queue_url(&url).receipt_handle(handle).send().await.expect("delete");
                return;
            }
        }
    }

    /// The sweep as the stack runs it: its key and its queues, as the local runner finds
    /// them; thresholds from the environment, for the caller to move.
    pub async fn sweep_state(&self) -> sluice_sweep::State {
        let config = self.config().await;
        // The sweep's own login, as the template gives it.
        let db = self.app_store(2).await;
        let blob = sluice_blob::Blob::new(self.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
        sluice_sweep::State::new(config, db, blob, self.sqs.clone())
    }

    /// A front door of its own (the local stack's, on a free loopback port) over `db`,
    /// serving `search` as its search function's state — a test keeps a clone of that state
    /// to look inside it. Its base URL.
    pub async fn door(&self, db: sluice_store::Db, search: sluice_search::State) -> String {
        let config = self.config().await;
        let blob = sluice_blob::Blob::new(self.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
        // The parse workers are the stack's own binary, as they are the function's in Lambda.
        let test_binary = std::env::current_exe().expect("this test");
        let worker = test_binary.parent().and_then(|deps| deps.parent()).expect("target dir").join("sluice-local");
        let extractor = sluice_isolate::Extractor::new(worker, config.parse_max_memory_bytes);
        let issuer = sluice_local::jwt::LocalIssuer::from_env().expect("the stack's issuer");
        let door = sluice_local::door::Door {
            body_cap_bytes: config.request_body_cap_bytes(),
            knowledge: sluice_knowledge::State::new(config.clone(), db.clone(), &self.sdk),
            search,
            upload: sluice_upload::AppState::new(
                config,
                db,
                blob,
                sluice_extraction::Reader::Workers(extractor),
                self.sqs.clone(),
            ),
            authorizer: issuer.authorizer(),
            issuer,
            cors: sluice_local::cors::api_cors(&sluice_local::cors::allowed_origins()),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listener");
        let address = listener.local_addr().expect("address");
        tokio::spawn(sluice_local::door::serve(listener, std::sync::Arc::new(door)));
        format!("http://{address}")
    }

    /// The functions' configuration as the stack gives it: its key, its queues, and the
    /// rest from the environment.
    pub async fn config(&self) -> sluice_domain::Config {
        let key = self.kms_key_arn().await;
        let mut queues = std::collections::HashMap::new();
        for (variable, name) in [
            ("SLUICE_PARSE_QUEUE_URL", "sluice-parse"),
            ("SLUICE_INGEST_QUEUE_URL", "sluice-ingest"),
            ("SLUICE_TEARDOWN_QUEUE_URL", "sluice-teardown"),
        ] {
            let url = self.sqs.get_queue_url().queue_name(name).send().await.expect("queue").queue_url;
            queues.insert(variable, url.expect("url"));
        }
        sluice_domain::Config::from_lookup(|name| match name {
            "SLUICE_KMS_KEY_ID" => Some(key.clone()),
            other => queues.get(other).cloned().or_else(|| std::env::var(other).ok()),
        })
        .expect("config")
    }

    /// A connection as the administrator (over TLS), for a test that looks behind the
    /// functions or arranges what no route can.
    pub async fn db(&self) -> tokio_postgres::Client {
        sluice_store::connect_once(&self.db_target, &self.admin_login).await.expect("connect to the database")
    }
}

/// Records the body of every request an SDK client sends, for a test that asserts what
/// reached the service.
#[derive(Debug, Clone, Default)]
pub struct RecordBodies(pub std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl aws_smithy_runtime_api::client::interceptors::Intercept for RecordBodies {
    fn name(&self) -> &'static str {
        "RecordBodies"
    }

    fn read_before_transmit(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let body = context.request().body().bytes().map(|b| String::from_utf8_lossy(b).into_owned());
        self.0.lock().expect("lock").push(body.unwrap_or_default());
        Ok(())
    }
}

/// An STS client of the stack's emulator that records each request's body.
pub fn recording_sts(
    sdk: &aws_config::SdkConfig,
) -> (aws_sdk_sts::Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let recorder = RecordBodies::default();
    let config = aws_sdk_sts::config::Builder::from(sdk).interceptor(recorder.clone()).build();
    (aws_sdk_sts::Client::from_conf(config), recorder.0)
}

/// A user of the local stack with a real token.
#[derive(Debug, Clone)]
pub struct User {
    pub id: Uuid,
    pub token: String,
}

/// The stack's identity provider (its key and issuer from the environment), read once.
pub fn local_issuer() -> &'static sluice_local::jwt::LocalIssuer {
    static ISSUER: std::sync::OnceLock<sluice_local::jwt::LocalIssuer> = std::sync::OnceLock::new();
    ISSUER.get_or_init(|| {
        sluice_local::jwt::LocalIssuer::from_env().expect("the stack's token issuer: run with `infra/local/test`")
    })
}

impl User {
    /// A user whose IdP subject is not a UUID (Auth0's `auth0|…`): the id the functions
    /// derive for it, and a token naming the subject.
    pub fn with_subject(subject: &str) -> Self {
        let issuer = local_issuer();
        let token = issuer.issue(&issuer.claims(subject, None, &[], false, 3600)).expect("token");
        Self { id: sluice_domain::caller::user_id_for(&issuer.issuer, subject), token }
    }

    pub fn new() -> Self {
        Self::with(None, &[], false)
    }

    pub fn with(org: Option<Uuid>, permissions: &[&str], app_admin: bool) -> Self {
        let id = Uuid::new_v4();
        let permissions: Vec<String> = permissions.iter().map(|p| (*p).to_owned()).collect();
        let issuer = local_issuer();
        let claims = issuer.claims(&id.to_string(), org, &permissions, app_admin, 3600);
        let token = issuer.issue(&claims).expect("token");
        Self { id, token }
    }

    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }
}

impl Default for User {
    fn default() -> Self {
        Self::new()
    }
}

/// A multipart form with one `file` part.
pub fn file_form(filename: &str, mime: Option<&str>, bytes: Vec<u8>) -> reqwest::multipart::Form {
    let mut part = reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned());
    if let Some(mime) = mime {
        part = part.mime_str(mime).expect("mime");
    }
    reqwest::multipart::Form::new().part("file", part)
}

/// A survey report of `count` pages, twelve lines of about 80 characters each, every line
/// its page's own; page `edited` (if any) has one line rewritten. The benchmarks' long PDF.
pub fn survey_pdf(count: usize, edited: Option<usize>) -> Vec<u8> {
    let text: Vec<String> = (0..count)
        .map(|n| {
            (0..12)
                .map(|line| {
                    if Some(n) == edited && line == 5 {
                        format!("Page {n}, line {line}: this paragraph was rewritten after the survey was reviewed.")
                    } else {
                        format!(
                            "Page {n}, line {line}: the field team logged {} readings at station {}.",
                            n * 13 + line,
                            line * 17 + n
                        )
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let text: Vec<&str> = text.iter().map(String::as_str).collect();
    sluice_fixtures::pdf(&text)
}

/// A memory line of `/proc/{process}/status` (`VmHWM`, `VmRSS`, …) in MiB; `process` is a
/// pid or `self`.
pub fn process_memory_mib(process: &str, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: f64 = line.split_whitespace().next()?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A 1×1 PNG that image readers accept.
pub fn tiny_png(width: u32, height: u32) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&width.to_be_bytes());
    png.extend_from_slice(&height.to_be_bytes());
    png.extend_from_slice(b"\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\0IEND\xaeB`\x82");
    png
}

/// Waits until `check` holds, polling every 200 ms; fails after `limit`.
/// The `content` of each hit of a `/rag/search` answer, in order.
pub fn result_contents(found: &serde_json::Value) -> Vec<String> {
    found["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["content"].as_str().expect("text").to_owned())
        .collect()
}

/// Runs the operator's `sluice` command (built beside the test binaries) with the stack's
/// environment: its exit code and the JSON it printed (stdout, or stderr on failure).
pub fn sluice_command(args: &[&str]) -> (i32, serde_json::Value) {
    let exe = std::env::current_exe().expect("exe");
    let binary = exe.parent().and_then(std::path::Path::parent).expect("target dir").join("sluice");
    let output = std::process::Command::new(&binary).args(args).output().expect("run sluice");
    let text = if output.status.success() { output.stdout } else { output.stderr };
    let text = String::from_utf8_lossy(&text);
    let answer = serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (output.status.code().unwrap_or(-1), answer)
}

pub async fn eventually(what: &str, limit: std::time::Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = std::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod process_memory_tests {
    #[test]
    fn this_process_s_peak_memory_is_read_in_mib_and_a_missing_field_is_none() {
        // The resident size first: the peak read after it is at least that.
        let now = super::process_memory_mib("self", "VmRSS").expect("VmRSS");
        let peak = super::process_memory_mib("self", "VmHWM").expect("VmHWM");
        assert!(peak >= now && now > 1.0, "peak {peak} MiB, now {now} MiB");
        assert_eq!(super::process_memory_mib("self", "NoSuchField"), None);
    }
}
