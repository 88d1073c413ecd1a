//! Describing a collection's images with a vision model (`ingestion_config.
//! image_description`): which providers and models the catalog knows
//! (`catalog/vision-models.json`), and the setting's shape. A provider is reached at its own
//! address with a key from the organization's vault; an organization's registered endpoint
//! (`endpoint_id`) at its address, with a key when it needs one — a key stored for that
//! endpoint (provider `endpoint:<id>`), sent only over `https`. A key goes only to the
//! provider it was stored for: an OpenAI or LlamaParse key is never sent to an address a
//! member registered. There is no deployment-wide key: a collection that describes images
//! spends its organization's money.
//!
//! Whether the key and the endpoint are the caller's to lend is asked where the database
//! is (the knowledge and upload functions); this module judges the shape alone.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::OnceLock;
use uuid::Uuid;

/// At most this many images of one document are described unless the setting says.
pub const DEFAULT_MAX_IMAGES: u32 = 50;
/// The most a setting may ask for.
pub const MAX_IMAGES_CEILING: u32 = 500;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VisionProvider {
    pub id: String,
    pub name: String,
    pub base_url: String,
    pub models: Vec<VisionModel>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VisionModel {
    pub model: String,
    /// Whether it reads images; a model listed `false` is refused for description.
    pub vision: bool,
}

#[derive(Debug, Deserialize)]
struct CatalogFile {
    providers: Vec<VisionProvider>,
}

/// The vision catalog compiled into this build.
pub fn providers() -> &'static [VisionProvider] {
    static CATALOG: OnceLock<Vec<VisionProvider>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let file: CatalogFile = serde_json::from_str(include_str!("../catalog/vision-models.json"))
            .unwrap_or_else(|e| panic!("catalog/vision-models.json is not a valid catalog: {e}"));
        file.providers
    })
}

pub fn provider(id: &str) -> Option<&'static VisionProvider> {
    providers().iter().find(|p| p.id == id)
}

/// Whether the catalog knows `model` (under `provider`, or under any provider for an
/// endpoint) as one that cannot read images. A model it does not know is taken at its word.
pub fn known_blind(provider_id: Option<&str>, model: &str) -> bool {
    providers()
        .iter()
        .filter(|p| provider_id.is_none_or(|id| p.id == id))
        .flat_map(|p| &p.models)
        .any(|m| m.model == model && !m.vision)
}

/// The provider a key stored for the registered endpoint `id` is stored under.
pub fn endpoint_key_provider(id: Uuid) -> String {
    format!("{ENDPOINT_KEY_PREFIX}{id}")
}

/// The endpoint a key's `provider` names, when it is an endpoint's key.
pub fn endpoint_of_key_provider(provider: &str) -> Option<Uuid> {
    provider.strip_prefix(ENDPOINT_KEY_PREFIX).and_then(|id| Uuid::parse_str(id).ok())
}

const ENDPOINT_KEY_PREFIX: &str = "endpoint:";

/// A collection's image description setting, complete and valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageDescription {
    pub enabled: bool,
    /// A catalog provider reached at its own address (`openai`, `openrouter`)...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// ...or an endpoint registered for the organization (or the deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<Uuid>,
    #[serde(default)]
    pub model: String,
    /// The key from the organization's vault; required for a provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_id: Option<Uuid>,
    pub max_images: u32,
}

/// What a base or an upload sends: any of the fields, merged onto what is there.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Changes {
    enabled: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    provider: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    endpoint_id: Option<Option<Uuid>>,
    model: Option<String>,
    #[serde(default, deserialize_with = "present")]
    secret_id: Option<Option<Uuid>>,
    max_images: Option<u32>,
}

/// A field given as `null` clears it; one left out keeps what was there.
fn present<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A refusal naming the setting's field: `("model", "…")`.
pub type Refusal = (&'static str, String);

impl ImageDescription {
    /// `current` (or nothing) with `changes` applied; `Ok(None)` when `changes` is `null`
    /// (description off, its setting gone).
    pub fn merged(current: Option<&Self>, changes: &Value) -> Result<Option<Self>, Refusal> {
        if changes.is_null() {
            return Ok(None);
        }
        let changes: Changes = serde_json::from_value(changes.clone()).map_err(|error| {
            let why = error.to_string();
            let why = why.split(" at line").next().unwrap_or(&why).to_owned();
            (
                "image_description",
                format!("must be an object of enabled, provider or endpoint_id, model, secret_id, max_images: {why}"),
            )
        })?;
        let mut merged = current.cloned().unwrap_or(Self {
            enabled: false,
            provider: None,
            endpoint_id: None,
            model: String::new(),
            secret_id: None,
            max_images: DEFAULT_MAX_IMAGES,
        });
        if let Some(enabled) = changes.enabled {
            merged.enabled = enabled;
        }
        // Naming a provider moves off an endpoint, and the other way round.
        match (changes.provider, changes.endpoint_id) {
            (Some(provider), None) => {
                merged.endpoint_id = merged.endpoint_id.filter(|_| provider.is_none());
                merged.provider = provider;
            }
            (None, Some(endpoint_id)) => {
                merged.provider = merged.provider.filter(|_| endpoint_id.is_none());
                merged.endpoint_id = endpoint_id;
            }
            (Some(provider), Some(endpoint_id)) => (merged.provider, merged.endpoint_id) = (provider, endpoint_id),
            (None, None) => {}
        }
        if let Some(model) = changes.model {
            merged.model = model.trim().to_owned();
        }
        if let Some(secret_id) = changes.secret_id {
            merged.secret_id = secret_id;
        }
        if let Some(max_images) = changes.max_images {
            merged.max_images = max_images;
        }
        merged.validate()?;
        Ok(Some(merged))
    }

    /// The rules a setting keeps whether on or off; a setting that is on must also say
    /// where, with which model and (for a provider) with whose key.
    pub fn validate(&self) -> Result<(), Refusal> {
        if !(1..=MAX_IMAGES_CEILING).contains(&self.max_images) {
            return Err(("max_images", format!("must be between 1 and {MAX_IMAGES_CEILING}")));
        }
        if self.provider.is_some() && self.endpoint_id.is_some() {
            return Err(("endpoint_id", "name a provider or an endpoint, not both".to_owned()));
        }
        if let Some(id) = &self.provider
            && provider(id).is_none()
        {
            let known: Vec<&str> = providers().iter().map(|p| p.id.as_str()).collect();
            return Err(("provider", format!("{id:?} is not a vision provider; choose {}", known.join(" or "))));
        }
        if !self.model.is_empty() && known_blind(self.provider.as_deref(), &self.model) {
            return Err(("model", format!("{} does not read images; choose a vision model", self.model)));
        }
        if !self.enabled {
            return Ok(());
        }
        if self.provider.is_none() && self.endpoint_id.is_none() {
            return Err(("provider", "name a provider (openai, openrouter) or a registered endpoint_id".to_owned()));
        }
        if self.model.is_empty() {
            return Err(("model", "name the vision model that describes the images".to_owned()));
        }
        if self.provider.is_some() && self.secret_id.is_none() {
            return Err(("secret_id", "a provider needs an API key from your organization's vault".to_owned()));
        }
        Ok(())
    }

    /// The provider its key must have been stored for: its catalog provider's, or its
    /// endpoint's own.
    pub fn key_provider(&self) -> Option<String> {
        self.provider.clone().or(self.endpoint_id.map(endpoint_key_provider))
    }

    /// The setting when it is on.
    pub fn active(setting: Option<&Self>) -> Option<&Self> {
        setting.filter(|s| s.enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn on() -> ImageDescription {
        ImageDescription::merged(
            None,
            &json!({"enabled": true, "provider": "openai", "model": "gpt-4o-mini", "secret_id": Uuid::nil()}),
        )
        .expect("valid")
        .expect("set")
    }

    #[test]
    fn a_setting_that_is_on_says_where_with_which_model_and_key() {
        let setting = on();
        assert_eq!(setting.max_images, DEFAULT_MAX_IMAGES);
        let refused = |changes: Value| ImageDescription::merged(None, &changes).expect_err("refused").0;
        assert_eq!(refused(json!({"enabled": true, "model": "gpt-4o"})), "provider");
        assert_eq!(refused(json!({"enabled": true, "provider": "openai"})), "model");
        assert_eq!(refused(json!({"enabled": true, "provider": "openai", "model": "gpt-4o"})), "secret_id");
        assert_eq!(refused(json!({"enabled": true, "provider": "acme", "model": "x"})), "provider");
        assert_eq!(refused(json!({"enabled": true, "provider": "openai", "model": "gpt-3.5-turbo"})), "model");
        assert_eq!(refused(json!({"max_images": 0})), "max_images");
        assert_eq!(refused(json!({"colour": true})), "image_description");
        assert_eq!(refused(json!("on")), "image_description");
        // An endpoint needs no key, and a model the catalog does not know is taken at its word.
        let endpoint = json!({"enabled": true, "endpoint_id": Uuid::nil(), "model": "llava:13b"});
        assert!(ImageDescription::merged(None, &endpoint).is_ok());
        // A model blind under any provider is refused on an endpoint too.
        let blind = json!({"enabled": true, "endpoint_id": Uuid::nil(), "model": "deepseek/deepseek-chat"});
        assert_eq!(refused(blind), "model");
        assert_eq!(ImageDescription::merged(Some(&setting), &Value::Null), Ok(None));
    }

    #[test]
    fn an_override_changes_only_what_it_names() {
        let setting = on();
        let off = ImageDescription::merged(Some(&setting), &json!({"enabled": false})).expect("valid").expect("set");
        assert_eq!(off, ImageDescription { enabled: false, ..setting.clone() });
        let moved = ImageDescription::merged(Some(&setting), &json!({"endpoint_id": Uuid::max()})).expect("valid");
        let moved = moved.expect("set");
        assert_eq!((moved.provider, moved.endpoint_id), (None, Some(Uuid::max())));
        let both = json!({"provider": "openai", "endpoint_id": Uuid::max()});
        assert_eq!(ImageDescription::merged(Some(&setting), &both).expect_err("both").0, "endpoint_id");
        let fewer = ImageDescription::merged(Some(&setting), &json!({"max_images": 3})).expect("valid");
        assert_eq!(fewer.expect("set").max_images, 3);
    }
}
