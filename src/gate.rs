//! The gate: a governing MCP stdio proxy. An MCP host launches `rpr gate` (or a host of its
//! own calls [`serve`]) in place of a server; the gate starts the server as its child and puts
//! every `tools/call` on a responsibility pathway (see docs/gate.md). What it writes to its
//! client carries protocol messages only; what the gate has to say goes to stderr. A host
//! whose server runs in its own process calls [`serve_in_process`] with an
//! [`InProcessServer`] instead.
//!
//! ```no_run
//! use rpr::gate::{Options, serve};
//! use rpr::mcp::ServerCommand;
//! use rpr::policy::Policy;
//! use rpr::{Actor, Runtime};
//!
//! let policy = Policy::load("policy.json")?;
//! let rt = Runtime::builder("pathways.db").bounds(policy.bounds()).open()?;
//! let server = ServerCommand::new("my-mcp-server").inherit_env(true);
//! let options = Options::new("files", Actor::new("agent"), "pathways.db", "policy.json");
//! serve(rt, policy, &server, options, std::io::stdin().lock(), std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Writes one line of the gate's log on stderr at a level (`note!(Info, "rpr gate: …", …)`),
/// if [`set_logging`] lets it through; every string from a server, a client or an actor in
/// it escaped ([`crate::shown::text`]).
macro_rules! note {
    ($level:ident, $($arg:tt)*) => {
        if $crate::gate::stderr::enabled($crate::gate::LogLevel::$level) {
            $crate::gate::stderr::emit($crate::gate::LogLevel::$level, &format!($($arg)*));
        }
    };
}

mod asked;
mod bindings;
mod call;
mod cancel;
mod carry;
mod downstream;
mod elicit;
mod era;
mod log_level;
mod recorded;
mod request_state;
mod rounds;
pub(crate) mod stderr;
mod turns;
mod upstream;
mod workers;

pub use recorded::{is_gate_metadata, is_gate_pathway, recorded_live, sender_pinned};

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use self::downstream::Downstream;
use self::era::Era;
use self::request_state::StateKey;
use self::turns::Turns;
use self::upstream::{ServerSource, Upstream};
use crate::jsonrpc::server::Incoming;
use crate::jsonrpc::{ErrorObject, MessageReader, Request, codes};
use crate::mcp::{InProcessServer, McpClient, PROTOCOL_VERSION, ServerCommand, ToolList};
use crate::policy::Policy;
use crate::store::PinCheck;
use crate::{Actor, Runtime, StoredPathway};

/// How a gate runs: whose calls it proposes, the server's name, its time limits, and the
/// files its messages name in the next command for the operator.
#[derive(Debug, Clone)]
pub struct Options {
    /// The actor that proposes every call (the agent behind the MCP client).
    pub actor: Actor,
    /// The name the policy and the pins know the server by: its key in the host's MCP
    /// configuration. The name a server reports (`serverInfo.name`) is its own claim and
    /// may change; a new one is a binding change, refused until `rpr pin`.
    pub name: String,
    /// How long a governed `tools/call` (and a request passed through) may take before its
    /// outcome is recorded as unknown (at least a second).
    pub call_timeout: Duration,
    /// How long the person at the client has to answer a Human Gate (at least a second).
    pub approval_timeout: Duration,
    /// How long a call at the Human Gate that cannot be approved at the client (no form
    /// elicitation, or a quorum still short) waits for an approval or a denial out of band
    /// (`rpr approve`, `rpr deny`) before it is answered with how to approve. Zero (the
    /// default): answered at once.
    pub approval_wait: Duration,
    /// The database as the operator commands the gate prints should name it.
    pub database: String,
    /// The policy file as the operator commands the gate prints should name it.
    pub policy: String,
}

impl Options {
    /// Options with the default time limits: 60 s per call, [`DEFAULT_APPROVAL_WAIT`] for a
    /// Human Gate.
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        actor: Actor,
        database: impl Into<String>,
        policy: impl Into<String>,
    ) -> Self {
        Self {
            actor,
            name: name.into(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            approval_timeout: DEFAULT_APPROVAL_WAIT,
            approval_wait: Duration::ZERO,
            database: database.into(),
            policy: policy.into(),
        }
    }
}

/// How long a governed call may take by default before its outcome is recorded as unknown.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_mins(1);

pub use elicit::DEFAULT_APPROVAL_WAIT;
pub use stderr::{LogFormat, LogLevel, Logging, set_logging};

/// Why a gate could not start serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The policy does not govern the server (`Options::name`).
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// The recovery scan of the database failed.
    #[error("recovery of {database} failed: {error}")]
    Recovery {
        /// The database, as [`Options::database`] names it.
        database: String,
        /// What failed.
        error: crate::PathwayError,
    },
    /// The key of the 2026-07-28 Human Gate's `requestState` could not be made.
    #[error("{0}")]
    Key(String),
    /// An operator step on a gate pathway was refused before anything was read back or
    /// sent ([`recorded_live`]); the message says why and what to do.
    #[error("{0}")]
    Refused(String),
}

/// The gate's state, shared by the threads that serve the client's requests.
pub(crate) struct Gate {
    rt: Runtime,
    policy: Policy,
    policy_path: String,
    database: String,
    actor: Actor,
    /// The server's identity for the policy and the pins ([`Options::name`]).
    name: String,
    upstream: Upstream,
    down: Arc<Downstream>,
    /// What a pathway records of this gate: its server's command line and directory, or the
    /// name of a server in this process ([`upstream::ServerSource::recorded`]).
    recorded: Value,
    call_timeout: Duration,
    approval_timeout: Duration,
    approval_wait: Duration,
    /// The cap on one message in either direction (the policy's `max_message_bytes`).
    max_message_bytes: usize,
    /// Set once the gate stops taking requests ([`serve_until`]): a call waiting for an
    /// approval out of band stops waiting.
    stopping: std::sync::atomic::AtomicBool,
    propose_lock: Mutex<()>,
    /// Which pathways a call of this gate holds a form open on or sends.
    turns: Turns,
    /// The key of the `requestState`s of this gate's 2026-07-28 Human Gates.
    state_key: Arc<StateKey>,
    /// The Human Gate states whose answer this gate took: each is used once.
    spent: request_state::Spent,
    /// The rounds of servers' `input_required` waiting for a 2026-07-28 client's retry
    /// (`gate/rounds.rs`).
    rounds: Arc<rounds::Rounds>,
    /// The gate's `serverInfo`, with the title naming the server once it has started.
    info: Mutex<Value>,
    /// The last tool list the policy's names and readbacks were checked against.
    checked_list: Mutex<Option<Arc<ToolList>>>,
    /// The bindings of that list's tools on the server's session (gate/bindings.rs).
    bindings: bindings::Bindings,
    /// Whether the policy's unchecked readbacks were noted.
    said_unchecked: std::sync::Once,
    /// The log level the gate set on a 2025-era server for 2026-07-28 requests
    /// (`gate/log_level.rs`).
    server_level: Mutex<log_level::ServerLevel>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `rpr pin` command that pins `tool` of `server` at `digest` in `database` (`None`:
/// the word `DB`, for the operator to fill in), each word quoted for a POSIX shell
/// ([`crate::shown::shell_word`]): the names are the server's to choose, and a command
/// printed for pasting must run nothing else. A name that cannot be shown as it must be
/// typed gets no command: the operator reads it with `rpr pin --review --json`.
pub(crate) fn pin_command(
    database: Option<&str>,
    server: &str,
    tool: &str,
    digest: &str,
) -> String {
    let word = crate::shown::shell_word;
    let database = match database {
        Some(d) => word(d),
        None => Some("DB".to_owned()),
    };
    match (database, word(server), word(tool), word(digest)) {
        (Some(d), Some(s), Some(t), Some(x)) => {
            format!("rpr pin --database {d} --server {s} --tool {t} --digest {x} --as NAME")
        }
        _ => "`rpr pin` (no command is printed here: a name in it cannot be shown as it must \
              be typed; `rpr pin --review --json` shows the change)"
            .to_owned(),
    }
}

/// Governs the MCP server `command` for the client at the other end of `input` and
/// `output`, until the client closes `input`: it reports what a previous gate left
/// unresolved, then serves. Calls in flight finish and record their outcomes before the
/// server is stopped. `rt` should be opened with `policy.bounds()`.
///
/// # Errors
///
/// The policy does not govern [`Options::name`], or the recovery scan fails; nothing was
/// served.
pub fn serve(
    rt: Runtime,
    policy: Policy,
    command: &ServerCommand,
    options: Options,
    input: impl BufRead,
    output: impl Write + Send + 'static,
) -> Result<(), GateError> {
    let source = ServerSource::Command(command.clone());
    serve_source(rt, policy, source, options, input, output)
}

/// [`serve`] with a server that runs in this process ([`InProcessServer`]): the same gate,
/// its server started (and started again after it stops) by `server` rather than as a
/// child process. Its calls are carried by this process (see [`InProcessServer`]), and a
/// pathway records the server's name instead of a command line, so an operator step from
/// another process (`rpr approve` of a pathway the gate left approved, `rpr reconcile`)
/// cannot start the server and is refused ([`recorded_live`]); an approval the gate
/// itself carries out is the same as for a command.
///
/// # Errors
///
/// As [`serve`].
pub fn serve_in_process(
    rt: Runtime,
    policy: Policy,
    server: &InProcessServer,
    options: Options,
    input: impl BufRead,
    output: impl Write + Send + 'static,
) -> Result<(), GateError> {
    let source = ServerSource::InProcess(server.clone());
    serve_source(rt, policy, source, options, input, output)
}

fn serve_source(
    rt: Runtime,
    policy: Policy,
    source: ServerSource,
    options: Options,
    input: impl BufRead,
    output: impl Write + Send + 'static,
) -> Result<(), GateError> {
    let _flushed = stderr::FlushOnReturn;
    let gate = start(rt, policy, source, options, output)?;
    let mut reader = MessageReader::with_max_message_bytes(input, gate.max_message_bytes);
    let mut workers = workers::Workers::new();
    while dispatch(
        &gate,
        &mut workers,
        crate::jsonrpc::server::read_incoming(&mut reader),
        false,
    ) {}
    finish_serving(&gate, &mut workers);
    Ok(())
}

/// The gate, checked and recovered, ready to serve.
fn start(
    rt: Runtime,
    policy: Policy,
    source: ServerSource,
    options: Options,
    output: impl Write + Send + 'static,
) -> Result<Arc<Gate>, GateError> {
    policy.check_governs(&options.name)?;
    report_unresolved(&rt, &options.database)?;
    let max_message_bytes = policy.max_message_bytes();
    let down = Arc::new(Downstream::new(output, max_message_bytes));
    let call_timeout = options.call_timeout.max(Duration::from_secs(1));
    let gate = Arc::new(Gate {
        recorded: source.recorded(),
        upstream: Upstream::new(source, call_timeout, max_message_bytes, Arc::clone(&down)),
        max_message_bytes,
        rt,
        policy,
        policy_path: options.policy,
        database: options.database,
        actor: options.actor,
        name: options.name,
        down,
        call_timeout,
        approval_timeout: options.approval_timeout.max(Duration::from_secs(1)),
        approval_wait: options.approval_wait,
        stopping: std::sync::atomic::AtomicBool::new(false),
        propose_lock: Mutex::new(()),
        turns: Turns::default(),
        state_key: Arc::new(StateKey::generate().map_err(GateError::Key)?),
        spent: request_state::Spent::default(),
        rounds: Arc::new(rounds::Rounds::default()),
        info: Mutex::new(server_info()),
        checked_list: Mutex::new(None),
        bindings: bindings::Bindings::default(),
        said_unchecked: std::sync::Once::new(),
        server_level: Mutex::new(log_level::ServerLevel::default()),
    });
    Ok(gate)
}

/// [`serve`], and a graceful stop: once `stop` is set (by a signal's handler thread, say),
/// the gate takes no new request (each is answered with a JSON-RPC error saying the gate is
/// stopping), goes on reading what the calls in flight still need (the client's answers to
/// Human Gate forms, cancellations), lets those calls finish, record their outcomes and be
/// answered, then stops the server and returns, without waiting for the client to close
/// `input`. The input is read on a thread of its own, which ends with the input.
///
/// # Errors
///
/// As [`serve`].
pub fn serve_until(
    rt: Runtime,
    policy: Policy,
    command: &ServerCommand,
    options: Options,
    input: impl BufRead + Send + 'static,
    output: impl Write + Send + 'static,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), GateError> {
    let _flushed = stderr::FlushOnReturn;
    let gate = start(
        rt,
        policy,
        ServerSource::Command(command.clone()),
        options,
        output,
    )?;
    // The input is read and each message dispatched on a thread of its own (one hand-off
    // fewer for every request than a reader handing messages to this thread), while this
    // thread watches `stop`: a read blocks until the client writes, and a stopped gate
    // returns without waiting for that.
    let serving = Arc::new(Mutex::new(Serving {
        workers: workers::Workers::new(),
        ended: false,
    }));
    let (ended_tx, ended_rx) = std::sync::mpsc::channel::<()>();
    let reader = {
        let gate = Arc::clone(&gate);
        let serving = Arc::clone(&serving);
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("rpr-gate-input".into())
            .spawn(move || {
                let mut reader =
                    MessageReader::with_max_message_bytes(input, gate.max_message_bytes);
                loop {
                    let read = crate::jsonrpc::server::read_incoming(&mut reader);
                    let mut serving = lock(&serving);
                    if serving.ended {
                        return;
                    }
                    // A request after the signal is refused even before this gate's main
                    // thread has seen it.
                    let draining = stop.load(std::sync::atomic::Ordering::SeqCst);
                    if !dispatch(&gate, &mut serving.workers, read, draining) {
                        drop(serving);
                        let _ = ended_tx.send(());
                        return;
                    }
                }
            })
    };
    if reader.is_err() {
        return Err(GateError::Refused(
            "cannot start the thread that reads the client".into(),
        ));
    }
    let mut stopping = false;
    let mut serving = loop {
        match ended_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break lock(&serving),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if !stopping && stop.load(std::sync::atomic::Ordering::SeqCst) {
            stopping = true;
            gate.stopping
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let busy = lock(&serving).workers.busy();
            note!(
                Warn,
                "rpr gate: stopping: no new requests are taken; {busy} request(s) in flight finish and are answered"
            );
        }
        if stopping {
            let serving = lock(&serving);
            if serving.workers.busy() == 0 {
                break serving;
            }
        }
    };
    // The input thread dispatches nothing more (it may stay blocked in a read: the process
    // ends without it).
    serving.ended = true;
    finish_serving(&gate, &mut serving.workers);
    Ok(())
}

/// The workers of [`serve_until`], shared by its input thread (which hands requests out)
/// and its main thread (which counts the busy ones and ends the serving).
struct Serving {
    workers: workers::Workers,
    /// Set by the main thread once it ends the serving: the input thread dispatches
    /// nothing after it.
    ended: bool,
}

/// Finds what a previous gate left unresolved (an attempt in flight when it stopped is
/// now unknown) and says so on stderr; none of it is sent again.
fn report_unresolved(rt: &Runtime, database: &str) -> Result<(), GateError> {
    let recovered = rt.recover().map_err(|error| GateError::Recovery {
        database: database.to_owned(),
        error,
    })?;
    for stored in recovered {
        let why = match &stored {
            StoredPathway::Unknown(_) => {
                "write status unknown (it was sent; whether it took effect is not known); it will not be sent again: rpr reconcile"
            }
            StoredPathway::InFlightElsewhere { .. } => "in flight in another live process",
            _ => "needs a step (rpr unresolved shows which)",
        };
        note!(
            Warn,
            "rpr gate: unresolved pathway {} ({}): {why}",
            stored.id(),
            stored.state().as_str()
        );
    }
    Ok(())
}

/// Serves one message read from the client; `false` once the input ended or failed.
/// `draining`: the gate was told to stop, and a new request is answered with an error
/// instead of being served.
fn dispatch(
    gate: &Arc<Gate>,
    workers: &mut workers::Workers,
    read: Result<Option<Incoming>, crate::jsonrpc::JsonRpcError>,
    draining: bool,
) -> bool {
    // The same rules as every server of this crate (crate::jsonrpc::server): a request
    // is answered once, a notification or a response never, even a malformed one.
    match read {
        Ok(None) => return false,
        Ok(Some(Incoming::Request(request))) if draining => {
            gate.down.respond(
                request.id,
                Err(ErrorObject::new(
                    codes::INTERNAL_ERROR,
                    "the gate is stopping (SIGTERM or SIGINT): it takes no new request; calls already in flight finish and are answered",
                )),
            );
        }
        Ok(Some(Incoming::Request(request))) => gate.request(request, workers),
        Ok(Some(Incoming::Response(response))) => gate.down.deliver(response),
        Ok(Some(Incoming::Notification(n))) => match n.method.as_str() {
            // The gate initialized the server itself when it started it.
            "notifications/initialized" => {}
            // Passed on under the id the gate used toward the server; the client gets
            // no answer to the request it cancelled (gate/cancel.rs).
            "notifications/cancelled" => gate.client_cancelled(n.params.as_ref()),
            method if method.starts_with("notifications/") => gate.upstream.notify(&n),
            // A request method without an id (a `tools/call` sent as a JSON-RPC
            // notification) is no MCP notification, and nothing shows that a server drops
            // it: one built on a generic JSON-RPC library runs it, unanswered. Passed on,
            // a write would reach the server ungoverned, with no record before it.
            method => note!(
                Warn,
                "rpr gate: a notification of method {method:?} (no id) was dropped: only notifications/* are passed to the server; send a request with an id"
            ),
        },
        Ok(Some(Incoming::Invalid(invalid))) => {
            note!(Warn, "rpr gate: {}", invalid.error);
            if let Some(reply) = invalid.reply {
                gate.down.send_value(&reply);
            }
        }
        Err(e) => {
            note!(Warn, "rpr gate: reading from the client failed: {e}");
            return false;
        }
    }
    true
}

/// Ends the serving: the client gets nothing more, calls in flight finish and record their
/// outcomes, then the server is stopped.
fn finish_serving(gate: &Gate, workers: &mut workers::Workers) {
    gate.down.close();
    workers.finish();
    gate.upstream.shutdown();
    let stats = gate.rt.write_stats();
    note!(
        Info,
        "rpr gate: stopped; {} steps committed in {} synced commits and {} without a sync of their own (read-only calls)",
        stats.steps,
        stats.commits,
        stats.unsynced_commits
    );
}

impl Gate {
    /// Serves one client request: at once when it is quick, else on a worker of its own
    /// (gate/workers.rs: never behind another request).
    fn request(self: &Arc<Self>, request: Request, workers: &mut workers::Workers) {
        let Request { id, method, params } = request;
        if method == "initialize" {
            let answer = self.initialize(params.as_ref());
            self.down.respond(id, answer);
            return;
        }
        let era = match Era::of(params.as_ref()) {
            Ok(era) => era,
            Err(refused) => {
                self.down.respond(id, Err(refused));
                return;
            }
        };
        if method == "ping" {
            self.down
                .respond(id, era.shape(&method, Ok(json!({})), &lock(&self.info)));
            return;
        }
        let gate = Arc::clone(self);
        let tag = id.to_value().to_string();
        let log_rank = era.log_level().and_then(era::log_rank);
        self.down.serving(&tag, log_rank);
        let spawned = workers.run(Box::new(move || {
            if log_rank.is_some() {
                // A 2025-era server's one level, set before the request reaches it.
                gate.sync_log_level(true);
            }
            let answer = match method.as_str() {
                "server/discover" => gate.discover(),
                "tools/list" => gate.list_tools(params.as_ref(), &era),
                "tools/call" => {
                    // Answered through its outlet: a round of the server's own
                    // `input_required` may answer this request before the call ends,
                    // and the call's outcome then the retry that continued the last
                    // round (gate/rounds.rs).
                    let info = lock(&gate.info).clone();
                    let outlet = Arc::new(rounds::Outlet::new(
                        Arc::clone(&gate.down),
                        id.clone(),
                        &tag,
                        era.clone(),
                        info,
                    ));
                    let answer = gate.call(params.as_ref(), &tag, &era, &outlet);
                    outlet.deliver(answer);
                    if log_rank.is_some() {
                        gate.sync_log_level(false);
                    }
                    return;
                }
                _ => gate.upstream.pass(
                    &method,
                    era::strip_modern(params),
                    era.forwarded_meta(),
                    &tag,
                ),
            };
            let answer = era.shape(&method, answer, &lock(&gate.info));
            gate.down.respond(id, answer);
            if log_rank.is_some() {
                // Raised to what the requests still in flight need.
                gate.sync_log_level(false);
            }
        }));
        if let Err(e) = spawned {
            note!(Warn, "rpr gate: cannot start a request thread: {e}");
        }
    }

    /// The server behind the gate, started, with its tools checked against the policy
    /// before a client gets to use it (a rule under a name the server lacks would govern
    /// nothing): what `initialize` and `server/discover` describe.
    fn described(&self) -> Result<(Value, Value, String), ErrorObject> {
        let client: Arc<McpClient> = self
            .upstream
            .client()
            .map_err(|e| ErrorObject::new(codes::INTERNAL_ERROR, e))?;
        self.tools(&client).map_err(|e| {
            note!(Warn, "rpr gate: {e}");
            ErrorObject::new(codes::INTERNAL_ERROR, e)
        })?;
        let server = client.server();
        let name = &self.name;
        let mut info = server_info();
        info["title"] = json!(format!("rpr gate governing {name} ({})", server.identity()));
        info.clone_into(&mut lock(&self.info));
        let governed = "Every tools/call through this server is governed by rpr gate: recorded before it is sent, \
             admitted by policy (some need a Human Gate approval), and never sent twice when its outcome is unknown.".to_owned();
        let instructions = match &server.instructions {
            Some(theirs) => format!("{theirs}\n\n{governed}"),
            None => governed,
        };
        Ok((upstream::mirrored(&server.capabilities), info, instructions))
    }

    /// `server/discover` (2026-07-28): the revision the gate serves without a handshake and
    /// the server's capabilities as the gate mirrors them. A 2026-07-28 client takes no
    /// requests from a server on stdio: what it declares it can be asked reaches a
    /// 2026-07-28 server per request, and that server's `input_required` reaches the client
    /// in results (gate/rounds.rs for a governed call).
    fn discover(&self) -> Result<Value, ErrorObject> {
        let (capabilities, _, instructions) = self.described()?;
        Ok(json!({
            "supportedVersions": [era::MODERN],
            "capabilities": capabilities,
            "instructions": instructions,
            "ttlMs": era::LIST_TTL_MS,
            "cacheScope": "private",
        }))
    }

    /// `initialize`: starts the server with the client's capabilities and answers at
    /// this crate's protocol revision, mirroring the server's capabilities.
    fn initialize(&self, params: Option<&Value>) -> Result<Value, ErrorObject> {
        let capabilities = params
            .and_then(|p| p.get("capabilities"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.down.set_capabilities(capabilities);
        let (capabilities, info, instructions) = self.described()?;
        Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": capabilities,
            "serverInfo": info,
            "instructions": instructions,
        }))
    }

    /// The server's tools, listed (or as last listed), with the policy's tool names
    /// checked against them: a name the server does not offer refuses the list.
    pub(crate) fn tools(&self, client: &McpClient) -> Result<Arc<ToolList>, String> {
        let list = self.upstream.tools(client)?;
        let mut checked = lock(&self.checked_list);
        if checked.as_ref().is_some_and(|c| Arc::ptr_eq(c, &list)) {
            // This very list passed the checks below already.
            return Ok(list);
        }
        self.policy
            .check_offered(&self.name, &list)
            .map_err(|e| format!("refused by the gate's policy: {e}"))?;
        let unchecked = self
            .policy
            .check_readbacks(&self.name, &list)
            .map_err(|e| format!("refused by the gate's policy: {e}"))?;
        // Said once per gate: the list is read again after each server restart.
        self.said_unchecked.call_once(|| {
            for line in &unchecked {
                note!(Warn, "rpr gate: note: {line}");
            }
        });
        *checked = Some(Arc::clone(&list));
        Ok(list)
    }

    /// `tools/list`: every page of the server's tools in one answer, each pinned on first
    /// sight; a tool that no longer matches its pin is listed (the model may see it) and
    /// refused at call time.
    fn list_tools(&self, params: Option<&Value>, era: &Era) -> Result<Value, ErrorObject> {
        if params
            .and_then(|p| p.get("cursor"))
            .is_some_and(|c| !c.is_null())
        {
            return Err(ErrorObject::new(
                codes::INVALID_PARAMS,
                "unknown cursor: rpr gate answers tools/list in one page",
            ));
        }
        let internal = |e: String| ErrorObject::new(codes::INTERNAL_ERROR, e);
        let client = self.upstream.client().map_err(internal)?;
        self.upstream.forget_tools();
        let list = self.tools(&client).map_err(internal)?;
        let server = &self.name;
        for tool in &list.tools {
            let binding = match crate::mcp::ToolBinding::new(client.server(), tool)
                .and_then(|b| b.to_binding())
            {
                Ok(b) => b,
                Err(e) => {
                    note!(Warn, "rpr gate: tool `{}` cannot be bound: {e}", tool.name);
                    continue;
                }
            };
            match self
                .rt
                .check_pin(server, &tool.name, &binding, &tool.definition, &self.actor)
            {
                Ok(PinCheck::FirstSight(_)) => note!(
                    Info,
                    "rpr gate: pinned `{}` of `{server}` ({})",
                    tool.name,
                    binding.digest
                ),
                Ok(PinCheck::Matches(_)) => {}
                Ok(PinCheck::Changed(pin)) => note!(
                    Warn,
                    "rpr gate: `{}` of `{server}` changed since it was pinned (pinned {}, now {}); calls are refused until `rpr pin`",
                    tool.name,
                    pin.digest,
                    binding.digest
                ),
                Err(e) => note!(
                    Warn,
                    "rpr gate: the pin of `{}` cannot be checked: {e}",
                    tool.name
                ),
            }
        }
        let mut tools: Vec<&crate::mcp::Tool> = list.tools.iter().collect();
        if era.is_modern() {
            // 2026-07-28 asks for a deterministic order, whatever order the server lists in.
            tools.sort_by(|a, b| a.name.cmp(&b.name));
        }
        let tools: Vec<Value> = tools.iter().map(|t| t.definition.clone()).collect();
        let mut result = json!({ "tools": tools });
        if era.is_modern() {
            result["ttlMs"] = json!(era::LIST_TTL_MS);
        }
        Ok(result)
    }
}

/// The gate's own `serverInfo` (the server behind it is named in the title `initialize`
/// and `server/discover` give).
fn server_info() -> Value {
    json!({"name": "rpr-gate", "version": env!("CARGO_PKG_VERSION")})
}

#[cfg(test)]
mod tests {
    use super::pin_command;

    #[test]
    fn a_printed_pin_command_runs_nothing_a_name_holds() {
        let dir = tempfile::tempdir().unwrap();
        let hostile = "w$(touch PWNED)'`touch PWNED`'";
        let command = pin_command(Some("my db.sqlite"), "files;touch PWNED", hostile, "abc");
        // Pasted into a shell where `rpr` prints its arguments, one a line.
        let script = format!("rpr() {{ printf '%s\\n' \"$@\"; }}; {command}");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!dir.path().join("PWNED").exists(), "ran a name: {command}");
        let words: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            words,
            [
                "pin",
                "--database",
                "my db.sqlite",
                "--server",
                "files;touch PWNED",
                "--tool",
                hostile,
                "--digest",
                "abc",
                "--as",
                "NAME"
            ]
        );
        // The operator's own placeholder stays a placeholder.
        assert!(pin_command(None, "s", "t", "d").starts_with("rpr pin --database DB --server s"));
        // A name that cannot be typed as shown: no command to paste.
        let lined = pin_command(None, "s", "t\nrpr pin --accept x", "d");
        assert!(!lined.contains("--tool"), "{lined}");
    }
}
