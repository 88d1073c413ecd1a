//! A stand-in for a parser taken over by a hostile file, for the isolation tests only (no
//! function's build includes it): it is served as every worker is — the same job, the same
//! confinement — and then tries the escape the file's text names, answering `escaped: …`
//! when the escape worked and `denied: …` when the kernel refused it without killing it.

use nix::sys::socket::{AddressFamily, SockFlag, SockType};
use nix::sys::uio::RemoteIoVec;
use sluice_formats::Extraction;

fn answer(escaped: bool, what: &str) -> Extraction {
    let verdict = if escaped { "escaped" } else { "denied" };
    Extraction { text: Some(format!("{verdict}: {what}")), ..Extraction::default() }
}

fn main() {
    sluice_isolate::serve_with(|_kind, bytes, _options| {
        let parent = nix::unistd::getppid();
        let escape = String::from_utf8_lossy(bytes).trim().to_owned();
        Ok(match escape.as_str() {
            "environ" => match std::fs::read(format!("/proc/{parent}/environ")) {
                Ok(environment) => answer(true, &String::from_utf8_lossy(&environment)),
                Err(error) => answer(false, &error.to_string()),
            },
            "socket" => answer(
                nix::sys::socket::socket(AddressFamily::Inet, SockType::Stream, SockFlag::empty(), None).is_ok(),
                "socket",
            ),
            "ptrace" => answer(nix::sys::ptrace::attach(parent).is_ok(), "ptrace"),
            "process_vm_readv" => {
                let mut buffer = [0u8; 8];
                let mut local = [std::io::IoSliceMut::new(&mut buffer)];
                let remote = [RemoteIoVec { base: 0x1000, len: 8 }];
                answer(nix::sys::uio::process_vm_readv(parent, &mut local, &remote).is_ok(), "process_vm_readv")
            }
            // The worker itself becomes another program, which leaves a mark at the path the
            // file names (`exec:/path`): only an error returns here.
            exec if exec.starts_with("exec:") => {
                let command = format!("echo escaped > '{}'", &exec["exec:".len()..]);
                let command = std::ffi::CString::new(command).unwrap_or_default();
                let outcome = nix::unistd::execv(c"/bin/sh", &[c"sh", c"-c", command.as_c_str()]);
                answer(false, &format!("exec: {outcome:?}"))
            }
            // No signal: it only asks whether the parent exists, harmless if it got through.
            "kill" => answer(nix::sys::signal::kill(parent, None).is_ok(), "kill"),
            // The same question of every process it may signal (a sibling worker included).
            "kill_all" => answer(nix::sys::signal::kill(nix::unistd::Pid::from_raw(-1), None).is_ok(), "kill_all"),
            // A process of its own: the C library makes it with `clone` without CLONE_THREAD.
            "spawn" => answer(std::process::Command::new("/bin/true").status().is_ok(), "spawn"),
            // A process in a session of its own, left running (`setsid:/path` gets its pid),
            // which the group kill at the job's end does not reach.
            leave if leave.starts_with("setsid:") => {
                let script =
                    format!("setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}'", &leave["setsid:".len()..]);
                answer(std::process::Command::new("/bin/sh").args(["-c", &script]).status().is_ok(), "setsid")
            }
            // io_uring runs reads and writes the filter never sees.
            "io_uring" => answer(io_uring::IoUring::new(8).is_ok(), "io_uring"),
            other => answer(false, &format!("no such escape {other:?}")),
        })
    })
}
