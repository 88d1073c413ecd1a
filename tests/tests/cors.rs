//! The deployment template's CORS rules held against what the code produces, without AWS:
//! every header a presigned upload names is allowed by exact name (no wildcard, which not
//! every S3 peer expands) for `PUT`, the downloads' `GET`/`HEAD` are allowed, and the API
//! allows the headers and methods its routes take. A browser test (`browser.rs`) runs the
//! same rules for real.

use sluice_local::cors::{api_cors, bucket_rules};
use std::time::Duration;

/// Headers a page can never set itself (the browser does): they need no rule.
const SET_BY_THE_BROWSER: &[&str] = &["content-length", "host"];

#[tokio::test]
async fn the_bucket_allows_every_header_a_presigned_upload_names_by_exact_name() {
    let blob = sluice_blob::Blob::new(
        sluice_blob::static_s3_client("http://127.0.0.1:9"),
        "bucket",
        "arn:aws:kms:us-east-1:111122223333:key/k",
    );
    let upload = blob
        .presign_upload("uploads/u/f_a.pdf", 9_000_000, "application/pdf", Duration::from_secs(900))
        .await
        .expect("presigned");
    let origins = vec!["https://app.example".to_owned()];
    let rules = bucket_rules(&origins);
    let put = rules.iter().find(|r| r.allowed_methods.iter().any(|m| m == "PUT")).expect("a rule for PUT");
    assert_eq!(put.allowed_origins, origins, "uploads from the app's origins");
    assert!(put.allowed_headers.iter().all(|h| !h.contains('*')), "no wildcard: {:?}", put.allowed_headers);
    let named: Vec<String> = upload
        .headers
        .iter()
        .map(|(name, _)| name.to_ascii_lowercase())
        .filter(|name| !SET_BY_THE_BROWSER.contains(&name.as_str()))
        .collect();
    assert!(named.contains(&"if-none-match".to_owned()), "{named:?}");
    for header in &named {
        assert!(put.allowed_headers.contains(header), "{header} is not allowed: {:?}", put.allowed_headers);
    }
    assert!(put.exposed_headers.iter().any(|h| h.eq_ignore_ascii_case("etag")));
}

#[test]
fn the_bucket_lets_the_app_read_a_download_it_was_redirected_to() {
    let origins = vec!["https://app.example".to_owned()];
    let rules = bucket_rules(&origins);
    // A redirected read arrives with `Origin: null`: only a rule for any origin matches it.
    // It allows reads alone, and no header, so it lends nothing but what the signed URL does.
    let get = rules.iter().find(|r| r.allowed_methods.iter().any(|m| m == "GET")).expect("GET");
    assert_eq!(get.allowed_origins, ["*"]);
    assert_eq!(get.allowed_methods, ["GET", "HEAD"]);
    assert!(get.allowed_headers.is_empty(), "{:?}", get.allowed_headers);
    assert!(get.exposed_headers.iter().any(|h| h.eq_ignore_ascii_case("content-disposition")));
    // Writes only from the app's origins.
    for rule in rules.iter().filter(|r| r.allowed_methods.iter().any(|m| m == "PUT")) {
        assert_eq!(rule.allowed_origins, origins);
    }
}

#[test]
fn the_api_allows_what_its_routes_take_from_the_app_s_origins() {
    let origins = vec!["https://app.example".to_owned()];
    let api = api_cors(&origins);
    assert_eq!(api.allow_origins, origins);
    for header in ["authorization", "content-type"] {
        assert!(api.allow_headers.iter().any(|h| h == header), "{header}");
    }
    let used: std::collections::BTreeSet<String> = sluice_upload::ROUTES
        .iter()
        .chain(sluice_knowledge::ROUTES)
        .filter_map(|route| route.split_once(' ').map(|(method, _)| method.to_owned()))
        .collect();
    for method in used {
        assert!(api.allow_methods.contains(&method), "{method} is not allowed: {:?}", api.allow_methods);
    }
    assert!(api.expose_headers.iter().any(|h| h.eq_ignore_ascii_case("retry-after")));
}
