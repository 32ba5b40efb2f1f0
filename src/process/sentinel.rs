//! A watcher that kills a server's whole tree when the host ends, however it ends.
//!
//! The parent-death signal reaches only the server's direct child: the rest of its tree
//! would outlive a host that is killed, and keep the request. The sentinel is a small
//! process forked from the host (it runs no other program): it blocks reading a pipe
//! whose only writer is the host. When the pipe closes, because the host closed it at
//! shutdown or because the kernel closed it as the host exited (killed, interrupted or
//! not), the sentinel writes `1` to the cgroup's `cgroup.kill`, removes the cgroup once
//! it is empty, and exits. It runs in a process group of its own, so a Ctrl-C at the
//! host's terminal does not end it before its work is done. Its command line is the
//! host's (it runs no program of its own); its name (`/proc/PID/comm`) is
//! [`SENTINEL_NAME`], so it can be told apart from the host and from any server.
//!
//! Recovery does not rely on it: it kills and checks the recorded cgroup itself before
//! it accepts a *not applied* verdict. The sentinel only keeps a dead host's server
//! from running on until then.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

/// The sentinel's process name (`/proc/PID/comm`, `ps -o comm`).
const SENTINEL_NAME: &std::ffi::CStr = c"rpr-sentinel";

/// How many times the sentinel tries to remove the killed cgroup, 10 ms apart (the
/// kernel refuses while a killed member has not finished exiting).
const REMOVE_TRIES: u32 = 500;

/// The sentinel of one server's cgroup.
#[derive(Debug)]
pub(crate) struct Sentinel {
    pid: Pid,
    /// The pipe's write end; closing it wakes the sentinel.
    wake: Option<OwnedFd>,
}

impl Sentinel {
    /// Starts the sentinel of the cgroup at `dir`, before that cgroup is created (so no
    /// moment exists where the cgroup is there and nothing would remove it); `None`
    /// where it cannot (not Linux, or `fork` failed).
    pub(crate) fn start(dir: &Path) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            let kill = CString::new(dir.join("cgroup.kill").as_os_str().as_bytes()).ok()?;
            let dir = CString::new(dir.as_os_str().as_bytes()).ok()?;
            let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
            let pid = fork_watcher(read.as_raw_fd(), &kill, &dir)?;
            Some(Self {
                pid,
                wake: Some(write),
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dir;
            None
        }
    }

    /// Wakes the sentinel (it kills whatever is left in the cgroup and removes it) and
    /// reaps it.
    pub(crate) fn finish(&mut self) {
        if self.wake.take().is_some() {
            while let Err(nix::errno::Errno::EINTR) = waitpid(self.pid, None) {}
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Forks the watcher; its pid, in the parent.
#[cfg(target_os = "linux")]
#[expect(
    unsafe_code,
    reason = "`fork` is unsafe; the child only makes system calls and exits"
)]
fn fork_watcher(wake: RawFd, kill: &CString, dir: &CString) -> Option<Pid> {
    use nix::unistd::ForkResult;
    // SAFETY: after `fork` in a process that may have other threads, the child may only
    // make async-signal-safe calls. `watch` makes plain system calls (`prctl`, `setpgid`,
    // `close_range`/`close`, `read`, `open`, `write`, `rmdir`, `nanosleep`, `_exit`) on
    // values prepared before the fork (a descriptor number and two C strings, which the
    // child's copy of memory keeps), allocates nothing, takes no lock, touches no stdio
    // or thread-local, and never returns. The parent side only reads the result.
    match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Child) => unsafe { watch(wake, kill.as_ptr(), dir.as_ptr()) },
        Ok(ForkResult::Parent { child }) => Some(child),
        Err(_) => None,
    }
}

/// The sentinel's whole life, in the forked child: keep only the pipe, wait for it to
/// close (or a byte), kill the cgroup (`kill` is its `cgroup.kill`; absent when the host
/// died before creating it), remove it once empty, exit.
///
/// # Safety
///
/// Only in the child of `fork`, with `wake` open and `kill` and `dir` valid C strings.
#[cfg(target_os = "linux")]
#[expect(unsafe_code, reason = "system calls between `fork` and `_exit`")]
unsafe fn watch(wake: RawFd, kill: *const nix::libc::c_char, dir: *const nix::libc::c_char) -> ! {
    use nix::libc;
    // SAFETY: every call below is an async-signal-safe system call on integers, a
    // stack buffer, a static C string, or `kill` and `dir` (valid, as the caller
    // guarantees).
    unsafe {
        libc::prctl(libc::PR_SET_NAME, SENTINEL_NAME.as_ptr());
        libc::setpgid(0, 0);
        close_range(0, wake - 1);
        close_range(wake + 1, libc::c_int::MAX);
        let mut byte = 0u8;
        loop {
            let n = libc::read(wake, (&raw mut byte).cast(), 1);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break;
        }
        let switch = libc::open(kill, libc::O_WRONLY | libc::O_CLOEXEC);
        if switch >= 0 {
            libc::write(switch, c"1".as_ptr().cast(), 1);
            libc::close(switch);
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        for _ in 0..REMOVE_TRIES {
            // Gone (removed, or never created), or not removable for another reason.
            if libc::rmdir(dir) == 0 || *libc::__errno_location() != libc::EBUSY {
                break;
            }
            libc::nanosleep(&raw const pause, std::ptr::null_mut());
        }
        libc::_exit(0)
    }
}

/// Closes the descriptors `first..=last` (nothing when the range is empty).
///
/// # Safety
///
/// Closes descriptors other code may own: only in the forked sentinel.
#[cfg(target_os = "linux")]
#[expect(unsafe_code, reason = "raw system calls in the forked sentinel")]
unsafe fn close_range(first: RawFd, last: RawFd) {
    use nix::libc;
    if first > last || first < 0 {
        return;
    }
    // SAFETY: plain system calls on integers.
    unsafe {
        #[expect(
            clippy::cast_sign_loss,
            reason = "both bounds are checked non-negative"
        )]
        let done = libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            0 as libc::c_uint,
        ) == 0;
        if !done {
            // A kernel before 5.9: close one by one, up to a bound that covers any
            // descriptor a host keeps open in practice.
            for fd in first..=last.min(65_535) {
                libc::close(fd);
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::{Duration, Instant};

    use super::Sentinel;
    use crate::process::tree::Planned;

    #[test]
    fn a_finished_sentinel_kills_the_tree_and_removes_the_cgroup() {
        let Some(planned) = Planned::next() else {
            return crate::process::tree::tests::no_cgroup2_here();
        };
        let mut sentinel = Sentinel::start(planned.dir()).expect("sentinel");
        let Some(cgroup) = planned.create() else {
            sentinel.finish();
            return crate::process::tree::tests::no_cgroup2_here();
        };
        let mut child = crate::process::tree::tests::spawn_in(&cgroup);
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(cgroup.dir().join("cgroup.procs"))
            .unwrap()
            .lines()
            .count()
            < 3
        {
            assert!(Instant::now() < deadline, "the tree never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", sentinel.pid)).unwrap();
        assert_eq!(Some(comm.trim()), super::SENTINEL_NAME.to_str().ok());
        sentinel.finish();
        child.wait().unwrap();
        assert!(!cgroup.dir().exists(), "the sentinel removed the cgroup");
    }

    #[test]
    fn a_sentinel_whose_cgroup_was_never_created_just_ends() {
        let Some(planned) = Planned::next() else {
            return crate::process::tree::tests::no_cgroup2_here();
        };
        let mut sentinel = Sentinel::start(planned.dir()).expect("sentinel");
        let started = Instant::now();
        sentinel.finish();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(!planned.dir().exists());
    }
}
