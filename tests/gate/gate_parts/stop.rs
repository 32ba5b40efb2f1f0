//! `rpr gate` stopped by `SIGTERM` or `SIGINT` (issue 29, item 4): it takes no new request,
//! lets the call in flight finish, be recorded and be answered, and exits by itself without
//! waiting for the client to close its stdin. A second signal stops it at once.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

use super::{
    fault_gate, fault_policy, initialized_with_stderr, interop_support::TempDir, next_reply, store,
};

fn stopped_with(signal: Signal, tag: &str) {
    let dir = TempDir::new(tag);
    let policy = fault_policy(&dir);
    // `put` takes two seconds on the server.
    let argv = fault_gate(&dir, &policy, "slow", &["--sleep-ms", "2000"]);
    let (mut child, mut stdin, mut stdout, mut stderr) = initialized_with_stderr(&argv, &[]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "put", "arguments": {"key": "k", "value": "v"}}});
    writeln!(stdin, "{call}").unwrap();
    // Wait until its attempt is recorded in flight: the server has it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        let found = dir
            .join("rpr.db")
            .exists()
            .then(|| store(&dir))
            .and_then(|s| {
                let list = s.list_pathways(None, 10, None).ok()?;
                let p = list.into_iter().find(|p| p.state == rpr::State::Running)?;
                Some(p.id)
            });
        if let Some(id) = found {
            break id;
        }
        assert!(Instant::now() < deadline, "the call never went out");
        std::thread::sleep(Duration::from_millis(20));
    };
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), signal).unwrap();
    // A request after the signal is refused, not served.
    std::thread::sleep(Duration::from_millis(300));
    let late = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get", "arguments": {"key": "k"}}});
    writeln!(stdin, "{late}").unwrap();
    let refused = next_reply(&mut stdout, &json!(2));
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the gate is stopping")),
        "{refused}"
    );
    // The call in flight is answered with its outcome.
    let answered = next_reply(&mut stdout, &json!(1));
    assert_eq!(
        answered["result"]["_meta"]["dev.rpr/pathway"]["state"], "completed",
        "{answered}"
    );
    // The gate exits by itself, its stdin still open, and says why.
    let waited = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "the gate did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130), "{status:?}");
    drop(stdin);
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    assert!(
        said.contains("stopping: no new requests are taken"),
        "{said}"
    );
    let s = store(&dir);
    assert_eq!(
        s.pathway(&id).unwrap().unwrap().state,
        rpr::State::Completed
    );
    assert_eq!(s.attempts(&id).unwrap().len(), 1);
}

#[test]
fn sigterm_stops_the_gate_after_answering_the_call_in_flight() {
    stopped_with(Signal::SIGTERM, "stop-term");
}

#[test]
fn sigint_stops_the_gate_after_answering_the_call_in_flight() {
    stopped_with(Signal::SIGINT, "stop-int");
}
