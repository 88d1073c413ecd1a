//! The image decoders and the OCR entry, any bytes: the first byte picks the format
//! (PNG, JPEG, WebP, GIF, TIFF), the rest is the file, read with OCR on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::{ExtractOptions, OcrOptions, check_upload, extract};

const NAMES: [&str; 5] = ["a.png", "a.jpg", "a.webp", "a.gif", "a.tiff"];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let name = NAMES[usize::from(selector) % NAMES.len()];
    if let Ok(accepted) = check_upload(name, None, bytes) {
        let options = ExtractOptions::new(10_000).with_ocr(Some(OcrOptions { dpi: 150, max_pages: 2, alphabet: sluice_formats::OcrAlphabet::LATIN }));
        let _ = extract(accepted.kind, bytes, &options);
    }
});
