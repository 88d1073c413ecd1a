//! Runs a command the way AWS Lambda runs a function, as far as confining itself goes: under
//! a seccomp filter that answers `EPERM` to `prctl`, `seccomp` and `capset`, as Lambda's
//! own filter does (projects run on Lambda report `prctl` and
//! capability changes refused with "Operation not permitted"). For the tests only (no
//! function's build includes it): `sluice-lambda-seccomp [--only-seccomp] PROGRAM [ARGS…]`.
//! `--only-seccomp` refuses `seccomp` and `capset` but grants `prctl`: a platform that lets a
//! process be a subreaper but not filter itself.

use seccompiler::{SeccompAction, SeccompFilter};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

fn main() {
    let mut args = std::env::args_os().skip(1).peekable();
    let only_seccomp = args.next_if(|arg| arg == "--only-seccomp").is_some();
    let Some(program) = args.next() else {
        eprintln!("usage: sluice-lambda-seccomp [--only-seccomp] PROGRAM [ARGS…]");
        std::process::exit(2);
    };
    let refused = if only_seccomp {
        vec![libc::SYS_seccomp, libc::SYS_capset]
    } else {
        vec![libc::SYS_prctl, libc::SYS_seccomp, libc::SYS_capset]
    };
    let rules = refused.into_iter().map(|call| (call, Vec::new())).collect::<BTreeMap<_, _>>();
    let filter = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("{e:?}"))
        .and_then(|arch| {
            SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
                .map_err(|e| e.to_string())
        })
        .and_then(|filter| seccompiler::BpfProgram::try_from(filter).map_err(|e| e.to_string()));
    // Installing sets no-new-privileges first (Lambda's sandbox user has no privilege to gain).
    if let Err(error) = filter.and_then(|program| seccompiler::apply_filter(&program).map_err(|e| e.to_string())) {
        eprintln!("sluice-lambda-seccomp: the filter was not installed: {error}");
        std::process::exit(2);
    }
    let error = std::process::Command::new(program).args(args).exec();
    eprintln!("sluice-lambda-seccomp: {error}");
    std::process::exit(2);
}
