//! Where servers are forked: one thread that lives as long as the process.
//!
//! A server gets `SIGKILL` as its parent-death signal (Linux `PR_SET_PDEATHSIG`), so it
//! dies with its host however the host ends. The kernel sends that signal when the
//! **thread** that forked exits, not only when the whole process does. A server forked
//! from a short-lived thread (a request's thread restarting a crashed server) would die
//! with that thread while its host lives on. So every fork happens on the *keeper*: a
//! thread started on first use that never returns, because the channel it serves is held
//! by a `static`. It dies only with the process, and then so do the servers.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, OnceLock, PoisonError};

/// One spawn: the command, and where to send the child.
type Job = (Command, Sender<io::Result<Child>>);

/// The keeper's channel; `None` if its thread could not be started.
static KEEPER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();

/// Arms the parent-death signal on `cmd` and spawns it from the keeper thread.
///
/// Fails if the keeper thread cannot be started, rather than forking from the calling
/// thread: a child tied to a thread that may end is the fault this module exists to
/// prevent.
pub(crate) fn spawn(mut cmd: Command) -> io::Result<Child> {
    #[cfg(target_os = "linux")]
    die_with_this_process(&mut cmd);
    let keeper = KEEPER.get_or_init(|| {
        let (jobs, inbox) = channel::<Job>();
        std::thread::Builder::new()
            .name("rpr-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in inbox {
                    // The caller may have given up waiting: nothing to do then, the
                    // child is dropped (and keeps running until its owner's end).
                    let _ = reply.send(cmd.spawn());
                }
            })
            .ok()
            .map(|_| Mutex::new(jobs))
    });
    let Some(keeper) = keeper else {
        return Err(io::Error::other(
            "rpr could not start the thread that starts servers",
        ));
    };
    let (reply, answer) = channel();
    keeper
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send((cmd, reply))
        .map_err(|_| io::Error::other("rpr's thread that starts servers has ended"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("rpr's thread that starts servers has ended"))?
}

/// Sets the child's parent-death signal to `SIGKILL`.
///
/// In the child, between `fork` and `exec`, this arms the signal, then checks that the
/// parent is still the process that forked: if the host died before the signal was
/// armed, the child has been re-parented already, no signal will ever come, and the
/// spawn fails instead of `exec`-ing an orphan.
#[cfg(target_os = "linux")]
#[expect(
    unsafe_code,
    reason = "`pre_exec` is unsafe; the closure only makes two system calls"
)]
fn die_with_this_process(cmd: &mut Command) {
    use nix::sys::prctl::set_pdeathsig;
    use nix::sys::signal::Signal;
    use nix::unistd::{Pid, getppid};
    use std::os::unix::process::CommandExt;

    let parent = Pid::this();
    // SAFETY: the closure runs in the child after `fork`, where only
    // async-signal-safe operations are allowed. It calls `prctl(PR_SET_PDEATHSIG)`
    // and `getppid()`, both plain system calls; it reads `parent`, a copied integer;
    // on failure it builds an `io::Error` from a raw errno value, which neither
    // allocates nor takes a lock. It touches no heap, lock, stdio or thread-local.
    unsafe {
        cmd.pre_exec(move || {
            set_pdeathsig(Signal::SIGKILL)?;
            if getppid() == parent {
                Ok(())
            } else {
                // The host died before the signal was armed: do not run the server.
                Err(io::Error::from_raw_os_error(nix::libc::ESRCH))
            }
        });
    }
}
