//! The character budget the readers spend, and the time limit they run under.
//!
//! Readers push text in as they read it; once the budget is spent they are told to stop,
//! so no reader materialises more than it may keep.

use std::time::{Duration, Instant};

/// Why a reader stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The character budget is spent: keep what was read, mark the cut.
    Budget,
    /// The time limit passed: the file is unreadable.
    Time,
}

/// Text collected under a character budget and a deadline.
#[derive(Debug)]
pub struct TextBudget {
    text: String,
    max_chars: usize,
    used: usize,
    truncated: bool,
    deadline: Instant,
}

impl TextBudget {
    pub fn new(max_chars: usize, time_limit: Duration) -> Self {
        Self {
            text: String::with_capacity(max_chars.min(1 << 16)),
            max_chars,
            used: 0,
            truncated: false,
            deadline: Instant::now() + time_limit,
        }
    }

    /// Appends `s` (without NULs), keeping within the budget. `Err(Stop::Budget)` once the
    /// budget is spent; the caller stops reading.
    pub fn push(&mut self, s: &str) -> Result<(), Stop> {
        if self.truncated {
            return Err(Stop::Budget);
        }
        for ch in s.chars() {
            if ch == '\0' {
                continue;
            }
            if self.used == self.max_chars {
                self.truncated = true;
                return Err(Stop::Budget);
            }
            self.text.push(ch);
            self.used += 1;
        }
        Ok(())
    }

    pub fn push_char(&mut self, ch: char) -> Result<(), Stop> {
        let mut buf = [0u8; 4];
        self.push(ch.encode_utf8(&mut buf))
    }

    /// `Err(Stop::Time)` once the deadline has passed; readers call it between units of work.
    pub fn check_time(&self) -> Result<(), Stop> {
        if Instant::now() > self.deadline { Err(Stop::Time) } else { Ok(()) }
    }

    /// Ends the current line unless the text is empty or already ends one.
    pub fn end_line(&mut self) -> Result<(), Stop> {
        if self.text.is_empty() || self.text.ends_with('\n') { Ok(()) } else { self.push("\n") }
    }

    /// Drops trailing blank lines and spaces (documents end with separators, files do not).
    pub fn trim_end(&mut self) {
        let trimmed = self.text.trim_end_matches(['\n', ' ', '\t', '\r']).len();
        self.text.truncate(trimmed);
    }

    /// The text's length so far, in bytes.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    pub fn chars(&self) -> usize {
        self.used
    }

    /// The characters still to be spent.
    pub fn remaining(&self) -> usize {
        self.max_chars - self.used
    }

    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// The text as pushed, with the left-out marker when the budget cut it.
    pub fn finish(self) -> (String, bool) {
        let mut text = self.text;
        if self.truncated {
            text.push_str(&left_out_marker(self.max_chars));
        }
        (text, self.truncated)
    }
}

/// Runs a reader step, turning a budget stop into a clean end and passing a time stop up.
pub fn spent(result: Result<(), Stop>) -> Result<bool, Stop> {
    match result {
        Ok(()) => Ok(false),
        Err(Stop::Budget) => Ok(true),
        Err(Stop::Time) => Err(Stop::Time),
    }
}

/// The line that ends a text the budget cut.
pub fn left_out_marker(max_chars: usize) -> String {
    format!("\n\n[The rest of this document was left out: extracted text is capped at {max_chars} characters.]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_stops_at_its_character_count() {
        let mut budget = TextBudget::new(5, Duration::from_secs(5));
        assert_eq!(budget.push("ab\0c"), Ok(()));
        assert_eq!(budget.push("deźgh"), Err(Stop::Budget));
        assert_eq!(budget.push("more"), Err(Stop::Budget));
        let (text, truncated) = budget.finish();
        assert!(truncated);
        assert!(text.starts_with("abcde\n\n[The rest of this document was left out"));
    }

    #[test]
    fn the_deadline_is_reported() {
        let budget = TextBudget::new(5, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(budget.check_time(), Err(Stop::Time));
    }
}
