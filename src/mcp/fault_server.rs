//! A stdio MCP server (protocol 2025-11-25 by default; any legacy version, 2026-07-28, or
//! both eras on request) that injects one fault; the `rpr-fault-server` binary.
//!
//! It exists to test MCP clients: this crate's own tests use it, and a host can use it
//! to check how its own code handles a server that crashes, lies or misbehaves. It
//! offers two tools:
//!
//! - `put {key, value}` (mutating): appends one JSON line per effect to the effects
//!   file (`--effects PATH`) and stores `key = value` in a JSON state file
//!   (`--state PATH`), so another process can read it back;
//! - `get {key}` (read-only): reads the state file and returns
//!   `structuredContent {"key", "value"}` (`value` is `null` when absent).
//!
//! Faults hit `tools/call` of `put` unless said otherwise; select one with
//! `--fault NAME` or the `RPR_FAULT` environment variable. stdout carries only
//! protocol lines; logs go to stderr. Run with `--help` for the list.
//!
//! Only with the `fault-server` feature (test tooling, off by default). It reads and
//! answers through [`crate::jsonrpc::server`]; the faults that break the protocol on
//! purpose (garbage, wrong ids, two replies, none) write their bytes themselves.

use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use crate::jsonrpc::{
    self, ErrorObject, Id, JsonRpcError, MessageReader, MessageWriter, Request, codes,
    server::{Incoming, Invalid},
};

mod modern;
mod options;
mod tools;

use options::{Fault, ServerEra, parse_options};

/// The `--help` text: options and faults.
pub const HELP: &str = "\
rpr-fault-server: a stdio MCP server (2025-11-25 by default) that injects one fault, for tests.

Options:
  --effects PATH          append one JSON line per `put` effect to PATH
  --state PATH            JSON object file holding key -> value (read by `get`)
  --fault NAME            the fault to inject (or env RPR_FAULT); default: none
  --rpc-error-code N      code for --fault rpc-error (default -32603)
  --sleep-ms N            delay for --fault slow (default 3000)
  --huge-bytes N          size of the reply line for --fault huge-line (default 17 MiB)
  --lists-before N        tools/list answers before crash-before-read / change-schema act (default 1)
  --page-size N           tools per tools/list page (default: all on one page)
  --server-name S         serverInfo.name (default rpr-fault-server)
  --server-version S      serverInfo.version (default: this crate's version; may be empty)
  --protocol-version V    answer this protocolVersion to initialize (default: 2025-11-25);
                          before 2025-06-18 no structuredContent and no tool titles, before
                          2025-03-26 no tool annotations
  --era E                 legacy (default: initialize only; server/discover is unknown),
                          modern (2026-07-28 only: server/discover, the _meta envelope on
                          every request, -32022 for another version, initialize refused) or
                          dual (both; the first server/discover or initialize settles it)
  --modern-version V      the version a modern server supports (default 2026-07-28)
  --input-required N      (modern) answer a tools/call of `put` with input_required (an
                          elicitation) N times before it stores; a decline stores nothing.
                          Also: declare `prompts` and answer a prompts/get of `confirm`
                          ({\"key\"}) so, asking only a request that declared elicitation
  --request-log PATH      append {id, method, meta} of each request and notification
                          received to PATH (id null for a notification; with `level` for
                          a logging/setLevel)
  --listen                (modern) take subscriptions/listen as a stream: one
                          notifications/resources/list_changed tagged with
                          _meta[\"io.modelcontextprotocol/subscriptionId\"] (the request's
                          id as JSON text), then nothing, and no answer, until cancelled
  --logging               (legacy) declare `logging` and answer logging/setLevel; log-on-get
                          then logs only while the level set is info or less severe (or
                          none was set)
  --instructions TEXT     the instructions sent at initialize and server/discover
  --draft07               declare draft-07 `$schema` in the input schemas
  --claim-read-only       annotate `put` readOnlyHint: true (a lie: it still writes)
  --pid-file PATH         write this process's id to PATH at start
  --cancel-log PATH       append each notifications/cancelled to PATH, one JSON line
                          {\"requestId\", \"reason\"} each
  --release PATH          (hold-list) the file whose existence releases the held tools/list
  --fault-on TOOL         the tool the fault hits: put (default) or get; on `get` only
                          crash-after-read, never-reply, slow, is-error and rpc-error act
  --help                  this text

A request `rpr-fault/hang` is never answered (whatever the fault): a request that a
client can only cancel.

Faults (on tools/call of `put` unless noted):
  none                 store and reply
  crash-before-read    (on tools/list) at the N-th tools/list: close stdin, reply, exit 3
  crash-after-read     exit 3 right after reading the call, before the effect
  crash-after-effect   do the effect, exit 3 before replying
  garbage-reply        effect, then a non-JSON line, an invalid-UTF-8 line and a reply without result/error
  wrong-id             effect, reply with the id's JSON type changed (1 -> \"1\")
  reply-twice          effect, reply twice
  never-reply          effect, never reply (logs any notifications/cancelled to stderr)
  notify-mid-call      before the reply: a log notification, progress for an unknown token,
                       a ping request and an unknown request; checks the client's answers
  huge-line            effect, reply in one line of --huge-bytes bytes
  change-schema        (on tools/list) after the N-th answer, `put` has a new description and schema
  change-identity      (on initialize) serverInfo.version changes with every process start
  is-error             reply isError: true, no effect
  rpc-error            reply a JSON-RPC error (--rpc-error-code), no effect
  ignore-sigterm       (process) block SIGTERM and keep running after stdin closes
  slow                 sleep --sleep-ms, then effect and reply
  notify-before-init   (on initialize) send notifications before the initialize reply
  loop-cursor          (on tools/list) always return the same nextCursor
  log-on-get           (on tools/call of `get`) a notifications/message (level info) before
                       the result; under 2026-07-28 only when the request's _meta asks
                       for logLevel debug or info
  hold-list            (on tools/list) the one after the N-th answer is answered only once
                       the file --release names exists (received and logged at once)
  change-read-notify   (on tools/call of `get`) after answering the first one, `get` has a new
                       description and the server sends notifications/tools/list_changed
                       (it declares tools.listChanged)
  ignore-discover      (legacy, on server/discover) never answer it
  exit-on-discover     (legacy, on server/discover) exit 3 at once, as servers do that take
                       nothing before initialize
  slow-discover        (modern or dual, on the first server/discover) sleep --sleep-ms before
                       answering, as a server slow to start does
  elicit-url           (on tools/call of `get`) if the client declared elicitation.url: an
                       elicitation/create in URL mode, then (after the client's answer)
                       notifications/elicitation/complete, then the result, whose
                       structuredContent.value is the client's action; else a tool error
";

// Its bools are independent command-line switches of a test tool.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug)]
struct Options {
    effects: Option<PathBuf>,
    state: Option<PathBuf>,
    fault: Fault,
    rpc_error_code: i64,
    sleep_ms: u64,
    huge_bytes: usize,
    lists_before: usize,
    page_size: Option<usize>,
    server_name: String,
    server_version: String,
    protocol_version: String,
    era: ServerEra,
    modern_version: String,
    input_required: usize,
    request_log: Option<PathBuf>,
    instructions: Option<String>,
    draft07: bool,
    /// `put` claims to be read-only (`readOnlyHint: true`) and writes all the same.
    claim_read_only: bool,
    pid_file: Option<PathBuf>,
    cancel_log: Option<PathBuf>,
    /// The fault hits `get` instead of `put` (`--fault-on get`).
    fault_on_get: bool,
    /// The file whose existence releases a held `tools/list` (`--fault hold-list`).
    release: Option<PathBuf>,
    /// Declare `logging` and answer `logging/setLevel` (`--logging`).
    logging: bool,
    /// (modern) Hold `subscriptions/listen` open as a stream (`--listen`).
    listen: bool,
}

fn log(message: &str) {
    eprintln!("rpr-fault-server: {message}");
}

/// Appends `line` and a newline to the file at `path` in one `write` on a file opened for
/// appending, so a test reading the file while the server writes it never sees half a line
/// (`writeln!` on a `File` writes each piece of its format on its own). `what` names the
/// file in the message logged if it cannot be written.
fn append_line(path: &std::path::Path, line: &Value, what: &str) {
    let line = format!("{line}\n");
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        log(&format!("could not write the {what}: {e}"));
    }
}

/// Why the server stops handling messages: it exits with this code.
struct Exit(u8);

/// The connection: stdin and stdout, with no cap on what is written (`huge-line`).
/// The server's connection: stdin and stdout ([`run`]), or streams in the caller's process
/// ([`run_over`]).
type Connection = jsonrpc::server::Server<Box<dyn BufRead>, Box<dyn Write>>;

/// A write to stdout failed: nobody reads us any more.
fn gone(e: &JsonRpcError) -> Exit {
    log(&format!("stdout closed ({e}); exiting"));
    Exit(0)
}

struct Server {
    opts: Options,
    lists: usize,
    version: String,
    /// For `change-read-notify`: `get` was answered once, and has changed since.
    read_changed: bool,
    /// The era this process settled on (`--era dual`: the first `server/discover` or
    /// `initialize`).
    settled: Option<ServerEra>,
    /// Whether the request being answered is served under 2026-07-28.
    modern: bool,
    /// The ids of every `tools/call` received (a 2026-07-28 retry must use a new one).
    call_ids: std::collections::HashSet<String>,
    /// The `capabilities` the client declared in `initialize`.
    client_capabilities: Value,
    /// The level the client set with `logging/setLevel` (`--logging`), if it set one.
    log_level: Option<String>,
}

impl Server {
    /// Any JSON as one line (also messages that are deliberately wrong).
    fn send(conn: &mut Connection, value: &Value) -> Result<(), Exit> {
        conn.send_value(value).map_err(|e| gone(&e))
    }

    /// A `notifications/message` log notification (level `info`) with `data`.
    fn send_log(conn: &mut Connection, data: &str) -> Result<(), Exit> {
        Self::send(
            conn,
            &json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "logger": "rpr-fault-server", "data": data}}),
        )
    }

    /// Bytes that are no message at all.
    fn send_raw(conn: &mut Connection, bytes: &[u8]) -> Result<(), Exit> {
        conn.writer()
            .write_encoded(bytes, |_| {})
            .map(drop)
            .map_err(|e| gone(&e))
    }

    /// A result, shaped for the protocol in use: under 2026-07-28 with `resultType` and
    /// the server's name in `_meta`; before 2025-06-18 without `structuredContent`.
    fn result(&self, conn: &mut Connection, id: Id, mut result: Value) -> Result<(), Exit> {
        if self.modern {
            self.decorate(&mut result);
        } else if !self.speaks("2025-06-18")
            && let Some(result) = result.as_object_mut()
        {
            result.remove("structuredContent");
        }
        conn.reply(id, Ok(result)).map_err(|e| gone(&e))
    }

    /// Whether the protocol in use is `version` or newer (an unknown version counts as
    /// the newest).
    fn speaks(&self, version: &str) -> bool {
        const ORDER: [&str; 5] = [
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            "2026-07-28",
        ];
        let at = |v: &str| ORDER.iter().position(|o| *o == v).unwrap_or(ORDER.len());
        self.modern || at(&self.opts.protocol_version) >= at(version)
    }

    fn error(conn: &mut Connection, id: Id, code: i64, message: &str) -> Result<(), Exit> {
        Self::error_with(conn, id, code, message, None)
    }

    fn error_with(
        conn: &mut Connection,
        id: Id,
        code: i64,
        message: &str,
        data: Option<Value>,
    ) -> Result<(), Exit> {
        let mut error = ErrorObject::new(code, message);
        error.data = data;
        conn.reply(id, Err(error)).map_err(|e| gone(&e))
    }

    fn handle(&mut self, conn: &mut Connection, incoming: Incoming) -> Result<(), Exit> {
        match incoming {
            Incoming::Request(Request { id, method, params }) => {
                self.log_request(&id.to_value(), &method, params.as_ref());
                let params = params.unwrap_or(Value::Null);
                self.modern = self.serves_modern(&params);
                match method.as_str() {
                    "server/discover" => self.discover(conn, id, &params),
                    "initialize" => {
                        self.client_capabilities = params["capabilities"].clone();
                        self.initialize(conn, id, &params)
                    }
                    _ if self.modern => {
                        if let Err((code, message, data)) = self.check_envelope(&params) {
                            return Self::error_with(conn, id, code, &message, data);
                        }
                        self.dispatch(conn, id, &method, &params)
                    }
                    _ => self.dispatch(conn, id, &method, &params),
                }
            }
            Incoming::Notification(notification) => {
                self.log_request(
                    &Value::Null,
                    &notification.method,
                    notification.params.as_ref(),
                );
                if notification.method == "notifications/cancelled" {
                    self.cancelled(notification.params.as_ref());
                }
                Ok(())
            }
            Incoming::Response(_) => {
                log("ignoring a response (this server sent no request it answers)");
                Ok(())
            }
            Incoming::Invalid(Invalid { error, reply }) => {
                log(&format!("{error}"));
                match reply {
                    Some(reply) => Self::send(conn, &reply),
                    None => Ok(()),
                }
            }
        }
    }

    /// A request other than the lifecycle's, in the era settled for it.
    fn dispatch(
        &mut self,
        conn: &mut Connection,
        id: Id,
        method: &str,
        params: &Value,
    ) -> Result<(), Exit> {
        match method {
            // 2026-07-28 has no `ping`.
            "ping" if !self.modern => self.result(conn, id, json!({})),
            "tools/list" => self.list(conn, id, params),
            "tools/call" => self.call(conn, id, params),
            "prompts/get" => self.prompt(conn, id, params),
            "logging/setLevel" if self.opts.logging && !self.modern => {
                let Some(level) = params.get("level").and_then(Value::as_str) else {
                    return Self::error(
                        conn,
                        id,
                        codes::INVALID_PARAMS,
                        "`level` must be a string",
                    );
                };
                self.log_level = Some(level.to_owned());
                self.result(conn, id, json!({}))
            }
            "subscriptions/listen" if self.modern && self.opts.listen => {
                log("subscriptions/listen: a stream, answered never (until cancelled)");
                Self::send(
                    conn,
                    &json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed",
                    "params": {"_meta": {
                        "io.modelcontextprotocol/subscriptionId": id.to_value().to_string()}}}),
                )
            }
            "rpr-fault/hang" => {
                log("rpr-fault/hang: never answered");
                Ok(())
            }
            other => Self::error(
                conn,
                id,
                codes::METHOD_NOT_FOUND,
                &format!("Method not found: {other}"),
            ),
        }
    }

    fn cancelled(&self, params: Option<&Value>) {
        let field = |name: &str| {
            params
                .and_then(|p| p.get(name))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let (request, reason) = (field("requestId"), field("reason"));
        log(&format!("cancelled requestId={request} reason={reason}"));
        if let Some(path) = &self.opts.cancel_log {
            append_line(
                path,
                &json!({"requestId": request, "reason": reason}),
                "cancel log",
            );
        }
    }

    fn initialize(&mut self, conn: &mut Connection, id: Id, params: &Value) -> Result<(), Exit> {
        if self.opts.era == ServerEra::Modern || self.settled == Some(ServerEra::Modern) {
            // A modern-only server lists its versions in the error it returns to `initialize`.
            let data = json!({"supported": [self.opts.modern_version],
                              "requested": params.get("protocolVersion")});
            return Self::error_with(
                conn,
                id,
                crate::mcp::UNSUPPORTED_PROTOCOL_VERSION,
                "this server speaks protocol 2026-07-28: no initialize handshake",
                Some(data),
            );
        }
        self.settled = Some(ServerEra::Legacy);
        if self.opts.fault == Fault::NotifyBeforeInit {
            Self::send(
                conn,
                &json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            )?;
            Self::send_log(conn, "before init")?;
        }
        let mut result = json!({
            "protocolVersion": self.opts.protocol_version,
            "capabilities": self.capabilities(),
            "serverInfo": {"name": self.opts.server_name, "version": self.version},
        });
        if let Some(text) = &self.opts.instructions {
            result["instructions"] = json!(text);
        }
        self.result(conn, id, result)
    }
}

/// For `change-identity`: a version that differs with every process start.
fn changing_version(base: &str, state: Option<&PathBuf>) -> String {
    let Some(state) = state else {
        return format!("{base}-pid{}", std::process::id());
    };
    let counter = state.with_extension("boots");
    let boots = std::fs::read_to_string(&counter)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    if let Err(e) = std::fs::write(&counter, boots.to_string()) {
        log(&format!("could not write the boot counter: {e}"));
    }
    format!("{base}-boot{boots}")
}

/// Runs the server on this process's stdin and stdout until stdin closes or a fault
/// ends it. `args` are the command-line options (without the program name); see
/// [`HELP`]. Returns the process exit code.
pub fn run(args: impl IntoIterator<Item = String>) -> ExitCode {
    let opts = match parse_options(args) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            log(&message);
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &opts.pid_file
        && let Err(e) = std::fs::write(path, std::process::id().to_string())
    {
        log(&format!("could not write the pid file: {e}"));
    }
    if opts.fault == Fault::IgnoreSigterm {
        let mut set = nix::sys::signal::SigSet::empty();
        set.add(nix::sys::signal::Signal::SIGTERM);
        if let Err(e) = set.thread_block() {
            log(&format!("could not block SIGTERM: {e}"));
        }
    }
    let server_version = if opts.fault == Fault::ChangeIdentity {
        changing_version(&opts.server_version, opts.state.as_ref())
    } else {
        opts.server_version.clone()
    };
    log(&format!(
        "started, fault {:?}, pid {}",
        opts.fault,
        std::process::id()
    ));
    let ignore_sigterm = opts.fault == Fault::IgnoreSigterm;
    let code = serve(
        opts,
        server_version,
        Box::new(std::io::stdin().lock()),
        Box::new(std::io::stdout()),
    );
    if code != ExitCode::SUCCESS {
        return code;
    }
    if ignore_sigterm {
        log("stdin closed; ignore-sigterm: staying alive until killed");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    log("stdin closed; exiting");
    ExitCode::SUCCESS
}

/// [`run`] over `input` and `output` instead of stdin and stdout: the server on a thread of
/// the caller's process (a test's [`crate::mcp::InProcessServer`]). The options that
/// concern a process are refused: `--pid-file`, and the faults `ignore-sigterm` and
/// `change-identity` (its boot counter counts process starts).
pub fn run_over(
    args: impl IntoIterator<Item = String>,
    input: impl BufRead + Send + 'static,
    output: impl Write + Send + 'static,
) -> ExitCode {
    let opts = match parse_options(args) {
        Ok(Some(opts)) => opts,
        Ok(None) => return ExitCode::SUCCESS,
        Err(message) => {
            log(&message);
            return ExitCode::from(2);
        }
    };
    if opts.pid_file.is_some() || matches!(opts.fault, Fault::IgnoreSigterm | Fault::ChangeIdentity)
    {
        log("--pid-file, ignore-sigterm and change-identity concern a process: not in-process");
        return ExitCode::from(2);
    }
    let version = opts.server_version.clone();
    serve(opts, version, Box::new(input), Box::new(output))
}

/// Serves one connection until its input ends (success) or a fault ends it (its code).
fn serve(
    opts: Options,
    server_version: String,
    input: Box<dyn BufRead>,
    output: Box<dyn Write>,
) -> ExitCode {
    let mut server = Server {
        opts,
        lists: 0,
        version: server_version,
        read_changed: false,
        settled: None,
        modern: false,
        call_ids: std::collections::HashSet::new(),
        client_capabilities: Value::Null,
        log_level: None,
    };
    let mut conn = Connection::new(
        MessageReader::new(input),
        MessageWriter::with_max_message_bytes(output, usize::MAX),
    );
    loop {
        match conn.receive() {
            Ok(None) => break,
            Ok(Some(incoming)) => {
                if let Err(Exit(code)) = server.handle(&mut conn, incoming) {
                    return ExitCode::from(code);
                }
            }
            Err(e) => {
                log(&format!("reading stdin failed: {e}"));
                break;
            }
        }
    }
    ExitCode::SUCCESS
}
