//! The gate toward clients of both protocol eras (issue 26, item 1): the official Python
//! SDK's `Client` in its default mode (it probes `server/discover`) and pinned to
//! 2026-07-28, and the revision's wire typed by hand: `server/discover`, the shaped results,
//! the Human Gate as a multi round-trip request whose `requestState` a client can neither
//! forge, move to another request, nor use once it expired or its pathway moved on.

use super::*;

/// Issue 26: `Client` (mode auto) sent `server/discover`, the gate passed it to the server
/// (-32601), and the session died; `Client(mode="2026-07-28")` never connected. Both now
/// read, and write through the Human Gate asked as `input_required`: accepted once and
/// written once after its readback, declined and denied, cancelled and left at the gate.
#[test]
fn the_python_sdk_client_reads_and_writes_through_the_gate_in_both_of_its_modes() {
    for client in ["auto", "2026-07-28"] {
        let (dir, root, gate) = files_setup(&format!("gate-era-{client}"));
        std::fs::write(root.join("a.txt"), "hello\n").unwrap();
        let read = sdk_as(
            client,
            "plain",
            "read_text_file",
            &json!({"path": root.join("a.txt")}),
            &gate,
        );
        assert_eq!(read["protocol_version"], "2026-07-28", "{client}: {read}");
        assert_eq!(read["result"]["is_error"], false, "{client}: {read}");
        assert_eq!(read["result"]["text"], "hello\n");
        let tools = read["tools"].as_array().unwrap();
        let mut sorted = tools.clone();
        sorted.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        assert_eq!(
            *tools, sorted,
            "{client}: a deterministic (sorted) tool order"
        );
        assert_eq!(state(&dir, &pathway_of(&read["result"])), State::Completed);

        let b = root.join("b.txt");
        let wrote = sdk_as(
            client,
            "accept",
            "write_file",
            &json!({"path": b, "content": "B1"}),
            &gate,
        );
        assert_eq!(
            wrote["elicitations"].as_array().unwrap().len(),
            1,
            "{wrote}"
        );
        let message = wrote["elicitations"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("write_file") && message.contains("\"B1\""),
            "{message}"
        );
        assert_eq!(wrote["result"]["is_error"], false, "{client}: {wrote}");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "B1");
        let id = pathway_of(&wrote["result"]);
        assert_eq!(state(&dir, &id), State::Completed, "{client}");
        assert_eq!(
            store(&dir).attempts(&id).unwrap().len(),
            1,
            "{client}: sent once"
        );

        for (scenario, name, want) in [
            ("decline", "c.txt", State::Denied),
            ("cancel", "d.txt", State::HumanGate),
        ] {
            let f = root.join(name);
            let report = sdk_as(
                client,
                scenario,
                "write_file",
                &json!({"path": f, "content": "X"}),
                &gate,
            );
            assert_eq!(
                report["result"]["is_error"], true,
                "{client} {scenario}: {report}"
            );
            assert!(!f.exists(), "{client} {scenario}: nothing written");
            let id = pathway_of(&report["result"]);
            assert_eq!(state(&dir, &id), want, "{client} {scenario}");
            assert!(store(&dir).attempts(&id).unwrap().is_empty());
        }

        // A client that cannot show a form is told how to approve, as under 2025-11-25.
        let plain = sdk_as(
            client,
            "plain",
            "write_file",
            &json!({"path": root.join("e.txt"), "content": "E"}),
            &gate,
        );
        let said = plain["result"]["text"].as_str().unwrap();
        assert!(said.contains("rpr approve"), "{client}: {said}");
    }
}

/// A 2026-07-28 session typed by hand: no `initialize`, every request with `_meta`.
struct Modern {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
    /// Responses read while waiting for another one.
    early: Vec<Value>,
    /// Notifications read while waiting, in order.
    notes: Vec<Value>,
}

impl Modern {
    fn start(gate: &[String]) -> Self {
        let mut child = Command::new(&gate[0])
            .args(&gate[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next: 0,
            early: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Sends `method` with `params` and the revision's `_meta` (version `version`), and
    /// returns the request's id.
    fn send_at(&mut self, version: &str, method: &str, mut params: Value) -> u64 {
        self.next += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        });
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        id
    }

    /// The response to request `id` (responses to other requests are kept for later).
    fn wait(&mut self, id: u64) -> Value {
        loop {
            if let Some(at) = self.early.iter().position(|m| m["id"] == id) {
                return self.early.remove(at);
            }
            let mut got = String::new();
            assert!(
                self.stdout.read_line(&mut got).unwrap() > 0,
                "the gate closed its stdout"
            );
            let message: Value = serde_json::from_str(&got).unwrap();
            assert!(
                message.get("id").is_none() || message.get("method").is_none(),
                "no request reaches a 2026-07-28 client: {message}"
            );
            if message.get("id").is_some() {
                self.early.push(message);
            } else {
                self.notes.push(message);
            }
        }
    }

    /// Sends `method` declaring `capabilities` (instead of form elicitation) and waits for
    /// its response.
    fn ask_declaring(&mut self, method: &str, mut params: Value, capabilities: &Value) -> Value {
        self.next += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.wait(id)
    }

    /// Sends `method` asking for log level `level` (none: no `logLevel`) and waits for its
    /// response.
    fn ask_logging(&mut self, method: &str, mut params: Value, level: Option<&str>) -> Value {
        self.next += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        if let Some(level) = level {
            params["_meta"]["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.wait(id)
    }

    /// Sends `method` and waits for its response.
    fn ask_at(&mut self, version: &str, method: &str, params: Value) -> Value {
        let id = self.send_at(version, method, params);
        self.wait(id)
    }

    fn ask(&mut self, method: &str, params: Value) -> Value {
        self.ask_at("2026-07-28", method, params)
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// An answer that comes back for a form that showed another binding than the tool is
/// pinned as now (the server changed and the change was pinned while the form was out)
/// approves nothing: nothing is recorded, the pathway stays at the gate at its version, and
/// the person is shown the tool as it is now; approved there, the call is sent once.
#[test]
fn an_answer_to_a_form_of_a_binding_pinned_no_more_approves_nothing_and_asks_again() {
    let dir = TempDir::new("gate-era-stale-form");
    let policy = gated_put_policy(&dir);
    let pid_file = dir.join("server.pid").display().to_string();
    let (mode, server) = switchable_fault(&dir, &["--pid-file", &pid_file]);
    let gate = gate_argv(&dir, &policy, "faults", &server);
    let mut s = Modern::start(&gate);
    let put = || json!({"name": "put", "arguments": {"key": "k", "value": "v"}});
    let asked = s.ask("tools/call", put());
    let r = &asked["result"];
    assert_eq!(r["resultType"], "input_required", "{asked}");
    let (id, first) = (pathway_of(r), r["requestState"].clone());
    let shown = store(&dir).pin_digest("faults", "put").unwrap().unwrap();
    let version = store(&dir).pathway(&id).unwrap().unwrap().version;

    // While the form is out, the server is replaced by one whose `put` changed, and the
    // change is reviewed and pinned.
    std::fs::write(&mode, "change-schema").unwrap();
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Until the gate has seen its server go and started the new one, a call could still be
    // checked against the tool list it kept (CI found that race): list until the new
    // server's pid is written.
    let restarted = (0..100).any(|_| {
        let _ = s.ask("tools/list", json!({}));
        let now = std::fs::read_to_string(&pid_file).unwrap_or_default();
        if !now.trim().is_empty() && now.trim() != pid.trim() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
        false
    });
    assert!(restarted, "the gate did not start its server again");
    let refused = s.ask("tools/call", accepting(put(), &first, true));
    let said = refused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(said.contains("not the one pinned"), "{refused}");
    let pinned = pin(&dir, "faults", "put", named_digest(said));
    assert!(pinned.status.success(), "{}", text(&pinned));
    let now = store(&dir).pin_digest("faults", "put").unwrap().unwrap();
    assert_ne!(now, shown);

    // The answer to the form of the old binding: nothing recorded, asked again.
    let again = s.ask("tools/call", accepting(put(), &first, true));
    let r = &again["result"];
    assert_eq!(r["resultType"], "input_required", "{again}");
    let message = r["inputRequests"]["rpr_approval"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains(&now),
        "the form shows the tool as it is: {message}"
    );
    assert!(approval_bindings(&dir, &id).is_empty(), "nothing recorded");
    assert_eq!(state(&dir, &id), State::HumanGate);
    assert_eq!(
        store(&dir).pathway(&id).unwrap().unwrap().version,
        version,
        "not moved"
    );
    assert_eq!(effects(&dir), 0);

    let done = s.ask("tools/call", accepting(put(), &r["requestState"], true));
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(approval_bindings(&dir, &id), [Some(now)]);
    assert_eq!(effects(&dir), 1, "sent once");
    assert_eq!(state(&dir, &id), State::Completed);
    s.stop();
}

/// A retry's answer is used once. A grant that leaves a quorum short does not move the
/// pathway, so the form's `requestState` still checks; sent again once that grant had
/// expired, the same answer recorded a new approval the policy had stopped counting, and
/// with another approver's the call was sent. Now it approves nothing and asks again.
#[test]
fn a_form_answer_sent_again_after_its_approval_expired_approves_nothing() {
    let dir = TempDir::new("gate-era-replay");
    let path = gated_put_policy(&dir);
    let mut policy: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    policy["approval"] = json!({"approvers": ["bob"], "quorum": 2});
    policy["approval_ttl"] = json!(3);
    std::fs::write(&path, policy.to_string()).unwrap();
    let mut s = Modern::start(&fault_gate(&dir, &path, "none", &[]));
    let put = || json!({"name": "put", "arguments": {"key": "k", "value": "v"}});
    let asked = s.ask("tools/call", put());
    let r = &asked["result"];
    assert_eq!(r["resultType"], "input_required", "{asked}");
    let (id, form) = (pathway_of(r), r["requestState"].clone());

    // alice's answer: one approval of two.
    let first = s.ask("tools/call", accepting(put(), &form, true));
    assert_eq!(first["result"]["isError"], true, "{first}");
    assert_eq!(approval_bindings(&dir, &id).len(), 1);
    // It expires; bob approves; the quorum is still short.
    std::thread::sleep(Duration::from_millis(3300));
    let db = dir.join("rpr.db").display().to_string();
    let bob = rpr(&[
        "approve",
        "--database",
        &db,
        "--pathway",
        &id,
        "--as",
        "bob",
    ]);
    assert_eq!(bob.status.code(), Some(3), "{}", text(&bob));
    assert_eq!(state(&dir, &id), State::HumanGate);

    // alice's old answer again: nothing recorded, nothing sent, asked again.
    let replay = s.ask("tools/call", accepting(put(), &form, true));
    let r = &replay["result"];
    assert_eq!(r["resultType"], "input_required", "{replay}");
    assert_eq!(
        approval_bindings(&dir, &id).len(),
        2,
        "alice's first and bob's"
    );
    assert_eq!(state(&dir, &id), State::HumanGate);
    assert_eq!(
        effects(&dir),
        0,
        "nothing sent on an answer the policy stopped counting"
    );

    // Answered in the new form, alice's approval counts beside bob's: sent once.
    let done = s.ask("tools/call", accepting(put(), &r["requestState"], true));
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(effects(&dir), 1, "sent once");
    assert_eq!(state(&dir, &id), State::Completed);
    s.stop();
}

/// The form's one field decides: an `accept` without a boolean `approve` says neither yes
/// nor no. It was recorded as a denial ("declined at the client's Human Gate"); it now
/// records nothing, and the pathway waits at the gate.
#[test]
fn an_accepted_form_without_a_yes_or_no_records_nothing() {
    let dir = TempDir::new("gate-era-no-answer");
    let path = gated_put_policy(&dir);
    let mut s = Modern::start(&fault_gate(&dir, &path, "none", &[]));
    let put = || json!({"name": "put", "arguments": {"key": "k", "value": "v"}});
    for (n, content) in [json!({}), json!({"approve": "true"})]
        .into_iter()
        .enumerate()
    {
        let asked = s.ask("tools/call", put());
        let r = &asked["result"];
        assert_eq!(r["resultType"], "input_required", "{asked}");
        let id = pathway_of(r);
        let mut call = put();
        call["requestState"] = r["requestState"].clone();
        call["inputResponses"] = json!({"rpr_approval": {"action": "accept", "content": content}});
        let answered = s.ask("tools/call", call);
        let said = answered["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(answered["result"]["isError"], true, "{answered}");
        assert!(said.contains("without a yes or no"), "{said}");
        assert_eq!(state(&dir, &id), State::HumanGate, "answer {n}: {said}");
        assert!(
            events(&dir, &id).iter().all(|e| e["kind"] != "denied"),
            "answer {n}: nothing recorded"
        );
    }
    assert_eq!(effects(&dir), 0);
    s.stop();
}

fn write_call(path: &Path, content: &str) -> Value {
    json!({"name": "write_file", "arguments": {"path": path, "content": content}})
}

fn accepting(mut call: Value, state: &Value, approve: bool) -> Value {
    call["requestState"] = state.clone();
    call["inputResponses"] =
        json!({"rpr_approval": {"action": "accept", "content": {"approve": approve}}});
    call
}

/// The revision's wire: `server/discover` and `tools/list` answered by the gate with
/// `resultType`, `ttlMs` and `cacheScope`; an unknown version refused with -32022; the
/// Human Gate as `input_required` whose `requestState` is refused when altered or moved to
/// other arguments (nothing recorded, nothing sent), and whose accepted retry writes once,
/// after which a replay of that same retry is answered from the pathway, not sent again.
#[test]
fn a_2026_07_28_client_gets_the_revisions_results_and_an_unforgeable_human_gate() {
    let (dir, root, gate) = files_setup("gate-era-wire");
    let mut s = Modern::start(&gate);

    let found = s.ask("server/discover", json!({}));
    let r = &found["result"];
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]), "{found}");
    assert_eq!(r["resultType"], "complete");
    assert!(
        r["ttlMs"].is_u64() && r["cacheScope"] == "private",
        "{found}"
    );
    assert!(r["capabilities"]["tools"].is_object(), "{found}");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "rpr-gate"
    );

    let refused = s.ask_at("2099-01-01", "tools/list", json!({}));
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["supported"], json!(["2026-07-28"]));

    let listed = s.ask("tools/list", json!({}));
    let r = &listed["result"];
    assert_eq!(r["resultType"], "complete");
    assert!(
        r["ttlMs"].is_u64() && r["cacheScope"] == "private",
        "{listed}"
    );
    assert!(!r["tools"].as_array().unwrap().is_empty());

    let f = root.join("f.txt");
    let asked = s.ask("tools/call", write_call(&f, "F1"));
    let r = &asked["result"];
    assert_eq!(r["resultType"], "input_required", "{asked}");
    let form = &r["inputRequests"]["rpr_approval"];
    assert_eq!(form["method"], "elicitation/create");
    assert_eq!(form["params"]["mode"], "form");
    assert!(
        form["params"]["message"]
            .as_str()
            .unwrap()
            .contains("\"F1\"")
    );
    let state_value = r["requestState"].clone();
    let token = state_value.as_str().unwrap().to_owned();
    let id = pathway_of(r);
    assert_eq!(state(&dir, &id), State::HumanGate);

    // Altered: one character of the tag, or the pathway it names.
    let flipped = {
        let mut t = token.clone().into_bytes();
        let last = t.len() - 1;
        t[last] = if t[last] == b'0' { b'1' } else { b'0' };
        String::from_utf8(t).unwrap()
    };
    let forged = token.replace(&id, "pw_00000000000000000000");
    for bad in [flipped, forged, "anything".to_owned()] {
        let answer = s.ask(
            "tools/call",
            accepting(write_call(&f, "F1"), &json!(bad), true),
        );
        assert_eq!(answer["error"]["code"], -32602, "{bad}: {answer}");
    }
    // Moved to other arguments.
    let g = root.join("g.txt");
    let moved = s.ask(
        "tools/call",
        accepting(write_call(&g, "G"), &state_value, true),
    );
    let said = moved["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("another request"), "{moved}");
    assert!(!f.exists() && !g.exists(), "nothing sent");
    assert_eq!(state(&dir, &id), State::HumanGate);
    assert!(store(&dir).attempts(&id).unwrap().is_empty());

    // The real retry: approved, sent once, read back.
    let done = s.ask(
        "tools/call",
        accepting(write_call(&f, "F1"), &state_value, true),
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "F1");
    assert_eq!(state(&dir, &id), State::Completed);
    // The approval is of the binding the form showed, which its state carried.
    let pinned = store(&dir).pin_digest("files", "write_file").unwrap();
    assert_eq!(super::approval_bindings(&dir, &id), [pinned]);

    // The same retry again (a replay, or a client that lost the answer): not sent again.
    std::fs::write(&f, "changed since").unwrap();
    let again = s.ask(
        "tools/call",
        accepting(write_call(&f, "F1"), &state_value, false),
    );
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1, "sent once");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "changed since");
    assert_eq!(state(&dir, &id), State::Completed);
    s.stop();
}

/// An answer to the gate's form holds for the gating it was asked in. Here the pathway is
/// approved out of band, held and escalated back to the gate before the client's retry: it
/// is at the gate again, at another version, so the retry's answer (its `requestState`
/// still valid) approves nothing; the person is asked again, and only that answer sends
/// the call, once.
#[test]
fn an_answer_replayed_after_its_pathway_left_the_gate_and_came_back_is_asked_again() {
    let (dir, root, gate) = files_setup("gate-era-regated");
    let mut s = Modern::start(&gate);
    let f = root.join("f.txt");
    let asked = s.ask("tools/call", write_call(&f, "F"));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state_value = asked["result"]["requestState"].clone();
    let id = pathway_of(&asked["result"]);
    let db = dir.join("rpr.db").display().to_string();
    // `approve` of a gate pathway exits 3: the gate sends it when the client repeats the
    // call. `hold` and `escalate` exit 0: their step is done.
    for (step, code) in [
        (vec!["approve", "--as", "alice"], 3),
        (
            vec!["hold", "--as", "host", "--reason", "a fresh decision"],
            0,
        ),
        (vec!["escalate", "--as", "host"], 0),
    ] {
        let mut args = vec![step[0], "--database", &db, "--pathway", &id];
        args.extend(&step[1..]);
        let out = rpr(&args);
        assert_eq!(out.status.code(), Some(code), "{step:?}: {}", text(&out));
    }
    assert_eq!(state(&dir, &id), State::HumanGate);

    let replay = s.ask(
        "tools/call",
        accepting(write_call(&f, "F"), &state_value, true),
    );
    assert_eq!(
        replay["result"]["resultType"], "input_required",
        "the old answer approves nothing: {replay}"
    );
    assert_eq!(pathway_of(&replay["result"]), id);
    assert_ne!(replay["result"]["requestState"], state_value);
    assert!(!f.exists(), "nothing sent");
    assert!(store(&dir).attempts(&id).unwrap().is_empty());
    assert_eq!(state(&dir, &id), State::HumanGate);

    let fresh = replay["result"]["requestState"].clone();
    let done = s.ask("tools/call", accepting(write_call(&f, "F"), &fresh, true));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "F");
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1, "sent once");
    s.stop();
}

/// A `requestState` lives as long as a form would wait (`--approval-timeout`): an expired
/// one is refused and records nothing; the call made again without it asks again.
#[test]
fn an_expired_request_state_is_refused_and_the_call_asks_again() {
    let (dir, root, mut gate) = files_setup("gate-era-expiry");
    let at = gate.iter().position(|a| a == "--").unwrap();
    gate.splice(at..at, ["--approval-timeout".to_owned(), "1".to_owned()]);
    let mut s = Modern::start(&gate);
    let f = root.join("f.txt");
    let asked = s.ask("tools/call", write_call(&f, "F"));
    let state_value = asked["result"]["requestState"].clone();
    let id = pathway_of(&asked["result"]);
    std::thread::sleep(Duration::from_millis(1300));
    let late = s.ask(
        "tools/call",
        accepting(write_call(&f, "F"), &state_value, true),
    );
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("expired"),
        "{late}"
    );
    assert!(!f.exists());
    assert_eq!(state(&dir, &id), State::HumanGate);
    let again = s.ask("tools/call", write_call(&f, "F"));
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(
        pathway_of(&again["result"]),
        id,
        "the same pathway, asked again"
    );
    assert_ne!(again["result"]["requestState"], state_value);
    s.stop();
}

/// Identical calls share one form in the 2026-07-28 era too: while the first call's form is
/// out (`input_required`, no call holding the pathway), an identical call waits for its
/// answer instead of raising a second form, then gets the pathway's result: one form, one
/// send.
#[test]
fn identical_2026_07_28_calls_share_one_form() {
    let (dir, root, gate) = files_setup("gate-era-share");
    let mut s = Modern::start(&gate);
    let f = root.join("f.txt");
    let asked = s.ask("tools/call", write_call(&f, "F"));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state_value = asked["result"]["requestState"].clone();
    let id = pathway_of(&asked["result"]);
    let second = s.send_at("2026-07-28", "tools/call", write_call(&f, "F"));
    std::thread::sleep(Duration::from_millis(500));
    let done = s.ask(
        "tools/call",
        accepting(write_call(&f, "F"), &state_value, true),
    );
    assert_ne!(done["result"]["isError"], true, "{done}");
    let second = s.wait(second);
    assert_eq!(
        second["result"]["resultType"], "complete",
        "no second form: {second}"
    );
    assert_ne!(second["result"]["isError"], true, "{second}");
    assert_eq!(pathway_of(&second["result"]), id);
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1, "sent once");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "F");
    s.stop();
}

/// A 2026-07-28 server's own `input_required` on a request the gate passes through
/// (`prompts/get`, not governed): it reaches a 2026-07-28 client as the server gave it (its
/// input requests and `requestState`), the client's retries (a new id each, its
/// `inputResponses` and the server's `requestState`) go back to the server, and the last
/// round's result is the answer. The client's capabilities reach the server with each
/// request (the fault server asks only a request whose client declared elicitation, as the
/// revision says), so a client that declared none is not asked.
#[test]
fn a_servers_input_required_on_a_passed_through_request_reaches_a_2026_07_28_client() {
    let dir = TempDir::new("gate-era-pass-mrtr");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(
        &dir,
        &policy,
        "none",
        &[
            "--era",
            "modern",
            "--input-required",
            "2",
            "--request-log",
            &log_arg,
        ],
    );
    let mut client = Modern::start(&gate);
    let prompt = json!({"name": "confirm", "arguments": {"key": "k"}});
    let mut states = Vec::new();
    let mut params = prompt.clone();
    for round in 1..=2 {
        let asked = client.ask("prompts/get", params.clone());
        let result = &asked["result"];
        assert_eq!(
            result["resultType"], "input_required",
            "round {round}: {asked}"
        );
        let request = &result["inputRequests"]["confirm"];
        assert_eq!(request["method"], "elicitation/create", "{asked}");
        assert!(
            request["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("round {round} of 2"))),
            "{asked}"
        );
        assert!(result.get("ttlMs").is_none(), "an interim result: {asked}");
        let state = result["requestState"].clone();
        assert!(state.is_string(), "{asked}");
        states.push(state.clone());
        params = prompt.clone();
        params["inputResponses"] =
            json!({"confirm": {"action": "accept", "content": {"ok": true}}});
        params["requestState"] = state;
    }
    let done = client.ask("prompts/get", params.clone());
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"], "confirmed k",
        "{done}"
    );

    // A declined answer is the server's to act on: passed back as it answered.
    params["inputResponses"] = json!({"confirm": {"action": "decline"}});
    params["requestState"] = states[0].clone();
    let declined = client.ask("prompts/get", params);
    assert_eq!(
        declined["result"]["messages"][0]["content"]["text"], "the person answered decline",
        "{declined}"
    );

    // A client that declared no elicitation: the server is told so, and does not ask.
    let plain = client.ask_declaring("prompts/get", prompt, &json!({}));
    assert!(
        plain["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not declare elicitation")),
        "{plain}"
    );
    client.stop();

    let received: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["method"] == "prompts/get")
        .collect();
    assert_eq!(received.len(), 5, "{received:?}");
    let capabilities: Vec<&Value> = received
        .iter()
        .map(|r| &r["meta"]["io.modelcontextprotocol/clientCapabilities"])
        .collect();
    for declared in &capabilities[..4] {
        assert_eq!(
            **declared,
            json!({"elicitation": {"form": {}}}),
            "{received:?}"
        );
    }
    assert_eq!(*capabilities[4], json!({}), "{received:?}");
}

/// The same server's `input_required` to a 2025-era client, which reads none: the gate
/// answers the rounds itself, passing each input request to the client as a request of the
/// server's (`elicitation/create`, as a 2025-11-25 server would send it), and sends the
/// request again with the client's answer; the client gets the last round's result.
#[test]
fn a_servers_input_required_on_a_passed_through_request_is_asked_of_a_2025_client() {
    let dir = TempDir::new("gate-era-pass-mrtr-legacy");
    let policy = fault_policy(&dir);
    let gate = fault_gate(
        &dir,
        &policy,
        "none",
        &["--era", "modern", "--input-required", "2"],
    );
    let (mut child, mut stdin, mut stdout, _) =
        raw_session_declaring(&gate, &json!({"elicitation": {}}));
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
        "params": {"name": "confirm", "arguments": {"key": "k"}}});
    writeln!(stdin, "{get}").unwrap();
    for round in 1..=2 {
        let asked = next_message(&mut stdout);
        assert_eq!(
            asked["method"], "elicitation/create",
            "round {round}: {asked}"
        );
        assert!(
            asked["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("round {round} of 2"))),
            "{asked}"
        );
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "accept", "content": {"ok": true}}});
        writeln!(stdin, "{answer}").unwrap();
    }
    let done = next_reply(&mut stdout, &json!(2));
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"], "confirmed k",
        "{done}"
    );
    drop(stdin);
    child.wait().unwrap();
}

/// 2026-07-28's per-request `logLevel` (the revision removed `logging/setLevel`; a client
/// that asks for no level gets no `notifications/message`). Behind the gate a 2025-era
/// server logs every `get`: its log message reaches the 2026-07-28 client only while a
/// request asked for that level or a less severe one. A 2026-07-28 server gets the level
/// the client asked for, with a governed call and with a request passed through, and logs
/// (or not) by it.
#[test]
fn a_2026_07_28_clients_log_level_bounds_the_log_it_gets_and_reaches_the_server() {
    let get = json!({"name": "get", "arguments": {"key": "k"}});
    let logs = |client: &Modern| {
        client
            .notes
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .count()
    };

    let dir = TempDir::new("gate-era-log-legacy");
    let policy = fault_policy(&dir);
    let gate = fault_gate(&dir, &policy, "log-on-get", &[]);
    let mut client = Modern::start(&gate);
    for (level, logged) in [
        (None, 0),
        (Some("info"), 1),
        (Some("error"), 0),
        (Some("debug"), 1),
    ] {
        client.notes.clear();
        let answer = client.ask_logging("tools/call", get.clone(), level);
        assert_ne!(answer["result"]["isError"], true, "{answer}");
        assert_eq!(logs(&client), logged, "{level:?}: {:?}", client.notes);
    }
    client.stop();

    let dir = TempDir::new("gate-era-log-modern");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(
        &dir,
        &policy,
        "log-on-get",
        &["--era", "modern", "--request-log", &log_arg],
    );
    let mut client = Modern::start(&gate);
    for (level, logged) in [(Some("debug"), 1), (None, 0)] {
        client.notes.clear();
        let answer = client.ask_logging("tools/call", get.clone(), level);
        assert_ne!(answer["result"]["isError"], true, "{answer}");
        assert_eq!(logs(&client), logged, "{level:?}: {:?}", client.notes);
    }
    let passed = client.ask_logging("resources/list", json!({}), Some("warning"));
    assert!(
        passed.get("error").is_some(),
        "the server has no resources: {passed}"
    );
    client.stop();
    let received: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let levels: Vec<(&str, &Value)> = received
        .iter()
        .filter(|r| r["method"] == "tools/call" || r["method"] == "resources/list")
        .map(|r| {
            (
                r["method"].as_str().unwrap(),
                &r["meta"]["io.modelcontextprotocol/logLevel"],
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            ("tools/call", &json!("debug")),
            ("tools/call", &Value::Null),
            ("resources/list", &json!("warning")),
        ],
        "{received:?}"
    );
}

/// The requests a fault server's `--request-log` recorded.
fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// For each `tools/call` a server received, the level of the last `logging/setLevel` it
/// received before it (`None`: none yet).
fn levels_at_calls(received: &[Value]) -> Vec<Option<String>> {
    let mut level = None;
    let mut at_calls = Vec::new();
    for r in received {
        match r["method"].as_str() {
            Some("logging/setLevel") => level = r["level"].as_str().map(str::to_owned),
            Some("tools/call") => at_calls.push(level.clone()),
            _ => {}
        }
    }
    at_calls
}

/// The levels a server was set to, in order.
fn set_levels(received: &[Value]) -> Vec<String> {
    received
        .iter()
        .filter(|r| r["method"] == "logging/setLevel")
        .map(|r| r["level"].as_str().unwrap().to_owned())
        .collect()
}

/// Issue 26 (c): a 2025-era server has one log level for its session; a 2026-07-28 client
/// names one per request. Behind the gate, a server that declared `logging` is set with
/// `logging/setLevel` to the least severe level the requests in flight ask for, before the
/// request that needs it reaches the server, and raised to `emergency` once no request
/// asks for one; a request in flight that asks for a less severe level keeps it there.
/// A server that did not declare `logging` gets no `logging/setLevel`. What reaches the
/// client is still filtered per request.
#[test]
fn a_2025_server_is_set_to_the_least_severe_level_the_2026_07_28_requests_in_flight_ask_for() {
    let get = json!({"name": "get", "arguments": {"key": "k"}});
    let logs = |client: &Modern| {
        client
            .notes
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .count()
    };

    // One request at a time.
    let dir = TempDir::new("gate-era-setlevel");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(
        &dir,
        &policy,
        "log-on-get",
        &["--logging", "--request-log", &log_arg],
    );
    let mut client = Modern::start(&gate);
    let asked = [
        (Some("info"), 1),
        (None, 0),
        (Some("error"), 0),
        (Some("debug"), 1),
    ];
    for (level, logged) in asked {
        client.notes.clear();
        let answer = client.ask_logging("tools/call", get.clone(), level);
        assert_ne!(answer["result"]["isError"], true, "{answer}");
        assert_eq!(logs(&client), logged, "{level:?}: {:?}", client.notes);
    }
    client.stop();
    let got = received(&log);
    let at_calls = levels_at_calls(&got);
    assert_eq!(at_calls.len(), asked.len(), "{got:?}");
    for ((level, _), set) in asked.iter().zip(&at_calls) {
        if let Some(level) = level {
            assert_eq!(
                set.as_deref(),
                Some(*level),
                "the server's level at the call: {got:?}"
            );
        }
    }
    let set = set_levels(&got);
    assert_eq!(set.last().map(String::as_str), Some("emergency"), "{got:?}");
    assert!(
        set.windows(2).all(|w| w[0] != w[1]),
        "set only when the level changes: {set:?}"
    );
    assert!(set.len() <= 6, "{set:?}");

    // A request in flight that asked for `debug` keeps the server there while another asks
    // for `error`, and the server's `info` message reaches the client meanwhile.
    let dir = TempDir::new("gate-era-setlevel-flight");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let mut gate = fault_gate(
        &dir,
        &policy,
        "log-on-get",
        &["--logging", "--request-log", &log_arg],
    );
    let timeout = gate.iter().position(|a| a == "--call-timeout").unwrap() + 1;
    gate[timeout] = "2".into();
    let mut client = Modern::start(&gate);
    client.next += 1;
    let hang = client.next;
    let line = json!({"jsonrpc": "2.0", "id": hang, "method": "rpr-fault/hang", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/logLevel": "debug"}}});
    writeln!(client.stdin, "{line}").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !received(&log)
        .iter()
        .any(|r| r["method"] == "rpr-fault/hang")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the hang never reached the server"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let answer = client.ask_logging("tools/call", get.clone(), Some("error"));
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(logs(&client), 1, "debug is asked for: {:?}", client.notes);
    let unanswered = client.wait(hang);
    assert!(unanswered.get("error").is_some(), "{unanswered}");
    client.stop();
    let got = received(&log);
    assert_eq!(
        levels_at_calls(&got),
        [Some("debug".to_owned())],
        "the least severe level in flight: {got:?}"
    );
    assert_eq!(set_levels(&got), ["debug", "emergency"], "{got:?}");

    // A server that did not declare `logging` is not set.
    let dir = TempDir::new("gate-era-setlevel-none");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(&dir, &policy, "log-on-get", &["--request-log", &log_arg]);
    let mut client = Modern::start(&gate);
    let answer = client.ask_logging("tools/call", get, Some("debug"));
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(logs(&client), 1, "{:?}", client.notes);
    client.stop();
    let got = received(&log);
    assert!(set_levels(&got).is_empty(), "{got:?}");
    assert_eq!(levels_at_calls(&got).len(), 1, "{got:?}");
}

/// A tool result's text.
fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Issue 26 (a): a 2026-07-28 server's own `input_required` to a 2026-07-28 client's
/// governed `tools/call`. The attempt is recorded before the first round; each round goes
/// to the client as `input_required` with the server's input requests and a `requestState`
/// of the gate's own (an altered one is refused, a used one cannot be replayed), and each
/// retry's answers go to the server as the next round of the same attempt. The call is sent
/// to the server once per round, written once, and the record shows every round.
#[test]
fn a_servers_input_required_on_a_2026_07_28_clients_governed_call_is_carried_within_one_attempt() {
    let dir = TempDir::new("gate-era-call-mrtr");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(
        &dir,
        &policy,
        "none",
        &[
            "--era",
            "modern",
            "--input-required",
            "2",
            "--request-log",
            &log_arg,
        ],
    );
    let puts = || {
        received(&log)
            .into_iter()
            .filter(|r| r["method"] == "tools/call")
            .count()
    };
    let mut client = Modern::start(&gate);
    let put = json!({"name": "put", "arguments": {"key": "k", "value": "v"}});
    // `Modern::wait` fails the test if any request reaches the client.
    let first = client.ask("tools/call", put.clone());
    let asked = &first["result"];
    assert_eq!(asked["resultType"], "input_required", "{first}");
    let request = &asked["inputRequests"]["confirm"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert!(
        request["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("round 1 of 2")),
        "{first}"
    );
    let state1 = asked["requestState"].as_str().unwrap().to_owned();
    assert!(
        !state1.contains("fault-server"),
        "the gate's own state: {state1}"
    );
    // Recorded before the first round was sent: one pathway, in flight, one attempt.
    let id = await_only_pathway(&dir);
    assert_eq!(
        store(&dir).pathway(&id).unwrap().unwrap().state,
        State::Running
    );
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1);
    assert_eq!(puts(), 1);

    // An altered state is refused; nothing is sent.
    let mut altered = state1.clone().into_bytes();
    let at = altered.len() - 1;
    altered[at] = if altered[at] == b'0' { b'1' } else { b'0' };
    let altered = String::from_utf8(altered).unwrap();
    let forged = client.ask("tools/call", accepting_round(put.clone(), &altered));
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    // The state for other arguments is refused too.
    let other = json!({"name": "put", "arguments": {"key": "k", "value": "w"}});
    let moved = client.ask("tools/call", accepting_round(other, &state1));
    assert_eq!(moved["error"]["code"], -32602, "{moved}");
    assert_eq!(puts(), 1, "nothing sent");

    // Round 2.
    let second = client.ask("tools/call", accepting_round(put.clone(), &state1));
    let asked = &second["result"];
    assert_eq!(asked["resultType"], "input_required", "{second}");
    assert!(
        asked["inputRequests"]["confirm"]["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("round 2 of 2")),
        "{second}"
    );
    let state2 = asked["requestState"].as_str().unwrap().to_owned();
    assert_eq!(puts(), 2);
    // A replay of round 1's state finds no open round: nothing is sent.
    let replay = client.ask("tools/call", accepting_round(put.clone(), &state1));
    assert_eq!(replay["error"]["code"], -32602, "{replay}");
    assert!(
        replay["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no longer open")),
        "{replay}"
    );
    assert_eq!(puts(), 2, "a replay sends nothing");

    // The last round: written, read back, completed; the record shows both rounds.
    let done = client.ask("tools/call", accepting_round(put.clone(), &state2));
    let result = &done["result"];
    assert_ne!(result["isError"], true, "{done}");
    assert_eq!(result["resultType"], "complete", "{done}");
    assert_eq!(
        result["_meta"]["dev.rpr/pathway"]["id"],
        id.as_str(),
        "{done}"
    );
    assert_eq!(
        result["_meta"]["dev.rpr/pathway"]["state"], "completed",
        "{done}"
    );
    let rounds = &result["_meta"]["dev.rpr/rounds"];
    assert_eq!(
        *rounds,
        json!([
            {"round": 1, "inputRequests": {"confirm": {"method": "elicitation/create", "action": "accept"}}},
            {"round": 2, "inputRequests": {"confirm": {"method": "elicitation/create", "action": "accept"}}},
        ]),
        "{done}"
    );
    assert_eq!(
        store(&dir).pathway(&id).unwrap().unwrap().state,
        State::Completed
    );
    let attempts = store(&dir).attempts(&id).unwrap();
    assert_eq!(attempts.len(), 1, "every round is one attempt");
    let recorded = attempts[0].outcome.as_ref().unwrap().to_string();
    assert!(
        recorded.contains("dev.rpr/rounds"),
        "the record shows the rounds: {recorded}"
    );
    assert_eq!(
        puts(),
        4,
        "three rounds of `put`, each sent once, and the readback's `get`"
    );
    let effects = std::fs::read_to_string(dir.join("effects.jsonl")).unwrap();
    assert_eq!(effects.lines().count(), 1, "written once: {effects}");

    // The same call again (a new call: the last one completed) after its rounds: a replay of
    // the last state finds no open round either.
    let late = client.ask("tools/call", accepting_round(put, &state2));
    assert_eq!(late["error"]["code"], -32602, "{late}");
    client.stop();
}

/// The same call with its rounds abandoned, or asked of a client that cannot answer them:
/// the server was asked and may have acted, so the call ends **write status unknown**,
/// never failed or not-applied, with the reason in the attempt's record; it is not sent
/// again, and a retry after the round was abandoned is refused.
#[test]
fn a_governed_calls_rounds_abandoned_or_unanswerable_end_unknown() {
    let dir = TempDir::new("gate-era-call-mrtr-abandoned");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let mut gate = fault_gate(
        &dir,
        &policy,
        "none",
        &[
            "--era",
            "modern",
            "--input-required",
            "1",
            "--request-log",
            &log_arg,
        ],
    );
    let timeout = gate.iter().position(|a| a == "--call-timeout").unwrap() + 1;
    gate[timeout] = "2".into();
    let mut client = Modern::start(&gate);

    // Abandoned: the client never retries.
    let put = json!({"name": "put", "arguments": {"key": "a", "value": "v"}});
    let first = client.ask("tools/call", put.clone());
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let id = await_only_pathway(&dir);
    await_state(&dir, &id, State::WriteStatusUnknown);
    let attempts = store(&dir).attempts(&id).unwrap();
    assert_eq!(attempts.len(), 1);
    let why = attempts[0].outcome.as_ref().unwrap().to_string();
    assert!(
        why.contains("did not retry") && why.contains("abandoned"),
        "the record says why: {why}"
    );
    let late = client.ask("tools/call", accepting_round(put.clone(), &state));
    assert_eq!(late["error"]["code"], -32602, "{late}");
    let again = client.ask("tools/call", put);
    assert_eq!(
        again["result"]["_meta"]["dev.rpr/pathway"]["id"],
        id.as_str(),
        "answered from the pathway: {again}"
    );
    assert_eq!(
        again["result"]["_meta"]["dev.rpr/pathway"]["state"], "write_status_unknown",
        "{again}"
    );

    // Unanswerable: a client that declared no elicitation (the server asks anyway). Ends
    // at once, the client is passed nothing.
    let put = json!({"name": "put", "arguments": {"key": "b", "value": "v"}});
    let started = Instant::now();
    let answer = client.ask_declaring("tools/call", put, &json!({}));
    assert!(started.elapsed() < Duration::from_secs(2), "at once");
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert_eq!(
        result["_meta"]["dev.rpr/pathway"]["state"], "write_status_unknown",
        "{answer}"
    );
    let text = text_of(result);
    for said in [
        "write status unknown",
        "elicitation/create",
        "did not declare",
    ] {
        assert!(text.contains(said), "{said:?} in {text}");
    }
    let other = pathway_of(result);
    let why = store(&dir).attempts(&other).unwrap()[0]
        .outcome
        .as_ref()
        .unwrap()
        .to_string();
    assert!(why.contains("did not declare"), "{why}");
    client.stop();
    let calls = received(&log)
        .into_iter()
        .filter(|r| r["method"] == "tools/call" && r["meta"].is_object())
        .count();
    assert_eq!(calls, 2, "each call sent once (its first round)");
    assert!(
        std::fs::read_to_string(dir.join("effects.jsonl"))
            .unwrap_or_default()
            .is_empty(),
        "the server stored nothing (it asked first)"
    );

    // Abandoned after a round was answered: the record names the rounds before.
    let dir = TempDir::new("gate-era-call-mrtr-abandoned-2");
    let policy = fault_policy(&dir);
    let mut gate = fault_gate(
        &dir,
        &policy,
        "none",
        &["--era", "modern", "--input-required", "2"],
    );
    gate[timeout] = "2".into();
    let mut client = Modern::start(&gate);
    let put = json!({"name": "put", "arguments": {"key": "c", "value": "v"}});
    let first = client.ask("tools/call", put.clone());
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let second = client.ask("tools/call", accepting_round(put, &state));
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    let id = await_only_pathway(&dir);
    await_state(&dir, &id, State::WriteStatusUnknown);
    let why = store(&dir).attempts(&id).unwrap()[0]
        .outcome
        .as_ref()
        .unwrap()
        .to_string();
    assert!(
        why.contains("round 2 was passed to the client")
            && why.contains("the rounds answered before it")
            && why.contains("\\\"round\\\":1"),
        "{why}"
    );
    client.stop();
}

/// `call` retried with the answer to the fault server's `confirm` and `state`.
fn accepting_round(mut call: Value, state: &str) -> Value {
    call["requestState"] = json!(state);
    call["inputResponses"] = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    call
}

/// The client cancels the retry that continued a round while that round is at the server:
/// the round has no request of its own toward the server (every round goes under the call's
/// first request), so the gate tells the server to cancel *that* request, by the id the
/// server knows; the client gets no answer to the cancelled retry; the server's answer,
/// which still arrives, is the call's outcome, recorded once.
#[test]
fn cancelling_the_retry_that_continues_a_round_cancels_that_round_at_the_server() {
    let dir = TempDir::new("gate-era-call-mrtr-cancel");
    let policy = fault_policy(&dir);
    let (log, cancels) = (dir.join("requests.jsonl"), dir.join("cancels.jsonl"));
    let (log_arg, cancel_arg) = (log.display().to_string(), cancels.display().to_string());
    let gate = fault_gate(
        &dir,
        &policy,
        "slow",
        &[
            "--era",
            "modern",
            "--input-required",
            "1",
            "--sleep-ms",
            "1500",
            "--request-log",
            &log_arg,
            "--cancel-log",
            &cancel_arg,
        ],
    );
    let calls = || -> Vec<Value> {
        received(&log)
            .into_iter()
            .filter(|r| r["method"] == "tools/call")
            .collect()
    };
    let mut client = Modern::start(&gate);
    let put = json!({"name": "put", "arguments": {"key": "k", "value": "v"}});
    let first = client.ask("tools/call", put.clone());
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = client.send_at("2026-07-28", "tools/call", accepting_round(put, &state));
    // The round is at the server (which takes 1.5 s over it) when the client cancels.
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the round never reached the server"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let round_id = calls()[1]["id"].clone();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": retry, "reason": "changed my mind"}});
    writeln!(client.stdin, "{cancel}").unwrap();

    let told = lines_within(&cancels, 1);
    let told: Vec<Value> = told
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(told.len(), 1, "the server was told once: {told:?}");
    assert_eq!(
        told[0]["requestId"], round_id,
        "under the id the server knows"
    );
    assert!(
        told[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("changed my mind")),
        "{told:?}"
    );

    // The server's answer still arrives: the call's outcome, recorded once; no answer to the
    // cancelled retry.
    let id = await_only_pathway(&dir);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !store(&dir)
        .pathway(&id)
        .unwrap()
        .unwrap()
        .state
        .is_terminal()
    {
        assert!(Instant::now() < deadline, "the call never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        store(&dir).pathway(&id).unwrap().unwrap().state,
        State::Completed
    );
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1);
    let tools = client.ask("tools/list", json!({}));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    assert!(
        client.early.iter().all(|m| m["id"] != retry),
        "no answer to the cancelled retry: {:?}",
        client.early
    );
    client.stop();
    let effects = std::fs::read_to_string(dir.join("effects.jsonl")).unwrap();
    assert_eq!(effects.lines().count(), 1, "written once: {effects}");
}

/// A 2025-era server's own request (here `sampling/createMessage`, in the middle of a call)
/// while the gate's client is of 2026-07-28, which takes no requests from a server on stdio:
/// answered at once inside the gate (`-32601`), never written to that client, so the server
/// goes on and the call completes.
#[test]
fn a_2025_servers_request_is_refused_at_once_for_a_2026_07_28_client() {
    let dir = TempDir::new("gate-era-server-request");
    let policy = fault_policy(&dir);
    let gate = fault_gate(&dir, &policy, "notify-mid-call", &[]);
    let mut client = Modern::start(&gate);
    let started = Instant::now();
    // `Modern::wait` fails the test if any request reaches the client.
    let answer = client.ask(
        "tools/call",
        json!({"name": "put", "arguments": {"key": "k", "value": "v"}}),
    );
    assert!(started.elapsed() < Duration::from_secs(5), "at once");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["dev.rpr/pathway"]["state"], "completed",
        "{answer}"
    );
    client.stop();
}

/// Issue 26 (b): `subscriptions/listen` (2026-07-28) has no handling of its own in the gate:
/// it is passed through as any other request. To a 2025-era server it goes without the
/// client's `io.modelcontextprotocol/*` members and its error comes back; to a 2026-07-28
/// server it goes with the client's capabilities, the stream's notifications reach the
/// client while it is open, and the gate waits for an answer no longer than
/// `--call-timeout`: then the server gets `notifications/cancelled` (which ends a stream on
/// stdio) and the client an internal error. A client that cancels the listen ends it the
/// same way, and gets no answer.
#[test]
fn subscriptions_listen_is_passed_through_and_cut_at_the_call_timeout() {
    let listen = |client: &mut Modern| {
        client.next += 1;
        let id = client.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"roots": {}}}}});
        writeln!(client.stdin, "{line}").unwrap();
        id
    };

    // A 2025-era server does not know the method.
    let dir = TempDir::new("gate-era-listen-legacy");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(&dir, &policy, "none", &["--request-log", &log_arg]);
    let mut client = Modern::start(&gate);
    let id = listen(&mut client);
    let answer = client.wait(id);
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    client.stop();
    let got = received(&log);
    let passed: Vec<&Value> = got
        .iter()
        .filter(|r| r["method"] == "subscriptions/listen")
        .collect();
    assert_eq!(passed.len(), 1, "{got:?}");
    assert!(
        passed[0]["meta"].is_null(),
        "the client's _meta stays: {got:?}"
    );

    // A 2026-07-28 server that holds it open as a stream.
    let dir = TempDir::new("gate-era-listen-modern");
    let policy = fault_policy(&dir);
    let (log, cancels) = (dir.join("requests.jsonl"), dir.join("cancels.jsonl"));
    let (log_arg, cancel_arg) = (log.display().to_string(), cancels.display().to_string());
    let mut gate = fault_gate(
        &dir,
        &policy,
        "none",
        &[
            "--era",
            "modern",
            "--listen",
            "--request-log",
            &log_arg,
            "--cancel-log",
            &cancel_arg,
        ],
    );
    let timeout = gate.iter().position(|a| a == "--call-timeout").unwrap() + 1;
    gate[timeout] = "2".into();
    let mut client = Modern::start(&gate);
    let started = Instant::now();
    let id = listen(&mut client);
    let answer = client.wait(id);
    let took = started.elapsed();
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not answer `subscriptions/listen`")),
        "{answer}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "cut at the call timeout: {took:?}"
    );
    let streamed: Vec<&Value> = client
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/resources/list_changed")
        .collect();
    assert_eq!(streamed.len(), 1, "{:?}", client.notes);
    assert!(
        streamed[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_string(),
        "{streamed:?}"
    );
    let got = received(&log);
    let passed: Vec<&Value> = got
        .iter()
        .filter(|r| r["method"] == "subscriptions/listen")
        .collect();
    assert_eq!(
        passed[0]["meta"]["io.modelcontextprotocol/clientCapabilities"],
        json!({"roots": {}}),
        "{got:?}"
    );
    let cut = lines_within(&cancels, 1);
    assert_eq!(cut.lines().count(), 1, "the stream was ended: {cut}");

    // The client cancels the listen: the server is told, the client gets no answer.
    let id = listen(&mut client);
    let deadline = Instant::now() + Duration::from_secs(5);
    while received(&log)
        .iter()
        .filter(|r| r["method"] == "subscriptions/listen")
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "the second listen never reached the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "done listening"}});
    writeln!(client.stdin, "{cancel}").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let tools = client.ask("tools/list", json!({}));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    assert!(
        client.early.iter().all(|m| m["id"] != id),
        "no answer to a cancelled listen: {:?}",
        client.early
    );
    client.stop();
    let cut = lines_within(&cancels, 2);
    assert_eq!(cut.lines().count(), 2, "{cut}");
    assert!(cut.contains("done listening"), "{cut}");
}

/// The text of `path` once it has `lines` lines, or as it is after 5 s.
fn lines_within(path: &Path, lines: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
