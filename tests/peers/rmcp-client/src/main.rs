//! Test peer for `tests/rpr_mcp_clients.rs`: the official Rust SDK client, `rmcp` 3.11.0,
//! driving an MCP server over stdio.
//!
//! `rmcp-client PROGRAM [ARGS…]` starts the server in its own process group, connects
//! with rmcp's default client (`().serve(..)`, which offers its latest protocol version,
//! `2026-07-28`), lists every tool (`list_all_tools`, following `nextCursor`), calls
//! `rpr.get_status`, then cancels the client, closes the server's stdin and waits for it
//! to exit. The transport is rmcp's own line transport over a pair of in-memory pipes
//! that copy each line to and from the child unchanged and record it, so the report shows
//! what went over the wire.
//!
//! Prints one JSON object on stdout: `offered` (the `protocolVersion` of the `initialize`
//! rmcp sent), `answered` (the one in the server's reply), `peer_info` (what rmcp
//! negotiated), `tools`, `get_status` (the `CallToolResult`), `sent`/`received` (every
//! line, parsed), `server_pid` and `server_exit`. Exits 1 with a message on stderr when
//! any step fails.
//!
//! `rmcp-client --plan PLAN_JSON PROGRAM [ARGS…]` (for `tests/gate_matrix.rs`) makes the
//! plan's calls instead of `rpr.get_status`, in one session. PLAN_JSON is
//! `{"elicitation": BOOL, "steps": [STEP…]}`; a STEP is `{"name", "tool", "arguments",
//! "answer"}` (`answer`: what an `elicitation/create` during that step is answered:
//! `accept` with `{"approve": true}`, `accept-no`, `decline` or `cancel`). With
//! `elicitation` the client declares form elicitation. The report has `steps` (each with `name`,
//! `elicitations` and `result`, the `CallToolResult`, or `error`); a session that does not
//! connect is reported as `connect_error`, and the exit status is 0 either way.

use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, ErrorData, Implementation,
};
use rmcp::service::{RequestContext, RoleClient, ServiceError};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

const USAGE: &str = "usage: rmcp-client [--plan PLAN_JSON] PROGRAM [ARGS...]";

type Wire = Arc<Mutex<Vec<Value>>>;

/// Copies `from` to `to` line by line, recording each line (parsed when it is JSON).
async fn pump(from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, wire: Wire) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let value = serde_json::from_str(&line).unwrap_or_else(|_| Value::String(line.clone()));
        wire.lock().expect("wire lock").push(value);
        let written = async {
            to.write_all(line.as_bytes()).await?;
            to.write_all(b"\n").await?;
            to.flush().await
        };
        if written.await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A started server with rmcp's line transport wired to it through recording pumps.
struct Wired {
    child: tokio::process::Child,
    pid: Option<u32>,
    sent: Wire,
    received: Wire,
    up: tokio::task::JoinHandle<()>,
    down: tokio::task::JoinHandle<()>,
}

/// rmcp's ends of the pipes to the server: what it reads, what it writes.
type ClientSide = (tokio::io::DuplexStream, tokio::io::DuplexStream);

/// Starts the server; returns it and the client's ends of the pipes.
fn start(program: &str, rest: &[String]) -> Result<(Wired, ClientSide), String> {
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawning {program}: {e}"))?;
    let pid = child.id();
    let child_in = child.stdin.take().ok_or("no child stdin")?;
    let child_out = child.stdout.take().ok_or("no child stdout")?;
    let sent = Wire::default();
    let received = Wire::default();
    let (client_writes, up_reads) = tokio::io::duplex(1 << 20);
    let (down_writes, client_reads) = tokio::io::duplex(1 << 20);
    let up = tokio::spawn(pump(up_reads, child_in, Arc::clone(&sent)));
    let down = tokio::spawn(pump(child_out, down_writes, Arc::clone(&received)));
    let wired = Wired {
        child,
        pid,
        sent,
        received,
        up,
        down,
    };
    Ok((wired, (client_reads, client_writes)))
}

/// Waits for the server to exit after the client is gone (its stdin closed), and returns
/// its exit code or why it was killed, with every line that went each way.
async fn finish(wired: Wired) -> (Value, Vec<Value>, Vec<Value>) {
    let Wired {
        mut child,
        sent,
        received,
        up,
        down,
        ..
    } = wired;
    let _ = tokio::time::timeout(Duration::from_secs(10), up).await;
    let exit =
        if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
            json!(status.code())
        } else {
            let _ = child.kill().await;
            json!("killed: did not exit within 10 s of stdin EOF")
        };
    let _ = tokio::time::timeout(Duration::from_secs(10), down).await;
    let sent = sent.lock().expect("wire lock").clone();
    let received = received.lock().expect("wire lock").clone();
    (exit, sent, received)
}

/// The `protocolVersion` rmcp offered and the one the server answered.
fn versions(sent: &[Value], received: &[Value]) -> (Option<Value>, Option<Value>) {
    let init = sent.iter().find(|m| m["method"] == "initialize");
    let offered = init.map(|m| m["params"]["protocolVersion"].clone());
    let init_id = init.map(|m| m["id"].clone());
    let answered = received
        .iter()
        .find(|m| init_id.as_ref().is_some_and(|id| &m["id"] == id) && m.get("result").is_some())
        .map(|m| m["result"]["protocolVersion"].clone());
    (offered, answered)
}

async fn run() -> Result<Value, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--plan") {
        let plan = args.get(1).ok_or(USAGE)?;
        let plan: Value = serde_json::from_str(plan).map_err(|e| format!("PLAN_JSON: {e}"))?;
        let (program, rest) = args[2..].split_first().ok_or(USAGE)?;
        return Ok(run_plan(&plan, program, rest).await);
    }
    let (program, rest) = args.split_first().ok_or(USAGE)?;
    let (wired, (client_reads, client_writes)) = start(program, rest)?;
    let pid = wired.pid;

    let client =
        ().serve((client_reads, client_writes))
            .await
            .map_err(|e| format!("rmcp could not connect: {e}"))?;
    let info = client.peer_info().ok_or("rmcp has no peer info")?;
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("list_all_tools: {e}"))?;
    let status = client
        .call_tool(CallToolRequestParams::new("rpr.get_status"))
        .await
        .map_err(|e| format!("call_tool rpr.get_status: {e}"))?;
    client.cancel().await.map_err(|e| format!("cancel: {e}"))?;

    // The client is gone, so its end of the pipe is closed: the pump closes the
    // server's stdin, and the server exits on EOF.
    let (exit, sent, received) = finish(wired).await;
    let (offered, answered) = versions(&sent, &received);
    Ok(json!({
        "offered": offered,
        "answered": answered,
        "peer_info": to_json(&*info),
        "tools": to_json(&tools),
        "get_status": to_json(&status),
        "sent": sent,
        "received": received,
        "server_pid": pid,
        "server_exit": exit,
    }))
}

/// What the plan's current step answers, and the forms it was shown.
#[derive(Default)]
struct Current {
    answer: String,
    seen: Vec<Value>,
}

/// The client of plan mode: declares form elicitation when the plan says so, and answers
/// each `elicitation/create` as the current step says.
struct PlanClient {
    elicitation: bool,
    current: Arc<Mutex<Current>>,
}

impl ClientHandler for PlanClient {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let mut current = self.current.lock().expect("current lock");
        // The form is the message and its schema; the report keeps the message.
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            _ => String::from("(an elicitation of a kind this client does not know)"),
        };
        current.seen.push(json!({"message": message}));
        Ok(match current.answer.as_str() {
            "accept" => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}))
            }
            "accept-no" => {
                ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": false}))
            }
            "decline" => ElicitResult::new(ElicitationAction::Decline),
            _ => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation {
            capabilities.elicitation = Some(ElicitationCapability::default());
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("rpr-gate-matrix-rmcp", "0.0.0"),
        )
    }
}

fn error_of(e: &ServiceError) -> Value {
    match e {
        ServiceError::McpError(data) => {
            json!({"code": data.code.0, "message": data.message, "data": data.data})
        }
        other => json!({"message": other.to_string()}),
    }
}

/// Runs one step of the plan; returns its report.
async fn plan_step(
    client: &rmcp::service::RunningService<RoleClient, PlanClient>,
    current: &Arc<Mutex<Current>>,
    step: &Value,
) -> Value {
    let mut done = json!({"name": step["name"], "elicitations": []});
    {
        let mut current = current.lock().expect("current lock");
        current.answer = step["answer"].as_str().unwrap_or("cancel").to_owned();
        current.seen.clear();
    }
    let tool = step["tool"].as_str().unwrap_or_default().to_owned();
    let arguments = step["arguments"].as_object().cloned().unwrap_or_default();
    let outcome = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await;
    match outcome {
        Ok(result) => done["result"] = to_json(&result),
        Err(e) => done["error"] = error_of(&e),
    }
    done["elicitations"] = json!(std::mem::take(
        &mut current.lock().expect("current lock").seen
    ));
    done
}

/// Plan mode: one session, the plan's steps in order.
async fn run_plan(plan: &Value, program: &str, rest: &[String]) -> Value {
    let (wired, (client_reads, client_writes)) = match start(program, rest) {
        Ok(started) => started,
        Err(e) => return json!({"connect_error": e, "steps": []}),
    };
    let current = Arc::new(Mutex::new(Current::default()));
    let handler = PlanClient {
        elicitation: plan["elicitation"].as_bool().unwrap_or(true),
        current: Arc::clone(&current),
    };
    let mut report = json!({"steps": []});
    match handler.serve((client_reads, client_writes)).await {
        Err(e) => report["connect_error"] = json!(format!("rmcp could not connect: {e}")),
        Ok(client) => {
            match client.list_all_tools().await {
                Ok(tools) => {
                    report["tools"] = json!(tools.iter().map(|t| &t.name).collect::<Vec<_>>());
                    let mut steps = Vec::new();
                    for step in plan["steps"].as_array().into_iter().flatten() {
                        steps.push(plan_step(&client, &current, step).await);
                    }
                    report["steps"] = json!(steps);
                }
                Err(e) => report["connect_error"] = json!(format!("list_all_tools: {e}")),
            }
            let _ = client.cancel().await;
        }
    }
    let (exit, sent, received) = finish(wired).await;
    let (_, answered) = versions(&sent, &received);
    report["protocol_version"] = answered.unwrap_or(Value::Null);
    report["server_exit"] = exit;
    report
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rmcp-client: {e}");
            ExitCode::FAILURE
        }
    }
}
