//! Deployment configuration, read once from the environment at cold start.

use std::env;

/// What a function needs to know about its deployment. Every field has the default the
/// seed documents unless it names a resource (bucket, key), which must be given.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bucket holding originals and parsed texts.
    pub bucket: String,
    /// The KMS key (id or ARN) every object is encrypted with.
    pub kms_key_id: String,
    /// `CHAT_MAX_UPLOAD_SIZE_MB`: the ceiling for a chat attachment.
    pub chat_max_upload_bytes: u64,
    /// `MAX_UPLOAD_SIZE_MB`: the ceiling for a knowledge-base document.
    pub max_upload_bytes: u64,
    /// `SLUICE_INLINE_UPLOAD_MAX_MB`: the largest file a direct (inline) upload carries; a
    /// larger one within its ceiling is told to take the presigned path. Unset, only the
    /// ceilings apply. In AWS it is at most 4: Lambda takes 6 MB of request, and API Gateway
    /// base64-encodes a binary body.
    pub inline_upload_max_bytes: Option<u64>,
    /// `CHAT_PARSED_TEXT_MAX_CHARS`: the budget the text readers spend.
    pub parsed_text_max_chars: usize,
    /// `FILE_IO_MAX_WORKERS`: how many parses and byte copies may run at once.
    pub file_io_max_workers: usize,
    /// How long a presigned download link lives.
    pub download_url_ttl_secs: u64,
    /// `CHAT_TIFF_MAX_INLINE_PAGES`: how many TIFF pages are served as PNG.
    pub chat_tiff_max_inline_pages: u32,
    /// `SLUICE_PARSE_MAX_MEMORY_MB`: the address space one parse worker may use, within its
    /// share of the function's memory ([`worker_memory_limit_mb`]).
    pub parse_max_memory_bytes: u64,
    /// `SLUICE_UPLOAD_INTENT_TTL_SECS`: how long a presigned upload may take to land.
    pub upload_intent_ttl_secs: u64,
    /// `SLUICE_PARSE_QUEUE_URL`: where document jobs go to be parsed.
    pub parse_queue_url: Option<String>,
    /// `SLUICE_INGEST_QUEUE_URL`: where parsed documents go to be chunked and embedded.
    pub ingest_queue_url: Option<String>,
    /// `SLUICE_TEARDOWN_QUEUE_URL`: where deletes send the work that follows their commit.
    pub teardown_queue_url: Option<String>,
    /// `SLUICE_DOCUMENT_TEXT_MAX_CHARS`: the budget a knowledge-base document's text spends.
    pub document_text_max_chars: usize,
    /// `SLUICE_DOCUMENT_PARSE_SECS`: how long reading one knowledge-base document may take
    /// (OCR spends it page by page; pages it cannot reach are named as not read).
    pub document_parse_time_limit: std::time::Duration,
    /// `SLUICE_PARSER_POLL_SECS`: how long one delivery polls a cloud parser's job before it
    /// hands the message back to be polled again (default: the parse time above).
    pub parser_poll_time_limit: std::time::Duration,
    /// `CHAT_OCR_MAX_PAGES`: the most scanned pages OCRed from a chat upload (0: none).
    pub chat_ocr_max_pages: u32,
    /// `CHAT_OCR_LANGUAGES`: the languages a chat upload's scans are read in, Tesseract codes
    /// joined by `+` as the reference product writes them (default `eng`).
    pub chat_ocr_languages: Vec<String>,
    /// `SLUICE_INGEST_MAX_RECEIVES`: the delivery on which a failure that might pass later
    /// is recorded instead of retried (the ingest queue's `maxReceiveCount`).
    pub ingest_max_receives: u32,
    /// `SLUICE_MAX_CHUNKS_PER_DOCUMENT`: the most chunks one document may make; more is
    /// recorded as the document's failure before anything is embedded.
    pub max_chunks_per_document: usize,
    /// `SLUICE_DOCUMENT_EMBED_SECS`: how long embedding one document may take, retries and
    /// slow answers included, before it is recorded as failed and its slot freed.
    pub document_embed_time_limit: std::time::Duration,
    /// The archive limits (`WORKSPACE_ARCHIVE_*`), for archives and office containers alike.
    pub archive: ArchiveSettings,
    /// How a hybrid search fuses its legs: `SLUICE_SEARCH_VECTOR_DEPTH` and
    /// `SLUICE_SEARCH_KEYWORD_DEPTH`, how many chunks each leg ranks (default 50, at least
    /// the `top_k` asked), and the fusion (`SLUICE_SEARCH_FUSION`, see `Fusion`).
    pub search: SearchSettings,
    /// `SLUICE_DEPLOYMENT_ACCOUNT_ID`: the AWS account this deployment runs in. A sync
    /// source may not name a role in it: the functions' own account is never a tenant's.
    pub deployment_account_id: Option<String>,
}

/// How a hybrid search fuses its keyword and vector legs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchSettings {
    pub vector_depth: i64,
    pub keyword_depth: i64,
    pub fusion: Fusion,
    /// How the keyword leg reads (`KeywordReading`).
    pub keyword: KeywordReading,
}

/// How the keyword leg reads. `Default` is exact BM25: no feedback, no time budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeywordReading {
    /// Pseudo-relevance feedback (`SLUICE_SEARCH_KEYWORD_FEEDBACK`, `on` by default or
    /// `off`): the words that weigh most in its first best chunks are added to the query at
    /// a lower weight, and the leg ranks again.
    pub feedback: Option<KeywordFeedback>,
    /// How long it reads on once its rarest words are read (`SLUICE_SEARCH_KEYWORD_BUDGET_MS`,
    /// default 60; 0 for no limit): past it, the best of the chunks holding the words read so
    /// far is the answer.
    pub time_budget: Option<std::time::Duration>,
}

/// Default `SLUICE_SEARCH_KEYWORD_BUDGET_MS`.
pub const DEFAULT_KEYWORD_BUDGET_MS: u64 = 60;

/// RM3 pseudo-relevance feedback: the `chunks` best chunks of a first keyword ranking, each
/// weighed by its score, give a distribution of their words (a word's share of its chunk);
/// its `terms` heaviest words join the query, which keeps `original_weight_percent` of the
/// weight. The defaults are the best of the relevance benchmark's study on both its halves
/// (BENCHMARKS.md, "Search relevance").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeywordFeedback {
    pub chunks: usize,
    pub terms: usize,
    pub original_weight_percent: u32,
}

impl Default for KeywordFeedback {
    fn default() -> Self {
        Self { chunks: 5, terms: 20, original_weight_percent: 50 }
    }
}

/// The fusion of a hybrid search's two rankings (`SLUICE_SEARCH_FUSION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fusion {
    /// Each leg's scores scaled to 0–1 over its own candidates (min-max), then weighed:
    /// `vector_weight_percent` for the vector leg, the rest for the keyword leg
    /// (`SLUICE_SEARCH_VECTOR_WEIGHT`, 0–100).
    Convex { vector_weight_percent: u32 },
    /// Reciprocal rank fusion: `1 / (k + rank)` summed over the legs (`SLUICE_SEARCH_RRF_K`).
    Rrf { k: u32 },
}

/// The convex combination's vector weight when it is chosen: the best of the relevance
/// benchmark's tuning queries with titled documents (BENCHMARKS.md, "Search relevance").
pub const DEFAULT_VECTOR_WEIGHT_PERCENT: u32 = 60;
/// The reciprocal rank fusion constant: the literature's 60, which no other k beat on the
/// benchmark's tuning queries both with titled documents and with id-named ones.
pub const DEFAULT_RRF_K: u32 = 60;

impl Default for SearchSettings {
    /// Each leg ranks 50 chunks, fused by reciprocal rank fusion at k 60: on the tuning
    /// queries the convex combination gained with titled documents and lost with id-named
    /// ones, so it is an operator's choice, measured on their own collection.
    fn default() -> Self {
        Self {
            vector_depth: 50,
            keyword_depth: 50,
            fusion: Fusion::Rrf { k: DEFAULT_RRF_K },
            keyword: KeywordReading {
                feedback: Some(KeywordFeedback::default()),
                time_budget: Some(std::time::Duration::from_millis(DEFAULT_KEYWORD_BUDGET_MS)),
            },
        }
    }
}

/// The archive limits an operator sets; the defaults are the reference product's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveSettings {
    /// `WORKSPACE_ARCHIVE_MAX_ENTRIES`: files and folders (5,000).
    pub max_entries: usize,
    /// `WORKSPACE_ARCHIVE_MAX_BYTES`: bytes unpacked in all (200 MiB).
    pub max_total_bytes: u64,
    /// `WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES`: bytes one member unpacks to (50 MiB).
    pub max_member_bytes: u64,
    /// `WORKSPACE_ARCHIVE_MAX_RATIO`: unpacked size over packed size (100).
    pub max_ratio: u64,
}

impl Default for ArchiveSettings {
    fn default() -> Self {
        Self { max_entries: 5000, max_total_bytes: 200 << 20, max_member_bytes: 50 << 20, max_ratio: 100 }
    }
}

/// The multipart framing allowed on top of the larger upload ceiling.
pub const MULTIPART_ALLOWANCE_BYTES: u64 = 1024 * 1024;

/// Default `CHAT_PARSED_TEXT_MAX_CHARS`: 200,000 characters is about 50,000 tokens, the
/// most a no-workspace agent can sensibly be pasted; the rest is marked as left out.
pub const DEFAULT_PARSED_TEXT_MAX_CHARS: usize = 200_000;

/// Default `SLUICE_PARSE_MAX_MEMORY_MB` (address space, not resident memory): PDFium reads
/// 2,000 full pages in about 40 MiB, while OCR maps ONNX Runtime and its models and reads
/// a dense 300-dpi page within 640 MiB of address space (the detector reads a page in
/// bands, the recognizer a bounded width of lines at once). A Lambda instance serves one
/// request at a time.
pub const DEFAULT_PARSE_MAX_MEMORY_MB: u64 = 1024;

/// What a Lambda instance's own process keeps when its memory is shared out among parse
/// workers: the runtime, the pools, and the bytes of the file being read (up to 50 MB).
pub const FUNCTION_RESERVE_MB: u64 = 256;

/// The address space one parse worker may use: `configured_mb`, but never more than an
/// equal share of the function's memory (`AWS_LAMBDA_FUNCTION_MEMORY_SIZE`, which Lambda
/// sets) after the function's own reserve. So `workers` workers at their limit cannot
/// together exhaust the sandbox: a hostile file is refused by its worker's limit, never the
/// instance killed with every request it holds. Off Lambda (no memory size) the configured
/// ceiling stands.
pub fn worker_memory_limit_mb(configured_mb: u64, function_mb: Option<u64>, workers: usize) -> u64 {
    let share = function_mb.map(|memory| memory.saturating_sub(FUNCTION_RESERVE_MB) / workers.max(1) as u64);
    share.map_or(configured_mb, |share| configured_mb.min(share)).max(16)
}

/// Default `SLUICE_UPLOAD_INTENT_TTL_SECS`: 15 minutes moves 50 MB over a slow 0.5 Mbit/s
/// link, and an abandoned intent is reaped soon after.
pub const DEFAULT_UPLOAD_INTENT_TTL_SECS: u64 = 900;

/// Default `SLUICE_DOCUMENT_TEXT_MAX_CHARS`: five million characters is a 2,000-page book;
/// a document is read up to it and the rest is left out with a note.
pub const DEFAULT_DOCUMENT_TEXT_MAX_CHARS: usize = 5_000_000;

/// Default `SLUICE_DOCUMENT_PARSE_SECS`: four minutes, so a parse batch (two at a time) fits
/// the parse function's fifteen; OCR reads about a page a second a core.
pub const DEFAULT_DOCUMENT_PARSE_SECS: u64 = 240;

/// Default `SLUICE_MAX_CHUNKS_PER_DOCUMENT`: the longest document (five million characters)
/// cut at 250 characters a chunk; a finer cut of a book is a mistake worth naming.
pub const DEFAULT_MAX_CHUNKS_PER_DOCUMENT: u64 = 20_000;

/// Default `SLUICE_DOCUMENT_EMBED_SECS`: ten minutes, inside the ingest function's fifteen
/// with room to write.
pub const DEFAULT_DOCUMENT_EMBED_SECS: u64 = 600;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration {0} is missing")]
    Missing(&'static str),
    #[error("configuration {name} is not a valid number: {value:?}")]
    NotANumber { name: &'static str, value: String },
    #[error("configuration {name} is out of range: {why}")]
    OutOfRange { name: &'static str, why: String },
}

/// The archive limits from their variables, each judged: a nonsense value stops the
/// function at start with its name, rather than passing every archive or none.
fn archive_settings(
    number: &impl Fn(&'static str, u64) -> Result<u64, ConfigError>,
) -> Result<ArchiveSettings, ConfigError> {
    let defaults = ArchiveSettings::default();
    let within = |name: &'static str, default: u64, range: std::ops::RangeInclusive<u64>| {
        let value = number(name, default)?;
        if range.contains(&value) {
            Ok(value)
        } else {
            Err(ConfigError::OutOfRange {
                name,
                why: format!("{value} is not between {} and {}", range.start(), range.end()),
            })
        }
    };
    const GIB: u64 = 1 << 30;
    let settings = ArchiveSettings {
        max_entries: within("WORKSPACE_ARCHIVE_MAX_ENTRIES", defaults.max_entries as u64, 1..=1_000_000)? as usize,
        max_total_bytes: within("WORKSPACE_ARCHIVE_MAX_BYTES", defaults.max_total_bytes, 1024..=16 * GIB)?,
        max_member_bytes: within("WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES", defaults.max_member_bytes, 1024..=4 * GIB)?,
        max_ratio: within("WORKSPACE_ARCHIVE_MAX_RATIO", defaults.max_ratio, 1..=100_000)?,
    };
    if settings.max_member_bytes > settings.max_total_bytes {
        return Err(ConfigError::OutOfRange {
            name: "WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES",
            why: format!(
                "{} is more than WORKSPACE_ARCHIVE_MAX_BYTES ({})",
                settings.max_member_bytes, settings.max_total_bytes
            ),
        });
    }
    Ok(settings)
}

impl Config {
    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| env::var(name).ok())
    }

    /// Reads the configuration through `lookup`, so tests need not touch the environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let required = |name: &'static str| lookup(name).filter(|v| !v.is_empty()).ok_or(ConfigError::Missing(name));
        let number = |name: &'static str, default: u64| -> Result<u64, ConfigError> {
            match lookup(name).filter(|v| !v.is_empty()) {
                None => Ok(default),
                Some(value) => value.trim().parse().map_err(|_| ConfigError::NotANumber { name, value }),
            }
        };
        const MIB: u64 = 1024 * 1024;
        Ok(Self {
            bucket: required("SLUICE_BUCKET")?,
            kms_key_id: required("SLUICE_KMS_KEY_ID")?,
            chat_max_upload_bytes: number("CHAT_MAX_UPLOAD_SIZE_MB", 10)? * MIB,
            max_upload_bytes: number("MAX_UPLOAD_SIZE_MB", 50)? * MIB,
            inline_upload_max_bytes: match lookup("SLUICE_INLINE_UPLOAD_MAX_MB").filter(|v| !v.is_empty()) {
                None => None,
                Some(_) => Some(number("SLUICE_INLINE_UPLOAD_MAX_MB", 0)?.max(1) * MIB),
            },
            parsed_text_max_chars: number("CHAT_PARSED_TEXT_MAX_CHARS", DEFAULT_PARSED_TEXT_MAX_CHARS as u64)? as usize,
            file_io_max_workers: number("FILE_IO_MAX_WORKERS", 4)?.max(1) as usize,
            download_url_ttl_secs: number("SLUICE_DOWNLOAD_URL_TTL_SECS", 300)?,
            chat_tiff_max_inline_pages: number("CHAT_TIFF_MAX_INLINE_PAGES", 5)?.min(1000) as u32,
            parse_max_memory_bytes: worker_memory_limit_mb(
                number("SLUICE_PARSE_MAX_MEMORY_MB", DEFAULT_PARSE_MAX_MEMORY_MB)?.max(16),
                lookup("AWS_LAMBDA_FUNCTION_MEMORY_SIZE").and_then(|v| v.trim().parse().ok()),
                number("FILE_IO_MAX_WORKERS", 4)?.max(1) as usize,
            ) * MIB,
            upload_intent_ttl_secs: number("SLUICE_UPLOAD_INTENT_TTL_SECS", DEFAULT_UPLOAD_INTENT_TTL_SECS)?
                .clamp(60, 7 * 24 * 3600),
            parse_queue_url: lookup("SLUICE_PARSE_QUEUE_URL").filter(|v| !v.is_empty()),
            ingest_queue_url: lookup("SLUICE_INGEST_QUEUE_URL").filter(|v| !v.is_empty()),
            teardown_queue_url: lookup("SLUICE_TEARDOWN_QUEUE_URL").filter(|v| !v.is_empty()),
            document_text_max_chars: number("SLUICE_DOCUMENT_TEXT_MAX_CHARS", DEFAULT_DOCUMENT_TEXT_MAX_CHARS as u64)?
                .max(1000) as usize,
            ingest_max_receives: number("SLUICE_INGEST_MAX_RECEIVES", 5)?.clamp(1, 1000) as u32,
            document_parse_time_limit: std::time::Duration::from_secs(
                number("SLUICE_DOCUMENT_PARSE_SECS", DEFAULT_DOCUMENT_PARSE_SECS)?.clamp(5, 840),
            ),
            parser_poll_time_limit: std::time::Duration::from_secs(
                number("SLUICE_PARSER_POLL_SECS", DEFAULT_DOCUMENT_PARSE_SECS)?.clamp(1, 840),
            ),
            chat_ocr_max_pages: number("CHAT_OCR_MAX_PAGES", 3)?.min(1000) as u32,
            chat_ocr_languages: match lookup("CHAT_OCR_LANGUAGES").filter(|v| !v.trim().is_empty()) {
                None => vec!["eng".to_owned()],
                Some(joined) => crate::ingestion::ocr_languages_joined(&joined)
                    .map_err(|why| ConfigError::OutOfRange { name: "CHAT_OCR_LANGUAGES", why })?,
            },
            max_chunks_per_document: number("SLUICE_MAX_CHUNKS_PER_DOCUMENT", DEFAULT_MAX_CHUNKS_PER_DOCUMENT)?
                .clamp(1, 1_000_000) as usize,
            document_embed_time_limit: std::time::Duration::from_secs(
                number("SLUICE_DOCUMENT_EMBED_SECS", DEFAULT_DOCUMENT_EMBED_SECS)?.clamp(1, 840),
            ),
            archive: archive_settings(&number)?,
            search: {
                let defaults = SearchSettings::default();
                SearchSettings {
                    vector_depth: number("SLUICE_SEARCH_VECTOR_DEPTH", defaults.vector_depth as u64)?.clamp(1, 1000)
                        as i64,
                    keyword_depth: number("SLUICE_SEARCH_KEYWORD_DEPTH", defaults.keyword_depth as u64)?.clamp(1, 1000)
                        as i64,
                    fusion: match lookup("SLUICE_SEARCH_FUSION").as_deref().map(str::trim) {
                        None | Some("" | "rrf") => Fusion::Rrf {
                            k: number("SLUICE_SEARCH_RRF_K", u64::from(DEFAULT_RRF_K))?.clamp(1, 10_000) as u32,
                        },
                        Some("convex") => Fusion::Convex {
                            vector_weight_percent: number(
                                "SLUICE_SEARCH_VECTOR_WEIGHT",
                                u64::from(DEFAULT_VECTOR_WEIGHT_PERCENT),
                            )?
                            .min(100) as u32,
                        },
                        Some(_) => {
                            return Err(ConfigError::OutOfRange {
                                name: "SLUICE_SEARCH_FUSION",
                                why: "it is rrf (the default) or convex".to_owned(),
                            });
                        }
                    },
                    keyword: KeywordReading {
                        feedback: match lookup("SLUICE_SEARCH_KEYWORD_FEEDBACK").as_deref().map(str::trim) {
                            None | Some("" | "on") => defaults.keyword.feedback,
                            Some("off") => None,
                            Some(_) => {
                                return Err(ConfigError::OutOfRange {
                                    name: "SLUICE_SEARCH_KEYWORD_FEEDBACK",
                                    why: "it is on (the default) or off".to_owned(),
                                });
                            }
                        },
                        time_budget: match number("SLUICE_SEARCH_KEYWORD_BUDGET_MS", DEFAULT_KEYWORD_BUDGET_MS)? {
                            0 => None,
                            ms => Some(std::time::Duration::from_millis(ms.min(30_000))),
                        },
                    },
                }
            },
            deployment_account_id: lookup("SLUICE_DEPLOYMENT_ACCOUNT_ID").filter(|v| !v.is_empty()),
        })
    }

    /// The job queues this deployment sends to, by outbox topic.
    pub fn job_routes(&self) -> Vec<(String, String)> {
        let mut routes = Vec::new();
        if let Some(url) = &self.parse_queue_url {
            routes.push(("parse-document".to_owned(), url.clone()));
            routes.push(("sync-run".to_owned(), url.clone()));
            routes.push(("sync-event".to_owned(), url.clone()));
            routes.push(("landed".to_owned(), url.clone()));
        }
        if let Some(url) = &self.ingest_queue_url {
            routes.push(("ingest".to_owned(), url.clone()));
        }
        if let Some(url) = &self.teardown_queue_url {
            routes.push(("teardown".to_owned(), url.clone()));
        }
        routes
    }

    /// The most a direct upload may carry under `ceiling`, and whether the inline cap (not
    /// the ceiling) is what sets it.
    pub fn inline_limit(&self, ceiling: u64) -> (u64, bool) {
        match self.inline_upload_max_bytes {
            Some(inline) if inline < ceiling => (inline, true),
            _ => (ceiling, false),
        }
    }

    /// The cap on a whole request body: the larger ceiling plus the multipart framing.
    pub fn request_body_cap_bytes(&self) -> u64 {
        self.chat_max_upload_bytes.max(self.max_upload_bytes) + MULTIPART_ALLOWANCE_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn parse_workers_share_the_function_s_memory() {
        // The template's functions: upload 1,536 MB and parse 2,048 MB, two workers each.
        assert_eq!(worker_memory_limit_mb(1024, Some(1536), 2), 640);
        assert_eq!(worker_memory_limit_mb(1024, Some(2048), 2), 896);
        // What the review found: 1 GiB each on a 1 GiB function could never hold.
        assert!(2 * worker_memory_limit_mb(1024, Some(1024), 2) + FUNCTION_RESERVE_MB <= 1024);
        // A lower ceiling stands; off Lambda the ceiling is all there is.
        assert_eq!(worker_memory_limit_mb(512, Some(4096), 2), 512);
        assert_eq!(worker_memory_limit_mb(1024, None, 4), 1024);
        let config = Config::from_lookup(lookup(&[
            ("SLUICE_BUCKET", "b"),
            ("SLUICE_KMS_KEY_ID", "k"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1536"),
            ("FILE_IO_MAX_WORKERS", "2"),
        ]))
        .expect("config");
        assert_eq!(config.parse_max_memory_bytes, 640 * 1024 * 1024);
    }

    #[test]
    fn chat_ocr_reads_english_unless_the_deployment_names_languages_it_has_models_for() {
        let base = [("SLUICE_BUCKET", "b"), ("SLUICE_KMS_KEY_ID", "k")];
        assert_eq!(Config::from_lookup(lookup(&base)).expect("config").chat_ocr_languages, ["eng"]);
        let named = Config::from_lookup(lookup(&[base[0], base[1], ("CHAT_OCR_LANGUAGES", "eng+chi_sim")]));
        assert_eq!(named.expect("config").chat_ocr_languages, ["eng", "chi_sim"]);
        let refused = Config::from_lookup(lookup(&[base[0], base[1], ("CHAT_OCR_LANGUAGES", "eng+ara")]));
        let refused = refused.expect_err("no model reads Arabic").to_string();
        assert!(refused.contains("CHAT_OCR_LANGUAGES") && refused.contains("\"ara\" has no OCR model"), "{refused}");
    }

    #[test]
    fn defaults_follow_the_seed() {
        let config =
            Config::from_lookup(lookup(&[("SLUICE_BUCKET", "b"), ("SLUICE_KMS_KEY_ID", "k")])).expect("config");
        assert_eq!(config.chat_max_upload_bytes, 10 * 1024 * 1024);
        assert_eq!(config.max_upload_bytes, 50 * 1024 * 1024);
        assert_eq!(config.request_body_cap_bytes(), 51 * 1024 * 1024);
    }

    #[test]
    fn the_fusion_is_rrf_unless_the_convex_combination_is_named() {
        let fusion = |pairs: &[(&str, &str)]| {
            let mut all = vec![("SLUICE_BUCKET", "b"), ("SLUICE_KMS_KEY_ID", "k")];
            all.extend_from_slice(pairs);
            Config::from_lookup(lookup(&all)).map(|c| c.search.fusion)
        };
        assert_eq!(fusion(&[]).expect("default"), Fusion::Rrf { k: 60 });
        assert_eq!(fusion(&[("SLUICE_SEARCH_RRF_K", "30")]).expect("k"), Fusion::Rrf { k: 30 });
        assert_eq!(
            fusion(&[("SLUICE_SEARCH_FUSION", "convex"), ("SLUICE_SEARCH_VECTOR_WEIGHT", "55")]).expect("convex"),
            Fusion::Convex { vector_weight_percent: 55 }
        );
        assert_eq!(
            fusion(&[("SLUICE_SEARCH_FUSION", "convex")]).expect("convex"),
            Fusion::Convex { vector_weight_percent: DEFAULT_VECTOR_WEIGHT_PERCENT }
        );
        assert!(fusion(&[("SLUICE_SEARCH_FUSION", "borda")]).is_err());
    }

    #[test]
    fn keyword_feedback_is_on_unless_turned_off_and_the_budget_is_read_in_milliseconds() {
        let feedback = |value: Option<&str>| {
            let mut all = vec![("SLUICE_BUCKET", "b"), ("SLUICE_KMS_KEY_ID", "k")];
            all.extend(value.map(|v| ("SLUICE_SEARCH_KEYWORD_FEEDBACK", v)));
            Config::from_lookup(lookup(&all)).map(|c| c.search.keyword.feedback)
        };
        assert_eq!(feedback(None).expect("default"), Some(KeywordFeedback::default()));
        assert_eq!(feedback(Some("on")).expect("on"), Some(KeywordFeedback::default()));
        assert_eq!(feedback(Some("off")).expect("off"), None);
        assert!(feedback(Some("yes")).is_err());
        let budget = |value: &str| {
            let all = [("SLUICE_BUCKET", "b"), ("SLUICE_KMS_KEY_ID", "k"), ("SLUICE_SEARCH_KEYWORD_BUDGET_MS", value)];
            Config::from_lookup(lookup(&all)).map(|c| c.search.keyword.time_budget)
        };
        assert_eq!(budget("").expect("default"), Some(std::time::Duration::from_millis(60)));
        assert_eq!(budget("250").expect("set"), Some(std::time::Duration::from_millis(250)));
        assert_eq!(budget("0").expect("none"), None);
    }

    #[test]
    fn the_archive_limits_are_read_from_their_names_and_nonsense_is_refused() {
        let base = [("SLUICE_BUCKET", "b"), ("SLUICE_KMS_KEY_ID", "k")];
        let config = Config::from_lookup(lookup(&base)).expect("config");
        assert_eq!(config.archive, ArchiveSettings::default());
        let set = |pairs: &[(&str, &str)]| {
            let all: Vec<(&str, &str)> = base.iter().chain(pairs.iter()).copied().collect();
            Config::from_lookup(lookup(&all))
        };
        let config = set(&[("WORKSPACE_ARCHIVE_MAX_ENTRIES", "10"), ("WORKSPACE_ARCHIVE_MAX_RATIO", "7")]).expect("ok");
        assert_eq!((config.archive.max_entries, config.archive.max_ratio), (10, 7));
        for (name, value) in [
            ("WORKSPACE_ARCHIVE_MAX_ENTRIES", "0"),
            ("WORKSPACE_ARCHIVE_MAX_ENTRIES", "lots"),
            ("WORKSPACE_ARCHIVE_MAX_BYTES", "-5"),
            ("WORKSPACE_ARCHIVE_MAX_RATIO", "0"),
            ("WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES", "999999999999"),
        ] {
            let refused = set(&[(name, value)]).expect_err(value);
            assert!(refused.to_string().contains(name), "{name}={value}: {refused}");
        }
        let refused = set(&[("WORKSPACE_ARCHIVE_MAX_BYTES", "2048"), ("WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES", "4096")])
            .expect_err("member over total");
        assert!(refused.to_string().contains("WORKSPACE_ARCHIVE_MAX_MEMBER_BYTES"), "{refused}");
    }

    #[test]
    fn a_missing_bucket_or_a_bad_number_is_named() {
        let err = Config::from_lookup(lookup(&[("SLUICE_KMS_KEY_ID", "k")])).expect_err("missing");
        assert!(err.to_string().contains("SLUICE_BUCKET"));
        let err = Config::from_lookup(lookup(&[
            ("SLUICE_BUCKET", "b"),
            ("SLUICE_KMS_KEY_ID", "k"),
            ("CHAT_MAX_UPLOAD_SIZE_MB", "ten"),
        ]))
        .expect_err("not a number");
        assert!(err.to_string().contains("CHAT_MAX_UPLOAD_SIZE_MB"));
    }
}
