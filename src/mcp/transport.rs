//! The stdio subprocess transport: spawn, drain stderr, and the shutdown ladder.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::McpError;
use crate::executor::CarrierCgroup;
use crate::process::sentinel::Sentinel;
use crate::process::spawner;
use crate::process::tree::{Cgroup, Planned};

/// How long the last rung waits for the killed tree to be gone (a process in
/// uninterruptible sleep dies only when it wakes).
const TREE_KILL_WAIT: Duration = Duration::from_secs(5);

/// How to start an MCP server: a program and its arguments (no shell), and an
/// explicit environment.
///
/// By default the child gets **only** the variables set with [`ServerCommand::env`]
/// (not even `PATH`), so no secret of the host leaks by accident; opt in to the
/// host's environment with [`ServerCommand::inherit_env`]. The program path is
/// resolved by the operating system: give an absolute path when `PATH` is not passed.
///
/// Its `Debug` form (what an error message may show) names the environment variables but
/// never their values: hosts put a server's keys and tokens there.
#[derive(Clone)]
pub struct ServerCommand {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    inherit_env: bool,
    current_dir: Option<PathBuf>,
}

impl std::fmt::Debug for ServerCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<String> = self
            .env
            .iter()
            .map(|(k, _)| format!("{}=<redacted>", k.to_string_lossy()))
            .collect();
        f.debug_struct("ServerCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("inherit_env", &self.inherit_env)
            .field("current_dir", &self.current_dir)
            .finish()
    }
}

impl ServerCommand {
    /// A command that runs `program` with no arguments and an empty environment.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            inherit_env: false,
            current_dir: None,
        }
    }

    /// Adds one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds several arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets one environment variable for the child.
    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Whether the child also inherits the host's whole environment (default: no).
    #[must_use]
    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// Runs the child in `dir`.
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// The program to run.
    #[must_use]
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The program and its arguments, as text (a part that is not UTF-8 is shown lossily):
    /// what a pathway records so that an operator step can start the server again. The
    /// environment is not part of it.
    #[must_use]
    pub fn command_line(&self) -> Vec<String> {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The directory the child starts in, as given to [`ServerCommand::current_dir`]
    /// (`None`: this process's own).
    #[must_use]
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.current_dir.as_deref()
    }
}

/// Timing and buffer settings of the transport.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TransportConfig {
    /// How long to wait for the server to exit after its stdin is closed (default 2 s).
    pub close_wait: Duration,
    /// How long to wait after `SIGTERM` before `SIGKILL` (default 2 s).
    pub term_wait: Duration,
    /// How many of the last bytes of the server's stderr are kept (default 64 KiB).
    pub stderr_capacity: usize,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            close_wait: Duration::from_secs(2),
            term_wait: Duration::from_secs(2),
            stderr_capacity: 64 * 1024,
        }
    }
}

/// How the server's processes ended during [`Transport::shutdown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownStage {
    /// It exited on its own: after its stdin was closed, or earlier.
    Exited,
    /// It exited after `SIGTERM` was sent to its process group (and, where it runs in a
    /// cgroup of its own, to every process of its tree).
    Terminated,
    /// It had to be killed with `SIGKILL`.
    Killed,
    /// There is no server process: the session ran over streams the caller gave
    /// ([`Session::over_streams`](super::Session::over_streams)). Its writer was closed and
    /// its reader told to stop; nothing is known of the other end, which may still run and
    /// may still act on what it was sent. No exit status ([`ShutdownReport::status`] is
    /// `None`).
    NoProcess {
        /// Whether the writer thread ended within its wait (a second), having written the
        /// lines queued before the shutdown and dropped the caller's writer (for a pipe,
        /// the other end then reads end of input). When not, it is still blocked in a
        /// write (the other end is not reading) and is left detached; the writer is
        /// dropped when that write returns.
        writer_closed: bool,
        /// Whether the reader thread ended within its wait (a second). When not, it is
        /// still blocked in a read of the caller's reader and is left detached; it ends
        /// when that read returns (data, end of input or an error), dropping what it read.
        reader_stopped: bool,
    },
}

/// What the shutdown ladder did (or, for a session over streams, what its shutdown did:
/// [`ShutdownStage::NoProcess`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// The rung at which the server ended ([`ShutdownStage::NoProcess`]: there was no
    /// process).
    pub stage: ShutdownStage,
    /// Its exit status, when it could be collected (never without a process).
    pub status: Option<ExitStatus>,
    /// Time the ladder took.
    pub elapsed: Duration,
}

/// A running MCP server child process in its own process group and, on Linux where one
/// can be created, in a cgroup (v2) of its own that holds every process it starts.
///
/// stdin and stdout are pipes (taken by the session), stderr is drained by a thread
/// into a ring buffer of the last [`TransportConfig::stderr_capacity`] bytes, so a
/// chatty server never blocks on a full pipe. Dropping the transport runs the
/// shutdown ladder, so no process of the server outlives this value.
///
/// A server's descendants may leave its process group (`setsid`, a daemonizing fork);
/// they stay in its cgroup. The ladder signals the whole cgroup, and a sentinel process
/// kills it when the host ends without running the ladder (killed, interrupted): the
/// parent-death signal reaches only the server's direct child. Without a cgroup (another
/// platform, no writable cgroup2 hierarchy) only the process group is reached, and the
/// server's carrier can never be shown gone (see [`crate::executor::Carrier`]).
#[derive(Debug)]
pub struct Transport {
    child: Child,
    pgid: Pid,
    cgroup: Option<Cgroup>,
    sentinel: Option<Sentinel>,
    /// Whether the ladder left the cgroup empty (so no process of the tree is left).
    tree_gone: bool,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Arc<Mutex<StderrRing>>,
    stderr_thread: Option<JoinHandle<()>>,
    config: TransportConfig,
    report: Option<ShutdownReport>,
}

impl Transport {
    /// Starts the server: no shell, its own process group, piped stdio.
    ///
    /// On Linux the server also gets `SIGKILL` as its parent-death signal, so it dies
    /// with the host however the host ends. The fork happens on one thread that lives as
    /// long as the process (the kernel sends the signal when the forking *thread* exits),
    /// so any thread may call `spawn`, also one that ends before the server. If the host
    /// is already gone when the child would `exec`, the spawn fails
    /// ([`McpError::Spawn`]). Other platforms have no parent-death signal.
    ///
    /// On Linux the server runs in a cgroup (v2) of its own where one can be created
    /// under the host's cgroup, and a sentinel process (forked from the host) kills that
    /// whole cgroup when the host ends: every process the server starts, also one that
    /// left its process group, dies with the host.
    pub fn spawn(command: &ServerCommand, config: TransportConfig) -> Result<Self, McpError> {
        if let Some(planned) = Planned::next() {
            // The sentinel first: from the moment the cgroup exists, the host's end
            // removes it.
            let sentinel = Sentinel::start(planned.dir());
            if let Some(cgroup) = planned.create() {
                if let Ok(child) = cgroup
                    .procs_for_joining()
                    .and_then(|procs| spawner::spawn(build(command, Some(procs))))
                {
                    return Ok(Self::new(child, Some(cgroup), sentinel, config));
                }
                // The child never ran the server (joining the cgroup, or the `exec`,
                // failed): try once more without a cgroup, which reports the error of
                // the command itself.
                cgroup.remove();
            }
            drop(sentinel);
        }
        let child = spawner::spawn(build(command, None)).map_err(|source| McpError::Spawn {
            program: command.program.to_string_lossy().into_owned(),
            source,
        })?;
        Ok(Self::new(child, None, None, config))
    }

    fn new(
        mut child: Child,
        cgroup: Option<Cgroup>,
        sentinel: Option<Sentinel>,
        config: TransportConfig,
    ) -> Self {
        let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let stderr = Arc::new(Mutex::new(StderrRing::new(config.stderr_capacity)));
        let stderr_thread = child.stderr.take().and_then(|pipe| {
            let ring = Arc::clone(&stderr);
            std::thread::Builder::new()
                .name("rpr-mcp-stderr".into())
                .spawn(move || drain_stderr(pipe, &ring))
                .ok()
        });
        Self {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            pgid,
            cgroup,
            sentinel,
            tree_gone: false,
            stderr,
            stderr_thread,
            config,
            report: None,
        }
    }

    /// The cgroup that holds every process of the server, if it runs in one.
    pub(crate) fn cgroup(&self) -> Option<CarrierCgroup> {
        self.cgroup.as_ref().map(|c| c.record().clone())
    }

    /// The server's process id (also its process group id).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the shutdown ladder has run and reaped the server, and left no process of
    /// it: of its process group, and of its cgroup where it runs in one.
    #[must_use]
    pub(crate) fn reaped(&self) -> bool {
        self.report.is_some() && (self.cgroup.is_none() || self.tree_gone)
    }

    /// Takes the server's stdin pipe (once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Takes the server's stdout pipe (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The last bytes the server wrote to stderr, decoded lossily as UTF-8.
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        let ring = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = ring.bytes.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Whether the server process has exited (it is not reaped by this call).
    pub fn has_exited(&mut self) -> bool {
        self.report.is_some() || leader_exited(&mut self.child)
    }

    /// Runs the shutdown ladder once and reports; later calls return the same report.
    ///
    /// The server has exited when its process has, and, where it runs in a cgroup of its
    /// own, every process of that cgroup has too.
    ///
    /// 1. close the server's stdin (if the transport still holds it; a session closes
    ///    its own handle first) and wait [`TransportConfig::close_wait`];
    /// 2. if it is still running, `SIGTERM` its process group and every process of its
    ///    cgroup, and wait [`TransportConfig::term_wait`];
    /// 3. `SIGKILL` the process group and the cgroup, and wait for the cgroup to be
    ///    empty. This rung runs even when the server exited on its own, to remove any
    ///    process it left behind. The server process is not reaped until after this
    ///    signal, so its group id cannot have been reused by an unrelated process;
    /// 4. reap the server, and remove its emptied cgroup.
    pub fn shutdown(&mut self) -> ShutdownReport {
        if let Some(report) = &self.report {
            return report.clone();
        }
        let start = Instant::now();
        drop(self.stdin.take());
        let stage = if self.wait_for_exit(self.config.close_wait) {
            ShutdownStage::Exited
        } else {
            self.signal_tree(Signal::SIGTERM);
            if self.wait_for_exit(self.config.term_wait) {
                ShutdownStage::Terminated
            } else {
                ShutdownStage::Killed
            }
        };
        let _ = killpg(self.pgid, Signal::SIGKILL);
        if let Some(cgroup) = &self.cgroup {
            self.tree_gone = cgroup.kill_and_wait(TREE_KILL_WAIT);
        }
        let status = self.child.wait().ok();
        if self.tree_gone
            && let Some(cgroup) = &self.cgroup
        {
            cgroup.remove();
        }
        // The tree is gone or killed: the sentinel has nothing left to do but remove
        // the cgroup if it is still there.
        if let Some(sentinel) = &mut self.sentinel {
            sentinel.finish();
        }
        if let Some(handle) = self.stderr_thread.take() {
            join_briefly(handle);
        }
        let report = ShutdownReport {
            stage,
            status,
            elapsed: start.elapsed(),
        };
        self.report = Some(report.clone());
        report
    }

    /// Sends `signal` to the server's process group and to every process of its cgroup.
    fn signal_tree(&self, signal: Signal) {
        let _ = killpg(self.pgid, signal);
        if let Some(cgroup) = &self.cgroup {
            cgroup.signal_all(signal);
        }
    }

    /// Waits up to `limit` for the server process, and every process of its cgroup, to
    /// exit.
    fn wait_for_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut pause = PollPause::default();
        loop {
            if leader_exited(&mut self.child)
                && self.cgroup.as_ref().is_none_or(|c| c.empty() == Some(true))
            {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            pause.sleep();
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The command that starts the server: no shell, its own process group, piped stdio,
/// and, with `cgroup_procs` (its cgroup's `cgroup.procs`),
/// moved into that cgroup before it runs, so every process it starts is in it too.
fn build(command: &ServerCommand, cgroup_procs: Option<std::fs::File>) -> Command {
    let mut cmd = Command::new(&command.program);
    cmd.args(&command.args);
    if !command.inherit_env {
        cmd.env_clear();
    }
    cmd.envs(command.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = &command.current_dir {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(procs) = cgroup_procs {
        join_cgroup(&mut cmd, procs);
    }
    cmd
}

/// Moves the child into a cgroup before it runs the server: it writes `0` (itself) to
/// the cgroup's `cgroup.procs`, opened by the parent. If that fails the child does not
/// run the server, so a server never runs outside the cgroup its carrier names.
#[expect(
    unsafe_code,
    reason = "`pre_exec` is unsafe; the closure only makes one system call"
)]
fn join_cgroup(cmd: &mut Command, procs: std::fs::File) {
    // SAFETY: the closure runs in the child after `fork`, where only
    // async-signal-safe operations are allowed. It makes one `write(2)` of a static
    // byte to a descriptor opened before the fork (the `File` is moved into the
    // closure and never dropped in the child); on failure it converts an errno value
    // into an `io::Error`, which does not allocate. No heap, lock, stdio or
    // thread-local is touched.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::write(&procs, b"0")
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
}

/// Whether the child has exited, without reaping it (so its pid and process group
/// id stay reserved until [`Child::wait`]).
fn leader_exited(child: &mut Child) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    match waitid(
        Id::Pid(pid),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
    ) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) | Err(nix::errno::Errno::ECHILD) => true,
        Err(_) => false,
    }
}

/// The pauses of a wait that polls: 100 µs, doubling to at most 5 ms. A server or thread
/// that ends at once (the common case: its stdin or pipe has just closed) is seen within
/// a fraction of a millisecond; one that takes longer is polled every 5 ms.
#[derive(Default)]
struct PollPause(u32);

impl PollPause {
    /// The next pause.
    fn next(&mut self) -> Duration {
        let pause = Duration::from_micros(100 << self.0.min(6)).min(Duration::from_millis(5));
        self.0 = self.0.saturating_add(1);
        pause
    }

    fn sleep(&mut self) {
        std::thread::sleep(self.next());
    }
}

/// Joins a helper thread if it ends within a short while; otherwise leaves it
/// detached (a grandchild outside the process group may still hold the pipe open).
pub(crate) fn join_briefly(handle: JoinHandle<()>) {
    ended_briefly(handle);
}

/// [`join_briefly`], and whether the thread ended (and was joined).
pub(crate) fn ended_briefly(handle: JoinHandle<()>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut pause = PollPause::default();
    while !handle.is_finished() && Instant::now() < deadline {
        pause.sleep();
    }
    if handle.is_finished() {
        let _ = handle.join();
        true
    } else {
        false
    }
}

#[derive(Debug)]
struct StderrRing {
    bytes: VecDeque<u8>,
    capacity: usize,
}

impl StderrRing {
    fn new(capacity: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            capacity,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }
}

fn drain_stderr(mut pipe: impl Read, ring: &Mutex<StderrRing>) {
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => ring
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod debug_tests {
    use super::ServerCommand;

    #[test]
    fn debug_names_environment_variables_but_never_their_values() {
        let command = ServerCommand::new("/usr/bin/server")
            .arg("--root")
            .env("API_TOKEN", "sk-live-1234567890")
            .env("HOME", "/home/someone");
        let text = format!("{command:?}");
        assert!(!text.contains("sk-live-1234567890"), "{text}");
        assert!(!text.contains("/home/someone"), "{text}");
        assert!(text.contains("API_TOKEN=<redacted>"), "{text}");
        assert!(
            text.contains("/usr/bin/server") && text.contains("--root"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod poll_tests {
    use std::time::Duration;

    use super::PollPause;

    #[test]
    fn a_poll_pauses_100_us_doubling_to_at_most_5_ms() {
        let mut pause = PollPause::default();
        let pauses: Vec<Duration> = (0..10).map(|_| pause.next()).collect();
        let us = |n| Duration::from_micros(n);
        assert_eq!(
            pauses,
            [
                us(100),
                us(200),
                us(400),
                us(800),
                us(1600),
                us(3200),
                us(5000),
                us(5000),
                us(5000),
                us(5000)
            ]
        );
        // Far along, still 5 ms (no overflow of the shift or the count).
        let mut late = PollPause(u32::MAX - 1);
        assert_eq!(late.next(), us(5000));
        assert_eq!(late.next(), us(5000));
    }
}
