//! `smoke-arm64`: every function `infra/deploy/build` made, run as its arm64 `bootstrap`
//! under user-mode emulation (`infra/deploy/smoke-run`: its layers at `/opt`, its code at
//! `/var/task`, in a namespace of its own), with exactly the environment the built template
//! gives it plus what Lambda sets, against the smoke stack; each is handed real events
//! through a Lambda Runtime API on loopback, and each event's effect is checked in the
//! database, the bucket and the queues. Run by `infra/deploy/smoke`, which starts the stack.
//!
//! The extract function is invoked by upload and parse as on AWS: through Lambda's `Invoke`
//! API (`sluice_local::lambda`, here on loopback), each tenant in environments of its own,
//! each environment the arm64 `bootstrap` laid out by the same launcher. What it read on
//! arm64 is held to the same file read natively: the scan's OCR text, and the int8
//! embedding of every chunk (cosine).
//!
//! The emulator stands in for S3, SQS, KMS and Secrets Manager; this program stands in for
//! API Gateway (a JWT verified, its claims in the event), Lambda's SQS event source (batches
//! received, handled messages deleted), Lambda's Invoke API, EventBridge's schedule and
//! CloudFormation's custom resource call (answered at a local URL).

use clap::Parser;
use serde_json::{Value, json};
use sluice_e2e::built_template::{Bindings, BuiltFunction};
use sluice_e2e::runtime_api::RuntimeApi;
use sluice_e2e::{Stack, User, local_issuer};
use sluice_extraction::Tenant;
use sluice_local::lambda::ExtractFunction;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

#[derive(Parser, Debug)]
struct Args {
    /// `sam build`'s output.
    #[arg(long, default_value = ".aws-sam/build")]
    build: PathBuf,
    /// The launcher that lays a function out as Lambda does (`infra/deploy/smoke-run`).
    #[arg(long, default_value = "infra/deploy/smoke-run")]
    launcher: PathBuf,
    /// The arm64 C and C++ runtime: the root each function runs in.
    #[arg(long)]
    arm64_root: PathBuf,
    /// `qemu-aarch64` (static).
    #[arg(long)]
    qemu: PathBuf,
    /// Runs every function without this layer: the smoke must then fail (a test of it).
    #[arg(long)]
    leave_out_layer: Option<String>,
    /// Runs every function without this variable: the smoke must then fail.
    #[arg(long)]
    leave_out_variable: Option<String>,
}

/// The emulator's account, which the functions are deployed in here.
const ACCOUNT: &str = "123456789012";
/// How long a function may take to start under emulation.
const INIT_LIMIT: Duration = Duration::from_secs(240);
/// The extract function's name, as upload's and parse's environment names it.
const EXTRACT_FUNCTION: &str = "sluice-smoke-ExtractFunction";
/// The share of the scan's characters the arm64 OCR may read otherwise than native OCR (an
/// ONNX kernel's rounding on another instruction set may tip one uncertain character).
const OCR_TOLERANCE: f64 = 0.02;
/// The least cosine between a chunk's int8 embedding on arm64 and natively: the int8 graph
/// is the same, only the kernels' rounding differs (int8 against fp32 is held to 0.99).
const EMBEDDING_COSINE: f32 = 0.995;

/// One function's process and its Runtime API.
struct Running {
    spec: BuiltFunction,
    api: RuntimeApi,
    child: tokio::process::Child,
    init: Duration,
}

/// What the smoke prints per event: the function, its init time, the event, the effect.
struct Line {
    function: String,
    event: String,
    effect: String,
}

fn required(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run through infra/deploy/smoke"))
}

/// The template's references, bound to the smoke stack's own resources.
fn bindings(provisioned: &sluice_local::resources::Provisioned) -> Bindings {
    let host = required("SLUICE_DB_HOST");
    let refs = [
        ("FilesBucket", provisioned.bucket.clone()),
        ("ParseQueue", provisioned.parse_queue_url.clone()),
        ("IngestQueue", provisioned.ingest_queue_url.clone()),
        ("TeardownQueue", provisioned.teardown_queue_url.clone()),
        ("ExtractFunction", EXTRACT_FUNCTION.to_owned()),
        ("AppLoginSecret", required("SLUICE_DB_SECRET_ID")),
        ("VectorLoginSecret", required("SLUICE_DB_VECTOR_SECRET_ID")),
        ("SearchLoginSecret", required("SLUICE_DB_SEARCH_SECRET_ID")),
        ("AWS::AccountId", ACCOUNT.to_owned()),
        ("AWS::Region", required("AWS_REGION")),
        ("AWS::Partition", "aws".to_owned()),
        ("AWS::StackName", "sluice-smoke".to_owned()),
    ];
    let attributes = [
        ("FilesKey.Arn", provisioned.key.clone()),
        ("DatabaseCluster.Endpoint.Address", host.clone()),
        ("DatabaseProxy.Endpoint", host),
        ("DatabaseCluster.MasterUserSecret.SecretArn", required("SLUICE_DB_ADMIN_SECRET_ID")),
    ];
    Bindings {
        refs: refs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        attributes: attributes.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }
}

/// The function's environment as Lambda gives it: the template's, and what Lambda itself
/// sets but its Runtime API's address and the role's credentials.
fn lambda_environment(spec: &BuiltFunction) -> BTreeMap<String, String> {
    let mut env = spec.environment.clone();
    let name = format!("sluice-smoke-{}", spec.logical_id);
    let region = required("AWS_REGION");
    for (key, value) in [
        ("_HANDLER", "bootstrap".to_owned()),
        ("LAMBDA_TASK_ROOT", "/var/task".to_owned()),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime".to_owned()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.clone()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", spec.memory_mb.to_string()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "smoke".to_owned()),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_owned()),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".to_owned()),
        ("AWS_REGION", region.clone()),
        ("AWS_DEFAULT_REGION", region),
        ("LANG", "en_US.UTF-8".to_owned()),
        ("TZ", ":UTC".to_owned()),
        ("PATH", "/usr/local/bin:/usr/bin/:/bin:/opt/bin".to_owned()),
        (
            "LD_LIBRARY_PATH",
            "/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib".to_owned(),
        ),
    ] {
        env.insert(key.to_owned(), value);
    }
    env
}

/// The function's environment here: [`lambda_environment`], its Runtime API, the smoke's
/// credentials, and the local peers' addresses (the emulator's endpoint, the Lambda API's
/// at `lambda`, pgbouncer's port where Aurora's is 5432).
fn environment(spec: &BuiltFunction, api: &str, lambda: &str) -> BTreeMap<String, String> {
    let mut env = lambda_environment(spec);
    for (key, value) in [
        ("AWS_LAMBDA_RUNTIME_API", api.to_owned()),
        ("AWS_ACCESS_KEY_ID", required("AWS_ACCESS_KEY_ID")),
        ("AWS_SECRET_ACCESS_KEY", required("AWS_SECRET_ACCESS_KEY")),
        ("AWS_SESSION_TOKEN", "smoke-session".to_owned()),
        // The local peers.
        ("AWS_ENDPOINT_URL", required("AWS_ENDPOINT_URL")),
        ("AWS_ENDPOINT_URL_LAMBDA", lambda.to_owned()),
        ("SLUICE_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("SLUICE_DB_PORT", required("SLUICE_DB_PORT")),
    ] {
        env.insert(key.to_owned(), value);
    }
    env
}

/// The extract function behind Lambda's Invoke API on loopback: every environment its arm64
/// `bootstrap` laid out by the launcher with the template's environment (less what the run
/// leaves out); the API's address.
async fn serve_extract(args: &Args, spec: &BuiltFunction) -> Result<(Arc<ExtractFunction>, String), String> {
    let mut env = lambda_environment(spec);
    if let Some(variable) = &args.leave_out_variable {
        env.remove(variable);
    }
    let mut command: Vec<OsString> = vec![
        args.launcher.clone().into(),
        args.arm64_root.clone().into(),
        args.qemu.clone().into(),
        spec.code.clone().into(),
    ];
    command.extend(layers_of(args, spec).map(|dir| dir.clone().into_os_string()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let function = Arc::new(
        ExtractFunction::new(EXTRACT_FUNCTION, spec.code.join("bootstrap"), address.port())
            .launched_as(command, env, INIT_LIMIT),
    );
    tokio::spawn(sluice_local::lambda::serve(listener, function.clone()));
    Ok((function, format!("http://{address}")))
}

/// The function's layer directories, in the template's order, less the one the run leaves out.
fn layers_of<'a>(args: &'a Args, spec: &'a BuiltFunction) -> impl Iterator<Item = &'a PathBuf> {
    spec.layers.iter().filter(|(id, _)| Some(id) != args.leave_out_layer.as_ref()).map(|(_, dir)| dir)
}

impl Running {
    async fn start(args: &Args, spec: &BuiltFunction, lambda: &str) -> Result<Self, String> {
        let arn = format!("arn:aws:lambda:us-east-1:{ACCOUNT}:function:sluice-smoke-{}", spec.logical_id);
        let api = RuntimeApi::start(&arn, Duration::from_secs(spec.timeout_secs)).await;
        let mut env = environment(spec, &api.address, lambda);
        if let Some(variable) = &args.leave_out_variable {
            env.remove(variable);
        }
        let log = std::fs::File::create(format!("{}/{}.log", required("SLUICE_RUN_DIR"), spec.logical_id))
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let mut child = tokio::process::Command::new(&args.launcher)
            .arg(&args.arm64_root)
            .arg(&args.qemu)
            .arg(&spec.code)
            .args(layers_of(args, spec))
            .env_clear()
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", args.launcher.display()))?;
        let outcome = tokio::select! {
            started = api.started(INIT_LIMIT) => started,
            exited = child.wait() => Err(format!("it exited before asking for an event ({})", exited.map(|s| s.to_string()).unwrap_or_default())),
        };
        outcome.map_err(|e| {
            format!(
                "{} did not start: {e} (its log: {}/{}.log)",
                spec.logical_id,
                required("SLUICE_RUN_DIR"),
                spec.logical_id
            )
        })?;
        Ok(Self { spec: spec.clone(), api, child, init: started.elapsed() })
    }

    /// The function's name and its init time under emulation, for the smoke's table.
    fn who(&self) -> (String, String) {
        (self.spec.logical_id.clone(), format!("{:.1} s", self.init.as_secs_f64()))
    }

    async fn invoke(&self, event: Value) -> Result<Value, String> {
        let limit = Duration::from_secs(self.spec.timeout_secs + 30);
        self.api.invoke(event, limit).await.map_err(|e| format!("{} answered an error: {e}", self.spec.logical_id))
    }

    /// An API Gateway request as `user` (its token verified, its claims in the event); the
    /// status and the JSON body.
    async fn request(&self, user: &User, method: &str, path: &str, body: Body) -> Result<(u16, Value), String> {
        let claims = local_issuer().authorizer().verify(&user.token).map_err(|e| e.to_string())?;
        let (content_type, bytes) = match body {
            Body::None => (None, Vec::new()),
            Body::Json(value) => (Some("application/json".to_owned()), value.to_string().into_bytes()),
            Body::File(name, mime, bytes) => multipart(&name, &mime, &bytes),
        };
        let mut headers = vec![("host".to_owned(), "api.smoke.local".to_owned())];
        headers.push(("authorization".to_owned(), format!("Bearer {}", user.token)));
        if let Some(content_type) = content_type {
            headers.push(("content-type".to_owned(), content_type));
        }
        let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
        let parts = sluice_local::event::HttpParts {
            method,
            path,
            query,
            headers,
            body: &bytes,
            source_ip: "127.0.0.1".to_owned(),
        };
        let answer = self.invoke(sluice_local::event::api_gateway_v2(&parts, Some(&claims))).await?;
        let status = answer["statusCode"].as_u64().unwrap_or_default() as u16;
        let text = answer["body"].as_str().unwrap_or_default();
        Ok((status, serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))))
    }
}

enum Body {
    None,
    Json(Value),
    File(String, String, Vec<u8>),
}

/// A multipart form of one `file` part: its content type and bytes.
fn multipart(name: &str, mime: &str, bytes: &[u8]) -> (Option<String>, Vec<u8>) {
    let boundary = format!("smoke{}", Uuid::new_v4().simple());
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: {mime}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (Some(format!("multipart/form-data; boundary={boundary}")), body)
}

/// Lambda's SQS event source for one function: batches of its queue (the template's batch
/// size) handed to it until `done` holds, the handled messages deleted.
async fn drain<F, Fut>(stack: &Stack, function: &Running, queue_url: &str, done: F) -> Result<String, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let source = sluice_local::pollers::Source {
        queue_arn: sluice_local::resources::queue_arn(&stack.sqs, queue_url).await.map_err(|e| e.to_string())?,
        queue_url: queue_url.to_owned(),
        batch_size: function.spec.sqs_batch_size.unwrap_or(10),
        region: required("AWS_REGION"),
    };
    let started = Instant::now();
    let (mut batches, mut messages) = (0, 0);
    while !done().await {
        if started.elapsed() > Duration::from_secs(180) {
            return Err(format!("{}: its effect did not appear in 180 s", function.spec.logical_id));
        }
        let received =
            sluice_local::pollers::receive(&stack.sqs, &source).await.map_err(|e| format!("receive: {e:?}"))?;
        if received.is_empty() {
            continue;
        }
        let event =
            serde_json::to_value(sluice_local::pollers::event_of(&received, &source)).map_err(|e| e.to_string())?;
        let answer = function.invoke(event).await?;
        let response: sluice_queue::SqsBatchResponse =
            serde_json::from_value(answer.clone()).map_err(|e| format!("not a batch response: {answer}: {e}"))?;
        if !response.batch_item_failures.is_empty() {
            return Err(format!("{} reported failures: {answer}", function.spec.logical_id));
        }
        sluice_local::pollers::delete_handled(&stack.sqs, &source, &received, &response).await;
        batches += 1;
        messages += received.len();
    }
    Ok(format!("{messages} message(s) in {batches} batch(es)"))
}

async fn query_one(
    stack: &Stack,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Option<tokio_postgres::Row> {
    stack.db().await.query_opt(sql, params).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn check(holds: bool, what: impl Into<String>) -> Result<(), String> {
    if holds { Ok(()) } else { Err(what.into()) }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    match smoke(&args).await {
        Ok(lines) => {
            println!("| function | init under emulation | event | effect |");
            println!("|---|---|---|---|");
            for (line, init) in lines {
                println!("| {} | {init} | {} | {} |", line.function, line.event, line.effect);
            }
        }
        Err(error) => {
            eprintln!("smoke failed: {error}");
            std::process::exit(1);
        }
    }
}

async fn smoke(args: &Args) -> Result<Vec<(Line, String)>, String> {
    let sdk = sluice_blob::sdk_config().await;
    let (s3, kms, sqs) = (sluice_blob::s3_client(&sdk), aws_sdk_kms::Client::new(&sdk), aws_sdk_sqs::Client::new(&sdk));
    let provisioned = sluice_local::resources::provision(&s3, &kms, &sqs).await.map_err(|e| e.to_string())?;
    let specs = sluice_e2e::built_template::functions(&args.build, &bindings(&provisioned))?;
    let spec = |id: &str| specs.iter().find(|s| s.logical_id == id).cloned().ok_or(format!("no {id} in the template"));
    let stack = Stack::from_env().await;
    let mut lines: Vec<(Line, String)> = Vec::new();
    // The function and its init time under emulation (the extract function's environments
    // start per tenant).
    let mut note = |(function, init): (String, String), event: &str, effect: String| {
        eprintln!("[smoke] {function}: {event}: {effect}");
        lines.push((Line { function, event: event.to_owned(), effect }, init));
    };
    let extracting = || ("ExtractFunction".to_owned(), "per tenant".to_owned());

    // The extract function, which upload and parse invoke for every file they read.
    let (extract, lambda) = serve_extract(args, &spec("ExtractFunction")?).await?;

    // The deploy's migrate step first: every other function refuses an unmigrated schema.
    let migrate = Running::start(args, &spec("MigrateFunction")?, &lambda).await?;
    let (cfn_url, cfn_answer) = cloudformation_endpoint().await;
    let request = json!({
        "RequestType": "Create", "ResponseURL": cfn_url, "StackId": format!("arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/sluice-smoke/1"),
        "RequestId": Uuid::new_v4().to_string(), "ResourceType": "Custom::SchemaMigration", "LogicalResourceId": "SchemaMigration",
        "ServiceToken": format!("arn:aws:lambda:us-east-1:{ACCOUNT}:function:sluice-smoke-MigrateFunction"),
        "ResourceProperties": {"ServiceToken": "smoke", "Database": "smoke"},
    });
    migrate.invoke(request).await?;
    let answer = cfn_answer.await.map_err(|_| "the migrate step never answered CloudFormation")?;
    check(answer["Status"] == "SUCCESS", format!("CloudFormation was answered {answer}"))?;
    let version = stack.admin_store().await.schema_version().await.map_err(|e| e.to_string())?;
    check(
        version == sluice_store::SCHEMA_VERSION,
        format!("schema at {version}, not {}", sluice_store::SCHEMA_VERSION),
    )?;
    note(migrate.who(), "CloudFormation Create", format!("SUCCESS answered; schema at version {version}"));

    let mut running = BTreeMap::new();
    for id in [
        "UploadFunction",
        "KnowledgeFunction",
        "SearchFunction",
        "ParseFunction",
        "IngestFunction",
        "TeardownFunction",
        "SweepFunction",
    ] {
        running.insert(id, Running::start(args, &spec(id)?, &lambda).await?);
    }
    let (upload, knowledge, search, parse, ingest, teardown, sweep) = (
        &running["UploadFunction"],
        &running["KnowledgeFunction"],
        &running["SearchFunction"],
        &running["ParseFunction"],
        &running["IngestFunction"],
        &running["TeardownFunction"],
        &running["SweepFunction"],
    );
    let user = User::with(Some(Uuid::new_v4()), &["collections:edit"], false);

    // A PDF read by PDFium, kept under the deployment's key.
    let pdf = sluice_fixtures::pdf(&["The smoke test page names the heron survey."]);
    let (status, file) = upload
        .request(&user, "POST", "/api/v1/files/upload", Body::File("survey.pdf".into(), "application/pdf".into(), pdf))
        .await?;
    check(status == 201, format!("upload answered {status}: {file}"))?;
    let stored = stored_object(&stack, &provisioned, &file).await?;
    let (status, text) = upload
        .request(&user, "GET", &format!("/api/v1/files/{}/text", file["id"].as_str().unwrap_or_default()), Body::None)
        .await?;
    let text = text.as_str().map(str::to_owned).unwrap_or_else(|| text.to_string());
    check(
        status == 200 && text.contains("heron survey"),
        format!("the PDF's text: {status} {text}; the upload's answer {file}"),
    )?;
    note(upload.who(), "POST /files/upload (PDF), GET its text", format!("201; {stored}; text read by PDFium"));
    let chat_tenant = Tenant::user(user.id);
    let invocations = extract.invocations_of(chat_tenant.as_str());
    check(invocations >= 1, "upload read the PDF without invoking the extract function")?;
    note(
        extracting(),
        &format!("Invoke from upload, tenant {}", chat_tenant.as_str()),
        format!("{invocations} invocation(s); the PDF read in the tenant's environment"),
    );

    // A presigned chat upload: S3's event, through the parse queue, to parse.
    let bytes = b"A note uploaded straight to the bucket about the lighthouse.".to_vec();
    let body = json!({"filename": "note.txt", "size": bytes.len(), "mime_type": "text/plain"});
    let (status, intent) = upload.request(&user, "POST", "/api/v1/files/uploads", Body::Json(body)).await?;
    check(status == 201 || status == 200, format!("the intent: {status} {intent}"))?;
    check(stack.put_presigned(&intent, bytes).await == 200, "the presigned PUT failed")?;
    let landed = Uuid::parse_str(intent["id"].as_str().unwrap_or_default()).map_err(|e| format!("{intent}: {e}"))?;
    let batches = drain(&stack, parse, &provisioned.parse_queue_url, || async {
        query_one(&stack, "SELECT 1 FROM chat_files WHERE id = $1 AND status = 'ready'", &[&landed]).await.is_some()
    })
    .await?;
    note(parse.who(), "SQS batch: S3 ObjectCreated of a presigned upload", format!("{batches}; the file ready"));

    // A knowledge base of the in-process model, a document parsed and ingested into it.
    // Chunks embedded as they are (no title or heading before them), so that this program can
    // embed the same text natively.
    let body = json!({"name": "Smoke", "scope": "personal", "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2",
        "ingestion_config": {"chunk_context": "none"}});
    let (status, base) = knowledge.request(&user, "POST", "/api/v1/kb", Body::Json(body)).await?;
    check(status == 201, format!("create a base: {status} {base}"))?;
    let kb = base["id"].as_str().unwrap_or_default().to_owned();
    let collection = base["collection_name"].as_str().unwrap_or_default().to_owned();
    let table = format!("rag_{collection}");
    let exists = |table: String| {
        let stack = &stack;
        async move {
            query_one(stack, "SELECT to_regclass($1)::text", &[&table])
                .await
                .and_then(|r| r.get::<_, Option<String>>(0))
                .is_some()
        }
    };
    let kb_id = Uuid::parse_str(&kb).map_err(|e| format!("{base}: {e}"))?;
    let stored = query_one(&stack, "SELECT 1 FROM knowledge_bases WHERE id = $1", &[&kb_id]).await.is_some();
    check(stored, format!("no row for base {kb}"))?;
    note(knowledge.who(), "POST /kb (the keyless model)", "201; its row".to_owned());
    // A text document and a scanned strip of three printed lines at 150 dpi (OCR in the
    // extract function: emulated OCR outlasts a chat upload's limit, and a whole page the
    // document budget), through upload's API.
    let scan = scanned_lines(&[
        "Vessel traffic rose by twelve percent",
        "in the harbour during the last winter,",
        "the pilots' station reported on Monday.",
    ])?;
    let png = sluice_fixtures::png_of(&scan);
    let documents = [
        ("herons.txt", "text/plain", b"Herons nest in the reed beds of the northern marsh every spring.".to_vec()),
        ("harbour.png", "image/png", png.clone()),
    ];
    let mut ids = Vec::new();
    for (name, mime, bytes) in documents {
        let path = format!("/api/v1/kb/{kb}/documents");
        let (status, accepted) =
            upload.request(&user, "POST", &path, Body::File(name.into(), mime.into(), bytes)).await?;
        check(status == 202, format!("{name}: {status} {accepted}"))?;
        ids.push(
            Uuid::parse_str(accepted["tracking_id"].as_str().unwrap_or_default())
                .map_err(|e| format!("{accepted}: {e}"))?,
        );
    }
    note(
        upload.who(),
        "POST /kb/{id}/documents (a text, a scanned PNG)",
        "202 each; their parse jobs queued".to_owned(),
    );
    let all = |condition: &'static str| {
        let (stack, ids) = (&stack, ids.clone());
        async move {
            let sql = format!("SELECT count(*) FROM rag_documents WHERE id = ANY($1) AND {condition}");
            query_one(stack, &sql, &[&ids]).await.map(|r| r.get::<_, i64>(0)).unwrap_or_default() == ids.len() as i64
        }
    };
    let started = Instant::now();
    let document_tenant = document_tenant(&stack, ids[0]).await?;
    let before = extract.invocations_of(document_tenant.as_str());
    let batches = drain(&stack, parse, &provisioned.parse_queue_url, || all("parsed_path IS NOT NULL")).await?;
    let ocr: Option<String> = query_one(&stack, "SELECT ocr_spans::text FROM rag_documents WHERE id = $1", &[&ids[1]])
        .await
        .and_then(|r| r.get(0));
    check(ocr.is_some(), "the scan's text was not read by OCR")?;
    note(
        parse.who(),
        "SQS batches: the documents' parse jobs",
        format!("{batches}; both texts stored, the scan's by OCR ({:.0} s)", started.elapsed().as_secs_f64()),
    );
    let invocations = extract.invocations_of(document_tenant.as_str()) - before;
    check(invocations >= 2, format!("parse invoked the extract function {invocations} time(s) for two documents"))?;
    let compared = compare_ocr(&stack, &provisioned, ids[1], &png).await?;
    note(
        extracting(),
        &format!("Invoke from parse, tenant {}", document_tenant.as_str()),
        format!("{invocations} invocation(s); {compared}"),
    );
    let batches = drain(&stack, ingest, &provisioned.ingest_queue_url, || all("status = 'done'")).await?;
    let chunks: i64 = query_one(&stack, &format!("SELECT count(*) FROM \"{table}\""), &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or_default();
    check(exists(table.clone()).await && chunks >= 2, format!("{chunks} chunk(s) in {table}"))?;
    let compared = compare_embeddings(&stack, &table).await?;
    note(
        ingest.who(),
        "SQS batches: the ingest jobs",
        format!("{batches}; {chunks} chunks embedded in-process; {compared}"),
    );

    // Search: the query embedded by the in-process model.
    for (query, expected) in
        [("where do herons nest", "reed beds"), ("how much did vessel traffic grow", "twelve percent")]
    {
        let body = json!({"query": query, "knowledge_base_ids": [kb], "top_k": 3});
        let (status, found) = search.request(&user, "POST", "/api/v1/rag/search", Body::Json(body)).await?;
        let first = found["results"][0]["content"].as_str().unwrap_or_default().to_owned();
        check(status == 200 && first.contains(expected), format!("search: {status} {found}"))?;
        note(search.who(), &format!("POST /rag/search {query:?}"), format!("200; first hit {first:?}"));
    }

    // The base deleted: its table dropped by teardown.
    let (status, deleted) = knowledge.request(&user, "DELETE", &format!("/api/v1/kb/{kb}"), Body::None).await?;
    check(status == 200 || status == 202 || status == 204, format!("delete the base: {status} {deleted}"))?;
    note(knowledge.who(), "DELETE /kb/{id}", format!("{status}; its teardown queued"));
    let batches =
        drain(&stack, teardown, &provisioned.teardown_queue_url, || async { !exists(table.clone()).await }).await?;
    note(teardown.who(), "SQS batch: the teardown job", format!("{batches}; table {table} dropped"));

    // The sweep on its schedule: an upload link that expired long ago is closed.
    let body = json!({"filename": "never.txt", "size": 5, "mime_type": "text/plain"});
    let (_, never) = upload.request(&user, "POST", "/api/v1/files/uploads", Body::Json(body)).await?;
    let never = Uuid::parse_str(never["id"].as_str().unwrap_or_default()).map_err(|e| format!("{never}: {e}"))?;
    stack
        .db()
        .await
        .execute("UPDATE chat_files SET expires_at = now() - interval '1 day' WHERE id = $1", &[&never])
        .await
        .map_err(|e| e.to_string())?;
    let scheduled = json!({"version": "0", "id": Uuid::new_v4().to_string(), "detail-type": "Scheduled Event", "source": "aws.events",
        "account": ACCOUNT, "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
        "resources": [format!("arn:aws:events:us-east-1:{ACCOUNT}:rule/sluice-smoke-sweep")], "detail": {}});
    sweep.invoke(scheduled).await?;
    let closed =
        query_one(&stack, "SELECT 1 FROM chat_files WHERE id = $1 AND status = 'rejected'", &[&never]).await.is_some();
    check(closed, "the sweep left the expired link open")?;
    note(sweep.who(), "EventBridge scheduled event", "the expired upload link closed".to_owned());

    for (_, mut function) in running {
        let _ = function.child.kill().await;
    }
    extract.end_idle_now();
    Ok(lines)
}

/// Printed `lines` at 150 dpi, scanned (blurred, speckled), cut to the printed strip and a
/// margin: the few lines emulated OCR reads within the document budget.
fn scanned_lines(lines: &[&str]) -> Result<image::GrayImage, String> {
    const DPI: u32 = 150;
    let page = sluice_formats::pdf::render_first_page(&sluice_fixtures::pdf(&[&lines.join("\n")]), DPI)?;
    let scan = sluice_fixtures::scanned(&page, DPI, 0.0, 31);
    let inked = |x: u32, y: u32| page.get_pixel(x, y).0[0] < 128;
    let rows: Vec<u32> = (0..page.height()).filter(|&y| (0..page.width()).any(|x| inked(x, y))).collect();
    let columns: Vec<u32> = (0..page.width()).filter(|&x| (0..page.height()).any(|y| inked(x, y))).collect();
    let (Some(top), Some(bottom), Some(left), Some(right)) =
        (rows.first(), rows.last(), columns.first(), columns.last())
    else {
        return Err("the printed page has no ink".to_owned());
    };
    let margin = DPI / 4;
    let (x, y) = (left.saturating_sub(margin), top.saturating_sub(margin));
    let width = (right + margin).min(page.width() - 1) - x + 1;
    let height = (bottom + margin).min(page.height() - 1) - y + 1;
    Ok(image::imageops::crop_imm(&scan, x, y, width, height).to_image())
}

/// The tenant a document is read for: its base's organization, else its user.
async fn document_tenant(stack: &Stack, document: Uuid) -> Result<Tenant, String> {
    let sql =
        "SELECT b.org_id, b.owner_id FROM rag_documents d JOIN knowledge_bases b ON b.id = d.kb_id WHERE d.id = $1";
    let row = query_one(stack, sql, &[&document]).await.ok_or(format!("no base for document {document}"))?;
    Ok(Tenant::owner(row.get(0), row.get(1)))
}

/// The scan's text as the arm64 extract function stored it, against the same PNG read
/// natively by the same reader with the default ingestion settings: within [`OCR_TOLERANCE`].
async fn compare_ocr(
    stack: &Stack,
    provisioned: &sluice_local::resources::Provisioned,
    document: Uuid,
    png: &[u8],
) -> Result<String, String> {
    let key: String = query_one(stack, "SELECT parsed_path FROM rag_documents WHERE id = $1", &[&document])
        .await
        .and_then(|r| r.get(0))
        .ok_or("the scan has no parsed text")?;
    let object = stack
        .s3
        .get_object()
        .bucket(&provisioned.bucket)
        .key(&key)
        .send()
        .await
        .map_err(|e| format!("{key}: {e:?}"))?;
    let bytes = object.body.collect().await.map_err(|e| format!("{key}: {e}"))?.into_bytes();
    let arm64 = String::from_utf8_lossy(&bytes).into_owned();
    let ingestion = sluice_domain::ingestion::IngestionConfig::default();
    let options = sluice_formats::ExtractOptions::new(100_000).with_ocr(Some(sluice_formats::OcrOptions {
        dpi: ingestion.ocr_dpi,
        max_pages: ingestion.max_pages,
        alphabet: sluice_formats::OcrAlphabet::for_languages(&ingestion.ocr_languages),
    }));
    let kind = sluice_formats::kind_for_filename("harbour.png").ok_or("no kind for a PNG")?;
    let native = tokio::task::spawn_blocking({
        let png = png.to_vec();
        move || sluice_formats::extract(kind, &png, &options)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|refusal| format!("the scan read natively: {refusal:?}"))?
    .text
    .unwrap_or_default();
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (arm64, native) = (words(&arm64), words(&native));
    check(!native.is_empty(), "native OCR read nothing of the scan")?;
    let differing = strsim::levenshtein(&arm64, &native);
    let share = differing as f64 / native.chars().count() as f64;
    check(
        share <= OCR_TOLERANCE,
        format!("the scan read on arm64 differs from native in {differing} character(s): {arm64:?} against {native:?}"),
    )?;
    Ok(format!("the scan's OCR text {differing} character(s) from native ({native:?})"))
}

/// Every chunk's embedding as arm64 ingest stored it, against the same text embedded natively
/// by the same int8 graph: the least cosine, at least [`EMBEDDING_COSINE`].
async fn compare_embeddings(stack: &Stack, table: &str) -> Result<String, String> {
    let sql = format!("SELECT content, embedding::text FROM \"{table}\" ORDER BY document_id, chunk_index");
    let rows = stack.db().await.query(&sql, &[]).await.map_err(|e| format!("{sql}: {e}"))?;
    let texts: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let stored: Vec<Vec<f32>> = rows
        .iter()
        .map(|r| {
            let text: String = r.get(1);
            text.trim_matches(['[', ']'])
                .split(',')
                .map(|v| v.trim().parse::<f32>().map_err(|e| e.to_string()))
                .collect()
        })
        .collect::<Result<_, _>>()?;
    let dir = PathBuf::from(required("SLUICE_MODEL_DIR"));
    let native = tokio::task::spawn_blocking(move || {
        let model = sluice_minilm::Embedder::load(&dir, sluice_minilm::Precision::Int8, 1)?;
        model.embed(&texts).map(|(vectors, _)| vectors)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("the chunks embedded natively: {e}"))?;
    let cosine = |a: &[f32], b: &[f32]| {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    };
    let least = stored.iter().zip(&native).map(|(a, b)| cosine(a, b)).fold(f32::INFINITY, f32::min);
    check(
        stored.len() == native.len() && least >= EMBEDDING_COSINE,
        format!("int8 embeddings on arm64 against native: least cosine {least} over {} chunk(s)", stored.len()),
    )?;
    Ok(format!("int8 embeddings within cosine {least:.4} of native"))
}

/// The object a chat upload's answer names: it exists, under `aws:kms` with the deployment's key.
async fn stored_object(
    stack: &Stack,
    provisioned: &sluice_local::resources::Provisioned,
    file: &Value,
) -> Result<String, String> {
    let id = Uuid::parse_str(file["id"].as_str().unwrap_or_default()).map_err(|e| format!("{file}: {e}"))?;
    let key: String =
        query_one(stack, "SELECT storage_path FROM chat_files WHERE id = $1 AND status = 'ready'", &[&id])
            .await
            .map(|r| r.get(0))
            .ok_or(format!("no ready row for {id}"))?;
    let head = stack
        .s3
        .head_object()
        .bucket(&provisioned.bucket)
        .key(&key)
        .send()
        .await
        .map_err(|e| format!("{key}: {e:?}"))?;
    let sse = head.server_side_encryption().map(|s| s.as_str().to_owned()).unwrap_or_default();
    let kms_key = head.ssekms_key_id().unwrap_or_default();
    check(sse == "aws:kms" && kms_key == provisioned.key, format!("{key} is {sse} with {kms_key}"))?;
    Ok(format!("row ready, object {sse} with the deployment's key"))
}

/// A local URL standing in for CloudFormation's presigned response URL: the first answer PUT to it.
async fn cloudformation_endpoint() -> (String, tokio::sync::oneshot::Receiver<Value>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let url = format!("http://{}/cloudformation/answer?X-Amz-Signature=smoke", listener.local_addr().expect("address"));
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        let body = loop {
            let Ok(n) = socket.read(&mut buffer).await else { return };
            if n == 0 {
                return;
            }
            request.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    break body[..length].to_owned();
                }
            }
        };
        let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
        let _ = tx.send(serde_json::from_str(&body).unwrap_or(Value::Null));
    });
    (url, rx)
}
