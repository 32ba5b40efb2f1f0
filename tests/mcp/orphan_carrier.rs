//! Hole 4 of the at-most-once review: a server left running after its host died wrote
//! after reconciliation had said "not applied", and the resumed call wrote again.
//!
//! A child host dispatches a `put` to the fault server, which sleeps 1.5 s between
//! receiving the request and writing; the host is killed in that window. Then recovery
//! and reconciliation run in this process. On the code before the fix the server
//! survived its host, reconciliation read back "not applied" before the late write, and
//! the resumed call made a second write.
//!
//! The same holds when the server is started through a launcher that moves it out of
//! the process group rpr started (`setsid`, a daemonizing double fork): the carrier is
//! the whole tree of processes the server command started, and a not-applied readback
//! is accepted only once every process of it is gone.

use crate::common;
use crate::mcp_support;

use std::sync::Arc;
use std::time::Duration;

use common::{ChildProc, say};
use mcp_support::{Fixture, Launch, alive, assert_dies_within, eventually, fast_config};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rpr::executor::{Binding, Carrier, Delivery, Executor, Refusal, Request};
use rpr::mcp::{McpClient, McpExecutor, McpReadback, ReadbackVerdict, ServerCommand};
use rpr::token::{Attestation, Reconciled};
use rpr::{ALLOW_ALL, ActionClass, Actor, Authority, Definition, Outcome, Runtime, StoredPathway};
use serde_json::{Value, json};

const SLOW_MS: &str = "1500";

fn env(name: &str) -> String {
    std::env::var(name).unwrap()
}

/// The slow fault server, started as `launch` says.
fn server(fx: &Fixture, launch: Launch) -> ServerCommand {
    fx.launched(launch, "slow", &["--sleep-ms", SLOW_MS])
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
    let launch = Launch::named(&env("RPR_ORPHAN_LAUNCH"));
    let client = Arc::new(McpClient::connect(&server(&fx, launch), &fast_config()).unwrap());
    let mcp = McpExecutor::new(Arc::clone(&client), "put");
    let mut ex = HostExecutor {
        inner: mcp,
        legacy: env("RPR_ORPHAN_LEGACY") == "1",
    };
    let StoredPathway::Approved(p) = rt.load(&env("RPR_ORPHAN_PATHWAY")).unwrap() else {
        panic!("not approved")
    };
    let bound = p.bind(&mut ex).unwrap();
    say("RPR-DISPATCHING", "");
    let outcome = bound.dispatch(&rt, &Actor::new("host"), &mut ex);
    panic!("the host was not killed inside the call: {outcome:?}");
}

/// The host's executor: the MCP executor, whose carrier is optionally cut down to what a
/// carrier record stored before rpr tracked whole process trees holds (pid, process
/// group, start), so recovery has only the process group to go by.
struct HostExecutor {
    inner: McpExecutor,
    legacy: bool,
}

impl Executor for HostExecutor {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.inner.bind(request)
    }
    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.inner.prepare(request, binding)
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        self.inner.execute(request)
    }
    fn release(&mut self) {
        self.inner.release();
    }
    fn carrier(&self) -> Option<Carrier> {
        let carrier = self.inner.carrier()?;
        if self.legacy {
            Some(Carrier::new(carrier.pid, carrier.pgid, carrier.start))
        } else {
            Some(carrier)
        }
    }
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

/// Starts a host that dispatches the admitted pathway to a server started as `launch`
/// says, and kills it with `signal` while the server sleeps on the request. Returns the
/// pathway and the pid of the real server (which wrote the pid file).
fn host_killed_inside_the_call(
    fx: &Fixture,
    signal: Signal,
    launch: Launch,
    legacy: bool,
) -> (String, u32) {
    let id = admitted(fx);
    let mut child = ChildProc::spawn(
        "orphan_carrier::child_host",
        &[
            ("RPR_ORPHAN_DIR", fx.dir.display().to_string()),
            ("RPR_ORPHAN_PATHWAY", id.clone()),
            ("RPR_ORPHAN_LAUNCH", launch.name().into()),
            ("RPR_ORPHAN_LEGACY", if legacy { "1" } else { "0" }.into()),
        ],
    );
    child.expect("RPR-DISPATCHING");
    assert!(eventually(Duration::from_secs(10), || in_flight(fx)));
    let server = fx.wait_for_server_pid();
    // The request reached the server, which now sleeps before writing.
    fx.wait_for_call();
    let pid = Pid::from_raw(i32::try_from(child.pid()).unwrap());
    kill(pid, signal).unwrap();
    let _ = child.child.wait();
    assert_eq!(fx.effects(), 0, "killed before the server wrote");
    (id, server)
}

fn killed_host_then_reconcile(signal: Signal, launch: Launch) {
    let fx = Fixture::new("orphan");
    let (id, server) = host_killed_inside_the_call(&fx, signal, launch, false);

    // A new host recovers and reconciles at once (well inside the server's sleep).
    let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
    let StoredPathway::Unknown(unknown) = rt.load(&id).unwrap() else {
        panic!("not recovered as unknown")
    };
    let fresh = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let reconciled = rt.reconcile(&unknown, &mut readback(Arc::clone(&fresh)));
    // A not-applied verdict is accepted only once every process of the server's tree
    // is gone: the real server too, whatever session or group it moved to.
    let alive_at_verdict = alive(server);
    let Reconciled::NotApplied(token) = reconciled else {
        panic!(
            "the effect was not there and the server's whole tree is gone: not applied; got {reconciled:?}"
        )
    };
    assert!(
        !alive_at_verdict,
        "not applied was accepted while server {server} ({}) lives",
        launch.name()
    );
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
    killed_host_then_reconcile(Signal::SIGKILL, Launch::Direct);
}

#[test]
fn hole4_a_server_dies_with_its_host_killed_by_sigterm() {
    killed_host_then_reconcile(Signal::SIGTERM, Launch::Direct);
}

#[test]
fn hole4_a_server_dies_with_its_host_interrupted_by_sigint() {
    killed_host_then_reconcile(Signal::SIGINT, Launch::Direct);
}

/// The real server is a grandchild (a shell in between), so the parent-death signal
/// kills only the shell: reconciliation kills the recorded process group first.
#[test]
fn hole4_a_surviving_carrier_group_is_killed_before_reconciliation() {
    killed_host_then_reconcile(Signal::SIGKILL, Launch::Shell);
}

#[test]
fn a_server_behind_sh_c_is_settled_when_the_host_is_interrupted() {
    killed_host_then_reconcile(Signal::SIGINT, Launch::Shell);
}

/// The server runs in a session of its own (`setsid`): killing the recorded process
/// group does not reach it, so only the whole tree's end settles the attempt.
#[test]
fn a_server_started_through_setsid_is_settled_when_the_host_is_sigkilled() {
    killed_host_then_reconcile(Signal::SIGKILL, Launch::Setsid);
}

#[test]
fn a_server_started_through_setsid_is_settled_when_the_host_is_interrupted() {
    killed_host_then_reconcile(Signal::SIGINT, Launch::Setsid);
}

/// A daemonizing wrapper: the process rpr started exits at once, the server lives on in
/// a session of its own, re-parented away from the host.
#[test]
fn a_daemonized_server_is_settled_when_the_host_is_sigkilled() {
    killed_host_then_reconcile(Signal::SIGKILL, Launch::DoubleFork);
}

#[test]
fn a_daemonized_server_is_settled_when_the_host_is_interrupted() {
    killed_host_then_reconcile(Signal::SIGINT, Launch::DoubleFork);
}

/// A carrier record that names only the process group (as stored before rpr tracked the
/// server's whole tree, or where no tree could be tracked) cannot show that a descendant
/// which left the group is gone: the readback's "not applied" is not accepted, and the
/// result says why. Only an attestation settles it, and the call is written once.
fn a_group_only_carrier_record_stays_unresolved(signal: Signal, launch: Launch) {
    let fx = Fixture::new("orphan-legacy");
    let (id, _server) = host_killed_inside_the_call(&fx, signal, launch, true);

    let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
    let StoredPathway::Unknown(unknown) = rt.load(&id).unwrap() else {
        panic!("not recovered as unknown")
    };
    let fresh = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
    let reconciled = rt.reconcile(&unknown, &mut readback(Arc::clone(&fresh)));
    let Reconciled::Unresolved(token) = &reconciled else {
        panic!("a descendant outside the recorded group may live: unresolved; got {reconciled:?}")
    };
    let evidence = token.evidence();
    assert_eq!(evidence["observed"], "not_applied", "{evidence}");
    let why = evidence["not_accepted_because"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("descendant") && why.contains("left"),
        "the result says why it cannot conclude: {evidence}"
    );
    // Past the server's sleep.
    std::thread::sleep(Duration::from_millis(2500));
    let written = fx.effects();
    assert!(written <= 1, "{written} writes");

    // The accountable way on: the repair owner attests, naming the risk, after looking.
    let host = Actor::new("host");
    let StoredPathway::Unknown(unknown) = rt.load(&id).unwrap() else {
        panic!("still unknown")
    };
    if written == 1 {
        let Reconciled::Applied(_) = rt.reconcile(&unknown, &mut readback(Arc::clone(&fresh)))
        else {
            panic!("the late write is read back")
        };
    } else {
        let Reconciled::NotApplied(t) = rt
            .attest(
                &unknown,
                &host,
                Attestation::NotApplied,
                &json!({"risk": "a server descendant may have held the request", "checked": "no process of the server is left"}),
            )
            .unwrap()
        else {
            panic!("attested")
        };
        let p = unknown
            .require_repair(&rt, t)
            .unwrap()
            .repair(&rt, &host, &json!({"checked": "attested"}), None)
            .unwrap();
        let mut ex = McpExecutor::new(Arc::clone(&fresh), "put");
        let Outcome::Returned(_) = p.bind(&mut ex).unwrap().dispatch(&rt, &host, &mut ex) else {
            panic!("resume failed")
        };
    }
    assert_eq!(fx.effects(), 1, "exactly one write in all");
    assert!(rt.verify(None).unwrap().is_ok());
    fresh.shutdown();
}

#[test]
fn a_group_only_record_of_a_setsid_server_stays_unresolved_after_sigkill() {
    a_group_only_carrier_record_stays_unresolved(Signal::SIGKILL, Launch::Setsid);
}

#[test]
fn a_group_only_record_of_a_daemonized_server_stays_unresolved_after_sigint() {
    a_group_only_carrier_record_stays_unresolved(Signal::SIGINT, Launch::DoubleFork);
}

/// No process of any server started by these tests is left: each test's servers are
/// gone once its host died and its reconciliation ran.
#[test]
fn the_server_of_a_killed_host_does_not_outlive_reconciliation() {
    for launch in [Launch::Setsid, Launch::DoubleFork] {
        let fx = Fixture::new("orphan-gone");
        let (id, server) = host_killed_inside_the_call(&fx, Signal::SIGKILL, launch, false);
        let rt = Runtime::open(fx.dir.join("rpr.db")).unwrap();
        let StoredPathway::Unknown(unknown) = rt.load(&id).unwrap() else {
            panic!("not recovered as unknown")
        };
        let fresh = Arc::new(McpClient::connect(&fx.command("none"), &fast_config()).unwrap());
        let _ = rt.reconcile(&unknown, &mut readback(Arc::clone(&fresh)));
        assert_dies_within(server, Duration::from_millis(200), "reconciliation");
        fresh.shutdown();
    }
}
