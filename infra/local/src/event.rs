//! API Gateway HTTP API events (payload format 2.0), built from a plain HTTP request.

use base64::Engine;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// The parts of an HTTP request an event is made of.
#[derive(Debug)]
pub struct HttpParts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: Vec<(String, String)>,
    pub body: &'a [u8],
    pub source_ip: String,
}

/// The event API Gateway would send for `parts`, with the authorizer's `claims`.
pub fn api_gateway_v2(parts: &HttpParts<'_>, claims: Option<&HashMap<String, String>>) -> Value {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    let mut cookies: Vec<String> = Vec::new();
    for (name, value) in &parts.headers {
        let name = name.to_ascii_lowercase();
        if name == "cookie" {
            cookies.extend(value.split(';').map(|c| c.trim().to_owned()).filter(|c| !c.is_empty()));
            continue;
        }
        headers.entry(name).and_modify(|v| v.push_str(&format!(",{value}"))).or_insert_with(|| value.clone());
    }
    let content_type = headers.get("content-type").map(String::as_str).unwrap_or_default();
    // API Gateway passes text bodies as they are and base64-encodes everything else.
    let textual = content_type.starts_with("text/") || content_type.contains("json") || content_type.contains("xml");
    let (body, is_base64) = match (parts.body.is_empty(), textual, std::str::from_utf8(parts.body)) {
        (true, _, _) => (Value::Null, false),
        (false, true, Ok(text)) => (Value::String(text.to_owned()), false),
        _ => (Value::String(base64::engine::general_purpose::STANDARD.encode(parts.body)), true),
    };
    let query: BTreeMap<String, String> = parts
        .query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect();
    let now = time::OffsetDateTime::now_utc();
    let authorizer = claims.map(|c| json!({"jwt": {"claims": c, "scopes": null}}));
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path,
        "rawQueryString": parts.query.unwrap_or_default(),
        "cookies": if cookies.is_empty() { Value::Null } else { json!(cookies) },
        "headers": headers,
        "queryStringParameters": if query.is_empty() { Value::Null } else { json!(query) },
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "authorizer": authorizer,
            "domainName": headers.get("host").cloned().unwrap_or_else(|| "localhost".to_owned()),
            "domainPrefix": "local",
            "http": {
                "method": parts.method,
                "path": parts.path,
                "protocol": "HTTP/1.1",
                "sourceIp": parts.source_ip,
                "userAgent": headers.get("user-agent").cloned().unwrap_or_default(),
            },
            "requestId": uuid::Uuid::new_v4().to_string(),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.format(&time::format_description::well_known::Rfc2822).unwrap_or_default(),
            "timeEpoch": (now.unix_timestamp_nanos() / 1_000_000) as i64,
        },
        "body": body,
        "isBase64Encoded": is_base64,
    })
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::RequestExt;

    #[test]
    fn events_round_trip_through_the_runtime_deserializer() {
        let claims: HashMap<String, String> = [("sub".to_owned(), "u".to_owned())].into_iter().collect();
        let parts = HttpParts {
            method: "POST",
            path: "/api/v1/files/upload",
            query: Some("a=1&b=x+y"),
            headers: vec![
                ("Content-Type".into(), "multipart/form-data; boundary=b".into()),
                ("X-A".into(), "1".into()),
            ],
            body: b"\x00\xffbinary",
            source_ip: "127.0.0.1".into(),
        };
        let event = api_gateway_v2(&parts, Some(&claims));
        assert_eq!(event["isBase64Encoded"], true);
        let request = lambda_http::request::from_str(&event.to_string()).expect("a valid v2 event");
        assert_eq!(request.method(), "POST");
        assert_eq!(request.uri().path(), "/api/v1/files/upload");
        assert_eq!(request.query_string_parameters_ref().and_then(|q| q.first("b")), Some("x y"));
        match request.body() {
            lambda_http::Body::Binary(bytes) => assert_eq!(bytes.as_slice(), b"\x00\xffbinary"),
            other => panic!("expected a binary body, got {other:?}"),
        }
    }
}
