//! Text decoding: every kind of text file, any bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::{ExtractOptions, check_upload, extract};

fuzz_target!(|data: &[u8]| {
    let names = ["a.txt", "a.xml", "a.html", "a.csv"];
    let Some((&selector, bytes)) = data.split_first() else { return };
    let name = names[usize::from(selector) % names.len()];
    if let Ok(accepted) = check_upload(name, None, bytes) {
        let _ = extract(accepted.kind, bytes, &ExtractOptions::new(10_000));
    }
});
