//! The example MCP host: how a host runs consequential MCP tool calls through rpr's
//! pathway (propose, admit, bind, dispatch, readback, recover), told as a demo on real
//! processes: `cargo run --example host -- demo [--database PATH]`. The steps are in
//! `demo.rs`; this file is the command line. See `docs/host.md`.
//!
//! The operator commands (`call`, `approve`, `unresolved`, `reconcile`, …, against the
//! servers of an `mcpServers` configuration under a JSON policy) are the `rpr` binary's
//! (`src/bin/rpr/`), not this example's.
//!
//! The demo's MCP server is this same program started as `host serve-demo …`, which
//! runs rpr's fault-injecting test server ([`rpr::mcp::fault_server`]), so the demo
//! needs nothing but cargo.

mod demo;

use std::path::Path;
use std::process::ExitCode;

use rpr::mcp::ServerCommand;

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
    // The demo's server: this program in `serve-demo` mode.
    let server = match std::env::current_exe() {
        Ok(exe) => ServerCommand::new(exe).arg("serve-demo"),
        Err(e) => {
            eprintln!("host demo: error: cannot find this program to start its server: {e}");
            return ExitCode::FAILURE;
        }
    };
    match demo::run(database.as_deref().map(Path::new), &server) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("host demo: error: {e}");
            ExitCode::FAILURE
        }
    }
}
