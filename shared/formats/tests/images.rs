//! The images a collection describes: found in PDF, DOCX, PPTX, ODT and image files,
//! placed in the text where they sit, icons and repeats left out.

use sluice_fixtures::{Ink, docx_picture, docx_with_media, pdf_typeset, png, zip_bytes};
use sluice_formats::images::{FoundImage, ImageOptions, SkipReason};
use sluice_formats::{ExtractOptions, Extraction, check_upload, extract};

fn read(name: &str, bytes: &[u8], markdown: bool, max_images: u32) -> Extraction {
    let accepted = check_upload(name, None, bytes).unwrap_or_else(|r| panic!("{name} refused: {r:?}"));
    let options = ExtractOptions::new(200_000).with_markdown(markdown).with_images(Some(ImageOptions { max_images }));
    extract(accepted.kind, bytes, &options).unwrap_or_else(|r| panic!("{name} refused: {r:?}"))
}

fn body<'a>(y: f32, text: &'a str) -> Ink<'a> {
    Ink::Text { x: 72.0, y, size: 10.0, bold: false, text }
}

fn picture(y: f32, pixels: (u32, u32), shade: u8) -> Ink<'static> {
    Ink::Picture { x: 72.0, y, width: 300.0, height: 150.0, pixels, shade }
}

/// A chart between two paragraphs on page 1, the same chart again and an icon on page 2,
/// then another picture at page 2's foot.
fn report() -> Vec<u8> {
    let first = vec![
        Ink::Text { x: 72.0, y: 720.0, size: 18.0, bold: true, text: "Harbour traffic" },
        body(690.0, "Ships calling at the harbour, by month, are shown below."),
        picture(520.0, (240, 120), 10),
        body(490.0, "Traffic fell in the winter, as every year."),
    ];
    let second = vec![
        body(720.0, "The same chart again, for reference."),
        picture(550.0, (240, 120), 10),
        Ink::Picture { x: 72.0, y: 500.0, width: 12.0, height: 12.0, pixels: (16, 16), shade: 99 },
        body(480.0, "And the dredged depth at each berth:"),
        picture(300.0, (200, 200), 200),
    ];
    pdf_typeset(&[first, second])
}

fn between<'a>(text: &'a str, image: &FoundImage) -> (&'a str, &'a str) {
    (text[..image.offset].trim_end(), text[image.offset..].trim_start())
}

#[test]
fn a_pdf_s_pictures_are_placed_where_they_sit_once_each_and_icons_are_left_out() {
    assert!(std::env::var_os("PDFIUM_LIB_PATH").is_some(), "run with infra/local/test, which provisions PDFium");
    let extraction = read("report.pdf", &report(), true, 50);
    let text = extraction.text.as_deref().unwrap_or_else(|| panic!("no text: {:?}", extraction.unreadable));
    assert_eq!(extraction.images.len(), 2, "{:?}", extraction.images_skipped);
    let (chart, depths) = (&extraction.images[0], &extraction.images[1]);
    let (before, after) = between(text, chart);
    assert!(before.ends_with("by month, are shown below."), "{before:?}");
    assert!(after.starts_with("Traffic fell in the winter"), "{after:?}");
    assert_eq!((chart.page, chart.width, chart.height, chart.media_type.as_str()), (1, 240, 120, "image/png"));
    // The second picture is at page 2's foot, after its last paragraph.
    assert_eq!(depths.page, 2);
    assert!(between(text, depths).0.ends_with("at each berth:"));
    assert_eq!(depths.offset, text.len());
    assert_eq!(extraction.images_skipped, [(SkipReason::TooSmall, 1)]);
    // A block boundary: the text reads as it would without the pictures.
    let accepted = check_upload("report.pdf", None, &report()).expect("accepted");
    let plain = extract(accepted.kind, &report(), &ExtractOptions::new(200_000).with_markdown(true)).expect("read");
    assert_eq!(plain.text.as_deref(), Some(text));
    assert!(text.contains("shown below.\n\nTraffic fell"), "{text}");

    // As flat text, a picture goes at its page's end.
    let flat = read("report.pdf", &report(), false, 50);
    let flat_text = flat.text.as_deref().expect("text");
    let page_two = flat.page_starts[1].1;
    assert_eq!(flat.images[0].offset, page_two, "page 1's picture at page 1's end");
    assert_eq!(flat.images[0].page, 1);

    // Past max_images, the rest are named as skipped.
    let one = read("report.pdf", &report(), true, 1);
    assert_eq!(one.images.len(), 1);
    assert_eq!(one.images_skipped, [(SkipReason::TooSmall, 1), (SkipReason::OverMaxImages, 1)]);
    assert!(flat_text.contains("Traffic fell"));
}

#[test]
fn nothing_is_gathered_unless_asked() {
    let accepted = check_upload("report.pdf", None, &report()).expect("accepted");
    let extraction = extract(accepted.kind, &report(), &ExtractOptions::new(200_000)).expect("read");
    assert!(extraction.images.is_empty() && extraction.images_skipped.is_empty());
}

#[test]
fn a_docx_s_pictures_follow_the_paragraph_they_sit_in() {
    let body = format!(
        "<w:p><w:r><w:t>The berth plan:</w:t></w:r></w:p>{}<w:p><w:r><w:t>Berths close in turn.</w:t></w:r></w:p>{}{}{}",
        docx_picture("rIdPlan"),
        docx_picture("rIdPlan"),
        docx_picture("rIdWeb"),
        docx_picture("rIdIcon"),
    );
    let bytes = docx_with_media(&body, &[("rIdPlan", png(200, 100, 7)), ("rIdIcon", png(16, 16, 8))]);
    for markdown in [true, false] {
        let extraction = read("plan.docx", &bytes, markdown, 50);
        let text = extraction.text.as_deref().expect("text");
        assert_eq!(extraction.images.len(), 1, "{markdown}: {:?}", extraction.images_skipped);
        let (before, after) = between(text, &extraction.images[0]);
        assert!(before.ends_with("The berth plan:"), "{markdown}: {before:?}");
        assert!(after.starts_with("Berths close in turn."), "{markdown}: {after:?}");
        assert_eq!(extraction.images[0].bytes, png(200, 100, 7), "a PNG that fits is sent as it is");
        assert_eq!(extraction.images_skipped, [(SkipReason::TooSmall, 1), (SkipReason::NotInFile, 1)]);
    }
}

#[test]
fn a_slide_s_picture_is_placed_after_the_shapes_before_it() {
    const P: &str = r#"xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships""#;
    let slide = format!(
        "<p:sld {P}><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r><a:t>Quarterly volumes</a:t></a:r></a:p></p:txBody></p:sp>\
         <p:pic><p:blipFill><a:blip r:embed=\"rId2\"/></p:blipFill></p:pic>\
         <p:sp><p:txBody><a:p><a:r><a:t>Volumes rose in May.</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
    );
    let rels = r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="../media/image1.png"/></Relationships>"#;
    let chart = png(320, 200, 40);
    let bytes = zip_bytes(&[
        ("[Content_Types].xml", b"<Types/>"),
        ("ppt/presentation.xml", b"<p:presentation/>"),
        ("ppt/slides/slide1.xml", slide.as_bytes()),
        ("ppt/slides/_rels/slide1.xml.rels", rels.as_bytes()),
        ("ppt/media/image1.png", &chart),
    ]);
    let extraction = read("deck.pptx", &bytes, true, 50);
    let text = extraction.text.as_deref().expect("text");
    assert_eq!(extraction.images.len(), 1, "{:?} in {text}", extraction.images_skipped);
    let (before, after) = between(text, &extraction.images[0]);
    assert!(before.ends_with("Quarterly volumes"), "{before:?}");
    assert!(after.starts_with("Volumes rose in May."), "{after:?}");
}

#[test]
fn an_odt_s_picture_follows_its_paragraph() {
    let content = r#"<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink"><office:body><office:text><text:p>Before the map.</text:p><text:p><draw:frame><draw:image xlink:href="Pictures/map.png"/></draw:frame></text:p><text:p>After the map.</text:p></office:text></office:body></office:document-content>"#;
    let map = png(150, 150, 3);
    let bytes = zip_bytes(&[
        ("mimetype", b"application/vnd.oasis.opendocument.text"),
        ("content.xml", content.as_bytes()),
        ("Pictures/map.png", &map),
    ]);
    let extraction = read("map.odt", &bytes, true, 50);
    let text = extraction.text.as_deref().expect("text");
    assert_eq!(extraction.images.len(), 1, "{:?}", extraction.images_skipped);
    let (before, after) = between(text, &extraction.images[0]);
    assert_eq!((before, after), ("Before the map.", "After the map."));
}

#[test]
fn an_image_file_is_itself_the_picture_after_its_text() {
    let photo = png(400, 300, 90);
    let extraction = read("whiteboard.png", &photo, true, 50);
    assert_eq!(extraction.text, None, "no OCR asked, no text");
    assert_eq!(extraction.images.len(), 1);
    assert_eq!((extraction.images[0].offset, extraction.images[0].width), (0, 400));
}
