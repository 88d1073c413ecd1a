//! Text extraction under a character budget, and the preview cut from it.

use crate::budget::TextBudget;
use crate::check::{Refusal, RefusalCode};
use crate::container::{Container, ContainerError};
use crate::dates::{self, OwnDate};
use crate::images::{FoundImage, ImageCollector, SkipReason};
use crate::kinds::{FileKind, FileType};
use crate::office::{self, ReadError};
use crate::options::ExtractOptions;
use crate::scan::{OcrOptions, Scanner};
use crate::sheets;
use crate::text::{Markup, decode};

/// The longest preview, in characters.
pub const PREVIEW_MAX_CHARS: usize = 240;

/// What a file yielded.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Extraction {
    /// The text, NUL-free; `None` for an image or a file no parser could read.
    pub text: Option<String>,
    /// The budget ran out and the text ends with the left-out marker.
    pub truncated: bool,
    /// Why there is no text, for a file that should have had some.
    pub unreadable: Option<String>,
    /// Width and height, for an image whose header says.
    pub dimensions: Option<(u32, u32)>,
    /// The encoding a text file was decoded from.
    pub encoding: Option<String>,
    /// Pages in a PDF.
    pub pages: Option<u32>,
    /// Cells read from a spreadsheet.
    pub cells: Option<u64>,
    /// Files and folders in an archive.
    pub members: Option<u64>,
    /// Pages read by OCR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr_pages: Option<u32>,
    /// Milliseconds OCR spent reading those pages (part of the extraction's time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr_ms: Option<u64>,
    /// Lines OCR kept though it read them with low confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr_low_confidence_lines: Option<u32>,
    /// Byte spans of `text` that OCR read (chunks within them are marked `ocr`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ocr_spans: Vec<(usize, usize)>,
    /// The date the file's own metadata gives, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<OwnDate>,
    /// The title the file's own metadata gives, as written (`titles`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where each page begins in `text` (PDF pages, TIFF pages read by OCR): (page number
    /// from 1, byte offset), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page_starts: Vec<(u32, usize)>,
    /// The text is markdown (headings, lists, tables marked), not flat text.
    #[serde(default)]
    pub markdown: bool,
    /// The images to describe, each with its place in `text` (when asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<FoundImage>,
    /// The images not handed on, by reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images_skipped: Vec<(SkipReason, u32)>,
}

/// The largest image decoded for OCR, in bytes of pixels.
const MAX_IMAGE_BYTES: u64 = 96 << 20;

/// Extracts the text of an accepted file under `options`. `Err` refuses the file (an
/// unsafe container); a file that merely cannot be read is `Ok` with `unreadable` set.
pub fn extract(kind: &FileKind, bytes: &[u8], options: &ExtractOptions) -> Result<Extraction, Refusal> {
    let max_chars = options.max_chars;
    match kind.file_type {
        FileType::Image => {
            // A TIFF is shown to a model as PNG pages, so one that cannot be decoded is refused.
            let pages = if kind.family == crate::kinds::Family::Tiff {
                let deadline = std::time::Instant::now() + options.time_limit;
                let pages = crate::tiff_pages::check(bytes, deadline)
                    .map_err(|message| Refusal { code: RefusalCode::UndecodableImage, message })?;
                Some(pages)
            } else {
                None
            };
            let mut extraction = Extraction {
                dimensions: imagesize::blob_size(bytes)
                    .ok()
                    .and_then(|s| Some((u32::try_from(s.width).ok()?, u32::try_from(s.height).ok()?))),
                pages,
                date: dates::exif_created(bytes),
                ..Extraction::default()
            };
            if let Some(ocr) = options.ocr {
                read_image(kind, bytes, options, ocr, &mut extraction);
            }
            if let Some(images) = options.images {
                // The picture itself, after whatever OCR read in it.
                let mut collector = ImageCollector::new(images);
                let offset = extraction.text.as_ref().map_or(0, String::len);
                if kind.family == crate::kinds::Family::Tiff {
                    let _ = crate::tiff_pages::visit_grey_pages(bytes, |_, draw| {
                        if let Ok(page) = draw() {
                            collector.offer_pixels(image::DynamicImage::ImageLuma8(page), offset);
                        }
                        false
                    });
                } else {
                    collector.offer_encoded(bytes, offset);
                }
                (extraction.images, extraction.images_skipped) = collector.finish(offset);
            }
            Ok(extraction)
        }
        FileType::Text => {
            let markup = match kind.extension {
                "xml" | "svg" => Markup::Xml,
                "html" => Markup::Html,
                _ => Markup::Plain,
            };
            let decoded = decode(bytes, markup);
            let mut budget = TextBudget::new(max_chars, options.time_limit);
            if kind.extension == "svg" {
                return Ok(match crate::svg::text_of(&decoded.text) {
                    Ok(words) => {
                        let _ = budget.push(&words);
                        let (text, truncated) = budget.finish();
                        Extraction {
                            text: Some(text),
                            truncated,
                            encoding: Some(decoded.encoding.to_owned()),
                            ..Extraction::default()
                        }
                    }
                    Err(_) => Extraction {
                        unreadable: Some(
                            "svg: the drawing is not well-formed XML, so its words were not read".to_owned(),
                        ),
                        ..Extraction::default()
                    },
                });
            }
            let markdown = options.markdown && crate::kinds::writes_markdown(kind.extension);
            if markdown {
                let written = match markup {
                    Markup::Html => crate::markup::html_to_markdown(&decoded.text, &mut budget),
                    _ => sheets::csv_markdown(&decoded.text, &mut budget),
                };
                if written == Err(crate::budget::Stop::Time) {
                    return Ok(Extraction { unreadable: Some(took_too_long(options)), ..Extraction::default() });
                }
                budget.trim_end();
            } else {
                // A text file's text is the file itself, kept as is (no trimming) up to the budget.
                let _ = budget.push(&decoded.text);
            }
            let (text, truncated) = budget.finish();
            Ok(Extraction {
                text: Some(text),
                truncated,
                encoding: Some(decoded.encoding.to_owned()),
                markdown,
                ..Extraction::default()
            })
        }
        FileType::Archive => read_archive(kind, bytes, options),
        _ => read_document(kind, bytes, options),
    }
}

/// Checks an archive whole; an unsafe or corrupt one is refused, and an accepted one's
/// text is its list of members.
fn read_archive(kind: &FileKind, bytes: &[u8], options: &ExtractOptions) -> Result<Extraction, Refusal> {
    let checked = match kind.extension {
        "zip" => crate::archive::zip::check(bytes, options.limits, &mut |_, _| Ok(())).map(|checked| checked.listing),
        _ => crate::archive::tar::check(bytes, options.limits),
    };
    let listing = checked.map_err(|error| match error {
        ContainerError::Unsafe { code, message } => Refusal { code: RefusalCode::UnsafeContainer(code), message },
        ContainerError::Corrupt(message) => Refusal {
            code: RefusalCode::UnsafeContainer("corrupt_archive"),
            message: format!("the archive is corrupt or truncated: {message}"),
        },
    })?;
    let mut budget = TextBudget::new(options.max_chars, options.time_limit);
    let _ = budget.push(&listing.text());
    let (text, truncated) = budget.finish();
    Ok(Extraction { text: Some(text), truncated, members: Some(listing.members.len() as u64), ..Extraction::default() })
}

/// OCRs an image (a TIFF page by page) into the extraction's text.
fn read_image(kind: &FileKind, bytes: &[u8], options: &ExtractOptions, ocr: OcrOptions, extraction: &mut Extraction) {
    let mut budget = TextBudget::new(options.max_chars, options.time_limit);
    let mut scanner = Scanner::new(ocr, &budget, options.time_limit);
    let mut page_starts = Vec::new();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if kind.family == crate::kinds::Family::Tiff {
            crate::tiff_pages::visit_grey_pages(bytes, |number, draw| {
                page_starts.push((number, budget.len()));
                scanner.page(number, draw, &mut budget).is_ok()
            })
        } else {
            scanner.page(1, || decode_grey(bytes), &mut budget).map_err(|_| String::new())
        }
    }));
    // An image OCR ran out of time on says so; one it found no text in (or could not decode)
    // stays a picture: no text, no note.
    if read.is_err() || scanner.pages_read() == 0 {
        if read.is_ok() && scanner.out_of_time() {
            extraction.unreadable = Some(ocr_out_of_time(options));
        }
        return;
    }
    scanner.note_unread(&mut budget);
    budget.trim_end();
    extraction.ocr_pages = Some(scanner.pages_read());
    extraction.ocr_ms = Some(scanner.milliseconds_spent());
    extraction.ocr_low_confidence_lines = Some(scanner.low_confidence_lines());
    let (text, truncated) = budget.finish();
    extraction.truncated = truncated;
    extraction.ocr_spans = clamp_spans(scanner.into_spans(), text.len());
    extraction.page_starts = page_starts.into_iter().map(|(page, start)| (page, start.min(text.len()))).collect();
    if !text.trim().is_empty() {
        extraction.text = Some(text);
    }
}

/// An image file's first frame in grey, decoded under a pixel-memory limit.
fn decode_grey(bytes: &[u8]) -> Result<image::GrayImage, String> {
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("the image cannot be read: {e}"))?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_IMAGE_BYTES);
    limits.max_image_width = Some(20_000);
    limits.max_image_height = Some(20_000);
    reader.limits(limits);
    Ok(reader.decode().map_err(|e| format!("the image cannot be decoded: {e}"))?.to_luma8())
}

/// Why an image holds no text when OCR ran out of time before reading it: not that it has
/// none.
fn ocr_out_of_time(options: &ExtractOptions) -> String {
    let limit = time_limit_words(options);
    format!(
        "ocr: the image's text was not read: OCR ran out of the {limit} limit before it had read a part of the \
         page (the reader was busy, or the page is dense); upload it again, or as a smaller or sharper image"
    )
}

fn took_too_long(options: &ExtractOptions) -> String {
    format!("reading the file took longer than the {} limit", time_limit_words(options))
}

/// The parse's time limit as a message names it: "20-second" (a limit under whole seconds, as
/// tests set, in milliseconds).
fn time_limit_words(options: &ExtractOptions) -> String {
    let limit = options.time_limit;
    if limit.subsec_millis() == 0 {
        format!("{}-second", limit.as_secs())
    } else {
        format!("{}-millisecond", limit.as_millis())
    }
}

/// Spans cut to the text's final length (trailing blanks are trimmed after reading).
fn clamp_spans(spans: Vec<(usize, usize)>, len: usize) -> Vec<(usize, usize)> {
    spans.into_iter().map(|(start, end)| (start.min(len), end.min(len))).filter(|(start, end)| start < end).collect()
}

fn read_document(kind: &FileKind, bytes: &[u8], options: &ExtractOptions) -> Result<Extraction, Refusal> {
    let mut budget = TextBudget::new(options.max_chars, options.time_limit);
    let mut extraction = Extraction::default();
    let mut scanner = options.ocr.map(|ocr| Scanner::new(ocr, &budget, options.time_limit));
    let mut images = options.images.map(ImageCollector::new);
    // Third-party parsers can panic on hostile input (fuzzing found one in calamine's XLS
    // reader); a panic makes the file unreadable instead of failing the request.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<(), ReadError> {
        match kind.extension {
            "pdf" => crate::pdf::pdf(bytes, &mut budget, options, scanner.as_mut(), images.as_mut()).map(|stats| {
                extraction.pages = Some(stats.pages);
                extraction.date = stats.date;
                extraction.title = stats.title;
                extraction.page_starts = stats.page_starts;
            }),
            "docx" | "pptx" | "odt" | "odp" | "ods" | "xlsx" | "xlsm" | "epub" => {
                Container::open(bytes, options.limits).map_err(ReadError::from).and_then(|mut container| {
                    let read = match kind.extension {
                        "docx" => office::docx(&mut container, &mut budget, options.markdown, images.as_mut()),
                        "pptx" => office::pptx(&mut container, &mut budget, options.markdown, images.as_mut()),
                        "odt" | "odp" => {
                            office::odf_text(&mut container, &mut budget, options.markdown, images.as_mut())
                        }
                        "epub" => crate::epub::epub(&mut container, &mut budget, options.markdown),
                        "ods" => sheets::ods(&mut container, &mut budget, options.markdown)
                            .map(|s| extraction.cells = Some(s.cells)),
                        _ => {
                            sheets::xlsx(bytes, &mut budget, options.markdown).map(|s| extraction.cells = Some(s.cells))
                        }
                    };
                    // A package whose properties cannot be read keeps the upload's day.
                    if read.is_ok() {
                        extraction.date = dates::package_created(&mut container);
                        extraction.title = crate::titles::package_title(&mut container);
                    }
                    read
                })
            }
            "xls" => sheets::xls(bytes, &mut budget, options.markdown).map(|s| extraction.cells = Some(s.cells)),
            "msg" => crate::msg::msg(bytes, &mut budget).map(|message| {
                extraction.date = message.date;
                extraction.title = message.subject;
            }),
            "doc" => crate::doc::doc(bytes, &mut budget, options.markdown),
            // An RTF file's text, in the code page it names (Windows-1252 unless it says).
            "rtf" => budget.push(&crate::markup::rtf_to_text(bytes, encoding_rs::WINDOWS_1252)).or(Ok(())),
            other => Err(ReadError::Unreadable(format!(
                "text extraction for .{other} files is not available in this version"
            ))),
        }
    }));
    let outcome = read.unwrap_or_else(|_| Err(ReadError::Unreadable("the parser failed on this file".to_owned())));
    match outcome {
        Ok(()) => {
            budget.trim_end();
            let (text, truncated) = budget.finish();
            extraction.truncated = truncated;
            for start in &mut extraction.page_starts {
                start.1 = start.1.min(text.len());
            }
            if let Some(scanner) = scanner.filter(|s| s.pages_read() > 0) {
                extraction.ocr_pages = Some(scanner.pages_read());
                extraction.ocr_ms = Some(scanner.milliseconds_spent());
                extraction.ocr_low_confidence_lines = Some(scanner.low_confidence_lines());
                extraction.ocr_spans = clamp_spans(scanner.into_spans(), text.len());
            }
            if let Some(images) = images {
                (extraction.images, extraction.images_skipped) = images.finish(text.len());
            }
            extraction.text = Some(text);
            // The readers that write markdown (the list `/rag/supported-formats` shows).
            extraction.markdown = options.markdown && crate::kinds::writes_markdown(kind.extension);
        }
        Err(ReadError::Unsafe { code, message }) => {
            return Err(Refusal { code: RefusalCode::UnsafeContainer(code), message });
        }
        Err(ReadError::Unreadable(reason)) => extraction.unreadable = Some(reason),
        Err(ReadError::Time) => extraction.unreadable = Some(took_too_long(options)),
    }
    Ok(extraction)
}

/// The first three lines of `text`, at most 240 characters; `None` when there is nothing
/// to show.
pub fn preview(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.trim_start().lines().take(3).collect();
    let joined = lines.join("\n");
    let cut: String = joined.chars().take(PREVIEW_MAX_CHARS).collect();
    let cut = cut.trim_end();
    if cut.is_empty() { None } else { Some(cut.to_owned()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::kind_for_filename;

    fn kind(name: &str) -> &'static FileKind {
        kind_for_filename(name).expect("allowed")
    }

    #[test]
    fn preview_is_three_lines_and_240_characters_at_most() {
        assert_eq!(preview("\n\na\nb\nc\nd").as_deref(), Some("a\nb\nc"));
        assert_eq!(preview(&"x".repeat(1000)).map(|p| p.chars().count()), Some(240));
        assert_eq!(preview("  \n \n"), None);
    }

    #[test]
    fn nul_characters_never_survive_and_the_budget_marks_its_cut() {
        let extraction = extract(kind("a.txt"), b"ab\0cdef", &ExtractOptions::new(4)).expect("text");
        let text = extraction.text.expect("text");
        assert!(text.starts_with("abcd\n\n[The rest of this document was left out"));
        assert!(extraction.truncated);
        let whole = extract(kind("a.txt"), b"ab\0c", &ExtractOptions::new(4)).expect("text");
        assert_eq!(whole.text.as_deref(), Some("abc"));
        assert!(!whole.truncated);
    }

    #[test]
    fn images_have_dimensions_and_no_text() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x01\x00\0\0\0\x80\x08\x06\0\0\0";
        let extraction = extract(kind("a.png"), png, &ExtractOptions::new(100)).expect("image");
        assert_eq!(extraction.text, None);
        assert_eq!(extraction.dimensions, Some((256, 128)));
        assert_eq!(extraction.unreadable, None);
    }
}
