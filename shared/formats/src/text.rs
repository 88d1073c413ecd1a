//! Decoding text files: BOMs, UTF-16/32, an XML declaration or HTML meta charset, UTF-8,
//! and otherwise the legacy encoding `chardetng` finds most likely. Never mojibake by
//! assuming UTF-8 and replacing what does not fit.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};

/// How a text file is labelled, which decides where its declared encoding is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    Plain,
    Xml,
    Html,
}

/// A Unicode encoding named by a byte order mark, and the mark's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unicode {
    Utf8,
    Utf16Le,
    Utf16Be,
    Utf32Le,
    Utf32Be,
}

impl Unicode {
    fn name(self) -> &'static str {
        match self {
            Self::Utf8 => "UTF-8",
            Self::Utf16Le => "UTF-16LE",
            Self::Utf16Be => "UTF-16BE",
            Self::Utf32Le => "UTF-32LE",
            Self::Utf32Be => "UTF-32BE",
        }
    }
}

/// The encoding a BOM at the start of `bytes` names, with the BOM's length.
pub fn bom_encoding(bytes: &[u8]) -> Option<(Unicode, usize)> {
    // UTF-32LE's BOM starts with UTF-16LE's, so it is checked first.
    match bytes {
        [0xFF, 0xFE, 0, 0, ..] => Some((Unicode::Utf32Le, 4)),
        [0, 0, 0xFE, 0xFF, ..] => Some((Unicode::Utf32Be, 4)),
        [0xEF, 0xBB, 0xBF, ..] => Some((Unicode::Utf8, 3)),
        [0xFF, 0xFE, ..] => Some((Unicode::Utf16Le, 2)),
        [0xFE, 0xFF, ..] => Some((Unicode::Utf16Be, 2)),
        _ => None,
    }
}

/// UTF-16 without a BOM, told by the zero high bytes of mostly-ASCII text.
pub fn utf16_without_bom(bytes: &[u8]) -> Option<Unicode> {
    let probe = &bytes[..bytes.len().min(4096) & !1];
    if probe.len() < 4 {
        return None;
    }
    let pairs = probe.len() / 2;
    let even_zero = probe.chunks_exact(2).filter(|p| p[0] == 0 && p[1] != 0).count();
    let odd_zero = probe.chunks_exact(2).filter(|p| p[1] == 0 && p[0] != 0).count();
    if even_zero * 10 >= pairs * 6 && odd_zero * 10 < pairs {
        Some(Unicode::Utf16Be)
    } else if odd_zero * 10 >= pairs * 6 && even_zero * 10 < pairs {
        Some(Unicode::Utf16Le)
    } else {
        None
    }
}

/// Decoded text and the name of the encoding it was read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub encoding: &'static str,
}

/// Decodes a whole text file.
pub fn decode(bytes: &[u8], markup: Markup) -> Decoded {
    if let Some((unicode, bom_len)) = bom_encoding(bytes) {
        return decode_unicode(&bytes[bom_len..], unicode);
    }
    if let Some(unicode) = utf16_without_bom(bytes) {
        return decode_unicode(bytes, unicode);
    }
    let declared = match markup {
        Markup::Xml => xml_declared_encoding(bytes),
        Markup::Html => html_meta_charset(bytes),
        Markup::Plain => None,
    };
    // A declaration of UTF-16 on bytes that are not UTF-16 is a lie; fall through.
    if let Some(encoding) = declared.filter(|e| *e != UTF_16LE && *e != UTF_16BE) {
        let (text, _) = encoding.decode_without_bom_handling(bytes);
        return Decoded { text: text.into_owned(), encoding: encoding.name() };
    }
    // The 7-bit ISO-2022 encodings are valid ASCII, so they are told by their escapes
    // before UTF-8 is tried.
    if let Some(decoded) = iso_2022(bytes) {
        return decoded;
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Decoded { text: text.to_owned(), encoding: UTF_8.name() };
    }
    // Johab is outside chardetng's knowledge; its strict validity is a sharp test.
    if let Some(text) = crate::johab::decode_if_johab(bytes) {
        return Decoded { text, encoding: "Johab" };
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(bytes, true);
    let encoding = korean_if_japanese_guess_has_no_kana(bytes, detector.guess(None, chardetng::Utf8Detection::Allow));
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    let text = if encoding == encoding_rs::EUC_KR { compose_eight_byte_hangul(&text) } else { text.into_owned() };
    Decoded { text, encoding: encoding.name() }
}

/// KS X 1001 writes a syllable outside its 2,350 as the Hangul filler and three jamo (the
/// "eight-byte" form); encoding_rs decodes those literally, so they are composed here.
fn compose_eight_byte_hangul(text: &str) -> String {
    const FILLER: char = '\u{3164}';
    const INITIALS: &str = "ㄱㄲㄴㄷㄸㄹㅁㅂㅃㅅㅆㅇㅈㅉㅊㅋㅌㅍㅎ";
    const FINALS: &str = "ㄱㄲㄳㄴㄵㄶㄷㄹㄺㄻㄼㄽㄾㄿㅀㅁㅂㅄㅅㅆㅇㅈㅊㅋㅌㅍㅎ";
    if !text.contains(FILLER) {
        return text.to_owned();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == FILLER && i + 3 < chars.len() {
            let initial = INITIALS.chars().position(|c| c == chars[i + 1]);
            let medial = ('\u{314F}'..='\u{3163}').contains(&chars[i + 2]).then(|| chars[i + 2] as u32 - 0x314F);
            let last = if chars[i + 3] == FILLER {
                Some(0)
            } else {
                FINALS.chars().position(|c| c == chars[i + 3]).map(|p| p + 1)
            };
            if let (Some(l), Some(v), Some(t)) = (initial, medial, last)
                && let Some(syllable) = char::from_u32(0xAC00 + (l as u32 * 21 + v) * 28 + t as u32)
            {
                out.push(syllable);
                i += 4;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// chardetng reads short Korean EUC-KR text as EUC-JP. Japanese prose is kana for a good
/// part (commonly half); a "Japanese" decoding under a fifth kana that is clean, mostly
/// Hangul EUC-KR is Korean.
fn korean_if_japanese_guess_has_no_kana(bytes: &[u8], guess: &'static Encoding) -> &'static Encoding {
    if guess != encoding_rs::EUC_JP && guess != encoding_rs::SHIFT_JIS {
        return guess;
    }
    let (as_japanese, _) = guess.decode_without_bom_handling(bytes);
    let is_kana = |c: char| ('\u{3040}'..='\u{30FF}').contains(&c);
    let non_ascii = as_japanese.chars().filter(|c| !c.is_ascii()).count().max(1);
    if as_japanese.chars().filter(|c| is_kana(*c)).count() * 5 >= non_ascii {
        return guess;
    }
    let (as_korean, had_errors) = encoding_rs::EUC_KR.decode_without_bom_handling(bytes);
    let hangul = as_korean.chars().filter(|c| ('\u{AC00}'..='\u{D7A3}').contains(c)).count();
    if !had_errors && hangul * 2 >= as_korean.chars().filter(|c| !c.is_ascii()).count() {
        encoding_rs::EUC_KR
    } else {
        guess
    }
}

/// ISO-2022-JP (decoded by encoding_rs) and ISO-2022-KR (which the Encoding Standard
/// dropped: its shifted pairs are EUC-KR bytes less 0x80, so they are decoded as such).
fn iso_2022(bytes: &[u8]) -> Option<Decoded> {
    if !bytes.is_ascii() || !bytes.contains(&0x1B) {
        return None;
    }
    if bytes.windows(4).any(|w| w == b"\x1b$)C") {
        let mut euc = Vec::with_capacity(bytes.len());
        let mut shifted = false;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                0x1B if bytes[i..].starts_with(b"\x1b$)C") => i += 3,
                0x0E => shifted = true,
                0x0F => shifted = false,
                b if shifted && (0x21..=0x7E).contains(&b) => euc.push(b | 0x80),
                b => euc.push(b),
            }
            i += 1;
        }
        let (text, _) = encoding_rs::EUC_KR.decode_without_bom_handling(&euc);
        return Some(Decoded { text: text.into_owned(), encoding: "ISO-2022-KR" });
    }
    let japanese = [&b"\x1b$B"[..], b"\x1b$@", b"\x1b(J", b"\x1b(I"];
    if japanese.iter().any(|esc| bytes.windows(esc.len()).any(|w| w == *esc)) {
        let (text, _) = encoding_rs::ISO_2022_JP.decode_without_bom_handling(bytes);
        return Some(Decoded { text: text.into_owned(), encoding: "ISO-2022-JP" });
    }
    None
}

fn decode_unicode(bytes: &[u8], unicode: Unicode) -> Decoded {
    let text = match unicode {
        Unicode::Utf8 => UTF_8.decode_without_bom_handling(bytes).0.into_owned(),
        Unicode::Utf16Le => UTF_16LE.decode_without_bom_handling(bytes).0.into_owned(),
        Unicode::Utf16Be => UTF_16BE.decode_without_bom_handling(bytes).0.into_owned(),
        // encoding_rs has no UTF-32 (the Encoding Standard dropped it); it is a plain array
        // of code points, so read it directly.
        Unicode::Utf32Le | Unicode::Utf32Be => bytes
            .chunks(4)
            .map(|c| {
                let mut word = [0u8; 4];
                word[..c.len()].copy_from_slice(c);
                let value =
                    if unicode == Unicode::Utf32Le { u32::from_le_bytes(word) } else { u32::from_be_bytes(word) };
                char::from_u32(value).filter(|_| c.len() == 4).unwrap_or(char::REPLACEMENT_CHARACTER)
            })
            .collect(),
    };
    Decoded { text, encoding: unicode.name() }
}

/// The `encoding="…"` of an XML declaration at the very start of the document.
fn xml_declared_encoding(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(256)];
    if !head.starts_with(b"<?xml") {
        return None;
    }
    let end = head.windows(2).position(|w| w == b"?>")?;
    let decl = std::str::from_utf8(&head[..end]).ok()?;
    attribute_value(decl, "encoding").and_then(|label| Encoding::for_label(label.as_bytes()))
}

/// The `charset` of an HTML `<meta>` in the first 2 KiB, as browsers prescan for it.
fn html_meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(2048)]).to_ascii_lowercase();
    let mut rest = head.as_str();
    while let Some(start) = rest.find("<meta") {
        let tag = &rest[start..];
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        if let Some(pos) = tag.find("charset=") {
            let value = tag[pos + 8..].trim_start_matches(['"', '\'']);
            let label: String =
                value.chars().take_while(|c| c.is_ascii_alphanumeric() || "-_:.".contains(*c)).collect();
            if let Some(encoding) = Encoding::for_label(label.as_bytes()) {
                return Some(encoding);
            }
        }
        rest = &rest[start + 5..];
    }
    None
}

fn attribute_value<'a>(decl: &'a str, name: &str) -> Option<&'a str> {
    let at = decl.find(name)?;
    let rest = decl[at + name.len()..].trim_start().strip_prefix('=')?.trim_start();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let rest = &rest[1..];
    Some(&rest[..rest.find(quote)?])
}

/// A Windows code page's encoding (Windows-1252 for what the Encoding Standard lacks).
pub fn encoding_for_codepage(codepage: u32) -> &'static Encoding {
    let label = match codepage {
        65001 => "utf-8",
        1200 => "utf-16le",
        1201 => "utf-16be",
        932 => "shift_jis",
        936 => "gbk",
        949 | 51949 => "euc-kr",
        950 => "big5",
        20932 => "euc-jp",
        50220..=50222 => "iso-2022-jp",
        54936 => "gb18030",
        20866 => "koi8-r",
        21866 => "koi8-u",
        874 => "windows-874",
        866 => "ibm866",
        1250..=1258 => {
            return Encoding::for_label(format!("windows-{codepage}").as_bytes()).unwrap_or(encoding_rs::WINDOWS_1252);
        }
        28591..=28606 => {
            return Encoding::for_label(format!("iso-8859-{}", codepage - 28590).as_bytes())
                .unwrap_or(encoding_rs::WINDOWS_1252);
        }
        _ => "windows-1252",
    };
    Encoding::for_label(label.as_bytes()).unwrap_or(encoding_rs::WINDOWS_1252)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boms_decide() {
        assert_eq!(decode(b"\xef\xbb\xbfhello", Markup::Plain).text, "hello");
        assert_eq!(decode(b"\xff\xfeh\0i\0", Markup::Plain).text, "hi");
        assert_eq!(decode(b"\xfe\xff\0h\0i", Markup::Plain).text, "hi");
        let utf32le = [&[0xFF, 0xFE, 0, 0][..], &0x17Cu32.to_le_bytes(), &('a' as u32).to_le_bytes()].concat();
        assert_eq!(decode(&utf32le, Markup::Plain).text, "ża");
        let utf32be = [&[0, 0, 0xFE, 0xFF][..], &0x1F600u32.to_be_bytes()].concat();
        assert_eq!(decode(&utf32be, Markup::Plain).text, "😀");
    }

    #[test]
    fn utf16_without_a_bom_is_recognised() {
        let bytes: Vec<u8> = "plain ascii text".encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        assert_eq!(decode(&bytes, Markup::Plain).text, "plain ascii text");
    }

    #[test]
    fn xml_follows_its_declaration() {
        let (bytes, _, _) =
            encoding_rs::WINDOWS_1250.encode("<?xml version=\"1.0\" encoding=\"windows-1250\"?><a>Łódź</a>");
        let decoded = decode(&bytes, Markup::Xml);
        assert_eq!(decoded.text, "<?xml version=\"1.0\" encoding=\"windows-1250\"?><a>Łódź</a>");
        assert_eq!(decoded.encoding, "windows-1250");
    }

    #[test]
    fn html_follows_its_meta_charset() {
        let (bytes, _, _) =
            encoding_rs::SHIFT_JIS.encode("<html><head><meta charset=\"shift_jis\"></head><body>日本語</body></html>");
        assert!(decode(&bytes, Markup::Html).text.contains("日本語"));
    }

    #[test]
    fn legacy_encodings_are_detected_not_replaced() {
        let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode("Crème brûlée, café au lait, naïve façade — déjà vu.");
        let decoded = decode(&bytes, Markup::Plain);
        assert_eq!(decoded.text, "Crème brûlée, café au lait, naïve façade — déjà vu.");
        let (bytes, _, _) = encoding_rs::GBK.encode("中华人民共和国是一个位于东亚的国家，首都是北京。");
        assert_eq!(decode(&bytes, Markup::Plain).text, "中华人民共和国是一个位于东亚的国家，首都是北京。");
    }
}
