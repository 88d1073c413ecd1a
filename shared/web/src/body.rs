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
}
