//! Ingested documents: the tracking row written with its outbox row before any work, what
//! parsing records, the chunks written in one transaction that holds the base's row, and
//! the outbox itself.

mod chunks;
mod intents;
mod outbox;
mod parsing;
mod tracking;

pub use chunks::{ChunkRow, Staging, WriteOutcome};
pub use outbox::OutboxMessage;
pub use parsing::ParsedText;
pub use tracking::{Accepted, DOCUMENT_UPLOAD_PREFIX, Document, PARSE_DOCUMENT_TOPIC, SyncOrigin};
