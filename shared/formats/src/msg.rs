//! Outlook `.msg` (an OLE compound file of MAPI properties): sender, recipients, cc,
//! subject, date and body — the plain-text body, else the HTML body reduced to text, else
//! the compressed RTF body decompressed and reduced to text. Embedded attachments are
//! listed by name and never opened.

use crate::budget::{Stop, TextBudget};
use crate::dates::OwnDate;
use crate::office::ReadError;
use encoding_rs::Encoding;
use std::io::{Cursor, Read};

/// No property stream is read past this; a longer one is cut (the budget bounds the rest).
const MAX_STREAM_BYTES: u64 = 16 << 20;

const SUBJECT: u16 = 0x0037;
const CLIENT_SUBMIT_TIME: u16 = 0x0039;
const SENDER_NAME: u16 = 0x0C1A;
const SENDER_EMAIL: u16 = 0x0C1F;
const SENDER_SMTP: u16 = 0x5D01;
const DISPLAY_CC: u16 = 0x0E03;
const DISPLAY_TO: u16 = 0x0E04;
const DELIVERY_TIME: u16 = 0x0E06;
const BODY: u16 = 0x1000;
const RTF_COMPRESSED: u16 = 0x1009;
const BODY_HTML: u16 = 0x1013;
const ATTACH_LONG_FILENAME: u16 = 0x3707;
const ATTACH_FILENAME: u16 = 0x3704;
const DISPLAY_NAME: u16 = 0x3001;
const INTERNET_CPID: u16 = 0x3FDE;
const MESSAGE_CODEPAGE: u16 = 0x3FFD;

type Compound<'a> = cfb::CompoundFile<Cursor<&'a [u8]>>;

fn read_stream(file: &mut Compound<'_>, path: &str) -> Option<Vec<u8>> {
    let stream = file.open_stream(path).ok()?;
    let mut out = Vec::new();
    stream.take(MAX_STREAM_BYTES).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The fixed-size properties of `storage` (the root has a 32-byte header, others 8 or 24).
fn fixed_properties(file: &mut Compound<'_>, storage: &str, header: usize) -> Vec<(u16, u16, [u8; 8])> {
    let Some(bytes) = read_stream(file, &format!("{storage}/__properties_version1.0")) else { return Vec::new() };
    bytes
        .get(header..)
        .unwrap_or_default()
        .chunks_exact(16)
        .map(|entry| {
            let kind = u16::from_le_bytes([entry[0], entry[1]]);
            let id = u16::from_le_bytes([entry[2], entry[3]]);
            let mut value = [0u8; 8];
            value.copy_from_slice(&entry[8..16]);
            (id, kind, value)
        })
        .collect()
}

/// The encoding of 8-bit string properties, from the message's code page.
fn codepage_encoding(properties: &[(u16, u16, [u8; 8])]) -> &'static Encoding {
    let codepage = properties
        .iter()
        .find(|(id, kind, _)| (*id == INTERNET_CPID || *id == MESSAGE_CODEPAGE) && *kind == 0x0003)
        .map(|(_, _, v)| u32::from_le_bytes([v[0], v[1], v[2], v[3]]));
    codepage.map_or(encoding_rs::WINDOWS_1252, crate::text::encoding_for_codepage)
}

/// A string property of `storage`: the Unicode stream, else the 8-bit one.
fn string_property(file: &mut Compound<'_>, storage: &str, id: u16, encoding: &'static Encoding) -> Option<String> {
    if let Some(bytes) = read_stream(file, &format!("{storage}/__substg1.0_{id:04X}001F")) {
        let (text, _) = encoding_rs::UTF_16LE.decode_without_bom_handling(&bytes);
        return Some(text.trim_end_matches('\0').to_owned());
    }
    let bytes = read_stream(file, &format!("{storage}/__substg1.0_{id:04X}001E"))?;
    let (text, _) = encoding.decode_without_bom_handling(&bytes);
    Some(text.trim_end_matches('\0').to_owned())
}

fn filetime(ticks: u64) -> Option<String> {
    let seconds = i64::try_from(ticks / 10_000_000).ok()? - 11_644_473_600;
    let at = time::OffsetDateTime::from_unix_timestamp(seconds).ok()?;
    at.format(&time::format_description::well_known::Rfc2822).ok()
}

/// What a message's properties say of it besides its text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageFacts {
    /// Sent, else delivered.
    pub date: Option<OwnDate>,
    pub subject: Option<String>,
}

/// Reads a `.msg` into the budget; the message's own date and subject when it has them.
pub fn msg(bytes: &[u8], budget: &mut TextBudget) -> Result<MessageFacts, ReadError> {
    let mut file = cfb::CompoundFile::open(Cursor::new(bytes)).map_err(|_| {
        ReadError::Unreadable("not a readable Outlook message: the file is damaged or truncated".to_owned())
    })?;
    if !file.is_stream("/__properties_version1.0") && !file.is_stream("/__nameid_version1.0/__substg1.0_00020102") {
        return Err(ReadError::Unreadable("the compound file holds no Outlook message properties".to_owned()));
    }
    let properties = fixed_properties(&mut file, "", 32);
    let encoding = codepage_encoding(&properties);
    let root = "";
    let mut header = String::new();
    let sender_name = string_property(&mut file, root, SENDER_NAME, encoding).filter(|s| !s.is_empty());
    let sender_email = string_property(&mut file, root, SENDER_SMTP, encoding)
        .or_else(|| string_property(&mut file, root, SENDER_EMAIL, encoding))
        // An Exchange (X.500) address is not an email address a reader can use.
        .filter(|s| s.contains('@') && !s.to_ascii_uppercase().starts_with("/O="));
    match (sender_name, sender_email) {
        (Some(name), Some(email)) if name != email => header.push_str(&format!("From: {name} <{email}>\n")),
        (Some(name), _) => header.push_str(&format!("From: {name}\n")),
        (None, Some(email)) => header.push_str(&format!("From: {email}\n")),
        (None, None) => {}
    }
    let mut subject = None;
    for (label, id) in [("To", DISPLAY_TO), ("Cc", DISPLAY_CC), ("Subject", SUBJECT)] {
        if let Some(value) = string_property(&mut file, root, id, encoding).filter(|s| !s.is_empty()) {
            header.push_str(&format!("{label}: {value}\n"));
            if id == SUBJECT {
                subject = crate::titles::tidy(&value);
            }
        }
    }
    let sent = [CLIENT_SUBMIT_TIME, DELIVERY_TIME]
        .iter()
        .find_map(|wanted| properties.iter().find(|(id, kind, _)| id == wanted && *kind == 0x0040))
        .map(|(_, _, value)| u64::from_le_bytes(*value));
    let own_date = sent
        .and_then(crate::dates::filetime_date)
        .map(|date| OwnDate { date, source: crate::dates::DateSource::MsgDate });
    if let Some(date) = sent.and_then(filetime) {
        header.push_str(&format!("Date: {date}\n"));
    }
    let body = body_text(&mut file, encoding);
    let attachments = attachment_names(&mut file, encoding);
    let result = (|| -> Result<(), Stop> {
        budget.push(&header)?;
        if let Some(body) = body.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
            budget.push("\n")?;
            budget.push(body)?;
            budget.push("\n")?;
        }
        if !attachments.is_empty() {
            budget.push("\nAttachments:\n")?;
            for name in &attachments {
                budget.push(&format!("- {name}\n"))?;
            }
        }
        Ok(())
    })();
    match result {
        Ok(()) | Err(Stop::Budget) => Ok(MessageFacts { date: own_date, subject }),
        Err(Stop::Time) => Err(ReadError::Time),
    }
}

fn body_text(file: &mut Compound<'_>, encoding: &'static Encoding) -> Option<String> {
    if let Some(body) = string_property(file, "", BODY, encoding).filter(|b| !b.trim().is_empty()) {
        return Some(body.replace("\r\n", "\n"));
    }
    let html = read_stream(file, &format!("/__substg1.0_{BODY_HTML:04X}0102"))
        .map(|bytes| encoding.decode_without_bom_handling(&bytes).0.into_owned())
        .or_else(|| string_property(file, "", BODY_HTML, encoding));
    if let Some(html) = html.filter(|h| !h.trim().is_empty()) {
        return Some(crate::markup::html_to_text(&html));
    }
    let compressed = read_stream(file, &format!("/__substg1.0_{RTF_COMPRESSED:04X}0102"))?;
    let rtf = crate::markup::decompress_rtf(&compressed)?;
    Some(crate::markup::rtf_to_text(&rtf, encoding))
}

fn attachment_names(file: &mut Compound<'_>, encoding: &'static Encoding) -> Vec<String> {
    let storages: Vec<String> = file
        .read_root_storage()
        .filter(|e| e.is_storage() && e.name().starts_with("__attach_version1.0_#"))
        .map(|e| e.path().to_string_lossy().into_owned())
        .collect();
    let mut names = Vec::new();
    for storage in storages {
        let name = [ATTACH_LONG_FILENAME, ATTACH_FILENAME, DISPLAY_NAME]
            .iter()
            .find_map(|id| string_property(file, &storage, *id, encoding).filter(|n| !n.is_empty()));
        names.push(name.unwrap_or_else(|| "(unnamed attachment)".to_owned()));
        if names.len() >= 1000 {
            break;
        }
    }
    names
}
