//! Johab (KS X 1001 annex 3), the Korean encoding that writes every Hangul syllable by its
//! initial, medial and final jamo in three five-bit fields. It is outside the Encoding
//! Standard, so no encoding crate has it; its symbols and Hanja are KS X 1001's, moved by a
//! fixed formula, and are decoded through `encoding_rs`'s EUC-KR after moving them back.
//!
//! Decoding is strict: a single invalid field or pair rejects the whole text. That is what
//! makes detection safe: the pairs of EUC-KR, GBK, Big5 or Shift_JIS text almost never all
//! form valid jamo fields.

/// The five-bit initial field: the fill code, an initial's index (0 = ㄱ), or invalid.
fn initial(field: u16) -> Field {
    match field {
        1 => Field::Fill,
        2..=20 => Field::Jamo(field - 2),
        _ => Field::Invalid,
    }
}

fn medial(field: u16) -> Field {
    match field {
        2 => Field::Fill,
        3..=7 => Field::Jamo(field - 3),
        10..=15 => Field::Jamo(field - 5),
        18..=23 => Field::Jamo(field - 7),
        26..=29 => Field::Jamo(field - 9),
        _ => Field::Invalid,
    }
}

/// The five-bit final field: the fill code (no final), a final's index (1 = ㄱ), or invalid.
fn last(field: u16) -> Field {
    match field {
        1 => Field::Fill,
        2..=17 => Field::Jamo(field - 1),
        19..=29 => Field::Jamo(field - 2),
        _ => Field::Invalid,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Fill,
    Jamo(u16),
    Invalid,
}

/// Compatibility jamo (U+3131…) for initials, medials and finals written alone.
const INITIAL_JAMO: &str = "ㄱㄲㄴㄷㄸㄹㅁㅂㅃㅅㅆㅇㅈㅉㅊㅋㅌㅍㅎ";
const FINAL_JAMO: &str = "ㄱㄲㄳㄴㄵㄶㄷㄹㄺㄻㄼㄽㄾㄿㅀㅁㅂㅄㅅㅆㅇㅈㅊㅋㅌㅍㅎ";

fn hangul(code: u16) -> Option<char> {
    let (i, m, f) = (initial((code >> 10) & 0x1F), medial((code >> 5) & 0x1F), last(code & 0x1F));
    match (i, m, f) {
        (Field::Jamo(i), Field::Jamo(m), Field::Jamo(f)) => {
            char::from_u32(0xAC00 + (i as u32 * 21 + m as u32) * 28 + f as u32)
        }
        (Field::Jamo(i), Field::Jamo(m), Field::Fill) => char::from_u32(0xAC00 + (i as u32 * 21 + m as u32) * 28),
        (Field::Jamo(i), Field::Fill, Field::Fill) => INITIAL_JAMO.chars().nth(i as usize),
        (Field::Fill, Field::Jamo(m), Field::Fill) => char::from_u32(0x314F + m as u32),
        (Field::Fill, Field::Fill, Field::Jamo(f)) => FINAL_JAMO.chars().nth(f as usize - 1),
        (Field::Fill, Field::Fill, Field::Fill) => Some('\u{3164}'),
        _ => None,
    }
}

/// The KS X 1001 (EUC-KR) bytes of a Johab symbol or Hanja pair.
fn ks_x_1001(lead: u8, trail: u8) -> Option<[u8; 2]> {
    let first_row = match lead {
        0xD9..=0xDE => 0xA1 + (lead - 0xD9) * 2,
        0xE0..=0xF9 => 0xCA + (lead - 0xE0) * 2,
        _ => return None,
    };
    match trail {
        0x31..=0x7E => Some([first_row, trail - 0x31 + 0xA1]),
        0x91..=0xA0 => Some([first_row, trail - 0x91 + 0xA1 + 78]),
        0xA1..=0xFE => Some([first_row + 1, trail]),
        _ => None,
    }
}

/// The text of `bytes` read as Johab, or `None` if any pair is not valid Johab.
pub fn decode_strict(bytes: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(bytes.len() * 3 / 2);
    let mut i = 0;
    while i < bytes.len() {
        let lead = bytes[i];
        if lead < 0x80 {
            out.push(char::from(lead));
            i += 1;
            continue;
        }
        let trail = *bytes.get(i + 1)?;
        match lead {
            0x84..=0xD3 if matches!(trail, 0x41..=0x7E | 0x81..=0xFE) => {
                out.push(hangul(u16::from_be_bytes([lead, trail]))?);
            }
            0xD9..=0xDE | 0xE0..=0xF9 => {
                let euc = ks_x_1001(lead, trail)?;
                let (text, had_errors) = encoding_rs::EUC_KR.decode_without_bom_handling(&euc);
                if had_errors {
                    return None;
                }
                out.push_str(&text);
            }
            _ => return None,
        }
        i += 2;
    }
    Some(out)
}

/// Whether `bytes` are Johab Korean: strictly valid, with at least a few Korean characters,
/// most of them precomposed syllables.
pub fn decode_if_johab(bytes: &[u8]) -> Option<String> {
    let text = decode_strict(bytes)?;
    let non_ascii = text.chars().filter(|c| !c.is_ascii()).count();
    let syllables = text.chars().filter(|c| ('\u{AC00}'..='\u{D7A3}').contains(c)).count();
    (non_ascii >= 4 && syllables * 2 >= non_ascii).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syllables_jamo_and_hanja_decode() {
        // 한 (ㅎ ㅏ ㄴ), 글 (ㄱ ㅡ ㄹ), the lone initial ㄱ, and the Hanja 家 via KS X 1001.
        assert_eq!(decode_strict(&[0xD0, 0x65, 0x8B, 0x69]).as_deref(), Some("한글"));
        assert_eq!(decode_strict(&[0x88, 0x41]).as_deref(), Some("ㄱ"));
        assert_eq!(decode_strict(&[0xE0, 0x31]).as_deref(), Some("伽"));
        assert_eq!(decode_strict(b"ok").as_deref(), Some("ok"));
    }

    #[test]
    fn an_invalid_field_or_a_cut_pair_rejects_the_text() {
        assert_eq!(decode_strict(&[0xD0]), None);
        assert_eq!(decode_strict(&[0x80, 0x41]), None);
        // EUC-KR 한국어 is not Johab.
        assert_eq!(decode_if_johab(&[0xC7, 0xD1, 0xB1, 0xB9, 0xBE, 0xEE]), None);
    }
}
