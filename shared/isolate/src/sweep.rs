//! Ending everything a hostile file started, between two jobs of an execution environment.
//!
//! The worker's process group is killed after every job, but a process that made itself a
//! session of its own (`fork` + `setsid`) has left that group. Where the platform grants a
//! subreaper ([`crate::become_subreaper`]) such an orphan stays a descendant of the handler;
//! where it does not (AWS Lambda refuses `prctl`), it is reparented to the environment's
//! init, and only the user it runs as still ties it to the environment. So the sweep kills
//! every descendant of the handler and, where the environment's user is the handler's alone
//! (`user_is_ours`: Lambda's sandbox user, or a user the local stack gives one environment),
//! every other process of that user but the handler's ancestors. Zombies left to the handler
//! are reaped.

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};

/// One process as `/proc` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    pid: i32,
    parent: i32,
    uid: u32,
}

/// Kills what the sweep finds and reaps this process's zombies; how many it killed.
pub fn sweep_environment(user_is_ours: bool) -> usize {
    let me = std::process::id() as i32;
    let uid = nix::unistd::getuid().as_raw();
    let processes = list_processes();
    let killed = kill_all(doomed(&processes, me, uid, user_is_ours));
    reap();
    killed
}

fn kill_all(pids: impl IntoIterator<Item = i32>) -> usize {
    let mut killed = 0;
    for pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        killed += 1;
    }
    killed
}

/// The processes a sweep kills: the descendants of `me`, and (when the user is ours and is
/// not root) every process of `uid` that is neither `me` nor one of its ancestors.
fn doomed(processes: &[Process], me: i32, uid: u32, user_is_ours: bool) -> BTreeSet<i32> {
    let by_pid: BTreeMap<i32, Process> = processes.iter().map(|p| (p.pid, *p)).collect();
    let mut ancestors = BTreeSet::new();
    let mut at = by_pid.get(&me).map(|p| p.parent);
    while let Some(pid) = at.filter(|pid| *pid > 0 && ancestors.insert(*pid)) {
        at = by_pid.get(&pid).map(|p| p.parent);
    }
    let mut doomed = BTreeSet::new();
    let mut frontier = vec![me];
    while let Some(parent) = frontier.pop() {
        for child in processes.iter().filter(|p| p.parent == parent && p.pid != me) {
            if doomed.insert(child.pid) {
                frontier.push(child.pid);
            }
        }
    }
    if user_is_ours && uid != 0 {
        doomed.extend(
            processes.iter().filter(|p| p.uid == uid && p.pid != me && !ancestors.contains(&p.pid)).map(|p| p.pid),
        );
    }
    doomed
}

/// Kills every process of `uid` (never root's): an ended environment's own user.
pub fn kill_processes_of(uid: u32) -> usize {
    if uid == 0 {
        return 0;
    }
    kill_all(list_processes().into_iter().filter(|p| p.uid == uid).map(|p| p.pid))
}

fn list_processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            parse_status(pid, &status)
        })
        .collect()
}

/// The parent and real user of a process from its `/proc/<pid>/status`.
fn parse_status(pid: i32, status: &str) -> Option<Process> {
    let field = |name: &str| {
        status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next())
    };
    Some(Process { pid, parent: field("PPid:")?.parse().ok()?, uid: field("Uid:")?.parse().ok()? })
}

/// Collects every zombie child this process holds (a subreaper inherits them all).
fn reap() {
    while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Empties `dir` (the environment's scratch space) without removing it; how many entries it
/// removed. What a job wrote there never meets the next job.
pub fn empty_dir(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let path = entry.path();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }.is_ok()
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, parent: i32, uid: u32) -> Process {
        Process { pid, parent, uid }
    }

    #[test]
    fn descendants_die_and_so_does_the_users_rest_only_when_the_user_is_ours() {
        // 1 init (root) → 10 runtime (root) → 20 handler (uid 900) → 21 worker → 22 its child;
        // 30 an orphan of uid 900 under init; 40 another user's process.
        let processes =
            [p(1, 0, 0), p(10, 1, 0), p(20, 10, 900), p(21, 20, 900), p(22, 21, 900), p(30, 1, 900), p(40, 1, 901)];
        assert_eq!(doomed(&processes, 20, 900, false), BTreeSet::from([21, 22]));
        assert_eq!(doomed(&processes, 20, 900, true), BTreeSet::from([21, 22, 30]));
        // An ancestor of the same user is never killed, nor is anything of root's.
        let shared = [p(1, 0, 0), p(10, 1, 900), p(20, 10, 900), p(30, 1, 900)];
        assert_eq!(doomed(&shared, 20, 900, true), BTreeSet::from([30]));
        assert_eq!(doomed(&processes, 20, 0, true), BTreeSet::from([21, 22]));
    }

    #[test]
    fn a_status_file_gives_parent_and_real_user() {
        let status = "Name:\tsleep\nState:\tS (sleeping)\nPid:\t77\nPPid:\t1\nUid:\t1051\t1051\t1051\t1051\n";
        assert_eq!(parse_status(77, status), Some(p(77, 1, 1051)));
        assert_eq!(parse_status(77, "Name:\tx\n"), None);
    }
}
