//! The images inside a document, gathered for a vision model to describe. The readers run
//! in the sandboxed worker, which cannot reach a provider: they note each image's place in
//! the text (a byte offset at a block boundary) and hand its pixels, normalised and
//! bounded, to the parse function, which describes them and writes each description in at
//! its place.
//!
//! What is gathered: images at least [`MIN_SIDE`] pixels on each side and [`MIN_PIXELS`] in
//! all (icons, rules and bullets are not worth a description); each distinct image once per
//! document (its first place), however often it is referred to; at most `max_images` of
//! them. Each is sent at most [`MAX_SIDE`] pixels on its longer side (vision models read
//! less anyway), as PNG, or as JPEG when that is smaller than [`MAX_IMAGE_BYTES`] and PNG is
//! not; what still does not fit, or cannot be decoded, is skipped with its reason.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

/// An image smaller than this on either side is an icon, a rule or a bullet.
pub const MIN_SIDE: u32 = 32;
/// ...and one of fewer pixels than this in all.
pub const MIN_PIXELS: u64 = 96 * 96;
/// The longer side an image is sent at, at most.
pub const MAX_SIDE: u32 = 1024;
/// The most bytes of one image sent.
pub const MAX_IMAGE_BYTES: usize = 1 << 20;
/// The most bytes of images one document hands on: a bound on the worker's answer.
pub const MAX_DOCUMENT_IMAGE_BYTES: usize = 32 << 20;
/// The most pixels decoded of one image (a larger one is skipped, not decoded).
const MAX_DECODED_PIXELS: u64 = 40_000_000;

/// Which images to gather; present only when the collection describes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageOptions {
    pub max_images: u32,
}

/// Why an image was not handed on for description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Below the size threshold: an icon, a rule or a bullet.
    TooSmall,
    /// Past the document's `max_images`.
    OverMaxImages,
    /// It could not be decoded.
    Undecodable,
    /// Larger than can be sent, even reduced.
    TooLarge,
    /// Linked from outside the file, or named but missing from it.
    NotInFile,
    /// Past [`MAX_DOCUMENT_IMAGE_BYTES`] of the document's images.
    OverImageBudget,
}

impl SkipReason {
    /// The reason as the document reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooSmall => "too_small",
            Self::OverMaxImages => "over_max_images",
            Self::Undecodable => "undecodable",
            Self::TooLarge => "too_large",
            Self::NotInFile => "not_in_file",
            Self::OverImageBudget => "over_image_budget",
        }
    }
}

/// An image to describe: where it goes, its bytes as sent and their hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundImage {
    /// The byte offset in the text where its description goes (a block boundary).
    pub offset: usize,
    /// The page it is on (PDF), so a description placed where a page ends stays on its
    /// own page; 0 where a document has no pages.
    #[serde(default)]
    pub page: u32,
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    #[serde(with = "base64_bytes")]
    pub bytes: Vec<u8>,
    /// Its size as sent.
    pub width: u32,
    pub height: u32,
    /// Hex SHA-256 of `bytes`: identical images are described once per collection.
    pub sha256: String,
    /// The other places in the document that show the same image, `(offset, page)` in
    /// order: it is described once and its description written at each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_at: Vec<(usize, u32)>,
}

/// The most other places one image's description is written at (a logo on every page of a
/// long report is described once and named at most this many times again).
pub const MAX_REPEATS: usize = 100;

mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// The images of one document, as its reader finds them.
#[derive(Debug, Default)]
pub struct ImageCollector {
    max_images: usize,
    found: Vec<FoundImage>,
    /// The hashes of what was seen, with the place in `found` of those found, so a repeat is
    /// neither sent nor counted twice, and a found one's repeat is placed again.
    seen: HashMap<[u8; 32], Option<usize>>,
    skipped: BTreeMap<SkipReason, u32>,
    page: u32,
    /// The bytes of what was found.
    bytes: usize,
}

impl ImageCollector {
    pub fn new(options: ImageOptions) -> Self {
        Self { max_images: options.max_images as usize, ..Self::default() }
    }

    /// An image's encoded bytes (a document's own PNG, JPEG, GIF or WebP part), placed at
    /// `offset`.
    pub fn offer_encoded(&mut self, bytes: &[u8], offset: usize) {
        let Some(hash) = self.first_sight(bytes, offset) else { return };
        match imagesize::blob_size(bytes) {
            Ok(size) if !self.wants(side(size.width), side(size.height)) => {}
            Ok(_) => match decode(bytes) {
                Some(image) => self.offer_decoded(image, offset, hash),
                None => self.skip(SkipReason::Undecodable),
            },
            Err(_) => self.skip(SkipReason::Undecodable),
        }
    }

    /// An image's pixels (a PDF's image object, a TIFF's page), placed at `offset`; the
    /// same pixels again are a repeat.
    pub fn offer_pixels(&mut self, image: image::DynamicImage, offset: usize) {
        if let Some(hash) = self.first_sight(image.as_bytes(), offset) {
            self.offer_decoded(image, offset, hash);
        }
    }

    /// The page the next images are found on (PDF, from 1).
    pub fn on_page(&mut self, page: u32) {
        self.page = page;
    }

    /// Whether an image whose pixels are `width` × `height` is worth decoding at all; one
    /// that is not is counted as skipped.
    pub fn wants(&mut self, width: u32, height: u32) -> bool {
        if !worth_describing(u64::from(width), u64::from(height)) {
            self.skip(SkipReason::TooSmall);
            return false;
        }
        if u64::from(width) * u64::from(height) > MAX_DECODED_PIXELS {
            self.skip(SkipReason::TooLarge);
            return false;
        }
        true
    }

    /// A picture the document refers to but does not hold.
    pub fn not_in_file(&mut self) {
        self.skip(SkipReason::NotInFile);
    }

    /// The hash of `bytes` when this is the first time they were seen in the document; a
    /// repeat of an image found is placed again at `offset`.
    fn first_sight(&mut self, bytes: &[u8], offset: usize) -> Option<[u8; 32]> {
        let hash: [u8; 32] = Sha256::digest(bytes).into();
        match self.seen.get(&hash) {
            None => {
                self.seen.insert(hash, None);
                Some(hash)
            }
            Some(Some(index)) => {
                let place = (offset, self.page);
                let image = &mut self.found[*index];
                let new_place = (image.offset, image.page) != place && image.also_at.last() != Some(&place);
                if new_place && image.also_at.len() < MAX_REPEATS {
                    image.also_at.push(place);
                }
                None
            }
            Some(None) => None,
        }
    }

    fn offer_decoded(&mut self, image: image::DynamicImage, offset: usize, hash: [u8; 32]) {
        if !worth_describing(u64::from(image.width()), u64::from(image.height())) {
            return self.skip(SkipReason::TooSmall);
        }
        if self.found.len() >= self.max_images {
            return self.skip(SkipReason::OverMaxImages);
        }
        match encode(image) {
            Some((_, bytes, _, _)) if self.bytes + bytes.len() > MAX_DOCUMENT_IMAGE_BYTES => {
                self.skip(SkipReason::OverImageBudget)
            }
            Some((media_type, bytes, width, height)) => {
                self.bytes += bytes.len();
                let sha256 = hex(&Sha256::digest(&bytes));
                let (media_type, page) = (media_type.to_owned(), self.page);
                self.found.push(FoundImage {
                    offset,
                    page,
                    media_type,
                    bytes,
                    width,
                    height,
                    sha256,
                    also_at: Vec::new(),
                });
                self.seen.insert(hash, Some(self.found.len() - 1));
            }
            None => self.skip(SkipReason::TooLarge),
        }
    }

    fn skip(&mut self, reason: SkipReason) {
        *self.skipped.entry(reason).or_default() += 1;
    }

    /// What was found (offsets cut to the final text's length) and what was skipped, why.
    pub fn finish(self, text_len: usize) -> (Vec<FoundImage>, Vec<(SkipReason, u32)>) {
        let found = self.found.into_iter().map(|image| FoundImage {
            offset: image.offset.min(text_len),
            also_at: image.also_at.into_iter().map(|(offset, page)| (offset.min(text_len), page)).collect(),
            ..image
        });
        (found.collect(), self.skipped.into_iter().collect())
    }
}

/// A side as the header gives it, saturated (a header may claim any size).
fn side(pixels: usize) -> u32 {
    u32::try_from(pixels).unwrap_or(u32::MAX)
}

fn worth_describing(width: u64, height: u64) -> bool {
    width >= u64::from(MIN_SIDE) && height >= u64::from(MIN_SIDE) && width * height >= MIN_PIXELS
}

fn decode(bytes: &[u8]) -> Option<image::DynamicImage> {
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes)).with_guessed_format().ok()?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODED_PIXELS * 4);
    reader.limits(limits);
    reader.decode().ok()
}

/// The image at most [`MAX_SIDE`] on its longer side, as PNG or (smaller) JPEG, within
/// [`MAX_IMAGE_BYTES`].
fn encode(image: image::DynamicImage) -> Option<(&'static str, Vec<u8>, u32, u32)> {
    let image = if image.width().max(image.height()) > MAX_SIDE {
        image.resize(MAX_SIDE, MAX_SIDE, image::imageops::FilterType::Triangle)
    } else {
        image
    };
    let (width, height) = (image.width(), image.height());
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).ok()?;
    if png.len() <= MAX_IMAGE_BYTES {
        return Some(("image/png", png, width, height));
    }
    let mut jpeg = Vec::new();
    image::DynamicImage::ImageRgb8(image.to_rgb8())
        .write_to(&mut std::io::Cursor::new(&mut jpeg), image::ImageFormat::Jpeg)
        .ok()?;
    (jpeg.len() <= MAX_IMAGE_BYTES).then_some(("image/jpeg", jpeg, width, height))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32, shade: u8) -> Vec<u8> {
        let image =
            image::RgbImage::from_fn(width, height, |x, y| image::Rgb([shade, (x % 256) as u8, (y % 256) as u8]));
        let mut bytes = Vec::new();
        image::DynamicImage::ImageRgb8(image)
            .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
            .expect("encoded");
        bytes
    }

    #[test]
    fn icons_repeats_and_images_past_the_limit_are_not_sent() {
        let mut images = ImageCollector::new(ImageOptions { max_images: 2 });
        images.offer_encoded(&png(16, 16, 0), 0);
        images.offer_encoded(&png(300, 200, 1), 0);
        images.offer_encoded(&png(300, 200, 1), 0);
        images.offer_encoded(&png(2000, 100, 2), 0);
        images.offer_encoded(&png(300, 200, 3), 0);
        images.offer_encoded(b"not an image at all", 0);
        let (found, skipped) = images.finish(0);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].width, found[0].height, found[0].media_type.as_str()), (300, 200, "image/png"));
        // The wide one is sent at most MAX_SIDE on its longer side.
        assert_eq!((found[1].width, found[1].height), (1024, 51));
        assert_ne!(found[0].sha256, found[1].sha256);
        assert_eq!(skipped, [(SkipReason::TooSmall, 1), (SkipReason::OverMaxImages, 1), (SkipReason::Undecodable, 1)]);
        assert!(found[0].also_at.is_empty(), "a repeat at the same place is no other place");
        // What crosses to the parse function survives the trip.
        let json = serde_json::to_string(&found[0]).expect("serialised");
        assert_eq!(serde_json::from_str::<FoundImage>(&json).expect("read back"), found[0]);
    }

    #[test]
    fn an_image_repeated_on_later_pages_is_found_once_with_every_other_place() {
        let mut images = ImageCollector::new(ImageOptions { max_images: 5 });
        let (chart, icon) = (png(300, 200, 7), png(16, 16, 0));
        for page in 1..=3u32 {
            images.on_page(page);
            images.offer_encoded(&chart, page as usize * 100);
            images.offer_encoded(&icon, page as usize * 100);
        }
        images.on_page(4);
        images.offer_pixels(image::load_from_memory(&chart).expect("decoded"), 999);
        let (found, skipped) = images.finish(350);
        assert_eq!(found.len(), 2, "the chart once from its bytes, once from its pixels");
        assert_eq!((found[0].offset, found[0].page), (100, 1));
        assert_eq!(found[0].also_at, [(200, 2), (300, 3)]);
        assert_eq!((found[1].offset, found[1].page), (350, 4), "cut to the text's length");
        assert_eq!(skipped, [(SkipReason::TooSmall, 1)], "the icon is counted once");
        let json = serde_json::to_string(&found[0]).expect("serialised");
        assert_eq!(serde_json::from_str::<FoundImage>(&json).expect("read back"), found[0]);
    }
}
