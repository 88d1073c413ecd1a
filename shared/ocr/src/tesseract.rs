//! Tesseract 5's line recognizer, for the languages PaddleOCR's models do not read: Russian,
//! Ukrainian and Greek (the benchmark's pages: 70–96 % CER with PP-OCRv6, 0–1.7 % with
//! Tesseract and the language's pack; BENCHMARKS.md "OCR by language") and Korean, whose
//! Hangul PP-OCRv6's dictionary lacks.
//!
//! `libtesseract` is the one the `tesserocr` wheel on PyPI bundles (built for manylinux_2_28,
//! so it runs on `provided.al2023`, with its Leptonica and image libraries beside it), bound
//! at run time (`sluice-tesseract`); the languages' models are the `traineddata` files of
//! Debian's `tesseract-ocr-<lang>` packages (`infra/layers/ocr/tesseract.sh`). It runs in the
//! process that reads the file — no program is started (the worker may not `exec`) — on the
//! page's pixels, never the file's bytes. A page's languages load with it (9–150 ms).

use crate::{OcrError, PageText, model_dir};
use image::GrayImage;
use sluice_tesseract::{Tesseract, TesseractError};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The languages Tesseract reads here, in the bit order of [`crate::Alphabet`]'s mask: a list
/// holding any of them but English is read by Tesseract, with every one of them it holds.
/// Only appended to (the mask crosses releases in the extraction options). The domain's
/// `TESSERACT_LANGUAGES` are these but English.
pub const LANGUAGES: [&str; 5] = ["eng", "rus", "ukr", "ell", "kor"];
/// Greek's bit in the mask.
const GREEK: usize = 3;
const _: () = assert!(matches!(LANGUAGES[GREEK].as_bytes(), b"ell"));

/// The path of `libtesseract`; the OCR layer puts it at [`DEFAULT_LIBRARY`].
pub const LIBRARY_VARIABLE: &str = "SLUICE_TESSERACT_LIBRARY";
const DEFAULT_LIBRARY: &str = "/opt/lib/libtesseract.so.5";
/// The folder of the languages' models, inside the OCR models' folder.
const TESSDATA: &str = "tessdata";

/// Which of [`LANGUAGES`] a page of `languages` is read with by Tesseract: none unless one of
/// them is a language only Tesseract reads.
pub(crate) fn mask_for<S: AsRef<str>>(languages: &[S]) -> u8 {
    let holds = |language: &str| languages.iter().any(|code| code.as_ref() == language);
    if !LANGUAGES[1..].iter().any(|language| holds(language)) {
        return 0;
    }
    LANGUAGES.iter().enumerate().filter(|(_, language)| holds(language)).fold(0, |mask, (i, _)| mask | 1 << i)
}

/// Tesseract's language argument for `mask`: `rus+eng`.
fn languages_of(mask: u8) -> String {
    let mut named: Vec<&str> =
        LANGUAGES.iter().enumerate().filter(|(i, _)| mask & 1 << i != 0).map(|(_, l)| *l).collect();
    // The first language is the one Tesseract tries first on each word: English last.
    named.sort_by_key(|language| *language == "eng");
    named.join("+")
}

static TESSERACT: OnceLock<Result<Tesseract, String>> = OnceLock::new();

fn library_path() -> PathBuf {
    PathBuf::from(std::env::var(LIBRARY_VARIABLE).unwrap_or_else(|_| DEFAULT_LIBRARY.to_owned()))
}

fn tessdata() -> PathBuf {
    model_dir().join(TESSDATA)
}

fn unavailable(what: &dyn std::fmt::Display) -> String {
    format!("Tesseract is not available: {what}; check the OCR layer, {LIBRARY_VARIABLE} and SLUICE_OCR_MODEL_DIR")
}

/// Checks that the library and every language's model are there, without loading them.
pub(crate) fn ensure_installed() -> Result<(), String> {
    let library = library_path();
    let files = std::iter::once(library).chain(LANGUAGES.iter().map(|l| tessdata().join(format!("{l}.traineddata"))));
    for file in files {
        if !std::fs::metadata(&file).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Err(unavailable(&format!("{} is missing", file.display())));
        }
    }
    Ok(())
}

/// Reads `page` in the languages of `mask`, asking `stop` (with the lines begun so far) before
/// each line whether to stop there; a page stopped early keeps what was read (`unfinished`),
/// `Err(Time)` when that is nothing.
pub(crate) fn read(page: &GrayImage, mask: u8, stop: &mut dyn FnMut(usize) -> bool) -> Result<PageText, OcrError> {
    let tesseract = TESSERACT
        .get_or_init(|| Tesseract::load(&library_path()).map_err(|e| unavailable(&e)))
        .as_ref()
        .map_err(|message| OcrError::Unavailable(message.clone()))?;
    let read =
        tesseract.read(page.as_raw(), page.width(), &tessdata(), &languages_of(mask), stop).map_err(|e| match e {
            TesseractError::Library(_) | TesseractError::Languages { .. } => OcrError::Unavailable(unavailable(&e)),
            TesseractError::Page | TesseractError::Failed => OcrError::Engine,
        })?;
    let text = page_text(&read.text, mask);
    if read.stopped && text.is_empty() {
        return Err(OcrError::Time);
    }
    let lines = text.lines().filter(|line| !line.trim().is_empty()).count();
    // Tesseract's confidences are not the recognizer's: no line is counted as read poorly.
    Ok(PageText { text, lines, low_confidence_lines: 0, unfinished: read.stopped })
}

/// Tesseract's text of a page read in `mask`'s languages, as a page's text.
fn page_text(text: &str, mask: u8) -> String {
    let text = paragraphs(text);
    if mask & 1 << GREEK == 0 {
        return text;
    }
    // Greek's model writes `μ` as the micro sign `µ`, its compatibility twin: 17 of the 29
    // characters misread on the benchmark's Greek page at 150 dpi.
    text.replace('\u{b5}', "\u{3bc}")
}

/// Tesseract's text as a page's: lines without trailing spaces, one blank line between
/// paragraphs, no form feed.
fn paragraphs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines().map(|line| line.trim_end_matches([' ', '\u{c}'])) {
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_only_tesseract_reads_sends_the_page_to_it_with_its_companions() {
        assert_eq!(mask_for(&["eng"]), 0);
        assert_eq!(mask_for(&["eng", "deu"]), 0, "PaddleOCR reads these");
        assert_eq!(languages_of(mask_for(&["rus"])), "rus");
        assert_eq!(languages_of(mask_for(&["eng", "rus"])), "rus+eng", "the page's own language first");
        assert_eq!(languages_of(mask_for(&["ukr", "eng", "rus"])), "rus+ukr+eng");
        assert_eq!(languages_of(mask_for(&["ell"])), "ell");
        assert_eq!(languages_of(mask_for(&["ell", "deu"])), "ell", "no model here for German beside Greek");
    }

    #[test]
    fn tesseract_s_text_keeps_its_paragraphs_and_loses_its_padding() {
        assert_eq!(paragraphs("Первая строка  \nвторая\n\n\n Абзац\n\u{c}"), "Первая строка\nвторая\n\n Абзац\n");
        assert_eq!(paragraphs("\n\n"), "");
    }

    #[test]
    fn a_greek_page_s_micro_signs_are_the_letter_mu() {
        let micro = "όλα τα \u{b5}έλη, 5 \u{b5}m\n";
        assert_eq!(page_text(micro, mask_for(&["ell", "eng"])), "όλα τα \u{3bc}έλη, 5 \u{3bc}m\n");
        assert_eq!(page_text(micro, mask_for(&["rus"])), micro, "only where Greek is read");
    }
}
