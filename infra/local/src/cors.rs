//! The deployment template's CORS rules, applied locally where AWS applies them: the
//! bucket's rules (S3 answers a browser's preflight and cross-origin reads) are put on the
//! emulator's bucket, and the HTTP API's (API Gateway answers preflights itself and adds the
//! headers to every answer) are kept by the door. Both are read from `template.yaml`, so a
//! browser against the local stack judges exactly what it would judge against AWS.

use std::sync::OnceLock;
use yaml_serde::Value;

/// The template, as built into this binary.
const TEMPLATE: &str = include_str!("../../../template.yaml");

/// One rule of the bucket's `CorsConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketCorsRule {
    pub allowed_methods: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub exposed_headers: Vec<String>,
    pub max_age_seconds: Option<i32>,
}

/// The HTTP API's `CorsConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCors {
    pub allow_origins: Vec<String>,
    pub allow_headers: Vec<String>,
    pub allow_methods: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age_seconds: Option<i32>,
}

fn template() -> &'static Value {
    static PARSED: OnceLock<Value> = OnceLock::new();
    PARSED.get_or_init(|| yaml_serde::from_str(TEMPLATE).expect("template.yaml is YAML"))
}

/// The origins a browser may call from: `SLUICE_ALLOWED_ORIGINS` (comma separated), else
/// the template's default for its `AllowedOrigins` parameter.
pub fn allowed_origins() -> Vec<String> {
    let configured = std::env::var("SLUICE_ALLOWED_ORIGINS").ok().filter(|v| !v.trim().is_empty());
    let default = template()["Parameters"]["AllowedOrigins"]["Default"].as_str().unwrap_or("*").to_owned();
    configured.unwrap_or(default).split(',').map(|o| o.trim().to_owned()).filter(|o| !o.is_empty()).collect()
}

/// A list of strings in the template; `!Ref AllowedOrigins` is `origins`.
fn strings(value: &Value, origins: &[String]) -> Vec<String> {
    match value {
        Value::Sequence(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        Value::Tagged(tagged) if tagged.tag == "Ref" && tagged.value.as_str() == Some("AllowedOrigins") => {
            origins.to_vec()
        }
        _ => Vec::new(),
    }
}

fn max_age(value: &Value) -> Option<i32> {
    value.as_i64().and_then(|v| i32::try_from(v).ok())
}

/// The rules of the template's `FilesBucket`, for browsers calling from `origins`.
pub fn bucket_rules(origins: &[String]) -> Vec<BucketCorsRule> {
    let rules = &template()["Resources"]["FilesBucket"]["Properties"]["CorsConfiguration"]["CorsRules"];
    rules
        .as_sequence()
        .map(|rules| {
            rules
                .iter()
                .map(|rule| BucketCorsRule {
                    allowed_methods: strings(&rule["AllowedMethods"], origins),
                    allowed_origins: strings(&rule["AllowedOrigins"], origins),
                    allowed_headers: strings(&rule["AllowedHeaders"], origins),
                    exposed_headers: strings(&rule["ExposedHeaders"], origins),
                    max_age_seconds: max_age(&rule["MaxAge"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The template's `HttpApi` CORS configuration, for browsers calling from `origins`.
pub fn api_cors(origins: &[String]) -> ApiCors {
    let cors = &template()["Resources"]["HttpApi"]["Properties"]["CorsConfiguration"];
    ApiCors {
        allow_origins: strings(&cors["AllowOrigins"], origins),
        allow_headers: strings(&cors["AllowHeaders"], origins),
        allow_methods: strings(&cors["AllowMethods"], origins),
        expose_headers: strings(&cors["ExposeHeaders"], origins),
        max_age_seconds: max_age(&cors["MaxAge"]),
    }
}

impl ApiCors {
    /// The `Access-Control-Allow-Origin` an answer to `origin` carries, if it is allowed.
    fn allow_origin(&self, origin: &str) -> Option<String> {
        if self.allow_origins.iter().any(|o| o == "*") {
            Some("*".to_owned())
        } else {
            self.allow_origins.iter().any(|o| o.eq_ignore_ascii_case(origin)).then(|| origin.to_owned())
        }
    }

    /// API Gateway's own answer to a preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`): `204` with the configured headers when the origin
    /// and method are allowed, a bare `204` otherwise (the browser then refuses).
    pub fn preflight(&self, headers: &http::HeaderMap) -> Option<Vec<(&'static str, String)>> {
        let origin = headers.get("origin")?.to_str().ok()?;
        let method = headers.get("access-control-request-method")?.to_str().ok()?;
        let mut answer = Vec::new();
        let method_allowed = self.allow_methods.iter().any(|m| m == "*" || m.eq_ignore_ascii_case(method));
        if let (Some(allow), true) = (self.allow_origin(origin), method_allowed) {
            answer.push(("access-control-allow-origin", allow));
            answer.push(("access-control-allow-methods", self.allow_methods.join(",")));
            answer.push(("access-control-allow-headers", self.allow_headers.join(",")));
            if let Some(age) = self.max_age_seconds {
                answer.push(("access-control-max-age", age.to_string()));
            }
        }
        Some(answer)
    }

    /// The headers API Gateway adds to an answer to a cross-origin request from `origin`.
    pub fn answer_headers(&self, origin: Option<&str>) -> Vec<(&'static str, String)> {
        let Some(allow) = origin.and_then(|o| self.allow_origin(o)) else { return Vec::new() };
        let mut headers = vec![("access-control-allow-origin", allow)];
        if !self.expose_headers.is_empty() {
            headers.push(("access-control-expose-headers", self.expose_headers.join(",")));
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_s_rules_are_read_with_the_origins_put_in() {
        let origins = vec!["https://app.example".to_owned()];
        let rules = bucket_rules(&origins);
        assert!(!rules.is_empty());
        assert!(rules.iter().all(|r| r.allowed_origins.contains(&origins[0]) || r.allowed_origins == ["*"]));
        assert!(rules.iter().any(|r| r.allowed_methods.contains(&"PUT".to_owned())));
        let api = api_cors(&origins);
        assert_eq!(api.allow_origins, origins);
        assert!(api.allow_headers.contains(&"authorization".to_owned()));
    }

    #[test]
    fn a_preflight_is_answered_for_an_allowed_origin_only() {
        let api = api_cors(&["https://app.example".to_owned()]);
        let mut headers = http::HeaderMap::new();
        headers.insert("origin", "https://app.example".parse().expect("value"));
        headers.insert("access-control-request-method", "POST".parse().expect("value"));
        let answer = api.preflight(&headers).expect("a preflight");
        assert!(answer.contains(&("access-control-allow-origin", "https://app.example".to_owned())), "{answer:?}");
        headers.insert("origin", "https://evil.example".parse().expect("value"));
        assert_eq!(api.preflight(&headers), Some(Vec::new()));
        headers.remove("access-control-request-method");
        assert_eq!(api.preflight(&headers), None, "an OPTIONS that is no preflight goes to the routes");
    }
}
