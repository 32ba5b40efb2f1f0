//! The gate's side facing the MCP server it governs: the child process, started through
//! the crate's MCP client (its own process group, the shutdown ladder), started again
//! for the next request after it dies, with its tool list cached until the server says
//! the list changed, a client lists the tools, or a bind or send finds a changed tool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::jsonrpc::{ErrorObject, Notification, Request, codes};
use crate::mcp::{
    InProcessServer, McpClient, Reply, Responder, SendGuard, ServerCommand, SessionConfig, ToolList,
};
use serde_json::Value;

use super::downstream::Downstream;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The capabilities a client may declare that concern requests from the server; the
/// gate declares to the server those its client declared, as declared (so
/// `elicitation: {"form": {}, "url": {}}` offers URL mode too), and passes the requests
/// and their notifications on. Not `tasks`: the gate does not govern tasks.
pub(crate) const CLIENT_SIDE: [&str; 3] = ["sampling", "roots", "elicitation"];

/// Why a server's request cannot reach a 2026-07-28 client.
pub(crate) const NO_INPUT: &str = "a 2026-07-28 client takes no requests from a server on stdio \
    (the gate declared none of that client's capabilities to this server)";

/// The server's capabilities as the gate mirrors them to its client: without `tasks`, since
/// a task-augmented call is not governed by the gate (it is refused; see docs/gate.md).
pub(crate) fn mirrored(capabilities: &Value) -> Value {
    let mut mirrored = capabilities.clone();
    if let Some(members) = mirrored.as_object_mut() {
        members.remove("tasks");
    }
    mirrored
}

/// What the gate starts as its server: a command (a child process, the usual case) or a
/// server in the gate's own process ([`InProcessServer`]: a host that embeds the gate and
/// its server, a fuzz target).
#[derive(Debug, Clone)]
pub(crate) enum ServerSource {
    Command(ServerCommand),
    InProcess(InProcessServer),
}

impl ServerSource {
    /// A client of a newly started server.
    fn connect(&self, config: &SessionConfig) -> Result<McpClient, crate::mcp::McpError> {
        match self {
            Self::Command(command) => McpClient::connect(command, config),
            Self::InProcess(server) => McpClient::connect_in_process(server, config),
        }
    }

    /// The server's program (or in-process name), for messages.
    fn shown(&self) -> String {
        match self {
            Self::Command(command) => command.program().to_string_lossy().into_owned(),
            Self::InProcess(server) => format!("{} (in this process)", server.name()),
        }
    }

    /// What a pathway records of the gate that proposed it (its metadata's `gate` member):
    /// the server's command line, from which an operator step starts the server again
    /// (`gate/recorded.rs`), or the name of a server that ran inside the gate's process,
    /// which no other process can start.
    ///
    /// With the command, the absolute directory the server runs in (`cwd`: its own
    /// `current_dir`, else the gate's): a server that keeps its data at a relative path
    /// reads back only there, so an operator step starts it there again. Missing when the
    /// gate cannot tell its own directory (then the operator step says so).
    pub(crate) fn recorded(&self) -> Value {
        match self {
            Self::Command(command) => {
                let mut recorded = serde_json::json!({"command": command.command_line()});
                let cwd = std::env::current_dir()
                    .map(|here| command.dir().map_or_else(|| here.clone(), |d| here.join(d)));
                match cwd {
                    Ok(cwd) => recorded["cwd"] = Value::String(cwd.display().to_string()),
                    Err(e) => note!(
                        Warn,
                        "rpr gate: its working directory cannot be read ({e}); pathways will not record where the server runs"
                    ),
                }
                recorded
            }
            Self::InProcess(server) => serde_json::json!({"in_process": server.name()}),
        }
    }
}

/// The governed server.
pub(crate) struct Upstream {
    source: ServerSource,
    /// How long a request passed through (and a server request passed back) may take.
    pub(crate) request_timeout: Duration,
    max_message_bytes: usize,
    down: Arc<Downstream>,
    client: Mutex<Option<Arc<McpClient>>>,
    tools: Mutex<Option<Arc<ToolList>>>,
    stale: Arc<AtomicBool>,
    starts: Mutex<u64>,
}

impl Upstream {
    pub(crate) fn new(
        source: ServerSource,
        request_timeout: Duration,
        max_message_bytes: usize,
        down: Arc<Downstream>,
    ) -> Self {
        Self {
            source,
            request_timeout,
            max_message_bytes,
            down,
            client: Mutex::new(None),
            tools: Mutex::new(None),
            stale: Arc::new(AtomicBool::new(true)),
            starts: Mutex::new(0),
        }
    }

    fn config(&self) -> SessionConfig {
        let mut config = SessionConfig {
            request_timeout: self.request_timeout,
            max_message_bytes: self.max_message_bytes,
            pass_progress: true,
            ..SessionConfig::default()
        };
        let declared: serde_json::Map<String, Value> = CLIENT_SIDE
            .iter()
            .filter_map(|c| Some(((*c).to_owned(), self.down.declared(c)?)))
            .collect();
        config.client_capabilities = Value::Object(declared);
        let (down, stale) = (Arc::clone(&self.down), Arc::clone(&self.stale));
        config.on_notification = Some(Arc::new(move |n: &Notification| {
            if n.method == "notifications/tools/list_changed" {
                stale.store(true, Ordering::SeqCst);
            }
            down.notify(n);
        }));
        let (down, timeout) = (Arc::clone(&self.down), self.request_timeout);
        config.on_request = Some(Arc::new(move |request: Request, responder: Responder| {
            if !down.opened_with_initialize() {
                // No client opened with `initialize`: the gate's clients are of 2026-07-28,
                // which take no request from a server on stdio (the gate declared none of
                // their capabilities to a 2025-era server; a 2026-07-28 server asks in
                // `input_required` results, carried by gate/rounds.rs). Refused at once
                // rather than written to a client that will not answer.
                responder.respond(Err(ErrorObject::new(
                    codes::METHOD_NOT_FOUND,
                    format!(
                        "rpr gate passes no `{}` to its client: {NO_INPUT}",
                        request.method
                    ),
                )));
                return;
            }
            let down = Arc::clone(&down);
            // Answered from its own thread: the client's answer comes in on the gate's
            // stdin, and the session's reader must go on reading the server meanwhile.
            let spawned = std::thread::Builder::new()
                .name("rpr-gate-server-request".into())
                .spawn(move || {
                    let outcome = match down.request(&request.method, request.params, timeout) {
                        Ok(Reply::Result(result)) => Ok(result),
                        Ok(Reply::Error(error)) => Err(error),
                        Err(why) => Err(ErrorObject::new(codes::INTERNAL_ERROR, why)),
                    };
                    responder.respond(outcome);
                });
            if let Err(e) = spawned {
                note!(Warn, "rpr gate: cannot pass a server request on: {e}");
            }
        }));
        config
    }

    /// The running server, started (again) if it is not running.
    pub(crate) fn client(&self) -> Result<Arc<McpClient>, String> {
        let mut slot = lock(&self.client);
        if let Some(client) = slot.as_ref() {
            if client.session().closed_reason().is_none() {
                return Ok(Arc::clone(client));
            }
            let reason = client.session().closed_reason().unwrap_or_default();
            note!(
                Warn,
                "rpr gate: the server stopped ({reason}); starting it again"
            );
            client.shutdown();
        }
        let client = self.source.connect(&self.config()).map_err(|e| {
            format!(
                "the server behind the gate did not start ({}): {e}",
                self.source.shown()
            )
        })?;
        let mut starts = lock(&self.starts);
        *starts += 1;
        let process = client
            .session()
            .server_pid()
            .map_or_else(|| "in this process".to_owned(), |pid| format!("pid {pid}"));
        note!(
            Info,
            "rpr gate: server {} started ({process}, start {})",
            client.server().identity(),
            *starts
        );
        let client = Arc::new(client);
        *slot = Some(Arc::clone(&client));
        self.stale.store(true, Ordering::SeqCst);
        Ok(client)
    }

    /// The running server, if one is running (none is started).
    pub(crate) fn running(&self) -> Option<Arc<McpClient>> {
        lock(&self.client)
            .clone()
            .filter(|c| c.session().closed_reason().is_none())
    }

    /// The server's tools, from the cache unless the server changed them or restarted.
    pub(crate) fn tools(&self, client: &McpClient) -> Result<Arc<ToolList>, String> {
        let mut cache = lock(&self.tools);
        if self.stale.swap(false, Ordering::SeqCst) || cache.is_none() {
            match client.list_tools() {
                Ok(list) => *cache = Some(Arc::new(list)),
                Err(e) => {
                    self.stale.store(true, Ordering::SeqCst);
                    return Err(format!("`tools/list` of the server failed: {e}"));
                }
            }
        }
        Ok(cache.clone().unwrap_or_default())
    }

    /// Forgets the cached tool list (the next call lists again).
    pub(crate) fn forget_tools(&self) {
        self.stale.store(true, Ordering::SeqCst);
    }

    /// Passes a client request on and returns the server's answer. `forwarded`: for a
    /// 2026-07-28 client, the `_meta` members the gate declares to a 2026-07-28 server with
    /// the request ([`super::era::Era::forwarded_meta`]): the capabilities that client
    /// declared on this request for what a server may ask of it, in place of the gate's own
    /// (the server may then answer `input_required` with input requests for that client,
    /// which the answer carries back to it; its retry is a request like any other), and its
    /// log level. For a 2025-era client (`None`), a server's `input_required` to `prompts/get` or
    /// `resources/read` is answered by the gate, each input request passed to the client
    /// as a request of the server's, and the last round's result is the answer.
    pub(crate) fn pass(
        &self,
        method: &str,
        mut params: Option<Value>,
        forwarded: Option<serde_json::Map<String, Value>>,
        tag: &str,
    ) -> Result<Value, ErrorObject> {
        let client = self
            .client()
            .map_err(|e| ErrorObject::new(codes::INTERNAL_ERROR, e))?;
        let modern_client = forwarded.is_some();
        if let Some(forwarded) = forwarded
            && client.server().era == crate::mcp::Era::Modern
        {
            let object = params.get_or_insert_with(|| serde_json::json!({}));
            if let Some(object) = object.as_object_mut() {
                let meta = object
                    .entry("_meta")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.extend(forwarded);
                }
            }
        }
        // Cancelled before it is sent on: not sent (nor answered). Asked as the request is
        // queued, under the lock the cancellation looks for it under (gate/cancel.rs).
        let (down, t) = (Arc::clone(&self.down), tag.to_owned());
        let guard = SendGuard::new(move || {
            down.is_cancelled(&t)
                .then(|| "cancelled by the client before it was sent on".to_owned())
        });
        let reply = if modern_client {
            // Its `input_required` goes back to it as the server gave it.
            client.session().request_guarded(
                method,
                params,
                self.request_timeout,
                Some(tag),
                Some(&guard),
            )
        } else {
            // A 2025-era client reads no `input_required`: the gate answers the rounds,
            // asking the client each input request as the server's own request.
            client.request_answering_input(
                method,
                params,
                self.request_timeout,
                Some(tag),
                Some(&guard),
            )
        };
        match reply {
            Ok(Reply::Result(result)) => Ok(result),
            Ok(Reply::Error(error)) => Err(error),
            Err(e) => Err(ErrorObject::new(
                codes::INTERNAL_ERROR,
                format!("the server behind the gate did not answer `{method}`: {e}"),
            )),
        }
    }

    /// Cancels the request the gate sent on for the client's request `tag`.
    pub(crate) fn cancel(&self, tag: &str, reason: &str) -> bool {
        let client = lock(&self.client).clone();
        client.is_some_and(|c| c.session().cancel_tagged(tag, reason))
    }

    /// Passes a client notification on, if the server is running.
    pub(crate) fn notify(&self, notification: &Notification) {
        let client = lock(&self.client).clone();
        if let Some(client) = client {
            let _ = client
                .session()
                .notify(&notification.method, notification.params.clone());
        }
    }

    /// Stops the server (the shutdown ladder).
    pub(crate) fn shutdown(&self) {
        if let Some(client) = lock(&self.client).take() {
            client.shutdown();
        }
    }
}
