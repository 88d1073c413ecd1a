//! What the knowledge function's body types are read with: every refusal names the field at
//! fault, and an absent field is told from an explicit `null` (which clears it, where
//! clearing is allowed).

use crate::error::{KnowledgeError, invalid};
use lambda_http::Request;
use serde_json::Value;
pub use sluice_web::NonBlank;

/// The request's body read into `T` (whose derive denies unknown fields): a field it does not
/// have is refused as `not_a_field` words it, a value of the wrong type as `wrong_type` words
/// it for that field, anything else as a body that is not a JSON object.
pub fn typed<T: serde::de::DeserializeOwned>(
    request: &Request,
    wrong_type: fn(&str) -> String,
) -> Result<T, KnowledgeError> {
    typed_bytes(sluice_web::body_bytes(request), wrong_type)
}

/// `typed` over a body's bytes.
pub fn typed_bytes<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    wrong_type: fn(&str) -> String,
) -> Result<T, KnowledgeError> {
    sluice_web::typed_body(bytes).map_err(|refused| {
        let worded = refused.worded(wrong_type);
        if worded.unknown {
            return not_a_field(&worded.field);
        }
        invalid(worded.field, worded.message)
    })
}

/// For `#[serde(default, deserialize_with = "fields::present")]`: a field that counts as
/// given even as `null` (absent is `None`, anything given `Some`, `null` included).
pub fn present<'de, D: serde::Deserializer<'de>>(given: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(given).map(Some)
}

/// For `#[serde(default, deserialize_with = "fields::nullable")]`: a field where `null`
/// differs from absent (absent `None`, `null` `Some(None)`).
pub fn nullable<'de, D, T>(given: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(given).map(Some)
}

/// The refusal of a field this request does not have, as `only` words it.
pub fn not_a_field(name: &str) -> KnowledgeError {
    KnowledgeError::InvalidFields {
        message: format!("{name} is not a field of this request"),
        fields: vec![(name.to_owned(), "not a field of this request".to_owned())],
    }
}

/// A required text field as `required_text` reads it: present, a string, not blank.
pub fn required(value: Option<String>, field: &'static str) -> Result<String, KnowledgeError> {
    match value {
        None => Err(invalid(field, format!("{field} is required"))),
        Some(text) if text.trim().is_empty() => Err(invalid(field, not_text(field))),
        Some(text) => Ok(text),
    }
}

/// How a text field of the wrong type is refused.
pub fn not_text(field: &str) -> String {
    format!("{field} must be a non-empty string")
}

/// A field the caller may leave out, set, or set to `null`; in a body's type it reads
/// as `#[serde(default)]` (absent is `Absent`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Field<T> {
    #[default]
    Absent,
    Null,
    Set(T),
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Field<T> {
    fn deserialize<D: serde::Deserializer<'de>>(given: D) -> Result<Self, D::Error> {
        Option::<T>::deserialize(given).map(|value| value.map_or(Self::Null, Self::Set))
    }
}

impl<T> Field<T> {
    /// What the field asks for, with `current` where it is absent.
    pub fn or_keep(self, current: Option<T>) -> Option<T> {
        match self {
            Self::Absent => current,
            Self::Null => None,
            Self::Set(value) => Some(value),
        }
    }

    pub fn is_given(&self) -> bool {
        !matches!(self, Self::Absent)
    }

    /// The value when set; absent and `null` alike are none.
    pub fn set(self) -> Option<T> {
        self.or_keep(None)
    }
}

impl Field<NonBlank> {
    /// The field's text.
    pub fn text(self) -> Field<String> {
        match self {
            Self::Absent => Field::Absent,
            Self::Null => Field::Null,
            Self::Set(NonBlank(text)) => Field::Set(text),
        }
    }
}
