//! Connecting in the server's era, by the spec's dual-era rules (2026-07-28,
//! `basic/transports/stdio` and `basic/versioning`):
//!
//! 1. `server/discover` first, with the newest accepted modern version and the client's
//!    capabilities in `_meta`;
//! 2. a `DiscoverResult` sharing a version with the client: the server is modern;
//!    `-32022` naming a version in common: probe again at it; naming none: refused, never
//!    a fallback;
//! 3. any other error, a result that is no `DiscoverResult`, or no answer within
//!    [`SessionConfig::discover_timeout`]: the server is legacy; `initialize` on the same
//!    connection;
//! 4. the server exited on the probe (some legacy servers end the connection on any
//!    request before `initialize`): it is shut down and reaped, then started once more for
//!    `initialize`, without a probe.
//!
//! Nothing but `server/discover` and `initialize` is sent before the era is settled, so no
//! `tools/call` ever reaches a server of unprobed era.

use serde_json::{Value, json};

use super::McpError;
use super::era::{
    self, Era, LEGACY_VERSIONS, META_SERVER_INFO, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
};
use super::session::{Reply, Session, SessionConfig};
use super::transport::ServerCommand;
use crate::jsonrpc::ErrorObject;

/// What the probe showed.
enum Verdict {
    /// A 2026-07-28 server, described by its `DiscoverResult`.
    Modern(ServerInfo),
    /// A legacy server, and how it showed it.
    Legacy(String),
    /// The connection ended on the probe.
    Gone(String),
}

/// Starts the server and settles its era and version; see the module text.
pub(super) fn connect(
    command: &ServerCommand,
    config: &SessionConfig,
) -> Result<(Session, ServerInfo), McpError> {
    connect_with(&|| Session::start(command, config), config)
}

/// [`connect`], the server started by `start` (once, or twice when it ends the connection
/// on the probe).
pub(super) fn connect_with(
    start: &dyn Fn() -> Result<Session, McpError>,
    config: &SessionConfig,
) -> Result<(Session, ServerInfo), McpError> {
    if newest(&MODERN_VERSIONS, config)
        .or(newest(&LEGACY_VERSIONS, config))
        .is_none()
    {
        return Err(McpError::NoCommonVersion {
            detail: "the client accepts no version it speaks; the server was not started".into(),
            accepted: config.accepted_versions.clone(),
        });
    }
    let session = start()?;
    let Some(version) = newest(&MODERN_VERSIONS, config) else {
        return legacy(session, config, "no modern version is accepted", true);
    };
    match probe(&session, version, config, true).map_err(|e| at_start(&session, e))? {
        Verdict::Modern(server) => Ok(adopt(session, server, config)),
        Verdict::Legacy(how) => legacy(session, config, &how, true),
        Verdict::Gone(how) => {
            // The server ended (or broke) the connection on the probe: a legacy server that
            // takes nothing before `initialize`. Reaped first, so two copies never overlap.
            session.shutdown();
            let session = start()?;
            let how = format!("the connection ended or broke at `server/discover` ({how})");
            legacy(session, config, &how, false)
        }
    }
}

/// The newest of `versions` the client accepts.
fn newest(versions: &[&'static str], config: &SessionConfig) -> Option<&'static str> {
    versions
        .iter()
        .find(|v| config.accepted_versions.iter().any(|a| a == *v))
        .copied()
}

/// Sends `server/discover` at `version` and reads the answer. `again`: whether one more
/// probe is allowed (only the first probe's is).
fn probe(
    session: &Session,
    version: &str,
    config: &SessionConfig,
    again: bool,
) -> Result<Verdict, McpError> {
    let params = json!({"_meta": era::envelope(version, &config.client_capabilities)});
    // A probe again (the server named its versions) waits as long as any request: the
    // server has shown it is modern, and it is up.
    let timeout = if again {
        config.discover_timeout
    } else {
        config.request_timeout
    };
    let reply = match session.request("server/discover", Some(params), timeout) {
        Ok(reply) => reply,
        Err(McpError::TimedOut { timeout, .. }) => {
            return Ok(Verdict::Legacy(format!(
                "it did not answer `server/discover` within {timeout:?}"
            )));
        }
        Err(e) => return Ok(Verdict::Gone(e.to_string())),
    };
    match reply {
        Reply::Result(result) => discovered(&result, config),
        Reply::Error(error) => match unsupported(&error) {
            None => Ok(Verdict::Legacy(format!(
                "it answered `server/discover` with error {} ({})",
                error.code, error.message
            ))),
            Some(supported) => match mutual_modern(&supported, config) {
                Some(other) if again && other != version => probe(session, other, config, false),
                Some(_) => Err(no_common(
                    format!(
                        "the server refused version {version} at `server/discover` although it lists \
                     it among {supported:?}"
                    ),
                    config,
                )),
                None => Err(no_common(
                    format!("the server supports {supported:?}"),
                    config,
                )),
            },
        },
    }
}

/// `data.supported` of a `-32022` error, if it is one and names the versions.
fn unsupported(error: &ErrorObject) -> Option<Vec<String>> {
    if error.code != UNSUPPORTED_PROTOCOL_VERSION {
        return None;
    }
    let supported = error.data.as_ref()?.get("supported")?.as_array()?;
    supported
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The newest modern version both sides speak.
fn mutual_modern(supported: &[String], config: &SessionConfig) -> Option<&'static str> {
    MODERN_VERSIONS.iter().copied().find(|v| {
        supported.iter().any(|s| s == v) && config.accepted_versions.iter().any(|a| a == v)
    })
}

fn no_common(detail: String, config: &SessionConfig) -> McpError {
    McpError::NoCommonVersion {
        detail,
        accepted: config.accepted_versions.clone(),
    }
}

/// Reads a `server/discover` result: a `DiscoverResult` with a version in common is a
/// modern server; one listing only handshake versions, or an answer that is no
/// `DiscoverResult` at all, is a legacy server's.
fn discovered(result: &Value, config: &SessionConfig) -> Result<Verdict, McpError> {
    let versions: Option<Vec<String>> = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect());
    let capabilities = result.get("capabilities").filter(|c| c.is_object());
    let (Some(versions), Some(capabilities)) = (versions, capabilities) else {
        return Ok(Verdict::Legacy(
            "its answer to `server/discover` is not a DiscoverResult".into(),
        ));
    };
    let Some(version) = mutual_modern(&versions, config) else {
        let legacy = LEGACY_VERSIONS
            .iter()
            .any(|v| versions.iter().any(|s| s == v));
        if legacy && newest(&LEGACY_VERSIONS, config).is_some() {
            return Ok(Verdict::Legacy(format!(
                "its `server/discover` lists only versions of the handshake: {versions:?}"
            )));
        }
        return Err(no_common(
            format!("the server supports {versions:?} (its `server/discover` answer)"),
            config,
        ));
    };
    let invalid = |reason: &str| McpError::InvalidReply {
        method: "server/discover".into(),
        reason: reason.into(),
    };
    let info = result.get("_meta").and_then(|m| m.get(META_SERVER_INFO));
    let text = |field: &str| match info.and_then(|i| i.get(field)) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(invalid(&format!("`serverInfo.{field}` is not a string"))),
    };
    let instructions = match result.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid("`instructions` is not a string")),
    };
    Ok(Verdict::Modern(ServerInfo {
        protocol_version: version.to_owned(),
        era: Era::Modern,
        name: text("name")?,
        version: text("version")?,
        capabilities: capabilities.clone(),
        instructions,
    }))
}

/// Settles the session on a modern server: every later request carries the envelope.
fn adopt(session: Session, server: ServerInfo, config: &SessionConfig) -> (Session, ServerInfo) {
    let envelope = era::envelope(&server.protocol_version, &config.client_capabilities);
    session.settle(&server.protocol_version, Some(envelope));
    (session, server)
}

/// The `initialize` handshake on `session`, after the probe showed a legacy server (`how`).
/// A `-32022` answer naming a modern version in common (a modern server slower to
/// answer the probe than its timeout) probes once more when `reprobe` allows.
fn legacy(
    session: Session,
    config: &SessionConfig,
    how: &str,
    reprobe: bool,
) -> Result<(Session, ServerInfo), McpError> {
    match initialize(&session, config, how, reprobe) {
        Ok(Settled::Legacy(server)) => Ok((session, server)),
        Ok(Settled::Modern(server)) => Ok(adopt(session, server, config)),
        Err(e) => Err(at_start(&session, e)),
    }
}

/// How the handshake on a session ended.
enum Settled {
    /// `initialize` done: a legacy server.
    Legacy(ServerInfo),
    /// A modern server after all (probed again after its `-32022`).
    Modern(ServerInfo),
}

/// A handshake failure on a server that broke off or never answered, with the end of its
/// stderr (read once it is shut down: [`McpError::NotStarted`]); other errors unchanged.
fn at_start(session: &Session, e: McpError) -> McpError {
    e.at_start(|| {
        session.shutdown();
        session.stderr_tail()
    })
}

/// The `initialize` handshake (see [`legacy`]).
fn initialize(
    session: &Session,
    config: &SessionConfig,
    how: &str,
    reprobe: bool,
) -> Result<Settled, McpError> {
    let Some(offer) = newest(&LEGACY_VERSIONS, config) else {
        return Err(McpError::NoCommonVersion {
            detail: format!("the server is not a 2026-07-28 server ({how})"),
            accepted: config.accepted_versions.clone(),
        });
    };
    let params = json!({
        "protocolVersion": offer,
        "capabilities": config.client_capabilities,
        "clientInfo": {"name": "rpr", "version": env!("CARGO_PKG_VERSION")},
    });
    let result = match session.request_default("initialize", Some(params))? {
        Reply::Result(result) => result,
        Reply::Error(error) => {
            let again = unsupported(&error)
                .filter(|_| reprobe)
                .and_then(|s| mutual_modern(&s, config));
            if let Some(version) = again
                && let Verdict::Modern(server) = probe(session, version, config, false)?
            {
                return Ok(Settled::Modern(server));
            }
            return Err(McpError::Rpc {
                method: "initialize".into(),
                error: Box::new(error),
            });
        }
    };
    let server = parse_initialize(&result)?;
    let version = &server.protocol_version;
    if Era::of_version(version) != Era::Legacy || !config.accepted_versions.contains(version) {
        session.shutdown();
        return Err(McpError::UnsupportedProtocolVersion {
            offered: server.protocol_version,
            accepted: LEGACY_VERSIONS
                .iter()
                .filter(|v| config.accepted_versions.iter().any(|a| a == *v))
                .map(|v| (*v).to_owned())
                .collect(),
        });
    }
    session.settle(version, None);
    session.notify("notifications/initialized", None)?;
    Ok(Settled::Legacy(server))
}

/// What the server said about itself: in its `initialize` reply (legacy era), or in its
/// `server/discover` result (2026-07-28: `capabilities`, `instructions`, and the name and
/// version from the result's `_meta["io.modelcontextprotocol/serverInfo"]`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerInfo {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// The era of that version ([`Era::of_version`]).
    pub era: Era,
    /// `serverInfo.name` (empty when a 2026-07-28 server does not say).
    pub name: String,
    /// `serverInfo.version`, verbatim. It may be empty: the Python SDK sends `""`.
    pub version: String,
    /// The `capabilities` object, as sent.
    pub capabilities: Value,
    /// The `instructions` text, if any.
    pub instructions: Option<String>,
}

impl ServerInfo {
    /// `name@version`; with an empty version this is `name@`.
    #[must_use]
    pub fn identity(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// Reads an `initialize` result (the legacy era).
fn parse_initialize(result: &Value) -> Result<ServerInfo, McpError> {
    let invalid = |reason: &str| McpError::InvalidReply {
        method: "initialize".into(),
        reason: reason.into(),
    };
    let text = |v: Option<&Value>, what: &str| {
        v.and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid(&format!("`{what}` is missing or not a string")))
    };
    let protocol_version = text(result.get("protocolVersion"), "protocolVersion")?;
    let capabilities = result
        .get("capabilities")
        .filter(|c| c.is_object())
        .cloned();
    let capabilities =
        capabilities.ok_or_else(|| invalid("`capabilities` is missing or not an object"))?;
    let info = result
        .get("serverInfo")
        .ok_or_else(|| invalid("`serverInfo` is missing"))?;
    let name = text(info.get("name"), "serverInfo.name")?;
    let version = text(info.get("version"), "serverInfo.version")?;
    let instructions = match result.get("instructions") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid("`instructions` is not a string")),
    };
    Ok(ServerInfo {
        era: Era::of_version(&protocol_version),
        protocol_version,
        name,
        version,
        capabilities,
        instructions,
    })
}
