//! `rpr gate`: a governing MCP stdio proxy (being built; see docs/gate.md).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::{Exit, Failure};

/// `rpr gate --database DB --policy POLICY [--actor NAME] [--name NAME] -- COMMAND [ARGS...]`
#[derive(Debug, clap::Args)]
pub(crate) struct GateArgs {
    /// The pathway database (created when missing).
    #[arg(long, value_name = "DB")]
    pub(crate) database: PathBuf,
    /// The policy file (JSON; see docs/gate.md).
    #[arg(long, value_name = "POLICY")]
    pub(crate) policy: PathBuf,
    /// The actor that proposes every call (the agent behind the MCP client).
    #[arg(long, value_name = "NAME", default_value = "agent")]
    pub(crate) actor: String,
    /// The name the policy and the pins use for the server (default: the name the
    /// server reports in its `serverInfo`).
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    /// The MCP server to govern, started as the gate's child with the gate's environment.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
}

/// Runs the gate until the client closes its stdin.
pub(crate) fn run(args: &GateArgs) -> Result<Exit, Failure> {
    Err(format!("rpr gate is not built yet ({args:?})").into())
}
