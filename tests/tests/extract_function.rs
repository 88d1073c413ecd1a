//! The extract function's own binary, started as Lambda starts it (a Runtime API on
//! loopback), under a stand-in for Lambda's seccomp filter: it still reads every kind of
//! file, says what the platform refused, and leaves nothing of one job for the next.

use base64::Engine;
use serde_json::{Value, json};
use sluice_e2e::runtime_api::RuntimeApi;
use sluice_extraction::protocol::{Input, Request, Response};
use sluice_fixtures as fixtures;
use sluice_formats::ExtractOptions;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A binary `infra/local/test` builds beside this test's.
fn built(name: &str) -> PathBuf {
    let dir = std::env::current_exe().expect("test binary").parent().and_then(|d| d.parent()).map(PathBuf::from);
    let path = dir.map(|d| d.join(name)).filter(|p| p.exists());
    path.unwrap_or_else(|| panic!("target/debug/{name}: `infra/local/test` builds it"))
}

/// The extract function in an environment of its own: only what the template gives it
/// (no AWS credentials, no database), its log in `log`, under `filter` (the arguments of
/// `sluice-lambda-seccomp`).
struct Environment {
    api: RuntimeApi,
    child: Child,
    log: PathBuf,
    scratch: PathBuf,
}

impl Environment {
    async fn start(filter: &[&str], worker: Option<PathBuf>) -> Self {
        let api =
            RuntimeApi::start("arn:aws:lambda:us-east-1:123456789012:function:sluice-extract", Duration::from_secs(60))
                .await;
        let dir = std::env::temp_dir().join(format!("sluice-extract-env-{}", uuid::Uuid::new_v4()));
        let scratch = dir.join("tmp");
        std::fs::create_dir_all(&scratch).expect("scratch");
        let log = dir.join("log");
        let mut command = Command::new(built("sluice-lambda-seccomp"));
        command.args(filter).arg(built("sluice-extract")).env_clear();
        for name in [
            "PATH",
            "PDFIUM_LIB_PATH",
            "ORT_DYLIB_PATH",
            "SLUICE_OCR_MODEL_DIR",
            "SLUICE_TESSERACT_LIBRARY",
            "ORT_DISABLE_TELEMETRY",
        ] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        if let Some(worker) = worker {
            command.env("SLUICE_EXTRACT_WORKER_PROGRAM", worker);
        }
        let child = command
            .env("AWS_LAMBDA_RUNTIME_API", &api.address)
            // What Lambda sets for every function (no credentials: its role grants only logs).
            .env("AWS_LAMBDA_FUNCTION_NAME", "sluice-extract")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/sluice-extract")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/12/04/[$LATEST]0")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048")
            .env("TMPDIR", &scratch)
            .env("SLUICE_EXTRACT_SCRATCH_DIR", &scratch)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the extract function");
        api.started(Duration::from_secs(30)).await.expect("the function started");
        Self { api, child, log, scratch }
    }

    async fn invoke(&self, request: &Request) -> Response {
        let answer = self.api.invoke(serde_json::to_value(request).expect("json"), Duration::from_secs(60)).await;
        serde_json::from_value(answer.expect("the invocation succeeded")).expect("a response")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Environment {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn inline(bytes: &[u8]) -> Input {
    Input::Inline { base64: base64::engine::general_purpose::STANDARD.encode(bytes) }
}

fn extract(extension: &str, bytes: &[u8]) -> Request {
    let mut options = ExtractOptions::new(100_000).with_ocr(Some(sluice_formats::OcrOptions {
        dpi: 150,
        max_pages: 2,
        alphabet: sluice_formats::OcrAlphabet::LATIN,
    }));
    options.time_limit = Duration::from_secs(30);
    Request { extension: extension.to_owned(), options, input: inline(bytes), answer_upload: None }
}

#[tokio::test]
async fn where_lambda_refuses_confinement_the_extract_function_reads_a_pdf_a_docx_and_a_scan() {
    let environment = Environment::start(&[], None).await;
    let page = fixtures::scanned_page("Minutes of the harbour board\nThe budget was approved", 150, 1.0, 7);
    let files = [
        ("pdf", fixtures::pdf(&["Quarterly figures for the harbour board"]), "Quarterly figures"),
        ("docx", fixtures::docx("<w:p><w:r><w:t>Budget approved</w:t></w:r></w:p>"), "Budget approved"),
        ("png", fixtures::png_of(&page), "Minutes of the harbour board"),
    ];
    for (name, bytes, expected) in files {
        let Response::Extracted(Ok(read)) = environment.invoke(&extract(name, &bytes)).await else {
            panic!("{name} was not read");
        };
        assert_eq!(read.unreadable, None, "{name}");
        assert!(read.text.as_deref().is_some_and(|t| t.contains(expected)), "{name}: {read:?}");
    }
    // What was refused is logged once, at init, as one JSON line naming each step.
    let log = environment.log();
    let refusals: Vec<Value> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["fields"]["message"].as_str().is_some_and(|m| m.contains("refuses parse workers")))
        .collect();
    assert_eq!(refusals.len(), 1, "{log}");
    let refused = refusals[0]["fields"]["refused"].as_str().unwrap_or_default();
    for step in ["non_dumpable", "no_new_privs", "seccomp"] {
        assert!(refused.contains(step), "{step}: {log}");
    }
    let ready = log.lines().find(|l| l.contains("extract environment ready")).unwrap_or_default();
    assert!(ready.contains("\"subreaper\":false"), "{ready}");
}

/// Whether `pid` is still running (a zombie waiting for its reaper is not).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test]
async fn a_process_a_hostile_file_leaves_behind_in_a_session_of_its_own_is_gone_before_the_next_job() {
    // A platform that grants a subreaper but no seccomp filter: the rogue parser may start a
    // process, which leaves the worker's group with `setsid`.
    let environment = Environment::start(&["--only-seccomp"], Some(built("sluice-escape-probe"))).await;
    let marks = std::env::temp_dir().join(format!("sluice-left-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&marks).expect("dir");
    let pid_file = marks.join("pid");
    let job = |text: String| Request {
        extension: "txt".to_owned(),
        options: ExtractOptions::new(10_000),
        input: inline(text.as_bytes()),
        answer_upload: None,
    };
    let answer = environment.invoke(&job(format!("setsid:{}", pid_file.display()))).await;
    let Response::Extracted(Ok(extraction)) = answer else { panic!("{answer:?}") };
    assert_eq!(extraction.text.as_deref(), Some("escaped: setsid"), "the probe could not leave a process");
    let pid = std::fs::read_to_string(&pid_file).expect("the probe wrote its pid").trim().to_owned();
    // By the time the answer is back, the environment has been swept.
    let started = Instant::now();
    while running(&pid) {
        assert!(started.elapsed() < Duration::from_secs(2), "process {pid} outlived its job");
        std::thread::sleep(Duration::from_millis(20));
    }
    // What a job leaves in the scratch folder is gone after the next.
    std::fs::write(environment.scratch.join("left-by-a-job"), b"x").expect("scratch file");
    let answer = environment.invoke(&job("no such escape".to_owned())).await;
    assert!(matches!(answer, Response::Extracted(Ok(_))), "{answer:?}");
    assert_eq!(std::fs::read_dir(&environment.scratch).map(|d| d.count()).unwrap_or(0), 0);
    let _ = std::fs::remove_dir_all(&marks);
}

#[tokio::test]
async fn a_job_with_a_field_it_does_not_know_is_refused_whole() {
    let environment = Environment::start(&[], None).await;
    let mut request = serde_json::to_value(extract("txt", b"hello")).expect("json");
    request["tenant_id"] = json!("b");
    let answer = environment.api.invoke(request, Duration::from_secs(30)).await;
    assert!(answer.is_err(), "{answer:?}");
}

/// The extract function as upload and parse call it: through the running stack's Lambda API.
async fn invoked(stack: &sluice_e2e::Stack, name: &str) -> sluice_extraction::Reader {
    let config = stack.config().await;
    let blob = sluice_blob::Blob::new(stack.s3.clone(), config.bucket.clone(), config.kms_key_id.clone());
    let lambda = aws_sdk_lambda::Client::new(&stack.sdk);
    sluice_extraction::Reader::Function(sluice_extraction::ExtractFunction { lambda, name: name.to_owned(), blob })
}

async fn scratch_objects(stack: &sluice_e2e::Stack) -> Vec<String> {
    let listed = stack.s3.list_objects_v2().bucket(&stack.bucket).prefix("extract/").send().await.expect("list");
    listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
}

#[tokio::test]
async fn a_file_too_large_for_the_request_and_a_text_too_large_for_the_answer_go_by_presigned_urls() {
    let stack = sluice_e2e::Stack::from_env().await;
    let reader = invoked(&stack, "sluice-extract").await;
    // Six million characters of text: over the 4 MiB a request carries inline, and over the
    // 5 MiB an answer carries.
    let line = "a line of a long log file that no synchronous payload carries whole\n";
    let text = line.repeat(6_000_000 / line.len() + 1);
    let mut options = ExtractOptions::new(text.len() + 1);
    options.time_limit = Duration::from_secs(60);
    let tenant = sluice_extraction::Tenant::user(uuid::Uuid::new_v4());
    let kind = sluice_formats::kind_for_filename("f.txt").expect("txt");
    let pool = sluice_domain::BlockingPool::new(1);
    let read = reader
        .extract(&pool, &tenant, kind, bytes::Bytes::from(text.clone()), None, &options)
        .await
        .expect("handed over")
        .expect("not refused");
    assert_eq!(read.unreadable, None);
    assert_eq!(read.text.as_deref().map(str::len), Some(text.len()));
    // The one-time input and answer objects are gone (other tests' may come and go meanwhile:
    // the prefix must be seen empty at some moment).
    let started = std::time::Instant::now();
    loop {
        let left = scratch_objects(&stack).await;
        if left.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_failed_invocation_leaves_a_document_unreadable_and_refuses_a_tiff_as_a_crashed_worker_does() {
    let stack = sluice_e2e::Stack::from_env().await;
    // A function the Lambda API does not have: every invocation fails.
    let reader = invoked(&stack, "no-such-function").await;
    let tenant = sluice_extraction::Tenant::user(uuid::Uuid::new_v4());
    let pool = sluice_domain::BlockingPool::new(1);
    let options = ExtractOptions::new(1000);
    let kind = |name: &str| sluice_formats::kind_for_filename(name).expect("a kind");
    let pdf = bytes::Bytes::from(fixtures::pdf(&["Quarterly figures"]));
    let read = reader.extract(&pool, &tenant, kind("f.pdf"), pdf, None, &options).await.expect("handed over");
    let read = read.expect("not refused");
    assert_eq!((read.text, read.unreadable.as_deref()), (None, Some("the extract function could not be invoked")));
    let tiff = bytes::Bytes::from(fixtures::tiff(&[(10, 10)]));
    let refused = reader.extract(&pool, &tenant, kind("f.tiff"), tiff, None, &options).await.expect("handed over");
    assert_eq!(refused.expect_err("refused").code, sluice_formats::RefusalCode::UndecodableImage);
}
