//! File formats: which files Sluice takes, what their bytes really are, and their text.
//!
//! Everything here is pure and synchronous: it reads the bytes handed in and nothing else,
//! so the upload function, the parse function and the `sluice parse` command all run the
//! same rules.

pub mod archive;
pub mod budget;
pub mod container;
pub mod dates;
pub mod doc;
pub mod epub;
pub mod images;
pub mod johab;
pub mod kinds;
pub mod limits;
pub mod markdown;
pub mod markup;
pub mod msg;
pub mod office;
pub mod options;
pub mod pdf;
pub mod pdf_structure;
pub mod scan;
pub mod sheets;
pub mod sniff;
pub mod svg;
pub mod text;
pub mod tiff_pages;
pub mod titles;
pub mod xml;

mod check;
mod extract;

pub use check::{Accepted, Refusal, RefusalCode, check_declared, check_upload};
pub use extract::{Extraction, PREVIEW_MAX_CHARS, extract, preview};
pub use kinds::{FileKind, FileType, ingestible, ingestible_extensions, kind_for_filename};
pub use options::{DEFAULT_TIME_LIMIT, ExtractOptions};
pub use scan::OcrOptions;
pub use sluice_ocr::{Alphabet as OcrAlphabet, Script as OcrScript};
