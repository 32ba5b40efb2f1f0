//! The MCP client configuration of the operator commands (`mcpServers`); the policy is the
//! library's [`rpr::policy::Policy`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rpr::mcp::ServerCommand;

use crate::launch::Launch;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::Failure;

/// Variables a server inherits from the host, as the MCP SDKs' stdio clients do; every
/// other variable must be set in the server's `env`.
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The inherited variables a [`Launch`] compares: who the server runs as and where its
/// home is (a server may keep its data there). `PATH`, `SHELL` and `TERM` differ between a
/// terminal, a service and a scheduler for the same server, and are not compared.
const COMPARED_INHERITED: [&str; 3] = ["HOME", "LOGNAME", "USER"];

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

impl ServerEntry {
    /// The entry's program; `Err`: it is not a local stdio server, or names none.
    fn program(&self, name: &str) -> Result<&str, Failure> {
        if self.url.is_some() || self.kind.as_deref().is_some_and(|k| k != "stdio") {
            return Err(format!(
                "server `{name}` is not a stdio server; this host runs local stdio servers only"
            )
            .into());
        }
        Ok(self
            .command
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| format!("server `{name}` has no `command`"))?)
    }
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

    /// How server `name` is started by a new call in `dir`, as [`Launch`] records it:
    /// its command as written and as found, its arguments, and its environment's compared
    /// variables, each digested with a new salt.
    pub(crate) fn launch(&self, name: &str, dir: &Path) -> Result<Launch, Failure> {
        let entry = self.entry(name)?;
        let command = entry.program(name)?;
        // The server's PATH, as [`Config::command`] sets it: the entry's, else this process's.
        let path = entry
            .env
            .get("PATH")
            .map(std::ffi::OsString::from)
            .or_else(|| std::env::var_os("PATH"));
        // Not found: recorded as written, and the server's start says why it did not start.
        let program = crate::launch::found(command, dir, path.as_deref())
            .unwrap_or_else(|| command.to_owned());
        let salt = crate::launch::new_salt()?;
        let env = self.env_digests(name, &salt)?;
        Ok(Launch {
            command: command.to_owned(),
            program,
            args: entry.args.clone(),
            salt,
            env,
        })
    }

    /// The compared variables server `name` gets today (the entry's `env`, and `HOME`,
    /// `LOGNAME` and `USER` from this process), each with its value's digest under `salt`
    /// ([`crate::launch::digest`]), by name.
    pub(crate) fn env_digests(
        &self,
        name: &str,
        salt: &str,
    ) -> Result<Vec<(String, String)>, Failure> {
        let entry = self.entry(name)?;
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        for key in COMPARED_INHERITED {
            if let Some(value) = std::env::var_os(key) {
                values.insert(key.to_owned(), value.to_string_lossy().into_owned());
            }
        }
        values.extend(entry.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(values
            .into_iter()
            .map(|(k, v)| {
                let d = crate::launch::digest(salt, &k, &v);
                (k, d)
            })
            .collect())
    }

    /// The command (if any) and arguments of server `name` as the config writes them.
    pub(crate) fn written(&self, name: &str) -> Result<(Option<&str>, &[String]), Failure> {
        let entry = self.entry(name)?;
        Ok((entry.command.as_deref(), &entry.args))
    }

    /// How to start the server called `name` (its directory is the caller's to set:
    /// [`Config::directory`] for a new call, the recorded one for a step).
    pub(crate) fn command(&self, name: &str) -> Result<ServerCommand, Failure> {
        let entry = self.entry(name)?;
        let program = entry.program(name)?;
        self.command_as(name, program, &entry.args)
    }

    /// [`Config::command`] with `program` and `args` in place of the entry's (a step
    /// starts the server as the call recorded it); the environment is the entry's.
    pub(crate) fn command_as(
        &self,
        name: &str,
        program: &str,
        args: &[String],
    ) -> Result<ServerCommand, Failure> {
        let entry = self.entry(name)?;
        let mut command = ServerCommand::new(program).args(args);
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
