//! Describing a document's images, between reading it and storing its text: the worker
//! hands the images over with their places; each is described by the collection's vision
//! model with the organization's key (or taken from the collection's descriptions of the same
//! bytes by the same model), and the descriptions are written in. Nothing here fails the
//! document: an image the provider will not describe — a refused key, a refusal, a rate
//! limit that outlasts the time — stays undescribed and is counted with its reason.
//!
//! An image the document shows in several places is described once, and its description
//! written at each (as the reference product does).
//!
//! The images are described one after another, within the deployment's document parse time
//! (`SLUICE_DOCUMENT_PARSE_SECS`, counted from the first request), so a `Retry-After` is
//! honoured only while it fits; a refused key, an unserved model or the time running out
//! leaves the rest undescribed at once.

use crate::{ParseError, State};
use sluice_domain::ingestion::OutputFormat;
use sluice_domain::vision::ImageDescription;
use sluice_formats::images::{FoundImage, SkipReason};
use sluice_store::Document;
use sluice_vision::{Parsed, Placed, VisionError};
use std::collections::BTreeMap;
use std::time::Instant;

/// What the description stage hands on: the text with descriptions written in, and the
/// report recorded on the document (`None` when the collection does not describe images).
pub(crate) struct Described {
    pub parsed: Parsed,
    pub report: Option<serde_json::Value>,
}

pub(crate) async fn describe(
    state: &State,
    document: &Document,
    format: OutputFormat,
    setting: Option<&ImageDescription>,
    parsed: Parsed,
    (found, skipped): (Vec<FoundImage>, Vec<(SkipReason, u32)>),
) -> Result<Described, ParseError> {
    let Some(setting) = setting else { return Ok(Described { parsed, report: None }) };
    let mut reasons: BTreeMap<String, u32> = skipped.into_iter().map(|(r, n)| (r.as_str().to_owned(), n)).collect();
    let mut placed = Vec::new();
    if !found.is_empty() {
        match sluice_vision::target_for(&state.db, &state.vault, document.org_id, setting).await? {
            Err(unusable) => count(&mut reasons, unusable.reason(), found.len() as u32),
            Ok(target) => {
                let client = sluice_embed::http_client();
                let deadline = Instant::now() + state.config.document_parse_time_limit;
                let mut room = state.config.document_text_max_chars.saturating_sub(parsed.text.chars().count());
                let mut ended: Option<VisionError> = None;
                for (index, image) in found.iter().enumerate() {
                    if let Some(error) = ended {
                        count(&mut reasons, error.reason(), 1);
                        continue;
                    }
                    let description = match described_before(state, document, &target, image).await? {
                        Some(description) => Ok(description),
                        None => {
                            let described = sluice_vision::describe(&client, &target, image, deadline).await;
                            if let (Ok(description), Some(kb_id)) = (&described, document.kb_id) {
                                state
                                    .db
                                    .keep_image_description(
                                        kb_id,
                                        &image.sha256,
                                        (&target.base_url, &target.model),
                                        description,
                                    )
                                    .await?;
                            }
                            described
                        }
                    };
                    match description {
                        Ok(description) if description.chars().count() + 32 <= room => {
                            // Every place the document shows the image, within the text's budget.
                            let places =
                                std::iter::once((image.offset, image.page)).chain(image.also_at.iter().copied());
                            for (offset, page) in places {
                                let Some(left) = room.checked_sub(description.chars().count() + 32) else { break };
                                room = left;
                                placed.push(Placed {
                                    offset,
                                    page,
                                    number: index + 1,
                                    description: description.clone(),
                                });
                            }
                        }
                        Ok(_) => count(&mut reasons, "text_budget", 1),
                        Err(error) => {
                            count(&mut reasons, error.reason(), 1);
                            if error.ends_the_document() {
                                ended = Some(error);
                            }
                        }
                    }
                }
            }
        }
    }
    let skipped: u32 = reasons.values().sum();
    // Images described, not the places their descriptions were written at.
    let described = placed.iter().map(|place| place.number).collect::<std::collections::BTreeSet<_>>().len();
    let report = serde_json::json!({
        "described": described,
        "skipped": skipped,
        "skipped_reasons": reasons,
        "model": setting.model,
    });
    if !placed.is_empty() || skipped > 0 {
        tracing::info!(id = %document.id, described, places = placed.len(), skipped, "images described");
    }
    // A repeat's place may come before a later image's first one: written in text order.
    placed.sort_by_key(|place| place.offset);
    Ok(Described { parsed: sluice_vision::write_in(parsed, format, &placed), report: Some(report) })
}

fn count(reasons: &mut BTreeMap<String, u32>, reason: &str, n: u32) {
    *reasons.entry(reason.to_owned()).or_default() += n;
}

/// The collection's description of the same bytes by the same model at the same address, if
/// it has one.
async fn described_before(
    state: &State,
    document: &Document,
    target: &sluice_vision::VisionTarget,
    image: &FoundImage,
) -> Result<Option<String>, ParseError> {
    let Some(kb_id) = document.kb_id else { return Ok(None) };
    Ok(state.db.image_description(kb_id, &image.sha256, &target.base_url, &target.model).await?)
}
