//! Office documents, spreadsheets and PDFs built in code (benign and hostile), through the
//! same check and extraction the upload path runs.

use sluice_fixtures::{W, docx, pdf, xlsx, zip};
use sluice_formats::{ExtractOptions, Extraction, Refusal, check_upload, extract};

fn run(name: &str, bytes: &[u8]) -> Result<Extraction, Refusal> {
    run_with(name, bytes, ExtractOptions::new(200_000))
}

fn run_with(name: &str, bytes: &[u8], options: ExtractOptions) -> Result<Extraction, Refusal> {
    let accepted = check_upload(name, None, bytes)?;
    extract(accepted.kind, bytes, &options)
}

fn text(name: &str, bytes: &[u8]) -> String {
    let extraction = run(name, bytes).unwrap_or_else(|r| panic!("{name} refused: {r:?}"));
    extraction.text.unwrap_or_else(|| panic!("{name} has no text: {:?}", extraction.unreadable))
}

#[test]
fn docx_paragraphs_tables_headers_and_footers() {
    let body = "<w:p><w:r><w:t>First paragraph</w:t></w:r><w:r><w:tab/><w:t xml:space=\"preserve\"> &amp; more</w:t></w:r></w:p>\
                <w:tbl><w:tr><w:tc><w:p><w:r><w:t>a1</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b1</w:t></w:r></w:p></w:tc></w:tr>\
                <w:tr><w:tc><w:p><w:r><w:t>a2</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b2</w:t></w:r></w:p></w:tc></w:tr></w:tbl>\
                <w:p><w:r><w:instrText>PAGE</w:instrText><w:t>Last</w:t></w:r></w:p>";
    assert_eq!(
        text("report.docx", &docx(body)),
        "Quarterly header\nFirst paragraph\t & more\na1\tb1\na2\tb2\nLast\nPage footer"
    );
}

#[test]
fn pptx_shapes_tables_and_notes() {
    const A: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
    let slide = |n: u32, body: &str| {
        (format!("ppt/slides/slide{n}.xml"), format!("<p:sld {A}><p:cSld>{body}</p:cSld></p:sld>"))
    };
    let (s1, b1) = slide(
        1,
        "<a:p><a:r><a:t>Title one</a:t></a:r></a:p><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>x</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>y</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl>",
    );
    let (s2, b2) = slide(2, "<a:p><a:r><a:t>Second</a:t></a:r></a:p>");
    let (s10, b10) = slide(10, "<a:p><a:r><a:t>Tenth</a:t></a:r></a:p>");
    let rels = r#"<Relationships><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide" Target="../notesSlides/notesSlide7.xml"/></Relationships>"#;
    let notes = format!(
        "<p:notes {A}><a:p><a:r><a:t>Speaker note</a:t></a:r></a:p><a:p><a:fld type=\"slidenum\"><a:t>1</a:t></a:fld></a:p></p:notes>"
    );
    let bytes = zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("ppt/presentation.xml", "<p:presentation/>"),
        (&s10, &b10),
        (&s1, &b1),
        (&s2, &b2),
        ("ppt/slides/_rels/slide1.xml.rels", rels),
        ("ppt/notesSlides/notesSlide7.xml", &notes),
    ]);
    assert_eq!(
        text("deck.pptx", &bytes),
        "--- Slide 1 ---\nTitle one\nx\ty\nNotes:\nSpeaker note\n--- Slide 2 ---\nSecond\n--- Slide 3 ---\nTenth"
    );
}

const ODF: &str = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0""#;

fn odf(mimetype: &str, body: &str) -> Vec<u8> {
    zip(&[
        ("mimetype", mimetype),
        (
            "content.xml",
            &format!("<office:document-content {ODF}><office:body>{body}</office:body></office:document-content>"),
        ),
    ])
}

#[test]
fn odt_paragraphs_headings_lists_and_tables() {
    let body = "<office:text><text:h>Heading</text:h><text:p>Para<text:s text:c=\"2\"/>with <text:span>span</text:span></text:p>\
                <text:list><text:list-item><text:p>item one</text:p></text:list-item></text:list>\
                <table:table><table:table-row><table:table-cell><text:p>c1</text:p></table:table-cell><table:table-cell><text:p>c2</text:p></table:table-cell></table:table-row></table:table></office:text>";
    assert_eq!(
        text("doc.odt", &odf("application/vnd.oasis.opendocument.text", body)),
        "Heading\nPara  with span\nitem one\nc1\tc2"
    );
}

fn markdown(name: &str, bytes: &[u8]) -> String {
    let extraction = run_with(name, bytes, ExtractOptions::new(200_000).with_markdown(true))
        .unwrap_or_else(|r| panic!("{name} refused: {r:?}"));
    assert!(extraction.markdown, "{name} is written as markdown");
    extraction.text.unwrap_or_else(|| panic!("{name} has no text: {:?}", extraction.unreadable))
}

#[test]
fn docx_as_markdown_keeps_headings_lists_and_tables() {
    let styles = format!(
        "<w:styles {W}><w:style w:type=\"paragraph\" w:styleId=\"Kop1\"><w:name w:val=\"heading 1\"/></w:style>\
         <w:style w:type=\"paragraph\" w:styleId=\"Outlined\"><w:name w:val=\"Chapter\"/><w:pPr><w:outlineLvl w:val=\"1\"/></w:pPr></w:style></w:styles>"
    );
    let numbering = format!(
        "<w:numbering {W}><w:abstractNum w:abstractNumId=\"4\"><w:lvl w:ilvl=\"0\"><w:numFmt w:val=\"decimal\"/></w:lvl>\
         <w:lvl w:ilvl=\"1\"><w:numFmt w:val=\"bullet\"/></w:lvl></w:abstractNum><w:num w:numId=\"7\"><w:abstractNumId w:val=\"4\"/></w:num></w:numbering>"
    );
    let para = |props: &str, text: &str| format!("<w:p><w:pPr>{props}</w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>");
    let body = [
        para("<w:pStyle w:val=\"Title\"/>", "Pump manual"),
        para("<w:pStyle w:val=\"Kop1\"/>", "Installing"),
        para("", "Bolt the frame down."),
        para("<w:numPr><w:ilvl w:val=\"0\"/><w:numId w:val=\"7\"/></w:numPr>", "Level the base"),
        para("<w:numPr><w:ilvl w:val=\"1\"/><w:numId w:val=\"7\"/></w:numPr>", "check twice"),
        para("<w:pStyle w:val=\"Heading3\"/>", ""),
        para("<w:pStyle w:val=\"Outlined\"/>", "Seals"),
        "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Part</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>Code</w:t></w:r></w:p></w:tc></w:tr>\
         <w:tr><w:tc><w:p><w:pPr><w:pStyle w:val=\"Kop1\"/></w:pPr><w:r><w:t>Lip seal</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>LS|40</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
            .to_owned(),
        para("", "# Not a heading"),
    ]
    .concat();
    let bytes = zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", &format!("<w:document {W}><w:body>{body}</w:body></w:document>")),
        ("word/styles.xml", &styles),
        ("word/numbering.xml", &numbering),
    ]);
    assert_eq!(
        markdown("manual.docx", &bytes),
        "# Pump manual\n\n# Installing\n\nBolt the frame down.\n\n1. Level the base\n  - check twice\n\n## Seals\n\n\
         | Part | Code |\n| --- | --- |\n| Lip seal | LS\\|40 |\n\n\\# Not a heading"
    );
    // The same document as text is what it always was.
    assert_eq!(
        text("manual.docx", &bytes),
        "Pump manual\nInstalling\nBolt the frame down.\nLevel the base\ncheck twice\nSeals\nPart\tCode\nLip seal\tLS|40\n# Not a heading"
    );
}

#[test]
fn odt_as_markdown_keeps_outline_levels_lists_and_tables() {
    let body = "<office:automatic-styles><text:list-style style:name=\"L2\" xmlns:style=\"urn:oasis:names:tc:opendocument:xmlns:style:1.0\">\
                <text:list-level-style-number text:level=\"1\"/></text:list-style></office:automatic-styles>\
                <office:text><text:h text:outline-level=\"1\">Heading</text:h><text:h text:outline-level=\"2\">Sub</text:h>\
                <text:p>Para<text:s text:c=\"2\"/>with <text:span>span</text:span></text:p>\
                <text:list><text:list-item><text:p>item one</text:p><text:list><text:list-item><text:p>inner</text:p></text:list-item></text:list></text:list-item></text:list>\
                <text:list text:style-name=\"L2\"><text:list-item><text:p>first</text:p></text:list-item></text:list>\
                <table:table><table:table-row><table:table-cell><text:p>c1</text:p></table:table-cell><table:table-cell><text:p>c2</text:p></table:table-cell></table:table-row>\
                <table:table-row><table:table-cell><text:p>d1</text:p></table:table-cell></table:table-row></table:table></office:text>";
    assert_eq!(
        markdown("doc.odt", &odf("application/vnd.oasis.opendocument.text", body)),
        "# Heading\n\n## Sub\n\nPara  with span\n\n- item one\n  - inner\n\n1. first\n\n| c1 | c2 |\n| --- | --- |\n| d1 |  |"
    );
}

#[test]
fn html_as_markdown_keeps_headings_lists_tables_and_link_text_but_never_scripts() {
    let html = "<html><head><title>T</title><style>p{}</style></head><body><h1>Guide</h1>\
                <p>Read <a href=\"https://x\">the manual</a> first.<br>Then go.</p><script>alert(1)</script>\
                <ul><li>one<ol><li>inner</li></ol></li><li>two</li></ul><h3>Parts &amp; codes</h3>\
                <table><tr><th>Part</th><th>Code</th></tr><tr><td>Seal</td><td>S-1<table><tr><td>nested</td></tr></table></td></tr></table>\
                <div>After</div></body></html>";
    assert_eq!(
        markdown("page.html", html.as_bytes()),
        "# Guide\n\nRead the manual first.\nThen go.\n\n- one\n  1. inner\n- two\n\n### Parts & codes\n\n\
         | Part | Code |\n| --- | --- |\n| Seal | S-1 nested |\n\nAfter"
    );
    // As text, an HTML file is the file itself.
    assert_eq!(text("page.html", html.as_bytes()), html);
}

#[test]
fn markdown_is_asked_of_formats_without_structure_and_they_stay_text() {
    let extraction = run_with("notes.txt", b"# a\nb", ExtractOptions::new(1000).with_markdown(true)).expect("accepted");
    assert!(!extraction.markdown);
    assert_eq!(extraction.text.as_deref(), Some("# a\nb"));
}

#[test]
fn markdown_stays_within_the_budget() {
    let html = format!("<h1>Title</h1><p>{}</p>", "word ".repeat(1000));
    let extraction = run_with("big.html", html.as_bytes(), ExtractOptions::new(100).with_markdown(true)).expect("ok");
    assert!(extraction.truncated);
    let text = extraction.text.expect("text");
    assert!(text.starts_with("# Title\n\nword word"), "{text}");
    assert_eq!(text.split("\n\n[The rest").next().map(|t| t.chars().count()), Some(100));
}

#[test]
fn odp_slides_and_notes() {
    let body = "<office:presentation><draw:page><draw:frame><draw:text-box><text:p>Slide text</text:p></draw:text-box></draw:frame>\
                <presentation:notes><draw:frame><draw:text-box><text:p>A note</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>\
                <draw:page><draw:frame><draw:text-box><text:p>Two</text:p></draw:text-box></draw:frame></draw:page></office:presentation>";
    assert_eq!(
        text("talk.odp", &odf("application/vnd.oasis.opendocument.presentation", body)),
        "--- Slide 1 ---\nSlide text\nNotes:\nA note\n--- Slide 2 ---\nTwo"
    );
}

#[test]
fn ods_sheets_are_named_and_a_billion_row_declaration_costs_nothing() {
    let body = "<office:spreadsheet><table:table table:name=\"Sales\">\
        <table:table-row><table:table-cell><text:p>month</text:p></table:table-cell><table:table-cell table:number-columns-repeated=\"3\"/><table:table-cell><text:p>total</text:p></table:table-cell></table:table-row>\
        <table:table-row table:number-rows-repeated=\"1000000000\"><table:table-cell table:number-columns-repeated=\"16384\"/></table:table-row>\
        <table:table-row><table:table-cell><text:p>jan</text:p></table:table-cell><table:table-cell><text:p>10</text:p></table:table-cell></table:table-row>\
        </table:table><table:table table:name=\"Empty\"/></office:spreadsheet>";
    let started = std::time::Instant::now();
    let extraction = run("book.ods", &odf("application/vnd.oasis.opendocument.spreadsheet", body)).expect("accepted");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(extraction.text.as_deref(), Some("Sheet: Sales\nmonth\t\t\t\ttotal\njan\t10\nSheet: Empty"));
    assert_eq!(extraction.cells, Some(4));
}

#[test]
fn xlsx_rows_are_streamed_tab_separated() {
    let rows = r#"<row r="1"><c r="A1" t="inlineStr"><is><t>name</t></is></c><c r="C1" t="inlineStr"><is><t>qty</t></is></c></row><row r="3"><c r="A3" t="inlineStr"><is><t>bolt</t></is></c><c r="C3"><v>12</v></c></row>"#;
    let extraction = run("stock.xlsx", &xlsx(rows)).expect("accepted");
    assert_eq!(extraction.text.as_deref(), Some("Sheet: Data\nname\t\tqty\nbolt\t\t12"));
    assert_eq!(extraction.cells, Some(4));
}

#[test]
fn the_budget_stops_a_spreadsheet_early_and_says_so() {
    let rows: String = (1..=2000).map(|r| format!(r#"<row r="{r}"><c r="A{r}"><v>{r}</v></c></row>"#)).collect();
    let extraction = run_with("big.xlsx", &xlsx(&rows), ExtractOptions::new(100)).expect("accepted");
    assert!(extraction.truncated);
    let text = extraction.text.expect("text");
    assert!(text.contains("[The rest of this document was left out"), "{text}");
    assert!(text.chars().count() < 300);
}

#[test]
fn an_entity_declaration_in_any_part_refuses_the_file() {
    let bomb = "<!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;&lol;\">]>";
    let bytes = zip(&[
        ("[Content_Types].xml", "<Types/>"),
        (
            "word/document.xml",
            &format!("{bomb}<w:document {W}><w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>"),
        ),
    ]);
    let refusal = run("bomb.docx", &bytes).expect_err("refused");
    assert_eq!(refusal.code.as_str(), "xml_doctype");
    let bytes = xlsx_with_doctype_in_rels();
    assert_eq!(run("bomb.xlsx", &bytes).expect_err("refused").code.as_str(), "xml_doctype");
}

fn xlsx_with_doctype_in_rels() -> Vec<u8> {
    zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("_rels/.rels", "<!DOCTYPE x SYSTEM \"http://example.com/x.dtd\"><Relationships/>"),
    ])
}

#[test]
fn duplicate_part_names_refuse_the_file_also_case_folded() {
    let folded =
        zip(&[("[Content_Types].xml", "<Types/>"), ("word/document.xml", "<a/>"), ("Word/Document.xml", "<b/>")]);
    assert_eq!(run("dup.docx", &folded).expect_err("refused").code.as_str(), "duplicate_path");
    // Two parts with the very same name: written under distinct names of equal length,
    // then renamed in the bytes (zip writers refuse to write a duplicate).
    let mut exact =
        zip(&[("[Content_Types].xml", "<Types/>"), ("word/document.xml", "<a/>"), ("word/documenX.xml", "<b/>")]);
    let needle = b"word/documenX.xml";
    let mut i = 0;
    while let Some(pos) = exact[i..].windows(needle.len()).position(|w| w == needle) {
        exact[i + pos + needle.len() - 5] = b't';
        i += pos + needle.len();
    }
    assert_eq!(run("dup.docx", &exact).expect_err("refused").code.as_str(), "duplicate_path");
}

#[test]
fn a_member_past_the_ratio_or_size_limit_refuses_the_file() {
    let huge = "a".repeat(3 << 20);
    let bytes = zip(&[("[Content_Types].xml", "<Types/>"), ("word/document.xml", &huge)]);
    assert_eq!(run("ratio.docx", &bytes).expect_err("refused").code.as_str(), "ratio_exceeded");
}

#[test]
fn truncated_documents_are_unreadable_not_errors() {
    let whole = docx("<w:p><w:r><w:t>hello</w:t></w:r></w:p>");
    for cut in [whole.len() / 2, whole.len() - 10, 40] {
        let extraction = run("cut.docx", &whole[..cut]).expect("a truncated container is accepted as unreadable");
        assert_eq!(extraction.text, None);
        assert!(extraction.unreadable.is_some());
    }
    let extraction = run("bad.xlsx", b"PK\x03\x04 this is not really a zip").expect("accepted");
    assert!(extraction.unreadable.is_some());
}

fn require_pdfium() {
    assert!(
        std::env::var_os("PDFIUM_LIB_PATH").is_some(),
        "PDFIUM_LIB_PATH is not set: run the tests with `infra/local/test`, which provisions libpdfium.so"
    );
}

#[test]
fn pdf_pages_are_read_in_order_with_lf_line_ends() {
    require_pdfium();
    let extraction = run("report.pdf", &pdf(&["Quarterly report\nRevenue grew", "Second page"])).expect("accepted");
    assert_eq!(extraction.pages, Some(2));
    let text = extraction.text.expect("text");
    assert!(!text.contains('\r'), "{text:?}");
    assert!(text.starts_with("Quarterly report\nRevenue grew"), "{text:?}");
    assert!(text.ends_with("Second page"), "{text:?}");
}

#[test]
fn pdf_reading_stops_at_the_page_that_crosses_the_budget() {
    require_pdfium();
    let pages: Vec<String> = (1..=50).map(|n| format!("Page number {n} of fifty")).collect();
    let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
    let extraction = run_with("long.pdf", &pdf(&pages), ExtractOptions::new(60)).expect("accepted");
    assert!(extraction.truncated);
    let text = extraction.text.expect("text");
    assert!(text.starts_with("Page number 1 of fifty"), "{text:?}");
    assert!(!text.contains("Page number 5 "), "{text:?}");
}

#[test]
fn a_broken_pdf_is_unreadable_not_an_error() {
    require_pdfium();
    let whole = pdf(&["hello"]);
    let extraction = run("cut.pdf", &whole[..30]).expect("accepted");
    assert_eq!(extraction.text, None);
    assert!(extraction.unreadable.is_some());
}

#[test]
fn a_pdf_with_no_readable_page_is_unreadable_not_an_empty_document() {
    require_pdfium();
    let empty = pdf(&[]);
    // The one kid of the page tree is the font object: a tree PDFium cannot walk to a page.
    let broken = String::from_utf8(pdf(&["lost"])).expect("ascii").replace("/Kids [4 0 R]", "/Kids [3 0 R]");
    for (name, bytes) in [("empty.pdf", empty), ("broken-tree.pdf", broken.into_bytes())] {
        let extraction = run(name, &bytes).expect("accepted");
        assert_eq!(extraction.text, None, "{name}");
        let why = extraction.unreadable.expect("unreadable");
        assert!(why.contains("no page that can be read"), "{name}: {why}");
    }
}

/// A three-page report typeset as a word processor would: a running header and a page
/// number on every page, a title, headings of two sizes and a bold one, a paragraph with a
/// word hyphenated at a line's end, a bulleted and a numbered list, and a ruled table.
fn typeset_report() -> Vec<u8> {
    use sluice_fixtures::Ink::{self, Rule, Text};
    let text = |x: f32, y: f32, size: f32, bold: bool, text: &'static str| Text { x, y, size, bold, text };
    let margins = |n: usize| {
        vec![
            text(72.0, 760.0, 8.0, false, "Harbour Authority Annual Report"),
            Text { x: 300.0, y: 30.0, size: 8.0, bold: false, text: ["Page 1", "Page 2", "Page 3"][n] },
        ]
    };
    let body = |y: f32, line: &'static str| text(72.0, y, 10.0, false, line);
    let mut first: Vec<Ink<'static>> = margins(0);
    first.extend([
        text(72.0, 700.0, 20.0, true, "Harbour Survey 2026"),
        text(72.0, 660.0, 14.0, true, "Dredging"),
        body(640.0, "The northern channel was dredged in March, and the dredg-"),
        body(627.0, "ing of the eastern berth follows once the silt is measured."),
        body(600.0, "Before the work starts the harbour master checks:"),
        text(72.0, 585.0, 10.0, false, "•"),
        text(84.0, 585.0, 10.0, false, "the pilot's licence and the tide table,"),
        text(84.0, 573.0, 10.0, false, "signed by the master"),
        text(72.0, 561.0, 10.0, false, "•"),
        text(84.0, 561.0, 10.0, false, "the survey of the silt"),
        body(535.0, "1. Close the berth to shipping."),
        body(523.0, "2. Move the buoys."),
    ]);
    let mut second = margins(1);
    second.extend([text(72.0, 700.0, 14.0, true, "Parts in stock"), body(680.0, "The store holds these parts.")]);
    // A ruled table of three columns; the first body row's part name wraps onto two lines.
    for y in [662.0, 646.0, 618.0, 602.0] {
        second.push(Rule { from: (70.0, y), to: (400.0, y) });
    }
    for x in [70.0, 200.0, 300.0, 400.0] {
        second.push(Rule { from: (x, 602.0), to: (x, 662.0) });
    }
    second.extend([
        text(75.0, 651.0, 10.0, true, "Part"),
        text(205.0, 651.0, 10.0, true, "Code"),
        text(305.0, 651.0, 10.0, true, "Count"),
        body(635.0, "Lip seal"),
        text(75.0, 623.0, 10.0, false, "for pumps"),
        text(205.0, 635.0, 10.0, false, "LS-40"),
        text(305.0, 635.0, 10.0, false, "12"),
        text(75.0, 607.0, 10.0, false, "Gasket"),
        text(205.0, 607.0, 10.0, false, "GK-7"),
        text(305.0, 607.0, 10.0, false, "3"),
    ]);
    let mut third = margins(2);
    third.extend([
        text(72.0, 700.0, 10.0, true, "Costs"),
        body(684.0, "The council pays for the dredging from the harbour dues."),
    ]);
    sluice_fixtures::pdf_typeset(&[first, second, third])
}

#[test]
fn a_typeset_pdf_as_markdown_keeps_headings_lists_and_tables_without_its_running_lines() {
    require_pdfium();
    let bytes = typeset_report();
    let extraction =
        run_with("report.pdf", &bytes, ExtractOptions::new(200_000).with_markdown(true)).expect("accepted");
    assert!(extraction.markdown);
    let text = extraction.text.expect("text");
    assert_eq!(
        text,
        "# Harbour Survey 2026\n\n## Dredging\n\nThe northern channel was dredged in March, and the dredging of the eastern \
         berth follows once the silt is measured.\n\nBefore the work starts the harbour master checks:\n\n- the pilot's \
         licence and the tide table, signed by the master\n- the survey of the silt\n\n1. Close the berth to shipping.\n1. \
         Move the buoys.\n\n## Parts in stock\n\nThe store holds these parts.\n\n| Part | Code | Count |\n| --- | --- | --- \
         |\n| Lip seal for pumps | LS-40 | 12 |\n| Gasket | GK-7 | 3 |\n\n### Costs\n\nThe council pays for the dredging \
         from the harbour dues."
    );
    // Each page starts where its first block does.
    let starts: Vec<(u32, &str)> = extraction
        .page_starts
        .iter()
        .map(|&(page, at)| (page, text[at..].lines().next().unwrap_or_default()))
        .collect();
    assert_eq!(starts, [(1, "# Harbour Survey 2026"), (2, "## Parts in stock"), (3, "### Costs")]);
    // As text, the same PDF reads as it always has: every line, running ones too.
    let plain = run("report.pdf", &bytes).expect("accepted").text.expect("text");
    assert!(plain.contains("Harbour Authority Annual Report") && plain.contains("dredg"), "{plain}");
    assert!(!plain.contains('#') && !plain.contains('|'), "{plain}");
}

#[test]
fn a_two_column_pdf_as_markdown_reads_the_left_column_before_the_right() {
    require_pdfium();
    use sluice_fixtures::{LEFT_COLUMN, RIGHT_COLUMN, pdf_two_columns};
    let bytes = pdf_two_columns(LEFT_COLUMN, RIGHT_COLUMN);
    let extraction = run_with("paper.pdf", &bytes, ExtractOptions::new(200_000).with_markdown(true)).expect("accepted");
    let text = extraction.text.expect("text");
    let left_end = text.find("the last line of the left.").expect("left column");
    let right_start = text.find("The right column begins").expect("right column");
    assert!(left_end < right_start, "{text}");
    assert!(!text.contains('|'), "two columns of prose are no table: {text}");
}

#[test]
fn a_word_97_doc_is_read_from_its_piece_table_as_text_and_as_markdown() {
    use sluice_fixtures::doc;
    // An 8-bit piece and a UTF-16 piece; a field whose code is hidden; a table of two rows
    // (cell marks, a row's end a second mark); a line break and a non-breaking hyphen.
    let bytes = doc(&[
        ("Pump manual\rSee \u{13} HYPERLINK \"http://x\" \u{14}the site\u{15} first.\r", true),
        ("Part\u{7}Code\u{7}\u{7}Lip seal\u{7}LS\u{1e}40\u{7}\u{7}Ünterlage für Pumpen\u{b}und Ventile\r", false),
    ]);
    assert_eq!(
        text("manual.doc", &bytes),
        "Pump manual\nSee the site first.\nPart\tCode\nLip seal\tLS-40\nÜnterlage für Pumpen\nund Ventile"
    );
    assert_eq!(
        markdown("manual.doc", &bytes),
        "Pump manual\n\nSee the site first.\n\n| Part | Code |\n| --- | --- |\n| Lip seal | LS-40 |\n\nÜnterlage für \
         Pumpen\nund Ventile"
    );
}

#[test]
fn an_encrypted_or_pre_97_doc_is_unreadable_with_its_reason() {
    use sluice_fixtures::doc_with;
    for (bytes, reason) in [
        (doc_with(&[("secret\r", true)], 0x0100, 0x00C1), "encrypted"),
        (doc_with(&[("old\r", true)], 0, 0x0065), "Word 6 or 95"),
    ] {
        let extraction = run("old.doc", &bytes).expect("accepted: a .doc it is");
        assert_eq!(extraction.text, None);
        let unreadable = extraction.unreadable.expect("a reason");
        assert!(unreadable.contains(reason), "{unreadable}");
    }
    // A compound file that is no Word document.
    let extraction = run("mail.doc", &doc_with(&[], 0, 0x00C1)[..600]).expect("accepted");
    assert!(extraction.unreadable.is_some());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

    /// A damaged `.doc` (any bytes of it changed) is read or named unreadable — never a
    /// panic, never past its time.
    #[test]
    fn a_damaged_doc_is_read_or_unreadable(changes in proptest::collection::vec((0usize..4096, proptest::num::u8::ANY), 1..24)) {
        let mut bytes = sluice_fixtures::doc(&[("Pump manual\rPart\u{7}Code\u{7}\u{7}", true), ("Seal\r", false)]);
        for (at, value) in changes {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        // The reader itself, so that a panic fails the test (extraction would catch it).
        let mut budget = sluice_formats::budget::TextBudget::new(10_000, std::time::Duration::from_secs(2));
        let started = std::time::Instant::now();
        let _ = sluice_formats::doc::doc(&bytes, &mut budget, true);
        proptest::prop_assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}

/// An EPUB whose spine reads the second chapter's file first.
fn epub_book() -> Vec<u8> {
    let opf = r#"<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>
        <item id="c1" href="text/chapter%201.xhtml" media-type="application/xhtml+xml"/>
        <item id="c2" href="intro.xhtml" media-type="application/xhtml+xml"/>
        <item id="css" href="style.css" media-type="text/css"/>
        <item id="gone" href="../../outside.xhtml" media-type="application/xhtml+xml"/>
        </manifest><spine><itemref idref="c2"/><itemref idref="gone"/><itemref idref="c1"/><itemref idref="css"/></spine></package>"#;
    zip(&[
        ("mimetype", "application/epub+zip"),
        (
            "META-INF/container.xml",
            r#"<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0"><rootfiles><rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#,
        ),
        ("OEBPS/book.opf", opf),
        (
            "OEBPS/text/chapter 1.xhtml",
            "<!DOCTYPE html><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>One</title></head><body>\
             <h1>The lighthouse</h1><p>The keeper lit the lamp at dusk.</p><ul><li>oil</li><li>wicks</li></ul></body></html>",
        ),
        (
            "OEBPS/intro.xhtml",
            "<html><body><h1>Introduction</h1><p>A book about the coast.</p><script>var x = 'hidden';</script></body></html>",
        ),
        ("OEBPS/style.css", "h1 { color: red }"),
    ])
}

#[test]
fn an_epub_is_read_chapter_by_chapter_in_spine_order() {
    let bytes = epub_book();
    assert_eq!(
        markdown("coast.epub", &bytes),
        "# Introduction\n\nA book about the coast.\n\n# The lighthouse\n\nThe keeper lit the lamp at dusk.\n\n- oil\n- wicks"
    );
    assert_eq!(
        text("coast.epub", &bytes),
        "Introduction\nA book about the coast.\n\nThe lighthouse\nThe keeper lit the lamp at dusk.\noil\nwicks"
    );
    // A zip with no container is no book.
    let extraction =
        run("notes.epub", &zip(&[("mimetype", "application/epub+zip"), ("a.txt", "x")])).expect("accepted");
    assert!(
        extraction.unreadable.as_deref().is_some_and(|r| r.contains("container.xml")),
        "{:?}",
        extraction.unreadable
    );
}

#[test]
fn a_hostile_epub_is_refused_as_an_archive_would_be() {
    let mut refused = Vec::new();
    for (name, bytes, code) in sluice_fixtures::hostile_archives() {
        if !name.ends_with(".zip") {
            continue;
        }
        // Under the same rules as every office container: the same verdict as a .docx.
        let as_book = run("book.epub", &bytes).map(|e| e.unreadable.is_some());
        let as_document = run("book.docx", &bytes).map(|e| e.unreadable.is_some());
        assert_eq!(as_book, as_document, "{name}");
        if let Err(refusal) = as_book {
            assert_eq!(refusal.code.as_str(), code, "{name}: {refusal:?}");
            refused.push(code);
        }
    }
    for code in ["path_traversal", "ratio_exceeded", "too_many_entries", "absolute_path", "symlink"] {
        assert!(refused.contains(&code), "{code} was not refused: {refused:?}");
    }
}

#[test]
fn an_rtf_document_is_read_in_its_code_page() {
    let rtf = br"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Times;}}{\*\generator Word;}\f0 Harbour {\b dues} are paid\par
Caf\'e9 \u8364? 40\par{\field{\*\fldinst HYPERLINK x}{\fldrslt the office}}\cell Quay\cell\row}";
    assert_eq!(text("dues.rtf", rtf), "Harbour dues are paid\nCafé € 40\nthe office\tQuay");
    let extraction = run_with("dues.rtf", rtf, ExtractOptions::new(200_000).with_markdown(true)).expect("accepted");
    assert!(!extraction.markdown, "RTF is written as text either way");
}

#[test]
fn a_deck_as_markdown_is_a_section_a_slide_with_bullets_tables_and_notes() {
    const A: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
    let shape = |ph: &str, paragraphs: &str| {
        format!("<p:sp><p:nvSpPr><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:txBody>{paragraphs}</p:txBody></p:sp>")
    };
    let para = |props: &str, text: &str| format!("<a:p>{props}<a:r><a:t>{text}</a:t></a:r></a:p>");
    let first = format!(
        "<p:sld {A}><p:cSld><p:spTree>{}{}{}</p:spTree></p:cSld></p:sld>",
        shape("<p:ph type=\"title\"/>", &para("", "Quarterly results")),
        shape(
            "<p:ph idx=\"1\"/>",
            &[
                para("", "Revenue grew"),
                para("<a:pPr lvl=\"1\"/>", "in the north"),
                para("<a:pPr><a:buNone/></a:pPr>", "Plain remark"),
                para("<a:pPr><a:buAutoNum type=\"arabicPeriod\"/></a:pPr>", "First step"),
            ]
            .concat()
        ),
        "<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>Region</a:t></a:r></a:p></a:txBody></a:tc>\
         <a:tc><a:txBody><a:p><a:r><a:t>Growth</a:t></a:r></a:p></a:txBody></a:tc></a:tr><a:tr><a:tc><a:txBody><a:p><a:r><a:t>North</a:t></a:r></a:p></a:txBody></a:tc>\
         <a:tc><a:txBody><a:p><a:r><a:t>4%</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"
    );
    let second =
        format!("<p:sld {A}><p:cSld><p:spTree>{}</p:spTree></p:cSld></p:sld>", shape("<p:ph type=\"pic\"/>", ""));
    let rels = r#"<Relationships><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide" Target="../notesSlides/notesSlide1.xml"/></Relationships>"#;
    let notes = format!("<p:notes {A}><a:p><a:r><a:t>Mention the north first</a:t></a:r></a:p></p:notes>");
    let bytes = zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("ppt/presentation.xml", "<p:presentation/>"),
        ("ppt/slides/slide1.xml", &first),
        ("ppt/slides/slide2.xml", &second),
        ("ppt/slides/_rels/slide1.xml.rels", rels),
        ("ppt/notesSlides/notesSlide1.xml", &notes),
    ]);
    assert_eq!(
        markdown("deck.pptx", &bytes),
        "## Slide 1 — Quarterly results\n\n- Revenue grew\n  - in the north\n\nPlain remark\n\n1. First step\n\n\
         | Region | Growth |\n| --- | --- |\n| North | 4% |\n\n### Notes\n\nMention the north first\n\n## Slide 2"
    );
    // As text the deck reads as it always has.
    assert!(text("deck.pptx", &bytes).starts_with("--- Slide 1 ---\nQuarterly results\nRevenue grew\n"));

    let odp = odf(
        "application/vnd.oasis.opendocument.presentation",
        "<office:presentation><draw:page><draw:frame><draw:text-box><text:p>Harbour plan</text:p></draw:text-box></draw:frame>\
         <draw:frame><draw:text-box><text:list><text:list-item><text:p>Dredge the channel</text:p></text:list-item></text:list></draw:text-box></draw:frame>\
         <presentation:notes><draw:frame><draw:text-box><text:p>Keep it short</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>\
         <draw:page/></office:presentation>",
    );
    assert_eq!(
        markdown("plan.odp", &odp),
        "## Slide 1 — Harbour plan\n\n- Dredge the channel\n\n### Notes\n\nKeep it short\n\n## Slide 2"
    );
}

#[test]
fn a_workbook_as_markdown_is_a_section_a_sheet_of_tables_that_keep_their_header() {
    // 45 rows under a header of 13 columns: cut into tables of 40 rows, and of the first
    // column with 10 more at a time.
    let cell = |r: usize, c: usize, text: &str| {
        let column = (b'A' + c as u8) as char;
        format!("<c r=\"{column}{r}\" t=\"inlineStr\"><is><t>{text}</t></is></c>")
    };
    let mut rows = String::new();
    for r in 1..=46 {
        let cells: String =
            (0..13).map(|c| cell(r, c, &if r == 1 { format!("H{c}") } else { format!("r{r}c{c}") })).collect();
        rows.push_str(&format!("<row r=\"{r}\">{cells}</row>"));
    }
    let text = markdown("wide.xlsx", &xlsx(&rows));
    assert!(text.starts_with("## Sheet: Data\n\n| H0 | H1 |"), "{text}");
    let tables: Vec<&str> = text.split("\n\n").filter(|block| block.starts_with('|')).collect();
    // Rows 2–41 in two tables (columns 0–10, then 0 and 11–12), rows 42–46 in two more.
    assert_eq!(tables.len(), 4, "{text}");
    assert!(tables[0].starts_with("| H0 | H1 | H2 | H3 | H4 | H5 | H6 | H7 | H8 | H9 | H10 |\n"), "{}", tables[0]);
    assert!(
        tables[1].starts_with("| H0 | H11 | H12 |\n| --- | --- | --- |\n| r2c0 | r2c11 | r2c12 |"),
        "{}",
        tables[1]
    );
    assert_eq!(tables[0].lines().count(), 2 + 40);
    assert!(tables[2].starts_with("| H0 | H1 |") && tables[2].contains("| r42c0 | r42c1 |"), "{}", tables[2]);
    assert!(tables[3].ends_with("| r46c0 | r46c11 | r46c12 |"), "{}", tables[3]);

    let csv = "Part;Code;Note\nSeal;S-1;\"fits; the pump\"\nGasket;G-2;\"two\nlines\"\n";
    assert_eq!(
        markdown("parts.csv", csv.as_bytes()),
        "| Part | Code | Note |\n| --- | --- | --- |\n| Seal | S-1 | fits; the pump |\n| Gasket | G-2 | two lines |"
    );
    // As text a CSV is the file itself.
    assert_eq!(text_of_csv(csv), csv);
}

fn text_of_csv(csv: &str) -> String {
    text("parts.csv", csv.as_bytes())
}

#[test]
fn a_docx_footnote_closes_its_section_as_markdown() {
    let para = |props: &str, runs: &str| format!("<w:p><w:pPr>{props}</w:pPr>{runs}</w:p>");
    let run = |text: &str| format!("<w:r><w:t>{text}</w:t></w:r>");
    let note = |id: u32| format!("<w:r><w:footnoteReference w:id=\"{id}\"/></w:r>");
    let body = [
        para("<w:pStyle w:val=\"Heading1\"/>", &run("Dredging")),
        para("", &format!("{}{}{}", run("The channel is dredged in spring."), note(2), run(" Silt goes north."))),
        para("<w:pStyle w:val=\"Heading1\"/>", &run("Costs")),
        para("", &format!("{}{}", run("The council pays."), note(3))),
    ]
    .concat();
    let notes = format!(
        "<w:footnotes {W}><w:footnote w:type=\"separator\" w:id=\"-1\"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>\
         <w:footnote w:id=\"2\"><w:p><w:r><w:t>Every year since</w:t></w:r><w:r><w:t xml:space=\"preserve\"> 1998.</w:t></w:r></w:p></w:footnote>\
         <w:footnote w:id=\"3\"><w:p><w:r><w:t>From the harbour dues.</w:t></w:r></w:p></w:footnote></w:footnotes>"
    );
    let bytes = zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", &format!("<w:document {W}><w:body>{body}</w:body></w:document>")),
        ("word/footnotes.xml", &notes),
    ]);
    assert_eq!(
        markdown("plan.docx", &bytes),
        "# Dredging\n\nThe channel is dredged in spring.[^1] Silt goes north.\n\n[^1]: Every year since 1998.\n\n# Costs\n\n\
         The council pays.[^2]\n\n[^2]: From the harbour dues."
    );
    // As text, footnotes are not read (as before).
    assert_eq!(
        text("plan.docx", &bytes),
        "Dredging\nThe channel is dredged in spring. Silt goes north.\nCosts\nThe council pays."
    );
}

#[test]
fn an_odt_footnote_closes_its_section_as_markdown() {
    let note = |n: u32, text: &str| {
        format!(
            "<text:note text:id=\"ftn{n}\" text:note-class=\"footnote\"><text:note-citation>{n}</text:note-citation><text:note-body><text:p>{text}</text:p></text:note-body></text:note>"
        )
    };
    let body = format!(
        "<office:text><text:h text:outline-level=\"1\">Dredging</text:h><text:p>Dredged in spring{} and autumn.</text:p>\
         <text:h text:outline-level=\"1\">Costs</text:h><text:p>Paid by the council.{}</text:p></office:text>",
        note(1, "Since 1998."),
        note(2, "From the dues.")
    );
    let bytes = odf("application/vnd.oasis.opendocument.text", &body);
    assert_eq!(
        markdown("plan.odt", &bytes),
        "# Dredging\n\nDredged in spring[^1] and autumn.\n\n[^1]: Since 1998.\n\n# Costs\n\nPaid by the council.[^2]\n\n[^2]: From the dues."
    );
}

#[test]
fn a_doc_as_markdown_has_the_headings_its_styles_mark() {
    let bytes = sluice_fixtures::doc_outlined(&[
        (Some(1), "Pump manual"),
        (None, "Read this first."),
        (Some(2), "Installing"),
        (None, "Bolt the frame down."),
    ]);
    assert_eq!(
        markdown("manual.doc", &bytes),
        "# Pump manual\n\nRead this first.\n\n## Installing\n\nBolt the frame down."
    );
    assert_eq!(text("manual.doc", &bytes), "Pump manual\nRead this first.\nInstalling\nBolt the frame down.");
}

#[test]
fn an_epub_spine_repeating_a_chapter_spends_the_archive_total() {
    // One chapter of 40 KB of words that do not compress away, named 200 times by the spine:
    // 8 MB read from a file that holds 40 KB.
    let mut state = 7u64;
    let words: Vec<String> = (0..6000)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            format!("w{:x}", state >> 44)
        })
        .collect();
    let chapter = format!("<html><body><p>Chapteropening {}</p></body></html>", words.join(" "));
    let refs: String = (0..200).map(|_| r#"<itemref idref="c1"/>"#).collect();
    let opf = format!(
        r#"<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>
        <item id="c1" href="c.xhtml" media-type="application/xhtml+xml"/></manifest><spine>{refs}</spine></package>"#
    );
    let book = zip(&[
        ("mimetype", "application/epub+zip"),
        (
            "META-INF/container.xml",
            r#"<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0"><rootfiles><rootfile full-path="book.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#,
        ),
        ("book.opf", &opf),
        ("c.xhtml", &chapter),
    ]);
    let mut options = ExtractOptions::new(20_000_000);
    options.limits.max_total_bytes = 1 << 20;
    let refusal = run_with("repeat.epub", &book, options).expect_err("past the archive total");
    assert_eq!(refusal.code.as_str(), "too_large_unpacked", "{refusal:?}");
    // Read under the default total, the same book is read whole.
    let read = run_with("repeat.epub", &book, ExtractOptions::new(20_000_000)).expect("within the total");
    assert_eq!(read.text.as_deref().map(|t| t.matches("Chapteropening").count()), Some(200));
}
