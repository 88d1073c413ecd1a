//! The .xls reader, any bytes.
//!
//! calamine's XLS reader panics on some malformed records (two sites found here); the
//! extraction catches those panics and reports the file unreadable, which is the behaviour
//! wanted. libfuzzer-sys's panic hook would abort on them anyway, so this target swaps in a
//! silent hook: a panic that escapes extraction still fails the run (libfuzzer-sys aborts
//! when the closure unwinds), while caught ones let the search go on for hangs and OOMs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::{ExtractOptions, check_upload, extract};

fuzz_target!(|data: &[u8]| {
    std::panic::set_hook(Box::new(|_| {}));
    if let Ok(accepted) = check_upload("a.xls", None, data) {
        let _ = extract(accepted.kind, data, &ExtractOptions::new(10_000));
    }
});
