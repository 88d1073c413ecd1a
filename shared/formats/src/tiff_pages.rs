//! TIFF pages to PNG, for the chat runner (a model is shown PNG pages, capped at
//! `CHAT_TIFF_MAX_INLINE_PAGES`). Decoding runs under the `tiff` crate's buffer limits so
//! a hostile file is refused in bounded time and memory; one that cannot be decoded is
//! refused at upload.

use std::io::Cursor;
use tiff::ColorType;
use tiff::decoder::{Decoder, DecodingResult, Limits};

/// The largest decoded page, in bytes (a 64-megapixel 8-bit RGB page is 192 MiB; pages
/// that large are refused rather than risk the function's memory).
const MAX_PAGE_BYTES: usize = 96 << 20;
/// Pages counted before giving up on counting (the rest are never converted anyway).
const MAX_PAGES_COUNTED: u32 = 1000;

/// Runs decoder work, turning a panic of the decoder into an error.
fn guarded<T>(work: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
        .unwrap_or_else(|_| Err("the decoder failed on this file".to_owned()))
}

fn decoder(bytes: &[u8]) -> Result<Decoder<Cursor<&[u8]>>, String> {
    let mut limits = Limits::default();
    limits.decoding_buffer_size = MAX_PAGE_BYTES;
    limits.intermediate_buffer_size = MAX_PAGE_BYTES;
    limits.ifd_value_size = 4 << 20;
    Decoder::new(Cursor::new(bytes))
        .map(|d| d.with_limits(limits))
        .map_err(|e| format!("not a readable TIFF: {}", reason(&e)))
}

/// Why the decoder stopped, in Sluice's words (its own error text is never stored or answered).
fn reason(error: &tiff::TiffError) -> &'static str {
    match error {
        tiff::TiffError::FormatError(_) => "its structure is broken",
        tiff::TiffError::UnsupportedError(_) => {
            "it uses a TIFF feature Sluice does not decode (a compression or a layout)"
        }
        tiff::TiffError::IoError(_) => "its data ends early",
        tiff::TiffError::LimitsExceeded | tiff::TiffError::IntSizeError => "a page is larger than Sluice decodes",
        _ => "the decoder could not read it",
    }
}

/// Decodes every page (proving the file can be shown: a page that fails later would fail
/// in front of the model) and counts them. Past `MAX_PAGES_COUNTED` the file is refused.
pub fn check(bytes: &[u8], deadline: std::time::Instant) -> Result<u32, String> {
    guarded(|| check_pages(bytes, deadline))
}

fn check_pages(bytes: &[u8], deadline: std::time::Instant) -> Result<u32, String> {
    let mut decoder = decoder(bytes)?;
    let mut pages = 1;
    loop {
        check_data_layout(&mut decoder, bytes.len() as u64).map_err(|e| format!("page {pages}: {e}"))?;
        decoder.read_image().map_err(|e| format!("page {pages} cannot be decoded: {}", reason(&e)))?;
        if std::time::Instant::now() > deadline {
            return Err("decoding the pages took longer than the time limit".to_owned());
        }
        if !decoder.more_images() {
            return Ok(pages);
        }
        if pages == MAX_PAGES_COUNTED {
            return Err(format!("more than {MAX_PAGES_COUNTED} pages"));
        }
        decoder.next_image().map_err(|e| format!("page {} cannot be read: {}", pages + 1, reason(&e)))?;
        pages += 1;
    }
}

/// A page's strips (or tiles) must lie inside the file and must not overlap: the decoder
/// reads only what it needs and would accept a page whose data regions collide, which no
/// writer produces and fuzzers do.
fn check_data_layout(decoder: &mut Decoder<Cursor<&[u8]>>, file_len: u64) -> Result<(), String> {
    use tiff::tags::Tag;
    let regions = |offsets: Tag, counts: Tag, decoder: &mut Decoder<Cursor<&[u8]>>| match (
        decoder.find_tag_unsigned_vec::<u64>(offsets),
        decoder.find_tag_unsigned_vec::<u64>(counts),
    ) {
        (Ok(Some(offsets)), Ok(Some(counts))) => Some(offsets.into_iter().zip(counts).collect::<Vec<_>>()),
        _ => None,
    };
    let Some(mut regions) = regions(Tag::StripOffsets, Tag::StripByteCounts, decoder)
        .or_else(|| regions(Tag::TileOffsets, Tag::TileByteCounts, decoder))
    else {
        return Ok(());
    };
    regions.retain(|(_, count)| *count > 0);
    regions.sort_unstable();
    // Identical regions are a writer's legitimate reuse of one block for equal strips.
    regions.dedup();
    for (offset, count) in &regions {
        if offset.checked_add(*count).is_none_or(|end| end > file_len) {
            return Err("image data runs past the end of the file".to_owned());
        }
    }
    if regions.windows(2).any(|pair| pair[0].0 + pair[0].1 > pair[1].0) {
        return Err("two blocks of image data overlap".to_owned());
    }
    Ok(())
}

/// Page `index` (0-based) as a PNG.
pub fn page_png(bytes: &[u8], index: u32) -> Result<Vec<u8>, String> {
    guarded(|| convert_page(bytes, index))
}

fn convert_page(bytes: &[u8], index: u32) -> Result<Vec<u8>, String> {
    let mut decoder = decoder(bytes)?;
    for page in 0..index {
        if !decoder.more_images() {
            return Err(format!("the TIFF has {} pages", page + 1));
        }
        decoder.next_image().map_err(|e| format!("page {} cannot be read: {}", page + 2, reason(&e)))?;
    }
    page_to_png(&mut decoder)
}

fn page_to_png(decoder: &mut Decoder<Cursor<&[u8]>>) -> Result<Vec<u8>, String> {
    let (width, height) = decoder.dimensions().map_err(|e| reason(&e).to_owned())?;
    let color = decoder.colortype().map_err(|e| reason(&e).to_owned())?;
    let image = decoder.read_image().map_err(|e| format!("the image cannot be decoded: {}", reason(&e)))?;
    let (samples, png_color) = to_eight_bit(image, color, width as usize, height as usize)?;
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png_color);
    encoder.set_depth(png::BitDepth::Eight);
    let not_written = |_| "the page could not be written as PNG".to_owned();
    let mut writer = encoder.write_header().map_err(not_written)?;
    writer.write_image_data(&samples).map_err(not_written)?;
    writer.finish().map_err(not_written)?;
    Ok(out)
}

/// Converts decoded samples to 8-bit samples PNG can hold.
fn to_eight_bit(
    image: DecodingResult,
    color: ColorType,
    width: usize,
    height: usize,
) -> Result<(Vec<u8>, png::ColorType), String> {
    let (channels, png_color) = match color {
        ColorType::Gray(_) => (1, png::ColorType::Grayscale),
        ColorType::GrayA(_) => (2, png::ColorType::GrayscaleAlpha),
        ColorType::RGB(_) | ColorType::YCbCr(_) => (3, png::ColorType::Rgb),
        ColorType::RGBA(_) => (4, png::ColorType::Rgba),
        ColorType::CMYK(_) => (4, png::ColorType::Rgb),
        other => return Err(format!("pixel format {other:?} is not supported")),
    };
    let bits = match color {
        ColorType::Gray(b)
        | ColorType::GrayA(b)
        | ColorType::RGB(b)
        | ColorType::RGBA(b)
        | ColorType::CMYK(b)
        | ColorType::YCbCr(b) => b,
        _ => 8,
    };
    let samples: Vec<u8> = match image {
        DecodingResult::U8(data) if bits == 8 => data,
        DecodingResult::U8(data) if bits < 8 && channels == 1 => unpack_bits(&data, width, height, bits)?,
        DecodingResult::U16(data) => data.iter().map(|v| (v >> 8) as u8).collect(),
        DecodingResult::F32(data) => data.iter().map(|v| (v.clamp(0.0, 1.0) * 255.0) as u8).collect(),
        _ => return Err(format!("sample format of {color:?} is not supported")),
    };
    let expected = width * height * channels;
    if samples.len() < expected {
        return Err("the image data is shorter than its dimensions".to_owned());
    }
    let mut samples = samples;
    samples.truncate(expected);
    if matches!(color, ColorType::CMYK(_)) {
        samples = samples
            .chunks_exact(4)
            .flat_map(|p| {
                let k = 255 - u16::from(p[3]);
                [0, 1, 2].map(|i| ((255 - u16::from(p[i])) * k / 255) as u8)
            })
            .collect();
    }
    Ok((samples, png_color))
}

/// Expands rows of 1-, 2- or 4-bit samples (each row padded to a byte) to 8 bits.
fn unpack_bits(data: &[u8], width: usize, height: usize, bits: u8) -> Result<Vec<u8>, String> {
    let row_bytes = (width * usize::from(bits)).div_ceil(8);
    if data.len() < row_bytes * height {
        return Err("the image data is shorter than its dimensions".to_owned());
    }
    let max = (1u16 << bits) - 1;
    let mut out = Vec::with_capacity(width * height);
    for row in data.chunks_exact(row_bytes).take(height) {
        for x in 0..width {
            let bit = x * usize::from(bits);
            let byte = row[bit / 8];
            let shift = 8 - usize::from(bits) - (bit % 8);
            let value = (u16::from(byte) >> shift) & max;
            out.push((value * 255 / max) as u8);
        }
    }
    Ok(out)
}

/// Visits the pages in order, each with its 1-based number and a way to decode it to grey
/// (called only for a page that is to be read); stops when `visit` answers `false`.
pub fn visit_grey_pages(
    bytes: &[u8],
    mut visit: impl FnMut(u32, &mut dyn FnMut() -> Result<image::GrayImage, String>) -> bool,
) -> Result<(), String> {
    guarded(|| {
        let mut decoder = decoder(bytes)?;
        let mut number = 1;
        loop {
            let file_len = bytes.len() as u64;
            let mut draw = || -> Result<image::GrayImage, String> {
                check_data_layout(&mut decoder, file_len)?;
                let (width, height) = decoder.dimensions().map_err(|e| e.to_string())?;
                let color = decoder.colortype().map_err(|e| e.to_string())?;
                let image = decoder.read_image().map_err(|e| format!("the image cannot be decoded: {e}"))?;
                let (samples, png_color) = to_eight_bit(image, color, width as usize, height as usize)?;
                let channels = match png_color {
                    png::ColorType::Grayscale => 1,
                    png::ColorType::GrayscaleAlpha => 2,
                    png::ColorType::Rgb => 3,
                    _ => 4,
                };
                let grey = samples
                    .chunks_exact(channels)
                    .map(|p| if channels < 3 { p[0] } else { crate::scan::luma(p[0], p[1], p[2]) })
                    .collect();
                image::GrayImage::from_raw(width, height, grey).ok_or_else(|| "the page has no pixels".to_owned())
            };
            if !visit(number, &mut draw) || !decoder.more_images() || number == MAX_PAGES_COUNTED {
                return Ok(());
            }
            decoder.next_image().map_err(|e| format!("page {} cannot be read: {e}", number + 1))?;
            number += 1;
        }
    })
}
