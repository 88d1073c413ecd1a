//! Reading the one `file` part of a multipart upload, counting its bytes as they come.

use crate::UploadError;
use crate::bodies::{Form, filename_fits};
use bytes::{Bytes, BytesMut};
use std::convert::Infallible;

/// The uploaded file as received.
#[derive(Debug)]
pub struct UploadedFile {
    pub filename: String,
    pub declared_mime: Option<String>,
    pub bytes: Bytes,
}

/// The longest text field a form may carry beside its file.
const MAX_TEXT_FIELD_BYTES: usize = 64 * 1024;

/// Reads the `file` part and the text fields form `F` names (each at most 64 KiB) into `F`;
/// any other part is ignored.
pub async fn read_form<F: Form>(
    content_type: Option<&str>,
    body: Bytes,
    limit_bytes: u64,
) -> Result<(UploadedFile, F), UploadError> {
    let text_fields = F::FIELDS;
    let mut texts = std::collections::BTreeMap::new();
    let content_type = content_type.unwrap_or_default();
    let boundary = multer::parse_boundary(content_type)
        .map_err(|_| UploadError::invalid("file", "the body must be multipart/form-data with a file part"))?;
    let stream = futures_util::stream::once(async move { Ok::<Bytes, Infallible>(body) });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut found: Option<UploadedFile> = None;
    while let Some(mut field) = multipart.next_field().await.map_err(malformed)? {
        if let Some(name) = text_fields.iter().find(|n| field.name() == Some(**n)) {
            let mut value = Vec::new();
            while let Some(chunk) = field.chunk().await.map_err(malformed)? {
                value.extend_from_slice(&chunk);
                if value.len() > MAX_TEXT_FIELD_BYTES {
                    return Err(UploadError::invalid(name, "the field is longer than 64 KiB"));
                }
            }
            let value = String::from_utf8(value).map_err(|_| UploadError::invalid(name, "the field is not UTF-8"))?;
            texts.insert(*name, value);
            continue;
        }
        if field.name() != Some("file") {
            continue;
        }
        if found.is_some() {
            return Err(UploadError::invalid("file", "send exactly one file part"));
        }
        let filename = field
            .file_name()
            .map(|n| n.replace('\0', ""))
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| UploadError::invalid("file", "the file part has no filename"))?;
        filename_fits("file", &filename)?;
        let declared_mime = field.content_type().map(|m| m.essence_str().to_owned());
        let mut bytes = BytesMut::new();
        while let Some(chunk) = field.chunk().await.map_err(malformed)? {
            if (bytes.len() + chunk.len()) as u64 > limit_bytes {
                return Err(UploadError::TooLarge { limit_bytes });
            }
            bytes.extend_from_slice(&chunk);
        }
        found = Some(UploadedFile { filename, declared_mime, bytes: bytes.freeze() });
    }
    let file = found.ok_or_else(|| UploadError::invalid("file", "the multipart body has no part named file"))?;
    Ok((file, F::read(texts)?))
}

fn malformed(error: multer::Error) -> UploadError {
    UploadError::invalid("file", format!("the multipart body is malformed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A form part: field name, filename, declared type, bytes.
    type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

    fn body(parts: &[Part<'_>]) -> Bytes {
        let mut out = Vec::new();
        for (name, filename, mime, data) in parts {
            out.extend_from_slice(b"--XyZ\r\n");
            let disposition = match filename {
                Some(f) => format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n"),
                None => format!("Content-Disposition: form-data; name=\"{name}\"\r\n"),
            };
            out.extend_from_slice(disposition.as_bytes());
            if let Some(m) = mime {
                out.extend_from_slice(format!("Content-Type: {m}\r\n").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"--XyZ--\r\n");
        Bytes::from(out)
    }

    const CT: Option<&str> = Some("multipart/form-data; boundary=XyZ");

    /// The file part alone, as the tests read it.
    async fn read_file_part(content_type: Option<&str>, body: Bytes, limit: u64) -> Result<UploadedFile, UploadError> {
        read_form::<crate::bodies::Hints>(content_type, body, limit).await.map(|(file, _)| file)
    }

    #[tokio::test]
    async fn reads_the_file_part_and_its_declared_type() {
        let body = body(&[("note", None, None, b"hi"), ("file", Some("a.csv"), Some("text/csv"), b"a,b\n")]);
        let file = read_file_part(CT, body, 100).await.expect("file");
        assert_eq!(file.filename, "a.csv");
        assert_eq!(file.declared_mime.as_deref(), Some("text/csv"));
        assert_eq!(&file.bytes[..], b"a,b\n");
    }

    #[tokio::test]
    async fn refuses_oversize_missing_and_doubled_parts() {
        let big = body(&[("file", Some("a.txt"), None, &[b'a'; 101])]);
        assert!(matches!(read_file_part(CT, big, 100).await, Err(UploadError::TooLarge { limit_bytes: 100 })));
        let exact = body(&[("file", Some("a.txt"), None, &[b'a'; 100])]);
        assert!(read_file_part(CT, exact, 100).await.is_ok());
        let none = body(&[("other", Some("a.txt"), None, b"x")]);
        assert!(matches!(read_file_part(CT, none, 100).await, Err(UploadError::Invalid { field: "file", .. })));
        let two = body(&[("file", Some("a.txt"), None, b"x"), ("file", Some("b.txt"), None, b"y")]);
        assert!(matches!(read_file_part(CT, two, 100).await, Err(UploadError::Invalid { .. })));
        let nameless = body(&[("file", None, None, b"x")]);
        assert!(matches!(read_file_part(CT, nameless, 100).await, Err(UploadError::Invalid { .. })));
        assert!(matches!(
            read_file_part(Some("application/json"), Bytes::new(), 100).await,
            Err(UploadError::Invalid { .. })
        ));
    }
}
