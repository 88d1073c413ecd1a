//! S3 event notifications as they arrive in an SQS body — S3's own, or EventBridge's
//! `Object Created`/`Object Deleted` events (keys as EventBridge sends them, not encoded).
//! Decoded tolerantly: optional
//! fields (`userIdentity`, `requestParameters`, `size`, `eTag`, `versionId`) may be
//! missing, the `s3:TestEvent` S3 sends when a notification is configured is recognised,
//! and keys are form-URL-decoded (`%2F`, and `+` for a space), as S3 encodes them.

use serde::Deserialize;

/// What one SQS message from S3 says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum S3Message {
    /// The message S3 sends once when a notification is configured.
    Test,
    Changes(Vec<ObjectChange>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Removed,
    /// Any other event type (restores, replication…): nothing to do.
    Other,
}

/// One object created or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectChange {
    pub change: Change,
    pub bucket: String,
    pub key: String,
    pub size: Option<u64>,
    pub etag: Option<String>,
    pub version_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("not an S3 event notification: {0}")]
pub struct DecodeError(String);

#[derive(Deserialize)]
struct Notification {
    #[serde(rename = "Records", default)]
    records: Option<Vec<Record>>,
    #[serde(rename = "Event", default)]
    event: Option<String>,
}

#[derive(Deserialize)]
struct Record {
    #[serde(rename = "eventName")]
    event_name: String,
    s3: Entity,
}

#[derive(Deserialize)]
struct Entity {
    bucket: Bucket,
    object: Object,
}

#[derive(Deserialize)]
struct Bucket {
    name: String,
}

#[derive(Deserialize)]
struct Object {
    key: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(rename = "eTag", default)]
    etag: Option<String>,
    #[serde(rename = "versionId", default)]
    version_id: Option<String>,
}

/// An EventBridge event about an S3 object.
#[derive(Deserialize)]
struct BridgeEvent {
    source: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    detail: BridgeDetail,
}

#[derive(Deserialize)]
struct BridgeDetail {
    bucket: Bucket,
    object: BridgeObject,
}

#[derive(Deserialize)]
struct BridgeObject {
    key: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    etag: Option<String>,
    #[serde(rename = "version-id", default)]
    version_id: Option<String>,
}

fn from_bridge(event: BridgeEvent) -> Result<S3Message, DecodeError> {
    if event.source != "aws.s3" {
        return Err(DecodeError(format!("an EventBridge event from {}", event.source)));
    }
    let change = match event.detail_type.as_str() {
        "Object Created" => Change::Created,
        "Object Deleted" => Change::Removed,
        _ => Change::Other,
    };
    Ok(S3Message::Changes(vec![ObjectChange {
        change,
        bucket: event.detail.bucket.name,
        key: event.detail.object.key,
        size: event.detail.object.size,
        etag: event.detail.object.etag,
        version_id: event.detail.object.version_id,
    }]))
}

/// Decodes one SQS message body.
pub fn decode(body: &str) -> Result<S3Message, DecodeError> {
    if let Ok(event) = serde_json::from_str::<BridgeEvent>(body) {
        return from_bridge(event);
    }
    let notification: Notification = serde_json::from_str(body).map_err(|e| DecodeError(e.to_string()))?;
    if notification.event.as_deref() == Some("s3:TestEvent") {
        return Ok(S3Message::Test);
    }
    let records = notification.records.ok_or_else(|| DecodeError("it has no Records".to_owned()))?;
    let changes = records
        .into_iter()
        .map(|record| {
            let change = if record.event_name.starts_with("ObjectCreated:") {
                Change::Created
            } else if record.event_name.starts_with("ObjectRemoved:") {
                Change::Removed
            } else {
                Change::Other
            };
            Ok(ObjectChange {
                change,
                bucket: record.s3.bucket.name,
                key: form_decode(&record.s3.object.key)?,
                size: record.s3.object.size,
                etag: record.s3.object.etag.map(|e| e.trim_matches('"').to_owned()),
                version_id: record.s3.object.version_id,
            })
        })
        .collect::<Result<Vec<_>, DecodeError>>()?;
    Ok(S3Message::Changes(changes))
}

/// `application/x-www-form-urlencoded` decoding, as S3 encodes keys in notifications.
fn form_decode(key: &str) -> Result<String, DecodeError> {
    let spaced = key.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .map(|k| k.into_owned())
        .map_err(|_| DecodeError(format!("the key {key:?} is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_record_without_optional_fields_decodes_with_its_key_form_decoded() {
        let body = r#"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","eventName":"ObjectCreated:Put",
            "s3":{"bucket":{"name":"b"},"object":{"key":"uploads%2Fu%2Fab_my+file%2B1.pdf","eTag":"\"abc\""}}}]}"#;
        let S3Message::Changes(changes) = decode(body).expect("decoded") else { panic!("not changes") };
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].change, Change::Created);
        assert_eq!(changes[0].key, "uploads/u/ab_my file+1.pdf");
        assert_eq!(changes[0].etag.as_deref(), Some("abc"));
        assert_eq!(changes[0].size, None);
    }

    #[test]
    fn an_eventbridge_object_event_decodes_with_its_key_as_sent() {
        let body = r#"{"version":"0","id":"1","detail-type":"Object Created","source":"aws.s3","account":"1",
            "time":"2026-12-01T00:00:00Z","region":"us-east-1","resources":["arn:aws:s3:::b"],
            "detail":{"version":"0","bucket":{"name":"b"},"object":{"key":"inbox/a b.md","size":5,"etag":"e1"}}}"#;
        let S3Message::Changes(changes) = decode(body).expect("decoded") else { panic!("not changes") };
        assert_eq!((changes[0].change, changes[0].key.as_str()), (Change::Created, "inbox/a b.md"));
        let deleted = body.replace("Object Created", "Object Deleted");
        let S3Message::Changes(changes) = decode(&deleted).expect("decoded") else { panic!("not changes") };
        assert_eq!(changes[0].change, Change::Removed);
        assert!(decode(&body.replace("aws.s3", "my.app")).is_err());
    }

    #[test]
    fn the_test_event_and_garbage_are_told_apart() {
        let test = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-11-29T00:00:00Z","Bucket":"b"}"#;
        assert_eq!(decode(test).expect("test event"), S3Message::Test);
        assert!(decode("{not json").is_err());
        assert!(decode(r#"{"hello":"world"}"#).is_err());
        let removed =
            r#"{"Records":[{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}"#;
        let S3Message::Changes(changes) = decode(removed).expect("removed") else { panic!("not changes") };
        assert_eq!(changes[0].change, Change::Removed);
    }
}
