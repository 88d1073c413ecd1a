//! PDF through PDFium (`pdfium-render`), bound at run time to the `libpdfium.so` named by
//! `PDFIUM_LIB_PATH` (the `pypdfium2` wheel's build). The library is loaded once per
//! process. Pages are read one at a time; reading stops at the page that crosses the
//! budget, or after `max_pages` pages (at most 2,000).
//!
//! With OCR on, a page whose text layer is negligible while an image covers most of it is
//! a scan: it is rendered at the OCR resolution and read by the OCR engine instead. A page
//! with a real text layer is never OCRed.
//!
//! As markdown, every page's text layer is read first (up to what the budget can keep), so
//! that the document's body size, heading sizes and running headers are known before any
//! page is written (see [`crate::pdf_structure`]).

use crate::budget::{Stop, TextBudget};
use crate::dates::{DateSource, OwnDate};
use crate::images::ImageCollector;
use crate::markdown::MarkdownWriter;
use crate::office::ReadError;
use crate::options::{ExtractOptions, MAX_PAGES};
use crate::pdf_structure::{Figure, Style, TextPage};
use crate::scan::Scanner;
use image::GrayImage;
use pdfium_render::prelude::{
    PdfDocument, PdfDocumentMetadataTagType, PdfPage, PdfPageObjectCommon, PdfPageObjectType, PdfPageObjectsCommon,
    PdfRenderConfig, Pdfium, PdfiumError, PdfiumInternalError,
};
use std::sync::OnceLock;

/// A page with fewer characters than this in its text layer may be a scan.
const NEGLIGIBLE_TEXT_CHARS: usize = 32;
/// The share of a page an image must cover for the page to count as a scan.
const SCAN_IMAGE_COVER: f32 = 0.5;
/// The longest side of a rendered page, in pixels, whatever the resolution asked.
const MAX_RENDER_SIDE: u32 = 3400;

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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PdfStats {
    pub pages: u32,
    pub pages_read: u32,
    /// The document's own date, from its Info dictionary.
    pub date: Option<OwnDate>,
    /// The Info dictionary's `Title`.
    pub title: Option<String>,
    /// Where each page read begins in the text: (page number from 1, byte offset).
    pub page_starts: Vec<(u32, usize)>,
}

/// The Info dictionary's `CreationDate`, else its `ModDate`.
fn own_date(document: &PdfDocument<'_>) -> Option<OwnDate> {
    let metadata = document.metadata();
    [
        (PdfDocumentMetadataTagType::CreationDate, DateSource::PdfCreationDate),
        (PdfDocumentMetadataTagType::ModificationDate, DateSource::PdfModDate),
    ]
    .into_iter()
    .find_map(|(tag, source)| {
        let date = crate::dates::pdf_date(metadata.get(tag)?.value())?;
        Some(OwnDate { date, source })
    })
}

/// The text layers of a document's pages read ahead for markdown, and what they say of
/// its type.
struct Structure {
    pages: Vec<Option<TextPage>>,
    style: Style,
    writer: MarkdownWriter,
}

impl Structure {
    /// Reads the text layers of the first `last` pages, stopping once they hold more than
    /// the budget can keep (or the time is up: the pages not read ahead are read as text).
    fn read(document: &PdfDocument<'_>, last: i32, budget: &TextBudget) -> Self {
        let mut pages = Vec::new();
        let mut chars = 0;
        for index in 0..last {
            if chars > budget.remaining() || budget.check_time().is_err() {
                break;
            }
            let page = document.pages().get(index).ok().map(|page| crate::pdf_structure::read_page(&page));
            chars += page.as_ref().map_or(0, TextPage::chars);
            pages.push(page);
        }
        let style = Style::of(&pages.iter().flatten().collect::<Vec<_>>());
        Self { pages, style, writer: MarkdownWriter::default() }
    }

    /// Page `index`'s text layer, if it was read ahead.
    fn take(&mut self, index: i32) -> Option<TextPage> {
        self.pages.get_mut(index as usize)?.take()
    }

    fn write(&mut self, page: TextPage, budget: &mut TextBudget, figures: &[Figure]) -> Result<Vec<usize>, Stop> {
        crate::pdf_structure::write_page(page, &self.style, &mut self.writer, budget, figures)
    }
}

/// Extracts the text of at most `options.max_pages` pages into the budget (as markdown when
/// `options.markdown`), OCRing scanned pages when `scanner` is given and handing the images
/// on the other pages to `images` when it is. As markdown an image is placed before the
/// first block below it that it overlaps across (else at its page's end); as text, at its
/// page's end.
pub fn pdf(
    bytes: &[u8],
    budget: &mut TextBudget,
    options: &ExtractOptions,
    mut scanner: Option<&mut Scanner>,
    mut images: Option<&mut ImageCollector>,
) -> Result<PdfStats, ReadError> {
    let (max_pages, markdown) = (options.max_pages, options.markdown);
    let pdfium = pdfium()?;
    let document = pdfium.load_pdf_from_byte_slice(bytes, None).map_err(|error| match error {
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PasswordError) => {
            ReadError::Unreadable("the PDF is protected by a password".to_owned())
        }
        // In Sluice's words, not PDFium's: the reason is stored and shown with the file.
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::SecurityError) => {
            ReadError::Unreadable("not a readable PDF: it is encrypted in a way the reader cannot open".to_owned())
        }
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::PageError) => {
            ReadError::Unreadable("not a readable PDF: its pages are damaged".to_owned())
        }
        _ => ReadError::Unreadable("not a readable PDF: the file is damaged, truncated or not a PDF".to_owned()),
    })?;
    let pages = document.pages();
    let mut stats = PdfStats {
        pages: pages.len().max(0) as u32,
        pages_read: 0,
        date: own_date(&document),
        title: document.metadata().get(PdfDocumentMetadataTagType::Title).and_then(|t| crate::titles::tidy(t.value())),
        page_starts: Vec::new(),
    };
    let max_pages = max_pages.clamp(1, MAX_PAGES);
    let last = pages.len().min(max_pages as i32);
    let mut structure = markdown.then(|| Structure::read(&document, last, budget));
    for index in 0..last {
        if budget.check_time().is_err() {
            match scanner.as_deref_mut() {
                // OCR spent the time: what it read is kept and the pages not reached named.
                Some(scanner) if scanner.out_of_time() => {
                    scanner.stop(index as u32 + 1, last as u32);
                    break;
                }
                _ => return Err(ReadError::Time),
            }
        }
        let Ok(page) = pages.get(index) else { continue };
        // A page read ahead as markdown is not extracted again.
        let layer = match structure.as_mut().and_then(|s| s.take(index)) {
            Some(read_ahead) => Layer::Structured(read_ahead),
            None => Layer::Text(page.text().map(|t| t.all()).unwrap_or_default()),
        };
        stats.pages_read += 1;
        stats.page_starts.push((index as u32 + 1, budget.len()));
        let scan = scanner.is_some() && is_scan(&page, &layer);
        // A scanned page's picture is the page itself: OCR reads it, nothing describes it.
        let figures = match images.as_deref_mut() {
            Some(images) if !scan => {
                images.on_page(index as u32 + 1);
                figures(&page, images)
            }
            _ => Vec::new(),
        };
        let places: Vec<Figure> = figures.iter().map(|(figure, _)| *figure).collect();
        let pushed = match (scanner.as_deref_mut(), layer) {
            (Some(scanner), _) if scan => {
                let dpi = scanner.dpi();
                scanner.page(index as u32 + 1, || render(&page, dpi), budget).map(|()| Vec::new())
            }
            (_, Layer::Structured(read_ahead)) => match structure.as_mut() {
                Some(structure) => structure.write(read_ahead, budget, &places),
                None => Ok(Vec::new()),
            },
            // PDFium ends lines with CRLF; the rest of Sluice uses LF.
            (_, Layer::Text(text)) => {
                let text = text.replace("\r\n", "\n").replace('\r', "\n");
                budget
                    .push(text.trim_end())
                    .and_then(|()| budget.push("\n\n"))
                    .map(|()| vec![budget.len(); places.len()])
            }
        };
        if let (Some(images), Ok(offsets)) = (images.as_deref_mut(), &pushed) {
            for ((_, image), offset) in figures.into_iter().zip(offsets) {
                images.offer_pixels(image, *offset);
            }
        }
        match pushed {
            Ok(_) => {}
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
    if let Some(scanner) = scanner {
        scanner.note_unread(budget);
    }
    if stats.pages > max_pages {
        let _ = budget.push(&format!(
            "[Stopped after {max_pages} of {} pages: {} not read.]\n",
            stats.pages,
            if stats.pages == max_pages + 1 {
                format!("page {} was", stats.pages)
            } else {
                format!("pages {}–{} were", max_pages + 1, stats.pages)
            }
        ));
    }
    Ok(stats)
}

/// A page's text layer: as PDFium lays it out, or read ahead for markdown.
enum Layer {
    Text(String),
    Structured(TextPage),
}

impl Layer {
    /// Whether it holds at least `enough` characters that are not white space.
    fn holds(&self, enough: usize) -> bool {
        let visible = |text: &str| text.chars().filter(|c| !c.is_whitespace()).take(enough).count();
        match self {
            Self::Text(text) => visible(text) >= enough,
            Self::Structured(page) => page.spans.iter().map(|(_, span)| visible(&span.text)).sum::<usize>() >= enough,
        }
    }
}

/// A page is a scan when its text layer is negligible and an image covers most of it.
fn is_scan(page: &PdfPage<'_>, layer: &Layer) -> bool {
    if layer.holds(NEGLIGIBLE_TEXT_CHARS) {
        return false;
    }
    let area = page.width().value * page.height().value;
    if area <= 0.0 {
        return false;
    }
    page.objects().iter().any(|object| {
        object.object_type() == PdfPageObjectType::Image
            && object.bounds().is_ok_and(|b| b.width().value * b.height().value >= area * SCAN_IMAGE_COVER)
    })
}

/// The page's image objects worth describing, with where they sit (points from the page's
/// top left) and their pixels as the file holds them.
fn figures(page: &PdfPage<'_>, images: &mut ImageCollector) -> Vec<(Figure, image::DynamicImage)> {
    let height = page.height().value;
    let mut figures = Vec::new();
    for object in page.objects().iter() {
        let Some(image) = object.as_image_object() else { continue };
        let (Ok(bounds), Ok(width), Ok(pixels_high)) = (object.bounds(), image.width(), image.height()) else {
            continue;
        };
        if !images.wants(width.max(0) as u32, pixels_high.max(0) as u32) {
            continue;
        }
        let Ok(bitmap) = image.get_raw_bitmap() else { continue };
        let (w, h) = (bitmap.width().max(0) as u32, bitmap.height().max(0) as u32);
        let Some(pixels) = image::RgbaImage::from_raw(w, h, bitmap.as_rgba_bytes()) else { continue };
        let figure = Figure {
            left: bounds.left().value,
            right: bounds.right().value,
            top: height - bounds.top().value,
            bottom: height - bounds.bottom().value,
        };
        figures.push((figure, image::DynamicImage::ImageRgba8(pixels)));
    }
    figures
}

/// The page as grey pixels at `dpi`, its longer side at most [`MAX_RENDER_SIDE`].
fn render(page: &PdfPage<'_>, dpi: u32) -> Result<GrayImage, String> {
    let scale = dpi as f32 / 72.0;
    let config = PdfRenderConfig::new()
        .scale_page_by_factor(scale)
        .set_maximum_width(MAX_RENDER_SIDE as i32)
        .set_maximum_height(MAX_RENDER_SIDE as i32);
    let bitmap = page.render_with_config(&config).map_err(|e| format!("the page could not be rendered: {e}"))?;
    let (width, height) = (bitmap.width() as u32, bitmap.height() as u32);
    let rgba = bitmap.as_rgba_bytes();
    let grey = rgba.chunks_exact(4).map(|p| crate::scan::luma(p[0], p[1], p[2])).collect();
    GrayImage::from_raw(width, height, grey).ok_or_else(|| "the rendered page has no pixels".to_owned())
}

/// Every page of a PDF rendered at `dpi`, with the page's own text layer (for building scan
/// sets from real documents, whose truth is their text).
pub fn render_pages(bytes: &[u8], dpi: u32) -> Result<Vec<(GrayImage, String)>, String> {
    let pdfium = pdfium().map_err(|e| format!("{e:?}"))?;
    let document = pdfium.load_pdf_from_byte_slice(bytes, None).map_err(|e| e.to_string())?;
    document
        .pages()
        .iter()
        .map(|page| {
            let text = page.text().map_err(|e| e.to_string())?.all();
            Ok((render(&page, dpi)?, text))
        })
        .collect()
}

/// The first page of a PDF rendered at `dpi` (for building scans in tests and benchmarks).
pub fn render_first_page(bytes: &[u8], dpi: u32) -> Result<GrayImage, String> {
    let pdfium = pdfium().map_err(|e| format!("{e:?}"))?;
    let document = pdfium.load_pdf_from_byte_slice(bytes, None).map_err(|e| e.to_string())?;
    let page = document.pages().get(0).map_err(|e| e.to_string())?;
    render(&page, dpi)
}
