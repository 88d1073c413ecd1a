//! OCR through the real engine (ONNX Runtime and PaddleOCR's models from the local stack's
//! provisioning): scanned PDF pages, TIFF pages and images become text, a text layer is
//! never OCRed, and the page caps name what they left out.

use sluice_fixtures::{
    LEFT_COLUMN as LEFT, RIGHT_COLUMN as RIGHT, image_pdf, pdf, pdf_two_columns, png_of, scanned, scanned_page, tiff_of,
};
use sluice_formats::{ExtractOptions, OcrOptions, extract, kind_for_filename};

const PAGE_ONE: &str = "Quarterly report for the harbour authority\nThe eastern pier was rebuilt in March\nVessel traffic rose by twelve percent";
const PAGE_TWO: &str = "Dredging of the northern channel begins in autumn\nThe pilot station moves to the lighthouse\nContact the harbour master for permits";

/// OCR on, with time to spare: these tests are about what is read, not how fast.
fn ocr(max_pages: u32) -> ExtractOptions {
    let mut options = ExtractOptions::new(100_000).with_ocr(Some(OcrOptions {
        dpi: 150,
        max_pages,
        alphabet: sluice_formats::OcrAlphabet::LATIN,
    }));
    options.time_limit = std::time::Duration::from_secs(120);
    options
}

/// Words of `expected` found in `text`, as a share.
fn recall(expected: &str, text: &str) -> f32 {
    let found: Vec<String> = text.split_whitespace().map(|w| w.to_lowercase()).collect();
    let words: Vec<&str> = expected.split_whitespace().collect();
    let hits = words.iter().filter(|w| found.contains(&w.to_lowercase())).count();
    hits as f32 / words.len() as f32
}

#[test]
fn a_scanned_pdf_is_read_page_by_page_and_marked_as_ocr() {
    let pages = [scanned_page(PAGE_ONE, 150, 1.5, 1), scanned_page(PAGE_TWO, 150, -1.0, 2)];
    let file = image_pdf(&pages, 150);
    let extraction = extract(kind_for_filename("scan.pdf").expect("pdf"), &file, &ocr(1000)).expect("read");
    let text = extraction.text.expect("text");
    eprintln!("{text}");
    assert!(recall(PAGE_ONE, &text) >= 0.8 && recall(PAGE_TWO, &text) >= 0.8, "{text}");
    assert_eq!(extraction.ocr_pages, Some(2));
    assert_eq!(extraction.ocr_spans.len(), 2);
    let second = &text[extraction.ocr_spans[1].0..extraction.ocr_spans[1].1];
    assert!(second.contains("lighthouse"), "{second}");
    // Without OCR the same file has no text to speak of.
    let plain =
        extract(kind_for_filename("scan.pdf").expect("pdf"), &file, &ExtractOptions::new(100_000)).expect("read");
    assert_eq!(plain.text.as_deref().map(str::trim), Some(""));
}

#[test]
fn two_columns_are_read_column_by_column_not_across() {
    let page = sluice_formats::pdf::render_pages(&pdf_two_columns(LEFT, RIGHT), 150).expect("render");
    let scan = scanned(&page[0].0, 150, 1.2, 11);
    let file = image_pdf(&[scan], 150);
    let extraction = extract(kind_for_filename("paper.pdf").expect("pdf"), &file, &ocr(10)).expect("read");
    let text = extraction.text.expect("text");
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle:?} is not in:\n{text}"));
    // The right column's first sentence follows the left column's last line.
    assert!(at("last line of the left") < at("right column begins"), "{text}");
    assert!(at("The harbour authority") < at("last line of the left"), "{text}");
    // No line of the text mixes the two columns.
    for line in text.lines() {
        let left = LEFT.iter().any(|l| line.contains(&l[..12]));
        let right = RIGHT.iter().any(|r| line.contains(&r[..12]));
        assert!(!(left && right), "a line across both columns: {line:?}");
    }
    assert!(recall(&LEFT.join(" "), &text) >= 0.9 && recall(&RIGHT.join(" "), &text) >= 0.9, "{text}");
}

#[test]
fn lines_read_with_low_confidence_are_kept_and_counted() {
    let clear = scanned_page(PAGE_ONE, 300, 0.5, 31);
    let smudged = imageproc::filter::gaussian_blur_f32(&scanned_page(PAGE_TWO, 150, 0.5, 32), 3.4);
    let read = |page: &image::GrayImage| {
        let file = image_pdf(std::slice::from_ref(page), 150);
        extract(kind_for_filename("scan.pdf").expect("pdf"), &file, &ocr(10)).expect("read")
    };
    let (clear, smudged) = (read(&clear), read(&smudged));
    assert_eq!(clear.ocr_low_confidence_lines, Some(0), "{:?}", clear.text);
    let low = smudged.ocr_low_confidence_lines.expect("counted");
    assert!(low > 0, "a smudged page reads with confidence: {:?}", smudged.text);
    let kept = smudged.text.as_deref().unwrap_or_default().lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(kept, 3, "its lines are kept, however poorly read: {:?}", smudged.text);
}

#[test]
fn a_text_layer_is_never_ocred() {
    let file = pdf(&[PAGE_ONE]);
    let extraction = extract(kind_for_filename("a.pdf").expect("pdf"), &file, &ocr(1000)).expect("read");
    assert_eq!(extraction.ocr_pages, None);
    assert!(extraction.ocr_spans.is_empty());
    assert!(extraction.text.expect("text").contains("eastern pier"));
}

#[test]
fn images_and_tiff_pages_are_read() {
    let page = scanned_page(PAGE_ONE, 150, 0.0, 3);
    let png = extract(kind_for_filename("a.png").expect("png"), &png_of(&page), &ocr(3)).expect("read");
    assert!(recall(PAGE_ONE, png.text.as_deref().unwrap_or("")) >= 0.8, "{png:?}");
    assert_eq!(png.dimensions, Some((page.width(), page.height())));
    let tiff = tiff_of(&[page, scanned_page(PAGE_TWO, 150, 0.5, 4)]);
    let read = extract(kind_for_filename("a.tiff").expect("tiff"), &tiff, &ocr(3)).expect("read");
    let text = read.text.expect("text");
    assert!(recall(PAGE_TWO, &text) >= 0.8, "{text}");
    assert_eq!(read.ocr_pages, Some(2));
    // Each page's place in the text, for the chunks' page citations.
    assert_eq!(read.page_starts.len(), 2, "{:?}", read.page_starts);
    assert_eq!(read.page_starts[0], (1, 0));
    let second = read.page_starts[1];
    assert_eq!(second.0, 2);
    assert!(text[second.1..].contains("Dredging") && !text[..second.1].contains("Dredging"), "{text}");
}

#[test]
fn pages_past_the_caps_are_named_not_read() {
    let page = scanned_page(PAGE_ONE, 150, 0.0, 5);
    let file = image_pdf(&[page.clone(), page.clone(), page], 150);
    // OCR reads one page; the document's page limit is two.
    let options = ocr(1).with_max_pages(2);
    let extraction = extract(kind_for_filename("a.pdf").expect("pdf"), &file, &options).expect("read");
    let text = extraction.text.expect("text");
    assert_eq!(extraction.ocr_pages, Some(1));
    assert!(text.contains("[Scanned pages not read: 2 (OCR reads at most 1 pages of a file here).]"), "{text}");
    assert!(text.ends_with("[Stopped after 2 of 3 pages: page 3 was not read.]"), "{text}");
}

#[test]
fn pages_the_time_limit_cannot_hold_are_named_and_the_rest_kept() {
    let page = scanned_page(PAGE_ONE, 150, 0.0, 6);
    let file = image_pdf(&[page.clone(), page.clone(), page.clone(), page], 150);
    let mut options = ocr(1000);
    options.time_limit = std::time::Duration::from_millis(1500);
    let extraction = extract(kind_for_filename("a.pdf").expect("pdf"), &file, &options).expect("read");
    assert_eq!(extraction.unreadable, None, "running out of time is not unreadable");
    let text = extraction.text.expect("text");
    // Whether the last page was read in part, skipped by OCR or never reached, it is named.
    let note = text.lines().last().expect("a note");
    let named = ((note.starts_with("[Scanned pages not read: ") || note.starts_with("[Scanned pages read in part: "))
        && note.ends_with("4 (the time limit ran out).]"))
        || (note.starts_with("[Page") && note.contains("4 w") && note.ends_with("not read: the time limit ran out.]"));
    assert!(named, "{text}");
    assert!(extraction.ocr_pages.unwrap_or(0) < 4, "{text}");
}

#[test]
fn an_image_ocr_had_no_time_for_says_so_instead_of_passing_for_a_picture() {
    let png = png_of(&scanned_page(PAGE_ONE, 150, 0.0, 7));
    let mut options = ocr(1);
    options.time_limit = std::time::Duration::from_millis(200);
    let extraction = extract(kind_for_filename("photo.png").expect("png"), &png, &options).expect("read");
    assert_eq!(extraction.text, None);
    let note = extraction.unreadable.expect("a note");
    assert!(note.starts_with("ocr: the image's text was not read: OCR ran out of the 200-millisecond limit"), "{note}");
    // With the time, the same image is read.
    let read = extract(kind_for_filename("photo.png").expect("png"), &png, &ocr(1)).expect("read");
    assert_eq!(read.unreadable, None);
    assert!(recall(PAGE_ONE, read.text.as_deref().unwrap_or_default()) >= 0.8, "{read:?}");
}

#[test]
fn a_page_the_time_cuts_short_keeps_its_beginning_in_reading_order() {
    let page = sluice_formats::pdf::render_pages(&pdf_two_columns(LEFT, RIGHT), 150).expect("render");
    let scan = scanned(&page[0].0, 150, 1.2, 12);
    let engine = sluice_ocr::engine().expect("the OCR engine");
    let whole = engine.read_until(&scan, sluice_ocr::Alphabet::LATIN, |_| false).expect("read");
    assert!(!whole.unfinished && whole.text.contains("pilot station on the northern pier"), "{}", whole.text);
    // Stopped once the first window of lines is read: the left column, first, is kept whole.
    let part = engine.read_until(&scan, sluice_ocr::Alphabet::LATIN, |windows| windows >= 1).expect("read in part");
    assert!(part.unfinished, "{part:?}");
    assert!(
        part.text.contains("The harbour authority") && part.text.contains("last line of the left"),
        "{}",
        part.text
    );
    assert!(!part.text.contains("pilot station on the northern pier"), "{}", part.text);
    assert!(part.lines < whole.lines, "{part:?}");
    assert!(whole.text.starts_with(&part.text[..40]), "the same beginning:\n{}\n---\n{}", part.text, whole.text);
    // Stopped before anything was read: no text is passed off as the page's.
    assert_eq!(engine.read_until(&scan, sluice_ocr::Alphabet::LATIN, |_| true), Err(sluice_ocr::OcrError::Time));
}

#[test]
fn a_table_and_a_figure_are_read_in_place_between_the_paragraphs_around_them() {
    use sluice_fixtures::Ink::{Figure, Rule, Text};
    let line = |y: f32, text: &'static str| Text { x: 72.0, y, size: 12.0, bold: false, text };
    let mut inks = vec![
        line(720.0, "The store keeps spare parts for every pump."),
        line(704.0, "Each part is counted at the end of the month."),
    ];
    // A ruled table of three columns, read row by row in place.
    for y in [690.0, 670.0, 650.0, 630.0] {
        inks.push(Rule { from: (70.0, y), to: (440.0, y) });
    }
    for (row, cells) in
        [["Part", "Code", "Count"], ["Lip seal", "LS-40", "12"], ["Gasket", "GK-7", "3"]].iter().enumerate()
    {
        for (column, text) in cells.iter().enumerate() {
            inks.push(Text {
                x: 76.0 + 130.0 * column as f32,
                y: 676.0 - 20.0 * row as f32,
                size: 12.0,
                bold: false,
                text,
            });
        }
    }
    // A figure with its caption under it, then the closing paragraph.
    inks.push(Figure { x: 72.0, y: 470.0, width: 300.0, height: 140.0 });
    inks.push(line(450.0, "Figure 1: the store room seen from the door."));
    inks.push(line(420.0, "Orders for new parts go to the harbour office."));
    let page = sluice_formats::pdf::render_pages(&sluice_fixtures::pdf_typeset(&[inks]), 150).expect("render");
    let file = image_pdf(&[scanned(&page[0].0, 150, 0.8, 21)], 150);
    let extraction = extract(kind_for_filename("store.pdf").expect("pdf"), &file, &ocr(10)).expect("read");
    let text = extraction.text.expect("text");
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle:?} is not in:\n{text}"));
    assert!(at("counted at the end") < at("Part"), "{text}");
    assert!(at("Part") < at("Lip seal") && at("Lip seal") < at("Gasket"), "{text}");
    assert!(at("Gasket") < at("Figure 1") && at("Figure 1") < at("Orders for new parts"), "{text}");
    // Each row of the table is read across, on one line.
    let row = text.lines().find(|l| l.contains("Lip seal")).expect("the row");
    assert!(row.contains("LS-40") && row.contains("12"), "{row:?} in:\n{text}");
    assert!(row.find("Lip seal") < row.find("LS-40") && row.find("LS-40") < row.find("12"), "{row:?}");
}

#[test]
fn straight_and_curly_quotes_are_read_as_printed() {
    use sluice_fixtures::Ink::Text;
    let line = |y: f32, text: &'static str| Text { x: 72.0, y, size: 11.0, bold: false, text };
    let inks = vec![
        line(720.0, "The clerk wrote \"closed\" on the gate of the quay."),
        line(700.0, "The pilots call it \u{201c}the old channel\u{201d} to this day."),
        line(680.0, "Set the flag to \"on\" and the lamp to \"slow\" at dusk."),
        line(660.0, "Her note said \u{201c}no berth\u{201d} and \u{201c}no tug\u{201d} twice."),
    ];
    let pdf = sluice_fixtures::pdf_typeset(&[inks]);
    for dpi in [150, 300] {
        let page = sluice_formats::pdf::render_pages(&pdf, dpi).expect("render");
        let file = image_pdf(&[scanned(&page[0].0, dpi, 0.6, 41)], dpi);
        let extraction = extract(kind_for_filename("quotes.pdf").expect("pdf"), &file, &ocr(10)).expect("read");
        let text = extraction.text.expect("text");
        let line = |needle: &str| {
            text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} at {dpi} dpi in:\n{text}"))
        };
        for straight in [line("clerk"), line("lamp")] {
            assert!(
                straight.contains('"') && !straight.contains(['\u{201c}', '\u{201d}']),
                "{straight:?} at {dpi} dpi"
            );
        }
        for curly in [line("pilots"), line("berth")] {
            assert!(curly.contains(['\u{201c}', '\u{201d}']) && !curly.contains('"'), "{curly:?} at {dpi} dpi");
        }
    }
}

#[test]
fn a_latin_page_reads_alike_with_the_latin_recognizer_and_the_whole_one() {
    let scan = scanned_page(PAGE_ONE, 150, 1.0, 21);
    let engine = sluice_ocr::engine().expect("the OCR engine");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let latin = engine.read(&scan, sluice_ocr::Alphabet::LATIN, deadline).expect("latin");
    let all = engine.read(&scan, sluice_ocr::Alphabet::ALL, deadline).expect("every character");
    for read in [&latin, &all] {
        assert!(recall(PAGE_ONE, &read.text) >= 0.9, "{}", read.text);
    }
    // The Latin recognizer is the whole one with its other classes cut: on a Latin page they
    // agree but where the whole one strays outside the Latin script.
    let (ours, theirs): (Vec<&str>, Vec<&str>) =
        (latin.text.split_whitespace().collect(), all.text.split_whitespace().collect());
    let differing = ours.iter().zip(&theirs).filter(|(a, b)| a != b).count() + ours.len().abs_diff(theirs.len());
    assert!(differing <= 1, "{differing} words differ:\n{}\n---\n{}", latin.text, all.text);
}

/// Turkish prose with its dotless `ı` and dotted `İ`, which the recognizer often reads as `i`.
const TURKISH: &[&str] = &[
    "Limanın kuzey kanalında ışıklı şamandıralar yenilendi",
    "Kıyı güvenliği için yapılan çalışmalar ilkbaharda başlayacak",
    "İskele yöneticisi tüm kaptanlara yazılı izin verecek",
    "Gemi trafiği soğuk geçen kışın ardından yüzde on iki arttı",
];

/// French prose printed with the typographic apostrophe, which the recognizer often reads as `'`.
const FRENCH: &[&str] = &[
    "L’autorité du port a publié aujourd’hui l’avis d’ouverture",
    "qu’il s’agisse d’un navire ou d’une barge, l’accès est limité",
    "jusqu’à l’arrivée du pilote et l’accord de l’écluse",
];

/// English prose printed with the straight apostrophe.
const ENGLISH_STRAIGHT: &[&str] =
    &["The harbour's pilots don't sail at night", "it's the master's rule and the crew's too"];

/// A page of `lines` set in DejaVu Sans (provisioned by the stack: Debian's fonts-dejavu-core),
/// scanned at 150 dpi.
fn printed_scan(lines: &[&str], seed: u64) -> image::GrayImage {
    let font = std::fs::read("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").expect("DejaVu Sans");
    let page = sluice_fixtures::printed_page(lines, &font, 150).expect("a font");
    scanned(&page, 150, 1.0, seed)
}

#[test]
fn a_page_s_languages_read_their_letters_where_the_recognizer_ranks_a_look_alike_first() {
    let engine = sluice_ocr::engine().expect("the OCR engine");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let scan = printed_scan(TURKISH, 41);
    let turkish = engine.read(&scan, sluice_ocr::Alphabet::for_languages(&["tur"]), deadline).expect("turkish");
    let latin = engine.read(&scan, sluice_ocr::Alphabet::LATIN, deadline).expect("latin");
    let dotless: Vec<&str> =
        TURKISH.iter().flat_map(|line| line.split_whitespace()).filter(|w| w.contains(['ı', 'İ'])).collect();
    let found = |text: &str| dotless.iter().filter(|word| text.split_whitespace().any(|w| w == **word)).count();
    assert_eq!(
        found(&turkish.text),
        dotless.len(),
        "every word with `ı` or `İ`:\n{}\n---\n{}",
        turkish.text,
        latin.text
    );
    assert!(found(&latin.text) < dotless.len(), "a page not Turkish reads some as `i`:\n{}", latin.text);
}

#[test]
fn a_page_s_apostrophes_are_read_the_one_way_it_prints_them() {
    let engine = sluice_ocr::engine().expect("the OCR engine");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let french = engine.read(&printed_scan(FRENCH, 42), sluice_ocr::Alphabet::LATIN, deadline).expect("french");
    let printed = |lines: &[&str], apostrophe: char| lines.iter().map(|l| l.matches(apostrophe).count()).sum::<usize>();
    assert_eq!(french.text.matches('’').count(), printed(FRENCH, '’'), "{}", french.text);
    assert!(!french.text.contains('\''), "{}", french.text);
    let english =
        engine.read(&printed_scan(ENGLISH_STRAIGHT, 43), sluice_ocr::Alphabet::LATIN, deadline).expect("english");
    assert_eq!(english.text.matches('\'').count(), printed(ENGLISH_STRAIGHT, '\''), "{}", english.text);
    assert!(!english.text.contains('’'), "{}", english.text);
}

/// Russian prose as a port's report would print it.
const RUSSIAN: &[&str] = &[
    "Отчёт управления порта за первый квартал",
    "Судоходство в северном канале было приостановлено",
    "Углубление фарватера начнётся осенью",
    "Владельцы лодок должны получить новые разрешения",
];

/// Greek prose, its final sigma `ς` and tonos accents in it.
const GREEK: &[&str] = &[
    "Η λιμενική αρχή ανακοίνωσε νέους κανόνες ναυσιπλοΐας",
    "Οι εργασίες στον βόρειο μώλο θα αρχίσουν το φθινόπωρο",
    "Όλοι οι πλοίαρχοι πρέπει να λάβουν γραπτή άδεια",
];

#[test]
fn russian_and_greek_pages_are_read_by_tesseract_in_their_own_letters() {
    let engine = sluice_ocr::engine().expect("the OCR engine");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // Greek alone: beside English, Tesseract reads a capital both alphabets draw alike (`Η`)
    // as the Latin one (docs/ocr.md).
    for (lines, languages, seed) in [(RUSSIAN, &["rus", "eng"][..], 44), (GREEK, &["ell"][..], 45)] {
        let scan = printed_scan(lines, seed);
        let alphabet = sluice_ocr::Alphabet::for_languages(languages);
        assert!(alphabet.by_tesseract(), "{languages:?}");
        let read = engine.read(&scan, alphabet, deadline).expect("read");
        let expected = lines.join("\n");
        assert!(recall(&expected, &read.text) >= 0.95, "{languages:?}:\n{}", read.text);
        assert_eq!(read.lines, lines.len(), "{}", read.text);
        assert!(!read.unfinished);
        // PaddleOCR's recognizer, asked to read the same page, reads next to none of it.
        let latin = engine.read(&scan, sluice_ocr::Alphabet::ALL, deadline).expect("read");
        assert!(recall(&expected, &latin.text) < 0.2, "{}", latin.text);
    }
}

#[test]
fn a_page_tesseract_is_stopped_on_keeps_what_it_read_or_says_it_had_no_time() {
    let engine = sluice_ocr::engine().expect("the OCR engine");
    let scan = printed_scan(RUSSIAN, 46);
    let russian = sluice_ocr::Alphabet::for_languages(&["rus"]);
    let mut asked = Vec::new();
    let part = engine
        .read_until(&scan, russian, |lines| {
            asked.push(lines);
            lines >= 2
        })
        .expect("its beginning");
    assert!(part.unfinished, "{asked:?} {}", part.text);
    assert_eq!(asked, [0, 1, 2], "asked before each line until told to stop");
    assert_eq!(part.text, format!("{}\n{}\n", RUSSIAN[0], RUSSIAN[1]), "its first two lines");
    let none = engine.read_until(&scan, russian, |_| true);
    assert_eq!(none, Err(sluice_ocr::OcrError::Time));
}
