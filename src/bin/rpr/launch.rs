//! How `rpr call` started a server, recorded with its pathway (`metadata.launch`), so that
//! every later step starts the same server: a server started with another command line or
//! environment may read or write another place, and a readback through it proves nothing
//! of the call.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Failure;

/// Rounds of SHA-256 over each variable's digest ([`digest`]): a guess at a value costs
/// this many hashes, so a reader of the database cannot cheaply try a dictionary of
/// passwords against a recorded variable.
const ROUNDS: u32 = 1 << 16;

/// How a call started its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    /// The command as the config wrote it (for messages).
    pub(crate) command: String,
    /// The program it named, as found when the call started it: an absolute path, or one
    /// relative to the recorded directory. Every step starts this file.
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    /// The salt of this launch's variable digests (hex).
    pub(crate) salt: String,
    /// Name and value digest of each compared variable, by name.
    pub(crate) env: Vec<(String, String)>,
}

impl Launch {
    /// As recorded: `{"command", "program", "args", "salt", "env": [[name, digest], …]}`
    /// (pairs rather than members, so that no variable's name is taken for a secret member
    /// of the definition and its digest redacted).
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "command": self.command,
            "program": self.program,
            "args": self.args,
            "salt": self.salt,
            "env": self.env.iter().map(|(k, d)| [k, d]).collect::<Vec<_>>(),
        })
    }

    /// The recorded launch; `Err`: what in it is not as [`Launch::to_json`] writes it.
    pub(crate) fn from_json(v: &Value) -> Result<Self, String> {
        let text = |member: &str| -> Result<String, String> {
            let s = v[member]
                .as_str()
                .ok_or_else(|| format!("its {member} is not a string"))?;
            unredacted(s, member).map(str::to_owned)
        };
        let strings = |v: &Value, what: &str| -> Result<Vec<String>, String> {
            v.as_array()
                .ok_or_else(|| format!("its {what} is not a list"))?
                .iter()
                .map(|s| {
                    let s = s
                        .as_str()
                        .ok_or_else(|| format!("its {what} holds a non-string"))?;
                    unredacted(s, what).map(str::to_owned)
                })
                .collect()
        };
        let env = v["env"]
            .as_array()
            .ok_or("its env is not a list")?
            .iter()
            .map(|pair| match strings(pair, "env")?.as_slice() {
                [k, d] => Ok((k.clone(), d.clone())),
                _ => Err("an env pair is not a name and a digest".to_owned()),
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            command: text("command")?,
            program: text("program")?,
            args: strings(&v["args"], "args")?,
            salt: text("salt")?,
            env,
        })
    }

    /// The command line as written in the config, each word quoted for a POSIX shell when
    /// it needs it (or escaped when it cannot be shown as typed), so that two command lines
    /// that differ never print alike.
    pub(crate) fn shown(&self) -> String {
        std::iter::once(&self.command)
            .chain(&self.args)
            .map(|w| rpr::shown::shell_word(w).unwrap_or_else(|| format!("{w:?}")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The names of the variables whose value differs between the recorded launch and
    /// `now` (digested with this launch's salt: [`crate::config::Config::env_digests`]),
    /// or that only one of them has; sorted.
    pub(crate) fn env_changes(&self, now: &[(String, String)]) -> Vec<String> {
        let map = |pairs: &[(String, String)]| -> Value {
            pairs
                .iter()
                .map(|(k, d)| (k.clone(), Value::from(d.as_str())))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        rpr::mcp::changed_fields(&map(&self.env), &map(now))
    }
}

/// What differs between how a call started its server and how the config would now.
#[derive(Debug, Default)]
pub(crate) struct Change {
    /// The two command lines, when the config's is another.
    pub(crate) command_line: Option<(String, String)>,
    /// The variables whose values differ ([`Launch::env_changes`]).
    pub(crate) env: Vec<String>,
}

impl Change {
    /// Between `recorded` and server `server` of `config` today.
    pub(crate) fn of(
        recorded: &Launch,
        config: &crate::config::Config,
        server: &str,
    ) -> Result<Self, Failure> {
        let (command, args) = config.written(server)?;
        let now = Launch {
            command: command.unwrap_or_default().to_owned(),
            args: args.to_vec(),
            ..recorded.clone()
        };
        let command_line = ((&recorded.command, &recorded.args) != (&now.command, &now.args))
            .then(|| (recorded.shown(), now.shown()));
        let env = recorded.env_changes(&config.env_digests(server, &recorded.salt)?);
        Ok(Self { command_line, env })
    }

    /// Whether nothing differs.
    pub(crate) fn is_empty(&self) -> bool {
        self.command_line.is_none() && self.env.is_empty()
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some((was, now)) = &self.command_line {
            parts.push(format!(
                "the call's command line was `{was}`, the config's is `{now}`"
            ));
        }
        if !self.env.is_empty() {
            let names: Vec<String> = self.env.iter().map(|n| rpr::shown::name(n)).collect();
            parts.push(format!("its environment differs in {}", names.join(", ")));
        }
        f.write_str(&parts.join("; "))
    }
}

/// A recorded string that redaction changed cannot say how the server was started.
fn unredacted<'a>(s: &'a str, what: &str) -> Result<&'a str, String> {
    if s.contains(rpr::evidence::REDACTED) {
        Err(format!("its {what} was redacted"))
    } else {
        Ok(s)
    }
}

/// The digest of variable `name`'s `value` under `salt`: SHA-256 of the three, then
/// [`ROUNDS`] more rounds over the digest and the salt; hex.
pub(crate) fn digest(salt: &str, name: &str, value: &str) -> String {
    let mut h = Sha256::new();
    for part in [salt, name, value] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let mut d = h.finalize();
    for _ in 0..ROUNDS {
        let mut h = Sha256::new();
        h.update(d);
        h.update(salt.as_bytes());
        d = h.finalize();
    }
    hex(&d)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// 16 random bytes, hex.
pub(crate) fn new_salt() -> Result<String, Failure> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| format!("no random salt: {e}"))?;
    Ok(hex(&salt))
}

/// The executable file `command` names for a server started in `dir` with `path` as its
/// `PATH`: with a `/`, relative to `dir` (kept relative: the step starts it in the same
/// directory); without one, the first executable `command` in a directory of `path`
/// (absolute, a relative directory taken from `dir`). `None`: there is none.
pub(crate) fn found(command: &str, dir: &Path, path: Option<&OsStr>) -> Option<String> {
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        return executable(&dir.join(command)).then(|| command.to_owned());
    }
    std::env::split_paths(path?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| dir.join(d).join(command))
        .find(|p| executable(p))
        .and_then(|p| p.to_str().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_depends_on_the_salt_the_name_and_the_value() {
        let d = digest("s", "N", "v");
        assert_eq!(d.len(), 64);
        assert_eq!(d, digest("s", "N", "v"));
        for other in [
            digest("t", "N", "v"),
            digest("s", "M", "v"),
            digest("s", "N", "w"),
        ] {
            assert_ne!(d, other);
        }
        // The parts are separated: moving a byte from one to the next changes it.
        assert_ne!(digest("s", "NA", "v"), digest("s", "N", "Av"));
    }

    #[test]
    fn a_launch_reads_back_as_written_and_a_redacted_one_is_refused() {
        let l = Launch {
            command: "node".into(),
            program: "/usr/bin/node".into(),
            args: vec!["a b".into(), "c".into()],
            salt: "00".into(),
            env: vec![("HOME".into(), "d".into())],
        };
        assert_eq!(Launch::from_json(&l.to_json()), Ok(l.clone()));
        assert_eq!(l.shown(), "node 'a b' c");
        let mut v = l.to_json();
        v["args"][0] = Value::from(format!("--db={}", rpr::evidence::REDACTED));
        assert!(Launch::from_json(&v).unwrap_err().contains("redacted"));
        for broken in [json!(null), json!({"command": 1}), json!([])] {
            assert!(Launch::from_json(&broken).is_err(), "{broken}");
        }
    }

    #[test]
    fn a_command_is_found_as_the_server_would_start_it() {
        let dir = std::env::temp_dir();
        assert_eq!(
            found("sh", &dir, Some(OsStr::new("/nowhere:/bin"))).as_deref(),
            Some("/bin/sh")
        );
        assert_eq!(found("sh", &dir, Some(OsStr::new("/nowhere"))), None);
        assert_eq!(found("sh", &dir, None), None);
        assert_eq!(found("/bin/sh", &dir, None).as_deref(), Some("/bin/sh"));
    }
}
