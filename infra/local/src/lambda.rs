//! Lambda's `Invoke` API for the extract function, on loopback, with tenant isolation mode's
//! rule: an execution environment serves one tenant only.
//!
//! `POST /2015-03-31/functions/{name}/invocations` with `X-Amz-Tenant-Id` (refused without
//! it, as Lambda refuses a tenant-isolated function's call without one) runs the event in an
//! environment of that tenant: the extract function's own binary started as Lambda starts it,
//! behind a Runtime API of its own, with only the environment the template gives it (no AWS
//! endpoint, stand-in credentials of its own, a scratch folder of its own). An environment
//! serves one invocation at a time; a tenant's further concurrent calls start more, as
//! Lambda scales out; an environment idle for [`IDLE`] is ended. Where this runner is root,
//! each environment runs as a user of its own (so, as the sandbox user on Lambda, its sweep
//! may end every other process of its user, and no environment can signal or read another);
//! elsewhere they share this runner's user and sweep only their own descendants.
//!
//! A function error is answered as Lambda answers it: `200` with `X-Amz-Function-Error:
//! Unhandled` and the error as the payload; an invocation past the timeout is that error too,
//! and its environment is ended.

use crate::runtime_api::RuntimeApi;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// How long an environment may sit unused before it is ended.
pub const IDLE: Duration = Duration::from_secs(30);
/// The extract function's timeout, as the template sets it.
pub const TIMEOUT: Duration = Duration::from_secs(300);
/// The variables of this runner an environment gets: where the parsers' libraries and models
/// are, the locale and the log level (the template's `Globals` hold the same).
const PASSED: &[&str] = &[
    "PATH",
    "LANG",
    "PDFIUM_LIB_PATH",
    "ORT_DYLIB_PATH",
    "ORT_DISABLE_TELEMETRY",
    "SLUICE_OCR_MODEL_DIR",
    "SLUICE_TESSERACT_LIBRARY",
    "SLUICE_PARSE_MAX_MEMORY_MB",
    "RUST_LOG",
];
/// Lambda's limit on a synchronous invocation's request and its response, each.
pub const MAX_PAYLOAD_BYTES: usize = 6 * 1024 * 1024;
/// Environments that may exist at once (each its own user, where this runner is root).
const MAX_ENVIRONMENTS: u32 = 128;

/// One execution environment: a process of the extract function and its Runtime API.
#[derive(Debug)]
struct Environment {
    api: RuntimeApi,
    child: Mutex<Child>,
    user: Option<u32>,
    scratch: PathBuf,
    busy: AtomicBool,
    last_used: Mutex<Instant>,
}

impl Environment {
    fn alive(&self) -> bool {
        self.child.lock().map(|mut child| matches!(child.try_wait(), Ok(None))).unwrap_or(false)
    }

    fn end(&self) {
        if let Ok(mut child) = self.child.lock() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever its jobs left running as its user goes with it.
        if let Some(user) = self.user {
            sluice_isolate::sweep::kill_processes_of(user);
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// The extract function's environments, by tenant.
#[derive(Debug)]
pub struct ExtractFunction {
    name: String,
    /// The program an environment runs and its arguments: the function's binary, under a
    /// wrapper (a test's stand-in for Lambda's seccomp filter) or a launcher that lays the
    /// function out as Lambda does (the arm64 smoke's).
    command: Vec<OsString>,
    /// Whether `command` is a launcher that lays out the function's files, `/tmp` and
    /// namespace itself: its environment is then exactly the one given (none of this
    /// runner's [`PASSED`] variables, no scratch folder here) and it runs as this runner's user.
    launched: bool,
    /// A launched function's environment, before what Lambda sets (which it cannot override).
    given: Vec<(String, OsString)>,
    /// How long an environment may take to ask for its first event.
    start_limit: Duration,
    /// Variables set in every environment beyond the template's (a test's rogue worker).
    extra: Vec<(String, OsString)>,
    port: u16,
    environments: Mutex<HashMap<String, Vec<Arc<Environment>>>>,
    /// The invocations each tenant has made.
    invocations: Mutex<HashMap<String, usize>>,
    /// Where this runner is root and the function's files are readable by any user: the
    /// users not yet given to an environment (decided at the first start).
    free_users: OnceLock<Option<Mutex<BTreeSet<u32>>>>,
}

impl ExtractFunction {
    /// The function `name`, whose binary is `binary`, served on `port` (which also places
    /// its environments' users apart from another runner's).
    pub fn new(name: &str, binary: PathBuf, port: u16) -> Self {
        Self {
            name: name.to_owned(),
            command: vec![binary.into_os_string()],
            launched: false,
            given: Vec::new(),
            start_limit: Duration::from_secs(60),
            extra: Vec::new(),
            port,
            environments: Mutex::new(HashMap::new()),
            invocations: Mutex::new(HashMap::new()),
            free_users: OnceLock::new(),
        }
    }

    /// The value of `name` an environment gets.
    fn variable(&self, name: &str) -> Option<OsString> {
        let extra = self.extra.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        extra.or_else(|| PASSED.contains(&name).then(|| std::env::var_os(name)).flatten())
    }

    /// Users of their own for the environments, where this runner may give them (it is root,
    /// and every file the function reads is open to every user).
    fn free_users(&self) -> Option<&Mutex<BTreeSet<u32>>> {
        self.free_users
            .get_or_init(|| {
                let files = ["PDFIUM_LIB_PATH", "ORT_DYLIB_PATH", "SLUICE_OCR_MODEL_DIR", "SLUICE_TESSERACT_LIBRARY"]
                    .iter()
                    .filter_map(|name| self.variable(name).map(PathBuf::from));
                let mut needed = files.chain(self.command.iter().map(PathBuf::from));
                let readable = needed.all(|path| open_to_everyone(&path));
                let root = nix::unistd::geteuid().is_root();
                if self.launched || !(root && readable) {
                    tracing::warn!(root, readable, "extract environments share this runner's user");
                    return None;
                }
                let first = 3_000_000 + u32::from(self.port) * 256;
                Some(Mutex::new((first..first + MAX_ENVIRONMENTS).collect()))
            })
            .as_ref()
    }

    /// Runs the binary under `wrapper` (`wrapper BINARY`).
    pub fn wrapped_in(mut self, wrapper: PathBuf) -> Self {
        self.command.insert(0, wrapper.into_os_string());
        self
    }

    /// Starts each environment as `command` (a launcher that lays the function out and
    /// starts it) with exactly `environment` and what Lambda sets (which overrides it),
    /// allowing it `start_limit` to ask for its first event; it runs as this runner's user.
    pub fn launched_as(
        mut self,
        command: Vec<OsString>,
        environment: impl IntoIterator<Item = (String, String)>,
        start_limit: Duration,
    ) -> Self {
        self.command = command;
        self.launched = true;
        self.start_limit = start_limit;
        self.given = environment.into_iter().map(|(name, value)| (name, value.into())).collect();
        self
    }

    /// Sets `name` to `value` in every environment.
    pub fn with_env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.extra.push((name.to_owned(), value.into()));
        self
    }

    /// The users the environments of `tenant` run as (`None` for one sharing this runner's).
    pub fn users_of(&self, tenant: &str) -> Vec<Option<u32>> {
        let environments = self.environments.lock();
        environments
            .map(|e| e.get(tenant).map(|l| l.iter().map(|e| e.user).collect()).unwrap_or_default())
            .unwrap_or_default()
    }

    /// How many invocations `tenant` has made.
    pub fn invocations_of(&self, tenant: &str) -> usize {
        self.invocations.lock().map(|counts| counts.get(tenant).copied().unwrap_or(0)).unwrap_or(0)
    }

    /// Runs `event` for `tenant` in one of its environments; the function's answer, or the
    /// error it reported (a timeout is one).
    pub async fn invoke(&self, tenant: &str, event: serde_json::Value) -> Result<serde_json::Value, String> {
        if let Ok(mut counts) = self.invocations.lock() {
            *counts.entry(tenant.to_owned()).or_default() += 1;
        }
        let environment = match self.take_idle(tenant) {
            Some(environment) => environment,
            None => self.start(tenant).await?,
        };
        let outcome = environment.api.invoke(event, TIMEOUT).await;
        if let Ok(mut used) = environment.last_used.lock() {
            *used = Instant::now();
        }
        let timed_out = outcome.as_ref().is_err_and(|e| e.starts_with("no answer within"));
        if timed_out || !environment.alive() {
            // Lambda ends an environment whose invocation timed out or whose process died.
            self.remove(tenant, &environment);
        }
        environment.busy.store(false, Ordering::SeqCst);
        outcome.map_err(|error| {
            if timed_out {
                serde_json::json!({"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out"}).to_string()
            } else {
                error
            }
        })
    }

    fn take_idle(&self, tenant: &str) -> Option<Arc<Environment>> {
        let environments = self.environments.lock().ok()?;
        environments.get(tenant)?.iter().find(|e| e.alive() && !e.busy.swap(true, Ordering::SeqCst)).cloned()
    }

    fn remove(&self, tenant: &str, environment: &Arc<Environment>) {
        if let Ok(mut environments) = self.environments.lock()
            && let Some(list) = environments.get_mut(tenant)
        {
            list.retain(|e| !Arc::ptr_eq(e, environment));
        }
        environment.end();
        self.give_back(environment.user);
    }

    fn give_back(&self, user: Option<u32>) {
        if let (Some(free), Some(user)) = (self.free_users(), user)
            && let Ok(mut free) = free.lock()
        {
            free.insert(user);
        }
    }

    /// Starts an environment for `tenant`, busy with the caller's invocation.
    async fn start(&self, tenant: &str) -> Result<Arc<Environment>, String> {
        let user = match self.free_users() {
            Some(free) => Some(
                free.lock()
                    .ok()
                    .and_then(|mut free| free.pop_first())
                    .ok_or("Lambda's concurrency limit for the extract function is reached")?,
            ),
            None => None,
        };
        let started = self.spawn(tenant, user).await;
        if started.is_err() {
            self.give_back(user);
        }
        let environment = Arc::new(started?);
        if let Ok(mut environments) = self.environments.lock() {
            environments.entry(tenant.to_owned()).or_default().push(environment.clone());
        }
        Ok(environment)
    }

    async fn spawn(&self, tenant: &str, user: Option<u32>) -> Result<Environment, String> {
        let arn = format!("arn:aws:lambda:us-east-1:123456789012:function:{}", self.name);
        let api = RuntimeApi::start(&arn, TIMEOUT).await;
        let scratch =
            std::env::temp_dir().join(format!("sluice-extract-{}-{}", self.port, uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&scratch).map_err(|e| format!("scratch folder: {e}"))?;
        let (program, arguments) = self.command.split_first().ok_or("the extract function has no command")?;
        let mut command = Command::new(program);
        command.args(arguments).env_clear();
        for name in PASSED.iter().filter(|_| !self.launched) {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        let lambda: [(&str, OsString); 9] = [
            ("AWS_LAMBDA_RUNTIME_API", api.address.clone().into()),
            ("AWS_LAMBDA_FUNCTION_NAME", self.name.clone().into()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048".into()),
            ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{}", self.name).into()),
            ("AWS_LAMBDA_LOG_STREAM_NAME", format!("local/[$LATEST]{tenant}").into()),
            ("AWS_REGION", "us-east-1".into()),
            // Credentials of its own, as Lambda gives every function its role's: this role's
            // grant only logs. The emulator enforces no IAM, so here the proof is that the
            // environment names no AWS endpoint and holds none of its callers' credentials.
            ("AWS_ACCESS_KEY_ID", "ASIAEXTRACTLOGSONLY".into()),
            ("AWS_SECRET_ACCESS_KEY", "extract-function-logs-only".into()),
        ];
        command.envs(self.given.iter().map(|(name, value)| (name, value))).envs(lambda);
        if !self.launched {
            command.env("TMPDIR", &scratch).env("SLUICE_EXTRACT_SCRATCH_DIR", &scratch);
        }
        command.envs(self.extra.iter().map(|(name, value)| (name, value)));
        if let Some(user) = user {
            std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o700))
                .and_then(|()| std::os::unix::fs::chown(&scratch, Some(user), Some(user)))
                .map_err(|e| format!("scratch folder: {e}"))?;
            // The environment's user is its own: its sweep may end every other process of it.
            command.env("SLUICE_EXTRACT_SWEEP_USER", "1").uid(user).gid(user);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("the extract function could not be started: {e}"))?;
        let environment = Environment {
            api,
            child: Mutex::new(child),
            user,
            scratch,
            busy: AtomicBool::new(true),
            last_used: Mutex::new(Instant::now()),
        };
        if let Err(error) = environment.api.started(self.start_limit).await {
            environment.end();
            return Err(format!("the extract function did not start: {error}"));
        }
        tracing::info!(tenant, user, "extract environment started");
        Ok(environment)
    }

    /// Ends the environments idle for longer than [`IDLE`] (or whose process is gone).
    pub fn end_idle(&self) {
        self.end_idle_for(IDLE);
    }

    /// Ends every environment not serving an invocation now.
    pub fn end_idle_now(&self) {
        self.end_idle_for(Duration::ZERO);
    }

    fn end_idle_for(&self, idle_for: Duration) {
        let mut ended = Vec::new();
        if let Ok(mut environments) = self.environments.lock() {
            for list in environments.values_mut() {
                list.retain(|e| {
                    let idle = !e.busy.load(Ordering::SeqCst)
                        && e.last_used.lock().map(|used| used.elapsed() >= idle_for).unwrap_or(true);
                    let dead = !e.busy.load(Ordering::SeqCst) && !e.alive();
                    if idle || dead {
                        ended.push(e.clone());
                    }
                    !(idle || dead)
                });
            }
            environments.retain(|_, list| !list.is_empty());
        }
        for environment in ended {
            environment.end();
            self.give_back(environment.user);
        }
    }
}

/// Whether every user may read `path` (and enter every folder above it).
fn open_to_everyone(path: &Path) -> bool {
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    let readable = mode(path) & 0o004 != 0;
    readable && path.ancestors().skip(1).all(|folder| folder.as_os_str().is_empty() || mode(folder) & 0o001 != 0)
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// Lambda's own refusal, in its shape.
fn refusal(status: StatusCode, kind: &str, message: &str) -> Response<Full<Bytes>> {
    let mut response = reply(status, serde_json::json!({"Type": "User", "message": message}).to_string());
    if let Ok(value) = hyper::header::HeaderValue::from_str(kind) {
        response.headers_mut().insert("x-amzn-errortype", value);
    }
    response
}

async fn answer(function: &ExtractFunction, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let name = path.strip_prefix("/2015-03-31/functions/").and_then(|rest| rest.strip_suffix("/invocations"));
    let Some(name) = name.filter(|_| request.method() == hyper::Method::POST) else {
        return refusal(StatusCode::NOT_FOUND, "ResourceNotFoundException", "no such route");
    };
    if name != function.name && !name.ends_with(&format!(":function:{}", function.name)) {
        return refusal(StatusCode::NOT_FOUND, "ResourceNotFoundException", &format!("Function not found: {name}"));
    }
    let tenant = request.headers().get("x-amz-tenant-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let Some(tenant) = tenant.filter(|t| !t.is_empty()) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValueException",
            "The function has tenant isolation mode enabled: the invocation must name a tenant id",
        );
    };
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return refusal(StatusCode::BAD_REQUEST, "InvalidRequestContentException", "unreadable body"),
    };
    // Lambda's synchronous request payload limit.
    if body.len() > MAX_PAYLOAD_BYTES {
        return refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestTooLargeException",
            "Request must be smaller than 6291456 bytes",
        );
    }
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "InvalidRequestContentException",
            "Could not parse request body into json",
        );
    };
    // Lambda's synchronous response payload limit: a larger answer is the function's error.
    let answered = function.invoke(&tenant, event).await.map(|answer| answer.to_string()).and_then(|answer| {
        if answer.len() > MAX_PAYLOAD_BYTES {
            let message =
                format!("Response payload size ({} bytes) exceeded maximum allowed payload size", answer.len());
            Err(json!({"errorType": "Function.ResponseSizeTooLarge", "errorMessage": message}).to_string())
        } else {
            Ok(answer)
        }
    });
    let mut response = match answered {
        Ok(answer) => reply(StatusCode::OK, answer),
        Err(error) => {
            let mut response = reply(StatusCode::OK, error);
            response.headers_mut().insert("x-amz-function-error", hyper::header::HeaderValue::from_static("Unhandled"));
            response
        }
    };
    response.headers_mut().insert("x-amz-executed-version", hyper::header::HeaderValue::from_static("$LATEST"));
    response
}

/// Serves the Lambda API until the process ends, ending idle environments as it goes.
pub async fn serve(listener: TcpListener, function: Arc<ExtractFunction>) -> std::io::Result<()> {
    let reaper = function.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            reaper.end_idle();
        }
    });
    loop {
        let (stream, _) = listener.accept().await?;
        let function = function.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let function = function.clone();
                async move { Ok::<_, Infallible>(answer(&function, request).await) }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
