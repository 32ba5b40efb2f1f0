//! `rpr gate`: a governing MCP stdio proxy. An MCP host launches it in place of a
//! server; it launches the server as its child and puts every `tools/call` on a
//! responsibility pathway (see docs/gate.md). Stdout carries protocol messages only;
//! what the gate has to say goes to stderr.

mod call;
mod cancel;
mod carry;
mod downstream;
mod elicit;
mod era;
mod ops;
mod request_state;
mod turns;
mod upstream;

pub(crate) use ops::{PinArgs, approve_only, is_gate_pathway, live, pin};

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rpr::jsonrpc::{
    DEFAULT_MAX_MESSAGE_BYTES, ErrorObject, Message, MessageReader, Request, codes,
};
use rpr::mcp::{McpClient, PROTOCOL_VERSION, ServerCommand, ToolList};
use rpr::store::PinCheck;
use rpr::{Actor, Runtime, StoredPathway};
use serde_json::{Value, json};

use self::downstream::Downstream;
use self::era::Era;
use self::request_state::StateKey;
use self::turns::Turns;
use self::upstream::Upstream;
use crate::config::Policy;
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
    /// The name the policy and the pins know the server by: its key in the host's MCP
    /// configuration. Required: the name a server reports (`serverInfo.name`) is its own
    /// claim and may change; a new one is a binding change, refused until `rpr pin`.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: String,
    /// Seconds a governed `tools/call` (and a request passed through) may take before
    /// its outcome is recorded as unknown.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub(crate) call_timeout: u64,
    /// Seconds the person at the client has to answer a Human Gate elicitation.
    #[arg(long, value_name = "SECONDS", default_value_t = elicit::DEFAULT_APPROVAL_WAIT.as_secs())]
    pub(crate) approval_timeout: u64,
    /// How the records of read-only calls are committed: `process-crash-safe` (without a
    /// sync of their own: they survive a crash of the gate, and a crash of the machine can
    /// lose the last of them) or `synced` (each step synced, as for every call that
    /// changes something, which is always synced).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = ReadRecords::ProcessCrashSafe)]
    pub(crate) read_records: ReadRecords,
    /// The MCP server to govern, started as the gate's child with the gate's environment.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
}

/// `--read-records`: how the steps of read-only calls are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReadRecords {
    /// Each step synced.
    Synced,
    /// Committed without a sync of their own ([`rpr::store::ReadDurability::ProcessCrashSafe`]).
    ProcessCrashSafe,
}

/// The gate's state, shared by the threads that serve the client's requests.
pub(crate) struct Gate {
    rt: Runtime,
    policy: Policy,
    policy_path: String,
    database: String,
    actor: Actor,
    /// The server's identity for the policy and the pins (`--name`).
    name: String,
    upstream: Upstream,
    down: Arc<Downstream>,
    command_line: Vec<String>,
    call_timeout: Duration,
    approval_timeout: Duration,
    propose_lock: Mutex<()>,
    /// Which pathways a call of this gate holds a form open on or sends.
    turns: Turns,
    /// The key of the `requestState`s of this gate's 2026-07-28 Human Gates.
    state_key: StateKey,
    /// The gate's `serverInfo`, with the title naming the server once it has started.
    info: Mutex<Value>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn utf8(path: &std::path::Path, what: &str) -> Result<String, Failure> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("the {what} path is not valid UTF-8 ({})", path.display()).into())
}

/// Runs the gate until the client closes its stdin.
pub(crate) fn run(args: &GateArgs) -> Result<Exit, Failure> {
    let policy_path = utf8(&args.policy, "policy")?;
    let database = utf8(&args.database, "database")?;
    let policy = Policy::load(&policy_path)?;
    policy
        .check_governs(&args.name)
        .map_err(|e| format!("policy {policy_path}: {e}"))?;
    let rt = Runtime::builder(&args.database)
        .bounds(policy.bounds())
        .read_durability(match args.read_records {
            ReadRecords::Synced => rpr::store::ReadDurability::Synced,
            ReadRecords::ProcessCrashSafe => rpr::store::ReadDurability::ProcessCrashSafe,
        })
        .open()
        .map_err(|e| format!("cannot open database {database}: {e}"))?;
    report_unresolved(&rt, &database)?;
    let (program, rest) = args
        .command
        .split_first()
        .ok_or("no server command given after `--`")?;
    let command = ServerCommand::new(program).args(rest).inherit_env(true);
    let down = Arc::new(Downstream::new(DEFAULT_MAX_MESSAGE_BYTES));
    let call_timeout = Duration::from_secs(args.call_timeout.max(1));
    let gate = Arc::new(Gate {
        upstream: Upstream::new(command, call_timeout, Arc::clone(&down)),
        rt,
        policy,
        policy_path,
        database,
        actor: Actor::new(&args.actor),
        name: args.name.clone(),
        down,
        command_line: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        call_timeout,
        approval_timeout: Duration::from_secs(args.approval_timeout.max(1)),
        propose_lock: Mutex::new(()),
        turns: Turns::default(),
        state_key: StateKey::generate()?,
        info: Mutex::new(server_info()),
    });
    serve(&gate);
    Ok(Exit::Done)
}

/// Finds what a previous gate left unresolved (an attempt in flight when it stopped is
/// now unknown) and says so on stderr; none of it is sent again.
fn report_unresolved(rt: &Runtime, database: &str) -> Result<(), Failure> {
    for stored in rt
        .recover()
        .map_err(|e| format!("recovery of {database} failed: {e}"))?
    {
        let why = match &stored {
            StoredPathway::Unknown(_) => {
                "write status unknown (it was sent; whether it took effect is not known); it will not be sent again: rpr reconcile"
            }
            StoredPathway::InFlightElsewhere { .. } => "in flight in another live process",
            _ => "needs a step (rpr unresolved shows which)",
        };
        note!(
            "rpr gate: unresolved pathway {} ({}): {why}",
            stored.id(),
            stored.state().as_str()
        );
    }
    Ok(())
}

fn serve(gate: &Arc<Gate>) {
    let mut reader =
        MessageReader::with_max_message_bytes(std::io::stdin().lock(), DEFAULT_MAX_MESSAGE_BYTES);
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    loop {
        workers.retain(|w| !w.is_finished());
        match reader.read_message() {
            Ok(None) => break,
            Ok(Some(Message::Request(request))) => {
                if let Some(worker) = gate.request(request) {
                    workers.push(worker);
                }
            }
            Ok(Some(Message::Response(response))) => gate.down.deliver(response),
            Ok(Some(Message::Notification(n))) => match n.method.as_str() {
                // The gate initialized the server itself when it started it.
                "notifications/initialized" => {}
                // Passed on under the id the gate used toward the server; the client gets
                // no answer to the request it cancelled (gate/cancel.rs).
                "notifications/cancelled" => gate.client_cancelled(n.params.as_ref()),
                _ => gate.upstream.notify(&n),
            },
            Err(e) if e.is_fatal() => {
                note!("rpr gate: reading from the client failed: {e}");
                break;
            }
            Err(e) => {
                note!("rpr gate: {e}");
                // The same reply rules as every server of this crate (rpr::jsonrpc::server).
                if let Some(reply) = rpr::jsonrpc::server::error_reply(&e) {
                    gate.down.send_value(&reply);
                }
            }
        }
    }
    gate.down.close();
    // Calls in flight finish and record their outcomes before the server is stopped.
    for worker in workers {
        let _ = worker.join();
    }
    gate.upstream.shutdown();
    let stats = gate.rt.write_stats();
    note!(
        "rpr gate: stopped; {} steps committed in {} synced commits and {} without a sync of their own (read-only calls)",
        stats.steps,
        stats.commits,
        stats.unsynced_commits
    );
}

impl Gate {
    /// Serves one client request: at once when it is quick, else on its own thread.
    fn request(self: &Arc<Self>, request: Request) -> Option<JoinHandle<()>> {
        let Request { id, method, params } = request;
        if method == "initialize" {
            let answer = self.initialize(params.as_ref());
            self.down.respond(id, answer);
            return None;
        }
        let era = match Era::of(params.as_ref()) {
            Ok(era) => era,
            Err(refused) => {
                self.down.respond(id, Err(refused));
                return None;
            }
        };
        if method == "ping" {
            self.down
                .respond(id, era.shape(&method, Ok(json!({})), &lock(&self.info)));
            return None;
        }
        let gate = Arc::clone(self);
        let tag = id.to_value().to_string();
        self.down.serving(&tag);
        let spawned = std::thread::Builder::new()
            .name("rpr-gate-request".into())
            .spawn(move || {
                let answer = match method.as_str() {
                    "server/discover" => gate.discover(),
                    "tools/list" => gate.list_tools(params.as_ref(), &era),
                    "tools/call" => gate.call(params.as_ref(), &tag, &era),
                    _ => gate.upstream.pass(&method, era::strip_modern(params), &tag),
                };
                let answer = era.shape(&method, answer, &lock(&gate.info));
                gate.down.respond(id, answer);
            });
        match spawned {
            Ok(worker) => Some(worker),
            Err(e) => {
                note!("rpr gate: cannot start a request thread: {e}");
                None
            }
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
            note!("rpr gate: {e}");
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
    /// the server's capabilities as the gate mirrors them. The server's requests cannot
    /// reach a 2026-07-28 client (it takes none on stdio), so the gate declares none of the
    /// client's capabilities to the server for it.
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
        // Unchecked readbacks are said once per gate: the list is read again after each
        // server restart.
        static SAID: std::sync::Once = std::sync::Once::new();
        let list = self.upstream.tools(client)?;
        self.policy
            .check_offered(&self.name, &list)
            .map_err(|e| format!("refused by the gate's policy: {e}"))?;
        let unchecked = self
            .policy
            .check_readbacks(&self.name, &list)
            .map_err(|e| format!("refused by the gate's policy: {e}"))?;
        SAID.call_once(|| {
            for line in &unchecked {
                note!("rpr gate: note: {line}");
            }
        });
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
            let binding = match rpr::mcp::ToolBinding::new(client.server(), tool)
                .and_then(|b| b.to_binding())
            {
                Ok(b) => b,
                Err(e) => {
                    note!("rpr gate: tool `{}` cannot be bound: {e}", tool.name);
                    continue;
                }
            };
            match self
                .rt
                .check_pin(server, &tool.name, &binding, &tool.definition, &self.actor)
            {
                Ok(PinCheck::FirstSight(_)) => note!(
                    "rpr gate: pinned `{}` of `{server}` ({})",
                    tool.name,
                    binding.digest
                ),
                Ok(PinCheck::Matches(_)) => {}
                Ok(PinCheck::Changed(pin)) => note!(
                    "rpr gate: `{}` of `{server}` changed since it was pinned (pinned {}, now {}); calls are refused until `rpr pin`",
                    tool.name,
                    pin.digest,
                    binding.digest
                ),
                Err(e) => note!(
                    "rpr gate: the pin of `{}` cannot be checked: {e}",
                    tool.name
                ),
            }
        }
        let mut tools: Vec<&rpr::mcp::Tool> = list.tools.iter().collect();
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
