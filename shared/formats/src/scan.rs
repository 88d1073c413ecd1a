//! OCR of scanned pages within a file's budgets: at most the pages OCR may read, each
//! started only when the time left can hold it, each page's text marked as OCR's, and the
//! pages not read named at the end of the text.

use crate::budget::{Stop, TextBudget};
use image::GrayImage;
use sluice_ocr::OcrError;
use std::time::{Duration, Instant};

/// How a file is OCRed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OcrOptions {
    /// The resolution a PDF page is rendered at (72–400).
    pub dpi: u32,
    /// The most pages OCRed from one file; later scanned pages are named as not read.
    pub max_pages: u32,
    /// The characters pages are read with: the Latin ones unless a language is Chinese.
    #[serde(flatten)]
    pub alphabet: sluice_ocr::Alphabet,
}

/// The share of the time limit kept back from OCR for the rest of the parse.
const RESERVE: f32 = 0.15;
/// A page is not started with less time left than this, whatever earlier pages took.
const MIN_PAGE_TIME: Duration = Duration::from_millis(300);

/// Why a scanned page went unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unread {
    Cap,
    Time,
    Failed,
}

/// OCR's work on one file.
#[derive(Debug)]
pub struct Scanner {
    options: OcrOptions,
    deadline: Instant,
    slowest: Duration,
    read: u32,
    unread: Vec<(u32, Unread)>,
    /// Pages the time ran out in, their beginning read.
    read_in_part: Vec<u32>,
    spans: Vec<(usize, usize)>,
    /// Lines kept though the recognizer read them with low confidence.
    low_confidence_lines: u32,
    out_of_time: bool,
    /// Pages not reached at all once OCR had spent the file's time: (first, last).
    stopped: Option<(u32, u32)>,
    /// Time spent drawing and reading pages.
    spent: Duration,
}

impl Scanner {
    /// A scanner spending the budget's time, less a reserve for what follows the reading.
    pub fn new(options: OcrOptions, budget: &TextBudget, time_limit: Duration) -> Self {
        Self {
            options,
            deadline: budget.deadline() - time_limit.mul_f32(RESERVE),
            slowest: Duration::ZERO,
            read: 0,
            unread: Vec::new(),
            read_in_part: Vec::new(),
            spans: Vec::new(),
            low_confidence_lines: 0,
            out_of_time: false,
            stopped: None,
            spent: Duration::ZERO,
        }
    }

    pub fn dpi(&self) -> u32 {
        self.options.dpi.clamp(72, 400)
    }

    /// Pages read by OCR.
    pub fn pages_read(&self) -> u32 {
        self.read
    }

    /// Lines read with low confidence, over every page read: many say the scan is poor.
    pub fn low_confidence_lines(&self) -> u32 {
        self.low_confidence_lines
    }

    /// Time spent drawing and reading pages, in milliseconds: what OCR cost the file.
    pub fn milliseconds_spent(&self) -> u64 {
        u64::try_from(self.spent.as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether OCR has run out of its time: the file's deadline passing then is OCR's doing,
    /// and what was read is kept.
    pub fn out_of_time(&self) -> bool {
        self.out_of_time
    }

    /// Pages `first..=last` were not reached: the time ran out while OCR read earlier ones.
    pub fn stop(&mut self, first: u32, last: u32) {
        self.stopped = (first <= last).then_some((first, last));
    }

    /// Byte spans of the budget's text that OCR read.
    pub fn into_spans(self) -> Vec<(usize, usize)> {
        self.spans
    }

    /// OCRs page `number`, drawn by `draw`, into `budget`; a page that is not read is
    /// remembered for [`Scanner::note_unread`]. `Err` only as the budget itself stops.
    pub fn page(
        &mut self,
        number: u32,
        draw: impl FnOnce() -> Result<GrayImage, String>,
        budget: &mut TextBudget,
    ) -> Result<(), Stop> {
        if self.read >= self.options.max_pages {
            self.unread.push((number, Unread::Cap));
            return Ok(());
        }
        let started = Instant::now();
        // A page is started only if the slowest page so far would still finish.
        if self.out_of_time || started + self.slowest.max(MIN_PAGE_TIME) > self.deadline {
            self.out_of_time = true;
            self.unread.push((number, Unread::Time));
            return Ok(());
        }
        let read = draw().map_err(|_| OcrError::Engine).and_then(|image| {
            let engine = sluice_ocr::engine()?;
            engine.read(&image, self.options.alphabet, self.deadline)
        });
        self.slowest = self.slowest.max(started.elapsed());
        self.spent += started.elapsed();
        match read {
            Ok(page) => {
                self.read += 1;
                if page.unfinished {
                    self.out_of_time = true;
                    self.read_in_part.push(number);
                }
                self.low_confidence_lines += u32::try_from(page.low_confidence_lines).unwrap_or(u32::MAX);
                let start = budget.len();
                let pushed = budget.push(page.text.trim_end());
                if budget.len() > start {
                    self.spans.push((start, budget.len()));
                }
                pushed.and_then(|()| budget.push("\n\n"))
            }
            Err(OcrError::Time) => {
                self.out_of_time = true;
                self.unread.push((number, Unread::Time));
                Ok(())
            }
            Err(error) => {
                if let OcrError::Unavailable(message) = error {
                    eprintln!("{message}");
                }
                self.unread.push((number, Unread::Failed));
                Ok(())
            }
        }
    }

    /// Ends the text with a line naming the scanned pages that were not read, or read in part,
    /// and why.
    pub fn note_unread(&self, budget: &mut TextBudget) {
        if !self.read_in_part.is_empty() {
            let pages = ranges(&self.read_in_part);
            let _ = budget.push(&format!("[Scanned pages read in part: {pages} (the time limit ran out).]\n"));
        }
        let reasons = [
            (Unread::Cap, format!("OCR reads at most {} pages of a file here", self.options.max_pages)),
            (Unread::Time, "the time limit ran out".to_owned()),
            (Unread::Failed, "the OCR engine could not read them".to_owned()),
        ];
        for (reason, why) in reasons {
            let pages: Vec<u32> = self.unread.iter().filter(|u| u.1 == reason).map(|u| u.0).collect();
            if !pages.is_empty() {
                let _ = budget.push(&format!("[Scanned pages not read: {} ({why}).]\n", ranges(&pages)));
            }
        }
        if let Some((first, last)) = self.stopped {
            let pages =
                if first == last { format!("Page {first} was") } else { format!("Pages {first}–{last} were") };
            let _ = budget.push(&format!("[{pages} not read: the time limit ran out.]\n"));
        }
    }
}

/// The grey value of an RGB pixel (ITU-R BT.601 weights), as OCR reads colour pages.
pub(crate) fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((u32::from(r) * 299 + u32::from(g) * 587 + u32::from(b) * 114) / 1000) as u8
}

/// Page numbers as ranges: `1–3, 7`.
fn ranges(pages: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let mut j = i;
        while j + 1 < pages.len() && pages[j + 1] == pages[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { pages[i].to_string() } else { format!("{}–{}", pages[i], pages[j]) });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_named_as_ranges() {
        assert_eq!(ranges(&[1, 2, 3, 7, 9, 10]), "1–3, 7, 9–10");
        assert_eq!(ranges(&[4]), "4");
    }

    #[test]
    fn pages_past_the_cap_are_named_without_being_drawn() {
        let mut budget = TextBudget::new(1000, Duration::from_secs(5));
        let mut scanner = Scanner::new(
            OcrOptions { dpi: 150, max_pages: 0, alphabet: sluice_ocr::Alphabet::LATIN },
            &budget,
            Duration::from_secs(5),
        );
        for number in 1..=3 {
            scanner.page(number, || panic!("a page past the cap is not drawn"), &mut budget).expect("skipped");
        }
        scanner.note_unread(&mut budget);
        let (text, _) = budget.finish();
        assert_eq!(text, "[Scanned pages not read: 1–3 (OCR reads at most 0 pages of a file here).]\n");
    }

    #[test]
    fn a_page_is_not_started_without_the_time_for_it() {
        let mut budget = TextBudget::new(1000, Duration::from_millis(100));
        let mut scanner = Scanner::new(
            OcrOptions { dpi: 150, max_pages: 10, alphabet: sluice_ocr::Alphabet::LATIN },
            &budget,
            Duration::from_millis(100),
        );
        scanner.page(1, || panic!("no time for this page"), &mut budget).expect("skipped");
        scanner.note_unread(&mut budget);
        assert!(budget.finish().0.contains("1 (the time limit ran out)"));
    }
}
