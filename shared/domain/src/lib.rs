//! The vocabulary every Sluice crate shares: configuration, the caller's identity,
//! filename rules, the attachment reference, the bounded pool for blocking work, and the
//! knowledge-base rules: collection names, who may reach a base, the embedding catalog.

pub mod access;
pub mod attachment;
pub mod blocking;
pub mod caller;
pub mod catalog;
pub mod collection;
pub mod config;
pub mod content;
pub mod filename;
pub mod ingestion;
pub mod rerank;
pub mod sync;
pub mod vision;

pub use attachment::{AttachmentRef, ImageHints};
pub use blocking::BlockingPool;
pub use caller::Caller;
pub use config::{ArchiveSettings, Config, ConfigError};
pub use content::FileContent;
pub use filename::{CHAT_UPLOAD_PREFIX, MAX_FILENAME_CHARS, safe_filename, workspace_folder};
