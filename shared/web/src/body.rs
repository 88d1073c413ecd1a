//! Request bodies read once, at the edge, into types: serde's derive (`deny_unknown_fields`
//! on the type), and where serde refuses, the place it refused, so each function words the
//! refusal for the field at fault.

use serde::de::DeserializeOwned;

/// Where serde refused a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyRefusal {
    /// The object keys from the body's top down to the value at fault (none: the body itself
    /// is not a JSON object of that type).
    pub path: Vec<String>,
    /// Whether the value at fault is an item of a list.
    pub in_list: bool,
    /// A field the type does not have, when that was the fault.
    pub unknown: Option<String>,
}

impl BodyRefusal {
    /// The first key of the path: the top-level field at fault.
    pub fn field(&self) -> Option<&str> {
        self.path.first().map(String::as_str)
    }

    /// The refusal in the caller's words: a field the type does not have "is not a field of
    /// this request", a value of the wrong type as `wrong_type` words its top-level field,
    /// anything else a body that is not a JSON object.
    pub fn worded(&self, wrong_type: impl Fn(&str) -> String) -> FieldRefusal {
        let (field, message, unknown) = match (&self.unknown, self.field()) {
            (Some(unknown), _) => (unknown.clone(), format!("{unknown} is not a field of this request"), true),
            (None, Some(field)) => (field.to_owned(), wrong_type(field), false),
            (None, None) => ("body".to_owned(), "the body must be a JSON object".to_owned(), false),
        };
        FieldRefusal { field, message, unknown }
    }
}

/// A body's refusal as the caller reads it: the field at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRefusal {
    pub field: String,
    pub message: String,
    /// Whether the field is one the request does not have.
    pub unknown: bool,
}

/// Text that is not blank: in a body's type, blank text is refused as a wrong type is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonBlank(pub String);

impl<'de> serde::Deserialize<'de> for NonBlank {
    fn deserialize<D: serde::Deserializer<'de>>(given: D) -> Result<Self, D::Error> {
        let text = String::deserialize(given)?;
        if text.trim().is_empty() {
            return Err(serde::de::Error::custom("blank text"));
        }
        Ok(Self(text))
    }
}

/// Reads `bytes` as one JSON value of type `T`, with nothing after it.
pub fn typed_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyRefusal> {
    use serde_path_to_error::Segment;
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let read: Result<T, _> = serde_path_to_error::deserialize(&mut reader);
    let refused = match read {
        Ok(value) => {
            return reader.end().map(|()| value).map_err(|_| BodyRefusal {
                path: Vec::new(),
                in_list: false,
                unknown: None,
            });
        }
        Err(refused) => refused,
    };
    let path: Vec<String> = refused
        .path()
        .iter()
        .filter_map(|segment| match segment {
            Segment::Map { key } => Some(key.clone()),
            _ => None,
        })
        .collect();
    let in_list = refused.path().iter().any(|segment| matches!(segment, Segment::Seq { .. }));
    let said = refused.into_inner().to_string();
    let unknown = said.strip_prefix("unknown field `").and_then(|rest| rest.split('`').next()).map(str::to_owned);
    Err(BodyRefusal { path, in_list, unknown })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        name: Option<String>,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        tags: Option<Vec<String>>,
    }

    fn refusal(body: &str) -> BodyRefusal {
        typed_body::<Outer>(body.as_bytes()).expect_err(body)
    }

    #[test]
    fn a_refusal_names_where_it_happened() {
        let read: Outer = typed_body(br#"{"name": "x", "inner": {"tags": ["a"]}}"#).expect("a whole body");
        assert_eq!(read.name.as_deref(), Some("x"));
        assert_eq!(read.inner.and_then(|inner| inner.tags), Some(vec!["a".to_owned()]));
        assert_eq!(refusal(r#"{"name": 7}"#).field(), Some("name"));
        let item = refusal(r#"{"inner": {"tags": [1]}}"#);
        assert_eq!((item.path.clone(), item.in_list), (vec!["inner".to_owned(), "tags".to_owned()], true));
        assert_eq!(refusal(r#"{"colour": 1}"#).unknown.as_deref(), Some("colour"));
        let nested = refusal(r#"{"inner": {"colour": 1}}"#);
        assert_eq!((nested.field(), nested.unknown.as_deref()), (Some("inner"), Some("colour")));
        for body in ["[1]", "not json", "", r#"{"name": "x"} trailing"#] {
            assert_eq!(refusal(body).field(), None, "{body}");
        }
    }

    #[test]
    fn a_refusal_is_worded_for_the_field_at_fault() {
        let wrong_type = |field: &str| format!("{field} is wrong");
        let worded = |body: &str| refusal(body).worded(wrong_type);
        assert_eq!(
            worded(r#"{"name": 7}"#),
            FieldRefusal { field: "name".to_owned(), message: "name is wrong".to_owned(), unknown: false }
        );
        let unknown = worded(r#"{"colour": 1}"#);
        assert_eq!((unknown.field.as_str(), unknown.unknown), ("colour", true));
        assert_eq!(unknown.message, "colour is not a field of this request");
        assert_eq!(worded("[]").message, "the body must be a JSON object");
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code, reason = "read only to be refused")]
        struct Named {
            name: NonBlank,
        }
        let blank = typed_body::<Named>(br#"{"name": "  "}"#).expect_err("blank");
        assert_eq!(blank.field(), Some("name"));
    }
}
