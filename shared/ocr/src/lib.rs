//! Text from page images.
//!
//! The engine is PaddleOCR's PP-OCRv4 pair as the `rapidocr-onnxruntime` wheel ships them —
//! a text-line detector (DB) and a line recognizer (CTC) — run by ONNX Runtime, whose
//! `libonnxruntime.so` (the `onnxruntime` wheel's) is bound at run time like PDFium. Why this
//! and not Tesseract: both the runtime and the models come from PyPI wheels whose Linux
//! builds run on `provided.al2023` arm64 as a layer (Debian's Tesseract is built for a newer
//! glibc), and on the generated scan set it reads more accurately and faster (BENCHMARKS.md).
//!
//! The library and the models are loaded once per process, on first use, from
//! `ORT_DYLIB_PATH` and `SLUICE_OCR_MODEL_DIR`. A page is read in two passes: the detector
//! finds text lines as rotated rectangles (so a skewed scan's lines are cut straight), and the
//! recognizer reads each line, a batch at a time, checking the deadline between batches.
//! Memory is bounded by one page: the detector sees the page at most [`MAX_SIDE`] pixels on a
//! side.

mod geometry;
mod layout;

use geometry::RotatedRect;
use image::GrayImage;
use ort::environment::Environment;
use ort::session::Session;
use ort::value::Tensor;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The longest side, in pixels, the detector sees; a larger page is scaled down to it.
pub const MAX_SIDE: u32 = 2000;
/// A smaller page is scaled up until its shorter side is this long (the detector's training).
const MIN_SHORT_SIDE: u32 = 736;
const DETECTOR_FILE: &str = "ch_PP-OCRv4_det_infer.onnx";
const RECOGNIZER_FILE: &str = "ch_PP-OCRv4_rec_infer.onnx";
/// The detector's probability above which a pixel is text.
const PIXEL_THRESHOLD: f32 = 0.3;
/// The mean probability a detected region needs to count as a line.
const BOX_THRESHOLD: f32 = 0.5;
/// How far a detected region is grown back (the detector predicts shrunken lines).
const UNCLIP_RATIO: f32 = 1.6;
/// A recognized line's mean character confidence below which it is dropped as noise.
const TEXT_SCORE: f32 = 0.5;
const LINE_HEIGHT: u32 = 48;
const MIN_LINE_WIDTH: u32 = 320;
/// The longest line the recognizer is given, in multiples of its height.
const MAX_LINE_RATIO: u32 = 40;
const BATCH: usize = 8;
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
}

/// The loaded runtime and models.
pub struct Engine {
    detector: Mutex<Session>,
    recognizer: Mutex<Session>,
    /// Index `i` of the recognizer's output is `characters[i]`; index 0 is CTC's blank.
    characters: Vec<char>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("characters", &self.characters.len()).finish_non_exhaustive()
    }
}

static RUNTIME: OnceLock<Result<Environment, String>> = OnceLock::new();
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
    for file in [DETECTOR_FILE, RECOGNIZER_FILE] {
        let path = model_dir().join(file);
        if !std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Err(unavailable(&format!("{} is missing", path.display()), &"no such model file"));
        }
    }
    Ok(())
}

fn model_dir() -> PathBuf {
    PathBuf::from(std::env::var("SLUICE_OCR_MODEL_DIR").unwrap_or_else(|_| "models".to_owned()))
}

fn unavailable(what: &str, error: &dyn std::fmt::Display) -> String {
    format!("OCR is not available: {what} ({error}); check the OCR layer, ORT_DYLIB_PATH and SLUICE_OCR_MODEL_DIR")
}

/// ONNX Runtime, loaded once per process from `ORT_DYLIB_PATH`.
fn runtime() -> Result<&'static Environment, String> {
    RUNTIME
        .get_or_init(|| {
            let library = std::env::var("ORT_DYLIB_PATH").unwrap_or_else(|_| "libonnxruntime.so".to_owned());
            ort::init_from(&library)
                .map_err(|e| unavailable(&format!("ONNX Runtime could not be loaded from {library}"), &e))?
                .with_name("sluice-ocr")
                .build()
                .map_err(|e| unavailable("ONNX Runtime did not start", &e))
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn load() -> Result<Engine, String> {
    let environment = runtime()?;
    let models = model_dir();
    // One thread per core the function has: a Lambda's vCPUs are few and all ours.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let session = |file: &str| -> Result<Session, String> {
        let path = models.join(file);
        let bytes = std::fs::read(&path).map_err(|e| unavailable(&format!("{} cannot be read", path.display()), &e))?;
        Session::builder(environment)
            .and_then(|builder| builder.with_intra_threads(threads).map_err(ort::Error::<()>::from))
            .and_then(|mut builder| builder.commit_from_memory(&bytes))
            .map_err(|e| unavailable(&format!("{} is not a model ONNX Runtime can run", path.display()), &e))
    };
    let detector = session(DETECTOR_FILE)?;
    let recognizer = session(RECOGNIZER_FILE)?;
    // The recognizer carries its dictionary, one character a line; PaddleOCR appends a space.
    let dictionary = recognizer
        .metadata()
        .ok()
        .and_then(|metadata| metadata.custom("character"))
        .ok_or_else(|| unavailable("the recognition model carries no dictionary", &RECOGNIZER_FILE))?;
    let mut characters = vec!['\0'];
    characters.extend(dictionary.lines().filter_map(|line| line.chars().next()));
    characters.push(' ');
    Ok(Engine { detector: Mutex::new(detector), recognizer: Mutex::new(recognizer), characters })
}

impl Engine {
    /// Reads one page. `Err(Time)` when `deadline` passes first.
    pub fn read(&self, page: &GrayImage, deadline: Instant) -> Result<PageText, OcrError> {
        if page.width() < 8 || page.height() < 8 {
            return Ok(PageText::default());
        }
        let mut lines = self.detect(page)?;
        lines.truncate(MAX_LINES);
        let mut recognized = Vec::with_capacity(lines.len());
        // Lines of like width share a batch, so little of a batch is padding.
        let mut order: Vec<usize> = (0..lines.len()).collect();
        order.sort_by(|&a, &b| lines[a].aspect().total_cmp(&lines[b].aspect()));
        for batch in order.chunks(BATCH) {
            if Instant::now() > deadline {
                return Err(OcrError::Time);
            }
            let texts = self.recognize(page, batch.iter().map(|&i| &lines[i]))?;
            for (&i, text) in batch.iter().zip(texts) {
                if let Some(text) = text {
                    recognized.push((lines[i], text));
                }
            }
        }
        let count = recognized.len();
        Ok(PageText { text: layout::reading_order(recognized), lines: count })
    }

    /// Text lines on the page, in page coordinates.
    fn detect(&self, page: &GrayImage) -> Result<Vec<RotatedRect>, OcrError> {
        let (width, height) = detector_size(page.width(), page.height());
        let scaled = image::imageops::resize(page, width, height, image::imageops::FilterType::Triangle);
        let plane = (width * height) as usize;
        let mut input = vec![0f32; 3 * plane];
        for (i, pixel) in scaled.as_raw().iter().enumerate() {
            let value = f32::from(*pixel) / 127.5 - 1.0;
            input[i] = value;
            input[plane + i] = value;
            input[2 * plane + i] = value;
        }
        drop(scaled);
        let tensor = Tensor::from_array(([1usize, 3, height as usize, width as usize], input)).map_err(engine_failed)?;
        let mut detector = self.detector.lock().map_err(|_| OcrError::Engine)?;
        let outputs = detector.run(ort::inputs![tensor]).map_err(engine_failed)?;
        let (_, probabilities) = outputs[0].try_extract_tensor::<f32>().map_err(engine_failed)?;
        if probabilities.len() != plane {
            return Err(OcrError::Engine);
        }
        let scale = (page.width() as f32 / width as f32, page.height() as f32 / height as f32);
        Ok(geometry::text_regions(probabilities, width, height, PIXEL_THRESHOLD, BOX_THRESHOLD, UNCLIP_RATIO)
            .into_iter()
            .map(|region| region.scaled(scale.0, scale.1))
            .filter(|region| region.height >= 4.0 && region.width >= 4.0)
            .collect())
    }

    /// Each line's text, or `None` for a line read with too little confidence.
    fn recognize<'a>(
        &self,
        page: &GrayImage,
        lines: impl ExactSizeIterator<Item = &'a RotatedRect> + Clone,
    ) -> Result<Vec<Option<String>>, OcrError> {
        let count = lines.len();
        let widest = lines.clone().map(|line| line.aspect()).fold(0f32, f32::max);
        let width = ((LINE_HEIGHT as f32 * widest).ceil() as u32).clamp(MIN_LINE_WIDTH, LINE_HEIGHT * MAX_LINE_RATIO);
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
        let mut recognizer = self.recognizer.lock().map_err(|_| OcrError::Engine)?;
        let outputs = recognizer.run(ort::inputs![tensor]).map_err(engine_failed)?;
        let (shape, scores) = outputs[0].try_extract_tensor::<f32>().map_err(engine_failed)?;
        let [batch, steps, classes] = shape[..] else { return Err(OcrError::Engine) };
        let (steps, classes) = (steps as usize, classes as usize);
        if batch as usize != count || scores.len() != count * steps * classes {
            return Err(OcrError::Engine);
        }
        Ok(scores.chunks(steps * classes).map(|line| self.decode(line, classes)).collect())
    }

    /// CTC's greedy decoding: the best class at each step, repeats and blanks dropped.
    fn decode(&self, steps: &[f32], classes: usize) -> Option<String> {
        let mut text = String::new();
        let mut confidence = 0f32;
        let mut kept = 0usize;
        let mut previous = 0usize;
        for step in steps.chunks(classes) {
            let (best, score) =
                step.iter().copied().enumerate().fold((0, f32::MIN), |b, (i, s)| if s > b.1 { (i, s) } else { b });
            if best != 0 && best != previous {
                if let Some(&ch) = self.characters.get(best) {
                    text.push(ch);
                    confidence += score;
                    kept += 1;
                }
            }
            previous = best;
        }
        let text = text.trim();
        (kept > 0 && confidence / kept as f32 >= TEXT_SCORE && !text.is_empty()).then(|| text.to_owned())
    }
}

fn engine_failed(error: impl std::fmt::Display) -> OcrError {
    // The runtime's text goes to the log; the caller's record says only what failed.
    eprintln!("OCR engine error: {error}");
    OcrError::Engine
}

/// The detector's input size: at most [`MAX_SIDE`] on the longer side, the shorter side
/// scaled up towards [`MIN_SHORT_SIDE`], each a multiple of 32.
fn detector_size(width: u32, height: u32) -> (u32, u32) {
    let (long, short) = (width.max(height) as f32, width.min(height) as f32);
    let mut ratio = if short < MIN_SHORT_SIDE as f32 { MIN_SHORT_SIDE as f32 / short } else { 1.0 };
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
    fn the_detector_sees_at_most_max_side_in_multiples_of_32() {
        assert_eq!(detector_size(1275, 1650), (1280, 1664));
        let (w, h) = detector_size(2550, 3300);
        assert!(w <= MAX_SIDE + 16 && h <= MAX_SIDE + 16 && w % 32 == 0 && h % 32 == 0, "{w}x{h}");
        // A small screenshot is scaled up so its text is large enough to detect.
        assert_eq!(detector_size(400, 200).1, 736);
        assert_eq!(detector_size(100_000, 10).0 % 32, 0);
    }
}
