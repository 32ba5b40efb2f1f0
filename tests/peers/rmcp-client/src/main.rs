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

use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

const USAGE: &str = "usage: rmcp-client PROGRAM [ARGS...]";

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

async fn run() -> Result<Value, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (program, rest) = args.split_first().ok_or(USAGE)?;
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
    let offered = sent
        .iter()
        .find(|m| m["method"] == "initialize")
        .map(|m| m["params"]["protocolVersion"].clone());
    let init_id = sent
        .iter()
        .find(|m| m["method"] == "initialize")
        .map(|m| m["id"].clone());
    let answered = received
        .iter()
        .find(|m| init_id.as_ref().is_some_and(|id| &m["id"] == id) && m.get("result").is_some())
        .map(|m| m["result"]["protocolVersion"].clone());
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
