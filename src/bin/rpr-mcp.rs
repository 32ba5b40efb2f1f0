//! `rpr-mcp`: the read-only MCP inspection server for an rpr database.
//!
//! Speaks MCP `2025-11-25` over stdio (one JSON-RPC message per line, through
//! [`rpr::jsonrpc::server`]) and offers five read-only tools built on [`rpr::inspect`].
//! The database is opened with [`ReadStore::open_read_only`]; nothing this program runs
//! can write it. See `docs/inspection.md`.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Mutex, OnceLock};

use rpr::inspect::{self, InspectError};
use rpr::jsonrpc::server::{Handler, Server};
use rpr::jsonrpc::{ErrorObject, JsonRpcError, MessageReader, MessageWriter, Request, codes};
use rpr::pathway::Role;
use rpr::state::State;
use rpr::store::{ReadStore, StoreError};
use serde_json::{Map, Value, json};

/// The only protocol revision spoken.
const PROTOCOL_VERSION: &str = "2025-11-25";
/// Largest accepted input line (one message), 4 MiB. Longer lines are skipped.
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// Largest response line, 10 MiB (the limit common clients enforce).
const MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

const EXIT_USAGE: u8 = 2;
const EXIT_MISSING: u8 = 3;
const EXIT_NOT_RPR: u8 = 4;
const EXIT_TOO_NEW: u8 = 5;
const EXIT_OTHER: u8 = 1;

const INSTRUCTIONS: &str = "Read-only inspection of one rpr (Responsibility Pathway Runtime) database: \
status, pathways, who must act next, and hash-chained evidence. No tool can change anything. \
Read-only is not non-sensitive: results include definitions (redacted by key name only), actor \
names and evidence, so only a trusted client should be connected.";

const HELP: &str =
    "rpr-mcp: read-only MCP inspection server for an rpr database (MCP 2025-11-25 over stdio)

Usage: rpr-mcp --database PATH

Options:
  --database PATH  the rpr database file to inspect (required; opened read-only)
  -h, --help       print this help and exit
  -V, --version    print the version and exit

Exit status: 0 on end of input or SIGTERM, 1 the database could not be read, 2 usage error,
3 no such database file, 4 not an rpr database, 5 database schema newer than this build.";

/// Serializes writes to stdout, so a SIGTERM exit never cuts a line in half.
static OUTPUT: Mutex<()> = Mutex::new(());

fn main() -> ExitCode {
    let path = match parse_args(std::env::args_os().skip(1).collect()) {
        Ok(Args::Run(path)) => path,
        Ok(Args::Help) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Args::Version) => {
            println!("rpr-mcp {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("rpr-mcp: {msg}; try --help");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    exit_cleanly_on_sigterm();
    let store = match ReadStore::open_read_only(&path) {
        Ok(s) => s,
        Err(e) => {
            let code = match &e {
                StoreError::Missing(_) => EXIT_MISSING,
                StoreError::NotRprDatabase(_) => EXIT_NOT_RPR,
                StoreError::SchemaTooNew { .. } => EXIT_TOO_NEW,
                _ => EXIT_OTHER,
            };
            eprintln!("rpr-mcp: {}", one_line(&e.to_string()));
            return ExitCode::from(code);
        }
    };
    let mut server = Server::new(
        MessageReader::with_max_message_bytes(io::stdin().lock(), MAX_LINE_BYTES),
        MessageWriter::with_max_message_bytes(WholeLines::default(), MAX_RESPONSE_BYTES),
    );
    let mut inspector = Inspector {
        store,
        initialized: false,
    };
    match server.serve(&mut inspector) {
        // A write failure: the client closed our stdout, nobody is listening any more.
        Ok(()) | Err(JsonRpcError::Write { .. }) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpr-mcp: reading stdin: {}", one_line(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

// ---------------------------------------------------------------------------
// Command line and process
// ---------------------------------------------------------------------------

enum Args {
    Run(PathBuf),
    Help,
    Version,
}

fn parse_args(args: Vec<OsString>) -> Result<Args, String> {
    let mut database: Option<PathBuf> = None;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let value = match arg.to_str() {
            Some("-h" | "--help") => return Ok(Args::Help),
            Some("-V" | "--version") => return Ok(Args::Version),
            Some("--database") => it.next().ok_or("--database needs a PATH")?,
            Some(s) if s.starts_with("--database=") => OsString::from(&s["--database=".len()..]),
            _ => return Err(format!("unexpected argument {:?}", arg.to_string_lossy())),
        };
        if value.is_empty() {
            return Err("--database needs a non-empty PATH".into());
        }
        if database.replace(PathBuf::from(value)).is_some() {
            return Err("--database given twice".into());
        }
    }
    database
        .map(Args::Run)
        .ok_or_else(|| "missing --database PATH".into())
}

/// Blocks SIGTERM in this thread (and so in every thread started later) and
/// waits for it on a dedicated thread, which exits 0 between two messages.
/// Uses `sigwait`, so no handler and no unsafe code is needed.
fn exit_cleanly_on_sigterm() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        loop {
            if let Ok(Signal::SIGTERM) = set.wait() {
                let _guard = OUTPUT.lock();
                std::process::exit(0);
            }
        }
    });
}

/// Standard output a whole line at a time: bytes are held until `flush` (which the
/// writer calls after each message) and written under [`OUTPUT`].
#[derive(Default)]
struct WholeLines(Vec<u8>);

impl Write for WholeLines {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _guard = OUTPUT.lock();
        let mut out = io::stdout().lock();
        let written = out.write_all(&self.0).and_then(|()| out.flush());
        self.0.clear();
        written
    }
}

// ---------------------------------------------------------------------------
// MCP methods
// ---------------------------------------------------------------------------

fn invalid_params(message: &str) -> ErrorObject {
    ErrorObject::new(codes::INVALID_PARAMS, format!("Invalid params: {message}"))
}

struct Inspector {
    store: ReadStore,
    initialized: bool,
}

impl Handler for Inspector {
    fn request(&mut self, request: Request) -> Result<Value, ErrorObject> {
        let params = match request.params {
            None => Map::new(),
            Some(Value::Object(params)) => params,
            // Other params never reach here: the loop answers them as invalid requests.
            Some(_) => return Err(invalid_params("params must be an object")),
        };
        self.method(&request.method, &params)
    }

    /// An over-long line is answered with id `null` (docs/inspection.md): its id was not
    /// parsed, only guessed from its first or last bytes.
    fn invalid(&mut self, error: &JsonRpcError, reply: Option<Value>) -> Option<Value> {
        let mut reply = reply?;
        if matches!(error, JsonRpcError::LineTooLong { .. }) {
            reply["id"] = Value::Null;
        }
        Some(reply)
    }
}

impl Inspector {
    fn method(&mut self, method: &str, params: &Map<String, Value>) -> Result<Value, ErrorObject> {
        match method {
            "initialize" => {
                if !params.get("protocolVersion").is_some_and(Value::is_string) {
                    return Err(invalid_params("initialize needs a string protocolVersion"));
                }
                self.initialized = true;
                Ok(json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {
                        "name": "rpr-mcp",
                        "title": "rpr read-only inspection",
                        "version": env!("CARGO_PKG_VERSION"),
                    },
                    "instructions": INSTRUCTIONS,
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" | "tools/call" if !self.initialized => Err(ErrorObject::new(
                codes::INVALID_REQUEST,
                "Invalid Request: server not initialized; send initialize first",
            )),
            "tools/list" => {
                if params.contains_key("cursor") {
                    return Err(invalid_params(
                        "invalid cursor (the tool list has one page)",
                    ));
                }
                Ok(json!({"tools": tools().clone()}))
            }
            "tools/call" => {
                let Some(Value::String(name)) = params.get("name") else {
                    return Err(invalid_params("tools/call needs a string name"));
                };
                let empty = Map::new();
                let args = match params.get("arguments") {
                    None => &empty,
                    Some(Value::Object(a)) => a,
                    Some(_) => return Err(invalid_params("arguments must be an object")),
                };
                let outcome = match name.as_str() {
                    "rpr.get_status" => self.get_status(args),
                    "rpr.list_pathways" => self.list_pathways(args),
                    "rpr.get_pathway" => self.get_pathway(args),
                    "rpr.get_evidence" => self.get_evidence(args),
                    "rpr.list_unresolved" => self.list_unresolved(args),
                    _ => {
                        return Err(ErrorObject::new(
                            codes::INVALID_PARAMS,
                            format!("Unknown tool: {name}"),
                        ));
                    }
                };
                Ok(tool_result(outcome))
            }
            _ => Err(ErrorObject::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        }
    }

    fn get_status(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &[])?;
        to_value(&inspect::status(&self.store)?)
    }

    fn list_pathways(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["limit", "cursor", "state"])?;
        let state = match args.get("state") {
            None => None,
            Some(Value::String(s)) => Some(
                s.parse::<State>()
                    .map_err(|e| InspectError::InvalidArgument(format!("state: {e}")))?,
            ),
            Some(_) => {
                return Err(InspectError::InvalidArgument(
                    "state must be a string".into(),
                ));
            }
        };
        to_value(&inspect::list_pathways(
            &self.store,
            state,
            limit(args)?,
            cursor(args)?,
        )?)
    }

    fn get_pathway(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["pathway_id"])?;
        to_value(&inspect::pathway(&self.store, pathway_id(args)?)?)
    }

    fn get_evidence(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["pathway_id", "limit", "cursor"])?;
        to_value(&inspect::evidence(
            &self.store,
            pathway_id(args)?,
            limit(args)?,
            cursor(args)?,
        )?)
    }

    fn list_unresolved(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["limit", "cursor"])?;
        to_value(&inspect::list_unresolved(
            &self.store,
            limit(args)?,
            cursor(args)?,
        )?)
    }
}

// ---------------------------------------------------------------------------
// Tool arguments and results
// ---------------------------------------------------------------------------

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, InspectError> {
    serde_json::to_value(v).map_err(|e| InspectError::Store(StoreError::Corrupt(e.to_string())))
}

fn only(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), InspectError> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(InspectError::InvalidArgument(format!(
            "unexpected argument {k:?}; this tool takes {}",
            if allowed.is_empty() {
                "no arguments".to_owned()
            } else {
                allowed.join(", ")
            }
        ))),
        None => Ok(()),
    }
}

fn limit(args: &Map<String, Value>) -> Result<usize, InspectError> {
    let bad = || {
        InspectError::InvalidArgument(format!(
            "limit must be an integer from 1 to {}",
            inspect::MAX_LIMIT
        ))
    };
    match args.get("limit") {
        None => Ok(inspect::DEFAULT_LIMIT),
        Some(Value::Number(n)) => {
            let n = n.as_u64().ok_or_else(bad)?;
            usize::try_from(n)
                .ok()
                .filter(|n| (1..=inspect::MAX_LIMIT).contains(n))
                .ok_or_else(bad)
        }
        Some(_) => Err(bad()),
    }
}

fn cursor(args: &Map<String, Value>) -> Result<Option<&str>, InspectError> {
    match args.get("cursor") {
        None => Ok(None),
        Some(Value::String(c)) => Ok(Some(c)),
        Some(_) => Err(InspectError::InvalidArgument(
            "cursor must be a string".into(),
        )),
    }
}

fn pathway_id(args: &Map<String, Value>) -> Result<&str, InspectError> {
    match args.get("pathway_id") {
        Some(Value::String(id)) => Ok(id),
        Some(_) => Err(InspectError::InvalidArgument(
            "pathway_id must be a string".into(),
        )),
        None => Err(InspectError::InvalidArgument(
            "pathway_id is required".into(),
        )),
    }
}

/// A `CallToolResult`: `structuredContent` plus its serialized copy in a text block.
fn tool_result(outcome: Result<Value, InspectError>) -> Value {
    let (structured, is_error) = match outcome {
        Ok(v) => (v, false),
        Err(e) => (
            json!({"error": {"code": e.code(), "message": e.to_string()}}),
            true,
        ),
    };
    let text = serde_json::to_string(&structured).unwrap_or_default();
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": is_error,
    })
}

// ---------------------------------------------------------------------------
// Tool definitions
// ---------------------------------------------------------------------------

fn tools() -> &'static Value {
    static TOOLS: OnceLock<Value> = OnceLock::new();
    TOOLS.get_or_init(build_tools)
}

fn str_enum(values: impl IntoIterator<Item = &'static str>) -> Value {
    json!({"type": "string", "enum": values.into_iter().collect::<Vec<_>>()})
}

fn state_schema() -> Value {
    str_enum(State::ALL.iter().map(|s| s.as_str()))
}

fn role_schema() -> Value {
    str_enum(Role::ALL.map(Role::as_str))
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn next_schema() -> Value {
    let roles = json!({"type": "array", "items": role_schema()});
    let actors = json!({"type": "array", "items": {"type": "string"}});
    object(
        json!({
            "action": {"type": "string", "description": "admit, approve_or_deny, dispatch, wait, confirm_by_readback, reconcile, repair, resume, require_repair, release_or_escalate, or none"},
            "roles": roles,
            "actors": actors,
            "detail": {"type": "string"},
            "alternatives": {"type": "array", "items": object(
                json!({"action": {"type": "string"}, "roles": roles, "actors": actors}),
                &["action", "roles", "actors"],
            )},
        }),
        &["action", "roles", "actors", "detail", "alternatives"],
    )
}

fn summary_schema() -> Value {
    object(
        json!({
            "pathway_id": {"type": "string"},
            "state": state_schema(),
            "action": {"type": ["string", "null"]},
            "class": {"type": ["string", "null"]},
            "proposer": {"type": "string"},
            "version": {"type": "integer"},
            "created_at": {"type": "integer"},
            "updated_at": {"type": "integer"},
            "next": next_schema(),
            "clipped": {"type": "boolean"},
        }),
        &[
            "pathway_id",
            "state",
            "action",
            "class",
            "proposer",
            "version",
            "created_at",
            "updated_at",
            "next",
            "clipped",
        ],
    )
}

/// An output schema: the success shape, or `{error: {code, message}}` (an `isError` result).
fn output(properties: Value, required: &[&str]) -> Value {
    let mut properties = properties;
    properties["error"] = object(
        json!({
            "code": str_enum(["pathway_not_found", "invalid_argument", "invalid_cursor", "store_error"]),
            "message": {"type": "string"},
        }),
        &["code", "message"],
    );
    json!({
        "type": "object",
        "properties": properties,
        "anyOf": [{"required": required}, {"required": ["error"]}],
    })
}

fn page_output() -> Value {
    output(
        json!({
            "pathways": {"type": "array", "items": summary_schema()},
            "next_cursor": {"type": "string", "description": "opaque; pass it back unchanged for the next page; absent on the last page"},
        }),
        &["pathways"],
    )
}

fn limit_schema() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": inspect::MAX_LIMIT, "default": inspect::DEFAULT_LIMIT, "description": "page size"})
}

fn cursor_schema() -> Value {
    json!({"type": "string", "description": "the next_cursor of the previous page, unchanged"})
}

fn id_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": inspect::MAX_ID_BYTES, "description": "a pathway id, e.g. from rpr.list_pathways"})
}

fn input(properties: Value, required: &[&str]) -> Value {
    let mut schema =
        json!({"type": "object", "properties": properties, "additionalProperties": false});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

fn tool(
    name: &str,
    title: &str,
    description: &str,
    input_schema: Value,
    output_schema: Value,
) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input_schema,
        "outputSchema": output_schema,
        "annotations": {
            "title": title,
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        },
    })
}

fn build_tools() -> Value {
    let attempt = object(
        json!({
            "attempt_id": {"type": "string"},
            "seq": {"type": "integer"},
            "previous_attempt": {"type": ["string", "null"]},
            "status": {"type": "string"},
            "request": {},
            "request_digest": {"type": "string"},
            "binding": {},
            "binding_digest": {"type": "string"},
            "owner": {"type": ["string", "null"]},
            "lease_until": {"type": ["integer", "null"]},
            "outcome": {},
            "created_at": {"type": "integer"},
            "updated_at": {"type": "integer"},
        }),
        &[
            "attempt_id",
            "seq",
            "status",
            "request_digest",
            "binding",
            "binding_digest",
            "created_at",
            "updated_at",
        ],
    );
    let event = object(
        json!({
            "seq": {"type": "integer"},
            "hash": {"type": "string"},
            "prev_hash": {"type": "string"},
            "event": {},
            "verified": {"type": "boolean"},
        }),
        &["seq", "hash", "prev_hash", "event", "verified"],
    );
    json!([
        tool(
            "rpr.get_status",
            "Database status",
            "Schema version, number of pathways in each state, unresolved count, and the ledger head (hash and length). Never a filesystem path.",
            input(json!({}), &[]),
            output(
                json!({
                    "mode": {"const": "read_only"},
                    "schema_version": {"type": "integer"},
                    "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "unresolved_count": {"type": "integer"},
                    "ledger_length": {"type": "integer"},
                    "ledger_head": {"type": ["string", "null"]},
                }),
                &[
                    "mode",
                    "schema_version",
                    "counts",
                    "unresolved_count",
                    "ledger_length",
                    "ledger_head"
                ],
            ),
        ),
        tool(
            "rpr.list_pathways",
            "List pathways",
            "A page of pathways ordered by id (optionally only one state), each with its state and who must act next. Follow next_cursor for more.",
            input(
                json!({"limit": limit_schema(), "cursor": cursor_schema(), "state": state_schema()}),
                &[]
            ),
            page_output(),
        ),
        tool(
            "rpr.get_pathway",
            "Get a pathway",
            "One pathway: its (redacted) definition, state, attempts with their bindings, and who must act next (action, roles, actors).",
            input(json!({"pathway_id": id_schema()}), &["pathway_id"]),
            output(
                json!({
                    "pathway_id": {"type": "string"},
                    "idempotency_key": {"type": "string"},
                    "state": state_schema(),
                    "version": {"type": "integer"},
                    "proposer": {"type": "string"},
                    "created_at": {"type": "integer"},
                    "updated_at": {"type": "integer"},
                    "request_digest": {"type": "string"},
                    "definition": {"type": "object"},
                    "attempts": {"type": "array", "items": attempt},
                    "next": next_schema(),
                    "truncated": {"type": "boolean"},
                    "omitted_attempts": {"type": "integer", "minimum": 0},
                }),
                &[
                    "pathway_id",
                    "idempotency_key",
                    "state",
                    "version",
                    "proposer",
                    "created_at",
                    "updated_at",
                    "request_digest",
                    "definition",
                    "attempts",
                    "next",
                    "truncated",
                    "omitted_attempts",
                ],
            ),
        ),
        tool(
            "rpr.get_evidence",
            "Get evidence",
            "A page of one pathway's hash-chained ledger events, oldest first. Each event on the page is checked: its hash against its text and prev_hash, and its link to the previous event of the global chain; chain_verified covers this page only.",
            input(
                json!({"pathway_id": id_schema(), "limit": limit_schema(), "cursor": cursor_schema()}),
                &["pathway_id"],
            ),
            output(
                json!({
                    "pathway_id": {"type": "string"},
                    "events": {"type": "array", "items": event},
                    "next_cursor": {"type": "string"},
                    "chain_verified": {"type": "boolean"},
                    "checked_events": {"type": "integer", "minimum": 0},
                    "problems": {"type": "array", "items": object(
                        json!({"seq": {"type": "integer"}, "problem": {"type": "string"}}),
                        &["seq", "problem"],
                    )},
                    "ledger_length": {"type": "integer"},
                    "ledger_head": {"type": ["string", "null"]},
                }),
                &[
                    "pathway_id",
                    "events",
                    "chain_verified",
                    "checked_events",
                    "problems",
                    "ledger_length",
                    "ledger_head"
                ],
            ),
        ),
        tool(
            "rpr.list_unresolved",
            "List unresolved pathways",
            "A page of pathways not yet completed, denied or aborted, ordered by id, each with the action it needs and the roles and actors that must take it.",
            input(
                json!({"limit": limit_schema(), "cursor": cursor_schema()}),
                &[]
            ),
            page_output(),
        ),
    ])
}
