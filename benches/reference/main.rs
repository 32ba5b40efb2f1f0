//! The whole call through rpr and through the Python reference, side by side (issue 13).
//!
//! Run by hand (CI only builds it); see docs/storage.md, "Benchmark against the Python
//! reference":
//!
//! ```sh
//! cargo bench --bench reference -- --install            # makes target/pyref-venv once
//! RPR_PYREF_PYTHON=/path/to/python cargo bench --bench reference   # or bring your own
//! ```
//!
//! One *whole call* is what a new user writes from each project's README, release build,
//! one file write per call:
//!
//! * rpr ([`rpr_call`]), timed in the three forms its README shows: `propose_and_bind`
//!   then `dispatch_and_confirm` (2 durable commits: the pathway with its attempt record,
//!   the reply with its readback); *merged steps*,
//!   `Runtime::propose_and_admit` with an allow policy, `bind` to a [`FileExecutor`],
//!   `dispatch_and_confirm` with a [`FileReadback`] (3 durable commits); and *separate
//!   steps*, `propose`, `admit`, `bind`, `dispatch`, then `confirm` the
//!   `Outcome::Returned` (5 commits). One database (WAL, `synchronous=FULL`, as
//!   `Runtime::open` sets).
//! * the reference (`whole_call.py` beside this file, PyPI
//!   `responsibility-pathway-runtime==0.1.0a4`): `register` with a `PythonRpeEvaluator`
//!   that allows everything, `transition` to approved by the approval authority (its
//!   inspection requires one for every class that mutates, and such a pathway starts
//!   awaiting approval), `execute` with `LocalFileExecutor` (which reads the file back
//!   and compares sha256 before the pathway completes). Its file-backed `SQLiteStore`
//!   and `SQLiteExecutionAttemptLedger` are two databases in WAL mode; the script sets
//!   `synchronous=FULL` on both explicitly (they do not set it).
//!
//! Both write a 64-byte file per call the same way (temporary file, `fsync`, rename
//! over the target, read back, sha256), except that rpr's `FileExecutor` also `fsync`s
//! the directory after the rename and `LocalFileExecutor` does not: the table counts
//! those syncs separately.
//!
//! Each round runs `--calls` calls in a fresh process per side (four sides: rpr bound, rpr merged,
//! rpr separate, the reference), rpr's as this program re-executed with the hidden
//! `--only-rpr N --steps FORM` flags, on a fresh database in the same directory; the
//! order of the sides rotates from round to round. Each process times its own loop
//! (after 5 untimed calls) and measures its own CPU: the reference with
//! `getrusage(RUSAGE_SELF)`, rpr from `/proc/self/stat` (clock ticks, so 10 ms
//! resolution per round). Then one counting pass per side, not timed, runs under
//! `strace -f -y` (fsync, fdatasync and the 24-byte WAL frame-header writes), cut to
//! the loop by `fsync`s of two marker files, and classifies every sync by its file.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use rpr::executor::Request;
use rpr::executor::file::{FileExecutor, FileReadback, WRITE_FILE};
use rpr::{
    ActionClass, Actor, Admission, Authority, Confirmed, Decided, Decision, Definition, Outcome,
    Proposal, Runtime,
};
use serde_json::{Value, json};

#[path = "verify.rs"]
#[allow(
    unreachable_pub,
    reason = "the module's API is `pub fn run`, written for a binary that keeps it private"
)]
mod verify;

/// The reference release the issue measured.
const REFERENCE: &str = "responsibility-pathway-runtime==0.1.0a4";
/// Bytes written per call, on both sides.
const CONTENT_BYTES: usize = 64;
/// Untimed calls before each measured loop, on both sides.
const WARMUP: usize = 5;
const BEGIN_MARKER: &str = "loop-begin.marker";
const END_MARKER: &str = "loop-end.marker";

const USAGE: &str = "\
Usage: cargo bench --bench reference -- [options]

The whole call (propose, admit, bind, dispatch a local file write, confirm by readback)
through rpr and through the Python reference (PyPI responsibility-pathway-runtime 0.1.0a4),
alternating, on the same machine and directory. Prints a Markdown table on stdout.

Options:
  --install            create target/pyref-venv (python3 -m venv) and pip install the
                       reference into it if it is not there yet, then use it
  --calls N            measured calls per round and side (default 500)
  --rounds N           rounds, each one run of each side (default 5)
  --no-strace          skip the counting pass (commits and syncs per call)
  --verify-events N    also time ledger verification over N events (default 100000; 0 skips)
  --verify-only        only the ledger verification table (no reference needed), over
                       --rounds rounds
  --dir PATH           where the fresh databases and files go (default: the system temp dir)
  --keep               keep that directory
  --help               this text

Environment:
  RPR_PYREF_PYTHON     a python (3.11+) that has the reference installed; used when
                       --install is not given
";

fn allow(_: &Definition) -> Decision {
    Decision::Allow
}

/// The text written by call `i`: `CONTENT_BYTES` ASCII bytes (the Python side builds the same).
fn content(i: usize) -> String {
    let mut s = format!("call {i} ");
    s.extend(std::iter::repeat_n('x', CONTENT_BYTES));
    s.truncate(CONTENT_BYTES);
    s
}

/// How the rpr side writes its whole call (both are in the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Steps {
    /// `propose_and_bind` (stored with its attempt record), `dispatch_and_confirm`: 2 durable
    /// commits.
    Bound,
    /// `propose_and_admit`, `bind`, `dispatch_and_confirm`: 3 durable commits.
    Merged,
    /// `propose`, `admit`, `bind`, `dispatch`, `confirm`: 5 durable commits.
    Separate,
}

impl Steps {
    fn flag(self) -> &'static str {
        match self {
            Self::Bound => "bound",
            Self::Merged => "merged",
            Self::Separate => "separate",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Self::Bound, Self::Merged, Self::Separate]
            .into_iter()
            .find(|x| x.flag() == s)
    }
}

/// One whole call through rpr's public API, as in the README: propose and admit with an
/// allow policy, bind, dispatch the file write, confirm by readback; in `steps` form.
fn rpr_call(
    rt: &Runtime,
    actor: &Actor,
    ex: &mut FileExecutor,
    rb: &mut FileReadback,
    i: usize,
    steps: Steps,
) {
    let request = Request::new(
        WRITE_FILE,
        json!({"path": format!("f-{i}.txt"), "content": content(i)}),
    );
    let definition = Definition::new(
        request,
        ActionClass::Mutating,
        format!("bench-{i}"),
        Authority::single(actor),
    );
    match steps {
        Steps::Bound => {
            let bound = rt
                .propose_and_bind(actor, actor, definition, &allow, ex)
                .expect("propose and bind")
                .into_bound()
                .unwrap_or_else(|other| panic!("call {i}: not bound: {other}"));
            match bound.dispatch_and_confirm(rt, actor, ex, rb) {
                Outcome::Completed(_) => {}
                other => panic!("call {i}: not completed: {other:?}"),
            }
        }
        Steps::Merged => {
            let Decided::New(Admission::Approved(approved)) = rt
                .propose_and_admit(actor, actor, definition, &allow)
                .expect("propose and admit")
            else {
                panic!("call {i}: not admitted as a new pathway")
            };
            let bound = approved.bind(ex).expect("bind");
            match bound.dispatch_and_confirm(rt, actor, ex, rb) {
                Outcome::Completed(_) => {}
                other => panic!("call {i}: not completed: {other:?}"),
            }
        }
        Steps::Separate => {
            let Proposal::New(proposed) = rt.propose(actor, definition).expect("propose") else {
                panic!("call {i}: the idempotency key was replayed")
            };
            let Admission::Approved(approved) = proposed.admit(rt, actor, &allow).expect("admit")
            else {
                panic!("call {i}: not admitted")
            };
            let bound = approved.bind(ex).expect("bind");
            let Outcome::Returned(returned) = bound.dispatch(rt, actor, ex) else {
                panic!("call {i}: the write did not return success")
            };
            match returned.confirm(rt, actor, rb).expect("confirm") {
                Confirmed::Completed(_) => {}
                other => panic!("call {i}: readback did not confirm: {other:?}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The measured process (`--only-rpr N`) and the reference's
// ---------------------------------------------------------------------------

/// This process's user and system CPU seconds (all threads), from `/proc/self/stat`.
fn cpu_seconds(ticks_per_second: f64) -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The command name may hold spaces; the fields after it are fixed.
    let rest = &stat[stat.rfind(')').expect("stat format") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime) of proc(5); `rest` starts at field 3.
    let ticks = |i: usize| -> f64 { fields[i].parse::<u32>().map_or(0.0, f64::from) };
    (ticks(11) / ticks_per_second, ticks(12) / ticks_per_second)
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map_or(100.0, f64::from)
}

fn touch_and_sync(path: &Path) {
    std::fs::File::create(path)
        .and_then(|f| f.sync_all())
        .expect("marker file");
}

/// Runs `warmup` + `calls` whole calls on a fresh database in `dir` and prints one JSON line.
fn only_rpr(calls: usize, warmup: usize, dir: &Path, markers: bool, steps: Steps) {
    std::fs::create_dir(dir).expect("a fresh directory");
    let files = dir.join("files");
    std::fs::create_dir(&files).expect("files directory");
    let ticks = clock_ticks_per_second();
    let rt = Runtime::open(dir.join("rpr.db")).expect("open runtime");
    let actor = Actor::new("alice");
    let mut ex = FileExecutor::new(&files).expect("file executor");
    let mut rb = FileReadback::new(&ex);
    for i in 0..warmup {
        rpr_call(&rt, &actor, &mut ex, &mut rb, i, steps);
    }
    if markers {
        touch_and_sync(&dir.join(BEGIN_MARKER));
    }
    let (user0, sys0) = cpu_seconds(ticks);
    let started = Instant::now();
    for i in warmup..warmup + calls {
        rpr_call(&rt, &actor, &mut ex, &mut rb, i, steps);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (user1, sys1) = cpu_seconds(ticks);
    if markers {
        touch_and_sync(&dir.join(END_MARKER));
    }
    println!(
        "{}",
        json!({
            "side": "rpr", "steps": steps.flag(), "calls": calls, "warmup": warmup, "elapsed_s": elapsed,
            "user_s": user1 - user0, "sys_s": sys1 - sys0, "cpu_resolution_s": 1.0 / ticks,
            "sqlite": rusqlite::version(), "content_bytes": CONTENT_BYTES,
        })
    );
}

/// The sides measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Rpr(Steps),
    Reference,
}

impl Who {
    fn name(self) -> String {
        match self {
            Self::Rpr(steps) => format!("rpr ({} steps)", steps.flag()),
            Self::Reference => "reference".to_owned(),
        }
    }

    fn dir_name(self) -> String {
        match self {
            Self::Rpr(steps) => format!("rpr-{}", steps.flag()),
            Self::Reference => "reference".to_owned(),
        }
    }

    fn side(self, python: &Path, calls: usize, dir: &Path, counting: bool) -> Side {
        match self {
            Self::Rpr(steps) => Side::rpr(calls, dir, counting, steps),
            Self::Reference => Side::reference(python, calls, dir, counting),
        }
    }
}

/// How to start one side's measured process.
struct Side {
    program: PathBuf,
    args: Vec<OsString>,
}

impl Side {
    fn rpr(calls: usize, dir: &Path, markers: bool, steps: Steps) -> Self {
        let mut args: Vec<OsString> = vec![
            "--only-rpr".into(),
            calls.to_string().into(),
            "--steps".into(),
            steps.flag().into(),
            "--warmup".into(),
            WARMUP.to_string().into(),
            "--dir".into(),
            dir.into(),
        ];
        if markers {
            args.push("--markers".into());
        }
        Self {
            program: std::env::current_exe().expect("current exe"),
            args,
        }
    }

    fn reference(python: &Path, calls: usize, dir: &Path, counting: bool) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/reference/whole_call.py");
        let mut args: Vec<OsString> = vec![
            script.into(),
            "--calls".into(),
            calls.to_string().into(),
            "--warmup".into(),
            WARMUP.to_string().into(),
            "--content-bytes".into(),
            CONTENT_BYTES.to_string().into(),
            "--dir".into(),
            dir.into(),
        ];
        if counting {
            args.push("--markers".into());
            args.push("--count-commits".into());
        }
        Self {
            program: python.to_owned(),
            args,
        }
    }

    /// Runs it (under `strace` writing to `trace`, if given) and parses its JSON line.
    fn run(&self, trace: Option<&Path>) -> Value {
        let mut cmd = if let Some(out) = trace {
            let mut c = Command::new("strace");
            c.args(["-f", "-qq", "-e", "signal=none", "-y", "-x", "-s", "24"])
                .args(["-e", "trace=fsync,fdatasync,pwrite64,write", "-o"])
                .arg(out)
                .arg(&self.program);
            c
        } else {
            Command::new(&self.program)
        };
        let out = cmd
            .args(&self.args)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.program.display()));
        assert!(
            out.status.success(),
            "{} {:?} failed: {}",
            self.program.display(),
            self.args,
            out.status
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    }
}

// ---------------------------------------------------------------------------
// Finding the reference
// ---------------------------------------------------------------------------

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    )
}

/// `Some((reference version, python version))` if `python` imports the reference.
fn probe(python: &Path) -> Option<(String, String)> {
    let out = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m, platform, rpr; \
             print(m.version('responsibility-pathway-runtime'), platform.python_version())",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut words = text.split_whitespace();
    match (out.status.success(), words.next(), words.next()) {
        (true, Some(r), Some(p)) => Some((r.to_owned(), p.to_owned())),
        _ => None,
    }
}

fn run_step(cmd: &mut Command) -> Result<(), String> {
    eprintln!("$ {cmd:?}");
    // pip's progress goes to stderr too: stdout is for the table.
    let status = cmd
        .stdout(std::io::stderr())
        .status()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {status}"))
    }
}

/// Creates (or reuses) `target/pyref-venv` with the reference installed.
fn install() -> Result<PathBuf, String> {
    let venv = target_dir().join("pyref-venv");
    let python = venv.join("bin").join("python");
    let wanted = REFERENCE.rsplit("==").next().unwrap_or_default();
    if probe(&python).is_some_and(|(r, _)| r == wanted) {
        eprintln!("using {} (reference {wanted})", python.display());
        return Ok(python);
    }
    if !python.exists() {
        run_step(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    run_step(
        Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .arg(REFERENCE),
    )?;
    Ok(python)
}

fn reference_python(install_it: bool) -> Result<PathBuf, String> {
    let python = if install_it {
        install()?
    } else if let Some(p) = std::env::var_os("RPR_PYREF_PYTHON") {
        PathBuf::from(p)
    } else {
        return Err(format!(
            "the Python reference is needed and was not given. Either let the benchmark install it:\n\n    \
             cargo bench --bench reference -- --install\n\n\
             (python3 -m venv {venv} && {venv}/bin/pip install {REFERENCE}), or point it at a \
             python that has it:\n\n    \
             RPR_PYREF_PYTHON=/path/to/python cargo bench --bench reference",
            venv = target_dir().join("pyref-venv").display()
        ));
    };
    if probe(&python).is_none() {
        return Err(format!(
            "{} cannot import the reference; install it with `{} -m pip install {REFERENCE}` \
             or use --install",
            python.display(),
            python.display()
        ));
    }
    Ok(python)
}

// ---------------------------------------------------------------------------
// Counting syncs and commits from a trace
// ---------------------------------------------------------------------------

/// Syncs (fsync or fdatasync) during the measured loop, by what they made durable.
#[derive(Debug, Default, Clone, Copy)]
struct Syncs {
    /// A `-wal` sync after commit frames were written to it: one per commit.
    commit: u64,
    /// Any other `-wal` sync (a checkpoint, or a new WAL header after a reset).
    wal_other: u64,
    /// A main database file (a checkpoint copying pages back).
    checkpoint: u64,
    /// The file effect: the written (temporary) file.
    file: u64,
    /// The file effect: the directory holding it.
    dir: u64,
    /// Anything else.
    other: u64,
    /// WAL frames that end a transaction (a cross-check of `commit`).
    commit_frames: u64,
}

impl Syncs {
    fn total(&self) -> u64 {
        self.commit + self.wal_other + self.checkpoint + self.file + self.dir + self.other
    }
}

/// Decodes a string argument as strace prints it (`-x`: `\xNN` or C escapes).
fn unquote(s: &str) -> Option<(Vec<u8>, &str)> {
    let body = s.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some((out, &body[i + 1..])),
            b'\\' => {
                let c = *bytes.get(i + 1)?;
                i += 2;
                match c {
                    b'x' => {
                        out.push(u8::from_str_radix(body.get(i..i + 2)?, 16).ok()?);
                        i += 2;
                    }
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'v' => out.push(0x0b),
                    b'f' => out.push(0x0c),
                    b'0'..=b'7' => {
                        let end = (i..(i + 2).min(bytes.len()))
                            .take_while(|&j| bytes[j].is_ascii_digit())
                            .last()
                            .map_or(i, |j| j + 1);
                        out.push(u8::from_str_radix(&body[i - 1..end], 8).ok()?);
                        i = end;
                    }
                    other => out.push(other),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// Classifies the syncs in an `strace -f -y -x` log, between the two markers' `fsync`s.
fn classify(log: &str, files: &Path) -> Syncs {
    let files = files.to_string_lossy().into_owned();
    let mut syncs = Syncs::default();
    let mut inside = false;
    let mut pending_commit: HashMap<String, bool> = HashMap::new();
    // A database file is one whose `-wal` appears anywhere in the log.
    let wals: HashSet<&str> = log
        .split(['<', '>'])
        .filter(|p| p.ends_with("-wal"))
        .collect();
    for line in log.lines() {
        // "PID call(FD</path>, ...) = RET"; "<... call resumed>" lines repeat nothing we need.
        let Some(call) = line.split_once(' ').map(|(_, c)| c.trim_start()) else {
            continue;
        };
        let Some((name, args)) = call.split_once('(') else {
            continue;
        };
        let Some((path, rest)) = args.split_once('<').and_then(|(_, p)| p.split_once('>')) else {
            continue;
        };
        let is_sync = name == "fsync" || name == "fdatasync";
        if is_sync && path.ends_with(BEGIN_MARKER) {
            inside = true;
            continue;
        }
        if is_sync && path.ends_with(END_MARKER) {
            break;
        }
        if !inside {
            continue;
        }
        if name == "pwrite64" && path.ends_with("-wal") {
            // SQLite writes each WAL frame's 24-byte header on its own; bytes 4..8 are
            // the database size after the commit, and 0 unless the frame ends one.
            if let Some((header, after)) = rest.strip_prefix(", ").and_then(unquote)
                && header.len() == 24
                && after.starts_with(", 24,")
                && header[4..8] != [0, 0, 0, 0]
            {
                syncs.commit_frames += 1;
                pending_commit.insert(path.to_owned(), true);
            }
            continue;
        }
        if !is_sync {
            continue;
        }
        if path.ends_with("-wal") {
            if pending_commit.insert(path.to_owned(), false) == Some(true) {
                syncs.commit += 1;
            } else {
                syncs.wal_other += 1;
            }
        } else if path == files {
            syncs.dir += 1;
        } else if path.starts_with(&files) {
            syncs.file += 1;
        } else if wals.contains(format!("{path}-wal").as_str()) {
            syncs.checkpoint += 1;
        } else {
            syncs.other += 1;
        }
    }
    syncs
}

// ---------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn per(count: u64, calls: usize) -> f64 {
    count as f64 / calls as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// The filesystem holding `path`, from `/proc/mounts` (the longest mount point above it).
fn filesystem(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && path.starts_with(f[1]))
                .then(|| (f[1].len(), format!("{} ({} on {})", f[2], f[0], f[1])))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".to_owned(), |(_, s)| s)
}

fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        "-".to_owned()
    } else {
        format!("{:.2}x", a / b)
    }
}

struct Summary {
    rates: Vec<f64>,
    user_us: f64,
    sys_us: f64,
    counted: Option<Syncs>,
}

impl Summary {
    fn from_rounds(rounds: &[Value], calls: usize, counted: Option<Syncs>) -> Self {
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let total = (calls * rounds.len()) as f64;
        Self {
            rates: rounds
                .iter()
                .map(|r| num(r, "calls") / num(r, "elapsed_s"))
                .collect(),
            user_us: rounds.iter().map(|r| num(r, "user_s")).sum::<f64>() / total * 1e6,
            sys_us: rounds.iter().map(|r| num(r, "sys_s")).sum::<f64>() / total * 1e6,
            counted,
        }
    }
}

fn row(name: &str, s: &Summary, calls: usize) -> String {
    let c = |f: fn(&Syncs) -> u64| {
        s.counted
            .as_ref()
            .map_or_else(|| "-".to_owned(), |x| format!("{:.2}", per(f(x), calls)))
    };
    format!(
        "| {name} | {:.1} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} |",
        median(s.rates.clone()),
        s.user_us,
        s.sys_us,
        c(|x| x.commit),
        c(|x| x.wal_other),
        c(|x| x.checkpoint),
        c(|x| x.file),
        c(|x| x.dir),
        c(Syncs::total),
    )
}

fn ratio_row(name: &str, a: &Summary, b: &Summary) -> String {
    let c = |f: fn(&Syncs) -> u64| match (&a.counted, &b.counted) {
        (Some(x), Some(y)) => ratio(per(f(x), 1), per(f(y), 1)),
        _ => "-".to_owned(),
    };
    format!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        ratio(median(a.rates.clone()), median(b.rates.clone())),
        ratio(a.user_us, b.user_us),
        ratio(a.sys_us, b.sys_us),
        c(|x| x.commit),
        c(|x| x.wal_other),
        c(|x| x.checkpoint),
        c(|x| x.file),
        c(|x| x.dir),
        c(Syncs::total),
    )
}

// ---------------------------------------------------------------------------

#[expect(clippy::struct_excessive_bools, reason = "command-line flags")]
struct Options {
    calls: usize,
    rounds: usize,
    strace: bool,
    install: bool,
    verify_events: usize,
    verify_only: bool,
    dir: Option<PathBuf>,
    keep: bool,
    only_rpr: Option<usize>,
    steps: Steps,
    warmup: usize,
    markers: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        calls: 500,
        rounds: 5,
        strace: true,
        install: false,
        verify_events: 100_000,
        verify_only: false,
        dir: None,
        keep: false,
        only_rpr: None,
        steps: Steps::Merged,
        warmup: WARMUP,
        markers: false,
    };
    let mut args = std::env::args_os().skip(1);
    let number = |v: Option<OsString>, flag: &str| -> Result<usize, String> {
        v.and_then(|v| v.into_string().ok())
            .and_then(|v| v.replace('_', "").parse().ok())
            .ok_or_else(|| format!("{flag} needs a number"))
    };
    while let Some(arg) = args.next() {
        match arg.to_str().unwrap_or_default() {
            "--calls" => o.calls = number(args.next(), "--calls")?.max(1),
            "--rounds" => o.rounds = number(args.next(), "--rounds")?.max(1),
            "--no-strace" => o.strace = false,
            "--install" => o.install = true,
            "--verify-events" => o.verify_events = number(args.next(), "--verify-events")?,
            "--verify-only" => o.verify_only = true,
            "--dir" => o.dir = Some(args.next().ok_or("--dir needs a path")?.into()),
            "--keep" => o.keep = true,
            // Hidden: the measured rpr process.
            "--only-rpr" => o.only_rpr = Some(number(args.next(), "--only-rpr")?),
            "--steps" => {
                o.steps = args
                    .next()
                    .and_then(|v| v.into_string().ok())
                    .and_then(|v| Steps::parse(&v))
                    .ok_or("--steps needs `merged` or `separate`")?;
            }
            "--warmup" => o.warmup = number(args.next(), "--warmup")?,
            "--markers" => o.markers = true,
            // `cargo bench` passes `--bench` to every benchmark binary.
            "--bench" => {}
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(calls) = o.only_rpr {
        let dir = o.dir.expect("--only-rpr needs --dir");
        only_rpr(calls, o.warmup, &dir, o.markers, o.steps);
        return ExitCode::SUCCESS;
    }
    if o.verify_only {
        if o.verify_events == 0 {
            eprintln!("--verify-only needs --verify-events above 0");
            return ExitCode::from(2);
        }
        eprintln!("ledger verification over {} events", o.verify_events);
        println!("{}", verify::run(o.verify_events, o.rounds.max(1), true));
        return ExitCode::SUCCESS;
    }
    let python = match reference_python(o.install) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (reference_version, python_version) = probe(&python).unwrap_or_default();
    let base = o.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("rpr-bench-reference-{}", std::process::id()))
    });
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("benchmark directory");
    let (calls, rounds) = (o.calls, o.rounds);

    // Four sides: rpr in the three forms of the README, and the reference.
    let sides = [
        Who::Rpr(Steps::Merged),
        Who::Rpr(Steps::Separate),
        Who::Reference,
        Who::Rpr(Steps::Bound),
    ];
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); sides.len()];
    for round in 0..rounds {
        let dir = base.join(format!("round-{round}"));
        std::fs::create_dir(&dir).expect("round directory");
        // Rotate which side goes first, so drift over the run hits all alike.
        for k in 0..sides.len() {
            let s = (round + k) % sides.len();
            eprintln!(
                "round {}/{rounds}: {}, {calls} calls",
                round + 1,
                sides[s].name()
            );
            let side_dir = dir.join(sides[s].dir_name());
            results[s].push(sides[s].side(&python, calls, &side_dir, false).run(None));
        }
        eprintln!(
            "  {}",
            sides
                .iter()
                .zip(&results)
                .map(|(w, r)| format!(
                    "{} {:.1} calls/s",
                    w.name(),
                    num(&r[round], "calls") / num(&r[round], "elapsed_s")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    // The counting pass: one more run per side under strace, not timed.
    let have_strace = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut counted_ref_json = None;
    let (counted, strace_note): (Vec<Option<Syncs>>, String) = if !o.strace {
        (
            vec![None; sides.len()],
            "Counting pass skipped (--no-strace)".to_owned(),
        )
    } else if !have_strace {
        (
            vec![None; sides.len()],
            "Counting pass skipped: `strace` is not installed (apt-get install strace)".to_owned(),
        )
    } else {
        let dir = base.join("count");
        std::fs::create_dir(&dir).expect("count directory");
        let counted = sides
            .iter()
            .map(|w| {
                eprintln!("counting pass: {} under strace", w.name());
                let side_dir = dir.join(w.dir_name());
                let log = dir.join(format!("{}.strace", w.dir_name()));
                let json = w.side(&python, calls, &side_dir, true).run(Some(&log));
                if *w == Who::Reference {
                    counted_ref_json = Some(json);
                }
                let log = std::fs::read_to_string(&log).expect("strace log");
                Some(classify(&log, &side_dir.join("files")))
            })
            .collect();
        (
            counted,
            "Counted in one more run per side under `strace -f -y` (not timed), cut to the loop by two marker fsyncs".to_owned(),
        )
    };

    let summaries: Vec<Summary> = results
        .iter()
        .zip(counted)
        .map(|(r, c)| Summary::from_rounds(r, calls, c))
        .collect();
    let (merged, separate, theirs, bound) =
        (&summaries[0], &summaries[1], &summaries[2], &summaries[3]);
    let fmt_rates = |s: &Summary| {
        s.rates
            .iter()
            .map(|r| format!("{r:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let rpr_rounds = &results[0];
    let ref_rounds = &results[2];

    let mut out = String::new();
    let _ = writeln!(
        out,
        "## The whole call: rpr vs the Python reference ({calls} calls x {rounds} rounds per side)\n"
    );
    let _ = writeln!(
        out,
        "| side | calls/s (median) | CPU µs/call, user | CPU µs/call, sys | \
         commits/call (= commit syncs) | other WAL syncs/call | checkpoint syncs/call (main db) | \
         file effect syncs/call: file | file effect syncs/call: directory | syncs/call, total |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(out, "{}", row("rpr, propose_and_bind", bound, calls));
    let _ = writeln!(out, "{}", row("rpr, merged steps", merged, calls));
    let _ = writeln!(out, "{}", row("rpr, separate steps", separate, calls));
    let _ = writeln!(out, "{}", row("reference", theirs, calls));
    let _ = writeln!(
        out,
        "{}",
        ratio_row("propose_and_bind / reference", bound, theirs)
    );
    let _ = writeln!(out, "{}", ratio_row("merged / reference", merged, theirs));
    let _ = writeln!(
        out,
        "{}",
        ratio_row("separate / reference", separate, theirs)
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "- calls/s per round: rpr propose_and_bind {}; rpr merged {}; rpr separate {}; reference {}. CPU: total over all rounds / calls \
         (rpr from /proc/self/stat, {:.0} ms resolution per round; the reference from getrusage).",
        fmt_rates(bound),
        fmt_rates(merged),
        fmt_rates(separate),
        fmt_rates(theirs),
        num(&rpr_rounds[0], "cpu_resolution_s") * 1e3,
    );
    let _ = writeln!(
        out,
        "- rpr: `Runtime::open` (one database, WAL, synchronous=FULL), SQLite {}; \
         reference {reference_version} on Python {python_version}, SQLite {}, two databases \
         (pathway store, attempt ledger), WAL; their connections do not set `synchronous` \
         (it was {} here, SQLite's compiled default) and the script sets FULL on both.",
        rpr_rounds[0]["sqlite"].as_str().unwrap_or("?"),
        ref_rounds[0]["sqlite"].as_str().unwrap_or("?"),
        ref_rounds[0]["synchronous_before"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        format!(
                            "{} for the {}",
                            v.as_str().unwrap_or("?"),
                            k.replace('_', " ")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default(),
    );
    let _ = writeln!(
        out,
        "- Ratios are rpr / reference: above 1 in calls/s means rpr is faster; below 1 in \
         CPU, commits or syncs means rpr spends less."
    );
    let _ = writeln!(
        out,
        "- The file effect ({CONTENT_BYTES} bytes per call): both write a temporary file, fsync it, rename \
         it over the target and read it back (sha256). rpr's FileExecutor then also fsyncs the \
         directory (the rename's durability); the reference's LocalFileExecutor does not. That is \
         the `file effect: directory` column; the reference's is 0 by design, not by omission."
    );
    let _ = writeln!(
        out,
        "- Commits: a `-wal` sync that follows a commit frame (SQLite writes each frame header \
         on its own; a commit frame carries the database size), so one per durable commit. \
         Other WAL syncs are checkpoints and new WAL headers; `checkpoint (main db)` are syncs of \
         the database files. {strace_note}."
    );
    if let (Some(a), Some(b)) = (&merged.counted, &theirs.counted) {
        let traced = counted_ref_json
            .as_ref()
            .and_then(|j| j["commits"]["total"].as_u64());
        let _ = writeln!(
            out,
            "- Cross-checks: commit frames per call rpr merged {:.2}, reference {:.2}; the reference's \
             own sqlite3 trace callbacks counted {} COMMITs per call; other syncs: rpr {:.2}, reference {:.2} per call.",
            per(a.commit_frames, calls),
            per(b.commit_frames, calls),
            traced.map_or_else(|| "-".to_owned(), |t| format!("{:.2}", per(t, calls))),
            per(a.other, calls),
            per(b.other, calls),
        );
    }
    let _ = writeln!(
        out,
        "- Directory: {} on {}; each round and side a fresh database; {WARMUP} untimed calls before each loop.",
        base.display(),
        filesystem(&base),
    );
    if filesystem(&base).starts_with("tmpfs") {
        let _ = writeln!(
            out,
            "- WARNING: tmpfs ignores fsync, so these numbers say nothing about durable commits; use --dir on a disk."
        );
    }
    print!("{out}");

    if o.verify_events > 0 {
        eprintln!("ledger verification over {} events", o.verify_events);
        println!("\n{}", verify::run(o.verify_events, 7, true));
    }
    if o.keep {
        eprintln!("kept {}", base.display());
    } else {
        let _ = std::fs::remove_dir_all(&base);
    }
    ExitCode::SUCCESS
}
