//! The chaos soak (issue 8): governed mutating calls through `rpr`'s operator commands against the
//! real `@modelcontextprotocol/server-filesystem`, while a supervisor kills host processes
//! and server processes at random moments; then every call is settled and the effects the
//! server performed are counted on the server side.
//!
//! * **Hosts.** `hosts` worker threads share one database. Each works through its share of
//!   the calls, one at a time: `rpr call … write_file --key K --approve-as alice` with a
//!   unique key, a unique path and a unique content per call, then settles the call by the
//!   state the database shows, each step one host process: the same `call` again (a replay,
//!   or the admission of a pathway left `proposed`), `unresolved` (the recovery scan),
//!   `reconcile` (readback), `repair`, `resume`, `approve`. Every host process is the `rpr`
//!   binary built by cargo, started in its own process group.
//! * **Servers.** The host starts the server as `node --require tests/peers/slow-write.cjs
//!   mcp-server-filesystem ROOT` (from an `mcpServers` config): the preload delays each write
//!   by `slow_write_ms` and appends one line per performed write, with `O_APPEND` and fsync,
//!   to the effects log, naming the path, the content and the server's parent at start and
//!   at the time of the write.
//! * **Supervisor.** A thread with its own seeded generator. A share of the host processes
//!   (`host_kill_percent`) get a kill planned at a random moment within `slow_write_ms` +
//!   0.5 s of their start, with SIGKILL, SIGTERM or SIGINT (SIGINT to the host's process
//!   group, as Ctrl-C does); and about every `server_kill_ms` one live server process of the
//!   run, chosen at random, gets one of the three signals. `call`, `approve`, `resume` and
//!   `reconcile` take SIGINT and SIGTERM and end by themselves (counted apart: interrupts
//!   taken by host processes).
//! * **Stops.** Of the dispatching host processes (`call`, `approve`, `resume`) without a
//!   kill, `stop_percent` get SIGSTOP (three in four within the write delay after the host
//!   printed that its attempt record is committed; the others within the write delay plus
//!   0.5 s of their start), half of the time with their server processes. The supervisor
//!   holds each past its lease (`lease_secs`, passed as `--lease`), then continues it,
//!   continues it and plans a kill, or kills it while stopped. A worker whose host is still
//!   stopped past its lease *parks* it and settles the call with other host processes.
//! * **Host names.** `other_host_percent` of the host processes run in a UTS namespace of
//!   their own (`chaos-h0`..`chaos-h2`): an owner on another host name is judged by its
//!   lease alone, so it is taken over on a lapse (`owner_fate: lapsed`), and a readback that
//!   then finds nothing is unresolved until the owner's own outcome is recorded or the
//!   owner is shown gone on its own host name.
//! * **Settling.** Each worker takes up to `max_steps` steps per call with the kills on;
//!   after all workers are done and the supervisor has stopped, a final pass settles every
//!   call left unsettled, with no kills. A recovery or readback that changed nothing waits
//!   for the worker's parked hosts to end, else runs again on the owner's host name. The
//!   soak never attests (accepting the risk of an owner that may still send could send
//!   twice); an attestation in the ledger is a failure.
//! * **Figures.** A call's content written more than once is a *double effect*. The log has
//!   an intent line before each write's syscall and a done line after it; a server killed
//!   between the two leaves an *interrupted write*. An interrupted *create* (the 'wx' write,
//!   which fails on an existing file) is settled: at most one create of a path can succeed
//!   and nothing deletes a call's file, so beside a logged create it did not take effect, and
//!   alone the file says whether it did. An interrupted *replace* (a rename) cannot be
//!   settled and counts as performed, so the double-effect figure is an upper bound. A call
//!   whose pathway ends unknown because its server was killed inside its own create (the
//!   file exists with other content: no readback can decide) is *torn*, reported apart: the
//!   pathway says what is true and waits for an operator. A call with
//!   no pathway, or whose pathway does not end terminal otherwise, is *lost*; `rpr verify` runs every
//!   `verify_every` calls per worker and at the end (each non-zero exit is a *verify
//!   failure*); a server process of the run still alive when the final pass is done is an
//!   *orphan*. Orphans are then waited for (they may still write), killed if they outlast
//!   the wait, and the effects log is read only after that, so a late write still counts.
//!
//! Timing only decides how often a kill lands in the write delay; no figure is a time
//! measurement except the wall time.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "shared by tests/chaos.rs and benches/chaos.rs, which use different parts"
)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use rpr::store::{PathwayRecord, ReadStore, StoreError};
use rpr::{AttemptStatus, State};
use serde_json::{Value, json};

/// What a soak run does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Governed mutating calls (`write_file`, one unique file and content each).
    pub calls: usize,
    /// Host worker threads, each running one host process at a time, on one database.
    pub hosts: usize,
    /// Seeds the supervisor's and the workers' generators (kill plans, settle choices).
    pub seed: u64,
    /// The server's delay between a `write_file` request and the write.
    pub slow_write_ms: u64,
    /// The share of host processes that get a kill planned, in percent.
    pub host_kill_percent: u64,
    /// The mean interval between two server kills (0: no server kills).
    pub server_kill_ms: u64,
    /// Each worker runs `rpr verify` after every this many settled calls (0: only at the end).
    pub verify_every: usize,
    /// Settle steps per call while the kills are on; the final pass takes the rest.
    pub max_steps: usize,
    /// Prints a line per settled call to stderr.
    pub progress: bool,
    /// Keeps the scratch directory (database, effects log, outputs) after the run.
    pub keep: bool,
    /// The share of dispatching host processes (`call`, `approve`, `resume`) without a kill
    /// planned that get a SIGSTOP planned instead, in percent: held stopped past their lease
    /// (and, half of the time, their server with them), then continued or killed.
    pub stop_percent: u64,
    /// The lease of every attempt (`rpr … --lease`), in seconds.
    pub lease_secs: u64,
    /// The share of host processes run on another host name (a UTS namespace of their own,
    /// `chaos-h0` to `chaos-h2`), in percent: an owner on another host name cannot be judged
    /// by its process, only by its lease.
    pub other_host_percent: u64,
    /// A PostgreSQL server (`postgres://…`) to hold the database, in a schema of the run's
    /// own, instead of a SQLite file (needs the `postgres` feature).
    pub postgres: Option<String>,
    /// Starts no new call after this long; the calls started are settled and counted.
    pub stop_after: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            calls: 60,
            hosts: 3,
            seed: 1,
            slow_write_ms: 2500,
            host_kill_percent: 50,
            server_kill_ms: 2500,
            verify_every: 10,
            max_steps: 40,
            progress: false,
            keep: false,
            stop_percent: 15,
            lease_secs: 2,
            other_host_percent: 50,
            postgres: None,
            stop_after: None,
        }
    }
}

/// The figures of a run.
#[derive(Debug, Default)]
pub struct Report {
    /// The options, for the table's head.
    pub calls: usize,
    /// Host worker threads.
    pub hosts: usize,
    /// The seed.
    pub seed: u64,
    /// The server's write delay.
    pub slow_write_ms: u64,
    /// Wall time of the whole run, settling and counting included.
    pub wall: Duration,
    /// Host processes run, by command.
    pub commands: BTreeMap<String, u64>,
    /// Kills of host processes that landed (the process died of the signal), by signal.
    pub host_kills: BTreeMap<String, u64>,
    /// SIGINT and SIGTERM that host processes took and ended by themselves (`call`,
    /// `approve`, `resume` and `reconcile` stop before the send, or finish and record a
    /// call in flight, docs/host.md), by signal.
    pub host_interrupts: BTreeMap<String, u64>,
    /// Kills of server processes sent to a live process of the run, by signal.
    pub server_kills: BTreeMap<String, u64>,
    /// Repeated `call`s answered by a replay of the stored pathway.
    pub replays: u64,
    /// Repeated `call`s that admitted a pathway left `proposed`.
    pub admitted_after_proposed: u64,
    /// Host processes that exited 1 without being killed, by their first error line.
    pub host_errors: BTreeMap<String, u64>,
    /// The first error line of each kind of host error.
    pub host_error_samples: BTreeMap<String, String>,
    /// Host processes killed by the watchdog after running 5 minutes.
    pub hung: u64,
    /// Calls the workers could not settle with the kills on (settled by the final pass).
    pub settled_late: usize,
    /// Final states of the calls' pathways (`none`: no pathway).
    pub final_states: BTreeMap<String, u64>,
    /// Ledger events by kind, at the end.
    pub events: BTreeMap<String, u64>,
    /// Calls whose content the server wrote more than once.
    pub double_effects: usize,
    /// Writes beyond the first of a call's content.
    pub extra_writes: usize,
    /// The keys of the calls written more than once, with their write counts (first 20).
    pub doubled: Vec<(String, usize)>,
    /// Calls with no pathway, or whose pathway is not terminal after the final pass (other
    /// than `torn_unresolved`).
    pub lost: usize,
    /// Calls left unknown because the server was killed inside its own create: the file
    /// exists with other content (empty, or a prefix), so no readback can decide; the
    /// pathway says so and waits for an operator. Not a failure of the soak.
    pub torn_unresolved: usize,
    /// `rpr verify` runs.
    pub verify_runs: u64,
    /// `rpr verify` runs that did not exit 0 (the first lines of the first one).
    pub verify_failures: u64,
    /// The output of the first failed `rpr verify`.
    pub verify_failure_text: Option<String>,
    /// Server processes of the run still alive after the final pass.
    pub orphans: usize,
    /// Writes performed by a server whose parent (its host) had died.
    pub orphan_writes: usize,
    /// Writes whose server died between the write's intent line and its end line.
    pub interrupted_writes: usize,
    /// Of those, the creates: settled (a create fails on an existing file, so at most one
    /// create of a path takes effect; the logged one or the file says which).
    pub interrupted_settled: usize,
    /// Of those, the replaces: not settled, counted as performed (an upper bound).
    pub interrupted_ambiguous: usize,
    /// Completed calls with no logged write (the instrumentation would be wrong).
    pub completed_without_effect: usize,
    /// Logged writes whose content is no call's (the instrumentation would be wrong).
    pub foreign_effects: usize,
    /// Where the run's files are (kept with `keep`).
    pub dir: PathBuf,
    /// The store: `SQLite` or `PostgreSQL`.
    pub store: String,
    /// The lease of every attempt, in seconds.
    pub lease_secs: u64,
    /// Whether host processes ran on other host names (UTS namespaces).
    pub other_hosts: bool,
    /// Calls not started because `stop_after` had passed.
    pub not_started: usize,
    /// SIGSTOPs that landed on a live host process; of those, with its server stopped too.
    pub stops: u64,
    /// Of the stops, those where the host's server processes were stopped with it.
    pub stops_with_server: u64,
    /// Stopped hosts still stopped past their lease, while the call was settled by other
    /// host processes.
    pub stopped_past_lease: u64,
    /// Stopped hosts continued (SIGCONT).
    pub continued: u64,
    /// Stopped hosts killed (SIGKILL) while stopped, never continued.
    pub killed_while_stopped: u64,
    /// Continued hosts given a kill plan (they may have ended first).
    pub kill_planned_after_continue: u64,
    /// How the hosts that were stopped ended: by signal, or `exit N`.
    pub stopped_ends: BTreeMap<String, u64>,
    /// Takeovers of an in-flight attempt (`recovered_unknown`) whose owner's lease lapsed,
    /// the owner not proven gone (`owner_fate: lapsed`).
    pub takeovers_lapsed: u64,
    /// Takeovers whose owner was proven gone.
    pub takeovers_gone: u64,
    /// Readbacks that stayed unresolved because the owner was taken over on a lapse alone
    /// (and may still send).
    pub unresolved_for_lapse: u64,
    /// Steps taken on the owner's host name after the same step elsewhere changed nothing
    /// (where the owner's process can be shown gone).
    pub on_owner_host: u64,
    /// Waits for a stopped (or continued, still running) host to end before a step.
    pub waits_for_stopped: u64,
    /// `rpr attest` runs (the soak never attests: accepting a risk could legitimately
    /// send twice).
    pub attestations: u64,
}

impl Report {
    /// The figures that must be zero, with their values, when not zero.
    #[must_use]
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut must_be_zero = |name: &str, value: u64| {
            if value != 0 {
                out.push(format!("{name}: {value} (must be 0)"));
            }
        };
        must_be_zero("double effects", count(self.double_effects));
        must_be_zero("lost pathways", count(self.lost));
        must_be_zero("verify failures", self.verify_failures);
        must_be_zero("orphan processes", count(self.orphans));
        must_be_zero(
            "completed calls without an effect",
            count(self.completed_without_effect),
        );
        must_be_zero("effects of no call", count(self.foreign_effects));
        must_be_zero("attestations", self.attestations);
        out
    }

    /// The report as a table, for people.
    #[must_use]
    pub fn table(&self) -> String {
        fn by_key(map: &BTreeMap<String, u64>) -> String {
            if map.is_empty() {
                return "-".into();
            }
            map.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
        let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
        let mut t = String::new();
        let _ = writeln!(
            t,
            "chaos soak: seed {}, {} calls, {} hosts on one {} database, server write delay {} ms, lease {} s{}",
            self.seed,
            self.calls,
            self.hosts,
            self.store,
            self.slow_write_ms,
            self.lease_secs,
            if self.other_hosts {
                ", hosts on other host names"
            } else {
                ""
            }
        );
        let rows: Vec<(&str, String)> = vec![
            ("wall time", format!("{:.1} s", self.wall.as_secs_f64())),
            (
                "calls (governed write_file)",
                if self.not_started > 0 {
                    format!("{} (not started: {})", self.calls, self.not_started)
                } else {
                    self.calls.to_string()
                },
            ),
            (
                "host processes",
                format!("{} ({})", total(&self.commands), by_key(&self.commands)),
            ),
            (
                "kills: host processes",
                format!("{} ({})", total(&self.host_kills), by_key(&self.host_kills)),
            ),
            (
                "interrupts taken by host processes",
                format!(
                    "{} ({})",
                    total(&self.host_interrupts),
                    by_key(&self.host_interrupts)
                ),
            ),
            (
                "kills: server processes",
                format!(
                    "{} ({})",
                    total(&self.server_kills),
                    by_key(&self.server_kills)
                ),
            ),
            (
                "stops: host processes (SIGSTOP)",
                format!(
                    "{} (server stopped too {}; still stopped past the lease {}; continued {}, killed while stopped {}, kill planned after continue {})",
                    self.stops,
                    self.stops_with_server,
                    self.stopped_past_lease,
                    self.continued,
                    self.killed_while_stopped,
                    self.kill_planned_after_continue
                ),
            ),
            ("stopped hosts ended", by_key(&self.stopped_ends)),
            (
                "takeovers of in-flight attempts",
                format!(
                    "owner lapsed {}, owner gone {}",
                    self.takeovers_lapsed, self.takeovers_gone
                ),
            ),
            (
                "readbacks unresolved: owner lapsed",
                self.unresolved_for_lapse.to_string(),
            ),
            (
                "waits for a stopped host to end",
                self.waits_for_stopped.to_string(),
            ),
            (
                "steps on the owner's host name",
                self.on_owner_host.to_string(),
            ),
            ("repeated calls replayed", self.replays.to_string()),
            (
                "repeated calls admitting a proposed pathway",
                self.admitted_after_proposed.to_string(),
            ),
            (
                "calls settled only by the final pass",
                self.settled_late.to_string(),
            ),
            (
                "host processes hung (killed after 5 min)",
                self.hung.to_string(),
            ),
            (
                "host errors (exit 1, not killed)",
                format!(
                    "{} ({})",
                    total(&self.host_errors),
                    by_key(&self.host_errors)
                ),
            ),
            ("final states", by_key(&self.final_states)),
            ("ledger events", by_key(&self.events)),
            (
                "writes by a server whose host had died",
                self.orphan_writes.to_string(),
            ),
            (
                "writes interrupted before their log line",
                format!(
                    "{} (creates, settled {}; replaces, counted as performed {})",
                    self.interrupted_writes, self.interrupted_settled, self.interrupted_ambiguous
                ),
            ),
            (
                "DOUBLE EFFECTS (must be 0)",
                format!(
                    "{} (extra writes {})",
                    self.double_effects, self.extra_writes
                ),
            ),
            ("LOST PATHWAYS (must be 0)", self.lost.to_string()),
            (
                "left unknown by a torn create (for an operator)",
                self.torn_unresolved.to_string(),
            ),
            (
                "VERIFY FAILURES (must be 0)",
                format!("{} of {} runs", self.verify_failures, self.verify_runs),
            ),
            ("ORPHAN PROCESSES (must be 0)", self.orphans.to_string()),
            (
                "completed without an effect (must be 0)",
                self.completed_without_effect.to_string(),
            ),
            (
                "effects of no call (must be 0)",
                self.foreign_effects.to_string(),
            ),
            ("attestations (must be 0)", self.attestations.to_string()),
        ];
        for (name, value) in rows {
            let _ = writeln!(t, "  {name:<45} {value}");
        }
        if !self.doubled.is_empty() {
            let list: Vec<String> = self
                .doubled
                .iter()
                .map(|(k, n)| format!("{k} ×{n}"))
                .collect();
            let _ = writeln!(t, "  written more than once: {}", list.join(", "));
        }
        for sample in self.host_error_samples.values() {
            let _ = writeln!(t, "  host error, first of its kind: {sample}");
        }
        if let Some(text) = &self.verify_failure_text {
            let _ = writeln!(t, "  first verify failure:\n{text}");
        }
        let _ = writeln!(t, "  files: {}", self.dir.display());
        t
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A small seeded generator (xorshift64*, seeded through splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` and `stream` (one stream per thread).
    #[must_use]
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with `percent` percent.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of the three signals the soak sends.
    pub fn signal(&mut self) -> Signal {
        match self.below(3) {
            0 => Signal::SIGKILL,
            1 => Signal::SIGTERM,
            _ => Signal::SIGINT,
        }
    }
}

/// Locks, ignoring poisoning (a panicking worker must not hide the figures).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `node` on `PATH`, and `mcp-server-filesystem` from `RPR_PEERS_DIR` or `target/peers`
/// (installed by `bash .ci/install-peers` when missing).
fn peers() -> Result<(PathBuf, PathBuf), String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let node = std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .ok_or("`node` was not found on PATH; the chaos soak runs server-filesystem on Node.js")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir =
        std::env::var_os("RPR_PEERS_DIR").map_or_else(|| root.join("target/peers"), PathBuf::from);
    let server = dir.join("node_modules/.bin/mcp-server-filesystem");
    if !server.exists() {
        let output = Command::new("bash")
            .arg(root.join(".ci/install-peers"))
            .env("RPR_PEERS_DIR", &dir)
            .output()
            .map_err(|e| format!("cannot run `bash .ci/install-peers`: {e}"))?;
        if !output.status.success() || !server.exists() {
            return Err(format!(
                "server-filesystem is not installed in {} and `bash .ci/install-peers` failed:\n{}",
                dir.display(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    Ok((node, server))
}

/// One governed call.
#[derive(Debug, Clone)]
struct Call {
    key: String,
    args: String,
    /// The file the call writes, relative to the server's root.
    path: String,
    content: String,
}

impl Call {
    fn new(seed: u64, index: usize, nonce: u64) -> Self {
        let key = format!("chaos-{seed}-{index}");
        let content = format!("call {index} of seed {seed} ({nonce:016x})");
        let path = format!("c{index}.txt");
        let args = json!({"path": path, "content": content}).to_string();
        Self {
            key,
            args,
            path,
            content,
        }
    }
}

/// How long a host process may run before the watchdog kills it as hung.
const HUNG: Duration = Duration::from_mins(5);

/// A host process the supervisor is to signal at `due`: a kill, or SIGSTOP.
#[derive(Debug)]
struct Plan {
    pid: i32,
    due: Instant,
    signal: Signal,
    /// A plan that waits for the host's attempt record: once its output (this file) says
    /// the record is committed, it is due after this delay.
    after_commit: Option<(PathBuf, Duration)>,
}

/// What a host prints once its attempt record is committed, before it sends the request.
const COMMITTED: &str = "attempt record committed durably";

/// What a settle step saw: the pathway's state and its last attempt's status.
type Seen = Option<(State, Option<AttemptStatus>)>;

/// A host name: this machine's, or another (a UTS namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Machine {
    This,
    Named(String),
}

/// A host process the supervisor holds stopped until `until`.
#[derive(Debug)]
struct Held {
    pid: i32,
    /// Its server processes stopped with it: (pid, start time).
    servers: Vec<(i32, u64)>,
    until: Instant,
}

/// A host process a worker stopped waiting for (it was held stopped past its lease): the
/// worker reaps it once it has ended and the supervisor holds no plan for it, so its pid
/// cannot be reused while a plan names it.
#[derive(Debug)]
struct Parked {
    child: std::process::Child,
    pid: i32,
}

/// What the supervisor counted.
#[derive(Debug, Default)]
struct Signals {
    server_kills: BTreeMap<String, u64>,
    stops: u64,
    stops_with_server: u64,
    continued: u64,
    killed_while_stopped: u64,
    kill_planned_after_continue: u64,
}

/// What the threads share.
#[derive(Debug)]
struct Ctx {
    options: Options,
    host: PathBuf,
    dir: PathBuf,
    /// The database's location: a SQLite file, or a `postgres://` URL.
    db: String,
    config: String,
    policy: String,
    /// `--lease`'s value.
    lease_text: String,
    effects: PathBuf,
    /// Identifies the run's server processes: their command line names it.
    marker: String,
    /// The server's root directory (the calls' files).
    root: PathBuf,
    plans: Mutex<Vec<Plan>>,
    /// The SIGINT or SIGTERM the supervisor sent each host process (by pid; the pid is not
    /// reaped before its entry is taken).
    interrupted: Mutex<HashMap<i32, Signal>>,
    kills_on: AtomicBool,
    /// Host processes stopped now, with when they were stopped.
    stopped: Mutex<HashMap<i32, Instant>>,
    /// Whether the database is PostgreSQL (`db` a `postgres://` location).
    postgres: bool,
    /// This machine's host name.
    hostname: String,
    /// Whether host processes may run on other host names (UTS namespaces can be made).
    other_hosts: bool,
    /// Past this, no new call starts.
    deadline: Option<Instant>,
}

/// How one host process ended.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    signal: Option<i32>,
    output: String,
    /// Held stopped past its lease: the worker stopped waiting for it (it is parked).
    parked: bool,
}

/// What one worker counted.
#[derive(Debug, Default)]
struct Tally {
    commands: BTreeMap<String, u64>,
    host_kills: BTreeMap<String, u64>,
    host_interrupts: BTreeMap<String, u64>,
    replays: u64,
    admitted_after_proposed: u64,
    host_errors: BTreeMap<String, u64>,
    host_error_samples: BTreeMap<String, String>,
    verify_runs: u64,
    verify_failures: u64,
    verify_failure_text: Option<String>,
    unsettled: Vec<usize>,
    hung: u64,
    started: Vec<usize>,
    parked: Vec<Parked>,
    stopped_past_lease: u64,
    stopped_ends: BTreeMap<String, u64>,
    on_owner_host: u64,
    waits_for_stopped: u64,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        for (k, v) in other.commands {
            *self.commands.entry(k).or_default() += v;
        }
        for (k, v) in other.host_kills {
            *self.host_kills.entry(k).or_default() += v;
        }
        for (k, v) in other.host_interrupts {
            *self.host_interrupts.entry(k).or_default() += v;
        }
        for (k, v) in other.host_errors {
            *self.host_errors.entry(k).or_default() += v;
        }
        for (k, v) in other.host_error_samples {
            self.host_error_samples.entry(k).or_insert(v);
        }
        self.replays += other.replays;
        self.hung += other.hung;
        self.admitted_after_proposed += other.admitted_after_proposed;
        self.verify_runs += other.verify_runs;
        self.verify_failures += other.verify_failures;
        if self.verify_failure_text.is_none() {
            self.verify_failure_text = other.verify_failure_text;
        }
        self.unsettled.extend(other.unsettled);
        self.started.extend(other.started);
        self.parked.extend(other.parked);
        self.stopped_past_lease += other.stopped_past_lease;
        for (k, v) in other.stopped_ends {
            *self.stopped_ends.entry(k).or_default() += v;
        }
        self.on_owner_host += other.on_owner_host;
        self.waits_for_stopped += other.waits_for_stopped;
    }
}

fn signal_name(n: i32) -> String {
    Signal::try_from(n).map_or_else(|_| format!("signal {n}"), |s| s.as_str().to_owned())
}

impl Ctx {
    /// Runs the host with `args`, on `host` (another host name: a UTS namespace of its own)
    /// or this machine's; with the kills on, `rng` may plan a kill or a stop for it.
    fn run(
        &self,
        out: &Path,
        args: &[&str],
        host: Option<&str>,
        rng: Option<&mut Rng>,
        tally: &mut Tally,
    ) -> Ran {
        let name = if args[0] == "resume" && args.contains(&"host") {
            "resume (dispatch)"
        } else {
            args[0]
        };
        *tally.commands.entry(name.to_owned()).or_default() += 1;
        let file = File::create(out).expect("the output file can be created");
        let err = file.try_clone().expect("the output file can be cloned");
        // The shell names the namespace's host, then execs `rpr`: the pid is the host's.
        let mut command = match host {
            Some(h) => {
                let mut c = Command::new("unshare");
                c.args([
                    "--uts",
                    "--",
                    "sh",
                    "-c",
                    "printf %s \"$0\" > /proc/sys/kernel/hostname && exec \"$@\"",
                    h,
                ])
                .arg(&self.host);
                c
            }
            None => Command::new(&self.host),
        };
        let mut child = command
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("the host starts");
        let pid = i32::try_from(child.id()).expect("a pid fits i32");
        let dispatches = matches!(args[0], "call" | "approve" | "resume");
        let mut plan = None;
        if let Some(rng) = rng.filter(|_| self.kills_on.load(Ordering::SeqCst)) {
            let due = |rng: &mut Rng| {
                Instant::now() + Duration::from_millis(rng.below(self.options.slow_write_ms + 500))
            };
            if rng.chance(self.options.host_kill_percent) {
                plan = Some(Plan {
                    pid,
                    due: due(rng),
                    signal: rng.signal(),
                    after_commit: None,
                });
            } else if dispatches && rng.chance(self.options.stop_percent) {
                // Three stops in four land while the request may be on its way (after the
                // attempt record, within the write delay); the others anywhere.
                let after_commit = rng.chance(75).then(|| {
                    let delay = rng.below(self.options.slow_write_ms.max(1));
                    (out.to_owned(), Duration::from_millis(delay))
                });
                plan = Some(Plan {
                    pid,
                    due: due(rng),
                    signal: Signal::SIGSTOP,
                    after_commit,
                });
            }
        }
        let planned = plan.is_some();
        if let Some(plan) = plan {
            lock(&self.plans).push(plan);
        }
        // Wait for the exit without reaping, so the pid cannot be reused while a plan
        // names it; drop the plan, then reap. A host that hangs is killed by a watchdog
        // (so the soak ends) and counted. A host held stopped past its lease is parked:
        // the call is settled by other host processes meanwhile, as an operator would.
        let started = Instant::now();
        let past_lease = self.lease() + Duration::from_millis(300);
        let mut hung = false;
        loop {
            match waitid(
                Id::Pid(Pid::from_raw(pid)),
                WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG,
            ) {
                Err(Errno::EINTR) | Ok(WaitStatus::StillAlive) => {
                    let stopped = lock(&self.stopped).get(&pid).copied();
                    if stopped.is_some_and(|at| at.elapsed() > past_lease) {
                        tally.stopped_past_lease += 1;
                        // The parked host keeps its output file; the next command gets a new one.
                        let _ = std::fs::rename(out, out.with_extension(format!("parked-{pid}")));
                        tally.parked.push(Parked { child, pid });
                        return Ran {
                            code: None,
                            signal: None,
                            output: String::new(),
                            parked: true,
                        };
                    }
                    if !hung && stopped.is_none() && started.elapsed() > HUNG {
                        hung = true;
                        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                    thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("waitid({pid}): {e}"),
                Ok(_) => break,
            }
        }
        if planned {
            lock(&self.plans).retain(|p| p.pid != pid);
        }
        // A SIGSTOP that reached it as it ended: the supervisor holds its pid until it
        // continues it; reaping before then could let it signal a new process.
        while lock(&self.stopped).contains_key(&pid) {
            thread::sleep(Duration::from_millis(20));
        }
        let interrupted = lock(&self.interrupted).remove(&pid);
        let status = child.wait().expect("the host is reaped");
        let output = std::fs::read_to_string(out).unwrap_or_default();
        if hung {
            tally.hung += 1;
        } else if let Some(sig) = status.signal() {
            *tally.host_kills.entry(signal_name(sig)).or_default() += 1;
        } else if let Some(signal) = interrupted {
            *tally
                .host_interrupts
                .entry(signal.as_str().to_owned())
                .or_default() += 1;
        } else if status.code() == Some(1) {
            let first = output
                .lines()
                .find(|l| l.contains(": error: "))
                .map_or("(no error line)", |l| {
                    l.split_once(": error: ").map_or(l, |(_, e)| e)
                });
            // The kind of error: its text up to the first detail, ids left out.
            let kind = first.split(['(', ';']).next().unwrap_or(first);
            let kind: Vec<&str> = kind
                .split_whitespace()
                .map(|w| {
                    let id = ["pw_", "at_", "ap_"].iter().any(|p| w.starts_with(p));
                    if id { "ID" } else { w }
                })
                .collect();
            let short: String = kind.join(" ").chars().take(80).collect();
            *tally.host_errors.entry(short.clone()).or_default() += 1;
            // Its head and its tail: the reason often follows a long command line.
            tally.host_error_samples.entry(short).or_insert_with(|| {
                let chars: Vec<char> = first.chars().collect();
                if chars.len() <= 400 {
                    first.to_owned()
                } else {
                    let head: String = chars[..200].iter().collect();
                    let tail: String = chars[chars.len() - 200..].iter().collect();
                    format!("{head} … {tail}")
                }
            });
        }
        Ran {
            code: status.code(),
            signal: status.signal(),
            output,
            parked: false,
        }
    }

    /// The lease of every attempt.
    fn lease(&self) -> Duration {
        Duration::from_secs(self.options.lease_secs.max(1))
    }

    /// Reaps the parked hosts that have ended and that no plan names; with `block`, waits
    /// for all of them (the supervisor continues or kills each when its hold is over).
    fn reap_parked(&self, tally: &mut Tally, block: bool) {
        let since = Instant::now();
        loop {
            let mut i = 0;
            while i < tally.parked.len() {
                let pid = tally.parked[i].pid;
                let ended = !matches!(
                    waitid(
                        Id::Pid(Pid::from_raw(pid)),
                        WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG,
                    ),
                    Err(Errno::EINTR) | Ok(WaitStatus::StillAlive)
                );
                let held = {
                    let plans = lock(&self.plans);
                    plans.iter().any(|p| p.pid == pid) || lock(&self.stopped).contains_key(&pid)
                };
                if ended && !held {
                    let mut parked = tally.parked.swap_remove(i);
                    let status = parked.child.wait().expect("a parked host is reaped");
                    let end = status.signal().map_or_else(
                        || format!("exit {}", status.code().unwrap_or(-1)),
                        signal_name,
                    );
                    *tally.stopped_ends.entry(end).or_default() += 1;
                } else {
                    if !held && since.elapsed() > HUNG {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                    i += 1;
                }
            }
            if !block || tally.parked.is_empty() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// `rpr ARGS` with the config and policy when the command needs them.
    fn args<'a>(&'a self, command: &'a str, call: &'a Call) -> Vec<&'a str> {
        let db = self.db.as_str();
        let lease = ["--lease", self.lease_text.as_str()];
        let files = [
            "--config",
            self.config.as_str(),
            "--policy",
            self.policy.as_str(),
        ];
        let mut a = vec![command];
        match command {
            "call" => {
                a.extend(files);
                a.extend([
                    "--database",
                    db,
                    "--server",
                    "files",
                    "--tool",
                    "write_file",
                    "--args",
                    call.args.as_str(),
                    "--key",
                    call.key.as_str(),
                    "--approve-as",
                    "alice",
                ]);
                a.extend(lease);
            }
            "unresolved" | "verify" => a.extend(["--database", db]),
            "reconcile" => {
                a.extend(files);
                a.extend(["--database", db, "--key", call.key.as_str()]);
            }
            "approve" => {
                a.extend(files);
                a.extend([
                    "--database",
                    db,
                    "--key",
                    call.key.as_str(),
                    "--as",
                    "alice",
                ]);
                a.extend(lease);
            }
            "resume" | "dispatch" => {
                // `rpr resume` as the resume authority (bob), or as the execution actor
                // (`host`, the only one who may dispatch an approved pathway).
                let who = if command == "resume" { "bob" } else { "host" };
                a[0] = "resume";
                a.extend(files);
                a.extend(["--database", db, "--key", call.key.as_str(), "--as", who]);
                a.extend(lease);
            }
            "repair" => a.extend([
                "--database",
                db,
                "--key",
                call.key.as_str(),
                "--as",
                "bob",
                "--evidence",
                "chaos soak: the readback found no effect; nothing to undo",
            ]),
            "release" | "require-repair" => {
                let who = if command == "release" { "host" } else { "bob" };
                a.extend(["--database", db, "--key", call.key.as_str(), "--as", who]);
            }
            other => panic!("no arguments for `{other}`"),
        }
        a
    }

    /// Reads the store, retrying an open or read that fails while writers come and go.
    fn read<T>(&self, f: impl Fn(&ReadStore) -> Result<T, StoreError>) -> T {
        let mut last = String::new();
        for _ in 0..200 {
            // Through a runtime's reader, as a host reads: a writer connection runs WAL
            // recovery after a killed host; a `readonly_shm` reader in this process could not.
            match rpr::Runtime::open(&self.db)
                .map_err(|e| StoreError::Corrupt(e.to_string()))
                .and_then(|rt| f(&rt.reader()))
            {
                Ok(v) => return v,
                Err(e) => last = e.to_string(),
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!("cannot read {}: {last}", self.db);
    }

    /// The call's pathway: its state and its last attempt's status.
    fn state(
        &self,
        call: &Call,
        id: &mut Option<String>,
    ) -> Option<(State, Option<AttemptStatus>)> {
        if !self.postgres && !Path::new(&self.db).exists() {
            return None;
        }
        if id.is_none() {
            *id = self
                .all_pathways()
                .into_iter()
                .find(|r| r.idempotency_key == call.key)
                .map(|r| r.id);
        }
        let pid = id.clone()?;
        let record = self.read(|s| s.pathway(&pid))?;
        let status = self.read(|s| s.attempts(&pid)).pop().map(|a| a.status);
        Some((record.state, status))
    }

    fn all_pathways(&self) -> Vec<PathwayRecord> {
        self.read(|s| {
            let mut all = Vec::new();
            loop {
                let after = all.last().map(|r: &PathwayRecord| r.id.clone());
                let page = s.list_pathways(after.as_deref(), 1000, None)?;
                if page.is_empty() {
                    return Ok(all);
                }
                all.extend(page);
            }
        })
    }

    /// Takes steps until the call's pathway is terminal, at most `max` steps; true when it is.
    ///
    /// A recovery or readback that changed nothing is not simply taken again. When this
    /// worker has parked a stopped host, that host may own the attempt: a lapse is not
    /// death, so only its own outcome or its end lets a readback decide, and the worker
    /// waits for it to end (the supervisor continues or kills it). Otherwise the step is
    /// taken again on the owner's host name, where the owner's process can be shown gone.
    /// Nothing here attests: accepting the risk of an owner that may still send could
    /// legitimately send twice.
    fn settle(
        &self,
        call: &Call,
        out: &Path,
        max: usize,
        rng: &mut Rng,
        kills: bool,
        tally: &mut Tally,
    ) -> bool {
        let mut id: Option<String> = None;
        let mut killed = false;
        let mut parked = false;
        let mut last: Option<(&str, Seen)> = None;
        for step in 0..max {
            self.reap_parked(tally, false);
            // The first step is the call itself (its key is new: nothing to look up).
            let state = if step == 0 && kills {
                None
            } else {
                self.state(call, &mut id)
            };
            let command = match &state {
                None | Some((State::Proposed, _)) => "call",
                Some((State::Completed | State::Denied | State::Aborted | State::Failed, _)) => {
                    return true;
                }
                // After a kill the host restarts with the same call: it must replay.
                Some(_) if killed && rng.chance(30) => "call",
                Some((State::HumanGate | State::AwaitingApproval, _)) => "approve",
                // Approved (killed before dispatch, or a dispatch refused before sending):
                // the execution actor dispatches; a repaired one, the resume authority.
                Some((State::Approved, _)) => "dispatch",
                Some((State::ReadyToResume, _)) => "resume",
                Some(
                    (State::Running, Some(AttemptStatus::Returned))
                    | (State::WriteStatusUnknown, _),
                ) => "reconcile",
                Some((State::Running, _)) => "unresolved",
                Some((State::RepairRequired, _)) => "repair",
                Some((State::Held, _)) => "release",
                Some((State::Stopped | State::PartiallyCompleted, _)) => "require-repair",
            };
            let again = last
                .as_ref()
                .is_some_and(|(c, s)| *c == command && *s == state);
            let mut host = self.pick_host(rng);
            // Half of the recoveries and readbacks run where the attempt's owner ran (an
            // operator on that machine), the others anywhere.
            if matches!(command, "unresolved" | "reconcile")
                && rng.chance(50)
                && let Some(owner) = self.owner_host(id.as_deref())
            {
                host = match owner {
                    Machine::This => None,
                    Machine::Named(name) => Some(name),
                };
            }
            if parked {
                // The host just parked was held stopped past its lease: another machine
                // takes the next step, as an operator elsewhere would.
                host = self.other_than(self.owner_host(id.as_deref()), rng);
            } else if again && matches!(command, "unresolved" | "reconcile") {
                if tally.parked.is_empty() {
                    if let Some(owner) = self.owner_host(id.as_deref()) {
                        tally.on_owner_host += 1;
                        host = match owner {
                            Machine::This => None,
                            Machine::Named(name) => Some(name),
                        };
                    }
                } else {
                    tally.waits_for_stopped += 1;
                    self.reap_parked(tally, true);
                }
                if command == "unresolved" {
                    // An owner on another host name is taken over only once its lease lapses.
                    thread::sleep(self.lease() / 4);
                }
            }
            let args = self.args(command, call);
            let ran = self.run(
                out,
                &args,
                host.as_deref(),
                kills.then_some(&mut *rng),
                tally,
            );
            killed = ran.signal.is_some();
            parked = ran.parked;
            if command == "call" {
                if ran.output.contains("replayed, nothing sent again") {
                    tally.replays += 1;
                }
                if ran.output.contains("left proposed (never admitted)") {
                    tally.admitted_after_proposed += 1;
                }
                if id.is_none() {
                    id = pathway_id(&ran.output);
                }
            }
            last = Some((command, state));
        }
        matches!(
            self.state(call, &mut id),
            Some((State::Completed | State::Denied | State::Aborted, _))
        )
    }

    /// A host name for a host process: another one (a UTS namespace) for `other_host_percent`
    /// of them, else this machine's (`None`).
    fn pick_host(&self, rng: &mut Rng) -> Option<String> {
        (self.other_hosts && rng.chance(self.options.other_host_percent))
            .then(|| format!("chaos-h{}", rng.below(3)))
    }

    /// A host name other than `owner`'s (`None`: this machine's).
    fn other_than(&self, owner: Option<Machine>, rng: &mut Rng) -> Option<String> {
        if !self.other_hosts {
            return None;
        }
        match owner {
            Some(Machine::Named(name)) => {
                if rng.chance(50) {
                    return None;
                }
                let others: Vec<String> = (0..3)
                    .map(|k| format!("chaos-h{k}"))
                    .filter(|h| *h != name)
                    .collect();
                let pick = usize::try_from(rng.below(count(others.len()))).unwrap_or(0);
                Some(others[pick].clone())
            }
            _ => Some(format!("chaos-h{}", rng.below(3))),
        }
    }

    /// The host name of the owner of the pathway's last attempt, from its `attempt_started`
    /// event (`None` when there is no attempt).
    fn owner_host(&self, id: Option<&str>) -> Option<Machine> {
        let id = id?;
        let events = self.read(|s| s.events(id, 0, usize::MAX));
        let owner = events.iter().rev().find_map(|row| {
            let event: Value = serde_json::from_str(&row.event).ok()?;
            (event["kind"] == "attempt_started")
                .then(|| event["data"]["owner"].as_str().map(str::to_owned))
                .flatten()
        })?;
        let host = owner.split('/').next().unwrap_or_default().to_owned();
        Some(if host == self.hostname {
            Machine::This
        } else {
            Machine::Named(host)
        })
    }

    /// Runs `rpr verify` (never killed) and counts the result.
    fn verify(&self, out: &Path, tally: &mut Tally) {
        let args = ["verify", "--database", self.db.as_str()];
        let ran = self.run(out, &args, None, None, tally);
        tally.verify_runs += 1;
        if ran.code != Some(0) {
            tally.verify_failures += 1;
            if tally.verify_failure_text.is_none() {
                let text: String = ran.output.lines().take(12).collect::<Vec<_>>().join("\n");
                tally.verify_failure_text = Some(text);
            }
        }
    }

    /// The run's live server processes: (pid, start time).
    fn servers(&self) -> Vec<(i32, u64)> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let marker = self.marker.as_bytes();
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.windows(marker.len()).any(|w| w == marker))
            })
            // A host's sentinel (forked from the host, so with the host's command line)
            // is not a server.
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() != "rpr-sentinel")
            })
            .filter_map(|pid| Some((pid, start_time(pid)?)))
            .collect()
    }
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`), or `None` when it is gone.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after `(comm)`: state is field 3, start time field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The first pathway id (`pw_…`) in a host's output.
fn pathway_id(output: &str) -> Option<String> {
    let at = output.find("pathway pw_")? + "pathway ".len();
    let id: String = output[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(id)
}

/// The supervisor: carries out the host kill and stop plans, continues (or kills) the hosts
/// it holds stopped when their hold is over, and kills server processes. Once `stop` is
/// set it continues every host it still holds, then returns.
fn supervise(ctx: &Ctx, stop: &AtomicBool, mut rng: Rng) -> Signals {
    let mut tally = Signals::default();
    let mut held: Vec<Held> = Vec::new();
    let mean = ctx.options.server_kill_ms;
    let next_in = |rng: &mut Rng| {
        Duration::from_millis(if mean == 0 {
            0
        } else {
            rng.below(2 * mean) + 1
        })
    };
    let mut next_server_kill = Instant::now() + next_in(&mut rng);
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        if stopping && held.is_empty() {
            break;
        }
        thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        {
            let mut plans = lock(&ctx.plans);
            let mut due = Vec::new();
            for p in plans.iter_mut() {
                let committed = p.after_commit.as_ref().is_some_and(|(out, _)| {
                    std::fs::read_to_string(out).is_ok_and(|o| o.contains(COMMITTED))
                });
                if committed && let Some((_, delay)) = p.after_commit.take() {
                    p.due = now + delay;
                }
            }
            plans.retain(|p| {
                if p.due > now || p.after_commit.is_some() {
                    return true;
                }
                due.push((p.pid, p.signal));
                false
            });
            // The pid is not reaped while its plan exists (or while it is held), so it is
            // this host (alive or a zombie).
            for (pid, signal) in due {
                let target = Pid::from_raw(pid);
                if signal == Signal::SIGSTOP {
                    if !running(pid) || kill(target, Signal::SIGSTOP).is_err() {
                        continue;
                    }
                    // Half of the time the whole machine stops: the host's servers too, so
                    // a write they hold does not land while the host is stopped.
                    let servers = if rng.chance(50) {
                        let servers: Vec<(i32, u64)> = ctx
                            .servers()
                            .into_iter()
                            .filter(|(s, _)| parent(*s) == Some(pid))
                            .collect();
                        for (s, start) in &servers {
                            if start_time(*s) == Some(*start) {
                                let _ = kill(Pid::from_raw(*s), Signal::SIGSTOP);
                            }
                        }
                        servers
                    } else {
                        Vec::new()
                    };
                    tally.stops += 1;
                    if !servers.is_empty() {
                        tally.stops_with_server += 1;
                    }
                    lock(&ctx.stopped).insert(pid, now);
                    let stay = ctx.lease() + Duration::from_millis(500 + rng.below(2000));
                    held.push(Held {
                        pid,
                        servers,
                        until: now + stay,
                    });
                    continue;
                }
                // SIGINT goes to its process group, as a terminal's Ctrl-C would.
                let sent = if signal == Signal::SIGINT {
                    killpg(target, signal)
                } else {
                    kill(target, signal)
                };
                if sent.is_ok() && matches!(signal, Signal::SIGINT | Signal::SIGTERM) {
                    lock(&ctx.interrupted).insert(pid, signal);
                }
            }
            // A hold that is over: continue the host (and its servers); or kill it while
            // stopped (a paused machine that never comes back); or continue it and plan a
            // kill. When the run stops, every host still held is continued.
            let mut i = 0;
            while i < held.len() {
                if held[i].until > now && !stopping {
                    i += 1;
                    continue;
                }
                let h = held.swap_remove(i);
                let host = Pid::from_raw(h.pid);
                let fate = if stopping { 4 } else { rng.below(5) };
                if fate == 0 {
                    let _ = kill(host, Signal::SIGKILL);
                    tally.killed_while_stopped += 1;
                }
                for (s, start) in &h.servers {
                    if start_time(*s) == Some(*start) {
                        let _ = kill(Pid::from_raw(*s), Signal::SIGCONT);
                    }
                }
                if fate != 0 {
                    let _ = kill(host, Signal::SIGCONT);
                    tally.continued += 1;
                }
                if fate == 1 {
                    plans.push(Plan {
                        after_commit: None,
                        pid: h.pid,
                        due: now
                            + Duration::from_millis(rng.below(ctx.options.slow_write_ms + 500)),
                        signal: rng.signal(),
                    });
                    tally.kill_planned_after_continue += 1;
                }
                lock(&ctx.stopped).remove(&h.pid);
            }
        }
        if !stopping && mean > 0 && now >= next_server_kill {
            next_server_kill = now + next_in(&mut rng);
            let servers = ctx.servers();
            if servers.is_empty() {
                continue;
            }
            let pick = usize::try_from(rng.below(count(servers.len()))).unwrap_or(0);
            let (pid, start) = servers[pick];
            let signal = rng.signal();
            if start_time(pid) == Some(start) && kill(Pid::from_raw(pid), signal).is_ok() {
                *tally
                    .server_kills
                    .entry(signal.as_str().to_owned())
                    .or_default() += 1;
            }
        }
    }
    tally
}

/// Whether `pid` runs (exists and is not a zombie).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// The parent of `pid` (field 4 of `/proc/PID/stat`).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A process started in the background by a non-interactive shell has SIGINT ignored, and
/// an ignored signal stays ignored across `exec`: the hosts would shrug off the soak's
/// Ctrl-C. Put SIGINT back to its default here (the hosts inherit it), and check it took.
fn default_sigint() -> Result<(), String> {
    use nix::sys::signal::{SigHandler, signal};
    #[expect(
        unsafe_code,
        reason = "setting a signal's disposition to SIG_DFL installs no handler code"
    )]
    // SAFETY: SIG_DFL runs no code of ours in signal context; no handler is replaced that
    // the test harness relies on (it installs none for SIGINT).
    let _ = unsafe { signal(Signal::SIGINT, SigHandler::SigDfl) };
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .ok_or("no SigIgn line in /proc/self/status")?;
    if ignored & (1 << (Signal::SIGINT as u64 - 1)) != 0 {
        return Err(
            "SIGINT is ignored in this process and could not be reset: the soak's \
                    Ctrl-C kills would not land (start it with SIGINT at its default)"
                .into(),
        );
    }
    Ok(())
}

/// Runs the soak and returns its figures.
pub fn run(options: &Options) -> Result<Report, String> {
    let started = Instant::now();
    default_sigint()?;
    let host = PathBuf::from(env!("CARGO_BIN_EXE_rpr"));
    let (node, server) = peers()?;
    let preload = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/slow-write.cjs");
    let dir = std::env::temp_dir().join(format!(
        "rpr-chaos-{}-seed{}",
        std::process::id(),
        options.seed
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("files");
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir.join("out")).map_err(|e| e.to_string())?;
    let effects = dir.join("effects.log");
    let text = |p: &Path| p.to_str().map(str::to_owned).ok_or("a non-UTF-8 path");
    let config = json!({"mcpServers": {"files": {
        "command": text(&node)?,
        "args": ["--require", text(&preload)?, text(&server)?, text(&root)?],
        "env": {
            "RPR_SLOW_WRITE_MS": options.slow_write_ms.to_string(),
            "RPR_EFFECTS_LOG": text(&effects)?,
        },
    }}});
    let policy = json!({
        "authority": {"approval_authority": "alice", "repair_owner": "bob", "resume_authority": "bob"},
        "servers": {"files": {"read_text_file": {"read_only": true}, "write_file": {"readback": {
            "tool": "read_text_file",
            "arguments": {"path": "$path"},
            "expect": {"/structuredContent/content": "$content"},
            "absent_if_error_contains": "ENOENT"
        }}}}
    });
    let config_path = dir.join("mcp.json");
    let policy_path = dir.join("policy.json");
    std::fs::write(&config_path, config.to_string()).map_err(|e| e.to_string())?;
    std::fs::write(&policy_path, policy.to_string()).map_err(|e| e.to_string())?;
    let db = match &options.postgres {
        Some(url) => pg::fresh(
            url,
            &format!("chaos_{}_seed{}", std::process::id(), options.seed),
        )?,
        None => text(&dir.join("rpr.db"))?,
    };
    // `--recount` finds the database here.
    std::fs::write(dir.join("database"), &db).map_err(|e| e.to_string())?;
    let other_hosts = options.other_host_percent > 0 && other_host_names()?;
    let ctx = Arc::new(Ctx {
        options: options.clone(),
        host,
        postgres: options.postgres.is_some(),
        db,
        config: text(&config_path)?,
        policy: text(&policy_path)?,
        lease_text: options.lease_secs.max(1).to_string(),
        effects: effects.clone(),
        marker: text(&root)?,
        root: root.clone(),
        dir: dir.clone(),
        plans: Mutex::new(Vec::new()),
        interrupted: Mutex::new(HashMap::new()),
        kills_on: AtomicBool::new(true),
        stopped: Mutex::new(HashMap::new()),
        hostname: this_host()?,
        other_hosts,
        deadline: options.stop_after.map(|d| started + d),
    });
    let mut nonce = Rng::new(options.seed, u64::MAX);
    let calls: Vec<Call> = (0..options.calls)
        .map(|i| Call::new(options.seed, i, nonce.next_u64()))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let supervisor = {
        let (ctx, stop) = (Arc::clone(&ctx), Arc::clone(&stop));
        let rng = Rng::new(options.seed, 0);
        thread::spawn(move || supervise(&ctx, &stop, rng))
    };
    let hosts = options.hosts.max(1);
    let workers: Vec<_> = (0..hosts)
        .map(|w| {
            let ctx = Arc::clone(&ctx);
            let mine: Vec<(usize, Call)> = calls
                .iter()
                .cloned()
                .enumerate()
                .filter(|(i, _)| i % hosts == w)
                .collect();
            thread::spawn(move || {
                let mut rng = Rng::new(ctx.options.seed, count(w) + 1);
                let mut tally = Tally::default();
                let out = ctx.dir.join(format!("out/w{w}.txt"));
                for (n, (i, call)) in mine.iter().enumerate() {
                    if ctx.deadline.is_some_and(|d| Instant::now() > d) {
                        break;
                    }
                    tally.started.push(*i);
                    let max = ctx.options.max_steps;
                    if !ctx.settle(call, &out, max, &mut rng, true, &mut tally) {
                        tally.unsettled.push(*i);
                    }
                    if ctx.options.progress {
                        eprintln!(
                            "chaos: worker {w}: call {i} settled ({}/{})",
                            n + 1,
                            mine.len()
                        );
                    }
                    let every = ctx.options.verify_every;
                    if every > 0 && (n + 1) % every == 0 {
                        ctx.verify(&out, &mut tally);
                    }
                }
                // Every host this worker parked has ended before the final pass.
                ctx.reap_parked(&mut tally, true);
                tally
            })
        })
        .collect();
    let mut tally = Tally::default();
    let mut panics = Vec::new();
    for w in workers {
        match w.join() {
            Ok(t) => tally.merge(t),
            Err(e) => panics.push(format!("{e:?}")),
        }
    }
    stop.store(true, Ordering::SeqCst);
    ctx.kills_on.store(false, Ordering::SeqCst);
    let signals = supervisor
        .join()
        .map_err(|e| format!("supervisor: {e:?}"))?;
    if !panics.is_empty() {
        return Err(format!(
            "a worker panicked: {panics:?} (files in {})",
            dir.display()
        ));
    }

    // The final pass: every call the workers left unsettled, with no kills.
    let out = dir.join("out/final.txt");
    let mut rng = Rng::new(options.seed, u64::MAX - 1);
    let settled_late = tally.unsettled.len();
    for &i in &tally.unsettled.clone() {
        ctx.settle(&calls[i], &out, 20, &mut rng, false, &mut tally);
    }
    ctx.reap_parked(&mut tally, true);
    ctx.verify(&out, &mut tally);

    // Orphans: the run's server processes still alive now. Then wait for them (they may
    // still write), kill what outlasts the wait, and only then count the effects.
    let orphans = ctx.servers();
    let patience = Instant::now() + Duration::from_millis(options.slow_write_ms + 30_000);
    while !ctx.servers().is_empty() && Instant::now() < patience {
        thread::sleep(Duration::from_millis(100));
    }
    for (pid, start) in ctx.servers() {
        if start_time(pid) == Some(start) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    tally.started.sort_unstable();
    let started_calls: Vec<Call> = tally.started.iter().map(|&i| calls[i].clone()).collect();
    let mut report = Report {
        calls: started_calls.len(),
        not_started: options.calls - started_calls.len(),
        hosts,
        seed: options.seed,
        slow_write_ms: options.slow_write_ms,
        store: store_name(options),
        lease_secs: options.lease_secs.max(1),
        other_hosts,
        stops: signals.stops,
        stops_with_server: signals.stops_with_server,
        stopped_past_lease: tally.stopped_past_lease,
        continued: signals.continued,
        killed_while_stopped: signals.killed_while_stopped,
        kill_planned_after_continue: signals.kill_planned_after_continue,
        stopped_ends: tally.stopped_ends,
        on_owner_host: tally.on_owner_host,
        waits_for_stopped: tally.waits_for_stopped,
        commands: tally.commands,
        host_kills: tally.host_kills,
        host_interrupts: tally.host_interrupts,
        server_kills: signals.server_kills,
        replays: tally.replays,
        admitted_after_proposed: tally.admitted_after_proposed,
        host_errors: tally.host_errors,
        host_error_samples: tally.host_error_samples,
        settled_late,
        hung: tally.hung,
        verify_runs: tally.verify_runs,
        verify_failures: tally.verify_failures,
        verify_failure_text: tally.verify_failure_text,
        orphans: orphans.len(),
        dir: dir.clone(),
        ..Report::default()
    };
    count_outcomes(&ctx, &started_calls, &mut report)?;
    report.wall = started.elapsed();
    if !options.keep && report.failures().is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
        if let Some(url) = &options.postgres {
            pg::drop(url, &ctx.db);
        }
    }
    Ok(report)
}

/// Counts the outcome figures of a kept run again, from its directory (`--keep`, or a run
/// that failed): the database, the effects log and the files, for the calls `options`
/// describes (the same `calls` and `seed` as the run). The figures only the run itself saw
/// (kills, host processes, verify runs, orphans) are zero.
pub fn recount(options: &Options, dir: &Path) -> Result<Report, String> {
    let db = std::fs::read_to_string(dir.join("database"))
        .unwrap_or_else(|_| dir.join("rpr.db").display().to_string());
    let ctx = Ctx {
        options: options.clone(),
        host: PathBuf::new(),
        dir: dir.to_owned(),
        postgres: db.starts_with("postgres://"),
        db,
        config: String::new(),
        policy: String::new(),
        lease_text: String::new(),
        effects: dir.join("effects.log"),
        marker: String::new(),
        root: dir.join("files"),
        plans: Mutex::new(Vec::new()),
        interrupted: Mutex::new(HashMap::new()),
        kills_on: AtomicBool::new(false),
        stopped: Mutex::new(HashMap::new()),
        hostname: String::new(),
        other_hosts: false,
        deadline: None,
    };
    if (!ctx.postgres && !Path::new(&ctx.db).is_file()) || !ctx.effects.is_file() {
        return Err(format!(
            "{} holds no soak run (its database and effects.log)",
            dir.display()
        ));
    }
    let mut nonce = Rng::new(options.seed, u64::MAX);
    let calls: Vec<Call> = (0..options.calls)
        .map(|i| Call::new(options.seed, i, nonce.next_u64()))
        .collect();
    // A run stopped early (`stop_after`, or killed) started its workers' calls in turn, so
    // which calls it started is known only by their pathways: the recount counts the calls
    // that have one (a call started and lost without one is not seen here).
    let keys: std::collections::HashSet<String> = ctx
        .all_pathways()
        .into_iter()
        .map(|r| r.idempotency_key)
        .collect();
    let calls: Vec<Call> = calls
        .into_iter()
        .filter(|c| keys.contains(&c.key))
        .collect();
    let calls = calls.as_slice();
    let mut report = Report {
        calls: calls.len(),
        not_started: options.calls - calls.len(),
        hosts: options.hosts,
        seed: options.seed,
        slow_write_ms: options.slow_write_ms,
        store: if ctx.postgres {
            "PostgreSQL".into()
        } else {
            "SQLite".into()
        },
        lease_secs: options.lease_secs,
        dir: dir.to_owned(),
        ..Report::default()
    };
    count_outcomes(&ctx, calls, &mut report)?;
    Ok(report)
}

/// The writes of one call, by kind (create: the 'wx' write; replace: the rename) and by
/// whether their end line was logged.
#[derive(Default)]
struct Writes {
    creates: usize,
    replaces: usize,
    open_creates: usize,
    open_replaces: usize,
}

/// Final states, lost pathways, ledger events and the effects, into `report`.
fn count_outcomes(ctx: &Ctx, calls: &[Call], report: &mut Report) -> Result<(), String> {
    let by_key: HashMap<String, State> = ctx
        .all_pathways()
        .into_iter()
        .map(|r| (r.idempotency_key, r.state))
        .collect();
    for call in calls {
        let state = by_key.get(&call.key);
        let name = state.map_or("none", |s| s.as_str());
        *report.final_states.entry(name.to_owned()).or_default() += 1;
    }
    for row in ctx.read(|s| s.ledger(0, usize::MAX)) {
        let event: Value = serde_json::from_str(&row.event).map_err(|e| e.to_string())?;
        let kind = event["kind"].as_str().unwrap_or("?").to_owned();
        if kind == "recovered_unknown" {
            match event["data"]["owner_fate"].as_str() {
                Some("lapsed") => report.takeovers_lapsed += 1,
                Some("gone") => report.takeovers_gone += 1,
                _ => {}
            }
        }
        // The evidence of a readback that could not settle an attempt taken over on a lapse.
        if row.event.contains("lease lapsed, and the owner") {
            report.unresolved_for_lapse += 1;
        }
        if row.event.contains("\"attested\"") || row.event.contains("\"accepted_risk\"") {
            report.attestations += 1;
        }
        *report.events.entry(kind).or_default() += 1;
    }

    let log = std::fs::read_to_string(&ctx.effects).unwrap_or_default();
    let index: HashMap<&str, &Call> = calls.iter().map(|c| (c.content.as_str(), c)).collect();
    // Each write is an `intent` line, then `done` or `failed` from the same process, for the
    // same seq and path. Pids are reused over a long run, so an end line closes the latest
    // open intent with its (pid, seq, path), and an intent left open stays open.
    let mut intents: Vec<(Value, Option<&'static str>)> = Vec::new();
    let mut open: HashMap<(u64, u64, String), Vec<usize>> = HashMap::new();
    // (pid, path) of every failed 'wx' create: a later write of that process is a replace
    // (for logs written before the preload named `how`).
    let mut failed_creates: Vec<(u64, String)> = Vec::new();
    for line in log.lines() {
        let effect: Value =
            serde_json::from_str(line).map_err(|e| format!("effects log line {line:?}: {e}"))?;
        let key = (
            effect["pid"].as_u64().unwrap_or(0),
            effect["seq"].as_u64().unwrap_or(0),
            effect["path"].as_str().unwrap_or("").to_owned(),
        );
        let end = match effect["step"].as_str() {
            Some("intent") => {
                open.entry(key).or_default().push(intents.len());
                intents.push((effect, None));
                continue;
            }
            Some("done") => "done",
            Some("failed") => {
                failed_creates.push((key.0, key.2.clone()));
                "failed"
            }
            other => return Err(format!("effects log line {line:?}: step {other:?}")),
        };
        match open.get_mut(&key).and_then(Vec::pop) {
            Some(i) => intents[i].1 = Some(end),
            None => return Err(format!("effects log line {line:?}: no intent before it")),
        }
    }
    let mut per_call: HashMap<&str, Writes> = HashMap::new();
    for (intent, end) in &intents {
        let end = *end;
        let pid = intent["pid"].as_u64().unwrap_or(0);
        if end == Some("failed") {
            continue;
        }
        let Some(call) = intent["content"].as_str().and_then(|c| index.get(c)) else {
            report.foreign_effects += 1;
            continue;
        };
        let path = intent["path"].as_str().unwrap_or("");
        let replace = match intent["how"].as_str() {
            Some(how) => how == "replace",
            None => failed_creates
                .iter()
                .any(|(p_id, p)| *p_id == pid && p == path),
        };
        let w = per_call.entry(call.key.as_str()).or_default();
        match (end == Some("done"), replace) {
            (true, false) => w.creates += 1,
            (true, true) => w.replaces += 1,
            (false, false) => w.open_creates += 1,
            (false, true) => w.open_replaces += 1,
        }
        if end == Some("done") && intent["ppid"] != intent["parent"] {
            report.orphan_writes += 1;
        }
    }
    for call in calls {
        let w = per_call.remove(call.key.as_str()).unwrap_or_default();
        let on_disk = std::fs::read_to_string(ctx.root.join(&call.path)).ok();
        // A create ('wx') fails on an existing file, and nothing deletes a call's file:
        // at most one create of a path succeeds. So an interrupted create beside a logged
        // one did not take effect; without a logged one, the file says whether one did.
        // An interrupted replace (a rename) cannot be settled: it counts as performed, so
        // the double-effect figure is an upper bound, never an undercount.
        let interrupted_create =
            usize::from(w.creates == 0 && on_disk.is_some() && w.open_creates > 0);
        report.interrupted_writes += w.open_creates + w.open_replaces;
        report.interrupted_settled += w.open_creates;
        report.interrupted_ambiguous += w.open_replaces;
        let n = w.creates + interrupted_create + w.replaces + w.open_replaces;
        if n > 1 {
            report.double_effects += 1;
            report.extra_writes += n - 1;
            if report.doubled.len() < 20 {
                report.doubled.push((call.key.clone(), n));
            }
        }
        let state = by_key.get(&call.key);
        if n == 0 && state == Some(&State::Completed) {
            report.completed_without_effect += 1;
        }
        let terminal = matches!(
            state,
            Some(State::Completed | State::Denied | State::Aborted)
        );
        // A server killed inside its own create leaves the file made but not (fully)
        // written: the readback sees other content and cannot decide, so the pathway stays
        // unknown for an operator, truthfully. That is not a lost pathway.
        let torn = on_disk.as_ref().is_some_and(|c| *c != call.content);
        if state.is_some() && !terminal && torn {
            report.torn_unresolved += 1;
        } else if !terminal {
            report.lost += 1;
        }
    }
    Ok(())
}

/// `SQLite` or `PostgreSQL`, for the table.
fn store_name(options: &Options) -> String {
    if options.postgres.is_some() {
        "PostgreSQL".into()
    } else {
        "SQLite".into()
    }
}

/// This machine's host name.
fn this_host() -> Result<String, String> {
    nix::unistd::gethostname()
        .map_err(|e| format!("gethostname: {e}"))?
        .into_string()
        .map_err(|h| format!("a host name that is not UTF-8: {}", h.to_string_lossy()))
}

/// Whether host processes can run on other host names: `unshare --uts` works (root and
/// util-linux). CI runs as root: there it must.
fn other_host_names() -> Result<bool, String> {
    let ok = Command::new("unshare")
        .args(["--uts", "--", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok && std::env::var_os("CI").is_some() {
        return Err(
            "`unshare --uts` failed: CI must run the soak's hosts on other host names (root, util-linux)"
                .into(),
        );
    }
    Ok(ok)
}

/// The run's PostgreSQL schema: made fresh, dropped after a clean run.
mod pg {
    /// A fresh, migrated schema `schema` at `url`; its location for `rpr --database`.
    #[cfg(feature = "postgres")]
    pub(super) fn fresh(url: &str, schema: &str) -> Result<String, String> {
        drop(url, schema);
        rpr::store::pg::prepare_schema(url, schema)
            .map_err(|e| format!("creating schema {schema}: {e}"))?;
        let sep = if url.contains('?') { '&' } else { '?' };
        Ok(format!("{url}{sep}options=-csearch_path%3D{schema}"))
    }

    /// Drops the schema of `location` (or named `location`).
    #[cfg(feature = "postgres")]
    pub(super) fn drop(url: &str, location: &str) {
        let schema = location.rsplit("%3D").next().unwrap_or(location);
        if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }

    #[cfg(not(feature = "postgres"))]
    pub(super) fn fresh(_: &str, _: &str) -> Result<String, String> {
        Err("a PostgreSQL run needs the `postgres` feature (`--features postgres`)".into())
    }

    #[cfg(not(feature = "postgres"))]
    pub(super) fn drop(_: &str, _: &str) {}
}
