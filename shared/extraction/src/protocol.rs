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
}
