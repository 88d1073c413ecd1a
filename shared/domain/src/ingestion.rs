//! How a collection chunks and reads what it ingests (`knowledge_bases.ingestion_config`):
//! chunking (and what each chunk is indexed by besides its text, `chunk_context`), and OCR
//! of scanned pages and images (`auto_ocr`, `ocr_languages`, `ocr_dpi`,
//! `max_pages`); how parsed text is written (`output_format`); whether images are described
//! (`image_description`, see `crate::vision`); and the per-upload override merged onto it. One validation for both, so a refusal names the
//! same fields whichever entry point refused: `ingestion_config.<setting>` for a setting
//! of its own, `ingestion_config` for the pair rule (`chunk_overlap < chunk_size`).

use crate::catalog::{Model, Provider};
use crate::vision::ImageDescription;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The chunk size of a base whose model reads at least this much whole.
pub const DEFAULT_CHUNK_SIZE: u32 = 2500;
pub const DEFAULT_CHUNK_OVERLAP: u32 = 200;
/// A chunk is embedded whole; beyond this no embedding model reads it anyway.
pub const MAX_CHUNK_SIZE: u32 = 100_000;
/// The strategies cut by characters: below a short paragraph a chunk carries no meaning of
/// its own, and a document cut finer makes chunks by the million.
pub const MIN_CHUNK_SIZE: u32 = 100;
pub const DEFAULT_OCR_DPI: u32 = 150;
pub const OCR_DPI_RANGE: std::ops::RangeInclusive<u32> = 72..=400;
pub const DEFAULT_MAX_PAGES: u32 = 1000;
/// The most pages any document is read to (the PDF reader's own ceiling).
pub const MAX_PAGES_CEILING: u32 = 2000;
/// The languages the deployment's OCR model reads, as Tesseract names them: PaddleOCR's
/// PP-OCRv6 recognizer reads simplified and traditional Chinese, Japanese and these
/// Latin-script languages with their diacritics, as measured page by page against
/// Tesseract's own pack for each (`infra/local/bench-ocr-languages`; Turkish's dotless `ı`
/// and Polish's `ą` `ę` read where the recognizer ranks them just behind a look-alike);
/// Russian, Ukrainian, Greek and Korean are read by Tesseract ([`TESSERACT_LANGUAGES`]). Any
/// language not listed (Arabic, Hindi) is refused when configured, not read as nothing.
pub const OCR_LANGUAGES: &[&str] = &[
    "eng", "chi_sim", "chi_tra", "jpn", "deu", "fra", "spa", "ita", "por", "nld", "pol", "ces", "swe", "tur", "rus",
    "ukr", "ell", "kor",
];

/// The languages Tesseract reads, with its own model for each, where PaddleOCR's recognizer
/// reads none of their letters: a page of a list holding one of them is read by Tesseract in
/// every language of the list, so such a list holds only these and English. The OCR crate's
/// own list is the same (a test holds them together).
pub const TESSERACT_LANGUAGES: &[&str] = &["rus", "ukr", "ell", "kor"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkingStrategy {
    Recursive,
    Markdown,
    Fixed,
}

/// What a chunk is embedded and keyword-indexed by besides its own text (its stored and
/// returned text is unchanged): nothing, its document's title, or the title and the path of
/// headings the chunk sits under. A passage that never names its subject ("it must be
/// replaced every spring") is still found by the subject its document or section names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ChunkContext {
    None,
    Title,
    #[default]
    TitleAndHeadings,
}

/// How a document's text is written when it is parsed: flat text (one line a paragraph or
/// table row, as the parsers always wrote), or markdown that keeps its structure — `#`
/// headings, lists, pipe tables — so the `markdown` strategy splits at sections and each
/// chunk knows its heading path. Markdown is the default; the bases that existed before
/// the setting were given `text` by the migration that added it, so their documents read
/// as they always did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Text,
    #[default]
    Markdown,
}

/// The file types whose parsers write markdown when asked (`output_format: markdown`);
/// every other format is written as text either way. The readers' own list
/// (`sluice_formats::kinds::MARKDOWN_EXTENSIONS`) is the same; a test holds them together.
pub const MARKDOWN_FILETYPES: &[&str] =
    &["csv", "doc", "docx", "epub", "html", "odp", "ods", "odt", "pdf", "pptx", "xls", "xlsm", "xlsx"];

impl OutputFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Markdown => "markdown",
        }
    }
}

/// Which parser reads a collection's documents: Sluice's own, or LlamaParse's cloud API
/// with the organization's key (`llamaparse_secret_id`), billed to it per page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Parser {
    #[default]
    Sluice,
    Llamaparse,
}

/// The file types LlamaParse reads among those Sluice ingests (its documented formats);
/// `GET /rag/supported-formats?parser=llamaparse` lists them.
pub const LLAMAPARSE_FILETYPES: &[&str] = &[
    "csv", "doc", "docx", "epub", "gif", "html", "jpeg", "jpg", "md", "odp", "ods", "odt", "pdf", "png", "pptx", "rtf",
    "tif", "tiff", "txt", "webp", "xls", "xlsm", "xlsx",
];

/// A complete, valid ingestion configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestionConfig {
    pub chunk_size: u32,
    pub chunk_overlap: u32,
    pub chunking_strategy: ChunkingStrategy,
    /// OCR the pages that need it (scans, TIFF pages, images); off, they hold no text.
    pub auto_ocr: bool,
    /// The languages the documents are in, as Tesseract names them (`eng`, `chi_sim`).
    pub ocr_languages: Vec<String>,
    /// The resolution a scanned PDF page is rendered at for OCR.
    pub ocr_dpi: u32,
    /// The most pages read from one document; the rest are named as not read.
    pub max_pages: u32,
    /// What each chunk is embedded and indexed by besides its text.
    pub chunk_context: ChunkContext,
    /// How parsed text is written: `text` or `markdown`.
    pub output_format: OutputFormat,
    /// Whether and how the images in documents are described (`crate::vision`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_description: Option<ImageDescription>,
    /// Which parser reads the documents.
    #[serde(default)]
    pub parser: Parser,
    /// The organization's LlamaParse key, from its vault (for `parser: llamaparse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llamaparse_secret_id: Option<uuid::Uuid>,
    /// How long reading one document may take, in seconds, within the deployment's own limit
    /// (`SLUICE_DOCUMENT_PARSE_SECS`); unset, the deployment's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_time_limit_seconds: Option<u32>,
}

/// The reference product's names for Sluice's settings, `(Sluice's, the reference's)`: each
/// is accepted and sets Sluice's own, answers show Sluice's name, and a refusal names the
/// field the caller sent.
pub const REFERENCE_NAMES: &[(&str, &str)] = &[
    ("ocr_languages", "ocr_language"),
    ("output_format", "liteparse_output_format"),
    ("ocr_dpi", "liteparse_dpi"),
    ("parse_time_limit_seconds", "parse_timeout_seconds"),
];

/// The shortest and longest per-collection parse time limit: below five seconds no page is
/// read, and a function runs for at most fifteen minutes, a margin kept for the rest.
pub const PARSE_TIME_LIMIT_RANGE: std::ops::RangeInclusive<u32> = 5..=840;

impl Default for IngestionConfig {
    fn default() -> Self {
        Self {
            chunk_size: DEFAULT_CHUNK_SIZE,
            chunk_overlap: DEFAULT_CHUNK_OVERLAP,
            chunking_strategy: ChunkingStrategy::Recursive,
            auto_ocr: true,
            ocr_languages: vec!["eng".to_owned()],
            ocr_dpi: DEFAULT_OCR_DPI,
            max_pages: DEFAULT_MAX_PAGES,
            chunk_context: ChunkContext::default(),
            output_format: OutputFormat::default(),
            image_description: None,
            parser: Parser::default(),
            llamaparse_secret_id: None,
            parse_time_limit_seconds: None,
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

    /// The refusal naming each setting as `changes` sent it: a setting sent under the
    /// reference product's name is refused under that name.
    pub fn as_sent(mut self, changes: &Value) -> Self {
        for (ours, theirs) in REFERENCE_NAMES {
            if changes.get(theirs).is_some() {
                let (ours, theirs) = (format!("ingestion_config.{ours}"), format!("ingestion_config.{theirs}"));
                for (field, _) in &mut self.fields {
                    if *field == ours {
                        field.clone_from(&theirs);
                    }
                }
            }
        }
        self
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
        if let Some((ours, theirs)) =
            REFERENCE_NAMES.iter().find(|(ours, theirs)| changes.contains_key(*ours) && changes.contains_key(*theirs))
        {
            return Err(IngestionConfigError::one(
                theirs,
                format!("is the reference product's name for {ours}; send one of the two"),
            ));
        }
        let mut merged = base;
        // The output a reference parser's name implies, unless the changes name one.
        let mut implied_output = None;
        for (key, value) in changes {
            match key.as_str() {
                "chunk_size" => merged.chunk_size = whole_number(key, value)?,
                "chunk_overlap" => merged.chunk_overlap = whole_number(key, value)?,
                "chunking_strategy" => {
                    merged.chunking_strategy = serde_json::from_value(value.clone())
                        .map_err(|_| IngestionConfigError::one(key, "must be recursive, markdown or fixed"))?;
                }
                "auto_ocr" => {
                    merged.auto_ocr =
                        value.as_bool().ok_or_else(|| IngestionConfigError::one(key, "must be true or false"))?
                }
                "ocr_languages" => merged.ocr_languages = languages(key, value)?,
                "ocr_language" => merged.ocr_languages = joined_languages(key, value)?,
                "ocr_dpi" | "liteparse_dpi" => merged.ocr_dpi = whole_number(key, value)?,
                "max_pages" => merged.max_pages = whole_number(key, value)?,
                "chunk_context" => {
                    merged.chunk_context = serde_json::from_value(value.clone())
                        .map_err(|_| IngestionConfigError::one(key, "must be none, title or title_and_headings"))?;
                }
                "output_format" | "liteparse_output_format" => {
                    merged.output_format = serde_json::from_value(value.clone())
                        .map_err(|_| IngestionConfigError::one(key, "must be markdown or text"))?;
                }
                "image_description" => {
                    merged.image_description = ImageDescription::merged(merged.image_description.as_ref(), value)
                        .map_err(|(field, why)| image_refusal(field, why))?;
                }
                "parser" => {
                    (merged.parser, implied_output) = parser(key, value)?;
                }
                "llamaparse_secret_id" => {
                    merged.llamaparse_secret_id = serde_json::from_value(value.clone()).map_err(|_| {
                        IngestionConfigError::one(key, "must be the id of a key in your vault, or null")
                    })?;
                }
                "parse_time_limit_seconds" | "parse_timeout_seconds" => {
                    merged.parse_time_limit_seconds = match value {
                        Value::Null => None,
                        value => Some(whole_number(key, value)?),
                    };
                }
                other => return Err(IngestionConfigError::one(other, "is not an ingestion setting")),
            }
        }
        if let Some(output) = implied_output
            && !changes.contains_key("output_format")
            && !changes.contains_key("liteparse_output_format")
        {
            merged.output_format = output;
        }
        merged.validate().map_err(|e| e.as_sent(&Value::Object(changes.clone())))?;
        Ok(merged)
    }

    /// Refuses a parse time limit beyond the deployment's own (`deployment`): no document
    /// is read for longer than it, whatever a collection asks.
    pub fn within(&self, deployment: std::time::Duration) -> Result<(), IngestionConfigError> {
        let most = deployment.as_secs();
        match self.parse_time_limit_seconds {
            Some(asked) if u64::from(asked) > most => Err(IngestionConfigError::one(
                "parse_time_limit_seconds",
                format!("must be at most {most} seconds: this deployment reads a document for at most that long"),
            )),
            _ => Ok(()),
        }
    }

    /// How long reading one document may take: the collection's limit within the
    /// deployment's.
    pub fn parse_time_limit(&self, deployment: std::time::Duration) -> std::time::Duration {
        self.parse_time_limit_seconds
            .map_or(deployment, |asked| deployment.min(std::time::Duration::from_secs(u64::from(asked))))
    }

    /// The defaults for a base embedding with `model`: `DEFAULT_CHUNK_SIZE`, or less when the
    /// model reads less whole (rounded down to 50 characters), and an overlap of at most a
    /// fifth of it.
    pub fn default_for(model: Option<&Model>) -> Self {
        let chunk_size = model.map_or(DEFAULT_CHUNK_SIZE, |m| DEFAULT_CHUNK_SIZE.min(m.max_chunk_chars() / 50 * 50));
        let chunk_size = chunk_size.max(MIN_CHUNK_SIZE);
        Self { chunk_size, chunk_overlap: DEFAULT_CHUNK_OVERLAP.min(chunk_size / 5), ..Self::default() }
    }

    /// A stored configuration merged onto `model`'s defaults (`None`, or what it leaves out,
    /// takes them).
    pub fn from_stored(stored: Option<&Value>, model: Option<&Model>) -> Result<Self, IngestionConfigError> {
        let defaults = Self::default_for(model);
        stored.map_or(Ok(defaults.clone()), |value| Self::merged(defaults, value))
    }

    /// Refuses chunks longer than `model` reads whole: the model would embed their start and
    /// never see the rest.
    pub fn fits(&self, model: &Model) -> Result<(), IngestionConfigError> {
        let limit = model.max_chunk_chars();
        if self.chunk_size > limit {
            return Err(IngestionConfigError::one(
                "chunk_size",
                format!(
                    "must be at most {limit} characters for {}: it reads {} tokens of a chunk (about {limit} \
                     characters) and would never see the rest of a longer one",
                    model.model, model.max_input_tokens
                ),
            ));
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), IngestionConfigError> {
        if !(MIN_CHUNK_SIZE..=MAX_CHUNK_SIZE).contains(&self.chunk_size) {
            return Err(IngestionConfigError::one(
                "chunk_size",
                format!("must be between {MIN_CHUNK_SIZE} and {MAX_CHUNK_SIZE} characters"),
            ));
        }
        if !OCR_DPI_RANGE.contains(&self.ocr_dpi) {
            return Err(IngestionConfigError::one(
                "ocr_dpi",
                format!("must be between {} and {}", OCR_DPI_RANGE.start(), OCR_DPI_RANGE.end()),
            ));
        }
        if self.max_pages == 0 || self.max_pages > MAX_PAGES_CEILING {
            return Err(IngestionConfigError::one("max_pages", format!("must be between 1 and {MAX_PAGES_CEILING}")));
        }
        if let Some(seconds) = self.parse_time_limit_seconds
            && !PARSE_TIME_LIMIT_RANGE.contains(&seconds)
        {
            return Err(IngestionConfigError::one(
                "parse_time_limit_seconds",
                format!(
                    "must be between {} and {} seconds",
                    PARSE_TIME_LIMIT_RANGE.start(),
                    PARSE_TIME_LIMIT_RANGE.end()
                ),
            ));
        }
        if self.parser == Parser::Llamaparse && self.llamaparse_secret_id.is_none() {
            return Err(IngestionConfigError::one(
                "llamaparse_secret_id",
                "llamaparse reads with your organization's key: name a LlamaParse key from your vault",
            ));
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

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Map::new()))
    }
}

/// The parser a name chooses, with the output it implies: the reference product's `pymupdf`
/// (flat text) and `liteparse` (markdown by default) are read by Sluice's own parsers.
fn parser(field: &str, value: &Value) -> Result<(Parser, Option<OutputFormat>), IngestionConfigError> {
    match value.as_str() {
        Some("sluice") => Ok((Parser::Sluice, None)),
        Some("llamaparse") => Ok((Parser::Llamaparse, None)),
        Some("pymupdf") => Ok((Parser::Sluice, Some(OutputFormat::Text))),
        Some("liteparse") => Ok((Parser::Sluice, Some(OutputFormat::Markdown))),
        _ => Err(IngestionConfigError::one(
            field,
            "must be sluice or llamaparse (or the reference's pymupdf or liteparse)",
        )),
    }
}

/// Languages joined by `+` (`eng+pol`), each one the OCR model reads: for a deployment's
/// setting, refused with the reason when one is not.
pub fn ocr_languages_joined(joined: &str) -> Result<Vec<String>, String> {
    joined_languages("languages", &Value::String(joined.to_owned()))
        .map_err(|e| e.fields.into_iter().map(|(_, why)| why).collect::<Vec<_>>().join("; "))
}

/// Languages as the reference product writes them: one string of Tesseract codes joined by
/// `+` (`eng+pol`).
fn joined_languages(field: &str, value: &Value) -> Result<Vec<String>, IngestionConfigError> {
    let joined = value.as_str().ok_or_else(|| {
        IngestionConfigError::one(field, "must be Tesseract language codes joined by +, such as \"eng+pol\"")
    })?;
    let codes: Vec<Value> = joined.split('+').map(|code| Value::String(code.trim().to_owned())).collect();
    languages(field, &Value::Array(codes))
}

/// A list of one or more languages the OCR model reads, without repeats.
fn languages(field: &str, value: &Value) -> Result<Vec<String>, IngestionConfigError> {
    let items = value.as_array().filter(|items| !items.is_empty()).ok_or_else(|| {
        IngestionConfigError::one(field, "must be a non-empty list of language codes, such as [\"eng\"]")
    })?;
    let mut languages = Vec::with_capacity(items.len());
    for item in items {
        let code =
            item.as_str().ok_or_else(|| IngestionConfigError::one(field, "must list language codes as strings"))?;
        if !OCR_LANGUAGES.contains(&code) {
            return Err(IngestionConfigError::one(
                field,
                format!("{code:?} has no OCR model in this deployment; it reads {}", OCR_LANGUAGES.join(", ")),
            ));
        }
        if !languages.iter().any(|known| known == code) {
            languages.push(code.to_owned());
        }
    }
    let by_tesseract = |code: &String| TESSERACT_LANGUAGES.contains(&code.as_str());
    if let Some(read_by_tesseract) = languages.iter().find(|code| by_tesseract(code))
        && let Some(other) = languages.iter().find(|code| *code != "eng" && !by_tesseract(code))
    {
        return Err(IngestionConfigError::one(
            field,
            format!(
                "{read_by_tesseract:?} is read by Tesseract, which has no model here for {other:?}: list it with eng or {} only",
                TESSERACT_LANGUAGES.join(", ")
            ),
        ));
    }
    Ok(languages)
}

/// A refusal of the image description setting, naming its field.
fn image_refusal(field: &str, why: String) -> IngestionConfigError {
    let field = if field == "image_description" { field.to_owned() } else { format!("image_description.{field}") };
    IngestionConfigError::one(&field, why)
}

fn whole_number(key: &str, value: &Value) -> Result<u32, IngestionConfigError> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| IngestionConfigError::one(key, "must be a whole number"))
}

/// One row of `GET /rag/embedding-models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogEntry {
    pub provider: String,
    pub model: String,
    pub dim: u32,
    pub keyless: bool,
    /// The most tokens of one input the model reads.
    pub max_input_tokens: u32,
    /// The longest `chunk_size` a base on this model accepts, and its default.
    pub max_chunk_size: u32,
    pub default_chunk_size: u32,
}

/// The catalog as `GET /rag/embedding-models` lists it, with the chunk sizes a base on each
/// model accepts: every model, or one provider's; `None` for a provider the catalog does not have.
pub fn catalog_entries(provider_id: Option<&str>) -> Option<Vec<CatalogEntry>> {
    let chosen: Vec<&Provider> = match provider_id {
        Some(id) => vec![crate::catalog::provider(id)?],
        None => crate::catalog::providers().iter().collect(),
    };
    Some(
        chosen
            .into_iter()
            .flat_map(|p| {
                p.models.iter().map(|m| CatalogEntry {
                    provider: p.id.clone(),
                    model: m.model.clone(),
                    dim: m.dim,
                    keyless: p.keyless,
                    max_input_tokens: m.max_input_tokens,
                    max_chunk_size: m.max_chunk_chars(),
                    default_chunk_size: IngestionConfig::default_for(Some(m)).chunk_size,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_base_s_defaults_follow_its_model_and_chunks_it_would_cut_are_refused() {
        let minilm = crate::catalog::model("local", "all-minilm-l6-v2").expect("in the catalog");
        let small = crate::catalog::model("openai", "text-embedding-3-small").expect("in the catalog");
        let local = IngestionConfig::default_for(Some(minilm));
        assert_eq!((local.chunk_size, local.chunk_overlap), (1000, 200));
        assert!(local.fits(minilm).is_ok());
        assert_eq!(IngestionConfig::default_for(Some(small)), IngestionConfig::default());
        assert_eq!(IngestionConfig::from_stored(None, Some(minilm)).expect("defaults"), local);
        let stored = json!({"chunk_size": 600});
        assert_eq!(IngestionConfig::from_stored(Some(&stored), Some(minilm)).expect("merged").chunk_overlap, 200);
        let refused = IngestionConfig::default().fits(minilm).expect_err("2500 is cut");
        assert_eq!(refused.fields[0].0, "ingestion_config.chunk_size");
        assert!(refused.fields[0].1.contains("1016") && refused.fields[0].1.contains("256 tokens"), "{refused:?}");
        let biggest = IngestionConfig { chunk_size: small.max_chunk_chars(), ..IngestionConfig::default() };
        assert!(biggest.fits(small).is_ok());
        assert!(IngestionConfig { chunk_size: small.max_chunk_chars() + 1, ..biggest }.fits(small).is_err());
    }

    #[test]
    fn an_override_is_judged_merged_with_what_it_overrides() {
        let base = IngestionConfig::default();
        let merged = IngestionConfig::merged(base.clone(), &json!({"chunk_size": 800})).expect("valid");
        assert_eq!((merged.chunk_size, merged.chunk_overlap), (800, 200));
        let refused = IngestionConfig::merged(base.clone(), &json!({"chunk_overlap": 4096})).expect_err("pair");
        let fields: Vec<&str> = refused.fields.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["ingestion_config", "ingestion_config.chunk_overlap", "ingestion_config.chunk_size"]);
        let refused = IngestionConfig::merged(base.clone(), &json!({"chunk_size": -1})).expect_err("own");
        assert_eq!(refused.fields[0].0, "ingestion_config.chunk_size");
        for below_the_floor in [1, 99] {
            let refused =
                IngestionConfig::merged(base.clone(), &json!({"chunk_size": below_the_floor, "chunk_overlap": 0}))
                    .expect_err("floor");
            assert_eq!(refused.fields[0].0, "ingestion_config.chunk_size", "{below_the_floor}");
        }
        assert!(IngestionConfig::merged(base.clone(), &json!({"chunk_size": 100, "chunk_overlap": 0})).is_ok());
        let refused =
            IngestionConfig::merged(base.clone(), &json!({"chunking_strategy": "semantic"})).expect_err("strategy");
        assert_eq!(refused.fields[0].0, "ingestion_config.chunking_strategy");
        assert!(IngestionConfig::merged(base.clone(), &json!({"parser": "x"})).is_err());
        assert!(IngestionConfig::merged(base.clone(), &json!([1])).is_err());
        let refused = IngestionConfig::merged(base.clone(), &json!({"output_format": "html"})).expect_err("format");
        assert_eq!(
            refused.fields[0],
            ("ingestion_config.output_format".to_owned(), "must be markdown or text".to_owned())
        );
        let markdown = IngestionConfig::merged(base, &json!({"output_format": "markdown"})).expect("valid");
        assert_eq!(markdown.output_format, OutputFormat::Markdown);
    }

    #[test]
    fn the_reference_products_names_set_sluices_settings_and_are_refused_as_sent() {
        let base = IngestionConfig::default();
        let merged = IngestionConfig::merged(
            base.clone(),
            &json!({"ocr_language": "eng+chi_sim", "liteparse_output_format": "text", "liteparse_dpi": 300,
                    "parse_timeout_seconds": 60}),
        )
        .expect("the reference's names");
        assert_eq!(merged.ocr_languages, ["eng", "chi_sim"]);
        assert_eq!((merged.output_format, merged.ocr_dpi), (OutputFormat::Text, 300));
        assert_eq!(merged.parse_time_limit_seconds, Some(60));
        let shown = merged.to_value();
        assert_eq!(shown["ocr_languages"], json!(["eng", "chi_sim"]), "answers show Sluice's names: {shown}");
        assert_eq!(shown["parse_time_limit_seconds"], 60);
        assert!(shown.get("ocr_language").is_none() && shown.get("liteparse_dpi").is_none());
        // The reference's parsers are read by Sluice's, each with the output it writes.
        for (parser, output) in [("pymupdf", OutputFormat::Text), ("liteparse", OutputFormat::Markdown)] {
            let text_base = IngestionConfig { output_format: OutputFormat::Text, ..base.clone() };
            let merged = IngestionConfig::merged(text_base, &json!({"parser": parser})).expect(parser);
            assert_eq!((merged.parser, merged.output_format), (Parser::Sluice, output), "{parser}");
        }
        let named =
            IngestionConfig::merged(base.clone(), &json!({"parser": "liteparse", "liteparse_output_format": "text"}))
                .expect("both");
        assert_eq!(named.output_format, OutputFormat::Text, "an output the request names wins over the implied one");
        for (changes, field, says) in [
            (json!({"ocr_language": "eng+xyz"}), "ingestion_config.ocr_language", "\"xyz\" has no OCR model"),
            (json!({"ocr_language": ["eng"]}), "ingestion_config.ocr_language", "joined by +"),
            (json!({"liteparse_dpi": 9000}), "ingestion_config.liteparse_dpi", "between 72 and 400"),
            (
                json!({"liteparse_output_format": "html"}),
                "ingestion_config.liteparse_output_format",
                "markdown or text",
            ),
            (json!({"parse_timeout_seconds": 1}), "ingestion_config.parse_timeout_seconds", "between 5 and 840"),
            (
                json!({"parse_time_limit_seconds": 900}),
                "ingestion_config.parse_time_limit_seconds",
                "between 5 and 840",
            ),
            (json!({"ocr_dpi": 200, "liteparse_dpi": 300}), "ingestion_config.liteparse_dpi", "send one of the two"),
        ] {
            let refused = IngestionConfig::merged(base.clone(), &changes).expect_err("refused");
            assert_eq!(refused.fields[0].0, field, "{changes}");
            assert!(refused.fields[0].1.contains(says), "{:?}", refused.fields);
        }
        // Within the deployment's own limit, and named as sent when beyond it.
        let deployment = std::time::Duration::from_secs(120);
        let asked = IngestionConfig::merged(base.clone(), &json!({"parse_timeout_seconds": 300})).expect("in range");
        let refused = asked
            .within(deployment)
            .expect_err("beyond the deployment's")
            .as_sent(&json!({"parse_timeout_seconds": 300}));
        assert_eq!(refused.fields[0].0, "ingestion_config.parse_timeout_seconds");
        assert!(refused.fields[0].1.contains("at most 120 seconds"), "{:?}", refused.fields);
        assert_eq!(merged.parse_time_limit(deployment), std::time::Duration::from_secs(60));
        assert_eq!(base.parse_time_limit(deployment), deployment);
    }

    #[test]
    fn ocr_settings_are_validated_and_a_language_without_a_model_is_refused() {
        let base = IngestionConfig::default();
        assert!(base.auto_ocr);
        assert_eq!((base.ocr_dpi, base.max_pages, base.ocr_languages.clone()), (150, 1000, vec!["eng".to_owned()]));
        let merged = IngestionConfig::merged(
            base.clone(),
            &json!({"auto_ocr": false, "ocr_languages": ["chi_sim", "eng", "eng"], "ocr_dpi": 300, "max_pages": 5}),
        )
        .expect("valid");
        assert_eq!((merged.auto_ocr, merged.ocr_dpi, merged.max_pages), (false, 300, 5));
        assert_eq!(merged.ocr_languages, ["chi_sim", "eng"]);
        let merged = IngestionConfig::merged(base.clone(), &json!({"ocr_languages": ["jpn", "chi_tra"]}));
        assert_eq!(merged.expect("Japanese and traditional Chinese are read").ocr_languages, ["jpn", "chi_tra"]);
        let merged = IngestionConfig::merged(base.clone(), &json!({"ocr_languages": ["eng", "rus", "ukr"]}));
        assert_eq!(merged.expect("Russian and Ukrainian, with English").ocr_languages, ["eng", "rus", "ukr"]);
        for (changes, field, says) in [
            (json!({"ocr_languages": ["ara"]}), "ingestion_config.ocr_languages", "\"ara\" has no OCR model"),
            (json!({"ocr_languages": ["jpn", "hin"]}), "ingestion_config.ocr_languages", "\"hin\" has no OCR model"),
            (json!({"ocr_languages": ["rus", "deu"]}), "ingestion_config.ocr_languages", "no model here for \"deu\""),
            (
                json!({"ocr_languages": ["jpn", "ell"]}),
                "ingestion_config.ocr_languages",
                "\"ell\" is read by Tesseract",
            ),
            (json!({"ocr_languages": []}), "ingestion_config.ocr_languages", "non-empty"),
            (json!({"ocr_dpi": 600}), "ingestion_config.ocr_dpi", "between 72 and 400"),
            (json!({"max_pages": 0}), "ingestion_config.max_pages", "between 1 and 2000"),
            (json!({"auto_ocr": "yes"}), "ingestion_config.auto_ocr", "true or false"),
            (json!({"parser": "acme"}), "ingestion_config.parser", "sluice or llamaparse"),
            (json!({"parser": "llamaparse"}), "ingestion_config.llamaparse_secret_id", "LlamaParse key"),
        ] {
            let refused = IngestionConfig::merged(base.clone(), &changes).expect_err("refused");
            assert_eq!(refused.fields[0].0, field);
            assert!(refused.fields[0].1.contains(says), "{:?}", refused.fields);
        }
    }
}
