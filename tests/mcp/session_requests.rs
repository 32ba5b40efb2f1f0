//! A session that passes the server's requests to a callback (what `rpr gate` builds on):
//! the callback's answer reaches the server, a dropped responder still answers (with an
//! internal error), `ping` stays the session's own, and progress notifications reach the
//! sink only when asked for. The fault server's `notify-mid-call` sends a log
//! notification, progress, a `ping` and a `sampling/createMessage` request in the middle of
//! a call, and fails the call with the answers it got when they are not the ones expected
//! (`{}` for the ping, `-32601` for the request).

use crate::mcp_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_support::{Fixture, fast_config};
use rpr::jsonrpc::{ErrorObject, Notification, Request, codes};
use rpr::mcp::{McpClient, Reply, Responder};
use serde_json::json;

fn call(client: &McpClient) -> serde_json::Value {
    match client
        .call_tool(
            "put",
            &json!({"key": "k", "value": "v"}),
            Duration::from_secs(10),
        )
        .unwrap()
    {
        Reply::Result(r) => r,
        Reply::Error(e) => panic!("{e:?}"),
    }
}

#[test]
fn the_callback_answers_the_servers_request_and_ping_stays_the_sessions() {
    let fx = Fixture::new("session-requests");
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut config = fast_config();
    let log = Arc::clone(&seen);
    config.on_request = Some(Arc::new(move |request: Request, responder: Responder| {
        log.lock().unwrap().push(request.method.clone());
        // Answered from another thread, later, as a proxy does.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            responder.respond(Err(ErrorObject::new(codes::METHOD_NOT_FOUND, "not here")));
        });
    }));
    let client = McpClient::connect(&fx.command("notify-mid-call"), &config).unwrap();
    let result = call(&client);
    assert_ne!(
        result["isError"], true,
        "the server got the callback's answer: {result}"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        ["sampling/createMessage"],
        "ping is not passed on"
    );
    let stats = client.session().stats();
    assert_eq!(stats.pings_answered, 1);
    assert_eq!(
        stats.requests_refused, 0,
        "the callback, not the session, answered"
    );
    assert_eq!(fx.effects(), 1);
    client.shutdown();
}

#[test]
fn a_dropped_responder_answers_with_an_internal_error() {
    let fx = Fixture::new("session-dropped");
    let mut config = fast_config();
    config.on_request = Some(Arc::new(|_: Request, responder: Responder| drop(responder)));
    let client = McpClient::connect(&fx.command("notify-mid-call"), &config).unwrap();
    let result = call(&client);
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("-32603"),
        "the server saw an internal error: {text}"
    );
    assert_eq!(fx.effects(), 0);
    client.shutdown();
}

#[test]
fn progress_reaches_the_sink_only_when_passed_on() {
    for pass in [false, true] {
        let fx = Fixture::new("session-progress");
        let got: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut config = fast_config();
        config.pass_progress = pass;
        let sink = Arc::clone(&got);
        config.on_notification = Some(Arc::new(move |n: &Notification| {
            sink.lock().unwrap().push(n.method.clone());
        }));
        let client = McpClient::connect(&fx.command("notify-mid-call"), &config).unwrap();
        call(&client);
        let got = got.lock().unwrap().clone();
        assert!(got.contains(&"notifications/message".to_owned()), "{got:?}");
        assert_eq!(
            got.contains(&"notifications/progress".to_owned()),
            pass,
            "{got:?}"
        );
        assert_eq!(client.session().stats().dropped_progress, u64::from(!pass));
        client.shutdown();
    }
}
