//! The seccomp filter for "network off": what Landlock cannot say.
//!
//! Landlock (ABI 4) governs TCP bind and connect only; UDP, raw and other
//! socket families, and sockets made through `io_uring`, pass it. The
//! filter refuses `socket` and `socketpair` for every family but unix
//! (`EACCES`, which programs report as "Permission denied"), and
//! `io_uring_setup`; any other architecture's system calls (the 32-bit
//! entry on x86_64, whose numbers differ) are refused outright.

use std::io;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The program; built in the parent, installed by [`install`] in the child.
pub(super) fn no_network() -> Vec<libc::sock_filter> {
    let allow = libc::SECCOMP_RET_ALLOW;
    let eacces = libc::SECCOMP_RET_ERRNO | (libc::EACCES as u32 & libc::SECCOMP_RET_DATA);
    let eperm = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA);
    let socket = libc::SYS_socket as u32;
    let socketpair = libc::SYS_socketpair as u32;
    let io_uring = libc::SYS_io_uring_setup as u32;
    vec![
        // 0: a foreign architecture's call numbers mean something else.
        stmt(LD_W_ABS, ARCH),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, eperm),
        // 3: which call; x32 calls (numbers with bit 30) are foreign too.
        stmt(LD_W_ABS, NR),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, eperm),
        // 6
        jump(JEQ_K, io_uring, 0, 1),
        stmt(RET_K, eperm),
        // 8
        jump(JEQ_K, socket, 1, 0),
        jump(JEQ_K, socketpair, 0, 4),
        // 10: socket or socketpair: unix only.
        stmt(LD_W_ABS, ARG0_LOW),
        jump(JEQ_K, libc::AF_UNIX as u32, 0, 1),
        stmt(RET_K, allow),
        // 13
        stmt(RET_K, eacces),
        // 14: any other call.
        stmt(RET_K, allow),
    ]
}

/// Installs `filter` on the calling thread. One system call: safe between
/// fork and exec. `no_new_privs` must be set first.
pub(super) fn install(filter: &[libc::sock_filter]) -> io::Result<()> {
    let program = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| io::Error::other("filter too long"))?,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points at `filter`, which outlives the call.
    let done = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &program as *const libc::sock_fprog,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
