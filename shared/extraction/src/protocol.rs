//! What a caller sends the extract function and what it answers.

use serde::{Deserialize, Serialize};
use sluice_formats::{ExtractOptions, Extraction, Refusal};

/// Lambda answers a synchronous invocation with at most 6 MB; an answer larger than this
/// goes through the caller's presigned `PUT` instead.
pub const INLINE_ANSWER_MAX_BYTES: usize = 5 << 20;

/// Lambda takes a synchronous invocation's request of at most 6 MB; base64 makes the bytes a
/// third larger, so files up to this size go inline and larger ones by presigned `GET`.
pub const INLINE_INPUT_MAX_BYTES: usize = 4 << 20;

/// One job: extraction of bytes the caller's upload check accepted as the kind of
/// `extension`, under `options`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub extension: String,
    pub options: ExtractOptions,
    pub input: Input,
    /// Where an answer larger than [`INLINE_ANSWER_MAX_BYTES`] is written.
    #[serde(default)]
    pub answer_upload: Option<PresignedPut>,
}

/// Where the bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Input {
    /// The bytes themselves, base64.
    Inline { base64: String },
    /// A presigned `GET` of exactly one object of `size` bytes.
    Presigned { url: String, size: u64 },
}

/// A presigned `PUT` and the headers it was signed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresignedPut {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// The job's answer. Made once a job and sent at once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Response {
    Extracted(Result<Extraction, Refusal>),
    /// The answer (an `Extracted`, as JSON) was written through `answer_upload`.
    Stored {
        bytes: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_its_kind_input_and_limits_and_nothing_else() {
        let request = Request {
            extension: "txt".into(),
            options: ExtractOptions::new(100),
            input: Input::Inline { base64: "aGVsbG8=".into() },
            answer_upload: None,
        };
        let json = serde_json::to_value(&request).expect("json");
        assert_eq!(json["extension"], "txt");
        assert_eq!(json["input"]["inline"]["base64"], "aGVsbG8=");
        let mut smuggled = json.clone();
        smuggled["tenant"] = "someone else".into();
        assert!(serde_json::from_value::<Request>(smuggled).is_err(), "an unknown field is refused");
        let back: Request = serde_json::from_value(json).expect("round trip");
        assert_eq!(back.input, request.input);
    }

    /// A request as the release before 2026-12-07 sent it, every option set: `ocr.alphabet`
    /// was then the bare script.
    const PREVIOUS_RELEASE_REQUEST: &str = r#"{
        "extension": "pdf",
        "options": {
            "max_chars": 100000,
            "time_limit": {"secs": 20, "nanos": 0},
            "limits": {"max_entries": 5000, "max_total_bytes": 209715200, "max_member_bytes": 52428800, "max_ratio": 100},
            "max_pages": 2000,
            "ocr": {"dpi": 300, "max_pages": 10, "alphabet": "all"},
            "markdown": true,
            "images": {"max_images": 8}
        },
        "input": {"presigned": {"url": "https://bucket.s3.amazonaws.com/key", "size": 1234}},
        "answer_upload": {"url": "https://bucket.s3.amazonaws.com/answer", "headers": [["x-amz-server-side-encryption", "aws:kms"]]}
    }"#;

    /// The OCR options as the release before 2026-12-07 read them.
    #[derive(Deserialize)]
    struct PreviousReleaseOcrOptions {
        dpi: u32,
        max_pages: u32,
        #[serde(default)]
        alphabet: sluice_formats::OcrScript,
    }

    /// Every path to a value in `json`, with the value's JSON type.
    fn shape(json: &serde_json::Value, path: String, out: &mut Vec<(String, &'static str)>) {
        let kind = match json {
            serde_json::Value::Object(fields) => {
                for (key, value) in fields {
                    shape(value, format!("{path}.{key}"), out);
                }
                "object"
            }
            serde_json::Value::Array(_) => "array",
            serde_json::Value::String(_) => "string",
            serde_json::Value::Number(_) => "number",
            serde_json::Value::Bool(_) => "bool",
            serde_json::Value::Null => "null",
        };
        out.push((path, kind));
    }

    // A deploy updates the callers and the extract function one at a time, so for a moment
    // each release reads the other's requests.
    #[test]
    fn a_request_of_the_previous_release_is_read() {
        let request: Request = serde_json::from_str(PREVIOUS_RELEASE_REQUEST).expect("the previous release's request");
        let ocr = request.options.ocr.expect("ocr options");
        assert_eq!((ocr.dpi, ocr.max_pages), (300, 10));
        assert_eq!(ocr.alphabet.script, sluice_formats::OcrScript::All);
        assert_eq!(ocr.alphabet, sluice_formats::OcrAlphabet::ALL, "no letters favoured: the old release chose none");
    }

    #[test]
    fn the_previous_release_reads_a_request_of_this_one() {
        let previous: serde_json::Value = serde_json::from_str(PREVIOUS_RELEASE_REQUEST).expect("json");
        let mut before = Vec::new();
        shape(&previous, String::new(), &mut before);
        let mut request: Request = serde_json::from_str(PREVIOUS_RELEASE_REQUEST).expect("request");
        // Letters favoured (Turkish, Polish) and a page for Tesseract (Russian): the two fields
        // added since, each where the previous release ignores unknown fields.
        let mut sent = serde_json::Value::Null;
        for (languages, field) in
            [(["tur", "pol"], ".options.ocr.look_alikes"), (["rus", "eng"], ".options.ocr.tesseract")]
        {
            request.options.ocr.as_mut().expect("ocr options").alphabet =
                sluice_formats::OcrAlphabet::for_languages(&languages);
            sent = serde_json::to_value(&request).expect("json");
            let mut now = Vec::new();
            shape(&sent, String::new(), &mut now);
            let lost: Vec<_> = before.iter().filter(|field| !now.contains(field)).collect();
            assert!(lost.is_empty(), "a field the previous release needs is gone or retyped: {lost:?}");
            let added: Vec<_> = now.iter().filter(|f| !before.contains(f)).map(|(path, _)| path.as_str()).collect();
            assert_eq!(added, [field], "{languages:?}");
        }

        let read: PreviousReleaseOcrOptions =
            serde_json::from_value(sent["options"]["ocr"].clone()).expect("the previous release reads it");
        assert_eq!((read.dpi, read.max_pages, read.alphabet), (300, 10, sluice_formats::OcrScript::Latin));
        let no_letters = serde_json::to_value(sluice_formats::OcrOptions {
            alphabet: sluice_formats::OcrAlphabet::LATIN,
            ..*request.options.ocr.as_ref().expect("ocr options")
        })
        .expect("json");
        assert_eq!(
            no_letters,
            serde_json::json!({"dpi": 300, "max_pages": 10, "alphabet": "latin"}),
            "the old shape exactly"
        );
    }
}
