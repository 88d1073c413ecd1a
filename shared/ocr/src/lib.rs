//! Text from page images.
//!
//! The engine is two of PaddleOCR's models as the RapidOCR wheels ship them — PP-OCRv4's
//! text-line detector (DB, `rapidocr-onnxruntime` 1.4.4) and PP-OCRv6's small line
//! recognizer (CTC, `rapidocr` 3.10.0), its convolutions in int8 and, for the Latin-script
//! languages, its classifier cut to that script (`infra/layers/ocr/recognizer_int8.py`) — run
//! by ONNX Runtime, whose
//! `libonnxruntime.so` (the `onnxruntime` wheel's) is bound at run time like PDFium. Why this
//! and not Tesseract: on real and generated scans, and in every Latin-script, Chinese and
//! Japanese language offered, it reads more accurately — though two to three times slower
//! than Tesseract run with one thread (BENCHMARKS.md). Languages it does not read (Russian,
//! Ukrainian, Greek, Korean) are read by Tesseract (`tesseract`), also bound at run time.
//!
//! The library and the detector are loaded once per process, on first use (a recognizer when
//! a page first needs its [`Alphabet`]), from
//! `ORT_DYLIB_PATH` and `SLUICE_OCR_MODEL_DIR`. A page is read in two passes: the detector
//! finds text lines as rotated rectangles (so a skewed scan's lines are cut straight), and the
//! recognizer reads the lines in reading order, a window of them at a time, checking the
//! deadline between batches; a page the deadline cuts short keeps the windows read whole.
//! Memory is bounded by one page: the detector sees the page at most [`MAX_SIDE`] pixels on a
//! side.

mod geometry;
pub mod layout;
mod letters;
mod tesseract;

use fast_image_resize::images::ImageRef;
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
pub use geometry::RotatedRect;
use image::GrayImage;
use letters::LetterClasses;
use ort::session::Session;
use ort::value::Tensor;
use sluice_onnx::ort;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
pub use tesseract::LANGUAGES as TESSERACT_LANGUAGES;

/// The longest side, in pixels, the detector sees; a larger page is scaled down to it.
pub const MAX_SIDE: u32 = 2000;
/// A smaller image is scaled up until its longer side is this long. Only small images are:
/// the detector run above a scan's own resolution draws boxes that lose word spaces.
const MIN_LONG_SIDE: u32 = 736;
const DETECTOR_FILE: &str = "ch_PP-OCRv4_det_infer.onnx";
/// The recognizer as the wheel ships it; with its convolutions in int8 (written from it by
/// `infra/layers/ocr/recognizer_int8.py`); and that one with its classifier cut to the Latin
/// script — a real page 1.5 times as fast on one core as with the wheel's (BENCHMARKS.md).
const RECOGNIZER_FP32_FILE: &str = "PP-OCRv6_rec_small.onnx";
const RECOGNIZER_INT8_FILE: &str = "PP-OCRv6_rec_small-int8.onnx";
const RECOGNIZER_INT8_LATIN_FILE: &str = "PP-OCRv6_rec_small-int8-latin.onnx";
/// Which recognizers read: `int8` (the default) or `fp32` (the wheel's own model, every
/// character, for measuring what int8 costs).
pub const PRECISION_VARIABLE: &str = "SLUICE_OCR_PRECISION";
/// The detector's probability above which a pixel is text.
const PIXEL_THRESHOLD: f32 = 0.3;
/// The mean probability a detected region needs to count as a line.
const BOX_THRESHOLD: f32 = 0.5;
/// How far a detected region is grown back (the detector predicts shrunken lines).
const UNCLIP_RATIO: f32 = 1.6;
/// A recognized line's mean character confidence below which it is dropped as noise.
const TEXT_SCORE: f32 = 0.5;
/// A kept line's mean character confidence below which it is counted as read poorly.
/// PP-OCRv6 reads a clean line at 0.97–1.0 and a blurred one it misreads ("Oredging" for
/// "Dredging") at 0.9–0.95; on the clean real-document scans 7 lines in 771 fall below.
const LOW_CONFIDENCE: f32 = 0.95;
/// The widest piece of a line the recognizer is given, in multiples of its height: longer
/// lines are cut at word gaps, so no piece is squeezed past [`MAX_LINE_RATIO`]. (Cutting
/// at 24 heights cost the one-column LaTeX pages a letter at some cuts: CER 0.47 % against
/// 0.37 % at 300 dpi.)
const MAX_PIECE_RATIO: f32 = 40.0;
const LINE_HEIGHT: u32 = 48;
const MIN_LINE_WIDTH: u32 = 320;
/// The longest line the recognizer is given, in multiples of its height.
const MAX_LINE_RATIO: u32 = 40;
/// The most lines the recognizer reads at once.
const BATCH: usize = 8;
/// Pieces of lines read as one window, in reading order: a page the time cuts short keeps the
/// windows read whole. Within a window the pieces are batched by width; a window of 16 is about
/// a column's third on a dense page, and pads its batches little more than the whole page did.
const WINDOW: usize = 16;
/// The most recognizer columns (pixels of width at 48 high) read at once: its memory grows
/// with them — measured, about 105 MiB loaded, 190 MiB for one full-width line, 625 MiB for
/// eight — so full-width lines are read two at a time and short ones eight.
const BATCH_COLUMNS: u32 = 4 * 960;
/// The most pixels the detector sees at once; a larger page is read in bands.
const BAND_PIXELS: u32 = 640 * 832;
const MIN_BAND_ROWS: u32 = 256;
/// Rows a band shares with each neighbour, so a line across a band's edge is whole in one.
const BAND_OVERLAP: u32 = 64;
/// The smallest gap, in recognizer steps, read as a word space.
const MIN_WORD_GAP: usize = 4;
/// A gap this many times the line's usual letter gap is a word space too (letters read
/// larger stand further apart within a word).
const WORD_GAP_RATIO: f32 = 1.5;
/// A page whose median detected line is less high than this, in pixels, is small type: a
/// 10-point line at 150 dpi is about 31 (with the detector's padding), at 300 dpi about 52.
const SMALL_LINE_HEIGHT: f32 = 40.0;
/// The largest page, in pixels, small type is read from at twice its size (a Letter page at
/// 150 dpi doubled is 8.4 million).
const MAX_UPSCALED_PIXELS: u64 = 24_000_000;
/// What a line keeps above and below its ink for the recognizer, in ink heights.
const INK_MARGIN: f32 = 0.33;
/// A space probability between two letters above which a space is read, though blank won.
const SPACE_SEEN: f32 = 0.1;
/// The space probability a gap of just the word threshold needs to be read as a space: in a
/// serif face letters stand that far apart inside a word (`un der`, `com e`, `Maß nahmen` on
/// the multilingual scans: 17 of 18 such gaps with no space seen at all were inside a word).
const SPACE_HINTED: f32 = 0.01;
/// The most lines read from one page (a page of noise detects thousands).
const MAX_LINES: usize = 2000;

/// Why a page was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OcrError {
    /// The runtime or the models are missing: the deployment's failure.
    #[error("{0}")]
    Unavailable(String),
    /// The deadline passed before the page was read.
    #[error("the page could not be read within the time limit")]
    Time,
    /// The runtime failed on this page.
    #[error("the OCR engine failed on this page")]
    Engine,
}

/// What one page yielded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PageText {
    /// Lines in reading order, a blank line between paragraphs.
    pub text: String,
    /// Lines recognized.
    pub lines: usize,
    /// Lines kept though read with low confidence (a poor scan shows many).
    pub low_confidence_lines: usize,
    /// The time ran out before every line was read: the text is the page's beginning.
    pub unfinished: bool,
}

/// Which of the recognizer's characters a page is read with, as far as the models tell
/// scripts apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Script {
    /// Latin with its diacritics, digits, punctuation, Greek and symbols: every offered
    /// language but Chinese and Japanese. Read by the recognizer cut to these characters, so a
    /// Chinese look-alike is never read in a Latin word.
    #[default]
    Latin,
    /// Every character the recognizer knows, Chinese and Japanese kana with the Latin ones.
    All,
}

/// The characters a page is read with: the union of its languages' alphabets, as far as the
/// models tell them apart, and the letters of those languages the recognizer reads as a
/// look-alike (see `letters`).
///
/// On the wire (inside the extraction options, flattened) the script keeps the name and string
/// it had before look-alikes joined it, `"alphabet": "latin"`, and the look-alikes are a field
/// of their own left out when there are none: a caller and an extract function of neighbouring
/// releases read each other's options (a deploy updates them one at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Alphabet {
    #[serde(rename = "alphabet", default)]
    pub script: Script,
    /// Which of the known look-alikes the page's languages read their own letter for; bits
    /// are only ever added (see `letters`), so an older release's mask means the same.
    #[serde(default, skip_serializing_if = "none")]
    look_alikes: u8,
    /// The languages Tesseract reads the page in (see `tesseract`); none: PaddleOCR reads it.
    #[serde(default, skip_serializing_if = "none")]
    tesseract: u8,
}

fn none(mask: &u8) -> bool {
    *mask == 0
}

impl Alphabet {
    /// The Latin script, no language's letters favoured.
    pub const LATIN: Self = Self { script: Script::Latin, look_alikes: 0, tesseract: 0 };
    /// Every character, no language's letters favoured.
    pub const ALL: Self = Self { script: Script::All, look_alikes: 0, tesseract: 0 };

    /// The alphabet for Tesseract language codes: every character when one is Chinese or
    /// Japanese, and the letters of each the recognizer reads as a look-alike; read by
    /// Tesseract when one is a language only it reads here (Russian, Ukrainian, Greek, Korean).
    pub fn for_languages<S: AsRef<str>>(languages: &[S]) -> Self {
        let cjk = |code: &str| code.starts_with("chi_") || code == "jpn";
        let script = if languages.iter().any(|code| cjk(code.as_ref())) { Script::All } else { Script::Latin };
        Self { script, look_alikes: letters::look_alikes_for(languages), tesseract: tesseract::mask_for(languages) }
    }

    /// Whether Tesseract reads pages of this alphabet.
    pub fn by_tesseract(&self) -> bool {
        self.tesseract != 0
    }
}

/// A loaded line recognizer and the characters its outputs name.
struct Recognizer {
    session: Mutex<Session>,
    /// Index `i` of the recognizer's output is `characters[i]`; index 0 is CTC's blank.
    characters: Vec<char>,
    /// The classes of characters read as a look-alike: quotes, apostrophes, letters.
    letters: LetterClasses,
}

/// The loaded runtime and models: the detector at once, each recognizer when a page first
/// needs it (a worker reads one file, so usually one is ever loaded).
pub struct Engine {
    detector: Mutex<Session>,
    latin: OnceLock<Result<Recognizer, String>>,
    all: OnceLock<Result<Recognizer, String>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("latin", &self.latin.get().is_some())
            .field("all", &self.all.get().is_some())
            .finish_non_exhaustive()
    }
}

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();

/// The process's engine, loaded on first use.
pub fn engine() -> Result<&'static Engine, OcrError> {
    ENGINE.get_or_init(load).as_ref().map_err(|message| OcrError::Unavailable(message.clone()))
}

/// Checks that ONNX Runtime loads and the model files are there, without building the
/// sessions: a function whose workers OCR calls this at start and refuses to serve without
/// it, so a missing layer fails the deployment, not each scan.
pub fn ensure_installed() -> Result<(), String> {
    runtime()?;
    let recognizers = [recognizer_file(Script::Latin)?, recognizer_file(Script::All)?];
    for file in [DETECTOR_FILE].into_iter().chain(recognizers) {
        let path = model_dir().join(file);
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Err(unavailable(&format!("{} is missing", path.display()), &"no such model file"));
        }
    }
    tesseract::ensure_installed()
}

/// The recognizer's file for `script` at the precision `SLUICE_OCR_PRECISION` names.
fn recognizer_file(script: Script) -> Result<&'static str, String> {
    recognizer_file_for(script, std::env::var(PRECISION_VARIABLE).ok().as_deref())
}

fn recognizer_file_for(script: Script, precision: Option<&str>) -> Result<&'static str, String> {
    match (precision.map(|p| p.trim().to_ascii_lowercase()).as_deref(), script) {
        (None | Some("int8"), Script::Latin) => Ok(RECOGNIZER_INT8_LATIN_FILE),
        (None | Some("int8"), Script::All) => Ok(RECOGNIZER_INT8_FILE),
        (Some("fp32"), _) => Ok(RECOGNIZER_FP32_FILE),
        (Some(other), _) => {
            Err(format!("OCR is not available: {PRECISION_VARIABLE} is {other:?}; it must be int8 or fp32"))
        }
    }
}

fn model_dir() -> PathBuf {
    PathBuf::from(std::env::var("SLUICE_OCR_MODEL_DIR").unwrap_or_else(|_| "models".to_owned()))
}

/// What to check when OCR cannot start.
const CHECK: &str = "check the ONNX Runtime and OCR layers, ORT_DYLIB_PATH and SLUICE_OCR_MODEL_DIR";

fn unavailable(what: &str, error: &dyn std::fmt::Display) -> String {
    format!("OCR is not available: {what} ({error}); {CHECK}")
}

/// ONNX Runtime, shared with every other model of the process.
fn runtime() -> Result<(), String> {
    sluice_onnx::runtime().map(|_| ()).map_err(|reason| format!("OCR is not available: {reason}; {CHECK}"))
}

/// A session for the model file `file` of the models' folder.
fn session(file: &str) -> Result<Session, String> {
    let path = model_dir().join(file);
    let bytes = std::fs::read(&path).map_err(|e| unavailable(&format!("{} cannot be read", path.display()), &e))?;
    sluice_onnx::session(&bytes, sluice_onnx::threads()).map_err(|e| unavailable(&path.display().to_string(), &e))
}

fn load() -> Result<Engine, String> {
    runtime()?;
    // The recognizers' files are checked now, so a bad precision fails the first page.
    recognizer_file(Script::Latin)?;
    let detector = session(DETECTOR_FILE)?;
    Ok(Engine { detector: Mutex::new(detector), latin: OnceLock::new(), all: OnceLock::new() })
}

impl Recognizer {
    fn load(script: Script) -> Result<Self, String> {
        let file = recognizer_file(script)?;
        let session = session(file)?;
        // The recognizer carries its dictionary, one character a line; PaddleOCR appends a space.
        let dictionary = session
            .metadata()
            .ok()
            .and_then(|metadata| metadata.custom("character"))
            .ok_or_else(|| unavailable("the recognition model carries no dictionary", &file))?;
        let mut characters = vec!['\0'];
        characters.extend(dictionary.lines().filter_map(|line| line.chars().next()));
        characters.push(' ');
        let letters = LetterClasses::new(&characters);
        Ok(Self { session: Mutex::new(session), characters, letters })
    }
}

impl Engine {
    /// Reads one page with `alphabet`'s recognizer. When `deadline` passes first, what was read is kept (the page's
    /// beginning, `unfinished`); `Err(Time)` when nothing was.
    pub fn read(&self, page: &GrayImage, alphabet: Alphabet, deadline: Instant) -> Result<PageText, OcrError> {
        self.read_until(page, alphabet, |_| Instant::now() > deadline)
    }

    /// The recognizer for `script`, loaded on first use.
    fn recognizer(&self, script: Script) -> Result<&Recognizer, OcrError> {
        let slot = match script {
            Script::Latin => &self.latin,
            Script::All => &self.all,
        };
        slot.get_or_init(|| Recognizer::load(script)).as_ref().map_err(|message| OcrError::Unavailable(message.clone()))
    }

    /// Reads one page, asking `stop` (with the windows of lines read so far; the lines, on a
    /// page Tesseract reads) before each batch of lines whether to stop there. The lines are
    /// read in reading order, [`WINDOW`] pieces at a time, so a page stopped early keeps its
    /// beginning: the lines of every window read whole. `Err(Time)` when stopped before a
    /// window was read.
    pub fn read_until(
        &self,
        page: &GrayImage,
        alphabet: Alphabet,
        mut stop: impl FnMut(usize) -> bool,
    ) -> Result<PageText, OcrError> {
        if page.width() < 8 || page.height() < 8 {
            return Ok(PageText::default());
        }
        if alphabet.by_tesseract() {
            return tesseract::read(page, alphabet.tesseract, &mut stop);
        }
        let recognizer = self.recognizer(alphabet.script)?;
        let ink = imageproc::contrast::otsu_level(page);
        let detected = self.detect(page)?;
        // Small type is read from the page drawn twice as large (Catmull-Rom): sampling a
        // line from it keeps narrow letters apart where sampling the scan itself blurs them.
        let upscaled;
        let (page, detected) = match small_type_upscale(page, &detected)? {
            Some(larger) => {
                upscaled = larger;
                (&upscaled, detected.into_iter().map(|l| l.scaled(2.0, 2.0)).collect())
            }
            None => (page, detected),
        };
        let mut lines = layout::split_at_column_gaps(page, detected, ink);
        lines.truncate(MAX_LINES);
        // The lines in reading order, as the text will have them, so the first read are the
        // page's beginning.
        let ordered = layout::in_reading_order(
            lines.iter().copied().enumerate().map(|(index, line)| (line, index)).collect(),
            layout::MIN_COLUMN_WIDTH,
        );
        // Each line in pieces the recognizer reads at its scale: (line, piece).
        let pieces: Vec<(usize, RotatedRect)> = ordered
            .into_iter()
            .flat_map(|row| row.lines.into_iter().map(|(_, index)| index))
            .flat_map(|index| cut_at_word_gaps(page, &lines[index], ink).into_iter().map(move |piece| (index, piece)))
            .collect();
        // Each piece fitted to the rows its ink fills: small type fills the recognizer's 48
        // pixels as its training text did, instead of the detector's padding.
        let fitted: Vec<RotatedRect> =
            pieces.iter().map(|(_, piece)| geometry::fit_to_ink(page, piece, ink, INK_MARGIN)).collect();
        let mut read: Vec<Option<ReadPiece>> = vec![None; pieces.len()];
        let mut windows_read = 0;
        'windows: for window in (0..pieces.len()).collect::<Vec<_>>().chunks(WINDOW) {
            // Within a window, pieces of like width share a batch, so little of it is padding.
            let mut order = window.to_vec();
            order.sort_by(|&a, &b| fitted[a].aspect().total_cmp(&fitted[b].aspect()));
            for batch in batches(&order, |i| recognizer_width(&fitted[i])) {
                if stop(windows_read) {
                    break 'windows;
                }
                let texts = recognizer.recognize(page, batch.iter().map(|&i| &fitted[i]), alphabet.look_alikes)?;
                for (&i, text) in batch.iter().zip(texts) {
                    read[i] = text;
                }
            }
            windows_read += 1;
        }
        let pieces_read = (windows_read * WINDOW).min(pieces.len());
        if pieces_read == 0 && !pieces.is_empty() {
            return Err(OcrError::Time);
        }
        let mut shares: Vec<f32> =
            read.iter().flatten().flat_map(|piece| piece.apostrophe_shares.iter().copied()).collect();
        if letters::typographic_apostrophes(&mut shares) {
            for piece in read.iter_mut().flatten() {
                piece.text = piece.text.replace('\'', "’");
            }
        }
        // A line's pieces joined in order; it is read poorly when a piece is. A line cut by
        // the stop (its first pieces read, not its last) is left out whole.
        let mut per_line: Vec<(Vec<String>, bool)> = vec![(Vec::new(), false); lines.len()];
        let mut whole = vec![true; lines.len()];
        for (position, ((index, _), piece)) in pieces.iter().zip(read).enumerate() {
            if position >= pieces_read {
                whole[*index] = false;
            } else if let Some(piece) = piece {
                per_line[*index].0.push(piece.text);
                per_line[*index].1 |= piece.mean < LOW_CONFIDENCE;
            }
        }
        // Lines read (a line read as noise is dropped), and lines not read, which keep their
        // place in the page's layout.
        let laid_out: Vec<(RotatedRect, Option<String>, bool)> = lines
            .iter()
            .zip(per_line)
            .zip(whole)
            .filter(|((_, (texts, _)), whole)| !*whole || !texts.is_empty())
            .map(|((line, (texts, poor)), whole)| (*line, whole.then(|| texts.join(" ")), poor))
            .collect();
        let low_confidence_lines = laid_out.iter().filter(|(_, text, poor)| text.is_some() && *poor).count();
        let count = laid_out.iter().filter(|(_, text, _)| text.is_some()).count();
        let text = layout::reading_order_of_some(laid_out.into_iter().map(|(rect, text, _)| (rect, text)).collect());
        Ok(PageText { text, lines: count, low_confidence_lines, unfinished: pieces_read < pieces.len() })
    }

    /// Text lines on the page, in page coordinates.
    fn detect(&self, page: &GrayImage) -> Result<Vec<RotatedRect>, OcrError> {
        let (width, height) = detector_size(page.width(), page.height());
        let scaled = resized(page, width, height, FilterType::Bilinear)?;
        let mut probabilities = vec![0f32; (width * height) as usize];
        for band in bands(width, height) {
            self.detect_band(&scaled, band, &mut probabilities)?;
        }
        drop(scaled);
        let scale = (page.width() as f32 / width as f32, page.height() as f32 / height as f32);
        Ok(geometry::text_regions(&probabilities, width, height, PIXEL_THRESHOLD, BOX_THRESHOLD, UNCLIP_RATIO)
            .into_iter()
            .map(|region| region.scaled(scale.0, scale.1))
            .filter(|region| region.height >= 4.0 && region.width >= 4.0)
            .collect())
    }

    /// Runs the detector on rows `band.0..band.1` of `scaled`, keeping its answer for rows
    /// `band.2..band.3` (the band less the overlap its neighbours answer for).
    fn detect_band(
        &self,
        scaled: &GrayImage,
        (from, to, keep_from, keep_to): (u32, u32, u32, u32),
        probabilities: &mut [f32],
    ) -> Result<(), OcrError> {
        let width = scaled.width() as usize;
        let rows = (to - from) as usize;
        let plane = width * rows;
        let mut input = vec![0f32; 3 * plane];
        let pixels = &scaled.as_raw()[from as usize * width..to as usize * width];
        for (i, pixel) in pixels.iter().enumerate() {
            let value = f32::from(*pixel) / 127.5 - 1.0;
            input[i] = value;
            input[plane + i] = value;
            input[2 * plane + i] = value;
        }
        let tensor = Tensor::from_array(([1usize, 3, rows, width], input)).map_err(engine_failed)?;
        let mut detector = self.detector.lock().map_err(|_| OcrError::Engine)?;
        let outputs = detector.run(ort::inputs![tensor]).map_err(engine_failed)?;
        let (_, band) = outputs[0].try_extract_tensor::<f32>().map_err(engine_failed)?;
        if band.len() != plane {
            return Err(OcrError::Engine);
        }
        let (keep_from, keep_to) = (keep_from as usize, keep_to as usize);
        let kept = &band[(keep_from - from as usize) * width..(keep_to - from as usize) * width];
        probabilities[keep_from * width..keep_to * width].copy_from_slice(kept);
        Ok(())
    }
}

impl Recognizer {
    /// Each line as read, or `None` for a line read with too little confidence (noise).
    fn recognize<'a>(
        &self,
        page: &GrayImage,
        lines: impl ExactSizeIterator<Item = &'a RotatedRect> + Clone,
        look_alikes: u8,
    ) -> Result<Vec<Option<ReadPiece>>, OcrError> {
        let count = lines.len();
        let width = lines.clone().map(recognizer_width).max().unwrap_or(MIN_LINE_WIDTH);
        let plane = (LINE_HEIGHT * width) as usize;
        // Padding is zero after normalisation (mid grey), as PaddleOCR pads.
        let mut input = vec![0f32; count * 3 * plane];
        for (n, line) in lines.enumerate() {
            let line_width = ((LINE_HEIGHT as f32 * line.aspect()).ceil() as u32).clamp(1, width);
            let base = n * 3 * plane;
            geometry::sample_line(page, line, line_width, LINE_HEIGHT, |x, y, value| {
                let i = (y * width + x) as usize;
                let value = value / 127.5 - 1.0;
                input[base + i] = value;
                input[base + plane + i] = value;
                input[base + 2 * plane + i] = value;
            });
        }
        let tensor =
            Tensor::from_array(([count, 3, LINE_HEIGHT as usize, width as usize], input)).map_err(engine_failed)?;
        let mut session = self.session.lock().map_err(|_| OcrError::Engine)?;
        let outputs = session.run(ort::inputs![tensor]).map_err(engine_failed)?;
        let (shape, scores) = outputs[0].try_extract_tensor::<f32>().map_err(engine_failed)?;
        let [batch, steps, classes] = shape[..] else { return Err(OcrError::Engine) };
        let (steps, classes) = (steps as usize, classes as usize);
        if batch as usize != count || scores.len() != count * steps * classes {
            return Err(OcrError::Engine);
        }
        Ok(scores.chunks(steps * classes).map(|line| self.decode(line, classes, look_alikes)).collect())
    }

    /// CTC's greedy decoding: the best class at each step, repeats and blanks dropped; a
    /// character close behind its look-alike read instead (`LetterClasses::meant`).
    fn decode(&self, steps: &[f32], classes: usize, look_alikes: u8) -> Option<ReadPiece> {
        let space = self.characters.len() - 1;
        let mut emitted: Vec<Emitted> = Vec::new();
        let mut apostrophe_shares = Vec::new();
        let mut confidence = 0f32;
        let mut previous = 0usize;
        let mut space_peak = 0f32;
        for (index, step) in steps.chunks(classes).enumerate() {
            let (best, score) =
                step.iter().copied().enumerate().fold((0, f32::MIN), |b, (i, s)| if s > b.1 { (i, s) } else { b });
            if best != 0
                && best != previous
                && let Some(&ch) = self.characters.get(self.letters.meant(best, step, look_alikes))
            {
                apostrophe_shares.extend(self.letters.apostrophe_share(best, step));
                emitted.push(Emitted { ch, step: index, space_before: space_peak });
                confidence += score;
                space_peak = 0.0;
            } else {
                space_peak = space_peak.max(step.get(space).copied().unwrap_or(0.0));
            }
            previous = best;
        }
        pair_curly_quotes(&mut emitted);
        let kept = emitted.len();
        let text = with_word_gaps(&emitted);
        let text = text.trim();
        let mean = confidence / kept.max(1) as f32;
        (kept > 0 && mean >= TEXT_SCORE && !text.is_empty()).then(|| ReadPiece {
            text: text.to_owned(),
            mean,
            apostrophe_shares,
        })
    }
}

/// A piece of a line as the recognizer read it, with its mean character confidence.
#[derive(Debug, Clone)]
struct ReadPiece {
    text: String,
    mean: f32,
    /// At each apostrophe read, the share of `’` against `'` (a page's decide together).
    apostrophe_shares: Vec<f32>,
}

/// A character the recognizer emitted: where, and how strongly it saw a space before it.
#[derive(Debug, Clone, Copy)]
struct Emitted {
    ch: char,
    step: usize,
    /// The highest space probability at the steps since the character before.
    space_before: f32,
}

/// The recognized characters, with a space between two Latin ones wherever the recognizer
/// saw one but let CTC's blank win, or they stand further apart than letters of a word do.
/// The recognizer emits most Latin word spaces itself, not all; those it emits are kept. A
/// character is emitted at a step (eight pixels of a 48-pixel-high line), letters of a word
/// sit one to three steps apart, and a gap past the line's usual spacing by a step is a
/// space where the recognizer saw any space there (or where no lower-case letter follows
/// a letter), by two steps whether or not it did; a space probability of a tenth between
/// them is one too. Letters stand further apart within a word in three places, so the gap
/// there must be a step wider: beside a wide letter (`m`, `w`), after a capital before a
/// lower-case letter (a capital is emitted at its left edge: "Abstract", "Duis"), and after
/// a line's first letter (emitted as early as the margin allows). After `,` `;` `:` `?` `!`
/// a letter starts a new word, and an opening quote or bracket after a word does too,
/// whatever the gap.
fn with_word_gaps(emitted: &[Emitted]) -> String {
    let mut gaps: Vec<usize> = emitted
        .windows(2)
        .filter(|pair| pair[0].ch != ' ' && pair[1].ch != ' ')
        .map(|pair| pair[1].step - pair[0].step)
        .collect();
    gaps.sort_unstable();
    let threshold = gaps.get(gaps.len() / 2).map_or(usize::MAX, |median| {
        (median + 1).max(MIN_WORD_GAP).max((*median as f32 * WORD_GAP_RATIO).ceil() as usize)
    });
    let mut text = String::with_capacity(emitted.len() + 8);
    for (i, current) in emitted.iter().enumerate() {
        if let Some(before) = i.checked_sub(1).and_then(|j| emitted.get(j))
            && current.ch != ' '
            && before.ch != ' '
            && word_space_between(before, current, threshold, i == 1)
        {
            text.push(' ');
        }
        text.push(current.ch);
    }
    text
}

/// Whether two adjacent emitted characters (neither a space) are two words' (see
/// [`with_word_gaps`]); `first` when `before` is the line's first character.
fn word_space_between(before: &Emitted, current: &Emitted, threshold: usize, first: bool) -> bool {
    let (a, b) = (before.ch, current.ch);
    if matches!(a, ',' | ';' | ':' | '?' | '!') && b.is_alphabetic()
        || a.is_alphanumeric() && matches!(b, '“' | '‘' | '(')
        || matches!(a, '”' | ')') && b.is_alphanumeric()
    {
        return true;
    }
    // `’` is far more often an apostrophe inside a word (`l’homme`, `don’t`) than a closing
    // quote, so the gap decides after it, as after `'`.
    let latin = |c: char| latin_letter_or_digit(c) || c.is_ascii_punctuation() || c == '’';
    if !latin(a) || !latin(b) {
        return false;
    }
    let wide = |c: char| matches!(c, 'm' | 'w' | 'M' | 'W');
    let needed = threshold
        + usize::from(wide(a) || wide(b))
        + usize::from(a.is_uppercase() && b.is_lowercase())
        + usize::from(first);
    // Before a lower-case letter a gap of just the threshold needs the recognizer's hint;
    // beside punctuation (`information. Really`), a digit (`Article 1`) or between capitals
    // (`PRZETO ZGROMADZENIE`) it is a space as it stands.
    let gap = current.step - before.step;
    let hint_needed = a.is_alphabetic() && b.is_lowercase();
    gap > needed
        || gap == needed && (!hint_needed || current.space_before >= SPACE_HINTED)
        || current.space_before >= SPACE_SEEN
}

/// A letter of the Latin script with its diacritics (`ł`, `ä`, `é`, `ş`: Latin-1, Latin
/// Extended-A and -B, Latin Extended Additional) or a digit: spaced by the gaps between them
/// as the ASCII ones are (a word ending `ł` before a number is two words).
fn latin_letter_or_digit(c: char) -> bool {
    c.is_ascii_alphanumeric() || c.is_alphabetic() && matches!(c, '\u{00C0}'..='\u{024F}' | '\u{1E00}'..='\u{1EFF}')
}

/// Quotes printed curly come in pairs: a straight quote read for one half of a pair whose
/// other half was read curly is the curly one (the recognizer's curly share for a closing
/// quote can fall under the share `letters` reads a curly one from where the opening one's did not).
fn pair_curly_quotes(emitted: &mut [Emitted]) {
    let mut open: Option<usize> = None;
    for i in 0..emitted.len() {
        match (emitted[i].ch, open.map(|o| emitted[o].ch)) {
            ('“', _) => open = Some(i),
            ('”', Some('"')) => {
                if let Some(o) = open.take() {
                    emitted[o].ch = '“';
                }
            }
            ('”', _) => open = None,
            ('"', Some('“')) => {
                emitted[i].ch = '”';
                open = None;
            }
            ('"', Some(_)) => open = None,
            ('"', None) => open = Some(i),
            _ => {}
        }
    }
}

/// The width, in pixels, the recognizer sees `line` at.
fn recognizer_width(line: &RotatedRect) -> u32 {
    ((LINE_HEIGHT as f32 * line.aspect()).ceil() as u32).clamp(MIN_LINE_WIDTH, LINE_HEIGHT * MAX_LINE_RATIO)
}

/// `order` (pieces narrowest first) in batches of at most [`BATCH`] pieces, each within
/// [`BATCH_COLUMNS`] at its widest piece's width (a piece wider than that alone).
fn batches(order: &[usize], width: impl Fn(usize) -> u32) -> Vec<&[usize]> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && end - start < BATCH && (end - start + 1) as u32 * width(order[end]) <= BATCH_COLUMNS
        {
            end += 1;
        }
        batches.push(&order[start..end]);
        start = end;
    }
    batches
}

/// The page drawn twice as large when its lines are small type (the median detected line
/// under [`SMALL_LINE_HEIGHT`] pixels high) and the result stays within
/// [`MAX_UPSCALED_PIXELS`].
fn small_type_upscale(page: &GrayImage, lines: &[RotatedRect]) -> Result<Option<GrayImage>, OcrError> {
    let mut heights: Vec<f32> = lines.iter().map(|l| l.height).collect();
    heights.sort_by(f32::total_cmp);
    let Some(&median) = heights.get(heights.len() / 2) else { return Ok(None) };
    let (width, height) = (page.width() * 2, page.height() * 2);
    if median < SMALL_LINE_HEIGHT && u64::from(width) * u64::from(height) <= MAX_UPSCALED_PIXELS {
        resized(page, width, height, FilterType::CatmullRom).map(Some)
    } else {
        Ok(None)
    }
}

/// `page` resized to `width` × `height` by convolution with `filter` (its support widened
/// when shrinking, so every source pixel counts), one byte a pixel with the CPU's SIMD.
fn resized(page: &GrayImage, width: u32, height: u32, filter: FilterType) -> Result<GrayImage, OcrError> {
    let source = ImageRef::new(page.width(), page.height(), page.as_raw(), PixelType::U8).map_err(engine_failed)?;
    let mut target = fast_image_resize::images::Image::new(width, height, PixelType::U8);
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(filter));
    Resizer::new().resize(&source, &mut target, &options).map_err(engine_failed)?;
    GrayImage::from_raw(width, height, target.into_vec()).ok_or(OcrError::Engine)
}

/// A line in pieces no wider than [`MAX_PIECE_RATIO`] heights, each cut in the middle of
/// the widest word gap in the last two thirds of its length (a line without one is cut at
/// the limit).
fn cut_at_word_gaps(page: &GrayImage, line: &RotatedRect, ink: u8) -> Vec<RotatedRect> {
    let limit = MAX_PIECE_RATIO * line.height.max(1.0);
    if line.width <= limit {
        return vec![*line];
    }
    let gaps = geometry::blank_runs(page, line, ink);
    let mut pieces = Vec::new();
    let mut start = 0.0;
    while line.width - start > limit {
        let window = (start + limit / 3.0)..(start + limit);
        let cut = gaps
            .iter()
            .filter(|(from, to)| window.contains(&((from + to) / 2.0)))
            .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)))
            .map_or(start + limit, |(from, to)| (from + to) / 2.0);
        pieces.push(line.piece(start, cut));
        start = cut;
    }
    pieces.push(line.piece(start, line.width));
    pieces
}

fn engine_failed(error: impl std::fmt::Display) -> OcrError {
    // The runtime's text goes to the log; the caller's record says only what failed.
    eprintln!("OCR engine error: {error}");
    OcrError::Engine
}

/// Horizontal bands of a `width` × `height` detector input, each at most [`BAND_PIXELS`]
/// (at least [`MIN_BAND_ROWS`] rows), overlapping by [`BAND_OVERLAP`] rows: `(from, to,
/// keep_from, keep_to)`, the kept rows tiling the input exactly. The detector's memory
/// grows with its input, so a band bounds it whatever the page.
fn bands(width: u32, height: u32) -> Vec<(u32, u32, u32, u32)> {
    let rows = ((BAND_PIXELS / width.max(1)) / 32 * 32).max(MIN_BAND_ROWS);
    if rows >= height {
        return vec![(0, height, 0, height)];
    }
    let step = rows - 2 * BAND_OVERLAP;
    let mut bands = Vec::new();
    let mut keep_from = 0;
    while keep_from < height {
        let from = keep_from.saturating_sub(BAND_OVERLAP);
        let to = (from + rows).min(height);
        let from = to.saturating_sub(rows);
        let keep_to = if to == height { height } else { (keep_from + step).min(to - BAND_OVERLAP) };
        bands.push((from, to, keep_from, keep_to));
        keep_from = keep_to;
    }
    bands
}

/// The detector's input size: at most [`MAX_SIDE`] on the longer side, a small image's
/// longer side scaled up to [`MIN_LONG_SIDE`], each a multiple of 32.
fn detector_size(width: u32, height: u32) -> (u32, u32) {
    let long = width.max(height) as f32;
    let mut ratio = if long < MIN_LONG_SIDE as f32 { MIN_LONG_SIDE as f32 / long } else { 1.0 };
    if long * ratio > MAX_SIDE as f32 {
        ratio = MAX_SIDE as f32 / long;
    }
    let round = |side: u32| (((side as f32 * ratio) / 32.0).round() as u32).max(1) * 32;
    (round(width), round(height))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_drawn_twice_as_large_keeps_its_edges_and_one_shrunk_keeps_its_ink() {
        // A dark bar on paper: twice as large it is the same bar, its edges where they were.
        let page = GrayImage::from_fn(60, 40, |x, y| {
            image::Luma([if (20..40).contains(&x) && (10..30).contains(&y) { 0 } else { 255 }])
        });
        let small = RotatedRect { cx: 30.0, cy: 20.0, width: 20.0, height: 20.0, angle: 0.0 };
        let larger = small_type_upscale(&page, &[small]).expect("resized").expect("small type");
        assert_eq!(larger.get_pixel(60, 40).0[0], 0, "inside the bar");
        assert_eq!(larger.get_pixel(10, 10).0[0], 255, "paper");
        let row: Vec<u8> = (36..44).map(|x| larger.get_pixel(x, 40).0[0]).collect();
        assert!(row[..3].iter().all(|&v| v > 200) && row[5..].iter().all(|&v| v < 55), "the edge at x 40: {row:?}");
        // Shrunk to half (as the detector's input), the bar is still there at half the size.
        let half = resized(&page, 30, 20, FilterType::Bilinear).expect("resized");
        assert_eq!((half.get_pixel(15, 10).0[0], half.get_pixel(2, 2).0[0]), (0, 255));
    }

    #[test]
    fn the_recognizer_is_int8_for_its_alphabet_unless_fp32_is_asked_for() {
        assert_eq!(recognizer_file_for(Script::Latin, None), Ok(RECOGNIZER_INT8_LATIN_FILE));
        assert_eq!(recognizer_file_for(Script::All, Some(" INT8 ")), Ok(RECOGNIZER_INT8_FILE));
        assert_eq!(recognizer_file_for(Script::Latin, Some("fp32")), Ok(RECOGNIZER_FP32_FILE));
        assert_eq!(recognizer_file_for(Script::All, Some("fp32")), Ok(RECOGNIZER_FP32_FILE));
        let refused = recognizer_file_for(Script::Latin, Some("fp16")).expect_err("no such model");
        assert!(refused.contains("SLUICE_OCR_PRECISION is \"fp16\""), "{refused}");
        // Chinese and Japanese need every character; the Latin-script languages the Latin ones.
        let script = |languages: &[&str]| Alphabet::for_languages(languages).script;
        assert_eq!(script(&["eng", "pol"]), Script::Latin);
        assert_eq!(Alphabet::for_languages(&["eng".to_owned(), "chi_sim".to_owned()]).script, Script::All);
        assert_eq!(script(&["chi_tra"]), Script::All);
        assert_eq!(script(&["deu", "jpn"]), Script::All);
        assert_eq!(Alphabet::for_languages::<&str>(&[]), Alphabet::LATIN);
        assert_eq!(Alphabet::for_languages(&["eng", "deu"]), Alphabet::LATIN, "no look-alike of theirs");
        assert_ne!(Alphabet::for_languages(&["eng", "pol"]), Alphabet::LATIN, "Polish letters favoured");
    }

    #[test]
    fn a_straight_quote_paired_with_a_curly_one_is_curly() {
        let quotes = |chars: &str| -> String {
            let mut emitted: Vec<Emitted> =
                chars.chars().enumerate().map(|(step, ch)| Emitted { ch, step, space_before: 0.0 }).collect();
            pair_curly_quotes(&mut emitted);
            emitted.iter().map(|e| e.ch).collect()
        };
        assert_eq!(quotes("“old\" to"), "“old” to");
        assert_eq!(quotes("\"old” to"), "“old” to");
        assert_eq!(quotes("\"on\" and \"slow\""), "\"on\" and \"slow\"", "straight pairs stay straight");
        assert_eq!(quotes("“no” and \"tug\""), "“no” and \"tug\"");
        assert_eq!(quotes("5\" and 3\""), "5\" and 3\"", "inches are no pair of curly quotes");
        assert_eq!(quotes("a ” b \""), "a ” b \"");
    }

    #[test]
    fn wide_gaps_between_latin_characters_are_word_spaces() {
        let emitted = |chars: &[(char, usize)]| -> Vec<Emitted> {
            chars.iter().map(|&(ch, step)| Emitted { ch, step, space_before: 0.0 }).collect()
        };
        let line =
            [('T', 2), ('h', 4), ('e', 7), ('p', 12), ('i', 14), ('l', 15), ('o', 17), ('t', 19), (' ', 21), ('s', 23)];
        assert_eq!(with_word_gaps(&emitted(&line)), "The pilot s");
        // Close letters with a space seen between them, though blank won.
        let mut close = emitted(&[('o', 2), ('f', 4), ('w', 7)]);
        close[2].space_before = 0.3;
        assert_eq!(with_word_gaps(&close), "of w");
        // Chinese characters sit apart without spaces between them.
        assert_eq!(with_word_gaps(&emitted(&[('港', 2), ('口', 8), ('局', 14)])), "港口局");
        assert_eq!(with_word_gaps(&[]), "");
        // Read from scanned pages: a capital, and a line's first letter, emitted a step early.
        let abstract_ = [('A', 2), ('b', 6), ('s', 8), ('t', 10), ('r', 13), ('a', 15), ('c', 17), ('t', 20)];
        assert_eq!(with_word_gaps(&emitted(&abstract_)), "Abstract");
        let line = [('i', 1), ('t', 3), ('.', 5), (' ', 7), ('D', 10), ('u', 14), ('i', 16), ('s', 17), ('a', 22)];
        assert_eq!(with_word_gaps(&emitted(&line)), "it. Duis a");
        // A gap of just the threshold is a space only where the recognizer saw one at all.
        let mut under = emitted(&[('u', 1), ('n', 3), ('d', 7), ('e', 9), ('r', 11)]);
        assert_eq!(with_word_gaps(&under), "under");
        under[2].space_before = 0.05;
        assert_eq!(with_word_gaps(&under), "un der");
        let line = [('o', 1), ('n', 3), ('.', 5), ('R', 9), ('e', 12), ('a', 14)];
        assert_eq!(with_word_gaps(&emitted(&line)), "on. Rea");
        let line = [('i', 1), ('c', 3), ('l', 5), ('e', 7), ('1', 11)];
        assert_eq!(with_word_gaps(&emitted(&line)), "icle 1");
        let mauris = [('m', 2), ('a', 7), ('u', 9), ('r', 12), ('i', 14), ('s', 16)];
        assert_eq!(with_word_gaps(&emitted(&mauris)), "mauris");
        // Letters with diacritics are spaced as the others: a word ending `ł` before a number.
        let line = [('k', 1), ('u', 3), ('ł', 5), ('2', 10)];
        assert_eq!(with_word_gaps(&emitted(&line)), "kuł 2");
        let line = [('E', 1), ('r', 5), ('s', 7), ('t', 9), ('ü', 14), ('b', 16), ('e', 18), ('r', 20)];
        assert_eq!(with_word_gaps(&emitted(&line)), "Erst über");
        // Punctuation that ends a word, and a quote that opens one, whatever the gap.
        let line = [('v', 16), ('e', 18), ('l', 19), (',', 21), ('w', 25), ('i', 27), ('s', 29), ('i', 30)];
        assert_eq!(with_word_gaps(&emitted(&line)), "vel, wisi");
        let line = [('k', 1), ('e', 3), ('“', 5), ('H', 7), ('u', 9), ('”', 11), ('?', 12), ('K', 14)];
        assert_eq!(with_word_gaps(&emitted(&line)), "ke “Hu”? K");
        // A typographic apostrophe inside a word keeps it whole; after a word, the gap decides.
        let line = [('l', 2), ('’', 3), ('h', 5), ('o', 7), ('m', 9), ('m', 12), ('e', 15)];
        assert_eq!(with_word_gaps(&emitted(&line)), "l’homme");
        let line = [('o', 2), ('n', 4), ('’', 6), ('t', 7), ('s', 12), ('’', 14), ('r', 19), ('u', 21)];
        assert_eq!(with_word_gaps(&emitted(&line)), "on’t s’ ru");
    }

    #[test]
    fn batches_hold_eight_short_pieces_or_fewer_wide_ones() {
        let widths = [320, 320, 320, 320, 320, 320, 320, 320, 320, 640, 960, 960, 960, 960, 1920, 1920, 1920];
        let order: Vec<usize> = (0..widths.len()).collect();
        let sizes: Vec<usize> = batches(&order, |i| widths[i]).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, vec![8, 4, 2, 2, 1]);
        assert!(batches(&order, |_| 9999).iter().all(|b| b.len() == 1), "a piece wider than the budget alone");
        assert!(batches(&[], |_| 320).is_empty());
    }

    #[test]
    fn small_type_is_read_from_the_page_drawn_twice_as_large() {
        let lines = |height: f32| vec![RotatedRect { cx: 50.0, cy: 50.0, width: 400.0, height, angle: 0.0 }; 3];
        let page = GrayImage::new(1275, 1650);
        let larger = small_type_upscale(&page, &lines(31.0)).expect("resized").expect("10-point type at 150 dpi");
        assert_eq!(larger.dimensions(), (2550, 3300));
        assert!(small_type_upscale(&page, &lines(52.0)).expect("resized").is_none(), "10-point type at 300 dpi");
        assert!(small_type_upscale(&page, &[]).expect("resized").is_none());
        let huge = GrayImage::new(3400, 3400);
        assert!(small_type_upscale(&huge, &lines(20.0)).expect("resized").is_none(), "too large to double");
    }

    #[test]
    fn bands_tile_the_page_with_overlap_and_stay_small() {
        for (width, height) in [(1280, 1664), (2000, 1600), (640, 416), (32, 4992), (1280, 1120)] {
            let bands = bands(width, height);
            let mut next = 0;
            for &(from, to, keep_from, keep_to) in &bands {
                assert_eq!(keep_from, next, "{width}x{height}: {bands:?}");
                assert!(from <= keep_from && keep_from < keep_to && keep_to <= to && to <= height, "{bands:?}");
                assert!((to - from) * width <= BAND_PIXELS.max(MIN_BAND_ROWS * width), "{bands:?}");
                assert_eq!((to - from) % 32, 0, "{bands:?}");
                next = keep_to;
            }
            assert_eq!(next, height, "{width}x{height}: {bands:?}");
        }
    }

    #[test]
    fn the_detector_sees_at_most_max_side_in_multiples_of_32() {
        assert_eq!(detector_size(1275, 1650), (1280, 1664));
        let (w, h) = detector_size(2550, 3300);
        assert!(w <= MAX_SIDE + 16 && h <= MAX_SIDE + 16 && w % 32 == 0 && h % 32 == 0, "{w}x{h}");
        // A small screenshot is scaled up so its text is large enough to detect.
        assert_eq!(detector_size(400, 200), (736, 384));
        // A strip of a page is not.
        assert_eq!(detector_size(1275, 120), (1280, 128));
        assert_eq!(detector_size(100_000, 10).0 % 32, 0);
    }
}
