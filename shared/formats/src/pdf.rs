//! PDF through PDFium (`pdfium-render`), bound at run time to the `libpdfium.so` named by
//! `PDFIUM_LIB_PATH` (the `pypdfium2` wheel's build). The library is loaded once per
//! process. Pages are read one at a time; reading stops at the page that crosses the
//! budget, or after 2,000 pages.

use crate::budget::{Stop, TextBudget};
use crate::office::ReadError;
use pdfium_render::prelude::{Pdfium, PdfiumError, PdfiumInternalError};
use std::sync::OnceLock;

/// The most pages read from one document.
pub const MAX_PAGES: i32 = 2000;

static PDFIUM: OnceLock<Result<Pdfium, String>> = OnceLock::new();

/// The process's PDFium, loaded on first use.
fn pdfium() -> Result<&'static Pdfium, ReadError> {
    let loaded = PDFIUM.get_or_init(|| {
        let path = std::env::var("PDFIUM_LIB_PATH").unwrap_or_else(|_| "libpdfium.so".to_owned());
        // The loader's own error goes to the log; the file's record only says what to do.
        Pdfium::bind_to_library(&path).map(Pdfium::new).map_err(|error| {
            eprintln!("PDFium could not be loaded from {path}: {error:?}");
            "PDF text extraction is not available: PDFium could not be loaded (set PDFIUM_LIB_PATH)".to_owned()
        })
    });
    loaded.as_ref().map_err(|message| ReadError::Unreadable(message.clone()))
}

/// Loads PDFium now, or says why it cannot be: a function that reads PDFs calls this at
/// start and refuses to serve without it, so a missing layer is the deployment's failure
/// (loud, at init) rather than every PDF quietly stored as unreadable.
pub fn ensure_available() -> Result<(), String> {
    let path = std::env::var("PDFIUM_LIB_PATH").unwrap_or_else(|_| "libpdfium.so".to_owned());
    pdfium().map(|_| ()).map_err(|_| {
        format!("PDFium could not be loaded from {path}: this deployment cannot read PDFs (check its PDFium layer or PDFIUM_LIB_PATH)")
    })
}

/// What a PDF read yielded beyond its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PdfStats {
    pub pages: u32,
    pub pages_read: u32,
}

/// Extracts the text of every page into the budget.
pub fn pdf(bytes: &[u8], budget: &mut TextBudget) -> Result<PdfStats, ReadError> {
    let pdfium = pdfium()?;
    let document = pdfium.load_pdf_from_byte_slice(bytes, None).map_err(|error| match error {
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PasswordError) => {
            ReadError::Unreadable("the PDF is protected by a password".to_owned())
        }
        other => ReadError::Unreadable(format!("not a readable PDF: {other}")),
    })?;
    let pages = document.pages();
    let mut stats = PdfStats { pages: pages.len().max(0) as u32, pages_read: 0 };
    for index in 0..pages.len().min(MAX_PAGES) {
        budget.check_time().map_err(|_| ReadError::Time)?;
        let Ok(page) = pages.get(index) else { continue };
        let text = page.text().map(|t| t.all()).unwrap_or_default();
        stats.pages_read += 1;
        // PDFium ends lines with CRLF; the rest of Sluice uses LF.
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let pushed = budget.push(text.trim_end()).and_then(|()| budget.push("\n\n"));
        match pushed {
            Ok(()) => {}
            Err(Stop::Budget) => return Ok(stats),
            Err(Stop::Time) => return Err(ReadError::Time),
        }
    }
    // A page tree with no page PDFium can walk is no document, not an empty one.
    if stats.pages_read == 0 {
        return Err(ReadError::Unreadable(
            "the PDF has no page that can be read: its page tree is empty or broken".to_owned(),
        ));
    }
    if pages.len() > MAX_PAGES {
        let _ = budget.push(&format!("[Stopped after {MAX_PAGES} pages: the remaining pages were not read.]\n"));
    }
    Ok(stats)
}
