//! Documents built in code for tests and benchmarks (feature `fixtures`): real containers
//! and PDFs that the parsers read, so no test depends on files it does not make.

use std::io::Write;

/// A zip of `(name, body)` parts, deflated.
pub fn zip(parts: &[(&str, &str)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in parts {
        writer.start_file(*name, options).expect("start a zip part");
        writer.write_all(body.as_bytes()).expect("write");
    }
    writer.finish().expect("finish").into_inner()
}

/// A zip of `(name, bytes)` parts, deflated: a container whose media are binary.
pub fn zip_bytes(parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in parts {
        writer.start_file(*name, options).expect("start a zip part");
        writer.write_all(body).expect("write");
    }
    writer.finish().expect("finish").into_inner()
}

/// The pixels of a picture `width` × `height`: a gradient tinted by `shade`, so pictures of
/// different shades are different images and the same shade the same image.
pub fn picture_pixels(width: u32, height: u32, shade: u8) -> image::RgbImage {
    image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([shade, (x * 255 / width.max(1)) as u8, (y * 255 / height.max(1)) as u8])
    })
}

/// A PNG of [`picture_pixels`].
pub fn png(width: u32, height: u32, shade: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    image::DynamicImage::ImageRgb8(picture_pixels(width, height, shade))
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
        .expect("a PNG");
    bytes
}

/// A DOCX whose body is `body`, with `media` (`(relationship id, PNG bytes)`) stored as
/// `word/media/imageN.png` and named in the document's relationships; a picture is
/// referred to in the body as [`docx_picture`] writes it.
pub fn docx_with_media(body: &str, media: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let rels: String = media
        .iter()
        .enumerate()
        .map(|(n, (id, _))| {
            format!(
                "<Relationship Id=\"{id}\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/image\" Target=\"media/image{n}.png\"/>"
            )
        })
        .collect();
    let rels = format!(
        "<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">{rels}<Relationship Id=\"rIdWeb\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/image\" Target=\"https://example.com/a.png\" TargetMode=\"External\"/></Relationships>"
    );
    let document = format!("<w:document {W}><w:body>{body}</w:body></w:document>");
    let names: Vec<String> = (0..media.len()).map(|n| format!("word/media/image{n}.png")).collect();
    let mut parts: Vec<(&str, &[u8])> = vec![
        ("[Content_Types].xml", b"<Types/>"),
        ("word/document.xml", document.as_bytes()),
        ("word/_rels/document.xml.rels", rels.as_bytes()),
    ];
    parts.extend(names.iter().zip(media).map(|(name, (_, bytes))| (name.as_str(), bytes.as_slice())));
    zip_bytes(&parts)
}

/// A paragraph holding only a picture (an inline drawing) that refers to `relationship`.
pub fn docx_picture(relationship: &str) -> String {
    format!(
        "<w:p><w:r><w:drawing><wp:inline xmlns:wp=\"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing\"><a:graphic xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\"><a:graphicData><pic:pic xmlns:pic=\"http://schemas.openxmlformats.org/drawingml/2006/picture\"><pic:blipFill><a:blip xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\" r:embed=\"{relationship}\"/></pic:blipFill></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"
    )
}

/// The WordprocessingML namespace declaration.
pub const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

/// A DOCX whose body is `body` (WordprocessingML), with one header and one footer.
pub fn docx(body: &str) -> Vec<u8> {
    zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", &format!("<w:document {W}><w:body>{body}</w:body></w:document>")),
        ("word/header1.xml", &format!("<w:hdr {W}><w:p><w:r><w:t>Quarterly header</w:t></w:r></w:p></w:hdr>")),
        ("word/footer1.xml", &format!("<w:ftr {W}><w:p><w:r><w:t>Page footer</w:t></w:r></w:p></w:ftr>")),
    ])
}

/// A DOCX of `(heading level, text)` paragraphs (`None` for body text), its headings in
/// Word's built-in styles (`Heading1`…), with no styles part: as most files name them.
pub fn docx_outlined(paragraphs: &[(Option<u8>, &str)]) -> Vec<u8> {
    let body: String = paragraphs
        .iter()
        .map(|(level, text)| {
            let style = level.map(|l| format!("<w:pPr><w:pStyle w:val=\"Heading{l}\"/></w:pPr>")).unwrap_or_default();
            format!("<w:p>{style}<w:r><w:t xml:space=\"preserve\">{text}</w:t></w:r></w:p>")
        })
        .collect();
    zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", &format!("<w:document {W}><w:body>{body}</w:body></w:document>")),
    ])
}

/// An XLSX with one sheet, `Data`, whose `sheetData` is `sheet_xml`.
pub fn xlsx(sheet_xml: &str) -> Vec<u8> {
    zip(&[
        (
            "[Content_Types].xml",
            r#"<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#,
        ),
        (
            "_rels/.rels",
            r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#,
        ),
        (
            "xl/workbook.xml",
            r#"<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>"#,
        ),
        (
            "xl/_rels/workbook.xml.rels",
            r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#,
        ),
        (
            "xl/worksheets/sheet1.xml",
            &format!(
                r#"<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><dimension ref="A1:XFD1048576"/><sheetData>{sheet_xml}</sheetData></worksheet>"#
            ),
        ),
    ])
}

/// A PDF with one page of Helvetica text per entry of `pages`, with a correct xref table.
pub fn pdf(pages: &[&str]) -> Vec<u8> {
    pdf_pages(pages, None)
}

fn pdf_pages(pages: &[&str], info: Option<&str>) -> Vec<u8> {
    let mut objects: Vec<String> = Vec::new();
    let page_ids: Vec<usize> = (0..pages.len()).map(|i| 4 + 2 * i).collect();
    objects.push("<< /Type /Catalog /Pages 2 0 R >>".to_owned());
    let kids: Vec<String> = page_ids.iter().map(|id| format!("{id} 0 R")).collect();
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {} >>", kids.join(" "), pages.len()));
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned());
    for (i, text) in pages.iter().enumerate() {
        let content_id = page_ids[i] + 1;
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {content_id} 0 R >>"
        ));
        let lines: String = text
            .lines()
            .enumerate()
            .map(|(n, l)| format!("BT /F1 12 Tf 72 {} Td ({l}) Tj ET\n", 720 - 16 * n))
            .collect();
        objects.push(format!("<< /Length {} >>\nstream\n{lines}endstream", lines.len()));
    }
    if let Some(info) = info {
        objects.push(format!("<< {info} >>"));
    }
    let info_id = info.map(|_| objects.len());
    let objects: Vec<Vec<u8>> = objects.into_iter().map(String::into_bytes).collect();
    pdf_file_with_info(&objects, info_id)
}

/// A paper's two columns of prose: the left ends with "the last line of the left", the
/// right opens with "The right column begins".
pub const LEFT_COLUMN: &[&str] = &[
    "The harbour authority met on Monday to",
    "review the dredging permit for the",
    "northern channel, delayed since the",
    "survey found silt at the eastern berth.",
    "Pilots asked for a new mooring plan and",
    "the council approved repairs to the old",
    "lighthouse before the winter storms.",
    "Cargo tonnage rose in March and April,",
    "and customs dues were paid on time by",
    "every vessel that used the main quay.",
    "This paragraph closes the first column",
    "and this is the last line of the left.",
];
pub const RIGHT_COLUMN: &[&str] = &[
    "The right column begins with the budget",
    "for the next quarter, which the council",
    "will vote on at its meeting in May.",
    "Crane hire costs more than last year,",
    "so the ledger shows a small deficit",
    "that the port expects to recover from",
    "higher traffic through the summer.",
    "The minutes of the meeting record that",
    "the survey of the channel will be done",
    "again once the dredging has finished.",
    "Questions go to the harbour master at",
    "the pilot station on the northern pier.",
];

/// A one-page PDF set as a paper is: `left` and `right` lines in two columns of 10-point
/// Helvetica (leading 13 points), the right column about 24 points past the left's longest line.
pub fn pdf_two_columns(left: &[&str], right: &[&str]) -> Vec<u8> {
    let column = |lines: &[&str], x: u32| -> String {
        lines.iter().enumerate().map(|(n, l)| format!("BT /F1 10 Tf {x} {} Td ({l}) Tj ET\n", 720 - 13 * n)).collect()
    };
    // Helvetica's lowercase averages under half an em: a line of n characters of prose is
    // under 5n points, so the gutter is at least 24 points (a third of an inch, as a paper's).
    let widest = left.iter().map(|l| l.len()).max().unwrap_or(0) as u32;
    let stream = column(left, 54) + &column(right, 54 + widest * 5 + 24);
    let objects: Vec<Vec<u8>> = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [4 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>"
            .to_owned(),
        format!("<< /Length {} >>\nstream\n{stream}endstream", stream.len()),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    pdf_file_with_info(&objects, None)
}

/// What is drawn on a typeset PDF page, in points from the page's bottom left.
#[derive(Debug, Clone, Copy)]
pub enum Ink<'a> {
    /// Helvetica (or Helvetica-Bold) text of `size` points starting at `x`, on baseline `y`.
    Text { x: f32, y: f32, size: f32, bold: bool, text: &'a str },
    /// A ruling line of half a point.
    Rule { from: (f32, f32), to: (f32, f32) },
    /// A grey filled box (a figure), its lower left corner at `x`, `y`.
    Figure { x: f32, y: f32, width: f32, height: f32 },
    /// An image (an XObject of [`picture_pixels`] `pixels` in size, tinted `shade`), its
    /// lower left corner at `x`, `y`.
    Picture { x: f32, y: f32, width: f32, height: f32, pixels: (u32, u32), shade: u8 },
}

/// Text as a PDF string in WinAnsi encoding: `(`, `)` and `\` escaped, a bullet, dashes and
/// curly double quotes as their WinAnsi bytes, any other character outside ASCII as `?`.
fn pdf_string(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '(' | ')' | '\\' => format!("\\{c}"),
            '“' => "\\223".to_owned(),
            '”' => "\\224".to_owned(),
            '•' => "\\225".to_owned(),
            '–' => "\\226".to_owned(),
            '—' => "\\227".to_owned(),
            c if c.is_ascii() => c.to_string(),
            _ => "?".to_owned(),
        })
        .collect()
}

/// A US Letter PDF with one page per entry of `pages`, each drawn as its inks say
/// (Helvetica and Helvetica-Bold in WinAnsi encoding).
pub fn pdf_typeset(pages: &[Vec<Ink<'_>>]) -> Vec<u8> {
    let page_ids: Vec<usize> = (0..pages.len()).map(|i| 5 + 2 * i).collect();
    // The pictures' image objects follow the pages', numbered across the document.
    let mut pictures: Vec<Vec<u8>> = Vec::new();
    let first_picture_id = 5 + 2 * pages.len();
    let mut objects: Vec<String> = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            page_ids.iter().map(|id| format!("{id} 0 R")).collect::<Vec<_>>().join(" "),
            pages.len()
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_owned(),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>".to_owned(),
    ];
    for (i, inks) in pages.iter().enumerate() {
        let mut named = String::new();
        let mut stream = String::new();
        for ink in inks {
            if let Ink::Picture { x, y, width, height, pixels, shade } = *ink {
                let id = first_picture_id + pictures.len();
                let name = format!("Im{}", pictures.len());
                named.push_str(&format!("/{name} {id} 0 R "));
                stream.push_str(&format!("q {width} 0 0 {height} {x} {y} cm /{name} Do Q\n"));
                let data = picture_pixels(pixels.0, pixels.1, shade).into_raw();
                let mut object = format!(
                    "<< /Type /XObject /Subtype /Image /Width {} /Height {} /ColorSpace /DeviceRGB /BitsPerComponent 8 /Length {} >>\nstream\n",
                    pixels.0,
                    pixels.1,
                    data.len()
                )
                .into_bytes();
                object.extend_from_slice(&data);
                object.extend_from_slice(b"\nendstream");
                pictures.push(object);
            }
        }
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R /F2 4 0 R >> /XObject << {named}>> >> /Contents {} 0 R >>",
            page_ids[i] + 1
        ));
        let drawn: String = inks
            .iter()
            .map(|ink| match *ink {
                Ink::Text { x, y, size, bold, text } => {
                    format!("BT /F{} {size} Tf {x} {y} Td ({}) Tj ET\n", if bold { 2 } else { 1 }, pdf_string(text))
                }
                Ink::Rule { from, to } => format!("0.5 w {} {} m {} {} l S\n", from.0, from.1, to.0, to.1),
                Ink::Figure { x, y, width, height } => format!("0.6 g {x} {y} {width} {height} re f 0 g\n"),
                Ink::Picture { .. } => String::new(),
            })
            .collect();
        let stream = drawn + &stream;
        objects.push(format!("<< /Length {} >>\nstream\n{stream}endstream", stream.len()));
    }
    let mut objects: Vec<Vec<u8>> = objects.into_iter().map(String::into_bytes).collect();
    objects.extend(pictures);
    pdf_file(&objects)
}

/// A Word 97 `.doc`: its main text in `pieces`, each stored 8-bit (Windows-1252, `true`) or
/// as UTF-16 (`false`), in the compound file's `WordDocument` stream with the piece table in
/// `1Table`; `flags` is the File Information Block's flags word (0x0100 encrypted) and
/// `n_fib` its version (0x00C1 is Word 97).
pub fn doc_with(pieces: &[(&str, bool)], flags: u16, n_fib: u16) -> Vec<u8> {
    word_97(pieces, flags, n_fib, None)
}

/// A Word 97 `.doc` of paragraphs (one 8-bit piece), each with its heading level (`None`
/// for body text): the stylesheet holds Normal and the built-in Heading 1–9 styles, and one
/// formatting page gives each paragraph its style.
pub fn doc_outlined(paragraphs: &[(Option<u8>, &str)]) -> Vec<u8> {
    let text: String = paragraphs.iter().map(|(_, p)| format!("{p}\r")).collect();
    let levels: Vec<Option<u8>> = paragraphs.iter().map(|(level, _)| *level).collect();
    word_97(&[(&text, true)], 0, 0x00C1, Some(&levels))
}

fn word_97(pieces: &[(&str, bool)], flags: u16, n_fib: u16, styles: Option<&[Option<u8>]>) -> Vec<u8> {
    use std::io::Write;
    const TEXT_AT: usize = 1024;
    let mut word = vec![0u8; TEXT_AT];
    word[0..2].copy_from_slice(&0xA5ECu16.to_le_bytes());
    word[2..4].copy_from_slice(&n_fib.to_le_bytes());
    word[0x0A..0x0C].copy_from_slice(&(flags | 0x0200).to_le_bytes());
    // csw 14, cslw 22, cbRgFcLcb 93 (Word 97's sizes).
    word[32..34].copy_from_slice(&14u16.to_le_bytes());
    word[62..64].copy_from_slice(&22u16.to_le_bytes());
    word[152..154].copy_from_slice(&93u16.to_le_bytes());
    let pair_at = |index: usize| 154 + 8 * index;
    let mut cps = vec![0u32];
    let mut descriptors = Vec::new();
    for (text, compressed) in pieces {
        let at = word.len() as u32;
        let chars = if *compressed {
            let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode(text);
            word.extend_from_slice(&bytes);
            descriptors.push((at * 2) | 0x4000_0000);
            bytes.len() as u32
        } else {
            let units: Vec<u16> = text.encode_utf16().collect();
            word.extend(units.iter().flat_map(|u| u.to_le_bytes()));
            descriptors.push(at);
            units.len() as u32
        };
        cps.push(cps[cps.len() - 1] + chars);
    }
    // ccpText: every character is the main text's.
    word[64 + 12..64 + 16].copy_from_slice(&cps[cps.len() - 1].to_le_bytes());
    let mut plc: Vec<u8> = cps.iter().flat_map(|cp| cp.to_le_bytes()).collect();
    for fc in descriptors {
        plc.extend_from_slice(&[0, 0]);
        plc.extend_from_slice(&fc.to_le_bytes());
        plc.extend_from_slice(&[0, 0]);
    }
    // A formatting run first, which the reader skips, then the piece table.
    let mut table = vec![0x01, 2, 0, 0xAA, 0xBB, 0x02];
    table.extend_from_slice(&(plc.len() as u32).to_le_bytes());
    table.extend_from_slice(&plc);
    let set_pair = |word: &mut Vec<u8>, index: usize, fc: usize, lcb: usize| {
        word[pair_at(index)..pair_at(index) + 4].copy_from_slice(&(fc as u32).to_le_bytes());
        word[pair_at(index) + 4..pair_at(index) + 8].copy_from_slice(&(lcb as u32).to_le_bytes());
    };
    set_pair(&mut word, 33, 0, table.len());
    if let Some(levels) = styles {
        // The stylesheet: an 18-byte header (10 styles), then Normal and Heading 1–9, each
        // a 10-byte definition whose first 12 bits are its built-in id.
        let stylesheet_at = table.len();
        table.extend_from_slice(&18u16.to_le_bytes());
        let mut header = vec![0u8; 18];
        header[0..2].copy_from_slice(&10u16.to_le_bytes());
        header[2..4].copy_from_slice(&10u16.to_le_bytes());
        table.extend_from_slice(&header);
        for sti in 0..10u16 {
            table.extend_from_slice(&10u16.to_le_bytes());
            let mut definition = vec![0u8; 10];
            definition[0..2].copy_from_slice(&sti.to_le_bytes());
            table.extend_from_slice(&definition);
        }
        set_pair(&mut word, 1, stylesheet_at, table.len() - stylesheet_at);
        // One formatting page after the text: each paragraph's run and its style.
        let text_at = TEXT_AT as u32;
        let mut bounds = vec![text_at];
        let text = &word[TEXT_AT..];
        bounds.extend(text.iter().enumerate().filter(|(_, b)| **b == b'\r').map(|(i, _)| text_at + i as u32 + 1));
        word.resize(word.len().div_ceil(512) * 512, 0);
        let pn = word.len() / 512;
        let mut page = vec![0u8; 512];
        let runs = bounds.len() - 1;
        assert!(runs <= 17, "one formatting page holds 17 paragraphs here");
        for (i, fc) in bounds.iter().enumerate() {
            page[4 * i..4 * i + 4].copy_from_slice(&fc.to_le_bytes());
        }
        for (r, level) in levels.iter().enumerate().take(runs) {
            let offset = 300 + 4 * r;
            page[4 * (runs + 1) + 13 * r] = (offset / 2) as u8;
            page[offset] = 2;
            page[offset + 1..offset + 3].copy_from_slice(&u16::from(level.unwrap_or(0)).to_le_bytes());
        }
        page[511] = runs as u8;
        word.extend_from_slice(&page);
        let bte_at = table.len();
        table.extend_from_slice(&bounds[0].to_le_bytes());
        table.extend_from_slice(&bounds[runs].to_le_bytes());
        table.extend_from_slice(&(pn as u32).to_le_bytes());
        set_pair(&mut word, 13, bte_at, 12);
    }
    let mut file = cfb::CompoundFile::create(std::io::Cursor::new(Vec::new())).expect("a compound file");
    file.create_stream("/WordDocument").and_then(|mut s| s.write_all(&word)).expect("WordDocument");
    file.create_stream("/1Table").and_then(|mut s| s.write_all(&table)).expect("1Table");
    file.flush().expect("flushed");
    file.into_inner().into_inner()
}

/// A Word 97 `.doc` of `pieces` (see [`doc_with`]).
pub fn doc(pieces: &[(&str, bool)]) -> Vec<u8> {
    doc_with(pieces, 0, 0x00C1)
}

/// `pdf(pages)` with an Info dictionary of `info` entries (`/CreationDate (D:2019…)`).
pub fn pdf_with_info(pages: &[&str], info: &str) -> Vec<u8> {
    pdf_pages(pages, Some(info))
}

/// The OpenDocument namespace declarations a text document's parts use.
pub const ODF: &str = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0""#;

/// An OpenDocument text of `paragraphs`, created (per `meta.xml`) at `created`.
pub fn odt_created(paragraphs: &[&str], created: &str) -> Vec<u8> {
    let body: String = paragraphs.iter().map(|p| format!("<text:p>{p}</text:p>")).collect();
    zip(&[
        ("mimetype", "application/vnd.oasis.opendocument.text"),
        (
            "content.xml",
            &format!(
                "<office:document-content {ODF}><office:body><office:text>{body}</office:text></office:body></office:document-content>"
            ),
        ),
        (
            "meta.xml",
            &format!(
                "<office:document-meta {ODF}><office:meta><meta:creation-date>{created}</meta:creation-date></office:meta></office:document-meta>"
            ),
        ),
    ])
}

/// A DOCX of `paragraphs` whose core properties say it was created at `created`.
pub fn docx_created(paragraphs: &[&str], created: &str) -> Vec<u8> {
    let body: String = paragraphs.iter().map(|p| format!("<w:p><w:r><w:t>{p}</w:t></w:r></w:p>")).collect();
    zip(&[
        ("[Content_Types].xml", "<Types/>"),
        ("word/document.xml", &format!("<w:document {W}><w:body>{body}</w:body></w:document>")),
        (
            "docProps/core.xml",
            &format!(
                r#"<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><dcterms:created xsi:type="dcterms:W3CDTF">{created}</dcterms:created></cp:coreProperties>"#
            ),
        ),
    ])
}

/// `picture` as a JPEG whose EXIF says it was taken at `taken` (`YYYY:MM:DD HH:MM:SS`).
pub fn jpeg_taken(picture: &image::GrayImage, taken: &str) -> Vec<u8> {
    let mut plain = Vec::new();
    picture.write_to(&mut std::io::Cursor::new(&mut plain), image::ImageFormat::Jpeg).expect("encode a JPEG");
    // A little-endian TIFF structure: IFD0 points to the Exif IFD, which holds
    // DateTimeOriginal (0x9003, ASCII, 20 bytes with its NUL) stored after it.
    let mut tiff: Vec<u8> = b"II*\0".to_vec();
    tiff.extend_from_slice(&8u32.to_le_bytes());
    let entry = |tag: u16, kind: u16, count: u32, value: u32| {
        [tag.to_le_bytes().as_slice(), &kind.to_le_bytes(), &count.to_le_bytes(), &value.to_le_bytes()].concat()
    };
    tiff.extend_from_slice(&1u16.to_le_bytes());
    tiff.extend_from_slice(&entry(0x8769, 4, 1, 26));
    tiff.extend_from_slice(&0u32.to_le_bytes());
    tiff.extend_from_slice(&1u16.to_le_bytes());
    tiff.extend_from_slice(&entry(0x9003, 2, 20, 44));
    tiff.extend_from_slice(&0u32.to_le_bytes());
    let mut date = taken.as_bytes().to_vec();
    date.resize(19, b' ');
    date.push(0);
    tiff.extend_from_slice(&date);
    let mut segment = b"Exif\0\0".to_vec();
    segment.extend_from_slice(&tiff);
    let mut out = plain[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&u16::try_from(segment.len() + 2).expect("small").to_be_bytes());
    out.extend_from_slice(&segment);
    out.extend_from_slice(&plain[2..]);
    out
}

/// A PDF file of `objects` (numbered from 1, the first the catalog) with a correct xref
/// table.
fn pdf_file(objects: &[Vec<u8>]) -> Vec<u8> {
    pdf_file_with_info(objects, None)
}

/// `pdf_file` whose trailer names object `info_id` as the Info dictionary.
fn pdf_file_with_info(objects: &[Vec<u8>], info_id: Option<usize>) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(object);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R {}>>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1,
            info_id.map(|id| format!("/Info {id} 0 R ")).unwrap_or_default()
        )
        .as_bytes(),
    );
    out
}

/// A multi-page 8-bit grayscale TIFF, one page per `(width, height)`.
pub fn tiff(pages: &[(u32, u32)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut encoder = tiff::encoder::TiffEncoder::new(&mut out).expect("tiff encoder");
    for (index, (width, height)) in pages.iter().enumerate() {
        let pixels: Vec<u8> = (0..width * height).map(|i| ((i as usize + index * 40) % 256) as u8).collect();
        encoder.write_image::<tiff::encoder::colortype::Gray8>(*width, *height, &pixels).expect("tiff page");
    }
    out.into_inner()
}

/// One member of a zip built byte by byte, so that tests can write what no zip writer
/// would: duplicate names, links, lying headers.
#[derive(Debug, Clone)]
pub struct RawZipEntry {
    pub name: Vec<u8>,
    pub data: Vec<u8>,
    /// General-purpose flags (bit 0: encrypted).
    pub flags: u16,
    /// A Unix mode in the external attributes (file type bits included).
    pub unix_mode: Option<u32>,
    /// The name the local header gives, when it is to disagree with the directory.
    pub local_name: Option<Vec<u8>>,
    pub deflate: bool,
}

impl RawZipEntry {
    pub fn file(name: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> Self {
        Self {
            name: name.as_ref().to_vec(),
            data: data.as_ref().to_vec(),
            flags: 0,
            unix_mode: None,
            local_name: None,
            deflate: false,
        }
    }

    pub fn folder(name: &str) -> Self {
        Self::file(format!("{}/", name.trim_end_matches('/')), b"")
    }

    pub fn mode(mut self, mode: u32) -> Self {
        self.unix_mode = Some(mode);
        self
    }

    pub fn flags(mut self, flags: u16) -> Self {
        self.flags = flags;
        self
    }

    pub fn local_name(mut self, name: &str) -> Self {
        self.local_name = Some(name.as_bytes().to_vec());
        self
    }

    pub fn deflated(mut self) -> Self {
        self.deflate = true;
        self
    }
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("deflate");
    encoder.finish().expect("deflate")
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

/// The local header of a member (without its data).
fn local_header(name: &[u8], method: u16, flags: u16, crc: u32, packed: u32, size: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(30 + name.len());
    out.extend_from_slice(&[0x50, 0x4b, 0x03, 0x04, 20, 0]);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&method.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0x21, 0]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&packed.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(name);
    out
}

/// A central-directory record.
#[allow(clippy::too_many_arguments)]
fn directory_record(
    name: &[u8],
    method: u16,
    flags: u16,
    crc: u32,
    packed: u32,
    size: u32,
    mode: Option<u32>,
    at: u32,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(46 + name.len());
    let made_by: u16 = if mode.is_some() { 0x031e } else { 20 };
    out.extend_from_slice(&[0x50, 0x4b, 0x01, 0x02]);
    out.extend_from_slice(&made_by.to_le_bytes());
    out.extend_from_slice(&[20, 0]);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&method.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0x21, 0]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&packed.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&(mode.unwrap_or(0) << 16).to_le_bytes());
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(name);
    out
}

fn end_record(entries: usize, directory_len: usize, directory_at: usize) -> Vec<u8> {
    let mut out = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
    out.extend_from_slice(&(entries as u16).to_le_bytes());
    out.extend_from_slice(&(entries as u16).to_le_bytes());
    out.extend_from_slice(&(directory_len as u32).to_le_bytes());
    out.extend_from_slice(&(directory_at as u32).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// A zip of `entries`, written byte by byte.
pub fn raw_zip(entries: &[RawZipEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut directory = Vec::new();
    for entry in entries {
        let packed = if entry.deflate { deflate(&entry.data) } else { entry.data.clone() };
        let method = if entry.deflate { 8 } else { 0 };
        let crc = crc32(&entry.data);
        let local_name = entry.local_name.as_deref().unwrap_or(&entry.name);
        let (packed_len, size) = (packed.len() as u32, entry.data.len() as u32);
        directory.extend(directory_record(
            &entry.name,
            method,
            entry.flags,
            crc,
            packed_len,
            size,
            entry.unix_mode,
            out.len() as u32,
        ));
        out.extend(local_header(local_name, method, entry.flags, crc, packed_len, size));
        out.extend(packed);
    }
    let directory_at = out.len();
    out.extend_from_slice(&directory);
    out.extend(end_record(entries.len(), directory.len(), directory_at));
    out
}

/// An overlapping-file bomb: `members` local headers in a row, then one deflated block of
/// `kernel_bytes` zeros that every member's data runs into, so each member would inflate
/// the whole kernel (after the headers that follow its own).
pub fn overlapping_zip(members: usize, kernel_bytes: usize) -> Vec<u8> {
    let kernel = deflate(&vec![0u8; kernel_bytes]);
    let names: Vec<String> = (0..members).map(|i| format!("part{i:05}.bin")).collect();
    let header_len = |name: &str| 30 + name.len();
    let headers_len: usize = names.iter().map(|n| header_len(n)).sum();
    let mut out = Vec::new();
    let mut directory = Vec::new();
    for name in &names {
        let at = out.len();
        let packed = (headers_len + kernel.len() - at - header_len(name)) as u32;
        let size = kernel_bytes as u32;
        out.extend(local_header(name.as_bytes(), 8, 0, 0, packed, size));
        directory.extend(directory_record(name.as_bytes(), 8, 0, 0, packed, size, None, at as u32));
    }
    out.extend_from_slice(&kernel);
    let directory_at = out.len();
    out.extend_from_slice(&directory);
    out.extend(end_record(members, directory.len(), directory_at));
    out
}

/// One member of a hand-built tar: name, type flag (`b'0'` file, `b'5'` folder, `b'2'`
/// symlink …) and data.
pub type RawTarEntry<'a> = (&'a [u8], u8, &'a [u8]);

/// A gzipped ustar archive of `entries`, written byte by byte.
pub fn tar_gz(entries: &[RawTarEntry<'_>]) -> Vec<u8> {
    let mut tar = Vec::new();
    for (name, kind, data) in entries {
        let mut header = [0u8; 512];
        header[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
        header[100..108].copy_from_slice(b"0000644\0");
        header[108..116].copy_from_slice(b"0001750\0");
        header[116..124].copy_from_slice(b"0001750\0");
        header[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
        header[136..148].copy_from_slice(b"14712345670\0");
        header[148..156].copy_from_slice(b"        ");
        header[156] = *kind;
        if matches!(kind, b'1' | b'2') {
            header[157..163].copy_from_slice(b"target");
        }
        header[257..265].copy_from_slice(b"ustar\x0000");
        let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
        header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        tar.extend_from_slice(&header);
        tar.extend_from_slice(data);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }
    tar.resize(tar.len() + 1024, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gzip");
    gz.finish().expect("gzip")
}

/// Bytes that do not compress: a stream from a small linear congruential generator.
pub fn incompressible(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as u8
        })
        .collect()
}

/// One hostile archive per refusal rule, zip and tar.gz: `(upload name, bytes, reason code)`.
pub fn hostile_archives() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    const MIB: usize = 1 << 20;
    fn file(name: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> RawZipEntry {
        RawZipEntry::file(name, data)
    }
    let tar_file = |name: &'static [u8]| -> RawTarEntry<'static> { (name, b'0', b"data") };
    // 51 MiB that packs into about 1 MiB: over the member limit before the ratio.
    let big_member = [incompressible(MIB), vec![0u8; 50 * MIB]].concat();
    // Five 41 MiB members, each about half a MiB packed: over 200 MiB before the ratio.
    let bulky = [incompressible(MIB / 2), vec![0u8; 41 * MIB - MIB / 2]].concat();
    let bulky_zip: Vec<RawZipEntry> = (0..5).map(|i| file(format!("bulk{i}.bin"), &bulky).deflated()).collect();
    let many: Vec<RawZipEntry> = (0..5001).map(|i| file(format!("f{i}.txt"), b"")).collect();
    let many_names: Vec<Vec<u8>> = (0..5001).map(|i| format!("f{i}.txt").into_bytes()).collect();
    let many_tar: Vec<RawTarEntry<'_>> = many_names.iter().map(|n| (n.as_slice(), b'0', &b""[..])).collect();
    let whole = raw_zip(&[file("a.txt", b"hello")]);
    let cut_tar = tar_gz(&[tar_file(b"a.txt")]);
    vec![
        ("traversal.zip", raw_zip(&[file("../evil.txt", b"x")]), "path_traversal"),
        ("traversal.tar.gz", tar_gz(&[tar_file(b"a/../../evil.txt")]), "path_traversal"),
        ("absolute.zip", raw_zip(&[file("/etc/cron.d/x", b"x")]), "absolute_path"),
        ("absolute.tgz", tar_gz(&[tar_file(b"/etc/cron.d/x")]), "absolute_path"),
        ("drive.zip", raw_zip(&[file("C:/Windows/x.txt", b"x")]), "colon_in_path"),
        ("drive.tar.gz", tar_gz(&[tar_file(b"C:/Windows/x.txt")]), "colon_in_path"),
        ("backslash.zip", raw_zip(&[file("a\\..\\b.txt", b"x")]), "backslash_in_path"),
        ("backslash.tar.gz", tar_gz(&[tar_file(b"a\\b.txt")]), "backslash_in_path"),
        ("control.zip", raw_zip(&[file("a\u{1}b.txt", b"x")]), "control_character_in_path"),
        ("delete.tar.gz", tar_gz(&[tar_file(b"a\x7fb.txt")]), "control_character_in_path"),
        ("symlink.zip", raw_zip(&[file("link", b"/etc/passwd").mode(0o120777)]), "symlink"),
        ("symlink.tar.gz", tar_gz(&[(b"link", b'2', b"")]), "symlink"),
        ("hardlink.tar.gz", tar_gz(&[(b"hard", b'1', b"")]), "hardlink"),
        ("fifo.zip", raw_zip(&[file("pipe", b"").mode(0o010644)]), "special_file"),
        ("device.tar.gz", tar_gz(&[(b"null", b'3', b"")]), "special_file"),
        ("fifo.tar.gz", tar_gz(&[(b"pipe", b'6', b"")]), "special_file"),
        ("twice.zip", raw_zip(&[file("a.txt", b"1"), file("a.txt", b"2")]), "duplicate_path"),
        ("twice.tar.gz", tar_gz(&[tar_file(b"a.txt"), tar_file(b"a.txt")]), "duplicate_path"),
        ("case.zip", raw_zip(&[file("Read.me", b"1"), file("READ.ME", b"2")]), "duplicate_path"),
        ("case.tar.gz", tar_gz(&[tar_file(b"src/App.py"), tar_file(b"SRC/app.py")]), "duplicate_path"),
        ("unicode.zip", raw_zip(&[file("caf\u{e9}.txt", b"1"), file("cafe\u{301}.txt", b"2")]), "duplicate_path"),
        (
            "unicode.tar.gz",
            tar_gz(&[tar_file("caf\u{e9}".as_bytes()), tar_file("cafe\u{301}".as_bytes())]),
            "duplicate_path",
        ),
        ("clash.zip", raw_zip(&[file("a", b"1"), file("a/b.txt", b"2")]), "file_folder_clash"),
        ("clash.tar.gz", tar_gz(&[tar_file(b"a/b.txt"), (b"a/b.txt/", b'5', b"")]), "file_folder_clash"),
        ("encrypted.zip", raw_zip(&[file("secret.txt", b"xx").flags(1)]), "encrypted_member"),
        ("many.zip", raw_zip(&many), "too_many_entries"),
        ("many.tar.gz", tar_gz(&many_tar), "too_many_entries"),
        ("bomb.zip", raw_zip(&[file("zeros.bin", vec![0u8; 10 * MIB]).deflated()]), "ratio_exceeded"),
        ("bomb.tar.gz", tar_gz(&[(b"zeros.bin", b'0', &vec![0u8; 10 * MIB])]), "ratio_exceeded"),
        ("member.zip", raw_zip(&[file("big.bin", &big_member).deflated()]), "member_too_large"),
        ("member.tar.gz", tar_gz(&[(b"big.bin", b'0', &big_member)]), "member_too_large"),
        ("bulky.zip", raw_zip(&bulky_zip), "too_large_unpacked"),
        ("overlap.zip", overlapping_zip(2, 64 * 1024), "overlapping_entries"),
        ("mismatch.zip", raw_zip(&[file("a.txt", b"x").local_name("b.txt")]), "header_mismatch"),
        ("truncated.zip", whole[..whole.len() - 10].to_vec(), "corrupt_archive"),
        ("truncated.tar.gz", cut_tar[..cut_tar.len() / 2].to_vec(), "corrupt_archive"),
        (
            "notatar.tar.gz",
            {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(b"just some text, not a tar archive at all").expect("gzip");
                gz.finish().expect("gzip")
            },
            "corrupt_archive",
        ),
    ]
}

/// A scanned page: `text` (lines of Helvetica, 12 pt) printed on a US Letter page,
/// rasterised at `dpi`, then turned by `skew_degrees`, blurred and speckled as a scanner
/// would, deterministically from `seed`.
pub fn scanned_page(text: &str, dpi: u32, skew_degrees: f32, seed: u64) -> image::GrayImage {
    let page = crate::pdf::render_first_page(&pdf(&[text]), dpi).expect("render the printed page");
    scanned(&page, dpi, skew_degrees, seed)
}

/// `page` (rendered at `dpi`) as a scanner would give it back: turned by `skew_degrees`,
/// blurred and speckled, deterministically from `seed`.
pub fn scanned(page: &image::GrayImage, dpi: u32, skew_degrees: f32, seed: u64) -> image::GrayImage {
    use image::{GrayImage, Luma};
    let turned = imageproc::geometric_transformations::rotate_about_center(
        page,
        skew_degrees.to_radians(),
        imageproc::geometric_transformations::Interpolation::Bilinear,
        Luma([255]),
    );
    let blurred = imageproc::filter::gaussian_blur_f32(&turned, 0.6 * dpi as f32 / 150.0);
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    GrayImage::from_fn(blurred.width(), blurred.height(), |x, y| {
        let value = i32::from(blurred.get_pixel(x, y).0[0]);
        // Mild sensor noise everywhere, and a rare dark speck.
        let noise = (next() % 25) as i32 - 12;
        let speck = if next() % 4000 == 0 { -160 } else { 0 };
        Luma([(value + noise + speck).clamp(0, 255) as u8])
    })
}

/// An image-only PDF: each page one 8-bit grey image filling a page sized for `dpi`.
pub fn image_pdf(pages: &[image::GrayImage], dpi: u32) -> Vec<u8> {
    image_pdf_of(pages, dpi, pages.len())
}

/// An image-only PDF of `count` pages showing `images` in turn, each image stored once (a
/// thousands-page scan in a small file).
pub fn image_pdf_of(images: &[image::GrayImage], dpi: u32, count: usize) -> Vec<u8> {
    use std::io::Write;
    // 1: catalog, 2: page tree, 3..: the images, then a content stream and a page per page.
    let first_page = 3 + images.len();
    let mut objects: Vec<Vec<u8>> = Vec::new();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    let kids: Vec<String> = (0..count).map(|i| format!("{} 0 R", first_page + 2 * i)).collect();
    objects.push(format!("<< /Type /Pages /Kids [{}] /Count {count} >>", kids.join(" ")).into_bytes());
    for image in images {
        let mut deflated = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        deflated.write_all(image.as_raw()).expect("deflate");
        let deflated = deflated.finish().expect("deflate");
        let mut object = format!(
            "<< /Type /XObject /Subtype /Image /Width {} /Height {} /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode /Length {} >>\nstream\n",
            image.width(),
            image.height(),
            deflated.len()
        )
        .into_bytes();
        object.extend_from_slice(&deflated);
        object.extend_from_slice(b"\nendstream");
        objects.push(object);
    }
    for i in 0..count {
        let image = &images[i % images.len()];
        let image_id = 3 + i % images.len();
        let (w, h) = (image.width() as f32 * 72.0 / dpi as f32, image.height() as f32 * 72.0 / dpi as f32);
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {w:.2} {h:.2}] /Resources << /XObject << /Im0 {image_id} 0 R >> >> /Contents {} 0 R >>",
                first_page + 2 * i + 1
            )
            .into_bytes(),
        );
        let content = format!("q {w:.2} 0 0 {h:.2} 0 0 cm /Im0 Do Q\n");
        objects.push(format!("<< /Length {} >>\nstream\n{content}endstream", content.len()).into_bytes());
    }
    pdf_file(&objects)
}

/// A multi-page 8-bit grey TIFF of `pages`.
pub fn tiff_of(pages: &[image::GrayImage]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut encoder = tiff::encoder::TiffEncoder::new(&mut out).expect("tiff encoder");
    for page in pages {
        encoder
            .write_image::<tiff::encoder::colortype::Gray8>(page.width(), page.height(), page.as_raw())
            .expect("tiff page");
    }
    out.into_inner()
}

/// A PNG of `page`.
pub fn png_of(page: &image::GrayImage) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    page.write_to(&mut out, image::ImageFormat::Png).expect("png");
    out.into_inner()
}

/// The public test corpus: `SLUICE_CORPUS_DIR`, else the `shared/corpus` folder beside the
/// checkout; a missing folder fails the test that asked, naming where it looked.
pub fn corpus_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("SLUICE_CORPUS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"));
    assert!(
        dir.join("README.md").is_file(),
        "the corpus folder is absent: expected {} (set SLUICE_CORPUS_DIR to its path)",
        dir.display()
    );
    dir
}

/// One file of the public test corpus, by its path there.
pub fn corpus_file(name: &str) -> Vec<u8> {
    std::fs::read(corpus_dir().join(name)).unwrap_or_else(|e| panic!("the corpus file {name} is absent: {e}"))
}
