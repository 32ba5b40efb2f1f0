//! Hole 4 of the at-most-once review: a server left running after its host died wrote
//! after reconciliation had said "not applied", and the resumed call wrote again.
//!
//! A child host dispatches a `put` to the fault server, which sleeps 1.5 s between
//! receiving the request and writing; the host is killed in that window. Then recovery
//! and reconciliation run in this process. On the code before the fix the server
//! survived its host, reconciliation read back "not applied" before the late write, and
//! the resumed call made a second write.

mod common;
mod mcp_support;

use std::sync::Arc;
use std::time::Duration;

use common::{ChildProc, say};
use mcp_support::{Fixture, eventually, fast_config};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rpr::executor::Request;
use rpr::mcp::{McpClient, McpExecutor, McpReadback, ReadbackVerdict, ServerCommand};
use rpr::token::Reconciled;
use rpr::{ALLOW_ALL, ActionClass, Actor, Authority, Definition, Outcome, Runtime, StoredPathway};
use serde_json::{Value, json};

const SLOW_MS: &str = "1500";

fn env(name: &str) -> String {
    std::env::var(name).unwrap()
}

/// The slow fault server, launched directly or through `sh` (so that the real server is a
/// grandchild of the host, which the parent-death signal does not reach).
fn server(fx: &Fixture, through_shell: bool) -> ServerCommand {
    let args: Vec<std::ffi::OsString> = vec![
        "--effects".into(),
        fx.effects.clone().into(),
        "--state".into(),
        fx.state.clone().into(),
        "--pid-file".into(),
        fx.pid_file.clone().into(),
        "--fault".into(),
        "slow".into(),
        "--sleep-ms".into(),
        SLOW_MS.into(),
    ];
    let bin = env!("CARGO_BIN_EXE_rpr-fault-server");
    if through_shell {
        ServerCommand::new("/bin/sh")
            .arg("-c")
            // A background job's stdin would be /dev/null: hand it the pipe explicitly.
            .arg("exec 3<&0; \"$0\" \"$@\" <&3 3<&- & wait")
            .arg(bin)
            .args(args)
    } else {
        ServerCommand::new(bin).args(args)
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

/// The host: dispatches the admitted pathway and is killed inside the call.
#[test]
fn child_host() {
    let Ok(dir) = std::env::var("RPR_ORPHAN_DIR") else {
        return;
    };
    let fx = Fixture::at(std::path::PathBuf::from(&dir));
    let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
    let client = Arc::new(
        McpClient::connect(&server(&fx, env("RPR_ORPHAN_SHELL") == "1"), &fast_config()).unwrap(),
    );
    let mut ex = McpExecutor::new(Arc::clone(&client), "put");
    let StoredPathway::Approved(p) = rt.load(&env("RPR_ORPHAN_PATHWAY")).unwrap() else {
        panic!("not approved")
    };
    let bound = p.bind(&mut ex).unwrap();
    say("RPR-DISPATCHING", "");
    let outcome = bound.dispatch(&rt, &Actor::new("host"), &mut ex);
    panic!("the host was not killed inside the call: {outcome:?}");
}

fn admitted(fx: &Fixture) -> String {
    let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
    let host = Actor::new("host");
    let definition = Definition::new(
        Request::new("put", json!({"key": "k", "value": "v"})),
        ActionClass::Mutating,
        "orphan",
        Authority::single(&host),
    );
    let proposed = rt.propose(&host, definition).unwrap().into_new();
    let admitted = proposed.expect("replayed").admit(&rt, &host, ALLOW_ALL);
    let p = admitted.unwrap().into_approved().expect("not admitted");
    p.id().to_owned()
}

fn in_flight(fx: &Fixture) -> bool {
    rusqlite::Connection::open(fx.dir.join("rpr.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM attempts WHERE status = 'in_flight'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        == 1
}

fn killed_host_then_reconcile(signal: Signal, through_shell: bool) {
    let fx = Fixture::new("orphan");
    let id = admitted(&fx);
    let mut child = ChildProc::spawn(
        "child_host",
        &[
            ("RPR_ORPHAN_DIR", fx.dir.display().to_string()),
            ("RPR_ORPHAN_PATHWAY", id.clone()),
            (
                "RPR_ORPHAN_SHELL",
                if through_shell { "1" } else { "0" }.into(),
            ),
        ],
    );
    child.expect("RPR-DISPATCHING");
    assert!(eventually(Duration::from_secs(10), || in_flight(&fx)));
    // The request reaches the server, which now sleeps before writing.
    std::thread::sleep(Duration::from_millis(300));
    let pid = Pid::from_raw(i32::try_from(child.pid()).unwrap());
    kill(pid, signal).unwrap();
    let _ = child.child.wait();
    assert_eq!(fx.effects(), 0, "killed before the server wrote");

    // A new host recovers and reconciles at once (well inside the server's sleep).
    let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
    let StoredPathway::Unknown(unknown) = rt.load(&id).unwrap() else {
        panic!("not recovered as unknown")
    };
    let fresh = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let Reconciled::NotApplied(token) = rt.reconcile(&unknown, &mut readback(Arc::clone(&fresh)))
    else {
        panic!("the effect was not there and the carrier is gone: not applied")
    };
    // Past the server's sleep: nobody writes late.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        fx.effects(),
        0,
        "the host's server wrote after reconciliation"
    );

    let host = Actor::new("host");
    let p = unknown
        .require_repair(&rt, token)
        .unwrap()
        .repair(&rt, &host, &json!({"checked": "readback"}), None)
        .unwrap();
    let mut ex = McpExecutor::new(Arc::clone(&fresh), "put");
    let Outcome::Returned(_) = p.bind(&mut ex).unwrap().dispatch(&rt, &host, &mut ex) else {
        panic!("resume failed")
    };
    assert_eq!(fx.effects(), 1, "exactly one write in all");
    assert!(rt.verify(None).unwrap().is_ok());
    fresh.shutdown();
}

#[test]
fn hole4_a_server_dies_with_its_host_killed_by_sigkill() {
    killed_host_then_reconcile(Signal::SIGKILL, false);
}

#[test]
fn hole4_a_server_dies_with_its_host_killed_by_sigterm() {
    killed_host_then_reconcile(Signal::SIGTERM, false);
}

#[test]
fn hole4_a_server_dies_with_its_host_interrupted_by_sigint() {
    killed_host_then_reconcile(Signal::SIGINT, false);
}

/// The real server is a grandchild (a shell in between), so the parent-death signal
/// kills only the shell: reconciliation kills the recorded process group first.
#[test]
fn hole4_a_surviving_carrier_group_is_killed_before_reconciliation() {
    killed_host_then_reconcile(Signal::SIGKILL, true);
}
