//! Legacy Word `.doc`, converted to text by LibreOffice (`soffice`) when it is on the PATH.
//! This is the formats crate's one reader that leaves the bytes handed in: it writes them
//! to a private temporary folder, runs `soffice --headless --convert-to txt` under the time
//! limit (killed when it runs over), reads the text back and removes the folder. Without
//! LibreOffice the text is reported as unavailable, never as a failure.

use crate::budget::{Stop, TextBudget};
use crate::office::ReadError;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `soffice` binary: `SLUICE_SOFFICE` when set, else the first on the PATH.
fn soffice() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SLUICE_SOFFICE") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join("soffice")).find(|p| p.is_file()))
}

/// Whether `.doc` files can be read here.
pub fn available() -> bool {
    soffice().is_some()
}

/// Converts a `.doc` to text into the budget.
pub fn doc(bytes: &[u8], budget: &mut TextBudget, time_limit: Duration) -> Result<(), ReadError> {
    let Some(soffice) = soffice() else {
        return Err(ReadError::Unreadable(
            "text of .doc files is unavailable: LibreOffice (soffice) is not installed".to_owned(),
        ));
    };
    let dir = std::env::temp_dir().join(format!("sluice-doc-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).map_err(|e| ReadError::Unreadable(format!("no scratch folder: {e}")))?;
    let result = convert(&soffice, &dir, bytes, time_limit);
    let _ = std::fs::remove_dir_all(&dir);
    let text = result?;
    match budget.push(text.replace("\r\n", "\n").trim()) {
        Ok(()) | Err(Stop::Budget) => Ok(()),
        Err(Stop::Time) => Err(ReadError::Time),
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
}

fn convert(
    soffice: &std::path::Path,
    dir: &std::path::Path,
    bytes: &[u8],
    time_limit: Duration,
) -> Result<String, ReadError> {
    let input = dir.join("document.doc");
    std::fs::write(&input, bytes).map_err(|e| ReadError::Unreadable(format!("cannot stage the document: {e}")))?;
    let mut child = Command::new(soffice)
        .arg(format!("-env:UserInstallation=file://{}", dir.join("profile").display()))
        .args(["--headless", "--norestore", "--convert-to", "txt:Text (encoded):UTF8", "--outdir"])
        .arg(dir)
        .arg(&input)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| ReadError::Unreadable(format!("LibreOffice could not be started: {e}")))?;
    let deadline = Instant::now() + time_limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) => return Err(ReadError::Unreadable("LibreOffice could not convert the document".to_owned())),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ReadError::Time);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(ReadError::Unreadable(format!("LibreOffice did not finish: {e}"))),
        }
    }
    let output = dir.join("document.txt");
    let text = std::fs::read(&output).map_err(|_| ReadError::Unreadable("LibreOffice wrote no text".to_owned()))?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_libreoffice_the_text_is_unavailable_not_an_error() {
        if soffice().is_some() {
            return;
        }
        let mut budget = TextBudget::new(100, Duration::from_secs(5));
        let result = doc(b"\xd0\xcf\x11\xe0", &mut budget, Duration::from_secs(5));
        match result {
            Err(ReadError::Unreadable(reason)) => assert!(reason.contains("LibreOffice")),
            other => panic!("expected unavailable text, got {other:?}"),
        }
    }
}
