//! Faults the soak (`infra/local/soak`) switches on in the local runner for a stretch, in the
//! harness around the functions, never in them: SQS deliveries doubled or put behind later
//! ones, and the sweep's schedule held back. A fault is on while the file of its name exists
//! in `SLUICE_LOCAL_FAULTS_DIR`; without that variable none ever is.

/// Every batch handed to its function twice, as SQS may deliver a message more than once.
pub const DUPLICATE_DELIVERIES: &str = "duplicate-deliveries";
/// Every message received put back once for a few seconds, unhandled, so later ones go first.
pub const LATE_DELIVERIES: &str = "late-deliveries";
/// The sweep's scheduled runs skipped.
pub const SWEEP_HELD: &str = "sweep-held";

/// Whether fault `name` is on now.
pub fn active(name: &str) -> bool {
    std::env::var_os("SLUICE_LOCAL_FAULTS_DIR").is_some_and(|dir| std::path::Path::new(&dir).join(name).exists())
}
