//! A document's own date through the same check and extraction the upload path runs:
//! files built in code with known dates, and real files from the public corpus (beside the
//! checkout) whose metadata says when they were made.

use sluice_fixtures::{corpus_file as corpus, docx, docx_created, jpeg_taken, odt_created, pdf, pdf_with_info};
use sluice_formats::dates::DateSource;
use sluice_formats::{ExtractOptions, check_upload, extract};
use time::Date;
use time::macros::date;

/// A file's own date as extraction reads it, with where it came from.
type Found = Option<(Date, DateSource)>;

fn own_date(name: &str, bytes: &[u8]) -> Found {
    let accepted = check_upload(name, None, bytes).unwrap_or_else(|r| panic!("{name} refused: {r:?}"));
    let extraction = extract(accepted.kind, bytes, &ExtractOptions::new(200_000)).expect("extracted");
    extraction.date.map(|own| (own.date, own.source))
}

#[test]
fn each_format_gives_the_date_its_metadata_holds() {
    let cases: Vec<(&str, Vec<u8>, Found)> = vec![
        (
            "created.pdf",
            pdf_with_info(&["Dated"], "/CreationDate (D:20190304101112+01'00') /ModDate (D:20200101000000Z)"),
            Some((date!(2019 - 03 - 04), DateSource::PdfCreationDate)),
        ),
        (
            "modified.pdf",
            pdf_with_info(&["Dated"], "/ModDate (D:20200506)"),
            Some((date!(2020 - 05 - 06), DateSource::PdfModDate)),
        ),
        ("undated.pdf", pdf(&["Undated"]), None),
        ("junk-date.pdf", pdf_with_info(&["Dated"], "/CreationDate (yesterday)"), None),
        (
            "created.docx",
            docx_created(&["Body"], "2018-11-12T08:00:00Z"),
            Some((date!(2018 - 11 - 12), DateSource::DctermsCreated)),
        ),
        ("undated.docx", docx("<w:p><w:r><w:t>Body</w:t></w:r></w:p>"), None),
        (
            "created.odt",
            odt_created(&["Body"], "2017-02-03T04:05:06.123"),
            Some((date!(2017 - 02 - 03), DateSource::OdfCreationDate)),
        ),
        (
            "taken.jpg",
            jpeg_taken(&image::GrayImage::from_pixel(16, 16, image::Luma([128u8])), "2016:07:08 09:10:11"),
            Some((date!(2016 - 07 - 08), DateSource::ExifDateTimeOriginal)),
        ),
        ("notes.md", b"# Notes\n\nNo metadata here.\n".to_vec(), None),
    ];
    for (name, bytes, expected) in cases {
        assert_eq!(own_date(name, &bytes), expected, "{name}");
    }
}

#[test]
fn real_files_give_the_dates_their_authors_tools_wrote() {
    let cases = [
        ("apache-poi/sample.docx", date!(2006 - 10 - 13), DateSource::DctermsCreated),
        ("apache-poi/sample.xlsx", date!(2007 - 08 - 15), DateSource::DctermsCreated),
        ("apache-poi/quick.msg", date!(2007 - 06 - 14), DateSource::MsgDate),
    ];
    for (path, day, source) in cases {
        let name = path.rsplit('/').next().expect("name");
        assert_eq!(own_date(name, &corpus(path)), Some((day, source)), "{path}");
    }
}
