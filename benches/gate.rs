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
//! `--baseline-rpr PATH` adds two gates run by another build's `rpr` (a read-only and a
//! mutating row, in the same rounds), to compare builds side by side. Its synced-commit count
//! needs that build's closing line; a build from before `unsynced` commits were counted
//! shows `NaN`.
//!
//! Each round makes `--calls` calls (default 200) of each kind, kinds alternating, for
//! `--rounds` rounds (default 3); the table shows the best round of each and its ratio to
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

/// Seconds for `calls` requests the gate passes through untouched (the floor of its hop).
fn pass(client: &McpClient, calls: usize) -> f64 {
    let start = Instant::now();
    for i in 0..calls {
        if let Err(e) = client
            .session()
            .request("resources/list", None, Duration::from_secs(30))
        {
            panic!("pass-through request {i} failed: {e}");
        }
    }
    start.elapsed().as_secs_f64()
}

/// A gate in front of its own server and database, in `dir/name`.
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
    let mut argv = vec![
        rpr.to_owned(),
        "gate".into(),
        "--database".into(),
        dir.join("rpr.db").display().to_string(),
        "--policy".into(),
        policy.display().to_string(),
        "--name".into(),
        "faults".into(),
    ];
    argv.extend(extra.iter().map(|a| (*a).to_owned()));
    argv.push("--".into());
    argv.extend(server(&dir));
    connect(&argv)
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

#[expect(
    clippy::cast_precision_loss,
    reason = "call counts shown as rates: far below 2^52"
)]
fn main() -> ExitCode {
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
    let rules = json!({"servers": {"faults": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {
        "tool": "get", "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}}}});
    std::fs::write(&policy, rules.to_string()).expect("the policy");
    std::fs::create_dir_all(dir.join("direct")).expect("the direct server's dir");
    let direct = connect(&server(&dir.join("direct")));
    let reads = gate(&dir, "reads", &policy, &[]);
    let synced_reads = gate(&dir, "synced-reads", &policy, &["--read-records", "synced"]);
    let writes = gate(&dir, "writes", &policy, &[]);
    let baseline = o.baseline.as_deref().map(|rpr| {
        (
            gate_of(rpr, &dir, "baseline-reads", &policy, &[]),
            gate_of(rpr, &dir, "baseline-writes", &policy, &[]),
        )
    });
    // Warm up (each gate pins the tools on its first list).
    for client in [&direct, &reads, &synced_reads, &writes]
        .into_iter()
        .chain(baseline.iter().flat_map(|(r, w)| [r, w]))
    {
        run(client, "get", 10, |_| json!({"key": "warm"}));
    }

    let mut best = [f64::MAX; 6];
    let mut best_baseline = [f64::MAX; 2];
    for round in 0..o.rounds {
        let times = [
            pass(&direct, o.calls),
            pass(&reads, o.calls),
            run(&direct, "get", o.calls, |_| json!({"key": "k"})),
            run(&reads, "get", o.calls, |_| json!({"key": "k"})),
            run(&synced_reads, "get", o.calls, |_| json!({"key": "k"})),
            run(
                &writes,
                "put",
                o.calls,
                |i| json!({"key": format!("r{round}-k{i}"), "value": "v"}),
            ),
        ];
        for (b, t) in best.iter_mut().zip(times) {
            *b = b.min(t);
        }
        if let Some((r, w)) = &baseline {
            let times = [
                run(r, "get", o.calls, |_| json!({"key": "k"})),
                run(
                    w,
                    "put",
                    o.calls,
                    |i| json!({"key": format!("b{round}-k{i}"), "value": "v"}),
                ),
            ];
            for (b, t) in best_baseline.iter_mut().zip(times) {
                *b = b.min(t);
            }
        }
    }
    direct.shutdown();
    let calls = (o.rounds * o.calls) as f64;
    let (reads_synced, reads_unsynced) = stop(reads);
    let (synced_synced, _) = stop(synced_reads);
    let (writes_synced, _) = stop(writes);
    let baseline_synced = baseline.map(|(r, w)| (stop(r).0, stop(w).0));
    let per = |secs: f64| secs * 1e6 / o.calls as f64;
    println!(
        "gate bench: {} calls per round, best of {} rounds, dir {}",
        o.calls,
        o.rounds,
        dir.display()
    );
    println!("| calls | µs per call | calls/s | ratio to direct | synced commits per call |");
    println!("|---|---|---|---|---|");
    let rows = [
        (
            "pass-through `resources/list`, direct",
            best[0],
            best[0],
            None,
        ),
        (
            "pass-through `resources/list`, through the gate (the hop alone)",
            best[1],
            best[0],
            None,
        ),
        ("read-only `get`, direct", best[2], best[2], None),
        (
            "read-only `get`, through the gate (default `--read-records process-crash-safe`)",
            best[3],
            best[2],
            Some(reads_synced / (calls + 10.0)),
        ),
        (
            "read-only `get`, through the gate, `--read-records synced`",
            best[4],
            best[2],
            Some(synced_synced / (calls + 10.0)),
        ),
        (
            "mutating `put` + readback, through the gate",
            best[5],
            best[2],
            Some(writes_synced / (calls + 10.0)),
        ),
    ];
    let mut rows = rows.to_vec();
    if let Some((r, w)) = baseline_synced {
        rows.push((
            "read-only `get`, through the baseline build's gate (its defaults)",
            best_baseline[0],
            best[2],
            Some(r / (calls + 10.0)),
        ));
        rows.push((
            "mutating `put` + readback, through the baseline build's gate",
            best_baseline[1],
            best[2],
            Some(w / (calls + 10.0)),
        ));
    }
    for (name, secs, base, synced) in rows {
        println!(
            "| {name} | {:.0} | {:.0} | {:.2}x | {} |",
            per(secs),
            o.calls as f64 / secs,
            secs / base,
            synced.map_or_else(|| "-".to_owned(), |s| format!("{s:.2}")),
        );
    }
    println!(
        "read-only calls through the default gate: {reads_unsynced:.0} commits without a sync of their own for {:.0} calls",
        calls + 10.0
    );
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
