//! The cost of `rpr gate` (issue 10): the same MCP calls made directly and through the gate,
//! alternating in one run, against the same kind of server (`rpr-fault-server`, no fault,
//! replying at once; each gate and the direct client have their own server and database).
//!
//! ```sh
//! cargo bench --bench gate -- [--calls N] [--rounds R] [--dir DIR] [--baseline-rpr PATH]
//! ```
//!
//! * **pass-through**: `resources/list` (which the gate passes on untouched): the cost of
//!   the gate's hop alone, the floor under every governed call.
//! * **read-only**: `get` (annotated read-only): directly, and through the gate, where each
//!   call is a pathway (propose+admit in one commit, bind, the attempt record, the call, the
//!   outcome), bound to the tool list the gate keeps; once with the default
//!   `--read-records process-crash-safe` (read-only steps committed without a sync of their
//!   own) and once with `--read-records synced`.
//! * **mutating**: `put` with a readback (`get`) through the gate, each call a new key; every
//!   step synced and the tools listed before binding, before sending and at the send.
//!
//! * **relay** (issue 26): the same read and write through a bare byte relay (this bench run
//!   as `relay -- SERVER…`: two threads copying stdin and stdout both ways, no parsing), for
//!   the fault server and, when the peers are installed (`RPR_PEERS_DIR` or
//!   `target/peers`), `@modelcontextprotocol/server-filesystem` (`read_text_file`, and
//!   `write_file` of a new file each call, read back with `read_text_file` through the
//!   gate). The targets compare the gate with the relay: a governed read at most 1.5x the
//!   relay's read; a governed write at most 1.3x its *floor*: the relay's write, plus the
//!   relay's read (the readback), plus two synced 4 KiB writes in the bench's directory (the
//!   pathway's two synced commits), each timed in the same round.
//!
//! * **the rules' floors**: what the gate's own rules make it do besides the relay's call,
//!   each part timed in the same rounds: one commit of a 1 KiB row without a sync (SQLite,
//!   WAL, `synchronous=NORMAL`, a file in the bench's directory: the least a read's record
//!   written before its answer costs) and a `tools/list` through the relay (a write lists
//!   the tools at the send and before its readback, so that what is sent and what reads it
//!   back are the pinned tools); and the hop, the gate's pass-through request less the
//!   relay's (a gate reads and parses every message to know what it is). A read's rules'
//!   floor is the relay's read plus the hop plus one such commit; a write's is its floor
//!   above plus the hop plus two such lists. A target under its rules' floor cannot be met
//!   by a gate that keeps those rules.
//!
//! `--baseline-rpr PATH` adds gates run by another build's `rpr` (a fault-server read-only
//! and mutating row, and, with the peers installed, a server-filesystem read row, in the
//! same rounds), to compare builds side by side. Its synced-commit count
//! needs that build's closing line; a build from before `unsynced` commits were counted
//! shows `NaN`.
//!
//! Each round makes `--calls` calls (default 200) of each kind, kinds alternating (each
//! round starting one kind later than the one before), for `--rounds` rounds (default 3); the table shows the best round of each and its ratio to
//! the direct call of the same kind. The commits come from each gate's own count, printed
//! on stderr when it stops. Give `--dir` a directory on a real disk (tmpfs ignores fsync);
//! default: the system temporary directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rpr::mcp::{McpClient, ServerCommand, SessionConfig};
use serde_json::json;

const RPR: &str = env!("CARGO_BIN_EXE_rpr");
const FAULT: &str = env!("CARGO_BIN_EXE_rpr-fault-server");

struct Options {
    calls: usize,
    rounds: usize,
    dir: PathBuf,
    /// Another build's `rpr`, run as a fourth and fifth gate (read-only, mutating) in the same
    /// rounds: an old and a new build measured side by side.
    baseline: Option<String>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        calls: 200,
        rounds: 3,
        dir: std::env::temp_dir(),
        baseline: None,
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--calls" => o.calls = value()?.parse().map_err(|e| format!("--calls: {e}"))?,
            "--rounds" => o.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--dir" => o.dir = value()?.into(),
            "--baseline-rpr" => o.baseline = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn server(dir: &std::path::Path) -> Vec<String> {
    vec![
        FAULT.to_owned(),
        "--state".into(),
        dir.join("state.json").display().to_string(),
        "--effects".into(),
        dir.join("effects.jsonl").display().to_string(),
    ]
}

/// `relay -- PROGRAM ARGS…`: starts PROGRAM and copies bytes both ways until either side
/// closes; no parsing (the floor of any process between a client and its server).
fn relay(argv: &[String]) -> ExitCode {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let Some((program, rest)) = argv.split_first() else {
        eprintln!("relay: no server command");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("relay: cannot start {program}: {e}");
            return ExitCode::from(1);
        }
    };
    let copy = |mut from: Box<dyn Read + Send>, mut to: Box<dyn Write + Send>| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    break;
                }
            }
        })
    };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::from(1);
    };
    let _up = copy(Box::new(std::io::stdin()), Box::new(stdin));
    let down = copy(Box::new(stdout), Box::new(std::io::stdout()));
    let _ = down.join();
    let _ = child.wait();
    ExitCode::SUCCESS
}

/// The same server behind the relay.
fn relayed(server: &[String]) -> Vec<String> {
    let me = std::env::current_exe().expect("the bench's own path");
    let mut argv = vec![me.display().to_string(), "relay".into(), "--".into()];
    argv.extend(server.iter().cloned());
    argv
}

/// Seconds for `n` synced 4 KiB writes into a file of `dir` that already has its size (as
/// a database's write-ahead log is reused once it has grown): what a synced commit costs
/// the disk at least, without the file's size to sync with it.
fn syncs(dir: &std::path::Path, n: usize) -> f64 {
    use std::io::{Seek, SeekFrom, Write};
    const PAGES: u64 = 256;
    let path = dir.join("syncs.bin");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .expect("the sync file");
    if f.metadata().map_or(0, |m| m.len()) < PAGES * 4096 {
        f.set_len(PAGES * 4096).expect("the sync file's size");
        f.sync_all().expect("a sync");
    }
    let page = [7u8; 4096];
    let start = Instant::now();
    for i in 0..n as u64 {
        f.seek(SeekFrom::Start((i % PAGES) * 4096)).expect("a seek");
        f.write_all(&page).expect("a write");
        f.sync_data().expect("a sync");
    }
    start.elapsed().as_secs_f64()
}

/// Seconds for `n` commits of one 1 KiB row, each its own transaction, in WAL mode without
/// a sync of their own (`synchronous=NORMAL`): the least a record committed before an
/// answer costs SQLite here.
fn commits(conn: &rusqlite::Connection, n: usize) -> f64 {
    let row = "r".repeat(1024);
    let start = Instant::now();
    for _ in 0..n {
        conn.execute_batch("BEGIN IMMEDIATE")
            .expect("a transaction");
        conn.prepare_cached("INSERT INTO rows (body) VALUES (?1)")
            .and_then(|mut s| s.execute([&row]))
            .expect("a row");
        conn.execute_batch("COMMIT").expect("a commit");
    }
    start.elapsed().as_secs_f64()
}

/// A database for [`commits`], in `dir` (WAL, `synchronous=NORMAL`, the store's log size).
fn commit_db(dir: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.join("commits.db")).expect("the commits database");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
         PRAGMA journal_size_limit = 67108864; CREATE TABLE rows (body TEXT NOT NULL)",
    )
    .expect("the commits database's table");
    conn
}

fn connect(argv: &[String]) -> McpClient {
    let command = ServerCommand::new(&argv[0])
        .args(&argv[1..])
        .inherit_env(true);
    McpClient::connect(&command, &SessionConfig::default()).expect("the server starts")
}

/// Seconds for `calls` calls of `tool`; `args(i)` gives the i-th call's arguments.
fn run(
    client: &McpClient,
    tool: &str,
    calls: usize,
    args: impl Fn(usize) -> serde_json::Value,
) -> f64 {
    let start = Instant::now();
    for i in 0..calls {
        match client.call_tool(tool, &args(i), Duration::from_secs(30)) {
            Ok(rpr::mcp::Reply::Result(r)) if r["isError"] != true => {}
            other => panic!("call {i} of {tool} failed: {other:?}"),
        }
    }
    start.elapsed().as_secs_f64()
}

/// Seconds for `calls` requests of `method` without parameters: `resources/list`, which the
/// gate passes through untouched (the floor of its hop), or `tools/list` through the relay.
fn requests(client: &McpClient, method: &str, calls: usize) -> f64 {
    let start = Instant::now();
    for i in 0..calls {
        if let Err(e) = client
            .session()
            .request(method, None, Duration::from_secs(30))
        {
            panic!("{method} request {i} failed: {e}");
        }
    }
    start.elapsed().as_secs_f64()
}

/// A gate in front of its own fault server and database, in `dir/name`.
fn gate(dir: &std::path::Path, name: &str, policy: &std::path::Path, extra: &[&str]) -> McpClient {
    gate_of(RPR, dir, name, policy, extra)
}

/// [`gate`] with the `rpr` binary at `rpr`.
fn gate_of(
    rpr: &str,
    dir: &std::path::Path,
    name: &str,
    policy: &std::path::Path,
    extra: &[&str],
) -> McpClient {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).expect("the gate's dir");
    gate_over(rpr, &dir, "faults", policy, extra, &server(&dir))
}

/// `rpr gate` (the binary `rpr`) with its database in `dir`, governing `server` as
/// `--name NAME`.
fn gate_over(
    rpr: &str,
    dir: &std::path::Path,
    name: &str,
    policy: &std::path::Path,
    extra: &[&str],
    server: &[String],
) -> McpClient {
    let mut argv = vec![
        rpr.to_owned(),
        "gate".into(),
        "--database".into(),
        dir.join("rpr.db").display().to_string(),
        "--policy".into(),
        policy.display().to_string(),
        "--name".into(),
        name.into(),
    ];
    argv.extend(extra.iter().map(|a| (*a).to_owned()));
    argv.push("--".into());
    argv.extend(server.iter().cloned());
    connect(&argv)
}

/// server-filesystem serving `root`, if the peers are installed.
fn filesystem(root: &std::path::Path) -> Option<Vec<String>> {
    let peers = std::env::var_os("RPR_PEERS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/peers"),
        PathBuf::from,
    );
    let bin = peers.join("node_modules/.bin/mcp-server-filesystem");
    bin.exists().then(|| {
        vec![
            "node".to_owned(),
            bin.display().to_string(),
            root.display().to_string(),
        ]
    })
}

/// Stops a gate and returns its synced and unsynced commits, from its last words on stderr:
/// "… N steps committed in S synced commits and U without a sync of their own …".
fn stop(client: McpClient) -> (f64, f64) {
    client.shutdown();
    let tail = client.session().stderr_tail();
    let line = tail
        .lines()
        .rev()
        .find(|l| l.contains("synced commits"))
        .unwrap_or_default()
        .to_owned();
    let words: Vec<&str> = line.split_whitespace().collect();
    let before = |word: &str| -> f64 {
        words
            .iter()
            .position(|w| *w == word)
            .and_then(|at| words.get(at.checked_sub(1)?))
            .and_then(|n| n.parse().ok())
            .unwrap_or(f64::NAN)
    };
    (before("synced"), before("without"))
}

/// One measured kind of call: its row name, and how one round of it runs.
struct Kind<'a> {
    name: &'static str,
    run: Box<dyn Fn(usize) -> f64 + 'a>,
}

#[expect(
    clippy::cast_precision_loss,
    clippy::too_many_lines,
    reason = "call counts shown as rates: far below 2^52; one table, built in one place"
)]
fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("relay") {
        let rest = argv.get(1..).unwrap_or_default();
        let rest = rest.strip_prefix(&["--".to_owned()]).unwrap_or(rest);
        return relay(rest);
    }
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("gate bench: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = o.dir.join(format!("rpr-gate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the bench dir");
    let policy = dir.join("policy.json");
    let rules = json!({"servers": {
        "faults": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {
            "tool": "get", "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}},
        "files": {"read_text_file": {"read_only": true}, "write_file": {"human_gate": false, "readback": {
            "tool": "read_text_file", "arguments": {"path": "$path"},
            "expect": {"/structuredContent/content": "$content"}, "absent_if_error_contains": "ENOENT"}}}
    }});
    std::fs::write(&policy, rules.to_string()).expect("the policy");
    let own = |name: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).expect("a server's dir");
        d
    };
    let direct = connect(&server(&own("direct")));
    let relay_fault = connect(&relayed(&server(&own("relay"))));
    let reads = gate(&dir, "reads", &policy, &[]);
    let synced_reads = gate(&dir, "synced-reads", &policy, &["--read-records", "synced"]);
    let writes = gate(&dir, "writes", &policy, &[]);
    let baseline = o.baseline.as_deref().map(|rpr| {
        (
            gate_of(rpr, &dir, "baseline-reads", &policy, &[]),
            gate_of(rpr, &dir, "baseline-writes", &policy, &[]),
        )
    });
    let root = own("files");
    std::fs::write(root.join("a.txt"), "hello\n").expect("the file to read");
    let files = filesystem(&root).map(|fs| {
        (
            connect(&fs),
            connect(&relayed(&fs)),
            gate_over(RPR, &own("files-gate"), "files", &policy, &[], &fs),
            o.baseline
                .as_deref()
                .map(|rpr| gate_over(rpr, &own("baseline-files-gate"), "files", &policy, &[], &fs)),
        )
    });
    if files.is_none() {
        eprintln!(
            "gate bench: server-filesystem is not installed (bash .ci/install-peers); its rows are left out"
        );
    }
    // Warm up (each gate pins the tools on its first list).
    for client in [&direct, &relay_fault, &reads, &synced_reads, &writes]
        .into_iter()
        .chain(baseline.iter().flat_map(|(r, w)| [r, w]))
    {
        run(client, "get", 10, |_| json!({"key": "warm"}));
    }
    let a_txt = root.join("a.txt");
    if let Some((d, r, g, b)) = &files {
        for client in [d, r, g].into_iter().chain(b) {
            run(client, "read_text_file", 10, |_| json!({"path": a_txt}));
        }
    }

    let commit_db = commit_db(&dir);
    let round = std::cell::Cell::new(0usize);
    let get = |client: &McpClient, n: usize| run(client, "get", n, |_| json!({"key": "k"}));
    let put = |tag: &str, client: &McpClient, n: usize| {
        let r = round.get();
        run(
            client,
            "put",
            n,
            |i| json!({"key": format!("{tag}-{r}-{i}"), "value": "v"}),
        )
    };
    let mut kinds: Vec<Kind> = vec![
        Kind {
            name: "pass-through `resources/list`, direct",
            run: Box::new(|n| requests(&direct, "resources/list", n)),
        },
        Kind {
            name: "pass-through `resources/list`, relay",
            run: Box::new(|n| requests(&relay_fault, "resources/list", n)),
        },
        Kind {
            name: "pass-through `resources/list`, gate (the hop alone)",
            run: Box::new(|n| requests(&reads, "resources/list", n)),
        },
        Kind {
            name: "fault `get`, direct",
            run: Box::new(|n| get(&direct, n)),
        },
        Kind {
            name: "fault `get`, relay",
            run: Box::new(|n| get(&relay_fault, n)),
        },
        Kind {
            name: "fault `get`, gate",
            run: Box::new(|n| get(&reads, n)),
        },
        Kind {
            name: "fault `get`, gate, `--read-records synced`",
            run: Box::new(|n| get(&synced_reads, n)),
        },
        Kind {
            name: "fault `put`, direct",
            run: Box::new(|n| put("d", &direct, n)),
        },
        Kind {
            name: "fault `put`, relay",
            run: Box::new(|n| put("r", &relay_fault, n)),
        },
        Kind {
            name: "fault `put` + readback, gate",
            run: Box::new(|n| put("g", &writes, n)),
        },
        Kind {
            name: "two synced 4 KiB writes",
            run: Box::new(|n| syncs(&dir, 2 * n)),
        },
        Kind {
            name: "one commit of a 1 KiB row, not synced",
            run: Box::new(|n| commits(&commit_db, n)),
        },
        Kind {
            name: "fault `tools/list`, relay",
            run: Box::new(|n| requests(&relay_fault, "tools/list", n)),
        },
    ];
    if let Some((d, r, g, b)) = &files {
        let a_txt = a_txt.clone();
        let read = move |client: &McpClient, n: usize| {
            run(client, "read_text_file", n, |_| json!({"path": a_txt}))
        };
        let root = root.clone();
        let write = move |tag: &str, client: &McpClient, n: usize, r: usize| {
            run(
                client,
                "write_file",
                n,
                |i| json!({"path": root.join(format!("w-{tag}-{r}-{i}.txt")), "content": "v"}),
            )
        };
        let (read, write) = (std::rc::Rc::new(read), std::rc::Rc::new(write));
        kinds.push(Kind {
            name: "files `tools/list`, relay",
            run: Box::new(move |n| requests(r, "tools/list", n)),
        });
        for (name, client) in [
            ("files `read_text_file`, direct", d),
            ("files `read_text_file`, relay", r),
            ("files `read_text_file`, gate", g),
        ]
        .into_iter()
        .chain(
            b.iter()
                .map(|b| ("files `read_text_file`, the baseline build's gate", b)),
        ) {
            let read = std::rc::Rc::clone(&read);
            kinds.push(Kind {
                name,
                run: Box::new(move |n| read(client, n)),
            });
        }
        for (name, tag, client) in [
            ("files `write_file`, direct", "d", d),
            ("files `write_file`, relay", "r", r),
            ("files `write_file` + readback, gate", "g", g),
        ] {
            let write = std::rc::Rc::clone(&write);
            let round = &round;
            kinds.push(Kind {
                name,
                run: Box::new(move |n| write(tag, client, n, round.get())),
            });
        }
    }
    if let Some((r, w)) = &baseline {
        kinds.push(Kind {
            name: "fault `get`, the baseline build's gate",
            run: Box::new(|n| get(r, n)),
        });
        kinds.push(Kind {
            name: "fault `put` + readback, the baseline build's gate",
            run: Box::new(|n| put("b", w, n)),
        });
    }

    let mut best = vec![f64::MAX; kinds.len()];
    for r in 0..o.rounds {
        round.set(r);
        // Each round starts one kind later, so that no kind always runs right after the
        // same other one (the baseline build's files read followed this build's in every
        // round, and came out slower in every run of 2026-12-07).
        let n = kinds.len();
        for i in 0..n {
            let k = (i + r) % n;
            best[k] = best[k].min((kinds[k].run)(o.calls));
        }
    }
    let names: Vec<&str> = kinds.iter().map(|k| k.name).collect();
    drop(kinds);
    let of = |name: &str| names.iter().position(|n| *n == name).map(|i| best[i]);
    direct.shutdown();
    relay_fault.shutdown();
    let calls = (o.rounds * o.calls) as f64;
    let (reads_synced, reads_unsynced) = stop(reads);
    let (synced_synced, _) = stop(synced_reads);
    let (writes_synced, _) = stop(writes);
    if let Some((r, w)) = baseline {
        let _ = (stop(r), stop(w));
    }
    if let Some((d, r, g, b)) = files {
        d.shutdown();
        r.shutdown();
        let _ = stop(g);
        if let Some(b) = b {
            let _ = stop(b);
        }
    }
    let per = |secs: f64| secs * 1e6 / o.calls as f64;
    println!(
        "gate bench: {} calls per round, best of {} rounds, dir {}",
        o.calls,
        o.rounds,
        dir.display()
    );
    println!("| calls | µs per call | calls/s |");
    println!("|---|---|---|");
    for (name, secs) in names.iter().zip(&best) {
        println!(
            "| {name} | {:.0} | {:.0} |",
            per(*secs),
            o.calls as f64 / secs
        );
    }
    println!();
    println!("| target | gate µs | against µs | ratio | target |");
    println!("|---|---|---|---|---|");
    let syncs2 = of("two synced 4 KiB writes");
    for (server, read, write) in [
        ("fault", "`get`", "`put`"),
        ("files", "`read_text_file`", "`write_file`"),
    ] {
        let Some(gate_read) = of(&format!("{server} {read}, gate")) else {
            continue;
        };
        let relay_read = of(&format!("{server} {read}, relay")).unwrap_or(f64::NAN);
        println!(
            "| {server} read through the gate / relay | {:.0} | {:.0} | {:.2}x | 1.5x |",
            per(gate_read),
            per(relay_read),
            gate_read / relay_read
        );
        let gate_write = of(&format!("{server} {write} + readback, gate")).unwrap_or(f64::NAN);
        let floor = of(&format!("{server} {write}, relay")).unwrap_or(f64::NAN)
            + relay_read
            + syncs2.unwrap_or(f64::NAN);
        println!(
            "| {server} write + readback through the gate / floor (relay write + relay read + two syncs) | {:.0} | {:.0} | {:.2}x | 1.3x |",
            per(gate_write),
            per(floor),
            gate_write / floor
        );
    }
    println!();
    println!(
        "| the rules' floor | µs | the target allows µs | the gate µs | target under the floor |"
    );
    println!("|---|---|---|---|---|");
    let commit = of("one commit of a 1 KiB row, not synced").unwrap_or(f64::NAN);
    let hop = (of("pass-through `resources/list`, gate (the hop alone)").unwrap_or(f64::NAN)
        - of("pass-through `resources/list`, relay").unwrap_or(f64::NAN))
    .max(0.0);
    // One row: the rules' floor, what the target allows, the gate, and whether the target
    // lies under the floor.
    let floor_row = |what: String, floor: f64, allows: f64, gate: f64| {
        let under = if allows < floor { "yes" } else { "no" };
        println!(
            "| {what} | {:.0} | {:.0} | {:.0} | {under} |",
            per(floor),
            per(allows),
            per(gate)
        );
    };
    for (server, read, write) in [
        ("fault", "`get`", "`put`"),
        ("files", "`read_text_file`", "`write_file`"),
    ] {
        let (Some(gate_read), Some(relay_read), Some(list)) = (
            of(&format!("{server} {read}, gate")),
            of(&format!("{server} {read}, relay")),
            of(&format!("{server} `tools/list`, relay")),
        ) else {
            continue;
        };
        floor_row(
            format!("{server} read: relay read + the hop + one commit"),
            relay_read + hop + commit,
            1.5 * relay_read,
            gate_read,
        );
        let gate_write = of(&format!("{server} {write} + readback, gate")).unwrap_or(f64::NAN);
        let write_floor = of(&format!("{server} {write}, relay")).unwrap_or(f64::NAN)
            + relay_read
            + syncs2.unwrap_or(f64::NAN);
        floor_row(
            format!("{server} write: its floor + the hop + two relay `tools/list`"),
            write_floor + hop + 2.0 * list,
            1.3 * write_floor,
            gate_write,
        );
    }
    println!();
    println!(
        "synced commits per call: fault reads {:.2} (and {reads_unsynced:.0} without a sync of their own), \
         reads with `--read-records synced` {:.2}, writes {:.2}",
        reads_synced / (calls + 10.0),
        synced_synced / (calls + 10.0),
        writes_synced / (calls + 10.0)
    );
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
