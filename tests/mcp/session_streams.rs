//! A session over in-memory pipes (`Session::over_streams`), against a scripted server on
//! a thread of the test: no child process.

use std::io::{BufRead, BufReader, Write};
use std::thread::JoinHandle;
use std::time::Duration;

use rpr::mcp::{McpError, Reply, Session, SessionConfig, ShutdownStage};
use serde_json::{Value, json};

/// A scripted server on a thread: for each request line it reads (an object with an `id`
/// and a `method`), writes the lines `answer` gives, each followed by a newline. It ends
/// at the end of its input, dropping its output; it returns every message it read.
struct Server {
    thread: JoinHandle<Vec<Value>>,
}

/// Starts `answer`'s server and a session over pipes to it.
fn over_pipes(
    config: &SessionConfig,
    mut answer: impl FnMut(&Value) -> Vec<String> + Send + 'static,
) -> (Session, Server) {
    let (requests_in, requests_out) = std::io::pipe().unwrap();
    let (replies_in, mut replies_out) = std::io::pipe().unwrap();
    let thread = std::thread::spawn(move || {
        let mut received = Vec::new();
        for line in BufReader::new(requests_in).lines() {
            let Ok(line) = line else { break };
            let message: Value = serde_json::from_str(&line).unwrap();
            let answers = if message.get("id").is_some() && message.get("method").is_some() {
                answer(&message)
            } else {
                Vec::new()
            };
            received.push(message);
            for text in answers {
                if replies_out
                    .write_all(format!("{text}\n").as_bytes())
                    .is_err()
                {
                    return received;
                }
            }
        }
        received
    });
    let session = Session::over_streams(replies_in, requests_out, config).unwrap();
    (session, Server { thread })
}

fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(10);
    config
}

/// A result response to `request` (its own id, of the same JSON type).
fn result(request: &Value, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result}).to_string()
}

const TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn a_session_over_pipes_runs_the_initialize_handshake() {
    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "scripted", "version": "1"}
    });
    let answer = init.clone();
    let (session, server) = over_pipes(&config(), move |request| {
        assert_eq!(request["method"], "initialize");
        vec![result(request, &answer)]
    });
    let params = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}
    });
    let reply = session
        .request("initialize", Some(params.clone()), TIMEOUT)
        .unwrap();
    assert_eq!(reply, Reply::Result(init));
    session.notify("notifications/initialized", None).unwrap();
    session.shutdown();
    let received = server.thread.join().unwrap();
    assert_eq!(received.len(), 2, "{received:?}");
    assert_eq!(received[0]["method"], "initialize");
    assert_eq!(received[0]["params"], params);
    assert_eq!(received[0]["jsonrpc"], "2.0");
    assert_eq!(
        received[1],
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    );
}

#[test]
fn a_request_over_pipes_is_answered_with_its_own_reply() {
    let (session, server) = over_pipes(&config(), |request| {
        vec![result(
            request,
            &json!({"echo": request["params"]["arguments"]}),
        )]
    });
    for n in 1..=3 {
        let params = json!({"name": "t", "arguments": {"n": n}});
        let reply = session
            .request("tools/call", Some(params), TIMEOUT)
            .unwrap();
        assert_eq!(reply, Reply::Result(json!({"echo": {"n": n}})));
    }
    assert_eq!(session.stats().dropped_responses, 0);
    session.shutdown();
    let received = server.thread.join().unwrap();
    let ids: Vec<&Value> = received.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
}

#[test]
fn a_response_with_a_wrong_id_over_pipes_does_not_complete_a_request() {
    let (session, server) = over_pipes(&config(), |request| {
        let id = request["id"].as_i64().unwrap();
        vec![
            // Another id, the same id as a string, no id: none of them is its reply.
            json!({"jsonrpc": "2.0", "id": id + 100, "result": {"wrong": "other id"}}).to_string(),
            json!({"jsonrpc": "2.0", "id": id.to_string(), "result": {"wrong": "string id"}})
                .to_string(),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "no id"}})
                .to_string(),
            result(request, &json!({"right": true})),
        ]
    });
    let reply = session.request("tools/call", None, TIMEOUT).unwrap();
    assert_eq!(reply, Reply::Result(json!({"right": true})));
    let stats = session.stats();
    assert_eq!(stats.dropped_responses, 2, "{stats:?}");
    assert_eq!(stats.protocol_errors, 1, "{stats:?}");
    session.shutdown();
    server.thread.join().unwrap();
}

#[test]
fn the_message_limit_is_enforced_over_pipes_in_both_directions() {
    let mut config = config();
    config.max_message_bytes = 256;
    let (session, server) = over_pipes(&config, |request| {
        if request["params"]["big"] == true {
            let pad = "x".repeat(300);
            vec![result(request, &json!({"pad": pad}))]
        } else {
            vec![result(request, &json!({"small": true}))]
        }
    });
    // A reply over the limit ends its request as lost, at once (not at its timeout).
    let started = std::time::Instant::now();
    let err = session
        .request("tools/call", Some(json!({"big": true})), TIMEOUT)
        .unwrap_err();
    assert!(
        matches!(&err, McpError::ConnectionLost { reason, .. } if reason.contains("256-byte message limit")),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // The next good message is read.
    let reply = session
        .request("tools/call", Some(json!({"big": false})), TIMEOUT)
        .unwrap();
    assert_eq!(reply, Reply::Result(json!({"small": true})));
    // A request over the limit is not sent at all.
    let err = session
        .request("tools/call", Some(json!({"pad": "y".repeat(300)})), TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, McpError::NotSent { .. }), "{err:?}");
    session.shutdown();
    let received = server.thread.join().unwrap();
    assert_eq!(
        received.len(),
        2,
        "the request over the limit reached the server"
    );
}

#[test]
fn shutdown_of_a_session_over_pipes_ends_cleanly_and_claims_no_process() {
    let (session, server) = over_pipes(&config(), |request| vec![result(request, &json!({}))]);
    session.request("tools/call", None, TIMEOUT).unwrap();
    assert_eq!(session.server_pid(), None);
    assert_eq!(session.stderr_tail(), "");
    let report = session.shutdown();
    assert_eq!(
        report.stage,
        ShutdownStage::NoProcess {
            writer_closed: true,
            reader_stopped: true
        }
    );
    assert_eq!(report.status, None);
    // The server read the end of its input (so its thread ended).
    assert_eq!(server.thread.join().unwrap().len(), 1);
    // Closed by the shutdown, or just before it by the end of the server's output (the
    // server ends when the session closes its writer), whichever came first.
    let reason = session.closed_reason().unwrap();
    assert!(
        reason == "the session was shut down" || reason.contains("stream ended"),
        "{reason}"
    );
    let err = session.request("tools/call", None, TIMEOUT).unwrap_err();
    assert!(matches!(err, McpError::NotSent { .. }), "{err:?}");
    assert_eq!(
        session.shutdown(),
        report,
        "a later call returns the same report"
    );
}

#[test]
fn a_pid_of_a_session_over_pipes_is_refused() {
    let (session, server) = over_pipes(&config(), |_| Vec::new());
    let pid = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| session.pid()));
    assert!(pid.is_err(), "a session over streams named a pid: {pid:?}");
    session.shutdown();
    server.thread.join().unwrap();
}

#[test]
fn shutdown_over_pipes_says_when_the_reader_is_still_blocked() {
    // A server that reads its input to the end but never answers nor closes its output
    // while the session shuts down: the reader stays blocked in a read, and the report
    // says so.
    let (requests_in, requests_out) = std::io::pipe().unwrap();
    let (replies_in, replies_out) = std::io::pipe().unwrap();
    let (seen, lines) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        for line in BufReader::new(requests_in).lines() {
            let _ = seen.send(line.unwrap());
        }
        replies_out
    });
    let session = Session::over_streams(replies_in, requests_out, &config()).unwrap();
    let (report, pending) = std::thread::scope(|scope| {
        let pending = scope.spawn(|| session.request("tools/call", None, TIMEOUT));
        // The request reached the server: it is written, and waits for its reply.
        lines.recv_timeout(TIMEOUT).unwrap();
        let report = session.shutdown();
        (report, pending.join().unwrap())
    });
    assert_eq!(
        report.stage,
        ShutdownStage::NoProcess {
            writer_closed: true,
            reader_stopped: false
        }
    );
    assert_eq!(report.status, None);
    assert!(
        matches!(&pending, Err(McpError::ConnectionLost { reason, .. }) if reason == "the session was shut down"),
        "{pending:?}"
    );
    // The server read the end of its input; it drops its output here, which ends the
    // reader.
    drop(server.join().unwrap());
}

#[test]
fn the_end_of_a_streams_input_is_not_called_a_process_exit() {
    let (requests_in, requests_out) = std::io::pipe().unwrap();
    let (replies_in, replies_out) = std::io::pipe().unwrap();
    drop(replies_out);
    let session = Session::over_streams(replies_in, requests_out, &config()).unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while session.closed_reason().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let reason = session.closed_reason().unwrap();
    assert!(reason.contains("stream ended"), "{reason}");
    assert!(!reason.contains("exited"), "{reason}");
    drop(requests_in);
    drop(session);
}

/// A session whose server reads nothing and answers nothing, over pipes: the server's
/// ends are handed back, to drop when the test wants the writer's next write to fail.
fn deaf() -> (Session, std::io::PipeReader, std::io::PipeWriter) {
    let (requests_in, requests_out) = std::io::pipe().unwrap();
    let (replies_in, replies_out) = std::io::pipe().unwrap();
    let mut config = config();
    config.max_message_bytes = 1 << 20;
    let session = Session::over_streams(replies_in, requests_out, &config).unwrap();
    (session, requests_in, replies_out)
}

/// A request's line larger than a pipe holds (64 KiB on Linux).
fn big() -> Value {
    json!({"pad": "x".repeat(200_000)})
}

#[test]
fn a_request_the_server_does_not_read_times_out_part_written_and_one_behind_it_is_withdrawn() {
    let (session, requests_in, _replies_out) = deaf();
    let session = std::sync::Arc::new(session);
    let first = {
        let session = std::sync::Arc::clone(&session);
        std::thread::spawn(move || {
            session.request("tools/call", Some(big()), Duration::from_millis(600))
        })
    };
    // The second line is queued behind the first, which fills the pipe and stalls.
    std::thread::sleep(Duration::from_millis(200));
    let second = session
        .request("tools/call", None, Duration::from_millis(300))
        .unwrap_err();
    assert!(
        matches!(&second, McpError::NotSent { reason, .. } if reason.contains("withdrawn")),
        "{second:?}"
    );
    // Its write began (the pipe holds part of it): not "not sent", whatever the count says
    // (a blocking pipe write reports nothing until it returns).
    let first = first.join().unwrap().unwrap_err();
    assert!(
        matches!(&first, McpError::TimedOut { written, total, .. } if written < total),
        "{first:?}"
    );
    // Unblocks the writer (its write fails) so that the session can end.
    drop(requests_in);
    session.shutdown();
}

#[test]
fn a_request_whose_line_fails_part_way_ends_at_once_as_write_failed_not_at_its_timeout() {
    let (session, requests_in, _replies_out) = deaf();
    let session = std::sync::Arc::new(session);
    let started = std::time::Instant::now();
    let call = {
        let session = std::sync::Arc::clone(&session);
        std::thread::spawn(move || {
            session.request("tools/call", Some(big()), Duration::from_secs(30))
        })
    };
    // The pipe is full and the writer blocked; the server goes away.
    std::thread::sleep(Duration::from_millis(200));
    drop(requests_in);
    let err = call.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, McpError::WriteFailed { written, total, .. } if *written > 0 && written < total),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited {:?}",
        started.elapsed()
    );
    session.shutdown();
}
