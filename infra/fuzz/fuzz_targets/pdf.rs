//! The .pdf reader, any bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::{ExtractOptions, check_upload, extract};

fuzz_target!(|data: &[u8]| {
    if let Ok(accepted) = check_upload("a.pdf", None, data) {
        let _ = extract(accepted.kind, data, &ExtractOptions::new(10_000));
    }
});
