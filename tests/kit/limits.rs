//! Child processes with fewer files: a lowered `RLIMIT_NOFILE`, and
//! descriptors already taken when the program starts, which no reckoning
//! of the program's own can see.

use std::os::unix::process::CommandExt;

/// Runs `cmd` allowed `files` open files (soft and hard limit, so the
/// program cannot raise it), with `taken` of them open already (on
/// `/dev/null`, inherited, the lowest free numbers from 3).
pub fn open_files(cmd: &mut std::process::Command, files: u64, taken: u32) {
    let path = c"/dev/null";
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (open, fcntl, close, setrlimit), on memory the closure owns.
    unsafe {
        cmd.pre_exec(move || {
            if taken > 0 {
                let null = libc::open(path.as_ptr(), libc::O_RDONLY);
                if null < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // F_DUPFD takes the lowest free number: nothing the child
                // already holds (its standard streams) is replaced.
                for _ in 1..taken {
                    if libc::fcntl(null, libc::F_DUPFD, 3) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            let limit = libc::rlimit {
                rlim_cur: files as libc::rlim_t,
                rlim_max: files as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
