//! ONNX Runtime for every model a process runs. The library (the `onnxruntime` wheel's
//! `libonnxruntime.so`) is bound at run time from `ORT_DYLIB_PATH`, like PDFium, and its
//! environment can be set up only once per process — so OCR and the embedding model, which
//! share a process in the local stack, share it through here.

pub use ort;
use ort::environment::Environment;
use ort::session::Session;
use std::sync::OnceLock;

static RUNTIME: OnceLock<Result<Environment, String>> = OnceLock::new();

/// The runtime, loaded on first use, with its telemetry events off. ONNX Runtime's Linux
/// build also starts an uploader that reaches Microsoft some seconds in unless
/// `ORT_DISABLE_TELEMETRY` is set before the library loads: the template and the local
/// stack set it, and parse workers (whose filter kills a process that opens a socket) get
/// it from `sluice-isolate`. The error says what failed, for the caller to wrap with the
/// layer or setting to check.
pub fn runtime() -> Result<&'static Environment, String> {
    RUNTIME
        .get_or_init(|| {
            let library = std::env::var("ORT_DYLIB_PATH").unwrap_or_else(|_| "libonnxruntime.so".to_owned());
            ort::init_from(&library)
                .map_err(|e| format!("ONNX Runtime could not be loaded from {library} ({e})"))?
                .with_name("sluice")
                .with_telemetry(false)
                .build()
                .map_err(|e| format!("ONNX Runtime did not start ({e})"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The CPUs this process may use: the scheduler's answer (which honours a container's CPU
/// quota), and inside Lambda no more than the memory setting buys — one vCPU per 1,769 MB,
/// whatever the host's core count shows.
pub fn threads() -> usize {
    threads_for(
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE").ok().as_deref(),
    )
}

fn threads_for(available: usize, lambda_memory_mb: Option<&str>) -> usize {
    let bought =
        lambda_memory_mb.and_then(|mb| mb.parse::<usize>().ok()).map(|mb| mb.div_ceil(LAMBDA_MB_PER_VCPU).max(1));
    bought.map_or(available, |vcpus| vcpus.min(available)).max(1)
}

/// Lambda's memory per full vCPU.
const LAMBDA_MB_PER_VCPU: usize = 1769;

/// A session for the model in `bytes` on the CPU, with `threads` threads for each operator
/// and no memory arena kept between runs (a function's memory is its bill and its limit).
pub fn session(bytes: &[u8], threads: usize) -> Result<Session, String> {
    let environment = runtime()?;
    Session::builder(environment)
        .and_then(|builder| builder.with_intra_threads(threads).map_err(ort::Error::<()>::from))
        .and_then(|builder| builder.with_memory_pattern(false).map_err(ort::Error::<()>::from))
        .and_then(|builder| {
            builder
                .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(false).build()])
                .map_err(ort::Error::<()>::from)
        })
        .and_then(|mut builder| builder.commit_from_memory(bytes))
        .map_err(|e| format!("not a model ONNX Runtime can run ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lambda_gets_the_threads_its_memory_buys_and_no_more_than_the_host_shows() {
        assert_eq!(threads_for(2, Some("1024")), 1);
        assert_eq!(threads_for(2, Some("2048")), 2);
        assert_eq!(threads_for(2, Some("10240")), 2);
        assert_eq!(threads_for(6, Some("3538")), 2);
        assert_eq!(threads_for(4, None), 4);
        assert_eq!(threads_for(4, Some("not a number")), 4);
    }
}
