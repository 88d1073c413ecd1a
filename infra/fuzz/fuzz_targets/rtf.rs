//! The .rtf reader, any bytes, as text and as markdown.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::{ExtractOptions, check_upload, extract};

fuzz_target!(|data: &[u8]| {
    if let Ok(accepted) = check_upload("a.rtf", None, data) {
        for markdown in [false, true] {
            let _ = extract(accepted.kind, data, &ExtractOptions::new(10_000).with_markdown(markdown));
        }
    }
});
