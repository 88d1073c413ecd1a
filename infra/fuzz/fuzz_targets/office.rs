//! Zip-based office documents: the container check and the DOCX/PPTX/ODT/ODP/ODS readers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::{ExtractOptions, check_upload, extract};

fuzz_target!(|data: &[u8]| {
    let names = ["a.docx", "a.pptx", "a.odt", "a.odp", "a.ods"];
    let Some((&selector, bytes)) = data.split_first() else { return };
    let name = names[usize::from(selector) % names.len()];
    if let Ok(accepted) = check_upload(name, None, bytes) {
        let _ = extract(accepted.kind, bytes, &ExtractOptions::new(10_000));
    }
});
