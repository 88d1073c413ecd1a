//! How a collection chunks what it ingests (`knowledge_bases.ingestion_config`), and the
//! per-upload override merged onto it. One validation for both, so a refusal names the
//! same fields whichever entry point refused: `ingestion_config.<setting>` for a setting
//! of its own, `ingestion_config` for the pair rule (`chunk_overlap < chunk_size`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const DEFAULT_CHUNK_SIZE: u32 = 2500;
pub const DEFAULT_CHUNK_OVERLAP: u32 = 200;
/// A chunk is embedded whole; beyond this no embedding model reads it anyway.
pub const MAX_CHUNK_SIZE: u32 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkingStrategy {
    Recursive,
    Markdown,
    Fixed,
}

/// A complete, valid chunking configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestionConfig {
    pub chunk_size: u32,
    pub chunk_overlap: u32,
    pub chunking_strategy: ChunkingStrategy,
}

impl Default for IngestionConfig {
    fn default() -> Self {
        Self {
            chunk_size: DEFAULT_CHUNK_SIZE,
            chunk_overlap: DEFAULT_CHUNK_OVERLAP,
            chunking_strategy: ChunkingStrategy::Recursive,
        }
    }
}

/// A refusal: each named field with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestionConfigError {
    pub fields: Vec<(String, String)>,
}

impl IngestionConfigError {
    fn one(field: &str, why: impl Into<String>) -> Self {
        Self { fields: vec![(format!("ingestion_config.{field}"), why.into())] }
    }

    pub fn message(&self) -> String {
        self.fields.iter().map(|(field, why)| format!("{field}: {why}")).collect::<Vec<_>>().join("; ")
    }
}

impl IngestionConfig {
    /// `base` with `changes` (a JSON object carrying only what it changes) applied, then
    /// validated as a whole.
    pub fn merged(base: Self, changes: &Value) -> Result<Self, IngestionConfigError> {
        let Value::Object(changes) = changes else {
            return Err(IngestionConfigError {
                fields: vec![("ingestion_config".to_owned(), "must be a JSON object".to_owned())],
            });
        };
        let mut merged = base;
        for (key, value) in changes {
            match key.as_str() {
                "chunk_size" => merged.chunk_size = whole_number(key, value)?,
                "chunk_overlap" => merged.chunk_overlap = whole_number(key, value)?,
                "chunking_strategy" => {
                    merged.chunking_strategy = serde_json::from_value(value.clone())
                        .map_err(|_| IngestionConfigError::one(key, "must be recursive, markdown or fixed"))?;
                }
                other => return Err(IngestionConfigError::one(other, "is not a chunking setting")),
            }
        }
        merged.validate()?;
        Ok(merged)
    }

    /// A stored configuration (`None`: the defaults).
    pub fn from_stored(stored: Option<&Value>) -> Result<Self, IngestionConfigError> {
        stored.map_or(Ok(Self::default()), |value| Self::merged(Self::default(), value))
    }

    pub fn validate(&self) -> Result<(), IngestionConfigError> {
        if self.chunk_size == 0 || self.chunk_size > MAX_CHUNK_SIZE {
            return Err(IngestionConfigError::one("chunk_size", format!("must be between 1 and {MAX_CHUNK_SIZE}")));
        }
        if self.chunk_overlap >= self.chunk_size {
            let why =
                format!("chunk_overlap ({}) must be smaller than chunk_size ({})", self.chunk_overlap, self.chunk_size);
            return Err(IngestionConfigError {
                fields: vec![
                    ("ingestion_config".to_owned(), why.clone()),
                    ("ingestion_config.chunk_overlap".to_owned(), why.clone()),
                    ("ingestion_config.chunk_size".to_owned(), why),
                ],
            });
        }
        Ok(())
    }

    pub fn to_value(self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Map::new()))
    }
}

fn whole_number(key: &str, value: &Value) -> Result<u32, IngestionConfigError> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| IngestionConfigError::one(key, "must be a whole number"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_override_is_judged_merged_with_what_it_overrides() {
        let base = IngestionConfig::default();
        let merged = IngestionConfig::merged(base, &json!({"chunk_size": 800})).expect("valid");
        assert_eq!((merged.chunk_size, merged.chunk_overlap), (800, 200));
        let refused = IngestionConfig::merged(base, &json!({"chunk_overlap": 4096})).expect_err("pair");
        let fields: Vec<&str> = refused.fields.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["ingestion_config", "ingestion_config.chunk_overlap", "ingestion_config.chunk_size"]);
        let refused = IngestionConfig::merged(base, &json!({"chunk_size": -1})).expect_err("own");
        assert_eq!(refused.fields[0].0, "ingestion_config.chunk_size");
        let refused = IngestionConfig::merged(base, &json!({"chunking_strategy": "semantic"})).expect_err("strategy");
        assert_eq!(refused.fields[0].0, "ingestion_config.chunking_strategy");
        assert!(IngestionConfig::merged(base, &json!({"parser": "x"})).is_err());
        assert!(IngestionConfig::merged(base, &json!([1])).is_err());
    }
}
