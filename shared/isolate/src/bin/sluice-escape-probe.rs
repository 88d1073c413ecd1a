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

/// What this process could read of other users' extract environments: a line per attempt.
fn neighbours() -> String {
    let me = nix::unistd::getuid().as_raw();
    let mut seen = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|r| r.split_whitespace().next());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if uid.and_then(|u| u.parse::<u32>().ok()) == Some(me) || !String::from_utf8_lossy(&cmdline).contains("sluice-")
        {
            continue;
        }
        for what in ["environ", "mem", "cwd/held", "root/tmp"] {
            let path = format!("/proc/{pid}/{what}");
            let outcome = match what {
                "mem" => std::fs::File::open(&path).map(|_| "opened".to_owned()),
                "root/tmp" => std::fs::read_dir(&path).map(|d| format!("listed {}", d.count())),
                _ => std::fs::read(&path).map(|b| String::from_utf8_lossy(&b).into_owned()),
            };
            seen.push(match outcome {
                Ok(got) => format!("read {path}: {got}"),
                Err(error) => format!("denied {path}: {error}"),
            });
        }
    }
    // The scratch folders of every environment, by name.
    for entry in std::fs::read_dir(std::env::temp_dir().parent().unwrap_or(std::path::Path::new("/tmp")))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let path = entry.path().join("held");
        if entry.file_name().to_string_lossy().starts_with("sluice-extract-")
            && path != std::env::temp_dir().join("held")
        {
            seen.push(match std::fs::read_to_string(&path) {
                Ok(got) => format!("read {}: {got}", path.display()),
                Err(error) => format!("denied {}: {error}", path.display()),
            });
        }
    }
    seen.join("\n")
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
            // Bytes of its own job held in memory and in its scratch folder for two seconds,
            // while a neighbour looks for them.
            hold if hold.starts_with("hold:") => {
                let secret = &hold["hold:".len()..];
                let _ = std::fs::write(std::env::temp_dir().join("held"), secret);
                std::thread::sleep(std::time::Duration::from_secs(2));
                answer(false, &format!("held {secret}"))
            }
            // Every other extract environment's memory, environment and scratch folder.
            "neighbours" => answer(false, &neighbours()),
            // The credentials this process and its parent (the handler) hold.
            "credentials" => {
                let own: Vec<String> =
                    std::env::vars().filter(|(k, _)| k.starts_with("AWS_")).map(|(k, v)| format!("{k}={v}")).collect();
                let parent = std::fs::read(format!("/proc/{parent}/environ"))
                    .map(|e| String::from_utf8_lossy(&e).replace('\0', " "))
                    .unwrap_or_else(|e| format!("denied: {e}"));
                answer(false, &format!("own: {} | parent: {parent}", own.join(" ")))
            }
            // io_uring runs reads and writes the filter never sees.
            "io_uring" => answer(io_uring::IoUring::new(8).is_ok(), "io_uring"),
            other => answer(false, &format!("no such escape {other:?}")),
        })
    })
}
