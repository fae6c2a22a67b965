//! What keeps the shim out of the server's reach: the shim makes itself non-dumpable, closes the
//! lab folder to everyone but the lab's group, and installs a seccomp filter in the server just
//! before its exec that refuses the calls one process uses to read or write another's memory or
//! descriptors (ptrace, process_vm_readv/writev, pidfd_getfd, kcmp). Starting the server as
//! another user is `Command::uid`'s; which user is the backend's choice (`spec::Sandbox`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Makes this process non-dumpable: no core, /proc/<pid>/mem and friends owned by root, and no
/// ptrace attach by a process without CAP_SYS_PTRACE, whatever its uid.
pub fn make_non_dumpable() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Closes `dir` (the shared /lab) to everyone outside the shim's group: owner the shim, group
/// its effective group, mode 0750. The driver reads and connects through the group; a server
/// running as another user can neither list, write, rename nor unlink anything there.
pub fn close_lab(dir: &Path) -> std::io::Result<()> {
    let gid = nix::unistd::getegid();
    nix::unistd::chown(dir, None, Some(gid)).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "give {} the lab group {gid}: {e} (the lab folder must belong to the shim's user)",
                dir.display()
            ),
        )
    })?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
}

/// Makes a file the shim created in the lab readable and writable by the lab's group only.
pub fn lab_only(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The system calls the server may not make, refused with EPERM (a runtime that probes them
/// keeps running): each reads or writes another process's memory, or takes its descriptors.
fn denied() -> [i64; 5] {
    [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_kcmp,
    ]
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x86_64's x32 calls carry this bit; refused as a whole rather than listed twice.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt: 0, jf: 0, k }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt, jf, k }
}

/// The classic BPF program of the server's seccomp filter: another architecture is killed, x32
/// calls and the [`denied`] calls get EPERM, everything else is allowed.
pub fn tracing_filter() -> Vec<libc::sock_filter> {
    let eperm = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA);
    let arch_offset = 4; // seccomp_data: nr (u32), arch (u32), ...
    let mut prog = vec![
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, arch_offset),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, AUDIT_ARCH, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
    ];
    if cfg!(target_arch = "x86_64") {
        prog.push(jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, X32_SYSCALL_BIT, 0, 1));
        prog.push(stmt(libc::BPF_RET | libc::BPF_K, eperm));
    }
    for nr in denied() {
        prog.push(jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, nr as u32, 0, 1));
        prog.push(stmt(libc::BPF_RET | libc::BPF_K, eperm));
    }
    prog.push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW));
    prog
}

/// Installs `prog` on the calling thread (in the forked child, between its `setuid` and its
/// exec). Only async-signal-safe calls: two prctls, no allocation.
pub fn install_filter(prog: &[libc::sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut libc::sock_filter };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes no pointers; PR_SET_SECCOMP reads `fprog`, which points
    // at `prog`, alive for this call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog as *const libc::sock_fprog)
            != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_refuses_ptrace_in_a_child_and_allows_the_rest() {
        let prog = tracing_filter();
        // SAFETY: the child only calls async-signal-safe functions before _exit.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let code = (|| {
                    install_filter(&prog).ok()?;
                    // SAFETY: plain system calls with no pointers the kernel writes through.
                    let traced = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
                    let traced_errno = std::io::Error::last_os_error().raw_os_error();
                    // Zero iovecs: without the filter this reads nothing and returns 0.
                    let read = unsafe {
                        libc::process_vm_readv(libc::getppid(), std::ptr::null(), 0, std::ptr::null(), 0, 0)
                    };
                    let read_errno = std::io::Error::last_os_error().raw_os_error();
                    let pid = unsafe { libc::getpid() };
                    let refused = |rc: i64, errno| rc == -1 && errno == Some(libc::EPERM);
                    (refused(traced, traced_errno) && refused(read as i64, read_errno) && pid > 0)
                        .then_some(0)
                })()
                .unwrap_or(1);
                // SAFETY: ends the child at once, as after a fork.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
            }
        }
    }
}
