//! Text extraction in a child process, under limits the kernel enforces.
//!
//! The parsers check their deadline between pages, rows and XML nodes, but a parser stuck
//! inside one call into PDFium, or an allocation nobody foresaw, cannot be stopped from
//! inside the process. So each file is read by a worker: the function's own binary started
//! again with `SLUICE_EXTRACT_WORKER` set. The worker first confines itself with whatever the
//! platform grants (`confine`: no capabilities, no sockets, no ptrace, no exec, no new
//! process; on AWS Lambda most of it is refused, and a refusal never fails a file), tells
//! its parent what was granted in one line, and only then is handed its job: it caps its
//! address space and CPU time with `setrlimit`, reads the file from stdin, writes one JSON
//! line to stdout and exits. The parent starts it in a process group of its own and kills
//! the whole group at the wall-clock deadline (and after every job). Whatever the worker
//! does, the parent keeps serving, and the file is answered as unreadable (a TIFF, which must
//! be decodable, is refused as undecodable, and an archive, which must be checked to the end,
//! as uncheckable). [`sweep`] ends what a worker leaves behind where the group kill cannot.
//!
//! Every `main` whose process builds an [`Extractor::current_exe`] calls
//! [`serve_if_worker`] first, before it starts a runtime or reads its configuration.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sluice_domain::FileContent;
use sluice_formats::kinds::Family;
use sluice_formats::{ExtractOptions, Extraction, FileKind, FileType, Refusal, RefusalCode};
use std::io::{BufRead, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod confine;
pub mod sweep;
pub use confine::{Grants, become_subreaper, close_to_same_user, confine_worker};

/// Set in a worker's environment; its presence makes [`serve_if_worker`] serve.
pub const WORKER_ENV: &str = "SLUICE_EXTRACT_WORKER";

/// How long past the parsers' own deadline a worker lives: the cooperative check answers
/// first, with its clearer message, in every case but a parser stuck in one call.
pub const GRACE: Duration = Duration::from_secs(2);

/// The variables a worker gets from its parent: where the parsers' libraries and models are,
/// where to put temporary files, the locale, and the function's memory (which sets how many
/// threads OCR runs: the vCPUs it buys). Nothing else.
pub const WORKER_PASSES_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "PDFIUM_LIB_PATH",
    "ORT_DYLIB_PATH",
    "SLUICE_OCR_MODEL_DIR",
    "SLUICE_TESSERACT_LIBRARY",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
];

const MAX_JOB_HEADER_BYTES: u64 = 16 << 10;
const MAX_HANDSHAKE_BYTES: u64 = 4 << 10;
const MAX_STDERR_BYTES: u64 = 16 << 10;

/// The first line a worker reads; the file's bytes follow it.
#[derive(Debug, Serialize, Deserialize)]
struct Job {
    extension: String,
    options: ExtractOptions,
    memory_bytes: u64,
    cpu_seconds: u64,
    file_bytes: u64,
}

/// The one JSON line a worker writes (nothing else may reach its stdout).
#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Extracted(Box<Extraction>),
    Refused(Refusal),
}

/// Why a file could not be handed to a worker at all: the service's failure, not the file's.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    #[error("the parse worker could not be started: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("a parse worker may not start another worker")]
    Nested,
}

/// Starts workers and answers for them.
#[derive(Debug, Clone)]
pub struct Extractor {
    program: PathBuf,
    memory_bytes: u64,
    hard_time_limit: Option<Duration>,
}

impl Extractor {
    /// Workers are `program` (a binary whose `main` calls [`serve_if_worker`]), each
    /// allowed `memory_bytes` of address space.
    pub fn new(program: impl Into<PathBuf>, memory_bytes: u64) -> Self {
        // Before any worker exists: a worker reached by a hostile file cannot read this
        // process's memory or environment (its credentials) — where the platform allows it.
        if !close_to_same_user() {
            tracing::warn!(refused = "non_dumpable", "the platform refused to make this process non-dumpable");
        }
        Self { program: program.into(), memory_bytes, hard_time_limit: None }
    }

    /// Workers are this very binary.
    pub fn current_exe(memory_bytes: u64) -> std::io::Result<Self> {
        Ok(Self::new(std::env::current_exe()?, memory_bytes))
    }

    /// Kills workers after `limit` instead of the parse time limit plus [`GRACE`]; for
    /// proving the kill without a file that hangs.
    pub fn with_hard_time_limit(mut self, limit: Duration) -> Self {
        self.hard_time_limit = Some(limit);
        self
    }

    /// Starts one worker on an empty text and answers what the platform let it confine
    /// itself with (logged once by the first worker's handshake); `None` when no worker
    /// answered.
    pub fn probe(&self) -> Option<Grants> {
        let kind = sluice_formats::kind_for_filename("probe.txt")?;
        let _ = self.extract(kind, b"", &ExtractOptions::new(1));
        GRANTS.get().copied()
    }

    /// Extracts `bytes` of an accepted `kind` in a worker. The inner result is exactly what
    /// `sluice_formats::extract` would answer, except that a worker killed at the deadline,
    /// out of memory or crashed leaves the file unreadable (a TIFF refused).
    pub fn extract(
        &self,
        kind: &FileKind,
        bytes: &[u8],
        options: &ExtractOptions,
    ) -> Result<Result<Extraction, Refusal>, IsolateError> {
        if std::env::var_os(WORKER_ENV).is_some() {
            return Err(IsolateError::Nested);
        }
        let hard_time_limit = self.hard_time_limit.unwrap_or(options.time_limit + GRACE);
        let job = Job {
            extension: kind.extension.to_owned(),
            options: *options,
            memory_bytes: self.memory_bytes,
            // OCR runs on every core, so CPU time can pass wall time that many times over.
            cpu_seconds: hard_time_limit.as_secs() * cores() + 1,
            file_bytes: bytes.len() as u64,
        };
        // The worker starts with an empty environment and only what parsing reads: never the
        // function's AWS credentials or database settings, which a parser bug reached by a
        // hostile file would otherwise hold.
        let passed = WORKER_PASSES_ENV.iter().filter_map(|name| std::env::var_os(name).map(|value| (*name, value)));
        let child = Command::new(&self.program)
            .env_clear()
            .envs(passed)
            .env(WORKER_ENV, "1")
            // OCR's threads would each reserve a 64 MiB malloc arena of address space.
            .env("MALLOC_ARENA_MAX", "2")
            // ONNX Runtime's telemetry uploader, started when the library loads unless this
            // is set, opens a socket some seconds in — which the filter answers by killing
            // the worker mid-page.
            .env("ORT_DISABLE_TELEMETRY", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own: whatever it starts is killed with it.
            .process_group(0)
            .spawn()
            .map_err(IsolateError::Spawn)?;
        let ended = supervise(child, &job, bytes, hard_time_limit, reply_cap(options));
        Ok(answer(kind, ended, hard_time_limit, self.memory_bytes))
    }
}

/// The most bytes an extraction's answer may take as JSON: JSON escapes a character to at
/// most six bytes; images go as base64 (four bytes for three); the rest is the envelope.
pub fn reply_cap(options: &ExtractOptions) -> u64 {
    let images =
        options.images.map_or(0, |_| sluice_formats::images::MAX_DOCUMENT_IMAGE_BYTES as u64 / 3 * 4 + (1 << 20));
    options.max_chars as u64 * 6 + images + (1 << 20)
}

/// What a chat file's row records of bytes the upload check accepted and their extraction.
pub fn file_content(accepted: &sluice_formats::Accepted, bytes: &[u8], extraction: Extraction) -> FileContent {
    let dimension = |d: Option<u32>| d.and_then(|v| i32::try_from(v).ok());
    FileContent {
        mime_type: accepted.canonical_mime().to_owned(),
        size: bytes.len() as i64,
        file_type: accepted.file_type().as_str().to_owned(),
        preview: extraction.text.as_deref().and_then(sluice_formats::preview),
        parsed_content: extraction.text,
        checksum_sha256: hex::encode(Sha256::digest(bytes)),
        parse_note: extraction.unreadable,
        width: dimension(extraction.dimensions.map(|d| d.0)),
        height: dimension(extraction.dimensions.map(|d| d.1)),
    }
}

/// How a chat upload is read: `CHAT_PARSED_TEXT_MAX_CHARS` of text, and OCR of at most
/// `CHAT_OCR_MAX_PAGES` scanned pages (an image is one) in `CHAT_OCR_LANGUAGES` within the
/// request's time limit.
pub fn chat_options(config: &sluice_domain::Config) -> ExtractOptions {
    let ocr = (config.chat_ocr_max_pages > 0).then_some(sluice_formats::OcrOptions {
        dpi: sluice_domain::ingestion::DEFAULT_OCR_DPI,
        max_pages: config.chat_ocr_max_pages,
        alphabet: sluice_formats::OcrAlphabet::for_languages(&config.chat_ocr_languages),
    });
    let mut options = ExtractOptions::new(config.parsed_text_max_chars).with_ocr(ocr);
    options.limits = archive_limits(config);
    options
}

/// The deployment's archive limits (`WORKSPACE_ARCHIVE_*`), as the readers take them.
pub fn archive_limits(config: &sluice_domain::Config) -> sluice_formats::container::ContainerLimits {
    let archive = config.archive;
    sluice_formats::container::ContainerLimits {
        max_entries: archive.max_entries,
        max_total_bytes: archive.max_total_bytes,
        max_member_bytes: archive.max_member_bytes,
        max_ratio: archive.max_ratio,
    }
}

fn cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// How a worker ended.
#[derive(Debug)]
enum Ended {
    Replied(Box<Reply>),
    Killed,
    Crashed { out_of_memory: bool },
}

/// What the platform granted the first worker of this process, logged once.
static GRANTS: OnceLock<Grants> = OnceLock::new();

fn record(grants: Grants) {
    if GRANTS.set(grants).is_ok() {
        let refused = grants.refused();
        if refused.is_empty() {
            tracing::info!(?grants, "parse workers confine themselves with every step");
        } else {
            tracing::warn!(
                ?grants,
                ?refused,
                "the platform refuses parse workers some confinement; they run without it"
            );
        }
    }
}

/// What the platform granted this process's workers, once one has started.
pub fn grants() -> Option<Grants> {
    GRANTS.get().copied()
}

fn supervise(mut child: Child, job: &Job, bytes: &[u8], hard_time_limit: Duration, reply_cap: u64) -> Ended {
    let deadline = Instant::now() + hard_time_limit;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // The job (the file's bytes) goes to a worker only once it says it is confined.
    let (confined, handed_over) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        // A worker that dies early breaks the pipe; the write error is its exit status's to tell.
        scope.spawn(move || {
            if let (Some(mut stdin), Ok(())) = (stdin, handed_over.recv()) {
                let header = serde_json::to_vec(job).unwrap_or_default();
                let _ = stdin
                    .write_all(&header)
                    .and_then(|()| stdin.write_all(b"\n"))
                    .and_then(|()| stdin.write_all(bytes));
            }
        });
        // The handshake, then the reply, parsed as it streams in: the text is never held twice.
        let reply = scope.spawn(move || {
            let mut reader = std::io::BufReader::new(stdout?.take(reply_cap));
            let mut line = Vec::new();
            (&mut reader).take(MAX_HANDSHAKE_BYTES).read_until(b'\n', &mut line).ok()?;
            record(serde_json::from_slice::<Grants>(&line).ok()?);
            confined.send(()).ok()?;
            serde_json::from_reader::<_, Reply>(reader).ok()
        });
        let errors = scope.spawn(move || read_capped(stderr, MAX_STDERR_BYTES));
        let status = wait_until(&mut child, deadline);
        // Nothing the worker started outlives it, however it ended.
        kill_group(&child);
        let reply = reply.join().ok().flatten();
        let errors = errors.join().unwrap_or_default();
        match status {
            None => Ended::Killed,
            Some(status) if status.success() => match reply {
                Some(reply) => Ended::Replied(Box::new(reply)),
                None => Ended::Crashed { out_of_memory: false },
            },
            Some(_) => Ended::Crashed { out_of_memory: says_out_of_memory(&errors) },
        }
    })
}

/// Waits for `child`, killing it at `deadline`; `None` when it was killed.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_millis(1);
    loop {
        let now = Instant::now();
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if now < deadline => {
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            _ => {
                kill_group(child);
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Kills every process of the worker's group (its id is the worker's pid).
fn kill_group(child: &Child) {
    if let Ok(group) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), nix::sys::signal::Signal::SIGKILL);
    }
}

fn read_capped(pipe: Option<impl Read>, cap: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(cap).read_to_end(&mut bytes);
    }
    bytes
}

/// Rust's allocator reports a refused allocation before it aborts; PDFium's only C++
/// exception, `std::bad_alloc`, reaches Rust as a foreign exception.
fn says_out_of_memory(stderr: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stderr);
    ["memory allocation of", "out of memory", "cannot catch foreign exceptions"].iter().any(|s| text.contains(s))
}

fn answer(kind: &FileKind, ended: Ended, hard_time_limit: Duration, memory_bytes: u64) -> Result<Extraction, Refusal> {
    unread(
        kind,
        match ended {
            Ended::Replied(reply) => {
                return match *reply {
                    Reply::Extracted(extraction) => Ok(*extraction),
                    Reply::Refused(refusal) => Err(refusal),
                };
            }
            Ended::Killed => format!(
                "reading the file ran past the {}-second hard limit and was stopped",
                hard_time_limit.as_secs_f64().ceil()
            ),
            Ended::Crashed { out_of_memory: true } => {
                format!("reading the file needed more than {} MiB of memory and was stopped", memory_bytes >> 20)
            }
            Ended::Crashed { out_of_memory: false } => "the parser crashed on this file".to_owned(),
        },
    )
}

/// The answer for a file whose reading was stopped for `reason`: a document is unreadable,
/// a TIFF (which must be decodable) refused, an archive (which must be checked to the end)
/// refused as uncheckable.
pub fn unread(kind: &FileKind, reason: String) -> Result<Extraction, Refusal> {
    if kind.family == Family::Tiff {
        return Err(Refusal {
            code: RefusalCode::UndecodableImage,
            message: format!("the image could not be decoded: {reason}"),
        });
    }
    // An archive is accepted only when it was checked to the end.
    if kind.file_type == FileType::Archive {
        return Err(Refusal {
            code: RefusalCode::UnsafeContainer("uncheckable_archive"),
            message: format!("the archive could not be checked: {reason}"),
        });
    }
    Ok(Extraction { unreadable: Some(reason), ..Extraction::default() })
}

/// In a worker (when `SLUICE_EXTRACT_WORKER` is set), serves the one job on stdin and
/// exits the process; elsewhere returns at once.
pub fn serve_if_worker() {
    if std::env::var_os(WORKER_ENV).is_none() {
        return;
    }
    serve_with(sluice_formats::extract);
}

/// Serves the one job on stdin with `extract`, confined as every worker is, and exits the
/// process. The workers' own entry point (and a test's stand-in for a parser gone rogue).
pub fn serve_with(extract: impl FnOnce(&'static FileKind, &[u8], &ExtractOptions) -> Result<Extraction, Refusal>) -> ! {
    let code = match serve(extract) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("sluice extract worker: {message}");
            2
        }
    };
    std::process::exit(code);
}

fn serve(
    extract: impl FnOnce(&'static FileKind, &[u8], &ExtractOptions) -> Result<Extraction, Refusal>,
) -> Result<(), String> {
    // Confined before the job is even sent: nothing of the file is in this process, or in
    // its pipe, while it is still open to others.
    let grants = confine_worker();
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, &grants).map_err(|e| e.to_string())?;
    stdout.write_all(b"\n").and_then(|()| stdout.flush()).map_err(|e| e.to_string())?;
    let mut stdin = std::io::stdin().lock();
    let mut header = Vec::new();
    (&mut stdin).take(MAX_JOB_HEADER_BYTES).read_until(b'\n', &mut header).map_err(|e| e.to_string())?;
    let job: Job = serde_json::from_slice(&header).map_err(|e| format!("not a job: {e}"))?;
    let kind = sluice_formats::kind_for_filename(&format!("file.{}", job.extension))
        .ok_or_else(|| format!("no file kind has the extension {:?}", job.extension))?;
    // PDFium is mapped before the limits where the file may hold a PDF: its size is the
    // library's, not the file's, and a bound too small for it would read as a missing
    // library rather than as a file that needs more memory. Unavailable, the read says so.
    if matches!(kind.file_type, FileType::Pdf | FileType::Archive | FileType::Email) {
        let _ = sluice_formats::pdf::ensure_available();
    }
    // Limits next: from here on every allocation counts against them.
    rlimit::setrlimit(rlimit::Resource::AS, job.memory_bytes, job.memory_bytes).map_err(|e| e.to_string())?;
    rlimit::setrlimit(rlimit::Resource::CPU, job.cpu_seconds, job.cpu_seconds + 1).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    stdin.take(job.file_bytes).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 != job.file_bytes {
        return Err(format!("the job ended after {} of {} bytes", bytes.len(), job.file_bytes));
    }
    let reply = match extract(kind, &bytes, &job.options) {
        Ok(extraction) => Reply::Extracted(Box::new(extraction)),
        Err(refusal) => Reply::Refused(refusal),
    };
    serde_json::to_writer(&mut stdout, &reply).map_err(|e| e.to_string())?;
    stdout.write_all(b"\n").and_then(|()| stdout.flush()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(extension: &str) -> &'static FileKind {
        sluice_formats::kind_for_filename(&format!("f.{extension}")).expect("kind")
    }

    #[test]
    fn the_deployments_archive_limits_reach_the_readers() {
        let config = sluice_domain::Config::from_lookup(|name| match name {
            "SLUICE_BUCKET" | "SLUICE_KMS_KEY_ID" => Some("x".to_owned()),
            "WORKSPACE_ARCHIVE_MAX_ENTRIES" => Some("12".to_owned()),
            "WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES" => Some("4096".to_owned()),
            _ => None,
        })
        .expect("config");
        let limits = chat_options(&config).limits;
        assert_eq!((limits.max_entries, limits.max_member_bytes), (12, 4096));
        assert_eq!((limits.max_total_bytes, limits.max_ratio), (200 << 20, 100));
    }

    #[test]
    fn a_killed_or_crashed_worker_leaves_a_document_unreadable_and_refuses_a_tiff() {
        let limit = Duration::from_millis(1500);
        let killed = answer(kind("pdf"), Ended::Killed, limit, 64 << 20).expect("not refused");
        assert_eq!(
            killed.unreadable.as_deref(),
            Some("reading the file ran past the 2-second hard limit and was stopped")
        );
        let oom = answer(kind("docx"), Ended::Crashed { out_of_memory: true }, limit, 64 << 20).expect("not refused");
        assert!(oom.unreadable.expect("reason").contains("more than 64 MiB"));
        let tiff = answer(kind("tiff"), Ended::Crashed { out_of_memory: false }, limit, 64 << 20).expect_err("refused");
        assert_eq!(tiff.code, RefusalCode::UndecodableImage);
    }

    #[test]
    fn an_allocation_failure_is_told_from_a_crash() {
        assert!(says_out_of_memory(b"memory allocation of 8388608 bytes failed\n"));
        assert!(!says_out_of_memory(b"thread 'main' panicked"));
    }

    #[test]
    fn a_worker_that_answers_nothing_is_a_crash_not_a_hang() {
        let extractor = Extractor::new("/bin/true", 1 << 30);
        let options = ExtractOptions::new(100);
        let outcome = extractor.extract(kind("txt"), b"hello", &options).expect("spawned");
        // /bin/true answers nothing: a worker that says nothing is a crash, not a hang.
        assert_eq!(outcome.expect("not refused").unreadable.as_deref(), Some("the parser crashed on this file"));
    }
}
