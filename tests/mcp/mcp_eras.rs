//! Both eras of MCP toward the server, against the real `rpr-fault-server`: every legacy
//! version through `initialize`, 2026-07-28 through the `server/discover` probe (the
//! `_meta` envelope on every request, no handshake), the fallbacks (a server that answers
//! the probe with an error, ignores it, or exits on it), version refusals, the binding of
//! the era, and `input_required` rounds.

use crate::mcp_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_support::{Fixture, assert_gone, fast_config};
use rpr::jsonrpc::Request;
use rpr::mcp::{
    Era, LEGACY_VERSIONS, McpClient, McpError, Reply, Responder, ServerCommand, SessionConfig,
    ToolBinding, changed_fields,
};
use serde_json::{Value, json};

/// The fault server (`--fault FAULT`) logging every request it gets to `requests.jsonl`.
fn logged(fx: &Fixture, fault: &str, extra: &[&str]) -> ServerCommand {
    fx.command(fault)
        .arg("--request-log")
        .arg(fx.dir.join("requests.jsonl"))
        .args(extra)
}

/// The requests and notifications the fault server got, in order.
fn received(fx: &Fixture) -> Vec<Value> {
    std::fs::read_to_string(fx.dir.join("requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn methods(fx: &Fixture) -> Vec<String> {
    received(fx)
        .iter()
        .map(|r| r["method"].as_str().unwrap().to_owned())
        .collect()
}

fn put(client: &McpClient, key: &str, value: &str) -> Result<Reply, McpError> {
    client.call_tool(
        "put",
        &json!({"key": key, "value": value}),
        Duration::from_secs(10),
    )
}

fn result(reply: Reply) -> Value {
    match reply {
        Reply::Result(result) => result,
        Reply::Error(error) => panic!("a JSON-RPC error: {error}"),
    }
}

/// Only the versions of the `initialize` handshake: no probe.
fn legacy_only() -> SessionConfig {
    let mut config = fast_config();
    config.accepted_versions = LEGACY_VERSIONS.iter().map(|v| (*v).to_owned()).collect();
    config
}

/// Issue 26: a server on an older revision was refused ("did not start"). Each legacy
/// version connects, lists and calls, and the shapes follow the version in use.
#[test]
fn servers_of_every_legacy_version_connect_list_and_call() {
    for version in ["2025-06-18", "2025-03-26", "2024-11-05"] {
        let fx = Fixture::new("legacy");
        let command = logged(&fx, "none", &["--protocol-version", version]);
        let client = McpClient::connect(&command, &fast_config())
            .unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(client.server().protocol_version, version);
        assert_eq!(client.server().era, Era::Legacy);
        let list = client.list_tools().unwrap();
        assert_eq!(list.tools.len(), 2, "{version}");
        let put_tool = &list.get("put").unwrap().definition;
        assert_eq!(put_tool.get("title").is_some(), version == "2025-06-18");
        assert_eq!(
            put_tool.get("annotations").is_some(),
            version != "2024-11-05"
        );
        let reply = result(put(&client, "k", version).unwrap());
        assert_eq!(reply["content"][0]["text"], "stored k");
        assert_eq!(
            reply.get("structuredContent").is_some(),
            version == "2025-06-18",
            "{reply}"
        );
        assert_eq!(fx.effects(), 1);
        client.ping().unwrap();
        // The probe, then the handshake at the newest legacy version; no envelope after it.
        let got = received(&fx);
        assert_eq!(got[0]["method"], "server/discover");
        assert_eq!(got[1]["method"], "initialize");
        assert_eq!(got[2]["method"], "notifications/initialized");
        assert!(got[3..].iter().all(|r| r["meta"].is_null()), "{got:?}");
    }
}

/// A version of neither era, or a modern version answered to `initialize`, is refused,
/// and the error names what the server answered and what the client accepts.
#[test]
fn an_initialize_answer_at_a_version_the_client_does_not_speak_is_refused() {
    for answered in ["2099-01-01", "2026-07-28"] {
        let fx = Fixture::new("badversion");
        let command = fx.command("none").args(["--protocol-version", answered]);
        match McpClient::connect(&command, &fast_config()) {
            Err(e @ McpError::UnsupportedProtocolVersion { .. }) => {
                let McpError::UnsupportedProtocolVersion { offered, accepted } = &e else {
                    unreachable!()
                };
                assert_eq!(offered, answered);
                assert_eq!(accepted, &LEGACY_VERSIONS);
                assert!(e.to_string().contains(answered), "{e}");
            }
            other => panic!("{answered}: expected UnsupportedProtocolVersion, got {other:?}"),
        }
        assert_gone(fx.server_pid());
    }
}

/// A modern-only server is reached through the probe: no `initialize`, no
/// `notifications/initialized`, no `ping`; every request carries the envelope, merged with
/// the caller's own `_meta`.
#[test]
fn a_modern_server_is_probed_and_every_request_carries_the_envelope() {
    let fx = Fixture::new("modern");
    let command = logged(
        &fx,
        "none",
        &["--era", "modern", "--instructions", "be careful"],
    );
    let client = McpClient::connect(&command, &fast_config()).unwrap();
    let server = client.server();
    assert_eq!(server.era, Era::Modern);
    assert_eq!(server.protocol_version, "2026-07-28");
    assert_eq!(
        server.identity(),
        format!("rpr-fault-server@{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        server.capabilities,
        json!({"tools": {"listChanged": false}})
    );
    assert_eq!(server.instructions.as_deref(), Some("be careful"));
    let list = client.list_tools().unwrap();
    assert_eq!(list.tools.len(), 2);
    let reply = client
        .call_tool_with_meta(
            "put",
            &json!({"key": "k", "value": "v"}),
            Some(&json!({"progressToken": 7})),
            Duration::from_secs(10),
        )
        .unwrap();
    let reply = result(reply);
    assert_eq!(reply["resultType"], "complete");
    assert_eq!(
        reply["structuredContent"],
        json!({"key": "k", "value": "v"})
    );
    assert_eq!(fx.effects(), 1);
    client.ping().unwrap();
    assert_eq!(
        methods(&fx),
        [
            "server/discover",
            "tools/list",
            "tools/call",
            "server/discover"
        ]
    );
    for request in received(&fx) {
        let meta = &request["meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "rpr");
    }
    assert_eq!(received(&fx)[2]["meta"]["progressToken"], 7);
}

/// A dual-era server answers the probe, so it is used in the modern era.
#[test]
fn a_dual_era_server_is_used_modern_and_legacy_only_clients_never_probe() {
    let fx = Fixture::new("dual");
    let command = logged(&fx, "none", &["--era", "dual"]);
    let client = McpClient::connect(&command, &fast_config()).unwrap();
    assert_eq!(client.server().era, Era::Modern);
    result(put(&client, "k", "v").unwrap());
    assert_eq!(methods(&fx), ["server/discover", "tools/call"]);
    drop(client);

    let fx = Fixture::new("dual-legacy");
    let command = logged(&fx, "none", &["--era", "dual"]);
    let client = McpClient::connect(&command, &legacy_only()).unwrap();
    assert_eq!(client.server().era, Era::Legacy);
    assert_eq!(client.server().protocol_version, "2025-11-25");
    result(put(&client, "k", "v").unwrap());
    assert_eq!(
        methods(&fx),
        ["initialize", "notifications/initialized", "tools/call"]
    );
}

/// A server that ignores unknown methods costs the probe's timeout, then `initialize` on
/// the same connection; the probe is never cancelled (a legacy server takes no
/// notification before `initialize`).
#[test]
fn a_server_that_ignores_the_probe_falls_back_after_the_timeout() {
    let fx = Fixture::new("ignore");
    let cancels = fx.dir.join("cancels.log");
    let mut command = logged(&fx, "ignore-discover", &[]);
    command = command.arg("--cancel-log").arg(&cancels);
    let mut config = fast_config();
    config.discover_timeout = Duration::from_millis(300);
    let client = McpClient::connect(&command, &config).unwrap();
    assert_eq!(client.server().era, Era::Legacy);
    assert_eq!(client.server().protocol_version, "2025-11-25");
    result(put(&client, "k", "v").unwrap());
    assert_eq!(
        methods(&fx),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    assert!(!cancels.exists(), "the probe was cancelled");
}

/// A server that exits on the probe (as servers do that take nothing before
/// `initialize`) is reaped and started once more, for `initialize` alone.
#[test]
fn a_server_that_exits_on_the_probe_is_started_again_for_initialize() {
    let fx = Fixture::new("exit");
    let client = McpClient::connect(&logged(&fx, "exit-on-discover", &[]), &fast_config()).unwrap();
    assert_eq!(client.server().era, Era::Legacy);
    result(put(&client, "k", "v").unwrap());
    assert_eq!(fx.effects(), 1);
    assert_eq!(
        methods(&fx),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    let pid = client.session().pid();
    assert_eq!(fx.server_pid(), pid, "the second process is the one in use");
    drop(client);
    assert_gone(pid);
}

/// A modern server with no version in common is refused with both sides' versions, and
/// never asked `initialize` (no fallback); a legacy server is refused by a client that
/// accepts only the modern era.
#[test]
fn no_version_in_common_is_refused_without_a_fallback() {
    let fx = Fixture::new("nocommon");
    let command = logged(
        &fx,
        "none",
        &["--era", "modern", "--modern-version", "2027-01-01"],
    );
    let err = McpClient::connect(&command, &fast_config()).unwrap_err();
    let McpError::NoCommonVersion { detail, accepted } = &err else {
        panic!("expected NoCommonVersion, got {err:?}")
    };
    assert!(detail.contains("2027-01-01"), "{detail}");
    assert!(accepted.iter().any(|v| v == "2026-07-28"));
    assert_eq!(methods(&fx), ["server/discover"]);
    assert_gone(fx.server_pid());

    let fx = Fixture::new("modernonly");
    let mut config = fast_config();
    config.accepted_versions = vec!["2026-07-28".into()];
    let err = McpClient::connect(&logged(&fx, "none", &[]), &config).unwrap_err();
    assert!(
        matches!(&err, McpError::NoCommonVersion { detail, .. } if detail.contains("-32601")),
        "{err:?}"
    );
    assert_eq!(methods(&fx), ["server/discover"]);
    assert_gone(fx.server_pid());
}

/// The era is bound: the same server, tool and instructions reached in the other era is
/// another binding (its protocol version differs, and with it the digest).
#[test]
fn an_era_change_is_a_binding_change() {
    let fx = Fixture::new("binding");
    let command = fx
        .command("none")
        .args(["--era", "dual", "--instructions", "same"]);
    let binding = |config: &SessionConfig| {
        let client = McpClient::connect(&command, config).unwrap();
        let list = client.list_tools().unwrap();
        let binding = ToolBinding::new(client.server(), list.get("put").unwrap()).unwrap();
        (binding.details(), binding.to_binding().unwrap())
    };
    let (legacy, legacy_core) = binding(&legacy_only());
    let (modern, modern_core) = binding(&fast_config());
    assert_eq!(legacy["protocol_version"], "2025-11-25");
    assert_eq!(modern["protocol_version"], "2026-07-28");
    assert_eq!(changed_fields(&legacy, &modern), ["protocol_version"]);
    assert_ne!(legacy_core.digest, modern_core.digest);
}

/// The host's handler as [`SessionConfig::on_request`]: answers every request with
/// `answer` and keeps what it was asked.
fn answering(answer: Value) -> (SessionConfig, Arc<Mutex<Vec<Request>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut config = fast_config();
    config.client_capabilities = json!({"elicitation": {}});
    let seen = Arc::clone(&asked);
    config.on_request = Some(Arc::new(move |request: Request, responder: Responder| {
        seen.lock().unwrap().push(request);
        responder.respond(Ok(answer.clone()));
    }));
    (config, asked)
}

fn modern_asking(fx: &Fixture, rounds: &str) -> ServerCommand {
    logged(fx, "none", &["--era", "modern", "--input-required", rounds])
}

/// `input_required`: each round's elicitation goes to the host's handler, the call is
/// sent again with a new id, the answers and the byte-exact `requestState` (the server
/// refuses anything else), and the last round's result is the call's.
#[test]
fn input_required_rounds_reach_the_handler_and_the_call_completes() {
    let fx = Fixture::new("mrtr");
    let (config, asked) = answering(json!({"action": "accept", "content": {"ok": true}}));
    let client = McpClient::connect(&modern_asking(&fx, "2"), &config).unwrap();
    let reply = result(put(&client, "k", "v").unwrap());
    assert_eq!(reply["resultType"], "complete", "{reply}");
    assert_eq!(reply.get("isError"), None, "{reply}");
    // The rounds before the last, listed for the record (not the answers' content).
    let confirm = json!({"confirm": {"method": "elicitation/create", "action": "accept"}});
    assert_eq!(
        reply["_meta"][rpr::mcp::ROUNDS_META],
        json!([
            {"round": 1, "inputRequests": confirm},
            {"round": 2, "inputRequests": confirm},
        ]),
        "{reply}"
    );
    assert_eq!(fx.effects(), 1);
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 2);
    assert!(asked.iter().all(|r| r.method == "elicitation/create"));
    assert!(
        asked[0].params.as_ref().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("round 1 of 2")
    );
    let calls: Vec<Value> = received(&fx)
        .into_iter()
        .filter(|r| r["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 3);
    let ids: std::collections::BTreeSet<String> =
        calls.iter().map(|c| c["id"].to_string()).collect();
    assert_eq!(ids.len(), 3, "each round has a new id: {calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c["meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28")
    );
}

/// A decline is the server's to judge: here the tool fails and stores nothing.
#[test]
fn a_declined_input_request_ends_with_the_servers_answer() {
    let fx = Fixture::new("mrtr-decline");
    let (config, asked) = answering(json!({"action": "decline"}));
    let client = McpClient::connect(&modern_asking(&fx, "1"), &config).unwrap();
    let reply = result(put(&client, "k", "v").unwrap());
    assert_eq!(reply["isError"], true, "{reply}");
    assert_eq!(fx.effects(), 0);
    assert_eq!(asked.lock().unwrap().len(), 1);
}

/// Without a handler the host cannot give the input: the call fails as an unknown
/// effect (the server may have acted before it asked), never as "not sent".
#[test]
fn input_required_without_a_handler_is_an_unknown_effect() {
    let fx = Fixture::new("mrtr-nohandler");
    let client = McpClient::connect(&modern_asking(&fx, "1"), &fast_config()).unwrap();
    let err = put(&client, "k", "v").unwrap_err();
    assert!(matches!(err, McpError::InputRequired { .. }), "{err:?}");
    assert!(!err.nothing_written());
    let text = err.to_string();
    assert!(
        text.contains("cannot give") && text.contains("unknown"),
        "{text}"
    );
    assert_eq!(
        methods(&fx).iter().filter(|m| *m == "tools/call").count(),
        1,
        "not sent again"
    );
}

/// A caller's `InputAnswerer` answers the rounds in place of the session's handler (a
/// proxy whose client answers by retrying): it gets each round's input requests; when it
/// cannot answer, the call is an unknown effect whose reason names the rounds before.
#[test]
fn an_input_answerer_answers_the_rounds_in_place_of_the_handler() {
    let fx = Fixture::new("mrtr-answerer");
    let (config, asked) = answering(json!({"action": "decline"}));
    let client = McpClient::connect(&modern_asking(&fx, "2"), &config).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rounds = Arc::clone(&seen);
    let answerer = rpr::mcp::InputAnswerer::new(move |round, requests| {
        rounds.lock().unwrap().push((round, requests.clone()));
        if round == 1 {
            let mut answers = serde_json::Map::new();
            answers.insert(
                "confirm".into(),
                json!({"action": "accept", "content": {"ok": true}}),
            );
            Ok(answers)
        } else {
            Err("no person to ask".into())
        }
    });
    let err = client
        .call_tool_answered(
            "put",
            &json!({"key": "k", "value": "v"}),
            None,
            Duration::from_secs(10),
            None,
            None,
            Some(&answerer),
        )
        .unwrap_err();
    assert!(matches!(err, McpError::InputRequired { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("no person to ask") && text.contains("the rounds answered before it"),
        "{text}"
    );
    assert!(
        asked.lock().unwrap().is_empty(),
        "the handler was not asked"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, 1);
    assert_eq!(seen[1].1["confirm"]["method"], "elicitation/create");
    assert_eq!(fx.effects(), 0);
}

/// A server that keeps asking is answered at most 10 times; the call then ends unknown.
#[test]
fn input_required_stops_after_ten_rounds() {
    let fx = Fixture::new("mrtr-rounds");
    let (config, asked) = answering(json!({"action": "accept", "content": {"ok": true}}));
    let client = McpClient::connect(&modern_asking(&fx, "11"), &config).unwrap();
    let err = put(&client, "k", "v").unwrap_err();
    assert!(
        matches!(&err, McpError::InputRequired { reason, .. } if reason.contains("10 rounds")),
        "{err:?}"
    );
    assert_eq!(asked.lock().unwrap().len(), 10);
    assert_eq!(
        methods(&fx).iter().filter(|m| *m == "tools/call").count(),
        10
    );
    assert_eq!(fx.effects(), 0);
}

/// Under 2026-07-28 a server sends no requests; one that does is refused, not handed to
/// the host.
#[test]
fn a_modern_server_request_is_refused_not_handed_on() {
    let fx = Fixture::new("modern-request");
    let (config, asked) = answering(json!({}));
    let client = McpClient::connect(
        &fx.command("notify-mid-call").args(["--era", "modern"]),
        &config,
    )
    .unwrap();
    let reply = result(put(&client, "k", "v").unwrap());
    // The fault server expects its ping answered `{}`: refused, it says so and stores nothing.
    assert_eq!(reply["isError"], true, "{reply}");
    assert!(reply.to_string().contains("ping answer"), "{reply}");
    assert!(asked.lock().unwrap().is_empty());
    assert_eq!(client.session().stats().requests_refused, 2, "{reply}");
    assert_eq!(client.session().stats().pings_answered, 0);
}

/// Through the executor, all rounds are one attempt: its delivery is the last round's
/// result, and a round the host cannot answer is `PossiblyWritten` (the server may have
/// acted before it asked), never `NothingWritten`.
#[test]
fn the_executor_delivers_the_last_round_or_an_unknown_effect() {
    use rpr::executor::{Delivery, Executor, Request};
    use rpr::mcp::McpExecutor;
    let execute = |config: &SessionConfig, fx: &Fixture| {
        let client = Arc::new(McpClient::connect(&modern_asking(fx, "2"), config).unwrap());
        let mut executor = McpExecutor::new(Arc::clone(&client), "put");
        let request = Request::new("put", json!({"key": "k", "value": "v"}));
        let binding = executor.bind(&request).unwrap();
        executor.prepare(&request, &binding).unwrap();
        executor.execute(&request)
    };
    let fx = Fixture::new("mrtr-exec");
    let (config, _) = answering(json!({"action": "accept", "content": {"ok": true}}));
    let delivery = execute(&config, &fx);
    let Delivery::Succeeded { reply } = &delivery else {
        panic!("{delivery:?}")
    };
    assert_eq!(
        reply["structuredContent"],
        json!({"key": "k", "value": "v"})
    );
    assert_eq!(fx.effects(), 1);

    let fx = Fixture::new("mrtr-exec-nohandler");
    let delivery = execute(&fast_config(), &fx);
    let Delivery::PossiblyWritten { reason } = &delivery else {
        panic!("{delivery:?}")
    };
    assert!(reason.contains("cannot give"), "{reason}");
    assert_gone(fx.server_pid());
}

/// A modern server slower to answer than the probe's timeout takes the probe late, then
/// answers `initialize` with `-32022` and its versions: that is modern evidence, so the
/// client probes once more and uses it in the modern era.
#[test]
fn a_modern_server_slower_than_the_probe_is_probed_again_after_its_initialize_refusal() {
    let fx = Fixture::new("slowprobe");
    let command = logged(
        &fx,
        "slow-discover",
        &["--era", "modern", "--sleep-ms", "1500"],
    );
    let mut config = fast_config();
    config.discover_timeout = Duration::from_millis(200);
    let client = McpClient::connect(&command, &config).unwrap();
    assert_eq!(client.server().era, Era::Modern);
    result(put(&client, "k", "v").unwrap());
    assert_eq!(
        methods(&fx),
        [
            "server/discover",
            "initialize",
            "server/discover",
            "tools/call"
        ]
    );
}
