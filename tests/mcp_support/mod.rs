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
    /// Every request and notification the fault server received (`--request-log`).
    pub(crate) requests: PathBuf,
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
            requests: dir.join("requests.jsonl"),
            dir,
            _owned: None,
        }
    }

    /// The fault server with `--effects`, `--state`, `--pid-file`, `--request-log` and
    /// `--fault`.
    pub(crate) fn command(&self, fault: &str) -> ServerCommand {
        ServerCommand::new(env!("CARGO_BIN_EXE_rpr-fault-server"))
            .arg("--effects")
            .arg(&self.effects)
            .arg("--state")
            .arg(&self.state)
            .arg("--pid-file")
            .arg(&self.pid_file)
            .arg("--request-log")
            .arg(&self.requests)
            .arg("--fault")
            .arg(fault)
    }

    /// Waits (up to 10 s) until the server received a `tools/call` (it logs a request as
    /// it reads it, before a slow fault's sleep): the request is then the server's.
    pub(crate) fn wait_for_call(&self) {
        assert!(
            eventually(Duration::from_secs(10), || {
                std::fs::read_to_string(&self.requests).is_ok_and(|log| {
                    log.lines().any(|l| {
                        serde_json::from_str::<serde_json::Value>(l)
                            .is_ok_and(|r| r["method"] == "tools/call")
                    })
                })
            }),
            "the server never received the tools/call"
        );
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

/// How a test starts the fault server: directly, or through a launcher that puts the real
/// server somewhere the host's process group does not reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Launch {
    /// The server is the host's child.
    Direct,
    /// `sh -c '… & wait'`: the server is a grandchild, in the shell's process group.
    Shell,
    /// `sh -c 'setsid … & wait'`: the server is a grandchild in a session (and process
    /// group) of its own; the shell waits for it.
    Setsid,
    /// A daemonizing wrapper: `sh -c '(setsid … &); exit 0'`. The server is re-parented
    /// away from the host, in a session of its own, and the wrapper exits at once.
    DoubleFork,
}

impl Launch {
    /// The name a test passes to a child process.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Shell => "shell",
            Self::Setsid => "setsid",
            Self::DoubleFork => "double-fork",
        }
    }

    /// The launch named by [`Launch::name`]; `Direct` for anything else.
    pub(crate) fn named(name: &str) -> Self {
        [Self::Shell, Self::Setsid, Self::DoubleFork]
            .into_iter()
            .find(|l| l.name() == name)
            .unwrap_or(Self::Direct)
    }

    /// The fault server with `args`, started this way. A background job's stdin would be
    /// `/dev/null`, so the wrappers hand it the pipe explicitly (fd 3).
    pub(crate) fn command(self, args: &[std::ffi::OsString]) -> ServerCommand {
        let bin = env!("CARGO_BIN_EXE_rpr-fault-server");
        let script = match self {
            Self::Direct => return ServerCommand::new(bin).args(args),
            Self::Shell => "exec 3<&0; \"$0\" \"$@\" <&3 3<&- & wait",
            Self::Setsid => "exec 3<&0; /usr/bin/setsid \"$0\" \"$@\" <&3 3<&- & wait",
            Self::DoubleFork => "exec 3<&0; (/usr/bin/setsid \"$0\" \"$@\" <&3 3<&- &); exit 0",
        };
        ServerCommand::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg(bin)
            .args(args)
    }
}

impl Fixture {
    /// [`Fixture::command`] with `extra` arguments, started as `launch` says.
    pub(crate) fn launched(&self, launch: Launch, fault: &str, extra: &[&str]) -> ServerCommand {
        let mut args: Vec<std::ffi::OsString> = vec![
            "--effects".into(),
            self.effects.clone().into(),
            "--state".into(),
            self.state.clone().into(),
            "--pid-file".into(),
            self.pid_file.clone().into(),
            "--request-log".into(),
            self.requests.clone().into(),
            "--fault".into(),
            fault.into(),
        ];
        args.extend(extra.iter().map(Into::into));
        launch.command(&args)
    }

    /// Waits (up to 10 s) for the server started in this fixture to write its pid file.
    pub(crate) fn wait_for_server_pid(&self) -> u32 {
        assert!(
            eventually(Duration::from_secs(10), || std::fs::read_to_string(
                &self.pid_file
            )
            .is_ok_and(|s| s.trim().parse::<u32>().is_ok())),
            "the server never wrote its pid file"
        );
        self.server_pid()
    }
}

/// Whether `pid` is a live process (a zombie is not: it has exited).
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rfind(')')
            .and_then(|at| stat[at + 1..].split_whitespace().next())
            .unwrap_or("X");
        !matches!(state, "Z" | "X" | "x")
    })
}

/// Asserts that the process `pid` is gone within `limit`.
pub(crate) fn assert_dies_within(pid: u32, limit: Duration, what: &str) {
    assert!(
        eventually(limit, || !alive(pid)),
        "server process {pid} still alive {limit:?} after {what}"
    );
}
