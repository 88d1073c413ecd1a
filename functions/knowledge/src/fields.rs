//! Reading a JSON body field by field, so every refusal names the field at fault and an
//! absent field is told from an explicit `null` (which clears it, where clearing is allowed).

use crate::error::{KnowledgeError, invalid};
use lambda_http::Request;
use serde_json::{Map, Value};
use uuid::Uuid;

/// The request's JSON object body.
pub fn object(request: &Request) -> Result<Map<String, Value>, KnowledgeError> {
    match serde_json::from_slice(sluice_web::body_bytes(request)) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(invalid("body", "the body must be a JSON object")),
    }
}

/// The request's body read into `T` (whose derive denies unknown fields): a field it does not
/// have is refused as `only` refuses it, a value of the wrong type as `wrong_type` words it for
/// that field, anything else as a body that is not a JSON object.
pub fn typed<T: serde::de::DeserializeOwned>(
    request: &Request,
    wrong_type: fn(&str) -> String,
) -> Result<T, KnowledgeError> {
    sluice_web::typed_body(sluice_web::body_bytes(request)).map_err(|refused| {
        if let Some(unknown) = refused.unknown {
            return not_a_field(&unknown);
        }
        match refused.field() {
            Some(field) => invalid(field, wrong_type(field)),
            None => invalid("body", "the body must be a JSON object"),
        }
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

/// A field the caller may leave out, set, or set to `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field<T> {
    Absent,
    Null,
    Set(T),
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
}

pub fn text(body: &Map<String, Value>, field: &'static str) -> Result<Field<String>, KnowledgeError> {
    match body.get(field) {
        None => Ok(Field::Absent),
        Some(Value::Null) => Ok(Field::Null),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Field::Set(s.clone())),
        Some(_) => Err(invalid(field, not_text(field))),
    }
}

pub fn required_text(body: &Map<String, Value>, field: &'static str) -> Result<String, KnowledgeError> {
    required(text(body, field)?.or_keep(None), field)
}

pub fn uuid(body: &Map<String, Value>, field: &'static str) -> Result<Field<Uuid>, KnowledgeError> {
    match text(body, field) {
        Ok(Field::Set(s)) => {
            Uuid::parse_str(&s).map(Field::Set).map_err(|_| invalid(field, format!("{field} must be a UUID")))
        }
        Ok(Field::Absent) => Ok(Field::Absent),
        Ok(Field::Null) => Ok(Field::Null),
        Err(_) => Err(invalid(field, format!("{field} must be a UUID"))),
    }
}

/// Refuses any field outside `allowed`, so a misspelt setting is not silently ignored.
pub fn only(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), KnowledgeError> {
    match body.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(unknown) => Err(KnowledgeError::InvalidFields {
            message: format!("{unknown} is not a field of this request"),
            fields: vec![(unknown.clone(), "not a field of this request".to_owned())],
        }),
        None => Ok(()),
    }
}
