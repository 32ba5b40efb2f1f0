//! What `rpr gate` writes on stderr (issue 29, item 4): a level (`-q` only warnings, `-v`
//! also the protocol's small events) and a format (`--log-format json`: one object per line
//! with `time`, `level` and `message`).

use std::io::{Read, Write};
use std::process::Command;

use serde_json::{Value, json};

use super::{
    fault_gate, fault_policy, initialized_with_stderr, interop_support::TempDir, next_reply,
};

/// One session through a gate run with `flags`: a read of `get`, a garbage line (a warning:
/// the gate answers it with a parse error), and an answer to a request the gate never
/// asked (a debug event). Returns the gate's stderr.
fn session(tag: &str, flags: &[&str]) -> String {
    let dir = TempDir::new(tag);
    let policy = fault_policy(&dir);
    let argv = fault_gate(&dir, &policy, "none", &[]);
    let (mut child, mut stdin, mut stdout, mut stderr) = initialized_with_stderr(&argv, flags);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "get", "arguments": {"key": "k"}}});
    writeln!(stdin, "{call}").unwrap();
    let reply = next_reply(&mut stdout, &json!(1));
    assert_ne!(reply["result"]["isError"], true, "{reply}");
    writeln!(stdin, "this is not JSON").unwrap();
    let refused = next_reply(&mut stdout, &Value::Null);
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    writeln!(
        stdin,
        r#"{{"jsonrpc": "2.0", "id": "never-asked", "result": {{}}}}"#
    )
    .unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    writeln!(stdin, "{ping}").unwrap();
    next_reply(&mut stdout, &json!(2));
    drop(stdin);
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    assert!(child.wait().unwrap().success(), "{said}");
    said
}

const CALL_ENDED: &str = "completed";
const WARNING: &str = "rpr gate: warning: ";
const DEBUG_EVENT: &str = "answered unknown or expired request";

#[test]
fn by_default_the_gate_says_each_calls_end_and_marks_warnings() {
    let said = session("log-default", &[]);
    assert!(
        said.lines()
            .any(|l| l.starts_with("rpr gate: pathway ") && l.ends_with(CALL_ENDED)),
        "{said}"
    );
    assert!(said.lines().any(|l| l.starts_with(WARNING)), "{said}");
    assert!(!said.contains(DEBUG_EVENT), "{said}");
}

#[test]
fn quiet_keeps_only_warnings_and_verbose_adds_the_protocols_small_events() {
    let quiet = session("log-quiet", &["-q"]);
    assert!(!quiet.is_empty(), "the warning is still said");
    for line in quiet.lines() {
        assert!(
            line.starts_with(WARNING),
            "not a warning under -q: {line}\n{quiet}"
        );
    }
    let verbose = session("log-verbose", &["--verbose"]);
    assert!(verbose.contains(DEBUG_EVENT), "{verbose}");
    assert!(verbose.contains(CALL_ENDED), "{verbose}");
}

#[test]
fn json_format_writes_one_object_per_line_with_time_level_and_message() {
    let said = session("log-json", &["--log-format", "json", "-v"]);
    let mut levels = Vec::new();
    for line in said.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}\n{said}"));
        let time = v["time"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(
            time.len() == 24 && time.ends_with('Z') && &time[10..11] == "T",
            "{line}"
        );
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| !m.starts_with("rpr gate")),
            "{line}"
        );
        levels.push(
            v["level"]
                .as_str()
                .unwrap_or_else(|| panic!("{line}"))
                .to_owned(),
        );
    }
    for level in ["warn", "info", "debug"] {
        assert!(levels.iter().any(|l| l == level), "no {level} line: {said}");
    }
    let out = Command::new(super::RPR)
        .args([
            "gate",
            "-q",
            "-v",
            "--database",
            "x",
            "--policy",
            "y",
            "--name",
            "z",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "-q and -v together are bad usage"
    );
}

/// A gate whose stderr's reader has gone (`rpr gate … 2>&1 | head -1`, a log collector that
/// died) keeps serving: a line it cannot log is dropped. Before, the gate's first line to
/// stderr panicked (`eprintln!` on a closed pipe), and the gate ended without answering.
#[test]
fn a_gate_whose_stderr_reader_is_gone_keeps_serving_and_ends_cleanly() {
    let dir = TempDir::new("log-closed");
    let policy = fault_policy(&dir);
    let argv = fault_gate(&dir, &policy, "none", &[]);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The read end of the gate's stderr, closed before the gate writes anything to it.
    drop(child.stderr.take());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    next_reply(&mut stdout, &json!(0));
    // Each governed read ends with a line on stderr at the default level.
    for id in 1..=3 {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "get", "arguments": {"key": "k"}}});
        writeln!(stdin, "{call}").unwrap();
        let reply = next_reply(&mut stdout, &json!(id));
        assert_eq!(
            reply["result"]["_meta"]["dev.rpr/pathway"]["state"], "completed",
            "{reply}"
        );
    }
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// A host that pipes the gate's stderr and does not read it (the spec lets a client ignore
/// a server's log): once the pipe is full a write to it blocks, and the gate must not wait
/// for it. Here the pipe is full before the gate starts. Before, the first call's line
/// blocked its worker before the answer was written, and every call after it the same
/// (with a pipe filled by the gate's own lines, the 1,167th call was not answered). The
/// lines wait in the gate's queue and are written once the pipe is read again, before
/// the gate ends; past the queue's length a line is dropped, and the gate says how many
/// were.
#[test]
fn a_gate_whose_stderr_is_not_read_keeps_answering_and_writes_its_lines_once_it_is() {
    use nix::fcntl::{FcntlArg, fcntl};
    let dir = TempDir::new("log-unread");
    let policy = fault_policy(&dir);
    let argv = fault_gate(&dir, &policy, "none", &[]);
    let (mut unread, mut full) = std::io::pipe().unwrap();
    let capacity = usize::try_from(fcntl(&full, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap();
    full.write_all(&vec![b'.'; capacity]).unwrap();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(full)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The gate's answers, read on a thread so that a gate that stopped answering fails
    // the test instead of hanging it.
    let (answers, answered) = std::sync::mpsc::channel();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut stdout, &mut line).unwrap_or(0) > 0 {
            let _ = answers.send(std::mem::take(&mut line));
        }
    });
    let mut answer_to = |id: i64| loop {
        let Ok(line) = answered.recv_timeout(std::time::Duration::from_secs(20)) else {
            let _ = child.kill();
            panic!("no answer to request {id} within 20 s: the gate waits for its stderr");
        };
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    answer_to(0);
    // More lines than the gate keeps waiting (1,024): the rest are dropped and counted.
    let calls: usize = 1_100;
    for id in 1..=i64::try_from(calls).unwrap() {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "get", "arguments": {"key": "k"}}});
        writeln!(stdin, "{call}").unwrap();
        let reply = answer_to(id);
        assert_eq!(
            reply["result"]["_meta"]["dev.rpr/pathway"]["state"], "completed",
            "{reply}"
        );
    }
    drop(stdin);
    // Read again: what filled the pipe, then the gate's lines, all of them, then its end.
    let mut said = Vec::new();
    unread.read_to_end(&mut said).unwrap();
    assert!(child.wait().unwrap().success());
    let said = String::from_utf8(said.split_off(capacity)).unwrap();
    let ended = said
        .lines()
        .filter(|l| l.starts_with("rpr gate: pathway ") && l.ends_with(CALL_ENDED))
        .count();
    let dropped: usize = said
        .lines()
        .filter_map(|l| {
            l.strip_prefix(WARNING)?
                .strip_suffix(" log line(s) were dropped: stderr was not being read, and the gate does not wait for it")?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert!(dropped > 0, "{said}");
    // Every line was written or counted as dropped (the dropped ones may include the
    // gate's other lines, such as its server's start).
    assert!(
        ended >= 1_000 && ended + dropped >= calls,
        "{ended} + {dropped}: {said}"
    );
    assert!(
        said.lines()
            .last()
            .unwrap()
            .starts_with("rpr gate: stopped"),
        "{said}"
    );
}
