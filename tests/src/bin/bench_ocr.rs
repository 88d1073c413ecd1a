//! The OCR benchmark's Sluice side (`infra/local/bench-ocr` runs it and Tesseract):
//!
//!   bench-ocr generate DIR [CORPUS]   a scan set: printed pages rasterised at 150 and 300
//!                            dpi with noise, blur and a 1–2° skew, as PNG (one per page,
//!                            `page-*`), and each resolution's pages as one image-only PDF
//!                            and one TIFF; with CORPUS (a folder of real text PDFs), every
//!                            page of each rendered at both resolutions and scanned the same
//!                            way with a 1.2° skew (`real-<file>-<dpi>-<page>.png`); the
//!                            ground truth beside each (`*.gt.txt`: a real page's own text layer)
//!   bench-ocr read DIR       Sluice reads every PNG (then the PDFs and TIFFs), writing
//!                            `*.sluice.txt` (`*.sluice-fp32.txt` under
//!                            `SLUICE_OCR_PRECISION=fp32`); prints pages/s and peak resident memory
//!   bench-ocr pages DIR PREFIX DPI   seconds per page for the PNGs named PREFIX*-DPI-*, read as
//!                            the chat path reads an image (20 s), on the CPUs it may use
//!   bench-ocr score DIR ENGINE   character error rate of `*.ENGINE.txt` against the truth;
//!                            for the real pages also word recall and precision (order-free)
//!                            per document and resolution
//!   bench-ocr scan DIR       the multilingual set: every clean printed page `clean-<name>-<dpi>-0.png`
//!                            (`infra/bench/udhr_pages.py`) scanned the same way as the real
//!                            pages, as `lang-<name>-<dpi>-0.png`
//!   bench-ocr read-lang DIR  Sluice reads every `lang-<tess>_<font>-…png` with the alphabet
//!                            a base with `ocr_languages: [tess]` reads with, writing `*.sluice.txt`
//!   bench-ocr score-lang DIR ENGINE   CER, word recall and precision per language, font and
//!                            resolution (Chinese and Japanese, written without spaces: CER
//!                            over the characters alone, recall and precision of characters)

use sluice_fixtures::{image_pdf, png_of, scanned_page, tiff_of};
use sluice_formats::{ExtractOptions, OcrAlphabet, OcrOptions, OcrScript, extract, kind_for_filename};
use std::path::{Path, PathBuf};
use std::time::Instant;

const WORDS: &[&str] = &[
    "harbour",
    "authority",
    "vessel",
    "channel",
    "pilot",
    "station",
    "permit",
    "dredging",
    "northern",
    "eastern",
    "quarterly",
    "report",
    "traffic",
    "cargo",
    "tonnage",
    "berth",
    "crane",
    "customs",
    "ledger",
    "dues",
    "tide",
    "mooring",
    "lighthouse",
    "survey",
    "budget",
    "council",
    "meeting",
    "minutes",
    "approved",
    "delayed",
    "repairs",
    "the",
    "of",
    "and",
    "to",
    "in",
    "for",
    "was",
    "by",
    "with",
    "from",
    "at",
    "on",
    "were",
    "each",
    "new",
    "old",
    "March",
    "April",
    "Monday",
    "Rotterdam",
    "Hamburg",
    "1987",
    "2024",
    "42",
    "7.5",
    "12%",
    "(draft)",
    "No.",
    "3,400",
];
const PAGES_PER_SET: usize = 6;
const LINES_PER_PAGE: usize = 30;

fn page_text(seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut lines = Vec::with_capacity(LINES_PER_PAGE);
    for _ in 0..LINES_PER_PAGE {
        let mut line = String::new();
        while line.len() < 58 {
            let word = WORDS[(next() % WORDS.len() as u64) as usize];
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        // Capitalised like prose, and ending a sentence now and then.
        let mut chars = line.chars();
        let first = chars.next().map(|c| c.to_uppercase().collect::<String>()).unwrap_or_default();
        let mut line = first + chars.as_str();
        if next() % 3 == 0 {
            line.push('.');
        }
        lines.push(line);
    }
    lines.join("\n")
}

fn generate(dir: &Path) {
    std::fs::create_dir_all(dir).expect("dir");
    for dpi in [150u32, 300] {
        let mut pages = Vec::new();
        let mut truths = Vec::new();
        for n in 0..PAGES_PER_SET {
            let seed = u64::from(dpi) * 100 + n as u64;
            let text = page_text(seed);
            let skew = [1.0f32, -1.5, 2.0, -1.0, 1.5, -2.0][n % 6];
            let page = scanned_page(&text, dpi, skew, seed);
            let stem = dir.join(format!("page-{dpi}-{n}"));
            std::fs::write(stem.with_extension("png"), png_of(&page)).expect("png");
            std::fs::write(stem.with_extension("gt.txt"), &text).expect("truth");
            truths.push(text);
            pages.push(page);
        }
        std::fs::write(dir.join(format!("scan-{dpi}.pdf")), image_pdf(&pages, dpi)).expect("pdf");
        std::fs::write(dir.join(format!("scan-{dpi}.tiff")), tiff_of(&pages)).expect("tiff");
        let whole = truths.join("\n\n");
        std::fs::write(dir.join(format!("scan-{dpi}.gt.txt")), &whole).expect("truth");
    }
}

/// The real documents' pages, scanned: every page of every PDF in `corpus` at both
/// resolutions.
fn generate_real(dir: &Path, corpus: &Path) {
    let mut pdfs = files(corpus, "pdf");
    pdfs.sort();
    for pdf in pdfs {
        let stem = pdf.file_stem().and_then(|s| s.to_str()).expect("name").to_owned();
        let bytes = std::fs::read(&pdf).expect("read the PDF");
        for dpi in [150u32, 300] {
            let pages = sluice_formats::pdf::render_pages(&bytes, dpi).expect("render");
            for (n, (page, text)) in pages.iter().enumerate() {
                let seed = u64::from(dpi) * 1000 + n as u64;
                let scan = sluice_fixtures::scanned(page, dpi, 1.2, seed);
                let path = dir.join(format!("real-{stem}-{dpi}-{n}"));
                std::fs::write(path.with_extension("png"), png_of(&scan)).expect("png");
                // PDFium marks a word hyphenated at a line's end with U+0002; the page shows "-".
                std::fs::write(path.with_extension("gt.txt"), text.replace('\u{2}', "-\n")).expect("truth");
            }
        }
    }
}

fn files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

/// The PNGs of `dir` named `<prefix>…-<dpi>-…`, in name order.
fn pngs_at(dir: &Path, prefix: &str, dpi: &str) -> Vec<PathBuf> {
    files(dir, "png")
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let name = n.to_string_lossy();
                name.starts_with(prefix) && name.contains(&format!("-{dpi}-"))
            })
        })
        .collect()
}

/// What Sluice's reads are written as: `sluice` with the int8 recognizers it reads with, and
/// `sluice-fp32` under `SLUICE_OCR_PRECISION=fp32` (the wheel's own recognizer), so one run
/// scores both.
fn engine_label() -> &'static str {
    match std::env::var(sluice_ocr::PRECISION_VARIABLE).as_deref().map(str::trim) {
        Ok("fp32") => "sluice-fp32",
        _ => "sluice",
    }
}

fn read_one(path: &Path, alphabet: OcrAlphabet) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    let bytes = std::fs::read(path).expect("read");
    let dpi = if name.contains("-300") { 300 } else { 150 };
    let mut options = ExtractOptions::new(10_000_000).with_ocr(Some(OcrOptions { dpi, max_pages: 1000, alphabet }));
    options.time_limit = std::time::Duration::from_secs(3600);
    let extraction = extract(kind_for_filename(name).expect("kind"), &bytes, &options).expect("accepted");
    extraction.text.unwrap_or_default()
}

fn peak_resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn read(dir: &Path) {
    // The engine loads once; its load is reported apart from the reading.
    let started = Instant::now();
    sluice_ocr::engine().expect("the OCR engine (run under infra/local/bench-ocr)");
    println!("engine load: {:.2} s", started.elapsed().as_secs_f64());
    for (set, prefix) in [("real", "real-"), ("generated", "page-")] {
        for dpi in [150, 300] {
            let pngs = pngs_at(dir, prefix, &dpi.to_string());
            if pngs.is_empty() {
                continue;
            }
            let started = Instant::now();
            for png in &pngs {
                std::fs::write(
                    png.with_extension(format!("{}.txt", engine_label())),
                    read_one(png, OcrAlphabet::LATIN),
                )
                .expect("write");
            }
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{set} png {dpi} dpi: {} pages in {seconds:.2} s = {:.2} pages/s",
                pngs.len(),
                pngs.len() as f64 / seconds
            );
        }
    }
    for dpi in [150, 300] {
        for container in ["pdf", "tiff"] {
            let path = dir.join(format!("scan-{dpi}.{container}"));
            if !path.exists() {
                continue;
            }
            let started = Instant::now();
            let text = read_one(&path, OcrAlphabet::LATIN);
            std::fs::write(dir.join(format!("scan-{dpi}.{container}.{}.txt", engine_label())), text).expect("write");
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{container} {dpi} dpi: {PAGES_PER_SET} pages in {seconds:.2} s = {:.2} pages/s",
                PAGES_PER_SET as f64 / seconds
            );
        }
    }
    println!("peak resident memory: {:.0} MiB", peak_resident_mib());
    text_layer_cost();
}

/// A PDF with a text layer is never OCRed: its read costs the same with OCR on and off.
fn text_layer_cost() {
    let texts: Vec<String> = (0..200).map(|n| page_text(9000 + n)).collect();
    let pages: Vec<&str> = texts.iter().map(String::as_str).collect();
    let file = sluice_fixtures::pdf(&pages);
    let kind = kind_for_filename("typed.pdf").expect("pdf");
    let time = |options: &ExtractOptions| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let started = Instant::now();
            let extraction = extract(kind, &file, options).expect("read");
            assert_eq!(extraction.ocr_pages, None, "a text layer was OCRed");
            best = best.min(started.elapsed().as_secs_f64());
        }
        best
    };
    let off = time(&ExtractOptions::new(10_000_000));
    let on = time(&ExtractOptions::new(10_000_000).with_ocr(Some(OcrOptions {
        dpi: 150,
        max_pages: 1000,
        alphabet: sluice_formats::OcrAlphabet::LATIN,
    })));
    println!(
        "text-layer PDF, 200 pages (best of 5): OCR off {:.1} ms, OCR on {:.1} ms = {:.2}x",
        off * 1000.0,
        on * 1000.0,
        on / off
    );
}

/// The Tesseract code of a multilingual page, `<tess>_<font>-<dpi>-<page>` (the code may hold
/// an underscore itself, the font name does not).
fn page_language(stem: &str) -> &str {
    stem.rsplit_once('_').map_or(stem, |(language, _)| language)
}

/// Languages written without spaces between words (those the whole recognizer reads: Chinese
/// and Japanese): their text is compared character by character.
fn unspaced(language: &str) -> bool {
    OcrAlphabet::for_languages(&[language]).script == OcrScript::All
}

/// Characters compared with runs of whitespace as one space (layout is not content), or with
/// none where the language puts no spaces between words (so an engine that reads a gap between
/// two characters as a space is not charged for it).
fn normalised(text: &str, unspaced: bool) -> Vec<char> {
    let separator = if unspaced { "" } else { " " };
    text.split_whitespace().collect::<Vec<_>>().join(separator).chars().collect()
}

/// The words of a text, lower-cased, with the punctuation around them dropped; each
/// character a word where the language puts no spaces between words.
fn words(text: &str, unspaced: bool) -> std::collections::HashMap<String, usize> {
    let mut counts = std::collections::HashMap::new();
    let pieces: Vec<String> = if unspaced {
        text.chars().filter(|c| !c.is_whitespace()).map(String::from).collect()
    } else {
        text.split_whitespace().map(str::to_owned).collect()
    };
    for word in &pieces {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        if !word.is_empty() {
            *counts.entry(word).or_insert(0) += 1;
        }
    }
    counts
}

/// The pages named `<prefix><file>-<dpi>-<page>` per file and resolution: CER, and word
/// recall and precision (order-free: how many of the page's words were read, and how many
/// read words are the page's).
fn score_real(dir: &Path, engine: &str, prefix: &str) {
    let mut groups: std::collections::BTreeMap<String, Vec<PathBuf>> = std::collections::BTreeMap::new();
    for truth in files(dir, "txt") {
        let name = truth.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_suffix(".gt.txt")) {
            // `<file>-<dpi>-<page>`: grouped by file and resolution.
            let group = rest.rsplit_once('-').map_or(rest, |(g, _)| g).to_owned();
            groups.entry(group).or_default().push(truth);
        }
    }
    for (group, truths) in groups {
        let unspaced = prefix == "lang-" && unspaced(page_language(&group));
        let (mut errors, mut total, mut found, mut expected_words, mut read_words) = (0, 0, 0, 0, 0);
        for truth in &truths {
            let stem = truth.to_string_lossy().trim_end_matches(".gt.txt").to_owned();
            let expected_text = std::fs::read_to_string(truth).expect("truth");
            let got_text = std::fs::read_to_string(format!("{stem}.{engine}.txt")).unwrap_or_default();
            let (expected, got) = (normalised(&expected_text, unspaced), normalised(&got_text, unspaced));
            errors += strsim::generic_levenshtein(&expected, &got);
            total += expected.len();
            let (want, have) = (words(&expected_text, unspaced), words(&got_text, unspaced));
            found += want.iter().map(|(w, n)| (*n).min(have.get(w).copied().unwrap_or(0))).sum::<usize>();
            expected_words += want.values().sum::<usize>();
            read_words += have.values().sum::<usize>();
        }
        let unit = if unspaced { "character" } else { "word" };
        println!(
            "{engine} {} {group}: CER {:.2}%, {unit} recall {:.1}%, {unit} precision {:.1}% ({} pages)",
            prefix.trim_end_matches('-'),
            100.0 * errors as f64 / total.max(1) as f64,
            100.0 * found as f64 / expected_words.max(1) as f64,
            100.0 * found as f64 / read_words.max(1) as f64,
            truths.len()
        );
    }
}

fn score(dir: &Path, engine: &str) {
    score_real(dir, engine, "real-");
    for (label, filter) in [("png 150 dpi", "page-150-"), ("png 300 dpi", "page-300-")] {
        let (mut errors, mut total) = (0usize, 0usize);
        for truth in files(dir, "txt").into_iter().filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".gt.txt") && name.contains(filter)
        }) {
            let stem = truth.to_string_lossy().trim_end_matches(".gt.txt").to_owned();
            let expected = normalised(&std::fs::read_to_string(&truth).expect("truth"), false);
            let got = normalised(&std::fs::read_to_string(format!("{stem}.{engine}.txt")).unwrap_or_default(), false);
            errors += strsim::generic_levenshtein(&expected, &got);
            total += expected.len();
        }
        println!("{engine} {label}: CER {:.2}% ({errors} of {total} characters)", 100.0 * errors as f64 / total as f64);
    }
    if engine.starts_with("sluice") {
        for dpi in [150, 300] {
            let expected =
                normalised(&std::fs::read_to_string(dir.join(format!("scan-{dpi}.gt.txt"))).expect("truth"), false);
            for container in ["pdf", "tiff"] {
                let got = normalised(
                    &std::fs::read_to_string(dir.join(format!("scan-{dpi}.{container}.{engine}.txt")))
                        .unwrap_or_default(),
                    false,
                );
                let cer = 100.0 * strsim::generic_levenshtein(&expected, &got) as f64 / expected.len() as f64;
                println!("{engine} {container} {dpi} dpi: CER {cer:.2}%");
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("generate"), Some(dir)) => {
            generate(Path::new(dir));
            if let Some(corpus) = args.get(3) {
                generate_real(Path::new(dir), Path::new(corpus));
            }
        }
        (Some("read"), Some(dir)) => read(Path::new(dir)),
        (Some("pages"), Some(dir)) => match (args.get(3), args.get(4)) {
            (Some(prefix), Some(dpi)) => pages(Path::new(dir), prefix, dpi),
            _ => usage(),
        },
        (Some("score"), Some(dir)) => score(Path::new(dir), args.get(3).map_or("sluice", String::as_str)),
        (Some("chat-scan"), Some(dir)) => chat_scan(Path::new(dir)),
        (Some("scan"), Some(dir)) => scan(Path::new(dir)),
        (Some("read-lang"), Some(dir)) => read_lang(Path::new(dir)),
        (Some("score-lang"), Some(dir)) => {
            score_real(Path::new(dir), args.get(3).map_or("sluice", String::as_str), "lang-")
        }
        _ => usage(),
    }
}

fn usage() {
    eprintln!(
        "usage: bench-ocr generate DIR [CORPUS] | read DIR | pages DIR PREFIX DPI | chat-scan DIR \
         | score DIR [ENGINE] | scan DIR | read-lang DIR | score-lang DIR [ENGINE]"
    );
    std::process::exit(2);
}

/// Seconds per page for the PNGs of `dir` whose names start with `prefix`, at `dpi`, each read alone
/// with the time it would get on the chat path's 20 seconds: how long a page takes on the CPUs
/// this process may use (`taskset` narrows them), and whether it is read whole.
fn pages(dir: &Path, prefix: &str, dpi: &str) {
    sluice_ocr::engine().expect("the OCR engine (run under infra/local/bench-ocr)");
    let pngs = pngs_at(dir, prefix, dpi);
    let mut seconds = Vec::new();
    for png in &pngs {
        let name = png.file_name().and_then(|n| n.to_str()).expect("name");
        let bytes = std::fs::read(png).expect("read");
        let started = Instant::now();
        let extraction = extract(kind_for_filename(name).expect("kind"), &bytes, &chat_options()).expect("accepted");
        let took = started.elapsed().as_secs_f64();
        let text = extraction.text.unwrap_or_default();
        let whole = !text.contains("[Scanned pages read in part") && extraction.unreadable.is_none();
        println!("{name}: {took:.2} s, {}", if whole { "read whole" } else { "cut by the 20-second limit" });
        seconds.push(took);
    }
    seconds.sort_by(f64::total_cmp);
    if let Some(median) = seconds.get(seconds.len() / 2) {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!("{prefix}* at {dpi} dpi: {} pages on {cpus} CPU(s), median {median:.2} s a page", seconds.len());
    }
}

/// How the chat path reads an upload (the deployment's defaults): OCR of at most three
/// scanned pages at 150 dpi in the Latin script, within 20 seconds.
fn chat_options() -> ExtractOptions {
    let mut options = ExtractOptions::new(10_000_000).with_ocr(Some(OcrOptions {
        dpi: 150,
        max_pages: 3,
        alphabet: sluice_formats::OcrAlphabet::LATIN,
    }));
    options.time_limit = std::time::Duration::from_secs(20);
    options
}

/// A scanned PDF of the real set's densest pages (the LaTeX papers' 150-dpi pages, most
/// lines first) read as the chat path reads an upload: how many of its pages the chat's
/// 20 seconds read on the CPUs this process may use, and what the text says of the rest.
fn chat_scan(dir: &Path) {
    sluice_ocr::engine().expect("the OCR engine (run under infra/local/bench-ocr)");
    let mut dense: Vec<(usize, image::GrayImage)> = pngs_at(dir, "real-", "150")
        .into_iter()
        .filter(|png| !png.to_string_lossy().contains("google-doc"))
        .map(|png| {
            let truth = std::fs::read_to_string(png.with_extension("gt.txt")).expect("truth");
            (truth.len(), image::open(&png).expect("page").to_luma8())
        })
        .collect();
    dense.sort_by_key(|(chars, _)| std::cmp::Reverse(*chars));
    let pages: Vec<image::GrayImage> = dense.into_iter().take(4).map(|(_, page)| page).collect();
    let pdf = image_pdf(&pages, 150);
    let started = Instant::now();
    let extraction = extract(kind_for_filename("scan.pdf").expect("kind"), &pdf, &chat_options()).expect("accepted");
    let took = started.elapsed().as_secs_f64();
    let text = extraction.text.unwrap_or_default();
    let notes: Vec<&str> = text.lines().filter(|line| line.starts_with("[Scanned pages")).collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "a {}-page scanned PDF through the chat path's reading on {cpus} CPU(s): {took:.2} s, {} characters; {}",
        pages.len(),
        text.chars().count(),
        if notes.is_empty() { "every page read".to_owned() } else { notes.join(" ") }
    );
}

/// The multilingual set's clean pages scanned as the real pages are (a 1.2° skew, blur and
/// noise for the resolution named in the file's name).
fn scan(dir: &Path) {
    for clean in files(dir, "png") {
        let name = clean.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        let Some(stem) = name.strip_prefix("clean-").and_then(|n| n.strip_suffix(".png")) else { continue };
        let dpi: u32 = stem.rsplit('-').nth(1).and_then(|d| d.parse().ok()).expect("<name>-<dpi>-<page>");
        let page = image::open(&clean).expect("a clean page").to_luma8();
        let seed = u64::from(dpi) * 1000 + stem.len() as u64;
        let scan = sluice_fixtures::scanned(&page, dpi, 1.2, seed);
        std::fs::write(dir.join(format!("lang-{stem}.png")), png_of(&scan)).expect("png");
    }
}

/// Sluice reads every page of the multilingual set.
fn read_lang(dir: &Path) {
    sluice_ocr::engine().expect("the OCR engine (run under infra/local/bench-ocr-languages)");
    for dpi in [150, 300] {
        let pngs = pngs_at(dir, "lang-", &dpi.to_string());
        let started = Instant::now();
        for png in &pngs {
            let stem = png.file_stem().and_then(|s| s.to_str()).and_then(|s| s.strip_prefix("lang-")).expect("name");
            let alphabet = OcrAlphabet::for_languages(&[page_language(stem)]);
            std::fs::write(png.with_extension(format!("{}.txt", engine_label())), read_one(png, alphabet))
                .expect("write");
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "sluice, {dpi} dpi: {} pages in {seconds:.2} s = {:.2} s a page",
            pngs.len(),
            seconds / pngs.len().max(1) as f64
        );
    }
}
