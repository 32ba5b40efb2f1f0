//! Transport, session and lifecycle tests against the real `rpr-fault-server`.

use crate::mcp_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_support::{Fixture, Launch, alive, assert_gone, eventually, fast_config};
use rpr::jsonrpc::Notification;
use rpr::mcp::{McpClient, McpError, Reply, ServerCommand, Session, ShutdownStage, ToolBinding};
use serde_json::json;

fn put(client: &McpClient, timeout: Duration) -> Result<Reply, McpError> {
    client.call_tool("put", &json!({"key": "k", "value": "v"}), timeout)
}

/// A timeout that leaves the session's writer thread ample time to write the request, on a
/// loaded machine too: the tests that use it are about what happens after the write.
const WRITTEN_WELL_BEFORE: Duration = Duration::from_secs(2);

/// Waits (up to 10 s) for a count that the session's reader thread updates in its own time
/// to reach `expected`, then asserts it is exactly that.
fn settles_at(what: &str, expected: u64, count: impl Fn() -> u64) {
    eventually(Duration::from_secs(10), || count() >= expected);
    assert_eq!(count(), expected, "{what}");
}

#[test]
fn connect_list_call_and_clean_shutdown() {
    let fx = Fixture::new("basic");
    let client = McpClient::connect(
        &fx.command("none").arg("--page-size").arg("1"),
        &fast_config(),
    )
    .unwrap();
    let server = client.server();
    assert_eq!(server.protocol_version, "2025-11-25");
    assert_eq!(
        server.identity(),
        format!("rpr-fault-server@{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        server.capabilities,
        json!({"tools": {"listChanged": false}})
    );
    let list = client.list_tools().unwrap();
    assert_eq!(list.pages, 2, "one tool per page");
    assert_eq!(
        list.tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["put", "get"]
    );
    assert!(list.invalid.is_empty());
    client.ping().unwrap();
    let Reply::Result(result) = put(&client, Duration::from_secs(5)).unwrap() else {
        panic!("expected a result")
    };
    assert_eq!(
        result["structuredContent"],
        json!({"key": "k", "value": "v"})
    );
    assert_eq!(fx.effects(), 1);
    let Reply::Error(error) = client
        .session()
        .request("no/such", None, Duration::from_secs(5))
        .unwrap()
    else {
        panic!("expected an error reply");
    };
    assert_eq!(error.code, -32601);
    // stderr is drained on its own thread: give it a moment to catch up.
    assert!(
        eventually(Duration::from_secs(10), || client
            .session()
            .stderr_tail()
            .contains("started, fault None")),
        "stderr is captured"
    );
    let pid = client.session().pid();
    let report = client.shutdown();
    assert_eq!(report.stage, ShutdownStage::Exited);
    assert!(report.status.is_some_and(|s| s.success()));
    assert_eq!(client.shutdown(), report, "shutdown is idempotent");
    assert!(
        matches!(client.ping(), Err(McpError::NotSent { .. })),
        "a closed session sends nothing"
    );
    assert_gone(pid);
}

#[test]
fn dropping_the_client_leaves_no_process() {
    let fx = Fixture::new("drop");
    let client = McpClient::connect(&fx.command("none"), &fast_config()).unwrap();
    let pid = client.session().pid();
    drop(client);
    assert_gone(pid);
}

/// Issue 26: the parent-death signal fires when the *thread* that forked exits. A
/// server started from a short-lived thread (the gate restarts a crashed server from a
/// request's thread) must not die with that thread: it lives as long as the host.
#[test]
fn a_server_started_from_a_thread_that_ends_lives_on() {
    let fx = Fixture::new("thread_ends");
    let command = fx.command("none");
    let client = std::thread::spawn(move || McpClient::connect(&command, &fast_config()))
        .join()
        .expect("the connecting thread panicked")
        .unwrap();
    // The kernel sends the death signal as the thread exits; give it time to land.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        alive(client.session().pid()),
        "the server died with the thread that started it"
    );
    client.ping().unwrap();
    let Reply::Result(_) = put(&client, Duration::from_secs(5)).unwrap() else {
        panic!("expected a result")
    };
}

#[test]
fn server_that_ignores_sigterm_and_eof_is_killed() {
    let fx = Fixture::new("sigterm");
    let mut config = fast_config();
    config.transport.close_wait = Duration::from_millis(300);
    config.transport.term_wait = Duration::from_millis(300);
    let client = McpClient::connect(&fx.command("ignore-sigterm"), &config).unwrap();
    let pid = client.session().pid();
    let report = client.shutdown();
    assert_eq!(report.stage, ShutdownStage::Killed);
    assert!(report.elapsed >= Duration::from_millis(600));
    assert_gone(pid);
}

/// The shutdown ladder reaches every process the server command started, however it
/// regrouped: a server that ignores EOF and `SIGTERM`, started in a session of its own,
/// is killed and gone when `shutdown` returns.
fn shutdown_kills_the_whole_tree(launch: Launch) {
    let fx = Fixture::new(&format!("tree-{}", launch.name()));
    let mut config = fast_config();
    config.transport.close_wait = Duration::from_millis(300);
    config.transport.term_wait = Duration::from_millis(300);
    let client = McpClient::connect(&fx.launched(launch, "ignore-sigterm", &[]), &config).unwrap();
    let server = fx.wait_for_server_pid();
    let leader = client.session().pid();
    assert!(alive(server), "the server is not running");
    let report = client.shutdown();
    assert!(
        !alive(server),
        "server {server} ({}) outlived the shutdown ladder: {report:?}",
        launch.name()
    );
    // The leader is reaped by the ladder; a member re-parented away may wait a moment
    // for its new parent to reap it.
    assert!(
        eventually(Duration::from_secs(2), || !alive(leader)),
        "the server's leader {leader} outlived the shutdown ladder"
    );
}

#[test]
fn shutdown_kills_a_server_started_through_setsid() {
    shutdown_kills_the_whole_tree(Launch::Setsid);
}

#[test]
fn shutdown_kills_a_daemonized_server() {
    shutdown_kills_the_whole_tree(Launch::DoubleFork);
}

#[test]
fn shutdown_kills_a_server_started_through_sh_c() {
    shutdown_kills_the_whole_tree(Launch::Shell);
}

#[test]
fn notifications_before_the_initialize_reply_are_kept() {
    let fx = Fixture::new("preinit");
    let client = McpClient::connect(&fx.command("notify-before-init"), &fast_config()).unwrap();
    let methods: Vec<String> = client
        .session()
        .take_notifications()
        .into_iter()
        .map(|n| n.method)
        .collect();
    assert_eq!(
        methods,
        ["notifications/tools/list_changed", "notifications/message"]
    );
    let pid = client.session().pid();
    drop(client);
    assert_gone(pid);
}

#[test]
fn notification_callback_receives_notifications() {
    let fx = Fixture::new("callback");
    let seen: Arc<Mutex<Vec<Notification>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let mut config = fast_config();
    config.on_notification = Some(Arc::new(move |n: &Notification| {
        sink.lock().unwrap().push(n.clone());
    }));
    let client = McpClient::connect(&fx.command("notify-before-init"), &config).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(client.session().take_notifications().is_empty());
}

#[test]
fn unaccepted_protocol_version_shuts_the_server_down() {
    let fx = Fixture::new("version");
    let command = fx
        .command("none")
        .arg("--protocol-version")
        .arg("2025-06-18");
    let mut config = fast_config();
    config.accepted_versions = vec!["2025-11-25".into()];
    match McpClient::connect(&command, &config) {
        Err(McpError::UnsupportedProtocolVersion { offered, accepted }) => {
            assert_eq!(offered, "2025-06-18");
            assert_eq!(accepted, ["2025-11-25"]);
        }
        other => panic!("expected UnsupportedProtocolVersion, got {other:?}"),
    }
    assert_gone(fx.server_pid());
    // Accepted by default (tests/mcp/mcp_eras.rs has every legacy version).
    let client = McpClient::connect(&command, &fast_config()).unwrap();
    assert_eq!(client.server().protocol_version, "2025-06-18");
}

#[test]
fn empty_server_version_is_bound_as_name_at() {
    let fx = Fixture::new("emptyversion");
    let client = McpClient::connect(
        &fx.command("none").arg("--server-version").arg(""),
        &fast_config(),
    )
    .unwrap();
    assert_eq!(client.server().identity(), "rpr-fault-server@");
    let list = client.list_tools().unwrap();
    let binding = ToolBinding::new(client.server(), list.get("put").unwrap()).unwrap();
    assert_eq!(binding.target(), "rpr-fault-server@/put");
    assert_eq!(binding.details()["server_version_empty"], json!(true));
}

#[test]
fn pagination_guards() {
    let fx = Fixture::new("cursor");
    let client = McpClient::connect(&fx.command("loop-cursor"), &fast_config()).unwrap();
    assert!(
        matches!(client.list_tools(), Err(McpError::CursorRepeated { cursor }) if cursor == "again")
    );
    let mut config = fast_config();
    config.max_tool_pages = 1;
    let client =
        McpClient::connect(&fx.command("none").arg("--page-size").arg("1"), &config).unwrap();
    assert!(matches!(
        client.list_tools(),
        Err(McpError::TooManyPages { limit: 1 })
    ));
}

#[test]
fn spawn_failure_is_typed() {
    let err = McpClient::connect(
        &ServerCommand::new("/nonexistent/rpr-no-such-server"),
        &fast_config(),
    )
    .unwrap_err();
    assert!(matches!(err, McpError::Spawn { .. }), "{err}");
}

#[test]
fn server_requests_and_notifications_mid_call() {
    let fx = Fixture::new("midcall");
    let client = McpClient::connect(&fx.command("notify-mid-call"), &fast_config()).unwrap();
    let Reply::Result(result) = put(&client, Duration::from_secs(5)).unwrap() else {
        panic!()
    };
    assert_eq!(
        result.get("isError"),
        None,
        "the server found our answers right: {result}"
    );
    assert_eq!(fx.effects(), 1);
    let counts = || {
        let stats = client.session().stats();
        (
            stats.pings_answered,
            stats.requests_refused,
            stats.dropped_progress,
        )
    };
    eventually(Duration::from_secs(10), || counts() == (1, 1, 1));
    assert_eq!(counts(), (1, 1, 1));
    let methods: Vec<String> = client
        .session()
        .take_notifications()
        .into_iter()
        .map(|n| n.method)
        .collect();
    assert_eq!(methods, ["notifications/message"]);
}

#[test]
fn timeout_sends_cancelled_and_drops_the_late_reply() {
    let fx = Fixture::new("slow");
    let client = McpClient::connect(
        &fx.command("slow").arg("--sleep-ms").arg("4000"),
        &fast_config(),
    )
    .unwrap();
    let err = put(&client, WRITTEN_WELL_BEFORE).unwrap_err();
    assert!(
        matches!(&err, McpError::TimedOut { written, total, .. } if written == total),
        "{err}"
    );
    assert!(!err.nothing_written());
    // Ids: 1 the `server/discover` probe, 2 `initialize`, 3 the call.
    assert!(eventually(Duration::from_secs(10), || client
        .session()
        .stderr_tail()
        .contains("cancelled requestId=3")));
    settles_at("late reply dropped", 1, || {
        client.session().stats().dropped_responses
    });
    assert_eq!(fx.effects(), 1, "the timed-out call did act");
    client.ping().unwrap();
}

#[test]
fn never_reply_times_out() {
    let fx = Fixture::new("never");
    let client = McpClient::connect(&fx.command("never-reply"), &fast_config()).unwrap();
    assert!(matches!(
        put(&client, WRITTEN_WELL_BEFORE),
        Err(McpError::TimedOut { .. })
    ));
    client.ping().unwrap();
}

#[test]
fn garbage_reply_fails_the_request_without_waiting() {
    let fx = Fixture::new("garbage");
    let client = McpClient::connect(&fx.command("garbage-reply"), &fast_config()).unwrap();
    let err = put(&client, Duration::from_secs(30)).unwrap_err();
    assert!(
        matches!(&err, McpError::ConnectionLost { reason, .. } if reason.contains("malformed")),
        "{err}"
    );
    settles_at(
        &format!("{:?}", client.session().recent_protocol_errors()),
        3,
        || client.session().stats().protocol_errors,
    );
    client.ping().unwrap();
}

#[test]
fn wrong_id_type_does_not_match() {
    let fx = Fixture::new("wrongid");
    let client = McpClient::connect(&fx.command("wrong-id"), &fast_config()).unwrap();
    assert!(matches!(
        put(&client, WRITTEN_WELL_BEFORE),
        Err(McpError::TimedOut { .. })
    ));
    settles_at("the reply with the wrong id type dropped", 1, || {
        client.session().stats().dropped_responses
    });
}

#[test]
fn duplicate_reply_is_dropped() {
    let fx = Fixture::new("twice");
    let client = McpClient::connect(&fx.command("reply-twice"), &fast_config()).unwrap();
    assert!(matches!(
        put(&client, Duration::from_secs(5)),
        Ok(Reply::Result(_))
    ));
    client.ping().unwrap();
    settles_at("the second reply dropped", 1, || {
        client.session().stats().dropped_responses
    });
}

#[test]
fn oversized_reply_is_skipped_and_the_session_survives() {
    let fx = Fixture::new("huge");
    let mut config = fast_config();
    config.max_message_bytes = 1024 * 1024;
    let command = fx
        .command("huge-line")
        .arg("--huge-bytes")
        .arg((2 * 1024 * 1024).to_string());
    let client = McpClient::connect(&command, &config).unwrap();
    // The skipped reply's id is read from its first bytes, so its request is answered as
    // lost at once, not left to time out (the timeout here is far longer than the call).
    match put(&client, Duration::from_mins(2)) {
        Err(McpError::ConnectionLost { reason, .. }) => {
            assert!(
                reason.contains("exceeded the 1048576-byte message limit"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    settles_at("the oversized line counted", 1, || {
        client.session().stats().protocol_errors
    });
    let Reply::Result(read) = client
        .call_tool("get", &json!({"key": "k"}), Duration::from_secs(5))
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(read["structuredContent"]["value"], "v");
    // Under the default 16 MiB cap the same 2 MiB reply is read.
    let client = McpClient::connect(&command, &fast_config()).unwrap();
    assert!(matches!(
        put(&client, Duration::from_secs(10)),
        Ok(Reply::Result(_))
    ));
}

#[test]
fn server_gone_before_the_request_means_not_sent() {
    let fx = Fixture::new("gone");
    let client = McpClient::connect(&fx.command("crash-before-read"), &fast_config()).unwrap();
    client.list_tools().unwrap();
    let err = put(&client, Duration::from_secs(5)).unwrap_err();
    assert!(err.nothing_written(), "{err}");
    assert_eq!(fx.effects(), 0);
}

#[test]
fn crash_while_waiting_is_connection_lost() {
    let fx = Fixture::new("crash");
    let client = McpClient::connect(&fx.command("crash-after-effect"), &fast_config()).unwrap();
    let err = put(&client, Duration::from_secs(30)).unwrap_err();
    assert!(matches!(err, McpError::ConnectionLost { .. }), "{err}");
    assert!(client.session().closed_reason().is_some());
    let pid = client.session().pid();
    drop(client);
    assert_gone(pid);
}

#[test]
fn raw_session_can_talk_before_initialize() {
    let fx = Fixture::new("raw");
    let session = Session::start(&fx.command("none"), &fast_config()).unwrap();
    assert_eq!(
        session
            .request("ping", None, Duration::from_secs(5))
            .unwrap(),
        Reply::Result(json!({}))
    );
    let pid = session.pid();
    drop(session);
    assert_gone(pid);
}

/// Issue 29: a server that exits before the handshake is reported with the end of its
/// stderr (the library keeps it), as a handshake failure with no tool called, and every
/// handshake error still says whether anything was written.
#[test]
fn a_server_that_exits_before_the_handshake_is_reported_with_its_stderr() {
    let command = ServerCommand::new("sh").args([
        "-c",
        "echo 'first line' >&2; echo 'fatal: API_TOKEN is not set' >&2; exit 3",
    ]);
    let err = McpClient::connect(&command, &fast_config()).unwrap_err();
    let McpError::NotStarted {
        method,
        stderr,
        cause,
        ..
    } = &err
    else {
        panic!("expected NotStarted, got {err:?}")
    };
    assert!(
        method == "server/discover" || method == "initialize",
        "{method}"
    );
    assert!(stderr.contains("fatal: API_TOKEN is not set"), "{stderr}");
    assert_eq!(err.nothing_written(), cause.nothing_written());
    let text = err.to_string();
    assert!(text.contains("no tool was called"), "{text}");
    assert!(text.contains("    fatal: API_TOKEN is not set"), "{text}");
    assert!(
        !text.contains("effect"),
        "a handshake has no effect to speak of: {text}"
    );

    // Silent: said so, not an empty quote.
    let err = McpClient::connect(
        &ServerCommand::new("sh").args(["-c", "exit 0"]),
        &fast_config(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("it wrote nothing to its stderr"),
        "{err}"
    );
}
