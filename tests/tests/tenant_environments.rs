//! The extract function's environments as the local runner gives them, one per tenant (a user
//! of its own each, as a microVM of its own on Lambda), under the stand-in for Lambda's
//! seccomp filter, so none of the worker's own confinement holds: a rogue parser in tenant
//! A's environment, while tenant B's file is read at the same moment, reads nothing of B's,
//! holds none of its callers' credentials, and what it leaves running is gone before its
//! environment's next job. Runs as root, as `infra/local/test` does (it gives users).

use base64::Engine;
use serde_json::{Value, json};
use sluice_local::lambda::ExtractFunction;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A binary `infra/local/test` builds beside this test's.
fn built(name: &str) -> PathBuf {
    let dir = std::env::current_exe().expect("test binary").parent().and_then(|d| d.parent()).map(PathBuf::from);
    dir.map(|d| d.join(name)).filter(|p| p.exists()).unwrap_or_else(|| panic!("target/debug/{name}: build it first"))
}

/// Copies `from` (a file or a folder) into `dir`, open to every user, as Lambda lays out a
/// function's code and layers; the checkout itself may sit where other users cannot enter.
fn laid_out(from: &Path, dir: &Path) -> PathBuf {
    let to = dir.join(from.file_name().expect("a name"));
    let status = std::process::Command::new("cp").arg("-r").arg(from).arg(&to).status().expect("cp");
    assert!(status.success(), "copy {}", from.display());
    let status = std::process::Command::new("chmod").args(["-R", "a+rX"]).arg(&to).status().expect("chmod");
    assert!(status.success());
    to
}

/// `libtesseract` laid out in `dir` with the libraries of its folder.
fn tesseract_laid_out(library: &Path, dir: &Path) -> PathBuf {
    laid_out(library.parent().expect("a folder"), dir).join(library.file_name().expect("a name"))
}

fn job(text: &str) -> Value {
    json!({
        "extension": "txt",
        "options": serde_json::to_value(sluice_formats::ExtractOptions::new(100_000)).expect("options"),
        "input": {"inline": {"base64": base64::engine::general_purpose::STANDARD.encode(text)}},
    })
}

fn text_of(answer: Result<Value, String>) -> String {
    let answer = answer.expect("the invocation succeeded");
    answer["extracted"]["Ok"]["text"].as_str().unwrap_or_else(|| panic!("no text: {answer}")).to_owned()
}

fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rogue_parser_in_one_tenants_environment_reaches_nothing_of_another_tenants() {
    assert!(nix::unistd::geteuid().is_root(), "run as root, as `infra/local/test` does: environments get users");
    let dir = std::env::temp_dir().join(format!("sluice-tenancy-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let variable = |name: &str| {
        PathBuf::from(std::env::var_os(name).unwrap_or_else(|| panic!("{name}: run with the stack's env")))
    };
    let function = ExtractFunction::new("sluice-extract", laid_out(&built("sluice-extract"), &dir), 7)
        .wrapped_in(laid_out(&built("sluice-lambda-seccomp"), &dir))
        .with_env("SLUICE_EXTRACT_WORKER_PROGRAM", laid_out(&built("sluice-escape-probe"), &dir))
        .with_env("PDFIUM_LIB_PATH", laid_out(&variable("PDFIUM_LIB_PATH"), &dir))
        .with_env("ORT_DYLIB_PATH", laid_out(&variable("ORT_DYLIB_PATH"), &dir))
        .with_env("SLUICE_OCR_MODEL_DIR", laid_out(&variable("SLUICE_OCR_MODEL_DIR"), &dir))
        // Tesseract's library finds its own beside it: its folder is laid out whole.
        .with_env("SLUICE_TESSERACT_LIBRARY", tesseract_laid_out(&variable("SLUICE_TESSERACT_LIBRARY"), &dir));
    let function = Arc::new(function);
    let secret = format!("B-secret-{}", uuid::Uuid::new_v4().simple());

    // B's file is held (in memory and in B's scratch folder) while A's rogue parser looks.
    let (b, a) = {
        let (for_b, for_a) = (function.clone(), function.clone());
        let b_job = job(&format!("hold:{secret}"));
        let b = tokio::spawn(async move { for_b.invoke("org-b", b_job).await });
        let a = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1200)).await;
            for_a.invoke("org-a", job("neighbours")).await
        });
        (b.await.expect("b"), a.await.expect("a"))
    };
    assert!(text_of(b).contains(&format!("held {secret}")), "B's job was answered for B");
    let seen = text_of(a);
    assert!(!seen.contains(&secret), "A read B's bytes:\n{seen}");
    assert!(seen.contains("denied /proc/"), "A never saw B's environment:\n{seen}");
    assert!(!seen.lines().any(|l| l.starts_with("read /proc/") && l.contains("environ")), "{seen}");
    let (users_a, users_b) = (function.users_of("org-a"), function.users_of("org-b"));
    assert!(users_a.iter().chain(&users_b).all(Option::is_some), "{users_a:?} {users_b:?}");
    assert!(users_a.iter().all(|u| !users_b.contains(u)), "A and B share a user: {users_a:?} {users_b:?}");

    // What A finds of credentials, its own and its handler's (Lambda refuses the handler the
    // non-dumpable flag): the function's own stand-ins only, never a caller's, no endpoint.
    let credentials = text_of(function.invoke("org-a", job("credentials")).await);
    assert!(credentials.contains("ASIAEXTRACTLOGSONLY"), "{credentials}");
    for forbidden in ["AWS_ACCESS_KEY_ID=local", "AWS_ENDPOINT_URL", "SLUICE_DB_", "SLUICE_BUCKET", "SLUICE_KMS"] {
        assert!(!credentials.contains(forbidden), "A found {forbidden}: {credentials}");
    }

    // A process A leaves running in a session of its own is gone before A's next job.
    let marks = dir.join("marks");
    std::fs::create_dir_all(&marks).expect("marks");
    std::fs::set_permissions(&marks, std::fs::Permissions::from_mode(0o777)).expect("mode");
    let pid_file = marks.join("pid");
    let left = text_of(function.invoke("org-a", job(&format!("setsid:{}", pid_file.display()))).await);
    assert_eq!(left, "escaped: setsid", "the rogue parser could not leave a process");
    let pid = std::fs::read_to_string(&pid_file).expect("its pid").trim().to_owned();
    let started = Instant::now();
    while running(&pid) {
        assert!(started.elapsed() < Duration::from_secs(2), "process {pid} outlived A's job");
        std::thread::sleep(Duration::from_millis(20));
    }
    function.end_idle_now();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_invocation_without_a_tenant_or_over_the_payload_limit_is_refused_as_lambda_refuses_it() {
    let function = Arc::new(ExtractFunction::new("sluice-extract", built("sluice-extract"), 8));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port");
    let address = listener.local_addr().expect("address");
    tokio::spawn(sluice_local::lambda::serve(listener, function));
    let url = format!("http://{address}/2015-03-31/functions/sluice-extract/invocations");
    sluice_embed::install_tls_provider();
    let client = reqwest::Client::new();
    let refused = client.post(&url).body(job("hello").to_string()).send().await.expect("answer");
    assert_eq!(refused.status(), 400);
    assert_eq!(refused.headers()["x-amzn-errortype"], "InvalidParameterValueException");
    let unknown = client
        .post(format!("http://{address}/2015-03-31/functions/another/invocations"))
        .header("x-amz-tenant-id", "org-a")
        .body("{}")
        .send()
        .await
        .expect("answer");
    assert_eq!(unknown.status(), 404);
    // Lambda's 6 MB request limit, before any environment starts.
    let too_large = client
        .post(&url)
        .header("x-amz-tenant-id", "org-a")
        .body(vec![b' '; sluice_local::lambda::MAX_PAYLOAD_BYTES + 1])
        .send()
        .await
        .expect("answer");
    assert_eq!(too_large.status(), 413);
    assert_eq!(too_large.headers()["x-amzn-errortype"], "RequestTooLargeException");
}
