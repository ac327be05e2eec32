//! Landlock through its three system calls (`landlock(7)`).
//!
//! Not the `landlock` crate: its ruleset can only be enforced by its own
//! `restrict_self`, which must then run in the child after fork, where a
//! multithreaded parent's child may not allocate; here the ruleset is a
//! file descriptor built in the parent and the child makes one system call.

use super::{Access, SandboxError, SandboxMode, SandboxPolicy};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

// File-system rights (linux/landlock.h), by the ABI that added them.
const FS_EXECUTE: u64 = 1 << 0;
const FS_WRITE_FILE: u64 = 1 << 1;
const FS_READ_FILE: u64 = 1 << 2;
const FS_READ_DIR: u64 = 1 << 3;
// REMOVE_DIR .. MAKE_SYM: bits 4 to 12, ABI 1.
const FS_ABI1: u64 = (1 << 13) - 1;
const FS_REFER: u64 = 1 << 13; // ABI 2
const FS_TRUNCATE: u64 = 1 << 14; // ABI 3
const FS_IOCTL_DEV: u64 = 1 << 15; // ABI 5

// Network rights, ABI 4.
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;

// Scopes, ABI 6: no connecting to abstract unix sockets and no signals
// outside the domain (the pod process, other commands, the user's shell).
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

const RULE_PATH_BENEATH: libc::c_int = 1;
const CREATE_RULESET_VERSION: u32 = 1 << 0;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The kernel's Landlock ABI version.
pub(super) fn abi() -> io::Result<u32> {
    // SAFETY: the documented version query: null attributes, size 0.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 1 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(version).map_err(|_| io::Error::other("unexpected Landlock ABI version"))
}

/// Every file-system right this ABI knows: all are handled, so whatever a
/// rule does not grant is denied.
fn handled_fs(abi: u32) -> u64 {
    let mut rights = FS_ABI1;
    if abi >= 2 {
        rights |= FS_REFER;
    }
    if abi >= 3 {
        rights |= FS_TRUNCATE;
    }
    if abi >= 5 {
        rights |= FS_IOCTL_DEV;
    }
    rights
}

/// Builds the ruleset for `policy` with these path rules.
pub(super) fn ruleset(
    abi: u32,
    policy: &SandboxPolicy,
    rules: &[(PathBuf, Access)],
) -> Result<OwnedFd, SandboxError> {
    let handled = handled_fs(abi);
    let attr = RulesetAttr {
        handled_access_fs: handled,
        handled_access_net: if abi >= 4 && !policy.network {
            NET_BIND_TCP | NET_CONNECT_TCP
        } else {
            0
        },
        scoped: if abi >= 6 {
            SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        } else {
            0
        },
    };
    // An older kernel knows a shorter struct; pass only what it knows.
    let size = match abi {
        0..=3 => 8,
        4..=5 => 16,
        _ => std::mem::size_of::<RulesetAttr>(),
    };
    // SAFETY: `attr` outlives the call and `size` does not exceed it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0u32,
        )
    };
    if fd < 0 {
        return Err(SandboxError::Create(io::Error::last_os_error()));
    }
    let fd = i32::try_from(fd).map_err(|_| SandboxError::Create(io::Error::other("bad fd")))?;
    // SAFETY: the kernel just returned this descriptor to us, once.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
    for (path, access) in rules {
        add_rule(&ruleset, path, *access, handled, policy.mode)?;
    }
    Ok(ruleset)
}

fn add_rule(
    ruleset: &OwnedFd,
    path: &PathBuf,
    access: Access,
    handled: u64,
    mode: SandboxMode,
) -> Result<(), SandboxError> {
    let rules_error = |source| SandboxError::Rules {
        path: path.clone(),
        source,
    };
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| rules_error(io::Error::other("the path has a NUL byte")))?;
    // SAFETY: a valid C string; O_PATH opens without reading anything.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        // A system path this machine does not have (say /lib32) or a device
        // it lacks: nothing to allow. The workspace and temp dir must exist.
        let optional = access != Access::Write && err.kind() == io::ErrorKind::NotFound;
        return if optional {
            Ok(())
        } else {
            Err(rules_error(err))
        };
    }
    // SAFETY: just opened, owned here.
    let parent = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
    let read = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
    let file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
    let mut allowed = match access {
        Access::Read => read,
        Access::Write => handled,
        Access::Device => FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV,
    };
    // Read-only means no writes at all, even where a rule says write.
    if mode == SandboxMode::ReadOnly && access == Access::Write {
        allowed = read;
    }
    if !is_dir {
        // A rule on a file may only grant rights that apply to files.
        allowed &= file_rights;
    }
    let attr = PathBeneathAttr {
        allowed_access: allowed & handled,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: both descriptors are open; `attr` outlives the call.
    let done = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if done != 0 {
        return Err(rules_error(io::Error::last_os_error()));
    }
    Ok(())
}

/// Enforces `ruleset` on the calling thread (and so on what it execs).
/// One system call: safe between fork and exec.
pub(super) fn restrict_self(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: an open ruleset descriptor, no flags.
    let done =
        unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
