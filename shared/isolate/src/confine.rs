//! What keeps a worker taken over by a hostile file from reaching the function around it.
//!
//! The parent (the function) is made non-dumpable before any worker starts, so no process
//! of the same user can read its memory or `/proc/<pid>/environ` — where Lambda keeps the
//! function's credentials — without `CAP_SYS_PTRACE`. The worker drops every capability
//! (it may run as root locally, and root keeps `CAP_SYS_PTRACE`), sets no-new-privileges and
//! installs a seccomp filter before it reads a byte of the file: no sockets, no `ptrace`, no
//! `process_vm_*`, no signal to its parent, no `exec`, no new namespaces, BPF or perf events. A call the filter forbids kills
//! the worker on the spot, and the file is answered as a crashed parse.

use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
use std::collections::BTreeMap;

/// Makes this process non-dumpable: its memory and environment are closed to other
/// processes of its user (the workers it starts included).
pub fn close_to_same_user() {
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("sluice: this process could not be made non-dumpable: {error}");
    }
}

/// Confines the calling worker: capabilities dropped, no new privileges, the seccomp filter.
pub fn confine_worker() -> Result<(), String> {
    close_to_same_user();
    // The bounding set first (dropping it needs CAP_SETPCAP), then every other set.
    for cap in caps::all() {
        let _ = caps::drop(None, caps::CapSet::Bounding, cap);
    }
    for set in [caps::CapSet::Ambient, caps::CapSet::Inheritable, caps::CapSet::Effective, caps::CapSet::Permitted] {
        caps::clear(None, set).map_err(|e| format!("capabilities not dropped: {e}"))?;
    }
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs could not be set: {e}"))?;
    let program: seccompiler::BpfProgram = filter()?.try_into().map_err(|e| format!("{e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("the seccomp filter was not installed: {e}"))
}

/// The system calls a worker may never make (the rest are allowed: parsers read files,
/// map memory and start threads).
fn filter() -> Result<SeccompFilter, String> {
    let forbidden: Vec<i64> = vec![
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
    ];
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = forbidden.into_iter().map(|call| (call, Vec::new())).collect();
    // No signal to the parent (the function), whatever the signal.
    let parent = nix::unistd::getppid().as_raw() as u64;
    let to_parent =
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, parent).map_err(|e| e.to_string())?;
    rules.insert(libc::SYS_kill, vec![SeccompRule::new(vec![to_parent]).map_err(|e| e.to_string())?]);
    let arch = std::env::consts::ARCH.try_into().map_err(|e| format!("{e}"))?;
    SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::KillProcess, arch).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_compiles_for_this_architecture() {
        let program: Result<seccompiler::BpfProgram, _> = super::filter().expect("filter").try_into();
        assert!(program.is_ok_and(|p| !p.is_empty()));
    }
}
