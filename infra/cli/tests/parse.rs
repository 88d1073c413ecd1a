//! `sluice parse`, run as operators run it: the built binary on files in a folder.

use serde_json::Value;
use sluice_fixtures as fixtures;
use std::path::PathBuf;
use std::process::Command;

/// Writes `bytes` as `name` in a folder of its own and returns the path.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-parse-{}-{}", std::process::id(), uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("the file");
    path
}

fn sluice(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).envs(env.iter().copied()).output().expect("run");
    (output.status.success(), String::from_utf8(output.stdout).expect("utf-8"))
}

fn verdict(path: &std::path::Path, env: &[(&str, &str)]) -> Value {
    let (ok, stdout) = sluice(&["parse", path.to_str().expect("a path")], env);
    assert!(ok, "sluice parse failed: {stdout}");
    serde_json::from_str(&stdout).expect("one JSON object")
}

#[test]
fn an_accepted_document_prints_its_verdict_and_its_text() {
    let path = file("minutes.docx", &fixtures::docx("<w:p><w:r><w:t>Budget approved</w:t></w:r></w:p>"));
    let v = verdict(&path, &[]);
    assert_eq!(v["verdict"], "accepted");
    // Here the platform grants every step of the worker's confinement.
    assert_eq!(v["confinement_refused"], serde_json::json!([]), "{v}");
    assert_eq!(v["file_type"], "docx");
    assert_eq!(v["mime_type"], "application/vnd.openxmlformats-officedocument.wordprocessingml.document");
    assert_eq!(v["truncated"], false);
    assert!(v["preview"].as_str().expect("a preview").contains("Budget approved"));
    assert!(v["chars"].as_u64().expect("chars") > 0);
    assert!(v["elapsed_ms"].is_u64());

    let (ok, text) = sluice(&["parse", "--text", path.to_str().expect("a path")], &[]);
    assert!(ok);
    assert!(text.contains("Budget approved") && text.contains("Quarterly header"));
}

#[test]
fn a_refused_file_names_its_reason() {
    let path = file("photo.png", b"%PDF-1.4 not a picture at all");
    let v = verdict(&path, &[]);
    assert_eq!(v["verdict"], "refused");
    assert_eq!(v["reason"], "content_mismatch");

    let bomb = fixtures::zip(&[("word/document.xml", "<!DOCTYPE w [<!ENTITY a \"aaaa\">]><w:document/>")]);
    let v = verdict(&file("bomb.docx", &bomb), &[]);
    assert_eq!((v["verdict"].as_str(), v["reason"].as_str()), (Some("refused"), Some("xml_doctype")));
}

#[test]
fn a_file_beyond_the_memory_bound_is_unreadable_not_fatal() {
    let text = "a line of a very long log file\n".repeat(200_000);
    let path = file("server.log.txt", text.as_bytes());
    let v = verdict(&path, &[("SLUICE_PARSE_MAX_MEMORY_MB", "16")]);
    assert_eq!(v["verdict"], "accepted");
    assert_eq!(v["chars"], 0);
    assert_eq!(v["unreadable"], "reading the file needed more than 16 MiB of memory and was stopped");
    // The same file under the default bound reads.
    assert!(verdict(&path, &[])["chars"].as_u64().expect("chars") > 100_000);
}

#[test]
fn an_archive_gets_the_verdict_and_reason_the_upload_would() {
    for (name, bytes, reason) in fixtures::hostile_archives().into_iter().filter(|(_, b, _)| b.len() < (1 << 20)) {
        let v = verdict(&file(name, &bytes), &[]);
        assert_eq!((v["verdict"].as_str(), v["reason"].as_str()), (Some("refused"), Some(reason)), "{name}: {v}");
    }
    let zip = fixtures::raw_zip(&[fixtures::RawZipEntry::file("repo/README.md", b"# Repo")]);
    let v = verdict(&file("repo.zip", &zip), &[]);
    assert_eq!(v["verdict"], "accepted");
    assert_eq!(v["members"], 1);
    assert_eq!(v["preview"], "repo/README.md");
}

#[test]
fn a_scanned_image_is_read_by_ocr_as_a_chat_upload_is() {
    let page = fixtures::scanned_page("Minutes of the harbour board\nThe budget was approved", 150, 1.0, 7);
    let path = file("whiteboard.png", &fixtures::png_of(&page));
    let v = verdict(&path, &[]);
    assert_eq!((v["verdict"].as_str(), v["file_type"].as_str()), (Some("accepted"), Some("image")), "{v}");
    assert_eq!(v["ocr_pages"], 1, "{v}");
    assert!(v["preview"].as_str().expect("a preview").starts_with("Minutes of the harbour board"), "{v}");
    // With chat OCR off, an image is a picture: no text.
    let v = verdict(&path, &[("CHAT_OCR_MAX_PAGES", "0")]);
    assert_eq!((v["preview"].clone(), v["chars"].clone()), (Value::Null, Value::from(0)), "{v}");
}

/// The stand-in for Lambda's own seccomp filter (`sluice-lambda-seccomp`, built beside this
/// test's binary by `infra/local/test`).
fn under_lambdas_filter() -> PathBuf {
    let dir = std::env::current_exe().expect("test binary").parent().and_then(|d| d.parent()).map(PathBuf::from);
    let wrapper = dir.map(|d| d.join("sluice-lambda-seccomp")).filter(|w| w.exists());
    wrapper.expect("target/debug/sluice-lambda-seccomp: `infra/local/test` builds it")
}

#[test]
fn where_the_platform_refuses_confinement_as_lambda_does_files_are_still_read() {
    let pdf = file("report.pdf", &fixtures::pdf(&["Quarterly figures for the harbour board"]));
    let docx = file("minutes.docx", &fixtures::docx("<w:p><w:r><w:t>Budget approved</w:t></w:r></w:p>"));
    let page = fixtures::scanned_page("Minutes of the harbour board\nThe budget was approved", 150, 1.0, 7);
    let scan = file("whiteboard.png", &fixtures::png_of(&page));
    for (path, expected) in [
        (&pdf, "Quarterly figures for the harbour board"),
        (&docx, "Budget approved"),
        (&scan, "Minutes of the harbour board"),
    ] {
        let output = Command::new(under_lambdas_filter())
            .arg(env!("CARGO_BIN_EXE_sluice"))
            .args(["parse", path.to_str().expect("a path")])
            .output()
            .expect("run");
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{}: {stdout}\n{stderr}", path.display());
        let v: Value = serde_json::from_str(&stdout).expect("one JSON object");
        assert_eq!(v["verdict"], "accepted", "{v}");
        assert_eq!(v["unreadable"], Value::Null, "{}: {v}\n{stderr}", path.display());
        assert!(v["preview"].as_str().is_some_and(|p| p.contains(expected)), "{}: {v}", path.display());
        // What the platform refused is said.
        let refused = v["confinement_refused"].as_array().expect("the refused steps");
        for step in ["non_dumpable", "no_new_privs", "seccomp"] {
            assert!(refused.iter().any(|r| r == step), "{step} not refused: {v}");
        }
    }
}
