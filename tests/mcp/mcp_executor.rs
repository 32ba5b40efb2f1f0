//! The MCP executor and readback against the real `rpr-fault-server`: every fault
//! maps to the right `Delivery`, the effects file shows what really happened, and no
//! server process outlives its client.

use crate::mcp_support;

use std::sync::Arc;
use std::time::Duration;

use mcp_support::{Fixture, assert_gone, fast_config};
use rpr::ActionClass;
use rpr::executor::file::FileExecutor;
use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, RejectionClass, Request};
use rpr::mcp::{
    ArgumentValidator, Dialect, ExecutorConfig, McpClient, McpError, McpExecutor, McpReadback,
    ReadbackVerdict, SendGuard, ServerCommand, SessionConfig, Tool, ToolBinding,
};
use serde_json::{Value, json};

fn put_request() -> Request {
    Request::new("put", json!({"key": "k", "value": "v"}))
}

/// Connects, then bind → prepare → execute one `put`; returns the delivery and the
/// number of effects, after checking that the server process is gone.
fn dispatch(
    fx: &Fixture,
    command: ServerCommand,
    config: &SessionConfig,
    exec: ExecutorConfig,
) -> Delivery {
    let client = Arc::new(McpClient::connect(&command, config).unwrap());
    let pid = client.session().pid();
    let mut executor = McpExecutor::new(Arc::clone(&client), "put").with_config(exec);
    let request = put_request();
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    let delivery = executor.execute(&request);
    if matches!(delivery, Delivery::PossiblyWritten { .. }) {
        // Killed and reaped before the delivery was reported, with the client still held.
        assert_gone(pid);
        assert_eq!(executor.carrier(), None, "{delivery:?}");
    }
    drop(executor);
    drop(client);
    assert_gone(pid);
    let _ = fx;
    delivery
}

fn run(fault: &str, args: &[&str]) -> (Delivery, usize) {
    let fx = Fixture::new(fault);
    // Short timeouts only where no reply will ever come; a reply may take long on a busy machine.
    let exec = match fault {
        "wrong-id" | "never-reply" => {
            ExecutorConfig::default().with_call_timeout(Duration::from_millis(800))
        }
        _ => ExecutorConfig::default(),
    };
    let delivery = dispatch(&fx, fx.command(fault).args(args), &fast_config(), exec);
    (delivery, fx.effects())
}

#[test]
fn success_is_succeeded_with_the_reply() {
    let (delivery, effects) = run("none", &[]);
    let Delivery::Succeeded { reply } = delivery else {
        panic!("{delivery:?}")
    };
    assert_eq!(
        reply["structuredContent"],
        json!({"key": "k", "value": "v"})
    );
    assert_eq!(effects, 1);
}

#[test]
fn server_gone_before_the_call_is_nothing_written() {
    // bind, prepare and execute's re-check each list the tools; the server closes its
    // stdin before answering the third listing and exits, so `tools/call` meets a
    // closed pipe.
    let (delivery, effects) = run("crash-before-read", &["--lists-before", "3"]);
    let Delivery::NothingWritten { reason } = delivery else {
        panic!("{delivery:?}")
    };
    assert!(reason.contains("`tools/call` was not sent"), "{reason}");
    assert_eq!(effects, 0);
}

#[test]
fn crash_after_read_is_possibly_written_without_effect() {
    let (delivery, effects) = run("crash-after-read", &[]);
    assert!(
        matches!(delivery, Delivery::PossiblyWritten { .. }),
        "{delivery:?}"
    );
    assert_eq!(effects, 0);
}

#[test]
fn crash_after_effect_is_possibly_written_with_effect() {
    let (delivery, effects) = run("crash-after-effect", &[]);
    assert!(
        matches!(delivery, Delivery::PossiblyWritten { .. }),
        "{delivery:?}"
    );
    assert_eq!(effects, 1);
}

#[test]
fn garbage_reply_is_possibly_written() {
    let (delivery, effects) = run("garbage-reply", &[]);
    let Delivery::PossiblyWritten { reason } = delivery else {
        panic!("{delivery:?}")
    };
    assert!(reason.contains("malformed"), "{reason}");
    assert_eq!(effects, 1);
}

#[test]
fn wrong_id_is_possibly_written() {
    let (delivery, effects) = run("wrong-id", &[]);
    assert!(
        matches!(delivery, Delivery::PossiblyWritten { .. }),
        "{delivery:?}"
    );
    assert_eq!(effects, 1);
}

#[test]
fn reply_twice_is_succeeded_once() {
    let (delivery, effects) = run("reply-twice", &[]);
    assert!(
        matches!(delivery, Delivery::Succeeded { .. }),
        "{delivery:?}"
    );
    assert_eq!(effects, 1);
}

#[test]
fn never_reply_is_possibly_written() {
    let (delivery, effects) = run("never-reply", &[]);
    assert!(
        matches!(delivery, Delivery::PossiblyWritten { .. }),
        "{delivery:?}"
    );
    assert_eq!(effects, 1);
}

#[test]
fn interleaved_server_traffic_still_succeeds() {
    let (delivery, effects) = run("notify-mid-call", &[]);
    let Delivery::Succeeded { reply } = delivery else {
        panic!("{delivery:?}")
    };
    assert_eq!(reply.get("isError"), None);
    assert_eq!(effects, 1);
}

#[test]
fn oversized_reply_is_possibly_written() {
    let fx = Fixture::new("huge");
    let mut config = fast_config();
    config.max_message_bytes = 1024 * 1024;
    let command = fx
        .command("huge-line")
        .arg("--huge-bytes")
        .arg((2 * 1024 * 1024).to_string());
    let exec = ExecutorConfig::default().with_call_timeout(Duration::from_millis(1500));
    let delivery = dispatch(&fx, command, &config, exec);
    assert!(
        matches!(delivery, Delivery::PossiblyWritten { .. }),
        "{delivery:?}"
    );
    assert_eq!(fx.effects(), 1);
}

#[test]
fn is_error_is_tool_failed_with_the_result() {
    let (delivery, effects) = run("is-error", &[]);
    let Delivery::ToolFailed { reply } = delivery else {
        panic!("{delivery:?}")
    };
    assert_eq!(reply["isError"], true);
    assert_eq!(effects, 0);
}

#[test]
fn rpc_error_is_rejected_unknown_by_default() {
    let (delivery, effects) = run("rpc-error", &[]);
    let Delivery::Rejected { error, class } = delivery else {
        panic!("{delivery:?}")
    };
    assert_eq!(class, RejectionClass::Unknown);
    assert_eq!(error["code"], -32603);
    assert_eq!(effects, 0);
}

#[test]
fn rpc_error_code_declared_not_applied() {
    let fx = Fixture::new("rpc-notapplied");
    let command = fx
        .command("rpc-error")
        .arg("--rpc-error-code")
        .arg("-32602");
    let exec = ExecutorConfig::default().with_not_applied_code(-32602);
    let delivery = dispatch(&fx, command, &fast_config(), exec);
    assert!(
        matches!(
            delivery,
            Delivery::Rejected {
                class: RejectionClass::NotApplied,
                ..
            }
        ),
        "{delivery:?}"
    );
}

#[test]
fn timeout_then_late_effect_is_possibly_written() {
    let fx = Fixture::new("slow");
    let command = fx.command("slow").arg("--sleep-ms").arg("800");
    let exec = ExecutorConfig::default().with_call_timeout(Duration::from_millis(200));
    let delivery = dispatch(&fx, command, &fast_config(), exec);
    assert!(
        matches!(delivery, Delivery::PossiblyWritten { .. }),
        "{delivery:?}"
    );
    assert_eq!(
        fx.wait_for_effects(1, Duration::from_secs(3)),
        1,
        "the effect happened after the timeout"
    );
}

/// Seed 002's rule: a call that may have reached the server is not concluded while the
/// server can still act on it. A server that times out and would write 3 s later is
/// killed and reaped before `execute` returns, so its write never happens.
#[test]
fn possibly_written_kills_and_reaps_the_server_before_returning() {
    let fx = Fixture::new("reaped");
    let command = fx.command("slow").arg("--sleep-ms").arg("3000");
    let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
    let pid = client.session().pid();
    let config = ExecutorConfig::default().with_call_timeout(Duration::from_millis(200));
    let mut executor = McpExecutor::new(Arc::clone(&client), "put").with_config(config);
    let request = put_request();
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    let started = std::time::Instant::now();
    let Delivery::PossiblyWritten { reason } = executor.execute(&request) else {
        panic!("a timeout is possibly written")
    };
    assert!(reason.contains("shut down and reaped"), "{reason}");
    assert_gone(pid);
    assert_eq!(client.server_process(), None);
    std::thread::sleep(Duration::from_millis(3500).saturating_sub(started.elapsed()));
    assert_eq!(
        fx.effects(),
        0,
        "the server wrote after the call was given up"
    );
}

#[test]
fn schema_change_after_bind_refuses_prepare() {
    let fx = Fixture::new("rugpull");
    let client =
        Arc::new(McpClient::connect(&fx.command("change-schema"), &fast_config()).unwrap());
    let mut executor = McpExecutor::new(Arc::clone(&client), "put");
    let request = put_request();
    let binding = executor.bind(&request).unwrap();
    let refusal = executor.prepare(&request, &binding).unwrap_err();
    assert_eq!(refusal.code, "binding_changed");
    assert!(
        refusal.message.contains("input_schema_digest") && refusal.message.contains("tool_digest"),
        "{refusal}"
    );
    assert!(matches!(
        executor.execute(&request),
        Delivery::NothingWritten { .. }
    ));
    assert_eq!(fx.effects(), 0);
}

#[test]
fn schema_change_between_prepare_and_execute_sends_nothing() {
    let fx = Fixture::new("rugpull-late");
    let command = fx.command("change-schema").arg("--lists-before").arg("2");
    let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
    let mut executor = McpExecutor::new(Arc::clone(&client), "put");
    let request = put_request();
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    let delivery = executor.execute(&request);
    let Delivery::NothingWritten { reason } = delivery else {
        panic!("{delivery:?}")
    };
    assert!(reason.contains("binding_changed"), "{reason}");
    assert_eq!(fx.effects(), 0);
}

#[test]
fn identity_change_between_processes_refuses() {
    let fx = Fixture::new("identity");
    let first =
        Arc::new(McpClient::connect(&fx.command("change-identity"), &fast_config()).unwrap());
    let request = put_request();
    let binding = McpExecutor::new(Arc::clone(&first), "put")
        .bind(&request)
        .unwrap();
    drop(first);
    let second =
        Arc::new(McpClient::connect(&fx.command("change-identity"), &fast_config()).unwrap());
    let refusal = McpExecutor::new(second, "put")
        .prepare(&request, &binding)
        .unwrap_err();
    assert_eq!(refusal.code, "binding_changed");
    assert!(refusal.message.contains("server_version"), "{refusal}");
    assert_eq!(fx.effects(), 0);
}

#[test]
fn same_server_in_a_new_process_keeps_the_binding() {
    let fx = Fixture::new("rebind");
    let request = put_request();
    let first = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let binding = McpExecutor::new(first, "put").bind(&request).unwrap();
    let second = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let mut executor = McpExecutor::new(second, "put");
    executor.prepare(&request, &binding).unwrap();
    assert!(matches!(
        executor.execute(&request),
        Delivery::Succeeded { .. }
    ));
}

#[test]
fn binding_details_and_digest() {
    let fx = Fixture::new("details");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let mut executor = McpExecutor::new(client, "put");
    let a = executor.bind(&put_request()).unwrap();
    let b = executor.bind(&put_request()).unwrap();
    assert_eq!(a, b, "`_meta` changes with every listing but is not bound");
    assert_eq!(
        a.target,
        format!("rpr-fault-server@{}/put", env!("CARGO_PKG_VERSION"))
    );
    for key in [
        "protocol_version",
        "server_name",
        "server_version",
        "capabilities_digest",
        "tool_name",
        "tool_digest",
        "input_schema_digest",
    ] {
        assert!(
            a.details.get(key).is_some_and(|v| !v.is_null()),
            "missing {key}"
        );
    }
    assert_eq!(a.details["tool_name"], "put");
    assert_eq!(a.digest, rpr::canonical::sha256_hex(&a.details).unwrap());
}

/// Issue 8, hole 8: an executor states the class of what it binds, and the class is
/// bound (part of the details, so of the digest).
#[test]
fn the_binding_states_the_class_the_executor_sees() {
    let fx = Fixture::new("class");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    // `put` is annotated `readOnlyHint: false`, `get` `readOnlyHint: true`.
    let put = McpExecutor::new(Arc::clone(&client), "put")
        .bind(&put_request())
        .unwrap();
    assert_eq!(put.class, ActionClass::Mutating);
    assert_eq!(put.details["class"], "mutating");
    let get = McpExecutor::new(Arc::clone(&client), "get")
        .bind(&Request::new("get", json!({"key": "k"})))
        .unwrap();
    assert_eq!(get.class, ActionClass::ReadOnly);
    assert_eq!(get.details["class"], "read_only");
    assert_eq!(
        get.digest,
        rpr::canonical::sha256_hex(&get.details).unwrap()
    );

    // No annotation, or a hint that is not `true`, is the protocol's default: mutating.
    let server = client.server();
    for annotations in [None, Some(json!({})), Some(json!({"readOnlyHint": "yes"}))] {
        let mut definition = json!({"name": "t", "inputSchema": {"type": "object"}});
        if let Some(a) = annotations.clone() {
            definition["annotations"] = a;
        }
        let tool = Tool::from_definition(definition).unwrap();
        let binding = ToolBinding::new(server, &tool)
            .unwrap()
            .to_binding()
            .unwrap();
        assert_eq!(binding.class, ActionClass::Mutating, "{annotations:?}");
    }

    // The file executor writes: mutating, and bound as such.
    let mut files = FileExecutor::new(&fx.dir).unwrap();
    let write = Request::new("write_file", json!({"path": "a.txt", "content": "x"}));
    let binding = files.bind(&write).unwrap();
    assert_eq!(binding.class, ActionClass::Mutating);
    assert_eq!(binding.details["class"], "mutating");
    assert_eq!(
        binding.digest,
        rpr::canonical::sha256_hex(&binding.details).unwrap()
    );

    // A plain binding is mutating (fail closed); changing the class changes the digest.
    let plain = Binding::new("t", json!({"executor": "x"})).unwrap();
    assert_eq!(plain.class, ActionClass::Mutating);
    assert!(plain.details.get("class").is_none());
    let read_only = plain.clone().read_only();
    assert_eq!(read_only.class, ActionClass::ReadOnly);
    assert_eq!(read_only.details["class"], "read_only");
    let mutating = plain.with_class(ActionClass::Mutating);
    assert_ne!(read_only.digest, mutating.digest);
    assert_eq!(
        read_only.digest,
        rpr::canonical::sha256_hex(&read_only.details).unwrap()
    );
}

#[test]
fn invalid_arguments_are_refused_before_sending() {
    for draft07 in [false, true] {
        let fx = Fixture::new("args");
        let mut command = fx.command("none");
        if draft07 {
            command = command.arg("--draft07");
        }
        let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
        let mut executor = McpExecutor::new(client, "put");
        let binding = executor.bind(&put_request()).unwrap();
        for arguments in [
            json!({"key": "k", "value": 5}),
            json!({"key": "k"}),
            json!({"key": "", "value": "secret-value"}),
            json!({"key": "k", "value": "v", "extra": true}),
            json!(["k", "v"]),
        ] {
            let request = Request::new("put", arguments.clone());
            let refusal = executor.prepare(&request, &binding).unwrap_err();
            assert_eq!(refusal.code, "invalid_arguments", "{arguments}");
            assert!(
                !refusal.message.contains("secret-value"),
                "argument values are masked: {refusal}"
            );
            assert!(matches!(
                executor.execute(&request),
                Delivery::NothingWritten { .. }
            ));
        }
        executor.prepare(&put_request(), &binding).unwrap();
        assert!(
            matches!(executor.execute(&put_request()), Delivery::Succeeded { .. }),
            "draft07={draft07}"
        );
        assert_eq!(fx.effects(), 1);
    }
}

#[test]
fn wrong_tool_and_missing_prepare_send_nothing() {
    let fx = Fixture::new("misuse");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let mut executor = McpExecutor::new(Arc::clone(&client), "put");
    let other = Request::new("get", json!({"key": "k"}));
    assert_eq!(executor.bind(&other).unwrap_err().code, "wrong_tool");
    assert!(
        matches!(
            executor.execute(&put_request()),
            Delivery::NothingWritten { .. }
        ),
        "no prepare"
    );
    let binding = executor.bind(&put_request()).unwrap();
    executor.prepare(&put_request(), &binding).unwrap();
    assert!(matches!(
        executor.execute(&put_request()),
        Delivery::Succeeded { .. }
    ));
    assert!(
        matches!(
            executor.execute(&put_request()),
            Delivery::NothingWritten { .. }
        ),
        "prepare is consumed"
    );
    assert_eq!(fx.effects(), 1);
    let refusal = McpExecutor::new(client, "nope")
        .bind(&Request::new("nope", json!({})))
        .unwrap_err();
    assert_eq!(refusal.code, "tool_missing");
}

/// Issue 8, hole 7: a preparation left behind (dispatch lost the compare-and-set and
/// never executed) let a later bare `execute` send any request to that tool.
#[test]
fn preparation_is_for_one_request_and_is_released() {
    let fx = Fixture::new("prepared");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let mut executor = McpExecutor::new(Arc::clone(&client), "put");
    let a = put_request();
    let b = Request::new("put", json!({"key": "k", "value": "other"}));
    let binding = executor.bind(&a).unwrap();
    let nothing = |delivery: Delivery, what: &str| {
        assert!(
            matches!(delivery, Delivery::NothingWritten { .. }),
            "{what}: {delivery:?}"
        );
    };

    executor.prepare(&a, &binding).unwrap();
    executor.release();
    nothing(executor.execute(&a), "execute after release");
    assert_eq!(fx.effects(), 0, "a released preparation sent the request");

    executor.prepare(&a, &binding).unwrap();
    nothing(executor.execute(&b), "execute of another request");
    assert_eq!(fx.effects(), 0, "a preparation for A sent B");
    nothing(executor.execute(&a), "the mismatch used the preparation up");
    assert_eq!(fx.effects(), 0);

    executor.prepare(&a, &binding).unwrap();
    let delivery = executor.execute(&a);
    assert!(
        matches!(delivery, Delivery::Succeeded { .. }),
        "{delivery:?}"
    );
    assert_eq!(fx.effects(), 1);
    nothing(executor.execute(&a), "a second execute");
    assert_eq!(fx.effects(), 1, "one preparation sent twice");
}

#[test]
fn the_carrier_is_the_server_process_until_it_is_reaped() {
    let fx = Fixture::new("carrier");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let executor = McpExecutor::new(Arc::clone(&client), "put");
    let carrier = executor.carrier().expect("an MCP server carries the call");
    let pid = fx.server_pid();
    assert_eq!((carrier.pid, carrier.pgid), (pid, pid));
    assert_eq!(carrier, client.server_process().unwrap());
    if cfg!(target_os = "linux") {
        let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let start = line[line.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .nth(19)
            .unwrap();
        assert_eq!(
            carrier.start, start,
            "the start time identifies the process"
        );
    } else {
        assert_eq!(carrier.start, "", "unreadable start time stays empty");
    }
    client.shutdown();
    assert_eq!(executor.carrier(), None, "a reaped server carries nothing");
    // The file executor writes in the host process: nothing else carries its writes.
    let files = FileExecutor::new(&fx.dir).unwrap();
    assert_eq!(files.carrier(), None);
}

fn readback(client: Arc<McpClient>) -> McpReadback {
    McpReadback::new(
        client,
        "get",
        |r: &Request| json!({"key": r.arguments["key"]}),
        |r: &Request, result: &Value| {
            if result["structuredContent"]["value"] == r.arguments["value"] {
                ReadbackVerdict::Applied
            } else {
                ReadbackVerdict::NotApplied
            }
        },
    )
}

#[test]
fn readback_on_another_process_tells_applied_from_not_applied() {
    for (fault, expect_applied) in [("crash-after-effect", true), ("crash-after-read", false)] {
        let fx = Fixture::new("readback");
        let exec = ExecutorConfig::default();
        let delivery = dispatch(&fx, fx.command(fault), &fast_config(), exec);
        assert!(
            matches!(delivery, Delivery::PossiblyWritten { .. }),
            "{fault}: {delivery:?}"
        );
        let reader = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
        let observation = readback(Arc::clone(&reader)).observe(&put_request());
        match (observation, expect_applied) {
            (Observation::Applied { evidence }, true) => {
                assert_eq!(evidence["result"]["structuredContent"]["value"], "v");
                assert_eq!(evidence["readback_tool"], "get");
                assert_eq!(evidence["arguments"], json!({"key": "k"}));
            }
            (Observation::NotApplied { evidence }, false) => {
                assert_eq!(
                    evidence["result"]["structuredContent"]["value"],
                    Value::Null
                );
            }
            (other, _) => panic!("{fault}: unexpected {other:?}"),
        }
    }
}

#[test]
fn readback_failures_are_inconclusive() {
    let fx = Fixture::new("readback-fail");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    // A tool error (the key argument is missing) is inconclusive unless judged.
    let mut bad_args = McpReadback::new(
        Arc::clone(&client),
        "get",
        |_: &Request| json!({}),
        |_: &Request, _: &Value| ReadbackVerdict::NotApplied,
    );
    assert!(matches!(
        bad_args.observe(&put_request()),
        Observation::Inconclusive { .. }
    ));
    // A JSON-RPC error (unknown tool) is inconclusive.
    let mut unknown = McpReadback::new(
        Arc::clone(&client),
        "nope",
        |_: &Request| json!({}),
        |_: &Request, _: &Value| ReadbackVerdict::Applied,
    );
    let Observation::Inconclusive { evidence } = unknown.observe(&put_request()) else {
        panic!()
    };
    assert_eq!(evidence["error"]["code"], -32602);
    // A dead session is inconclusive.
    client.shutdown();
    let Observation::Inconclusive { evidence } = readback(client).observe(&put_request()) else {
        panic!()
    };
    assert!(
        evidence["failure"]
            .as_str()
            .is_some_and(|f| f.contains("not sent")),
        "{evidence}"
    );
}

fn tool_with_schema(schema: &Value) -> Tool {
    Tool::from_definition(json!({"name": "t", "inputSchema": schema})).unwrap()
}

#[test]
fn schema_dialects() {
    let draft7 = tool_with_schema(
        &json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
    );
    assert_eq!(
        ArgumentValidator::new(&draft7).unwrap().dialect(),
        Dialect::Draft07
    );
    let default = tool_with_schema(
        &json!({"type": "object", "properties": {"a": {"prefixItems": [{"type": "string"}]}}}),
    );
    assert_eq!(
        ArgumentValidator::new(&default).unwrap().dialect(),
        Dialect::Draft202012
    );
    let other = tool_with_schema(
        &json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"}),
    );
    assert!(matches!(
        ArgumentValidator::new(&other),
        Err(McpError::UnsupportedSchema { .. })
    ));
    let remote = tool_with_schema(
        &json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}),
    );
    assert!(
        matches!(
            ArgumentValidator::new(&remote),
            Err(McpError::UnsupportedSchema { .. })
        ),
        "no remote fetching"
    );
    assert!(Tool::from_definition(json!({"name": "", "inputSchema": {"type": "object"}})).is_err());
    assert!(
        Tool::from_definition(json!({"name": "x", "inputSchema": {"type": "string"}})).is_err()
    );
    assert!(Tool::from_definition(json!({"name": "x"})).is_err());
}

#[test]
fn a_given_tool_list_is_what_the_call_is_bound_and_checked_against() {
    let fx = Fixture::new("none");
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    // The list as the caller last saw it: `get` with another description than the server's.
    let mut list = client.list_tools().unwrap();
    let at = list.tools.iter().position(|t| t.name == "get").unwrap();
    let mut seen = list.tools[at].definition.clone();
    seen["description"] = json!("the description the caller checked");
    list.tools[at] = Tool::from_definition(seen).unwrap();
    let list = Arc::new(list);
    let request = Request::new("get", json!({"key": "k"}));

    let mut given = McpExecutor::new(Arc::clone(&client), "get")
        .with_config(ExecutorConfig::default().with_tool_list(Arc::clone(&list)));
    let binding = given.bind(&request).unwrap();
    let mut listing = McpExecutor::new(Arc::clone(&client), "get");
    let live = listing.bind(&request).unwrap();
    assert_ne!(
        binding.details["tool_digest"], live.details["tool_digest"],
        "bound to the given list, not to a fresh tools/list"
    );
    // Checked against the same list before and at the send: no `binding_changed` although
    // the live server describes the tool differently.
    given.prepare(&request, &binding).unwrap();
    assert!(
        matches!(given.execute(&request), Delivery::Succeeded { .. }),
        "the call went out"
    );

    // Without the list, the executor lists the tools itself: the same binding is refused
    // as changed before anything is sent.
    let refusal = listing.prepare(&request, &binding).unwrap_err();
    assert_eq!(refusal.code, "binding_changed", "{refusal:?}");
    drop(listing);
    drop(given);
    client.shutdown();
}

/// Issue 26: a call bound to a list the caller checked, with `list_at_send`, is checked
/// against the server as it is at the send: one `tools/list`, right before the call. The
/// fault server changes `put` from its N+1-th list on.
#[test]
fn a_given_list_checked_at_send_lists_once_and_sends_nothing_after_a_change() {
    let request = put_request();
    // Changed from the 3rd list: the caller's list is the 1st, the check at the send the
    // 2nd, so the call goes out (bind or prepare listing too would see the change).
    let fx = Fixture::new("at-send-once");
    let command = fx.command("change-schema").arg("--lists-before").arg("2");
    let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
    let list = Arc::new(client.list_tools().unwrap());
    let mut executor = McpExecutor::new(Arc::clone(&client), "put")
        .with_config(ExecutorConfig::default().with_tool_list_checked_at_send(list));
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    let delivery = executor.execute(&request);
    assert!(
        matches!(delivery, Delivery::Succeeded { .. }),
        "one tools/list, at the send: {delivery:?}"
    );
    assert_eq!(fx.effects(), 1);
    client.shutdown();

    // Changed from the 2nd list: bound and prepared against the caller's list, the change
    // is seen at the send and nothing is sent.
    let fx = Fixture::new("at-send-changed");
    let command = fx.command("change-schema").arg("--lists-before").arg("1");
    let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
    let list = Arc::new(client.list_tools().unwrap());
    let mut executor = McpExecutor::new(Arc::clone(&client), "put")
        .with_config(ExecutorConfig::default().with_tool_list_checked_at_send(list));
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    let delivery = executor.execute(&request);
    let Delivery::NothingWritten { reason } = delivery else {
        panic!("{delivery:?}")
    };
    assert!(reason.contains("binding_changed"), "{reason}");
    assert_eq!(fx.effects(), 0, "nothing was sent");
    client.shutdown();
}

/// Issue 26: `ExecutorConfig::call_tag` reaches the session, so `Session::cancel_tagged`
/// finds the `tools/call`: the server gets one `notifications/cancelled` under the call's
/// own id, with the caller's reason (not a second one at the timeout), and without an
/// answer the delivery is `PossiblyWritten`, saying it was cancelled.
#[test]
fn a_tagged_call_is_cancelled_under_its_own_id_and_ends_possibly_written() {
    let fx = Fixture::new("tagged-cancel");
    let log = fx.dir.join("cancelled.log");
    let command = fx.command("never-reply").arg("--cancel-log").arg(&log);
    let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
    let exec = ExecutorConfig::default()
        .with_call_timeout(Duration::from_secs(2))
        .with_call_tag("client-call-1");
    let mut executor = McpExecutor::new(Arc::clone(&client), "put").with_config(exec);
    let request = put_request();
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    let canceller = {
        let client = Arc::clone(&client);
        let fx_effects = fx.effects.clone();
        std::thread::spawn(move || {
            // Once the server has the call (its effect is written), cancel it.
            while std::fs::read_to_string(&fx_effects).map_or(0, |s| s.lines().count()) == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
            client
                .session()
                .cancel_tagged("client-call-1", "stopped by the user")
        })
    };
    let delivery = executor.execute(&request);
    assert!(canceller.join().unwrap(), "the tag found the waiting call");
    let Delivery::PossiblyWritten { reason } = &delivery else {
        panic!("{delivery:?}")
    };
    assert!(
        reason.contains("cancelled") && reason.contains("stopped by the user"),
        "{reason}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = logged
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "one cancellation: {logged}");
    assert!(
        lines[0]["requestId"].is_number(),
        "the call's own id: {logged}"
    );
    assert_eq!(lines[0]["reason"], "stopped by the user");
}

/// Issue 26: `ExecutorConfig::send_guard` is asked as the caller's last word before the
/// attempt is recorded (`still_wanted`) and again as the `tools/call` is queued: a call it
/// withdraws is refused before the record, and at the send is `NothingWritten` with not one
/// request written (the server's log of what it received holds no `tools/call`). The guard
/// is asked each time, not once: cleared, the same call goes.
#[test]
fn a_call_its_send_guard_withdraws_is_never_written() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let fx = Fixture::new("send-guard");
    let log = fx.dir.join("requests.jsonl");
    let command = fx.command("none").arg("--request-log").arg(&log);
    let client = Arc::new(McpClient::connect(&command, &fast_config()).unwrap());
    let withdrawn = Arc::new(AtomicBool::new(false));
    let guard = {
        let withdrawn = Arc::clone(&withdrawn);
        SendGuard::new(move || {
            withdrawn
                .load(Ordering::SeqCst)
                .then(|| "the caller withdrew it".to_owned())
        })
    };
    let mut executor = McpExecutor::new(Arc::clone(&client), "put")
        .with_config(ExecutorConfig::default().with_send_guard(guard));
    let request = put_request();
    let binding = executor.bind(&request).unwrap();
    executor.prepare(&request, &binding).unwrap();
    assert!(executor.still_wanted().is_ok());
    withdrawn.store(true, Ordering::SeqCst);
    let refusal = executor
        .still_wanted()
        .expect_err("withdrawn before the record");
    assert_eq!(refusal.code, "withdrawn");
    let delivery = executor.execute(&request);
    let Delivery::NothingWritten { reason } = &delivery else {
        panic!("{delivery:?}")
    };
    assert!(reason.contains("the caller withdrew it"), "{reason}");
    let calls = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).unwrap()["method"] == "tools/call")
            .count()
    };
    assert_eq!(calls(), 0, "no tools/call was written");
    assert_eq!(fx.effects(), 0);

    withdrawn.store(false, Ordering::SeqCst);
    executor.prepare(&request, &binding).unwrap();
    let delivery = executor.execute(&request);
    assert!(
        matches!(delivery, Delivery::Succeeded { .. }),
        "{delivery:?}"
    );
    assert_eq!(calls(), 1);
    assert_eq!(fx.effects(), 1);
    client.shutdown();
}

/// Issue 26: `Session::request_guarded` asks its guard as the request is queued: a request
/// it withdraws is `NotSent` (not one byte written), and the session goes on.
#[test]
fn a_request_its_guard_withdraws_is_not_sent_and_the_session_goes_on() {
    let fx = Fixture::new("session-guard");
    let log = fx.dir.join("requests.jsonl");
    let command = fx.command("none").arg("--request-log").arg(&log);
    let client = McpClient::connect(&command, &fast_config()).unwrap();
    let guard = SendGuard::new(|| Some("cancelled by the client".to_owned()));
    let e = client
        .session()
        .request_guarded(
            "resources/list",
            None,
            Duration::from_secs(5),
            Some("tag-1"),
            Some(&guard),
        )
        .expect_err("withdrawn");
    assert!(e.nothing_written(), "{e}");
    assert!(e.to_string().contains("cancelled by the client"), "{e}");
    assert!(
        !client.session().cancel_tagged("tag-1", "late"),
        "nothing waits under the tag"
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!logged.contains("resources/list"), "{logged}");
    client.list_tools().expect("the session goes on");
    client.shutdown();
}
