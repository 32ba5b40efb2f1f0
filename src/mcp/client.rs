//! The MCP lifecycle on top of a session: `initialize`, `tools/list`, `tools/call`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::era::{self, Era, ResultType};
use super::in_process::InProcessServer;
use super::mrtr::InputAnswerer;
use super::negotiate::ServerInfo;
use super::session::{Reply, SendGuard, Session, SessionConfig};
use super::transport::{ServerCommand, ShutdownReport};
use super::{McpError, mrtr};
use crate::executor::Carrier;

/// One tool definition from `tools/list` that passed validation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Tool {
    /// The tool's name (non-empty).
    pub name: String,
    /// The whole definition, as sent.
    pub definition: Value,
}

impl Tool {
    /// Checks one tool definition as [`McpClient::list_tools`] does (non-empty
    /// `name`; `inputSchema` an object with `"type": "object"`; well-typed optional
    /// members) and wraps it.
    pub fn from_definition(definition: Value) -> Result<Self, McpError> {
        match check_tool(&definition) {
            Ok(name) => Ok(Self { name, definition }),
            Err(reason) => Err(McpError::InvalidReply {
                method: "tools/list".into(),
                reason,
            }),
        }
    }

    /// The tool's `inputSchema` (always a JSON object with `"type": "object"`).
    #[must_use]
    pub fn input_schema(&self) -> &Value {
        &self.definition["inputSchema"]
    }
}

/// A tool definition that was rejected, and why.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InvalidTool {
    /// The definition, as sent.
    pub definition: Value,
    /// What is wrong with it.
    pub reason: String,
}

/// The result of a complete, paginated `tools/list`.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ToolList {
    /// The valid tools, in the server's order.
    pub tools: Vec<Tool>,
    /// Definitions that were rejected (missing or empty name, no object
    /// `inputSchema`, duplicate name, …). A rejected tool cannot be bound.
    pub invalid: Vec<InvalidTool>,
    /// How many pages were fetched.
    pub pages: usize,
}

impl ToolList {
    /// The valid tool called `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Why a tool called `name` was rejected, if it was.
    #[must_use]
    pub fn rejection(&self, name: &str) -> Option<&str> {
        self.invalid
            .iter()
            .find(|t| t.definition.get("name").and_then(Value::as_str) == Some(name))
            .map(|t| t.reason.as_str())
    }
}

/// An MCP client connection to one stdio server, in the server's era.
///
/// [`McpClient::connect`] starts the server and settles the era and version by the
/// spec's dual-era rules: `server/discover` first (protocol
/// [`MODERN_PROTOCOL_VERSION`](super::MODERN_PROTOCOL_VERSION)); a 2026-07-28 server is
/// then used without a handshake, every request carrying the `_meta` envelope; any other
/// answer, or none within [`SessionConfig::discover_timeout`], falls back to `initialize`
/// (offering [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION), accepting 2025-11-25,
/// 2025-06-18, 2025-03-26 and 2024-11-05) and `notifications/initialized`. The client
/// declares the capabilities of [`SessionConfig::client_capabilities`] (none by default)
/// and `clientInfo` `rpr` with this crate's version. All methods take `&self`, so the
/// client can be shared (for example in an `Arc`) by an executor and a readback.
#[derive(Debug)]
pub struct McpClient {
    session: Session,
    server: ServerInfo,
    request_timeout: Duration,
    max_tool_pages: usize,
    /// The server process's start time, read once: it cannot change while the process is
    /// not reaped (its pid is not reused before).
    start: std::sync::OnceLock<String>,
    /// The server runs in this process ([`McpClient::connect_in_process`]): the host
    /// carries its calls.
    in_process: bool,
}

impl McpClient {
    /// Starts the server and settles its era and protocol version (see [`McpClient`]).
    ///
    /// A server that exits on the `server/discover` probe is reaped and started once more
    /// for `initialize`. If the server answers `initialize` with a version not in
    /// [`SessionConfig::accepted_versions`], it is shut down and
    /// [`McpError::UnsupportedProtocolVersion`] is returned; a 2026-07-28 server with no
    /// version in common gives [`McpError::NoCommonVersion`].
    pub fn connect(command: &ServerCommand, config: &SessionConfig) -> Result<Self, McpError> {
        let (session, server) = super::negotiate::connect(command, config)?;
        Ok(Self::over(session, server, config, false))
    }

    /// [`McpClient::connect`] for a server that runs in this process
    /// ([`InProcessServer`]): the same negotiation and the same client over the streams
    /// `server` starts, with no child process. [`McpClient::server_process`] is then
    /// `None`: the host carries the calls (see [`InProcessServer`]).
    /// [`SessionConfig::transport`] is not used.
    pub fn connect_in_process(
        server: &InProcessServer,
        config: &SessionConfig,
    ) -> Result<Self, McpError> {
        let start = || {
            let (reader, writer) = server.start().map_err(|source| McpError::Spawn {
                program: server.name().to_owned(),
                source,
            })?;
            Session::over_streams(reader, writer, config)
        };
        let (session, info) = super::negotiate::connect_with(&start, config)?;
        Ok(Self::over(session, info, config, true))
    }

    fn over(
        session: Session,
        server: ServerInfo,
        config: &SessionConfig,
        in_process: bool,
    ) -> Self {
        Self {
            session,
            server,
            request_timeout: config.request_timeout,
            max_tool_pages: config.max_tool_pages,
            start: std::sync::OnceLock::new(),
            in_process,
        }
    }

    /// Whether the server runs in this process ([`McpClient::connect_in_process`]).
    #[must_use]
    pub fn is_in_process(&self) -> bool {
        self.in_process
    }

    /// What the server said about itself at `initialize` or `server/discover`.
    #[must_use]
    pub fn server(&self) -> &ServerInfo {
        &self.server
    }

    /// The underlying JSON-RPC session (notifications, stats, stderr, raw requests).
    #[must_use]
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The default request timeout.
    #[must_use]
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Fetches every page of `tools/list` and validates each definition.
    ///
    /// Stops with [`McpError::CursorRepeated`] when a cursor comes back a second
    /// time, and with [`McpError::TooManyPages`] past
    /// [`SessionConfig::max_tool_pages`] pages.
    pub fn list_tools(&self) -> Result<ToolList, McpError> {
        let mut cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        let mut definitions = Vec::new();
        let mut pages = 0;
        loop {
            if pages == self.max_tool_pages {
                return Err(McpError::TooManyPages {
                    limit: self.max_tool_pages,
                });
            }
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let result = expect_result(
                "tools/list",
                self.session.request_default("tools/list", params)?,
            )?;
            pages += 1;
            let invalid = |reason: &str| McpError::InvalidReply {
                method: "tools/list".into(),
                reason: reason.into(),
            };
            if self.server.era == Era::Modern && era::result_type(&result) != ResultType::Complete {
                return Err(invalid("`resultType` is not `complete`"));
            }
            let tools = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("`tools` is not an array"))?;
            definitions.extend(tools.iter().cloned());
            match result.get("nextCursor") {
                None | Some(Value::Null) => break,
                Some(Value::String(next)) => {
                    if !cursors.insert(next.clone()) {
                        return Err(McpError::CursorRepeated {
                            cursor: next.clone(),
                        });
                    }
                    cursor = Some(next.clone());
                }
                Some(_) => return Err(invalid("`nextCursor` is not a string")),
            }
        }
        let mut list = validate_tools(definitions);
        list.pages = pages;
        Ok(list)
    }

    /// Sends `tools/call` for `name` with `arguments` and waits up to `timeout`.
    ///
    /// The arguments are sent as given; validate them first (the executor does).
    pub fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
    ) -> Result<Reply, McpError> {
        self.call_tool_with_meta(name, arguments, None, timeout)
    }

    /// [`McpClient::call_tool`] with a `_meta` object in the request (for example the
    /// `progressToken` of a proxied call).
    pub fn call_tool_with_meta(
        &self,
        name: &str,
        arguments: &Value,
        meta: Option<&Value>,
        timeout: Duration,
    ) -> Result<Reply, McpError> {
        self.call_tool_tagged(name, arguments, meta, timeout, None)
    }

    /// [`McpClient::call_tool_with_meta`], cancellable by `tag` with
    /// [`Session::cancel_tagged`].
    ///
    /// From a 2026-07-28 server, a result with `resultType: "input_required"` is answered
    /// by the client: each `inputRequests` entry (`elicitation/create`,
    /// `sampling/createMessage`, `roots/list`) goes to [`SessionConfig::on_request`] as if
    /// the server had sent that request, and the same call is sent again with a new
    /// JSON-RPC id, the answers in `inputResponses` and the server's `requestState`
    /// unchanged; at most 10 rounds, each with `timeout` for the server and for each
    /// answer. The reply is the last round's. A round that cannot be finished (no handler,
    /// an error or no answer from it, a retry cut off, more rounds) is
    /// [`McpError::InputRequired`]: the server may have acted before it asked, so its
    /// effect is unknown. A `resultType` this client did not ask for (such as `task`) is
    /// [`McpError::InvalidReply`].
    pub fn call_tool_tagged(
        &self,
        name: &str,
        arguments: &Value,
        meta: Option<&Value>,
        timeout: Duration,
        tag: Option<&str>,
    ) -> Result<Reply, McpError> {
        self.call_tool_guarded(name, arguments, meta, timeout, tag, None)
    }

    /// [`McpClient::call_tool_tagged`], each of its rounds withdrawn before one byte of it
    /// is written when `guard` gives a reason ([`SendGuard`],
    /// [`Session::request_guarded`]): a first round so withdrawn is
    /// [`McpError::NotSent`]; a later one (the server was asked already) is
    /// [`McpError::InputRequired`].
    pub fn call_tool_guarded(
        &self,
        name: &str,
        arguments: &Value,
        meta: Option<&Value>,
        timeout: Duration,
        tag: Option<&str>,
        guard: Option<&SendGuard>,
    ) -> Result<Reply, McpError> {
        self.call_tool_answered(name, arguments, meta, timeout, tag, guard, None)
    }

    /// [`McpClient::call_tool_guarded`], a 2026-07-28 server's input requests answered by
    /// `answerer` (when given) instead of [`SessionConfig::on_request`]. After rounds of
    /// input, the last result's `_meta` lists them ([`super::mrtr::ROUNDS_META`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "call_tool_guarded's arguments and the answerer; the others delegate here"
    )]
    pub fn call_tool_answered(
        &self,
        name: &str,
        arguments: &Value,
        meta: Option<&Value>,
        timeout: Duration,
        tag: Option<&str>,
        guard: Option<&SendGuard>,
        answerer: Option<&InputAnswerer>,
    ) -> Result<Reply, McpError> {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        match self.server.era {
            Era::Legacy => {
                self.session
                    .request_guarded("tools/call", Some(params), timeout, tag, guard)
            }
            Era::Modern => mrtr::call(
                &self.session,
                "tools/call",
                params,
                timeout,
                tag,
                guard,
                answerer,
            ),
        }
    }

    /// A request other than `tools/call` that a 2026-07-28 server may answer with
    /// `input_required` (`prompts/get`, `resources/read`), its rounds answered as
    /// [`McpClient::call_tool_guarded`] answers a call's: each input request handed to
    /// [`SessionConfig::on_request`], the request sent again with the answers; the last
    /// round's reply. To a server of the handshake era, or for another method, one request
    /// ([`Session::request_guarded`]).
    pub(crate) fn request_answering_input(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        tag: Option<&str>,
        guard: Option<&SendGuard>,
    ) -> Result<Reply, McpError> {
        if self.server.era == Era::Modern && mrtr::ASKING.contains(&method) {
            let params = params.unwrap_or_else(|| json!({}));
            return mrtr::call(&self.session, method, params, timeout, tag, guard, None);
        }
        self.session
            .request_guarded(method, params, timeout, tag, guard)
    }

    /// Checks that the server answers: `ping` (expecting a result object), or under
    /// 2026-07-28, which has no `ping`, `server/discover`.
    pub fn ping(&self) -> Result<(), McpError> {
        let method = match self.server.era {
            Era::Legacy => "ping",
            Era::Modern => "server/discover",
        };
        expect_result(method, self.session.request_default(method, None)?).map(drop)
    }

    /// The server process, as the process that carries the calls sent to it: its pid,
    /// its process group (the same: it is spawned as a group leader), its start time,
    /// and the cgroup that holds every process it starts, where it runs in one
    /// ([`Carrier`]). The start is empty where it cannot be read (not Linux, or the
    /// server has already exited but is not reaped yet). Without a cgroup the carrier
    /// can never be shown gone: a descendant may have left the process group. `None`
    /// once [`McpClient::shutdown`] has killed the server's processes and reaped it:
    /// then nothing of it is left to carry anything. Always `None` for a server in this
    /// process ([`McpClient::connect_in_process`]): the host itself carries its calls, as
    /// for an executor that writes in-process ([`crate::executor::Executor::carrier`]).
    #[must_use]
    pub fn server_process(&self) -> Option<Carrier> {
        if self.in_process || self.session.server_reaped() {
            return None;
        }
        let pid = self.session.pid();
        let start = match self.start.get() {
            Some(start) => start.clone(),
            None => match crate::process::process_start(pid) {
                Some(start) => self.start.get_or_init(|| start).clone(),
                None => String::new(),
            },
        };
        Some(Carrier::new(pid, pid, start).with_cgroup(self.session.server_cgroup()))
    }

    /// Shuts the server down (see [`Session::shutdown`]).
    pub fn shutdown(&self) -> ShutdownReport {
        self.session.shutdown()
    }
}

/// Turns a reply into its result, or a JSON-RPC error into [`McpError::Rpc`].
fn expect_result(method: &str, reply: Reply) -> Result<Value, McpError> {
    match reply {
        Reply::Result(result) => Ok(result),
        Reply::Error(error) => Err(McpError::Rpc {
            method: method.into(),
            error: Box::new(error),
        }),
    }
}

fn check_tool(definition: &Value) -> Result<String, String> {
    let obj: &Map<String, Value> = definition
        .as_object()
        .ok_or("the definition is not an object")?;
    let name = match obj.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err("`name` is missing, empty or not a string".into()),
    };
    let schema = obj
        .get("inputSchema")
        .and_then(Value::as_object)
        .ok_or("`inputSchema` is missing or not an object")?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("`inputSchema` does not have `\"type\": \"object\"` at its root".into());
    }
    if obj.get("outputSchema").is_some_and(|s| !s.is_object()) {
        return Err("`outputSchema` is not an object".into());
    }
    for field in ["title", "description"] {
        if obj.get(field).is_some_and(|v| !v.is_string()) {
            return Err(format!("`{field}` is not a string"));
        }
    }
    for field in ["annotations", "execution"] {
        if obj.get(field).is_some_and(|v| !v.is_object()) {
            return Err(format!("`{field}` is not an object"));
        }
    }
    Ok(name)
}

fn validate_tools(definitions: Vec<Value>) -> ToolList {
    let checked: Vec<(Value, Result<String, String>)> = definitions
        .into_iter()
        .map(|d| (check_tool(&d), d))
        .map(|(r, d)| (d, r))
        .collect();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (_, result) in &checked {
        if let Ok(name) = result {
            *counts.entry(name.clone()).or_default() += 1;
        }
    }
    let mut list = ToolList::default();
    for (definition, result) in checked {
        match result {
            Ok(name) if counts[&name] == 1 => list.tools.push(Tool { name, definition }),
            Ok(name) => list.invalid.push(InvalidTool {
                definition,
                reason: format!(
                    "the name `{name}` is used by {} tools; a binding must be unambiguous",
                    counts[&name]
                ),
            }),
            Err(reason) => list.invalid.push(InvalidTool { definition, reason }),
        }
    }
    list
}
