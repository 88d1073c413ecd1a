//! S3 sync sources, the parse function's half: a run's listing, a page at a time; the
//! download of a synced document with its source's own credential; and the events that
//! report one object created or removed under an event-driven source's prefix.
//!
//! A listing page is 1,000 keys: it is decided and recorded in one transaction and then
//! dropped, so a prefix of any size is never held in memory. One job lists up to
//! `PAGES_PER_JOB` pages and sends the next job for the rest; the step each job carries
//! makes a repeated job a no-op. A listing that fails (the bucket refuses the credential,
//! or is gone) ends the run as failed and removes nothing.

use crate::{ParseError, State};
use sluice_domain::sync::{ListedKey, ListedObject, listed_key};
use sluice_queue::s3::{Change, ObjectChange};
use sluice_sources::{SourceClient, SourceError};
use sluice_store::{
    Document, ListedFile, PageOutcome, SOURCE_EVENT_TOPIC, SYNC_RUN_TOPIC, SourceEventJob, SyncRunJob, SyncSource,
};

/// Keys asked for per ListObjectsV2 request (S3's most).
pub const PAGE_KEYS: i32 = 1000;

/// Pages one job lists before handing the rest to the next job (10,000 keys, well inside
/// one invocation's time).
pub const PAGES_PER_JOB: usize = 10;

/// Where a listing job left its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListingState {
    /// More pages follow: the next job names this step.
    Continues(SyncRunJob),
    /// The listing completed and its removals were made (or held).
    Complete,
    /// The run failed, ended, or moved on (a repeated job).
    Over,
}

/// Sends the parse jobs a committed transaction wrote to the outbox, then marks them sent;
/// a failed send leaves them to the sweep.
pub async fn dispatch(state: &State, jobs: Vec<(uuid::Uuid, serde_json::Value)>) -> Result<(), ParseError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let (ids, payloads): (Vec<_>, Vec<_>) = jobs.into_iter().unzip();
    match state.dispatcher.send_all(sluice_store::PARSE_DOCUMENT_TOPIC, &payloads).await {
        Ok(()) => state.db.mark_all_dispatched(&ids).await?,
        Err(error) => tracing::warn!(error = %error, "parse jobs not sent; the sweep sends them"),
    }
    Ok(())
}

/// What a listed object is to a run: a file to decide on, or a key it does not sync.
fn listed_file(state: &State, object: ListedObject) -> Option<ListedFile> {
    let ListedKey::File { label } = listed_key(&object.key) else { return None };
    let kind = sluice_formats::kind_for_filename(&label).filter(|k| sluice_formats::ingestible(k))?;
    if u64::try_from(object.size).unwrap_or(u64::MAX) > state.config.max_upload_bytes {
        return None;
    }
    Some(ListedFile { object, label, filetype: kind.extension.to_owned() })
}

/// Lists pages of a run from the step `job` names: all of them (`max_pages` none, the
/// operator's foreground run) or up to `max_pages`. `on_page` sees each recorded page's
/// listed and skipped counts.
pub async fn list_pages(
    state: &State,
    mut job: SyncRunJob,
    max_pages: Option<usize>,
    mut on_page: impl FnMut(usize, usize),
) -> Result<ListingState, ParseError> {
    let Some((run, source, mut cursor)) = state.db.sync_run_at(job).await? else { return Ok(ListingState::Over) };
    let client = match state.remote.client_for(&state.db, &state.vault, &source).await {
        Ok(client) => client,
        Err(error) if error.is_transient() => return Err(ParseError::Source(error)),
        Err(error) => {
            state.db.fail_sync_run(run.id, &error.stored("sync")).await?;
            return Ok(ListingState::Over);
        }
    };
    let mut pages = 0;
    loop {
        if max_pages.is_some_and(|max| pages >= max) {
            return Ok(ListingState::Continues(job));
        }
        let page = match client.list_page(&source.location.prefix, cursor.as_deref(), PAGE_KEYS).await {
            Ok(page) => page,
            Err(error) if error.is_transient() => return Err(ParseError::Source(error)),
            Err(error) => {
                let message = format!("{} The listing did not complete, so nothing was removed.", error.stored("sync"));
                state.db.fail_sync_run(run.id, &message).await?;
                return Ok(ListingState::Over);
            }
        };
        pages += 1;
        if let Some(last) = page.objects.last() {
            let last_key = last.key.clone();
            let listed = page.objects.len();
            let markers = page.objects.iter().filter(|o| listed_key(&o.key) == ListedKey::NotAFile).count();
            let files: Vec<ListedFile> = page.objects.into_iter().filter_map(|o| listed_file(state, o)).collect();
            let not_synced = listed - markers - files.len();
            match state.db.record_sync_page(job, &files, not_synced, &last_key).await? {
                PageOutcome::Recorded { jobs, skipped } => {
                    on_page(listed - markers, skipped);
                    dispatch(state, jobs).await?;
                }
                PageOutcome::Stale => return Ok(ListingState::Over),
            }
            job.step += 1;
            cursor = Some(last_key);
        }
        if !page.truncated {
            return Ok(match state.db.finish_listing(job).await? {
                Some(end) => {
                    tracing::info!(run = %run.id, removed = end.removed, held = ?end.held, "listing complete");
                    if let Some(removal) = end.removal {
                        state
                            .db
                            .remove_now_or_later(removal, move |key| async move { state.blob.delete(&key).await })
                            .await;
                    }
                    ListingState::Complete
                }
                None => ListingState::Over,
            });
        }
    }
}

/// A `sync-run` job: lists its pages, and sends the job for the rest.
pub async fn run_job(state: &State, job: SyncRunJob) -> Result<(), ParseError> {
    if let ListingState::Continues(next) = list_pages(state, job, Some(PAGES_PER_JOB), |_, _| {}).await? {
        let payload = serde_json::to_value(next).unwrap_or_default();
        state.dispatcher.send(SYNC_RUN_TOPIC, &payload).await.map_err(|e| ParseError::Dispatch(e.to_string()))?;
    }
    Ok(())
}

/// The key of a synced document's address under its source's bucket.
fn key_of<'a>(source: &SyncSource, document: &'a Document) -> Option<&'a str> {
    document.source_path.as_deref()?.strip_prefix(&format!("s3://{}/", source.location.bucket))
}

async fn fail(state: &State, document: &Document, message: &str) -> Result<(), ParseError> {
    if state.db.fail_document(document.id, message).await? {
        tracing::info!(id = %document.id, message, "synced document failed");
    }
    Ok(())
}

/// Downloads a synced document with its source's credential. Unchanged bytes (the hash of
/// the document it would replace, outside `full`) keep that document and cost no parse
/// and no embedding; anything else is judged as an upload and handed back to be parsed
/// (`None`: nothing is left to parse, the outcome recorded).
pub async fn fetch_document(state: &State, document: &Document) -> Result<Option<bytes::Bytes>, ParseError> {
    let source_id = document.sync.as_ref().and_then(|s| s.source_id);
    let Some(source) = (match source_id {
        Some(id) => state.db.sync_source(id).await?,
        None => None,
    }) else {
        return fail(state, document, "fetch: SourceDeleted: its sync source was deleted; nothing will fetch it")
            .await
            .map(|()| None);
    };
    let Some(key) = key_of(&source, document) else {
        return fail(state, document, "fetch: SourceMoved: the source no longer reads this address; run it again")
            .await
            .map(|()| None);
    };
    let client = match state.remote.client_for(&state.db, &state.vault, &source).await {
        Ok(client) => client,
        Err(error) if error.is_transient() => return Err(ParseError::Source(error)),
        Err(error) => return fail(state, document, &error.stored("fetch")).await.map(|()| None),
    };
    let fetched = match client.get(key, state.config.max_upload_bytes).await {
        Ok(fetched) => fetched,
        Err(error) if error.is_transient() => return Err(ParseError::Source(error)),
        Err(SourceError::NotFound) => {
            let message = "fetch: ObjectGone: the object was removed after it was listed; the next run removes it";
            return fail(state, document, message).await.map(|()| None);
        }
        Err(error) => return fail(state, document, &error.stored("fetch")).await.map(|()| None),
    };
    let requests = i32::try_from(client.get_requests()).unwrap_or(i32::MAX);
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&fetched.bytes));
    if let Some(kept) = unchanged_by_hash(state, &source, document, &hash).await? {
        state.db.skip_unchanged_download(document, kept, fetched.etag.as_deref(), requests).await?;
        tracing::info!(id = %document.id, kept = %kept, "synced object unchanged by content; kept");
        return Ok(None);
    }
    state.db.record_download(document, &hash, fetched.etag.as_deref(), requests).await?;
    if let Err(refusal) = sluice_formats::check_upload(&document.filename, None, &fetched.bytes) {
        let message =
            format!("fetch: {}: {}; the object is not what its name says", refusal.code.as_str(), refusal.message);
        return fail(state, document, &message).await.map(|()| None);
    }
    Ok(Some(fetched.bytes))
}

/// The stored document whose bytes `document`'s are, which it therefore does not replace
/// (outside `full`, which re-indexes whatever it matches): the one it was to replace, when
/// finished with this content hash; else, the lookup's last resort, a finished document of
/// the base no address claims (an upload of the same file), which the source adopts.
async fn unchanged_by_hash(
    state: &State,
    source: &SyncSource,
    document: &Document,
    hash: &str,
) -> Result<Option<uuid::Uuid>, ParseError> {
    if source.sync_mode == sluice_domain::sync::SyncMode::Full {
        return Ok(None);
    }
    match document.sync.as_ref().and_then(|s| s.replaces) {
        Some(replaced) => Ok(state
            .db
            .document(replaced)
            .await?
            .filter(|d| d.status == "done" && d.content_hash.as_deref() == Some(hash))
            .map(|d| d.id)),
        None => match document.kb_id {
            Some(kb_id) => Ok(state.db.unaddressed_document_with_hash(kb_id, hash).await?),
            None => Ok(None),
        },
    }
}

/// An object created or removed in a bucket that is not the deployment's: one job per
/// event-driven source whose prefix holds it, each applied on its own delivery
/// ([`source_event`]), so a source that cannot read its bucket fails only its own job.
/// Sending them again (a redelivered event) is harmless: applying is idempotent.
pub async fn object_changed(state: &State, change: &ObjectChange) -> Result<(), ParseError> {
    if change.change == Change::Other {
        return Ok(());
    }
    let jobs: Vec<serde_json::Value> = state
        .db
        .event_sources(&change.bucket)
        .await?
        .into_iter()
        .filter(|source| source.location.holds(&change.bucket, &change.key))
        .map(|source| SourceEventJob { source_id: source.id, key: change.key.clone() })
        .filter_map(|job| serde_json::to_value(job).ok())
        .collect();
    if jobs.is_empty() {
        return Ok(());
    }
    tracing::info!(bucket = %change.bucket, key = %change.key, sources = jobs.len(), "object event fanned out");
    state.dispatcher.send_all(SOURCE_EVENT_TOPIC, &jobs).await.map_err(|e| ParseError::Dispatch(e.to_string()))
}

/// One source's part of a bucket event, through the same decision as a run. The event is
/// a hint: the object is asked for with the source's credential, and what the bucket says
/// now decides. A source gone or no longer event-driven does nothing; one whose credential
/// or bucket refuses is logged and acknowledged (its owner fixes it); only a passing
/// failure is retried, and only this job.
pub async fn source_event(state: &State, job: SourceEventJob) -> Result<(), ParseError> {
    let Some(source) = state.db.sync_source(job.source_id).await?.filter(|s| s.event_driven) else {
        return Ok(());
    };
    if !source.location.holds(&source.location.bucket, &job.key) {
        return Ok(());
    }
    let client = match state.remote.client_for(&state.db, &state.vault, &source).await {
        Ok(client) => client,
        Err(error) if error.is_transient() => return Err(ParseError::Source(error)),
        Err(error) => {
            tracing::warn!(source = %source.id, error = %error, "an event for a source that cannot read its bucket");
            return Ok(());
        }
    };
    apply_event(state, &source, &client, &job.key).await
}

async fn apply_event(state: &State, source: &SyncSource, client: &SourceClient, key: &str) -> Result<(), ParseError> {
    match client.head(key).await {
        Ok(Some(object)) => {
            let Some(file) = listed_file(state, object) else { return Ok(()) };
            let jobs = state.db.apply_object_event(source, &file).await?;
            tracing::info!(source = %source.id, key, fetches = jobs.len(), "object event applied");
            dispatch(state, jobs).await
        }
        Ok(None) => {
            let (removed, removal) = state.db.apply_removal_event(source, key).await?;
            if let Some(removal) = removal {
                state.db.remove_now_or_later(removal, move |key| async move { state.blob.delete(&key).await }).await;
            }
            tracing::info!(source = %source.id, key, removed, "removal event applied");
            Ok(())
        }
        Err(error) if error.is_transient() => Err(ParseError::Source(error)),
        Err(error) => {
            tracing::warn!(source = %source.id, key, error = %error, "event not applied: the bucket refused");
            Ok(())
        }
    }
}
