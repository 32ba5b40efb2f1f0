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

    /// How server `name` is started today, as [`Launch`] records it: its command and
    /// arguments, and its environment's compared variables.
    pub(crate) fn launch(&self, name: &str) -> Result<Launch, Failure> {
        let entry = self.entry(name)?;
        let command = entry.program(name)?.to_owned();
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        for key in COMPARED_INHERITED {
            if let Some(value) = std::env::var_os(key) {
                values.insert(key.to_owned(), value.to_string_lossy().into_owned());
            }
        }
        values.extend(entry.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let (secret, plain): (Vec<_>, Vec<_>) = values
            .into_iter()
            .partition(|(k, _)| rpr::evidence::is_secret_key(k));
        Ok(Launch {
            command,
            args: entry.args.clone(),
            env: plain
                .into_iter()
                .map(|(k, v)| (k, rpr::canonical::sha256_hex_bytes(v.as_bytes())))
                .collect(),
            env_names_only: secret.into_iter().map(|(k, _)| k).collect(),
        })
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

/// How `rpr call` started a server, recorded with its pathway (`metadata.launch`): every
/// later step starts the server with the same command and arguments, and refuses to run
/// when its environment differs. A server whose command line or environment changed may
/// read or write another place, and a readback through it proves nothing of the call.
///
/// Values of the environment are recorded as SHA-256 digests (enough to tell a change);
/// a variable whose name looks secret ([`rpr::evidence::is_secret_key`]) only by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// Name and value digest of each compared variable, by name.
    pub(crate) env: Vec<(String, String)>,
    /// The names of the variables recorded by name only, sorted.
    pub(crate) env_names_only: Vec<String>,
}

impl Launch {
    /// As recorded: `{"command", "args", "env": [[name, digest], …], "env_names_only": [name, …]}`
    /// (pairs rather than members, so that no name is taken for a secret member of the
    /// definition and redacted).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "command": self.command,
            "args": self.args,
            "env": self.env.iter().map(|(k, d)| [k, d]).collect::<Vec<_>>(),
            "env_names_only": self.env_names_only,
        })
    }

    /// The recorded launch; `Err`: what in it is not as [`Launch::to_json`] writes it.
    pub(crate) fn from_json(v: &serde_json::Value) -> Result<Self, String> {
        let strings = |v: &serde_json::Value, what: &str| -> Result<Vec<String>, String> {
            v.as_array()
                .ok_or_else(|| format!("its {what} is not a list"))?
                .iter()
                .map(|s| {
                    s.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| format!("its {what} holds a non-string"))
                })
                .collect()
        };
        let env = v["env"]
            .as_array()
            .ok_or("its env is not a list")?
            .iter()
            .map(|pair| match strings(pair, "env pair")?.as_slice() {
                [k, d] => Ok((k.clone(), d.clone())),
                _ => Err("an env pair is not a name and a digest".to_owned()),
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            command: v["command"]
                .as_str()
                .ok_or("its command is not a string")?
                .to_owned(),
            args: strings(&v["args"], "args")?,
            env,
            env_names_only: strings(&v["env_names_only"], "env_names_only")?,
        })
    }

    /// The command line, each word as [`rpr::shown::name`] shows it.
    pub(crate) fn shown(&self) -> String {
        std::iter::once(&self.command)
            .chain(&self.args)
            .map(|w| rpr::shown::name(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The names of the variables whose recorded value (or, for a secret-named one,
    /// presence) differs between `self` and `other`, sorted.
    pub(crate) fn env_changes(&self, other: &Self) -> Vec<String> {
        // Names as members, a secret-named one's value `null`: the members that differ.
        let map = |l: &Self| -> serde_json::Value {
            l.env
                .iter()
                .map(|(k, d)| (k.clone(), serde_json::Value::from(d.as_str())))
                .chain(
                    l.env_names_only
                        .iter()
                        .map(|k| (k.clone(), serde_json::Value::Null)),
                )
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        rpr::mcp::changed_fields(&map(self), &map(other))
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
