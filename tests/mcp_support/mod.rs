//! Shared helpers for the `mcp_*` integration tests: temp dirs, the fault server
//! command, fast configs and the orphan check.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg};
use nix::unistd::Pid;
use rpr::mcp::{ServerCommand, SessionConfig};

/// A temp dir holding the fault server's effects, state and pid files.
pub(crate) struct Fixture {
    pub(crate) dir: PathBuf,
    pub(crate) effects: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) pid_file: PathBuf,
    /// The directory, removed on drop; `None` for [`Fixture::at`].
    _owned: Option<tempfile::TempDir>,
}

impl Fixture {
    /// A fresh directory, removed when the fixture drops.
    pub(crate) fn new(name: &str) -> Self {
        let owned = tempfile::Builder::new()
            .prefix(&format!("rpr-mcp-{name}-"))
            .tempdir()
            .expect("create temp dir");
        let dir = owned.path().to_owned();
        Self {
            _owned: Some(owned),
            ..Self::at(dir)
        }
    }

    /// The fixture in an existing directory (made by another process's `new`); dropping
    /// it leaves the directory alone.
    pub(crate) fn at(dir: PathBuf) -> Self {
        Self {
            effects: dir.join("effects.jsonl"),
            state: dir.join("state.json"),
            pid_file: dir.join("server.pid"),
            dir,
            _owned: None,
        }
    }

    /// The fault server with `--effects`, `--state`, `--pid-file` and `--fault`.
    pub(crate) fn command(&self, fault: &str) -> ServerCommand {
        ServerCommand::new(env!("CARGO_BIN_EXE_rpr-fault-server"))
            .arg("--effects")
            .arg(&self.effects)
            .arg("--state")
            .arg(&self.state)
            .arg("--pid-file")
            .arg(&self.pid_file)
            .arg("--fault")
            .arg(fault)
    }

    /// Lines in the effects file (0 when it does not exist).
    pub(crate) fn effects(&self) -> usize {
        std::fs::read_to_string(&self.effects).map_or(0, |s| s.lines().count())
    }

    /// Waits up to `limit` for the effects file to reach `n` lines; returns the count.
    pub(crate) fn wait_for_effects(&self, n: usize, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        while self.effects() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.effects()
    }

    /// The pid the last server started in this fixture wrote.
    pub(crate) fn server_pid(&self) -> u32 {
        std::fs::read_to_string(&self.pid_file)
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }
}

/// A config with short shutdown waits and timeouts, so tests stay fast.
pub(crate) fn fast_config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(10);
    config.transport.close_wait = Duration::from_millis(1500);
    config.transport.term_wait = Duration::from_millis(1500);
    config
}

/// Asserts that neither the process `pid` nor its process group exists any more.
pub(crate) fn assert_gone(pid: u32) {
    let pid = Pid::from_raw(i32::try_from(pid).expect("pid fits i32"));
    assert_eq!(
        kill(pid, None),
        Err(Errno::ESRCH),
        "server process {pid} outlived its session"
    );
    assert_eq!(
        killpg(pid, None),
        Err(Errno::ESRCH),
        "process group {pid} outlived its session"
    );
}

/// Polls `f` until it returns true or `limit` passes.
pub(crate) fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
