//! What the bytes are, whatever the name says.

use crate::kinds::Family;

/// The signature family found in the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Family(Family),
    /// A recognised format that is on no row of the allowlist (an executable, audio, …).
    Other(&'static str),
    /// No signature and not text.
    Binary,
}

/// How far into a file text detection looks.
const TEXT_PROBE_BYTES: usize = 64 * 1024;

/// Sniffs the signature family of `bytes`.
pub fn sniff(bytes: &[u8]) -> Sniffed {
    // A PDF may carry up to 1 KiB of junk before its header; readers accept it, so do we.
    if bytes[..bytes.len().min(1024)].windows(5).any(|w| w == b"%PDF-") {
        return Sniffed::Family(Family::Pdf);
    }
    if let Some(found) = infer::get(bytes) {
        let family = match found.mime_type() {
            "image/jpeg" => Some(Family::Jpeg),
            "image/png" => Some(Family::Png),
            "image/webp" => Some(Family::Webp),
            "image/gif" => Some(Family::Gif),
            "image/tiff" => Some(Family::Tiff),
            "application/zip" => Some(Family::Zip(None)),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => {
                Some(Family::Zip(Some("docx")))
            }
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => Some(Family::Zip(Some("xlsx"))),
            "application/vnd.openxmlformats-officedocument.presentationml.presentation" => {
                Some(Family::Zip(Some("pptx")))
            }
            "application/vnd.oasis.opendocument.text" => Some(Family::Zip(Some("odt"))),
            "application/vnd.oasis.opendocument.spreadsheet" => Some(Family::Zip(Some("ods"))),
            "application/vnd.oasis.opendocument.presentation" => Some(Family::Zip(Some("odp"))),
            "application/epub+zip" => Some(Family::Zip(Some("epub"))),
            "application/msword"
            | "application/vnd.ms-excel"
            | "application/vnd.ms-powerpoint"
            | "application/x-ole-storage"
            | "application/vnd.ms-outlook" => Some(Family::Cfb),
            "application/gzip" => Some(Family::Gzip),
            // infer recognises some markup by its opening; it is still text.
            "text/html" | "text/xml" | "application/xml" | "text/x-shellscript" | "application/rtf" | "text/rtf" => {
                Some(Family::Text)
            }
            _ => None,
        };
        return match family {
            Some(family) => Sniffed::Family(family),
            None => Sniffed::Other(found.mime_type()),
        };
    }
    // BigTIFF (version 43) is a TIFF that infer does not know.
    if bytes.starts_with(b"II\x2b\0") || bytes.starts_with(b"MM\0\x2b") {
        return Sniffed::Family(Family::Tiff);
    }
    if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) {
        return Sniffed::Family(Family::Cfb);
    }
    if looks_like_text(bytes) { Sniffed::Family(Family::Text) } else { Sniffed::Binary }
}

/// True when the start of `bytes` reads as text in some encoding: a Unicode BOM, a UTF-16
/// pattern, or almost no control bytes. Legacy 8-bit encodings pass; binaries do not.
pub fn looks_like_text(bytes: &[u8]) -> bool {
    let probe = &bytes[..bytes.len().min(TEXT_PROBE_BYTES)];
    if crate::text::bom_encoding(probe).is_some() || crate::text::utf16_without_bom(probe).is_some() {
        return true;
    }
    if probe.is_empty() {
        return true;
    }
    // ISO-2022-KR shifts with SO/SI; with its designation escape those are text.
    let iso_2022_kr = probe.windows(4).any(|w| w == b"\x1b$)C");
    let probe_controls = |b: u8| {
        b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b) && !(iso_2022_kr && (b == 0x0E || b == 0x0F))
    };
    let controls = probe.iter().filter(|&&b| probe_controls(b)).count();
    // A stray NUL or two (the seed strips them) is tolerated; a binary has far more.
    controls <= (probe.len() / 100).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_recognised() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), Sniffed::Family(Family::Png));
        assert_eq!(sniff(b"%PDF-1.7\n"), Sniffed::Family(Family::Pdf));
        assert_eq!(sniff(b"\x1f\x8b\x08\0\0\0\0\0"), Sniffed::Family(Family::Gzip));
        assert_eq!(sniff(b"PK\x03\x04\x14\0\0\0\0\0"), Sniffed::Family(Family::Zip(None)));
        assert_eq!(sniff(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0]), Sniffed::Family(Family::Cfb));
    }

    #[test]
    fn text_in_any_encoding_is_text_and_binaries_are_not() {
        assert_eq!(sniff(b"month,total\njan,10\n"), Sniffed::Family(Family::Text));
        assert_eq!(sniff(b"\xff\xfeh\0i\0"), Sniffed::Family(Family::Text));
        assert_eq!(sniff("zażółć gęślą jaźń".as_bytes()), Sniffed::Family(Family::Text));
        assert_eq!(sniff(b"caf\xe9 cr\xe8me"), Sniffed::Family(Family::Text));
        let random: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        assert_eq!(sniff(&random), Sniffed::Binary);
        assert!(matches!(sniff(b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff"), Sniffed::Other(_)));
    }
}
