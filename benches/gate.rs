//! The cost of `rpr gate` (issue 10): the same MCP calls made directly and through the gate,
//! alternating in one run, against the same server (`rpr-fault-server`, no fault, replying at
//! once).
//!
//! ```sh
//! cargo bench --bench gate -- [--calls N] [--rounds R] [--dir DIR]
//! ```
//!
//! * **read-only**: `get` (annotated read-only): directly, and through the gate, where each
//!   call is a pathway (propose+admit in one commit, bind, the durable attempt record, the
//!   call, the outcome) and the gate lists the tools three times to check the binding.
//! * **mutating**: `put` with a readback (`get`) through the gate, each call a new key.
//!
//! Each round makes `--calls` calls (default 200) on each side, sides alternating, for
//! `--rounds` rounds (default 3); the table shows the best round of each side and the ratio.
//! The gate's durable commits come from its own count, printed on stderr when it stops.
//! Give `--dir` a directory on a real disk (tmpfs ignores fsync); default: the system
//! temporary directory.

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
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        calls: 200,
        rounds: 3,
        dir: std::env::temp_dir(),
    };
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--calls" => o.calls = value()?.parse().map_err(|e| format!("--calls: {e}"))?,
            "--rounds" => o.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--dir" => o.dir = value()?.into(),
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
    let rules = json!({"servers": {"faults": {"put": {"human_gate": false, "readback": {
        "tool": "get", "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}}}});
    std::fs::write(&policy, rules.to_string()).expect("the policy");
    let mut gate = vec![
        RPR.to_owned(),
        "gate".into(),
        "--database".into(),
        dir.join("rpr.db").display().to_string(),
        "--policy".into(),
        policy.display().to_string(),
        "--name".into(),
        "faults".into(),
        "--".into(),
    ];
    gate.extend(server(&dir));
    let direct = connect(&server(&dir));
    let gated = connect(&gate);
    // Warm up both (the gate pins the tools on its first list).
    run(&direct, "get", 10, |_| json!({"key": "warm"}));
    run(&gated, "get", 10, |_| json!({"key": "warm"}));

    let (mut best_direct, mut best_gated, mut best_put) = (f64::MAX, f64::MAX, f64::MAX);
    for round in 0..o.rounds {
        best_direct = best_direct.min(run(&direct, "get", o.calls, |_| json!({"key": "k"})));
        best_gated = best_gated.min(run(&gated, "get", o.calls, |_| json!({"key": "k"})));
        best_put = best_put.min(run(
            &gated,
            "put",
            o.calls,
            |i| json!({"key": format!("r{round}-k{i}"), "value": "v"}),
        ));
    }
    let stderr_tail = {
        gated.shutdown();
        gated.session().stderr_tail()
    };
    direct.shutdown();
    let per = |secs: f64| secs * 1e6 / o.calls as f64;
    println!(
        "gate bench: {} calls per round, best of {} rounds, dir {}",
        o.calls,
        o.rounds,
        dir.display()
    );
    println!("| calls | µs per call | calls/s |");
    println!("|---|---|---|");
    for (name, secs) in [
        ("read-only `get`, direct", best_direct),
        ("read-only `get`, through the gate", best_gated),
        ("mutating `put` + readback, through the gate", best_put),
    ] {
        println!(
            "| {name} | {:.0} | {:.0} |",
            per(secs),
            o.calls as f64 / secs
        );
    }
    println!(
        "read-only overhead ratio (gate / direct): {:.2}x",
        best_gated / best_direct
    );
    let total_calls = 20 + o.rounds * o.calls * 2;
    if let Some(line) = stderr_tail.lines().rev().find(|l| l.contains("durable in")) {
        println!("the gate: {line}");
        let commits: Option<f64> = line
            .split(" in ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok());
        if let Some(c) = commits {
            println!(
                "durable commits (syncs) per governed call, all kinds: {:.2}",
                c / total_calls as f64
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
