//! What keeps a worker taken over by a hostile file from reaching anything around it, as far
//! as the platform lets a process confine itself.
//!
//! AWS Lambda refuses most of it: its own seccomp filter answers `prctl` (so no
//! no-new-privileges, no non-dumpable flag, no subreaper), `seccomp` and capability changes
//! with `EPERM`. There the boundary is the execution environment itself (the extract function
//! runs in tenant isolation mode: one Firecracker microVM per tenant), and every step below is
//! defence in depth. So each step is tried, what was refused is recorded in [`Grants`], and a
//! refusal never fails an extraction.
//!
//! Where granted, the worker — before it reads a byte of its job — drops every capability
//! (it may run as root locally, and root keeps `CAP_SYS_PTRACE`), becomes non-dumpable, sets
//! no-new-privileges and installs two seccomp filters: one that kills the worker at any call
//! that reaches outside it (sockets, `ptrace`, `process_vm_*`, `exec`, new processes or
//! namespaces, a new session or group, `io_uring`, a signal to any process but itself, BPF,
//! perf events, keyrings), and one that answers `clone3` with `ENOSYS`, so threads are made
//! with `clone`, whose flags a filter can read.

use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the platform let a process do to confine itself; each `false` names a refusal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    /// `prctl(PR_SET_DUMPABLE, 0)`: other processes of the user cannot read its memory.
    pub non_dumpable: bool,
    /// Every capability dropped (bounding set included where it could be).
    pub capabilities_dropped: bool,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    pub no_new_privs: bool,
    /// Both seccomp filters installed.
    pub seccomp: bool,
}

impl Grants {
    /// The names of the steps the platform refused, for a log line.
    pub fn refused(&self) -> Vec<&'static str> {
        [
            ("non_dumpable", self.non_dumpable),
            ("capabilities_dropped", self.capabilities_dropped),
            ("no_new_privs", self.no_new_privs),
            ("seccomp", self.seccomp),
        ]
        .into_iter()
        .filter_map(|(name, granted)| (!granted).then_some(name))
        .collect()
    }
}

/// Makes this process non-dumpable: its memory and environment are closed to other
/// processes of its user (the workers it starts included). `false` where refused.
pub fn close_to_same_user() -> bool {
    nix::sys::prctl::set_dumpable(false).is_ok()
}

/// Makes this process the reaper of every orphan among its descendants, so a process a worker
/// leaves behind (even in a session of its own) stays where [`crate::sweep`] finds it.
/// `false` where refused.
pub fn become_subreaper() -> bool {
    nix::sys::prctl::set_child_subreaper(true).is_ok()
}

/// Confines the calling worker with every step the platform grants; never fails.
pub fn confine_worker() -> Grants {
    let non_dumpable = close_to_same_user();
    // The bounding set first (dropping it needs CAP_SETPCAP), then every other set.
    for cap in caps::all() {
        let _ = caps::drop(None, caps::CapSet::Bounding, cap);
    }
    let capabilities_dropped =
        [caps::CapSet::Ambient, caps::CapSet::Inheritable, caps::CapSet::Effective, caps::CapSet::Permitted]
            .into_iter()
            // Nothing held is nothing to drop, even where `capset` itself is refused.
            .all(|set| {
                let _ = caps::clear(None, set);
                caps::read(None, set).is_ok_and(|held| held.is_empty())
            });
    let no_new_privs = nix::sys::prctl::set_no_new_privs().is_ok();
    let seccomp = no_new_privs && install_filters().is_ok();
    Grants { non_dumpable, capabilities_dropped, no_new_privs, seccomp }
}

fn install_filters() -> Result<(), String> {
    for filter in [forbidden_calls()?, clone3_unavailable()?] {
        let program: seccompiler::BpfProgram = filter.try_into().map_err(|e| format!("{e}"))?;
        // Every thread of the worker, should a library have started one already.
        seccompiler::apply_filter_all_threads(&program).map_err(|e| format!("{e}"))?;
    }
    Ok(())
}

fn arch() -> Result<seccompiler::TargetArch, String> {
    std::env::consts::ARCH.try_into().map_err(|e| format!("{e}"))
}

fn condition(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// The calls that kill the worker (the rest are allowed: parsers read files, map memory and
/// start threads).
fn forbidden_calls() -> Result<SeccompFilter, String> {
    let mut forbidden: Vec<i64> = vec![
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
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_send_signal,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        // A session or group of its own would leave the group its parent kills.
        libc::SYS_setsid,
        libc::SYS_setpgid,
        // io_uring runs operations the filter never sees.
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_tkill,
    ];
    // The architectures that still have them (aarch64 has only clone).
    #[cfg(target_arch = "x86_64")]
    forbidden.extend([libc::SYS_fork, libc::SYS_vfork]);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = forbidden.into_iter().map(|call| (call, Vec::new())).collect();

    // A signal to anything but itself: another worker, the function, a group, everyone (-1).
    let me = u64::from(std::process::id());
    let not_me = || condition(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, me);
    for call in [libc::SYS_kill, libc::SYS_tgkill, libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo] {
        rules.insert(call, vec![rule(vec![not_me()?])?]);
    }

    // `clone` may make threads only: a new process (no CLONE_THREAD) or any new namespace dies.
    let flags = |mask: u64, value: u64| condition(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(mask), value);
    let thread = libc::CLONE_THREAD as u64;
    let mut clone_rules = vec![rule(vec![flags(thread, 0)?])?];
    for namespace in [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ] {
        let bit = namespace as u64;
        clone_rules.push(rule(vec![flags(bit, bit)?])?);
    }
    rules.insert(libc::SYS_clone, clone_rules);

    SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::KillProcess, arch()?).map_err(|e| e.to_string())
}

/// `clone3` passes its flags in memory a filter cannot read, so it is answered "not
/// implemented": the C library then makes its threads with `clone`.
fn clone3_unavailable() -> Result<SeccompFilter, String> {
    let rules = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch()?)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_filters_compile_for_this_architecture() {
        for filter in [forbidden_calls().expect("filter"), clone3_unavailable().expect("filter")] {
            let program: Result<seccompiler::BpfProgram, _> = filter.try_into();
            assert!(program.is_ok_and(|p| !p.is_empty()));
        }
    }

    #[test]
    fn the_refused_steps_are_named() {
        let grants = Grants { non_dumpable: true, capabilities_dropped: false, no_new_privs: false, seccomp: false };
        assert_eq!(grants.refused(), ["capabilities_dropped", "no_new_privs", "seccomp"]);
        let all = Grants { non_dumpable: true, capabilities_dropped: true, no_new_privs: true, seccomp: true };
        assert!(all.refused().is_empty());
    }
}
