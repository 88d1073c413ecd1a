//! Tesseract 5's C API (`capi.h`), bound at run time like ONNX Runtime and PDFium: the
//! library is opened from a path when first needed, so no build links it and a build for
//! either architecture needs nothing of Tesseract's. Only the calls a page's reading makes are
//! bound. The workspace forbids unsafe code everywhere else; here each unsafe block says why
//! it is sound, and the safe [`Tesseract::read`] is all the rest of Sluice sees.
//!
//! Each page gets a handle of its own, initialised with its languages and ended after it, so
//! nothing of one page outlives it (and no handle is left for Tesseract's exit-time checks to
//! report as leaked).

use libloading::Library;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;

/// Why a page was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TesseractError {
    /// The library or a function of it could not be loaded.
    #[error("{0}")]
    Library(String),
    /// The languages' models would not load from the folder given.
    #[error("Tesseract could not load {languages:?} from {folder}")]
    Languages { languages: String, folder: String },
    /// The page is larger than Tesseract takes, or an argument held a NUL byte.
    #[error("Tesseract cannot take this page")]
    Page,
    /// Tesseract answered no text at all.
    #[error("Tesseract read nothing from this page")]
    Failed,
}

/// What Tesseract read of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// Its text, as `TessBaseAPIGetUTF8Text` writes it: lines, a blank line between blocks.
    pub text: String,
    /// Whether the page was stopped before its last line: the text is what was read.
    pub stopped: bool,
}

type Api = c_void;
type Monitor = c_void;
/// Asked before each unit of recognition whether to stop: (what `TessMonitorSetCancelThis`
/// set, a count). Tesseract's LSTM recognizer's unit is a text line.
type CancelFunction = unsafe extern "C" fn(*mut c_void, c_int) -> bool;

/// The loaded library and the functions used.
pub struct Tesseract {
    create: unsafe extern "C" fn() -> *mut Api,
    init: unsafe extern "C" fn(*mut Api, *const c_char, *const c_char) -> c_int,
    set_variable: unsafe extern "C" fn(*mut Api, *const c_char, *const c_char) -> c_int,
    set_image: unsafe extern "C" fn(*mut Api, *const u8, c_int, c_int, c_int, c_int),
    recognize: unsafe extern "C" fn(*mut Api, *mut Monitor) -> c_int,
    text: unsafe extern "C" fn(*mut Api) -> *mut c_char,
    delete_text: unsafe extern "C" fn(*const c_char),
    end: unsafe extern "C" fn(*mut Api),
    delete: unsafe extern "C" fn(*mut Api),
    monitor_create: unsafe extern "C" fn() -> *mut Monitor,
    monitor_delete: unsafe extern "C" fn(*mut Monitor),
    monitor_cancel: unsafe extern "C" fn(*mut Monitor, Option<CancelFunction>),
    monitor_cancel_this: unsafe extern "C" fn(*mut Monitor, *mut c_void),
    /// Held so the functions above stay mapped.
    _library: Library,
}

impl std::fmt::Debug for Tesseract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tesseract").finish_non_exhaustive()
    }
}

impl Tesseract {
    /// Opens `libtesseract` at `path` and finds its functions.
    pub fn load(path: &Path) -> Result<Self, TesseractError> {
        let failed = |e: libloading::Error| TesseractError::Library(format!("{} ({e})", path.display()));
        // SAFETY: opening a library runs its initialisers; Tesseract's and its dependencies'
        // only set up their own state.
        let library = unsafe { Library::new(path) }.map_err(failed)?;
        // SAFETY: each `function` is asked for the type `capi.h` declares for it.
        unsafe {
            Ok(Self {
                create: function(&library, c"TessBaseAPICreate")?,
                init: function(&library, c"TessBaseAPIInit3")?,
                set_variable: function(&library, c"TessBaseAPISetVariable")?,
                set_image: function(&library, c"TessBaseAPISetImage")?,
                recognize: function(&library, c"TessBaseAPIRecognize")?,
                text: function(&library, c"TessBaseAPIGetUTF8Text")?,
                delete_text: function(&library, c"TessDeleteText")?,
                end: function(&library, c"TessBaseAPIEnd")?,
                delete: function(&library, c"TessBaseAPIDelete")?,
                monitor_create: function(&library, c"TessMonitorCreate")?,
                monitor_delete: function(&library, c"TessMonitorDelete")?,
                monitor_cancel: function(&library, c"TessMonitorSetCancelFunc")?,
                monitor_cancel_this: function(&library, c"TessMonitorSetCancelThis")?,
                _library: library,
            })
        }
    }

    /// Reads a page of one-byte gray pixels, `width` a row, in `languages` (Tesseract's
    /// `rus+eng`) with the models in `tessdata`. `stop` is asked, with the lines begun so far,
    /// before each line whether to stop there; a stopped page keeps the lines read.
    pub fn read(
        &self,
        pixels: &[u8],
        width: u32,
        tessdata: &Path,
        languages: &str,
        stop: &mut dyn FnMut(usize) -> bool,
    ) -> Result<Read, TesseractError> {
        let height = if width == 0 { 0 } else { pixels.len() / width as usize };
        let (Ok(columns), Ok(rows)) = (c_int::try_from(width), c_int::try_from(height)) else {
            return Err(TesseractError::Page);
        };
        if rows == 0 || pixels.len() != width as usize * height {
            return Err(TesseractError::Page);
        }
        let folder = CString::new(tessdata.as_os_str().as_encoded_bytes()).map_err(|_| TesseractError::Page)?;
        let named = CString::new(languages).map_err(|_| TesseractError::Page)?;
        let mut stopping = Stopping { stop, asked: 0, stopped: false };
        // SAFETY: `create` and `monitor_create` make new objects, freed once by `Page`'s drop.
        let page = unsafe { Page { tesseract: self, api: (self.create)(), monitor: (self.monitor_create)() } };
        // SAFETY: the handle is new and both strings are NUL-terminated and outlive the call.
        if unsafe { (self.init)(page.api, folder.as_ptr(), named.as_ptr()) } != 0 {
            return Err(TesseractError::Languages {
                languages: languages.to_owned(),
                folder: tessdata.display().to_string(),
            });
        }
        // SAFETY: an initialised handle; the pixel buffer is `columns × rows` bytes, one a
        // pixel, rows `columns` apart, and outlives the recognition below; the cancel
        // function's `this` is `stopping`, alive until after `recognize` returns.
        unsafe {
            // Its warnings (a page without a resolution) are neither text nor errors of ours.
            (self.set_variable)(page.api, c"debug_file".as_ptr(), c"/dev/null".as_ptr());
            (self.set_image)(page.api, pixels.as_ptr(), columns, rows, 1, columns);
            (self.monitor_cancel)(page.monitor, Some(cancel));
            (self.monitor_cancel_this)(page.monitor, (&raw mut stopping).cast());
            // A stopped recognition answers -1 and keeps the words it read.
            (self.recognize)(page.api, page.monitor);
        }
        // SAFETY: the text is Tesseract's, NUL-terminated, copied, then freed by its own function.
        let text = unsafe {
            let raw = (self.text)(page.api);
            if raw.is_null() {
                return Err(TesseractError::Failed);
            }
            let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
            (self.delete_text)(raw);
            text
        };
        Ok(Read { text, stopped: stopping.stopped })
    }
}

/// The function `name` of `library`, as `T`.
///
/// # Safety
/// `T` must be the function's own type.
unsafe fn function<T: Copy>(library: &Library, name: &CStr) -> Result<T, TesseractError> {
    // SAFETY: the caller vouches for `T`.
    let symbol = unsafe { library.get::<T>(name) };
    symbol.map(|symbol| *symbol).map_err(|e| TesseractError::Library(format!("libtesseract lacks {name:?} ({e})")))
}

/// What the cancel function asks and remembers.
struct Stopping<'a> {
    stop: &'a mut dyn FnMut(usize) -> bool,
    /// Times asked: Tesseract's LSTM recognizer asks before each line it reads (the unit its
    /// first pass recognizes, though `capi.h` calls it a word).
    asked: usize,
    stopped: bool,
}

/// Tesseract's cancel function: asks `stop` once a line until it says stop, then says so
/// for every line left.
unsafe extern "C" fn cancel(this: *mut c_void, _: c_int) -> bool {
    // SAFETY: `this` is the `Stopping` `read` set, alive for the whole recognition, and
    // Tesseract calls this on the thread that called `recognize`, one call at a time.
    let stopping = unsafe { &mut *this.cast::<Stopping>() };
    if !stopping.stopped && (stopping.stop)(stopping.asked) {
        stopping.stopped = true;
    }
    stopping.asked += 1;
    stopping.stopped
}

/// A handle and a monitor for one page, ended and freed however the page ends.
struct Page<'t> {
    tesseract: &'t Tesseract,
    api: *mut Api,
    monitor: *mut Monitor,
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        // SAFETY: both were made by this library for this page and are freed once, here.
        unsafe {
            (self.tesseract.monitor_delete)(self.monitor);
            (self.tesseract.end)(self.api);
            (self.tesseract.delete)(self.api);
        }
    }
}
