//! Reranking a search's first candidates with a cross-encoder (a collection's `rerank`
//! setting): Cohere's rerank API, Amazon Bedrock's `Rerank` (the deployment's own role, no
//! key), or an endpoint the organization registered that serves the common `/rerank` shape
//! (text-embeddings-inference, Infinity, vLLM). A key goes only where it was stored for:
//! Cohere's to Cohere, an endpoint's (provider `endpoint:<id>`) to that endpoint over
//! `https`. This module judges the setting's shape; whether the key and the endpoint are the
//! caller's to lend is asked where the database is.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The candidates reranked unless the setting says: enough to lift a passage from the
/// fused order's second page, few enough to answer within a search's time.
pub const DEFAULT_CANDIDATES: u32 = 50;
/// The most a setting may ask for (Cohere and Bedrock take more; a search's time does not).
pub const MAX_CANDIDATES: u32 = 200;

/// The providers reached at their own address.
pub const PROVIDERS: &[&str] = &["cohere", "bedrock"];

/// The reranking models Amazon Bedrock serves through `Rerank`, each with the Regions that
/// serve it (Bedrock's "Supported Regions and models for reranking"; Amazon Rerank 1.0 is not
/// served in us-east-1).
pub const BEDROCK_MODELS: &[(&str, &[&str])] = &[
    ("amazon.rerank-v1:0", &["ap-northeast-1", "ca-central-1", "eu-central-1", "us-west-2"]),
    ("cohere.rerank-v3-5:0", &["ap-northeast-1", "ca-central-1", "eu-central-1", "us-east-1", "us-west-2"]),
];

/// Why Bedrock cannot rerank with `model` in `region`, when it cannot.
pub fn bedrock_refuses(model: &str, region: &str) -> Option<String> {
    let (_, regions) = BEDROCK_MODELS.iter().find(|(id, _)| *id == model)?;
    (!regions.contains(&region)).then(|| {
        let here: Vec<&str> = BEDROCK_MODELS.iter().filter(|(_, r)| r.contains(&region)).map(|(id, _)| *id).collect();
        format!(
            "Bedrock serves {model} in {}, not in this deployment's region {region}; here: {}",
            regions.join(", "),
            if here.is_empty() { "no reranking model".to_owned() } else { here.join(", ") }
        )
    })
}

/// A collection's rerank setting, complete and valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rerank {
    /// `cohere` or `bedrock`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// ...or an endpoint registered for the organization (or the deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<Uuid>,
    pub model: String,
    /// The key from the organization's vault: required for Cohere, refused for Bedrock
    /// (its role signs), optional for an endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_id: Option<Uuid>,
    #[serde(default = "default_candidates")]
    pub candidates: u32,
}

fn default_candidates() -> u32 {
    DEFAULT_CANDIDATES
}

/// A refusal naming the setting's field: `("model", "…")`.
pub type Refusal = (&'static str, String);

impl Rerank {
    /// The setting `given` says, checked; `Ok(None)` for `null` (no reranking).
    pub fn parse(given: &serde_json::Value) -> Result<Option<Self>, Refusal> {
        if given.is_null() {
            return Ok(None);
        }
        let setting: Self = serde_json::from_value(given.clone()).map_err(|error| {
            let why = error.to_string();
            let why = why.split(" at line").next().unwrap_or(&why).to_owned();
            ("rerank", format!("must be an object of provider or endpoint_id, model, secret_id, candidates: {why}"))
        })?;
        setting.validate()?;
        Ok(Some(setting))
    }

    /// The rules a setting keeps: where, with which model, and with whose key.
    pub fn validate(&self) -> Result<(), Refusal> {
        match (&self.provider, self.endpoint_id) {
            (Some(_), Some(_)) => return Err(("endpoint_id", "name a provider or an endpoint, not both".to_owned())),
            (None, None) => {
                return Err(("provider", "name a provider (cohere, bedrock) or a registered endpoint_id".to_owned()));
            }
            (Some(provider), None) if !PROVIDERS.contains(&provider.as_str()) => {
                return Err((
                    "provider",
                    format!("{provider:?} is not a reranking provider; choose cohere or bedrock"),
                ));
            }
            _ => {}
        }
        if self.model.trim().is_empty() || self.model.len() > 200 {
            return Err(("model", "name the reranking model (at most 200 characters)".to_owned()));
        }
        if !(1..=MAX_CANDIDATES).contains(&self.candidates) {
            return Err(("candidates", format!("must be between 1 and {MAX_CANDIDATES}")));
        }
        match self.provider.as_deref() {
            Some("cohere") if self.secret_id.is_none() => {
                Err(("secret_id", "Cohere needs an API key from your organization's vault".to_owned()))
            }
            Some("bedrock") if self.secret_id.is_some() => Err((
                "secret_id",
                "Bedrock is reached with the deployment's own role, never a key; leave secret_id out".to_owned(),
            )),
            Some("bedrock") if !BEDROCK_MODELS.iter().any(|(id, _)| *id == self.model) => {
                let models: Vec<&str> = BEDROCK_MODELS.iter().map(|(id, _)| *id).collect();
                Err(("model", format!("Bedrock reranks with {}", models.join(" or "))))
            }
            _ => Ok(()),
        }
    }

    /// The provider its key must have been stored for: Cohere's, or its endpoint's own.
    pub fn key_provider(&self) -> Option<String> {
        self.provider.clone().or(self.endpoint_id.map(crate::vision::endpoint_key_provider))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn a_setting_says_where_with_which_model_and_whose_key() {
        let cohere = json!({"provider": "cohere", "model": "rerank-v3.5", "secret_id": Uuid::nil()});
        let setting = Rerank::parse(&cohere).expect("valid").expect("set");
        assert_eq!(setting.candidates, DEFAULT_CANDIDATES);
        assert_eq!(setting.key_provider().as_deref(), Some("cohere"));
        let refused = |given: Value| Rerank::parse(&given).expect_err("refused").0;
        assert_eq!(refused(json!({"provider": "cohere", "model": "rerank-v3.5"})), "secret_id");
        assert_eq!(refused(json!({"provider": "acme", "model": "x"})), "provider");
        assert_eq!(refused(json!({"model": "x"})), "provider");
        assert_eq!(refused(json!({"provider": "bedrock", "endpoint_id": Uuid::nil(), "model": "x"})), "endpoint_id");
        assert_eq!(
            refused(json!({"provider": "bedrock", "model": "amazon.rerank-v1:0", "secret_id": Uuid::nil()})),
            "secret_id"
        );
        assert_eq!(refused(json!({"provider": "bedrock", "model": "rerank-v3.5"})), "model");
        assert_eq!(refused(json!({"endpoint_id": Uuid::nil(), "model": " "})), "model");
        assert_eq!(refused(json!({"endpoint_id": Uuid::nil(), "model": "bge", "candidates": 0})), "candidates");
        assert_eq!(refused(json!({"endpoint_id": Uuid::nil(), "model": "bge", "colour": 1})), "rerank");
        assert_eq!(refused(json!("on")), "rerank");
        let endpoint =
            Rerank::parse(&json!({"endpoint_id": Uuid::nil(), "model": "BAAI/bge-reranker-base", "candidates": 20}))
                .expect("valid")
                .expect("set");
        assert_eq!(endpoint.key_provider(), Some(format!("endpoint:{}", Uuid::nil())));
        assert!(Rerank::parse(&json!({"provider": "bedrock", "model": "amazon.rerank-v1:0"})).is_ok());
        assert_eq!(Rerank::parse(&Value::Null), Ok(None));
    }

    #[test]
    fn bedrock_reranks_only_where_it_serves_the_model() {
        assert_eq!(bedrock_refuses("cohere.rerank-v3-5:0", "us-east-1"), None);
        assert_eq!(bedrock_refuses("amazon.rerank-v1:0", "us-west-2"), None);
        let why = bedrock_refuses("amazon.rerank-v1:0", "us-east-1").expect("refused");
        assert!(why.contains("us-east-1") && why.contains("cohere.rerank-v3-5:0"), "{why}");
        assert!(bedrock_refuses("cohere.rerank-v3-5:0", "sa-east-1").expect("refused").contains("no reranking model"));
    }
}
