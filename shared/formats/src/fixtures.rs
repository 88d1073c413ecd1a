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
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
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
