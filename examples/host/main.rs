//! The example MCP host: runs consequential MCP tool calls through rpr's pathway.
//!
//! `cargo run --example host -- demo [--database PATH]` tells the whole story on real
//! processes: a governed call that completes with readback, then a call whose reply is
//! lost, a restart that does not re-send it, and a reconciliation by readback.
//!
//! Real mode (`call`, `approve`, `deny`, `unresolved`, `reconcile`, `repair`, `resume`,
//! `verify`, and the other steps: `hold`, `release`, `escalate`, `stop`, `abort`, `attest`,
//! `require-repair`) runs the same pathway against the servers of an MCP client configuration
//! (`mcpServers` JSON) under a small JSON policy; see `docs/host.md`.
//!
//! The demo's MCP server is this same program started as `host serve-demo …`, which
//! runs rpr's fault-injecting test server ([`rpr::mcp::fault_server`]), so the demo
//! needs nothing but cargo.

mod commands;
mod config;
mod demo;
mod flow;

use std::collections::BTreeMap;
use std::process::ExitCode;

type Failure = Box<dyn std::error::Error>;

const USAGE: &str = "\
usage: host demo [--database PATH]
       host call --config F --policy P --database DB --server NAME --tool T --args JSON
                 [--key KEY] [--actor A] [--approve-as NAME | --deny-as NAME]
       host approve --config F --policy P --database DB (--pathway ID | --key KEY) --as NAME [--args JSON]
       host deny --database DB (--pathway ID | --key KEY) --as NAME [--reason TEXT]
       host unresolved --database DB
       host reconcile --config F --policy P --database DB (--pathway ID | --key KEY) [--args JSON]
       host repair --database DB (--pathway ID | --key KEY) --as NAME --evidence TEXT
       host resume --config F --policy P --database DB (--pathway ID | --key KEY) --as NAME [--args JSON]
       host hold --database DB (--pathway ID | --key KEY) --as NAME [--reason TEXT]
       host release --database DB (--pathway ID | --key KEY) --as NAME
       host escalate --database DB (--pathway ID | --key KEY) --as NAME
       host stop --database DB (--pathway ID | --key KEY) --as NAME [--reason TEXT]
       host abort --database DB (--pathway ID | --key KEY) --as NAME --residuals TEXT
       host attest --database DB (--pathway ID | --key KEY) --as NAME
                   --verdict applied|not-applied|unresolved --evidence TEXT
       host require-repair --database DB (--pathway ID | --key KEY) --as NAME
       host verify --database DB [--head HASH]

exit status: 0 done; 3 the pathway needs another step (printed); 4 denied (final); 1 error; 2 bad usage.
--args takes the tool's arguments as JSON text, as @FILE (read from a file), or as - (stdin).
`call` asks at the terminal when a Human Gate needs a decision; without a terminal and
without --approve-as/--deny-as it leaves the pathway at the gate and prints how to approve.";

/// How a command ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Done: the pathway is completed, or the asked-for step was taken.
    Done,
    /// The pathway needs another step (at a gate, unknown, repair): exit 3.
    Pending,
    /// The call was denied (by policy or at the Human Gate); final: exit 4.
    Denied,
}

/// A usage error (exit 2).
#[derive(Debug)]
pub(crate) struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// `--flag value` pairs of one command.
#[derive(Debug)]
pub(crate) struct Args(BTreeMap<String, String>);

impl Args {
    fn parse(args: &[String], allowed: &[&str]) -> Result<Self, Usage> {
        let mut map = BTreeMap::new();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let name = flag
                .strip_prefix("--")
                .filter(|n| allowed.contains(n))
                .ok_or_else(|| Usage(format!("unexpected argument `{flag}`")))?;
            let value = it
                .next()
                .ok_or_else(|| Usage(format!("`{flag}` needs a value")))?;
            if map.insert(name.to_owned(), value.clone()).is_some() {
                return Err(Usage(format!("`{flag}` is given twice")));
            }
        }
        Ok(Self(map))
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    pub(crate) fn req(&self, name: &str) -> Result<&str, Usage> {
        self.get(name)
            .ok_or_else(|| Usage(format!("`--{name}` is required")))
    }
}

fn run(command: &str, rest: &[String]) -> Result<Exit, Failure> {
    let flags: &[&str] = match command {
        "demo" | "unresolved" => &["database"],
        "call" => &[
            "config",
            "policy",
            "database",
            "server",
            "tool",
            "args",
            "key",
            "actor",
            "approve-as",
            "deny-as",
        ],
        "approve" | "resume" => &[
            "config", "policy", "database", "pathway", "key", "as", "args",
        ],
        "deny" | "hold" | "stop" => &["database", "pathway", "key", "as", "reason"],
        "reconcile" => &["config", "policy", "database", "pathway", "key", "args"],
        "repair" => &["database", "pathway", "key", "as", "evidence"],
        "release" | "escalate" | "require-repair" => &["database", "pathway", "key", "as"],
        "abort" => &["database", "pathway", "key", "as", "residuals"],
        "attest" => &["database", "pathway", "key", "as", "verdict", "evidence"],
        "verify" => &["database", "head"],
        other => return Err(Usage(format!("unknown command `{other}`")).into()),
    };
    let args = Args::parse(rest, flags)?;
    match command {
        "demo" => demo::run(args.get("database")).map(|()| Exit::Done),
        "call" => commands::call(&args),
        "approve" => commands::approve(&args),
        "deny" => commands::deny(&args),
        "unresolved" => commands::unresolved(&args),
        "reconcile" => commands::reconcile(&args),
        "repair" => commands::repair(&args),
        "resume" => commands::resume(&args),
        "hold" => commands::hold(&args),
        "release" => commands::release(&args),
        "escalate" => commands::escalate(&args),
        "stop" => commands::stop(&args),
        "abort" => commands::abort(&args),
        "attest" => commands::attest(&args),
        "require-repair" => commands::require_repair(&args),
        _ => commands::verify(&args),
    }
}

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
    match args.first().map(String::as_str) {
        Some("serve-demo") => rpr::mcp::fault_server::run(args.into_iter().skip(1)),
        Some("--help" | "-h" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
        Some(command) => match run(command, &args[1..]) {
            Ok(Exit::Done) => ExitCode::SUCCESS,
            Ok(Exit::Pending) => ExitCode::from(3),
            Ok(Exit::Denied) => ExitCode::from(4),
            Err(e) if e.is::<Usage>() => {
                eprintln!("host {command}: {e}\n\n{USAGE}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("host {command}: error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
