//! What a parse may spend and what it is asked to do: the options every reader takes.

use crate::images::ImageOptions;
use crate::limits::ContainerLimits;
use crate::scan::OcrOptions;
use std::time::Duration;

/// The most pages read from one document.
pub const MAX_PAGES: u32 = 2000;

/// Default parse time limit: inside the API's 29-second window with room to store.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(20);

/// How much a parse may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExtractOptions {
    /// `CHAT_PARSED_TEXT_MAX_CHARS`.
    pub max_chars: usize,
    /// Past this the file is unreadable and the parse stops.
    pub time_limit: Duration,
    /// The archive limits, applied to office containers too.
    pub limits: ContainerLimits,
    /// The most pages of a PDF read; the rest are named as not read.
    pub max_pages: u32,
    /// OCR of scanned pages and images; `None` leaves them without text.
    pub ocr: Option<OcrOptions>,
    /// Write the formats that have structure (PDF, DOC, DOCX, ODT, HTML) as markdown; the others
    /// are written as text either way, and `Extraction::markdown` says which it was.
    #[serde(default)]
    pub markdown: bool,
    /// Gather the images worth describing (a collection that describes them).
    #[serde(default)]
    pub images: Option<ImageOptions>,
}

impl ExtractOptions {
    pub fn new(max_chars: usize) -> Self {
        Self {
            max_chars,
            time_limit: DEFAULT_TIME_LIMIT,
            limits: ContainerLimits::default(),
            max_pages: MAX_PAGES,
            ocr: None,
            markdown: false,
            images: None,
        }
    }

    pub fn with_images(mut self, images: Option<ImageOptions>) -> Self {
        self.images = images;
        self
    }

    pub fn with_markdown(mut self, markdown: bool) -> Self {
        self.markdown = markdown;
        self
    }

    pub fn with_ocr(mut self, ocr: Option<OcrOptions>) -> Self {
        self.ocr = ocr;
        self
    }

    pub fn with_max_pages(mut self, max_pages: u32) -> Self {
        self.max_pages = max_pages;
        self
    }
}
