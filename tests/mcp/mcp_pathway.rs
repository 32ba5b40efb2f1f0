//! Every row of the outcome table and every fault of `rpr-fault-server`, through the
//! whole governed pathway: the outcome and stored state, the number of effects that
//! really happened, reconciliation by readback on a fresh server process, and a
//! ledger that verifies. No server process outlives its client.

use crate::mcp_support;

use std::sync::Arc;
use std::time::Duration;

use mcp_support::{Fixture, assert_gone, fast_config};
use rpr::executor::Request;
use rpr::mcp::{
    ExecutorConfig, McpClient, McpExecutor, McpReadback, ReadbackVerdict, SessionConfig,
};
use rpr::token::Reconciled;
use rpr::{
    ALLOW_ALL, ActionClass, Actor, Authority, Confirmed, Definition, Outcome, Runtime, State,
};
use serde_json::{Value, json};

/// What a case expects.
struct Case {
    fault: &'static str,
    args: &'static [&'static str],
    exec: ExecutorConfig,
    session: SessionConfig,
    /// The outcome of dispatch.
    outcome: &'static str,
    /// The stored state right after dispatch (and confirmation, for a returned call).
    state: State,
    /// Effects counted by the server after dispatch.
    effects: usize,
    /// For an unknown outcome: the state after reconciliation by readback.
    reconciled: Option<State>,
}

fn case(fault: &'static str, outcome: &'static str, state: State, effects: usize) -> Case {
    Case {
        fault,
        args: &[],
        exec: ExecutorConfig::default(),
        session: fast_config(),
        outcome,
        state,
        effects,
        reconciled: None,
    }
}

fn readback(client: Arc<McpClient>) -> McpReadback {
    McpReadback::new(
        client,
        "get",
        |req: &Request| json!({"key": req.arguments["key"]}),
        |req: &Request, result: &Value| {
            let seen = &result["structuredContent"]["value"];
            if seen == &req.arguments["value"] {
                ReadbackVerdict::Applied
            } else if seen.is_null() {
                ReadbackVerdict::NotApplied
            } else {
                ReadbackVerdict::Inconclusive
            }
        },
    )
}

/// Runs one case end to end and checks everything it expects.
fn check(c: Case) {
    let fx = Fixture::new(c.fault);
    let (rt, host, p) = admitted(&fx, c.fault);
    let client =
        Arc::new(McpClient::connect(&fx.command(c.fault).args(c.args), &c.session).unwrap());
    let pid = client.session().pid();
    let mut executor = McpExecutor::new(Arc::clone(&client), "put").with_config(c.exec);
    let bound = p.bind(&mut executor).unwrap();
    let id = bound.id().to_owned();
    let outcome = bound.dispatch(&rt, &host, &mut executor);
    let (kind, unknown) = match outcome {
        Outcome::Returned(r) => {
            let confirmed = r
                .confirm(&rt, &host, &mut readback(Arc::clone(&client)))
                .unwrap();
            assert!(
                matches!(confirmed, Confirmed::Completed(_)),
                "{confirmed:?}"
            );
            ("returned", None)
        }
        Outcome::Unknown(u) => ("unknown", Some(u)),
        Outcome::Failed(_) => ("failed", None),
        Outcome::NotSent(n) => {
            assert!(
                n.error().to_string().contains("binding_changed"),
                "{}",
                n.error()
            );
            ("not_sent", None)
        }
        other => panic!("{}: unexpected outcome {other:?}", c.fault),
    };
    drop(executor);
    drop(client);
    assert_gone(pid);
    assert_eq!(kind, c.outcome, "{}: outcome", c.fault);
    assert_eq!(
        rt.reader().pathway(&id).unwrap().unwrap().state,
        c.state,
        "{}: stored state",
        c.fault
    );
    // Late effects (a slow server) land before we count.
    assert_eq!(
        fx.wait_for_effects(c.effects, Duration::from_secs(3)),
        c.effects,
        "{}: effects",
        c.fault
    );

    if let Some(unknown) = unknown {
        // A fresh, well-behaved server process reads the same state file.
        let fresh = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
        let fresh_pid = fresh.session().pid();
        let state = match rt.reconcile(&unknown, &mut readback(Arc::clone(&fresh))) {
            Reconciled::Applied(t) => unknown.complete(&rt, t).unwrap().state(),
            Reconciled::NotApplied(t) => unknown.require_repair(&rt, t).unwrap().state(),
            other => panic!("{}: {other:?}", c.fault),
        };
        drop(fresh);
        assert_gone(fresh_pid);
        assert_eq!(Some(state), c.reconciled, "{}: reconciled", c.fault);
        assert_eq!(fx.effects(), c.effects, "{}: nothing re-sent", c.fault);
    }
    let attempts = rt.reader().attempts(&id).unwrap();
    assert!(attempts.len() <= 1, "{}: at most one attempt", c.fault);
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{}: {:?}", c.fault, report.problems);
}

fn unknown(fault: &'static str, effects: usize) -> Case {
    let reconciled = if effects == 1 {
        State::Completed
    } else {
        State::RepairRequired
    };
    Case {
        reconciled: Some(reconciled),
        ..case(fault, "unknown", State::WriteStatusUnknown, effects)
    }
}

#[test]
fn success_plus_readback_completes() {
    check(case("none", "returned", State::Completed, 1));
}

#[test]
fn a_reply_sent_twice_completes_once() {
    check(case("reply-twice", "returned", State::Completed, 1));
}

#[test]
fn server_traffic_mid_call_still_completes() {
    check(case("notify-mid-call", "returned", State::Completed, 1));
}

#[test]
fn notifications_before_initialize_still_complete() {
    check(case("notify-before-init", "returned", State::Completed, 1));
}

/// A tool error is the server's word: it does not prove the call did nothing (an SDK
/// answers one for an exception thrown after the handler's write), so the call is unknown
/// until a readback or an attestation decides; nothing is sent again. Here the readback
/// finds nothing, and only that sends it to repair.
#[test]
fn is_error_is_unknown_until_read_back_not_applied() {
    check(unknown("is-error", 0));
}

#[test]
fn a_json_rpc_error_is_unknown_by_default() {
    check(unknown("rpc-error", 0));
}

#[test]
fn a_json_rpc_error_declared_not_applied_goes_to_repair() {
    check(Case {
        args: &["--rpc-error-code", "-32602"],
        exec: ExecutorConfig::default().with_not_applied_code(-32602),
        ..case("rpc-error", "failed", State::RepairRequired, 0)
    });
}

#[test]
fn server_gone_before_the_call_is_not_sent_and_goes_to_repair() {
    // The third tools/list is execute's re-check: the server exits before it, so the
    // attempt was recorded but not one byte of tools/call left.
    check(Case {
        args: &["--lists-before", "3"],
        ..case("crash-before-read", "failed", State::RepairRequired, 0)
    });
}

#[test]
fn crash_after_read_is_unknown_then_not_applied() {
    check(unknown("crash-after-read", 0));
}

#[test]
fn crash_after_effect_is_unknown_then_applied() {
    check(unknown("crash-after-effect", 1));
}

#[test]
fn garbage_reply_is_unknown_then_applied() {
    check(unknown("garbage-reply", 1));
}

#[test]
fn wrong_id_is_unknown_then_applied() {
    check(Case {
        exec: ExecutorConfig::default().with_call_timeout(Duration::from_millis(800)),
        ..unknown("wrong-id", 1)
    });
}

#[test]
fn never_reply_is_unknown_then_applied() {
    check(Case {
        exec: ExecutorConfig::default().with_call_timeout(Duration::from_millis(800)),
        ..unknown("never-reply", 1)
    });
}

#[test]
fn slow_reply_after_the_timeout_is_unknown_then_applied() {
    check(Case {
        args: &["--sleep-ms", "800"],
        exec: ExecutorConfig::default().with_call_timeout(Duration::from_millis(200)),
        ..unknown("slow", 1)
    });
}

#[test]
fn oversized_reply_is_unknown_then_applied() {
    let mut session = fast_config();
    session.max_message_bytes = 1024 * 1024;
    check(Case {
        args: &["--huge-bytes", "2097152"],
        exec: ExecutorConfig::default().with_call_timeout(Duration::from_millis(1500)),
        session,
        ..unknown("huge-line", 1)
    });
}

#[test]
fn a_schema_change_after_binding_is_refused_before_sending() {
    // bind lists once; the second listing (prepare's re-check) shows a new schema.
    check(Case {
        args: &["--lists-before", "1"],
        ..case("change-schema", "not_sent", State::Approved, 0)
    });
}

#[test]
fn a_server_that_ignores_sigterm_still_completes_and_is_killed() {
    check(case("ignore-sigterm", "returned", State::Completed, 1));
}

/// An admitted pathway on a fresh database, with one actor holding every role.
fn admitted(fx: &Fixture, key: &str) -> (Runtime, Actor, rpr::Pathway<rpr::stage::Approved>) {
    let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
    let host = Actor::new("host");
    let definition = Definition::new(
        Request::new("put", json!({"key": "k", "value": "v"})),
        ActionClass::Mutating,
        key,
        Authority::single(&host),
    );
    let proposed = rt.propose(&host, definition).unwrap().into_new();
    let admitted = proposed.expect("replayed").admit(&rt, &host, ALLOW_ALL);
    let p = admitted.unwrap().into_approved().expect("not admitted");
    (rt, host, p)
}

#[test]
fn a_server_whose_identity_changed_since_binding_is_refused_before_sending() {
    let fx = Fixture::new("identity");
    let (rt, host, p) = admitted(&fx, "identity");
    let first =
        Arc::new(McpClient::connect(&fx.command("change-identity"), &fast_config()).unwrap());
    let first_pid = first.session().pid();
    let bound = p
        .bind(&mut McpExecutor::new(Arc::clone(&first), "put"))
        .unwrap();
    drop(first);
    assert_gone(first_pid);
    // The same command again: the server now reports another version.
    let second =
        Arc::new(McpClient::connect(&fx.command("change-identity"), &fast_config()).unwrap());
    let second_pid = second.session().pid();
    let mut executor = McpExecutor::new(Arc::clone(&second), "put");
    let Outcome::NotSent(n) = bound.dispatch(&rt, &host, &mut executor) else {
        panic!("a changed server must be refused")
    };
    assert!(
        n.error().to_string().contains("binding_changed"),
        "{}",
        n.error()
    );
    drop(executor);
    drop(second);
    assert_gone(second_pid);
    let id = n.into_pathway().id().to_owned();
    assert_eq!(
        rt.reader().pathway(&id).unwrap().unwrap().state,
        State::Approved
    );
    assert!(rt.reader().attempts(&id).unwrap().is_empty());
    assert_eq!(fx.effects(), 0);
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn a_looping_tools_list_cursor_refuses_binding() {
    let fx = Fixture::new("loop-cursor");
    let (rt, _host, p) = admitted(&fx, "loop");
    // initialize lists nothing; the loop shows at the first tools/list, in bind.
    let client = match McpClient::connect(&fx.command("loop-cursor"), &fast_config()) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            // Refused already at connect: nothing was bound or sent either.
            assert!(e.to_string().contains("cursor"), "{e}");
            assert_eq!(fx.effects(), 0);
            return;
        }
    };
    let pid = client.session().pid();
    let refused = p
        .bind(&mut McpExecutor::new(Arc::clone(&client), "put"))
        .unwrap_err();
    assert!(
        refused.error().to_string().contains("cursor"),
        "{}",
        refused.error()
    );
    let id = refused.into_pathway().id().to_owned();
    drop(client);
    assert_gone(pid);
    assert_eq!(
        rt.reader().pathway(&id).unwrap().unwrap().state,
        State::Approved
    );
    assert_eq!(fx.effects(), 0);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A guard that refuses keeps the readback tool from being called: the observation is
/// inconclusive with the guard's reason as evidence, and no result. A guard that passes
/// lets the call go on.
#[test]
fn a_guarded_readback_refused_calls_nothing_and_proves_nothing() {
    use rpr::executor::{Observation, Readback};
    let fx = Fixture::new("readback-guard");
    std::fs::write(&fx.state, r#"{"k": "v"}"#).unwrap();
    let client = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&refuse);
    let mut readback = readback(Arc::clone(&client)).guarded_by(move |_, _| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            Err("the tool is not the one reviewed".to_owned())
        } else {
            Ok(())
        }
    });
    let request = Request::new("put", json!({"key": "k", "value": "v"}));
    match readback.observe(&request) {
        Observation::Applied { evidence } => assert!(evidence.get("result").is_some()),
        other => panic!("{other:?}"),
    }
    assert_eq!(readback.refused(), None);
    refuse.store(true, std::sync::atomic::Ordering::SeqCst);
    match readback.observe(&request) {
        Observation::Inconclusive { evidence } => {
            assert_eq!(evidence["refused"], "the tool is not the one reviewed");
            assert!(evidence.get("result").is_none(), "not called: {evidence}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(readback.refused(), Some("the tool is not the one reviewed"));
}
