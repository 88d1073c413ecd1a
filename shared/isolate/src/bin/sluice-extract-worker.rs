//! A binary that is only a worker: for the tests, and for a deployment that would rather
//! not re-run the function's own binary (point `Extractor::new` at it).

fn main() {
    sluice_isolate::serve_if_worker();
    eprintln!("sluice-extract-worker is started by an Extractor, with {} set", sluice_isolate::WORKER_ENV);
    std::process::exit(2);
}
