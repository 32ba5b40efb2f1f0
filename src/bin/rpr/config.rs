//! The MCP client configuration of the operator commands (`mcpServers`); the policy is the
//! library's [`rpr::policy::Policy`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rpr::mcp::ServerCommand;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::Failure;

/// Variables a server inherits from the host, as the MCP SDKs' stdio clients do; every
/// other variable must be set in the server's `env`.
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

fn load<T: DeserializeOwned>(path: &str, what: &str) -> Result<T, Failure> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {what} {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{what} {path} is not valid: {e}").into())
}

/// An MCP client configuration: `{"mcpServers": {"name": {"command", "args", "env"}}}`.
/// Other top-level members (hosts keep their own settings there) are ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct Config {
    #[serde(rename = "mcpServers")]
    servers: BTreeMap<String, ServerEntry>,
}

#[derive(Debug, Deserialize)]
struct ServerEntry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// The directory the server runs in (as VS Code's and other hosts' stdio entries
    /// say it); relative to the directory `rpr call` runs in. Without it, that directory.
    cwd: Option<String>,
    url: Option<String>,
}

impl Config {
    pub(crate) fn load(path: &str) -> Result<Self, Failure> {
        load(path, "config")
    }

    /// The names of the config's servers.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> + Clone {
        self.servers.keys().map(String::as_str)
    }

    fn entry(&self, name: &str) -> Result<&ServerEntry, Failure> {
        self.servers.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.servers.keys().map(String::as_str).collect();
            format!(
                "the config has no server named `{name}` (it has: {})",
                known.join(", ")
            )
            .into()
        })
    }

    /// The absolute directory a new call's server `name` runs in: the entry's `cwd`
    /// (relative to this process's directory), or this process's directory. `rpr call`
    /// records it with the pathway, and every later step starts the server there: a
    /// readback started anywhere else may read another place and prove nothing.
    pub(crate) fn directory(&self, name: &str) -> Result<PathBuf, Failure> {
        let here = std::env::current_dir()
            .map_err(|e| format!("cannot read this process's directory: {e}"))?;
        let dir = match self.entry(name)?.cwd.as_deref() {
            Some("") => return Err(format!("server `{name}` has an empty `cwd`").into()),
            Some(cwd) => here.join(cwd),
            None => here,
        };
        if !dir.is_dir() {
            return Err(format!(
                "the `cwd` of server `{name}`, {}, is not a directory",
                dir.display()
            )
            .into());
        }
        Ok(dir)
    }

    /// How to start the server called `name` (its directory is the caller's to set:
    /// [`Config::directory`] for a new call, the recorded one for a step).
    pub(crate) fn command(&self, name: &str) -> Result<ServerCommand, Failure> {
        let entry = self.entry(name)?;
        if entry.url.is_some() || entry.kind.as_deref().is_some_and(|k| k != "stdio") {
            return Err(format!(
                "server `{name}` is not a stdio server; this host runs local stdio servers only"
            )
            .into());
        }
        let program = entry
            .command
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| format!("server `{name}` has no `command`"))?;
        let mut command = ServerCommand::new(program).args(&entry.args);
        for key in INHERITED_ENV {
            if let Some(value) = std::env::var_os(key) {
                command = command.env(key, value);
            }
        }
        for (key, value) in &entry.env {
            command = command.env(key, value);
        }
        Ok(command)
    }
}

/// Whether `path` names an existing database (every command but `call` needs one).
pub(crate) fn existing_database(path: &str) -> Result<&Path, Failure> {
    let p = Path::new(path);
    if rpr::store::is_postgres_location(p) {
        // An rpr store in that database (and, for the steps, migrated by `Runtime::open`).
        rpr::store::ReadStore::open_read_only(p)?;
        Ok(p)
    } else if p.is_file() {
        // Only an rpr database: a command that needs one never creates or migrates one
        // (a 0-byte file would otherwise become an empty rpr database).
        rpr::store::ReadStore::open_read_only(p)?;
        Ok(p)
    } else if p.is_dir() {
        Err(format!(
            "{path} is a directory, not a database: give the database file (for example {}; only `call` and `gate` create one)",
            p.join("rpr.db").display()
        )
        .into())
    } else {
        Err(
            format!("no database at {path}; check the path (only `call` and `gate` create one)")
                .into(),
        )
    }
}
