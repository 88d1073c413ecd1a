//! Sync sources, their runs, and the claims that decide what a run may remove.
//!
//! A run is a `sync_logs` row written before any work. Its listing is recorded a page at a
//! time (`record_sync_page`), each page one transaction that looks up every listed object's
//! document in one query, renews the claims of what is unchanged, and writes a tracking
//! row, a claim and a parse job for each object to fetch. When the listing completes
//! (`finish_listing`), the claims the run did not renew are dropped — unless that would
//! remove more than the source's `max_removal_percent`, when nothing is removed until the
//! run is confirmed — and a document no source claims any more is removed. The documents'
//! own outcomes (`write_chunks`, `fail_document`, `skip_unchanged_download`) count into the
//! run, and the last one finishes it.

mod claims;
mod downloads;
mod listing;
mod runs;
mod sources;

pub(crate) use claims::retire_replaced;
pub use listing::{ListedFile, ListingEnd, PageOutcome, SOURCE_EVENT_TOPIC, SourceEventJob};
pub use runs::{MAX_LOGGED_FAILURES, RunScope, RunStart, SYNC_RUN_TOPIC, SyncRun, SyncRunJob};
pub use sources::{Audit, SyncSource};
