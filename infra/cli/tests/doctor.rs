//! `sluice doctor` against the running local stack (`infra/local/test` starts it): every
//! part the functions need at start, checked the way they reach it.

use std::process::Command;

fn doctor(env: &[(&str, &str)]) -> (bool, String) {
    let output =
        Command::new(env!("CARGO_BIN_EXE_sluice")).arg("doctor").envs(env.iter().copied()).output().expect("run");
    (output.status.success(), String::from_utf8(output.stdout).expect("utf-8"))
}

#[test]
fn a_healthy_stack_reads_healthy() {
    assert!(std::env::var("SLUICE_DB_HOST").is_ok(), "run with `infra/local/test`: it starts the stack");
    let (ok, report) = doctor(&[]);
    assert!(ok, "{report}");
    assert!(report.contains("pdfium: loaded"), "{report}");
    assert!(report.contains("ocr: runtime loaded, models present"), "{report}");
    assert!(report.contains("database reachable: yes (TLS"), "{report}");
    assert!(report.contains("embedding model: present"), "{report}");
}

#[test]
fn a_missing_pdfium_is_the_deployments_failure() {
    let (ok, report) = doctor(&[("PDFIUM_LIB_PATH", "/nonexistent/libpdfium.so")]);
    assert!(!ok, "{report}");
    assert!(report.contains("pdfium: PDFium could not be loaded from /nonexistent/libpdfium.so"), "{report}");
}

#[test]
fn a_missing_ocr_runtime_or_model_is_the_deployments_failure() {
    let (ok, report) = doctor(&[("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so")]);
    assert!(!ok, "{report}");
    assert!(
        report.contains(
            "ocr: OCR is not available: ONNX Runtime could not be loaded from /nonexistent/libonnxruntime.so"
        ),
        "{report}"
    );
    let (ok, report) = doctor(&[("SLUICE_OCR_MODEL_DIR", "/nonexistent/ocr")]);
    assert!(!ok, "{report}");
    assert!(
        report.contains("ocr: OCR is not available: /nonexistent/ocr/ch_PP-OCRv4_det_infer.onnx is missing"),
        "{report}"
    );
    let (ok, report) = doctor(&[("SLUICE_TESSERACT_LIBRARY", "/nonexistent/libtesseract.so.5")]);
    assert!(!ok, "{report}");
    assert!(report.contains("ocr: Tesseract is not available: /nonexistent/libtesseract.so.5 is missing"), "{report}");
}

#[test]
fn a_missing_embedding_model_is_the_deployments_failure() {
    let (ok, report) = doctor(&[("SLUICE_MODEL_DIR", "/nonexistent/minilm")]);
    assert!(!ok, "{report}");
    assert!(report.contains("embedding model: the embedding model is missing from /nonexistent/minilm"), "{report}");
}

#[test]
fn a_database_behind_an_unknown_authority_is_unreachable() {
    // Certificates from the public roots: the stack's own authority is not among them.
    let (ok, report) = doctor(&[("SLUICE_DB_CA_FILE", "")]);
    assert!(!ok, "{report}");
    assert!(report.contains("database reachable: no"), "{report}");
}
