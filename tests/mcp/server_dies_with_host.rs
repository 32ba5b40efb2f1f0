//! A server dies with its host (issue 8, hole 4).
//!
//! A host process (this test binary, re-executed: `host_entry`, which does nothing
//! unless `RPR_HOST_DIR` is set) connects to the fault server through the crate's
//! client and calls `put` on a server that sleeps 3 s before it writes. The host is
//! then killed with SIGKILL, SIGTERM or SIGINT while the call is in flight. The server
//! runs in its own process group, so only the parent-death signal set by the transport
//! stops it: it must be gone within 2 s, and its write must never happen. The same holds
//! for a server started through a launcher (`sh -c`, `setsid`, a daemonizing double
//! fork): every process of the tree the server command started dies with the host.
#![cfg(target_os = "linux")]

use crate::common;
use crate::mcp_support;

use std::path::Path;
use std::time::{Duration, Instant};

use common::ChildProc;
use mcp_support::{Fixture, Launch, alive, fast_config};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rpr::mcp::{McpClient, ServerCommand};
use serde_json::json;

/// How long the server sleeps between reading the call and writing its effect.
const SERVER_DELAY: Duration = Duration::from_secs(3);

fn server_command(dir: &Path, launch: Launch) -> ServerCommand {
    Fixture::at(dir.to_owned()).launched(
        launch,
        "slow",
        &["--sleep-ms", &SERVER_DELAY.as_millis().to_string()],
    )
}

/// The host: connects, says so, and blocks in a `tools/call` until it is killed.
#[test]
fn host_entry() {
    let Ok(dir) = std::env::var("RPR_HOST_DIR") else {
        return;
    };
    let launch = Launch::named(&std::env::var("RPR_HOST_LAUNCH").unwrap_or_default());
    let client = McpClient::connect(&server_command(dir.as_ref(), launch), &fast_config()).unwrap();
    println!("{}", common::READY);
    let reply = client.call_tool(
        "put",
        &json!({"key": "k", "value": "v"}),
        Duration::from_mins(1),
    );
    panic!("the host was meant to be killed during the call, but it returned {reply:?}");
}

fn server_dies_when_host_gets(signal: Signal) {
    server_tree_dies_when_host_gets(signal, Launch::Direct);
}

/// Every process of the server's tree dies with the host, also one that left the host's
/// process group and session.
fn server_tree_dies_when_host_gets(signal: Signal, launch: Launch) {
    let fixture = Fixture::new(&format!("dies-with-host-{signal}-{}", launch.name()));
    let mut host = ChildProc::spawn(
        "server_dies_with_host::host_entry",
        &[
            ("RPR_HOST_DIR", fixture.dir.display().to_string()),
            ("RPR_HOST_LAUNCH", launch.name().into()),
        ],
    );
    host.expect(common::READY);
    let server = fixture.wait_for_server_pid();
    assert!(alive(server), "the server is not running");
    // The `tools/call` reached the server, which now sleeps before writing.
    fixture.wait_for_call();
    let called = Instant::now();

    kill(Pid::from_raw(i32::try_from(host.pid()).unwrap()), signal).unwrap();
    let status = host.child.wait().unwrap();
    assert!(!status.success(), "the host exited on its own: {status:?}");

    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(server) {
        assert!(
            Instant::now() < deadline,
            "server {server} ({}) outlived its host (killed by {signal}) by 2 s",
            launch.name()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past the moment the server would have written, had it survived.
    std::thread::sleep(
        (SERVER_DELAY + Duration::from_millis(700)).saturating_sub(called.elapsed()),
    );
    assert_eq!(
        fixture.effects(),
        0,
        "the server wrote after its host was killed by {signal}"
    );
}

#[test]
fn server_dies_when_its_host_is_sigkilled() {
    server_dies_when_host_gets(Signal::SIGKILL);
}

#[test]
fn server_dies_when_its_host_is_sigtermed() {
    server_dies_when_host_gets(Signal::SIGTERM);
}

#[test]
fn server_dies_when_its_host_is_interrupted() {
    server_dies_when_host_gets(Signal::SIGINT);
}

#[test]
fn a_server_started_through_sh_c_dies_when_its_host_is_sigkilled() {
    server_tree_dies_when_host_gets(Signal::SIGKILL, Launch::Shell);
}

#[test]
fn a_server_started_through_setsid_dies_when_its_host_is_sigkilled() {
    server_tree_dies_when_host_gets(Signal::SIGKILL, Launch::Setsid);
}

#[test]
fn a_server_started_through_setsid_dies_when_its_host_is_interrupted() {
    server_tree_dies_when_host_gets(Signal::SIGINT, Launch::Setsid);
}

#[test]
fn a_daemonized_server_dies_when_its_host_is_sigkilled() {
    server_tree_dies_when_host_gets(Signal::SIGKILL, Launch::DoubleFork);
}

#[test]
fn a_daemonized_server_dies_when_its_host_is_interrupted() {
    server_tree_dies_when_host_gets(Signal::SIGINT, Launch::DoubleFork);
}
