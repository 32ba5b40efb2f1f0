//! The example MCP host: runs consequential MCP tool calls through rpr's pathway.
//!
//! `cargo run --example host -- demo [--database PATH]` tells the whole story on real
//! processes: a governed call that completes with readback, then a call whose reply is
//! lost, a restart that does not re-send it, and a reconciliation by readback.
//!
//! The operator commands (real mode: `call`, `approve`, `unresolved`, `reconcile`, …, against
//! the servers of an `mcpServers` configuration under a JSON policy) are the `rpr` binary's
//! (`src/bin/rpr/`); the demo runs the same pathway steps, from the binary's `flow.rs` and
//! `config.rs`. See `docs/host.md`.
//!
//! The demo's MCP server is this same program started as `host serve-demo …`, which
//! runs rpr's fault-injecting test server ([`rpr::mcp::fault_server`]), so the demo
//! needs nothing but cargo.

#[path = "../../src/bin/rpr/config.rs"]
#[expect(
    dead_code,
    reason = "the `rpr` binary's configuration and policy; the demo uses part of them"
)]
mod config;
mod demo;
#[path = "../../src/bin/rpr/flow.rs"]
#[expect(
    dead_code,
    reason = "the `rpr` binary's pathway steps; the demo uses part of them"
)]
mod flow;

use std::process::ExitCode;

use flow::Exit;

/// The error of the demo (exit 1).
type Failure = Box<dyn std::error::Error>;

const USAGE: &str = "\
usage: host demo [--database PATH]

The operator commands (call, approve, unresolved, reconcile, verify, ...) are the `rpr`
binary's: cargo run --bin rpr -- --help";

/// The arguments as UTF-8, or which one is not (`std::env::args` would panic on it).
fn utf8_args() -> Result<Vec<String>, String> {
    std::env::args_os()
        .skip(1)
        .enumerate()
        .map(|(i, a)| {
            a.into_string().map_err(|a| {
                format!(
                    "argument {} is not valid UTF-8 ({}); give paths and values in UTF-8",
                    i + 1,
                    a.to_string_lossy()
                )
            })
        })
        .collect()
}

fn main() -> ExitCode {
    let args = match utf8_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("host: {e}");
            return ExitCode::from(2);
        }
    };
    let database = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["serve-demo", ..] => return rpr::mcp::fault_server::run(args.into_iter().skip(1)),
        ["--help" | "-h" | "help"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        ["demo"] => None,
        ["demo", "--database", path] => Some(path.to_owned()),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match demo::run(database.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("host demo: error: {e}");
            ExitCode::FAILURE
        }
    }
}
