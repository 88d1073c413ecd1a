//! Describing the images in a collection's documents with a vision model, through an
//! OpenAI-compatible chat-completions endpoint and the organization's own key: the request
//! (`client`), where and with whose key (`target`), and how descriptions are written into a
//! parsed text (`write_in`). The parse function drives it; the images come from the
//! sandboxed reader (`sluice_formats::images`), which cannot reach a provider itself.

pub mod client;
pub mod target;
pub mod write_in;

pub use client::{VisionError, VisionTarget, describe};
pub use target::{Unusable, check_lendable, check_requested, target_for};
pub use write_in::{Parsed, Placed, write_in};
