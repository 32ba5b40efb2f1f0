//! What the policy sets beyond roles and tools (issue 29): `rpr approve` under its approval
//! rule (item 3: a quorum of two distinct approvers, no self-approval, a break-glass
//! approval recorded as such, a rule that could never hold refused), and the message limit
//! (item 4).

use serde_json::{Value, json};

use crate::host_support::{self, Scratch, by_key, events, run, text};

/// `put` of server `ledger` behind a Human Gate with `approval` as the policy's rule.
fn policy(dir: &Scratch, approval: &Value) -> String {
    dir.policy_with(&json!({ "approval": approval }))
}

/// Runs `rpr` and returns its stdout and stderr, asserting its exit code.
fn step(args: &[&str], code: i32) -> String {
    let output = run(args);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(code), "rpr {args:?}:\n{out}");
    out
}

/// `rpr call` of `put` with `key`, not approved at the call (`extra` added).
fn gated_call<'a>(
    config: &'a str,
    policy: &'a str,
    db: &'a str,
    key: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args =
        host_support::call_args(config, policy, db, "put", r#"{"key": "k", "value": "v"}"#);
    let at = args.iter().position(|a| *a == "--approve-as").unwrap();
    args.drain(at..at + 2);
    args.extend(["--key", key]);
    args.extend_from_slice(extra);
    args
}

fn approve<'a>(files: &[&'a str; 6], key: &'a str, who: &'a str) -> Vec<&'a str> {
    let mut args = vec!["approve"];
    args.extend_from_slice(files);
    args.extend(["--key", key, "--as", who]);
    args
}

#[test]
fn two_distinct_approvers_make_the_quorum_and_the_call_is_sent_once() {
    let dir = Scratch::new("approvals-quorum");
    let config = dir.fault_config("none");
    let policy = policy(&dir, &json!({"approvers": ["bob", "carol"], "quorum": 2}));
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let call = gated_call(&config, &policy, db, "q", &[]);
    // No terminal: left at the gate.
    step(&call, 3);
    let files = ["--config", &config, "--policy", &policy, "--database", db];

    let out = step(&approve(&files, "q", "alice"), 3);
    assert!(
        out.contains("has 1 of the 2 approvals it needs (approved by alice)"),
        "{out}"
    );
    assert!(out.contains("1 more of: bob, carol"), "{out}");
    assert!(out.contains("nothing was sent"), "{out}");
    assert!(
        out.contains("--as NAME"),
        "the next command is printed:\n{out}"
    );
    assert_eq!(dir.effects(), 0);
    assert_eq!(by_key(&db_path, "q").1, "human_gate");

    // Who must still approve: bob or carol, not alice (hers counts).
    let listed = |who: &str| -> Value {
        let out = step(&["list", "--database", db, "--approver", who, "--json"], 0);
        serde_json::from_str(&out).unwrap()
    };
    assert_eq!(listed("alice")["count"], 0, "{}", listed("alice"));
    assert_eq!(listed("bob")["count"], 1, "{}", listed("bob"));
    let (id, _) = by_key(&db_path, "q");
    let shown: Value =
        serde_json::from_str(&step(&["show", "--database", db, &id, "--json"], 0)).unwrap();
    let actors = &shown["pathway"]["next"]["actors"];
    assert_eq!(actors, &json!(["bob", "carol"]), "{shown}");

    // alice again: her approval already counts; still one.
    let out = step(&approve(&files, "q", "alice"), 3);
    assert!(out.contains("alice has already approved"), "{out}");
    assert!(out.contains("has 1 of the 2"), "{out}");
    assert_eq!(dir.effects(), 0);

    // Someone outside the approvers: refused.
    let out = step(&approve(&files, "q", "mallory"), 1);
    assert!(out.contains("mallory may not"), "{out}");

    let out = step(&approve(&files, "q", "carol"), 0);
    assert!(out.contains("approved by alice, carol"), "{out}");
    assert!(out.contains("COMPLETED"), "{out}");
    assert_eq!(dir.effects(), 1, "sent once");
    let (id, state) = by_key(&db_path, "q");
    assert_eq!(state, "completed");
    let all = events(&db_path, &id);
    let approved: Vec<&str> = all
        .iter()
        .filter(|e| e["kind"] == "approved")
        .map(|e| e["actor"].as_str().unwrap())
        .collect();
    assert_eq!(approved, ["alice", "carol"]);
    let verified = step(&["verify", "--database", db], 0);
    assert!(!verified.contains("problem"), "{verified}");
}

/// A config whose server `ledger` is the script `server.sh`, which runs the fault server
/// with `fault_args`. `rpr` starts a pathway's server with the command line its call
/// recorded, whatever the config says later, so a server changes under a pathway as a
/// real one does: upgraded or fixed in place ([`install`]).
fn in_place(dir: &Scratch, fault_args: &[&str]) -> String {
    install(dir, fault_args);
    dir.write(
        "mcp-in-place.json",
        &json!({"mcpServers": {"ledger": {"command": dir.join("server.sh")}}}),
    )
}

/// (Re)writes `server.sh` to run the fault server with `fault_args`.
fn install(dir: &Scratch, fault_args: &[&str]) {
    use std::os::unix::fs::PermissionsExt;
    let script = format!(
        "#!/bin/sh\nexec '{}' --state '{}' --effects '{}' {}\n",
        env!("CARGO_BIN_EXE_rpr-fault-server"),
        dir.join("state.json").display(),
        dir.join("effects.log").display(),
        fault_args.join(" ")
    );
    let new = dir.join("server.sh.new");
    std::fs::write(&new, script).unwrap();
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&new, dir.join("server.sh")).unwrap();
}

/// The server of [`in_place`], upgraded: another version, so another binding.
fn upgrade(dir: &Scratch) {
    install(dir, &["--fault", "none", "--server-version", "9.9.9"]);
}

#[test]
fn a_call_is_sent_only_to_the_binding_every_approver_of_its_quorum_was_shown() {
    let dir = Scratch::new("approvals-binding");
    let config = in_place(&dir, &["--fault", "none"]);
    let policy = dir.policy_with(&json!({
        "authority": {"approval_authority": "alice", "repair_owner": "bob",
                      "stop_authority": "sam"},
        "approval": {"approvers": ["bob", "carol"], "quorum": 2},
    }));
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    step(&gated_call(&config, &policy, db, "b", &[]), 3);
    let after = ["--config", &config, "--policy", &policy, "--database", db];

    // bob approves what the server was; carol, what it is after the upgrade: no quorum
    // of either binding (before, the two made one, "APPROVED" was printed, and every send
    // was then refused, so the pathway needed a hold and an escalation).
    step(&approve(&after, "b", "bob"), 3);
    upgrade(&dir);
    let out = step(&approve(&after, "b", "carol"), 3);
    assert!(out.contains("approval by carol recorded"), "{out}");
    assert!(out.contains("nothing was sent"), "{out}");
    assert!(!out.contains("APPROVED"), "{out}");
    let (id, state) = by_key(&db_path, "b");
    assert_eq!(state, "human_gate");
    assert_eq!(dir.effects(), 0);

    // bob approves what the server is now (his approval of the old one does not stand
    // for it): a quorum of the upgraded binding, sent once.
    let out = step(&approve(&after, "b", "bob"), 0);
    assert!(out.contains("approved by carol, bob"), "{out}");
    assert!(out.contains("COMPLETED"), "{out}");
    assert_eq!(dir.effects(), 1);
    let all = events(&db_path, &id);
    let granted: Vec<&Value> = all
        .iter()
        .filter(|e| e["kind"] == "approval_granted")
        .collect();
    assert_eq!(granted.len(), 3);
    let shown: Vec<&Value> = granted
        .iter()
        .map(|e| &e["data"]["binding_digest"])
        .collect();
    assert!(shown.iter().all(|d| d.is_string()), "{granted:?}");
    assert_ne!(shown[0], shown[1], "the upgrade changed the binding");
    assert_eq!(shown[1], shown[2]);
    let used: Vec<&Value> = all
        .iter()
        .filter(|e| e["kind"] == "approved")
        .map(|e| &e["data"]["approval"])
        .collect();
    let of_upgrade: Vec<&Value> = granted[1..]
        .iter()
        .map(|e| &e["data"]["approval"])
        .collect();
    assert_eq!(
        used, of_upgrade,
        "only the approvals of the upgraded binding were used"
    );
}

/// `rpr approve --binding DIGEST` approves only the call bound to the digest its approver
/// was shown: a server upgraded after they looked leaves the approval unrecorded.
#[test]
fn an_approval_names_the_binding_it_was_shown_and_is_refused_for_another() {
    let dir = Scratch::new("approve-binding");
    let config = in_place(&dir, &["--fault", "none"]);
    let policy = policy(&dir, &json!({}));
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    // What the approver was shown: the call bound as the server was.
    let out = step(&gated_call(&config, &policy, db, "s", &[]), 3);
    let shown = bound_digest(&out);
    upgrade(&dir);
    let after = ["--config", &config, "--policy", &policy, "--database", db];

    let mut args = approve(&after, "s", "alice");
    args.extend(["--binding", &shown]);
    let out = step(&args, 1);
    let now = bound_digest(&out);
    assert_ne!(now, shown, "the upgrade changed the binding");
    assert!(
        out.contains("nothing was recorded")
            && out.contains(&format!("bound to {now}, not to {shown}")),
        "{out}"
    );
    let (id, state) = by_key(&db_path, "s");
    assert_eq!(state, "human_gate");
    assert!(
        !events(&db_path, &id)
            .iter()
            .any(|e| e["kind"] == "approval_granted"),
        "no approval recorded"
    );
    assert_eq!(dir.effects(), 0);

    // Shown as it is now: approved and sent once.
    let mut args = approve(&after, "s", "alice");
    args.extend(["--binding", &now]);
    let out = step(&args, 0);
    assert!(out.contains("COMPLETED"), "{out}");
    assert_eq!(dir.effects(), 1);
}

/// The binding digest `rpr call` or `rpr approve` printed at its Human Gate.
fn bound_digest(out: &str) -> String {
    out.split("binding    digest ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no binding digest in {out}"))
        .to_owned()
}

/// A pathway sent on approvals, failed and repaired, is sent again on the same approvals:
/// so only to the binding they were of.
#[test]
fn a_repaired_call_is_resent_only_to_the_binding_its_approver_was_shown() {
    let dir = Scratch::new("approvals-repaired");
    // The first send fails: the tool answers an error (it may have taken effect, so the
    // outcome is unknown until a verdict).
    let failing = in_place(&dir, &["--fault", "is-error"]);
    let policy = dir.policy_with(&json!({"authority": {
        "approval_authority": "alice", "repair_owner": "bob", "resume_authority": "bob"}}));
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let call = host_support::call_args(
        &failing,
        &policy,
        db,
        "put",
        r#"{"key": "k", "value": "v"}"#,
    );
    step(&call, 3);
    let (id, state) = by_key_of_only(&db_path);
    assert_eq!(state, "write_status_unknown");
    let by = |cmd: &'static str, who: &'static str, more: &[&'static str]| {
        let mut args = vec![cmd, "--database", db, "--pathway", id.as_str(), "--as", who];
        args.extend_from_slice(more);
        args
    };
    step(
        &by(
            "attest",
            "bob",
            &["--verdict", "not-applied", "--evidence", "nothing stored"],
        ),
        3,
    );
    step(
        &by("repair", "bob", &["--evidence", "the server is fixed"]),
        0,
    );
    let resume = |code: i32| {
        let mut args = by("resume", "bob", &[]);
        args.extend(["--config", &failing, "--policy", &policy]);
        step(&args, code)
    };
    upgrade(&dir);
    let out = resume(1);
    assert!(
        out.contains("the server changed since the Human Gate"),
        "{out}"
    );
    assert!(
        out.contains("stays ready_to_resume; nothing was sent"),
        "{out}"
    );
    assert_eq!(dir.effects(), 0);
    // The server as it was approved (its fault fixed): sent.
    install(&dir, &["--fault", "none"]);
    let out = resume(0);
    assert!(out.contains("COMPLETED"), "{out}");
    assert_eq!(dir.effects(), 1);
}

/// The only pathway in `db`: (id, state).
fn by_key_of_only(db: &std::path::Path) -> (String, String) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT id, state FROM pathways", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .unwrap()
}

#[test]
fn the_proposer_cannot_approve_their_own_call() {
    let dir = Scratch::new("approvals-self");
    let config = dir.fault_config("none");
    let policy = policy(&dir, &json!({}));
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let call = gated_call(&config, &policy, db, "mine", &["--actor", "alice"]);
    step(&call, 3);
    let files = ["--config", &config, "--policy", &policy, "--database", db];
    let out = step(&approve(&files, "mine", "alice"), 1);
    assert!(out.contains("alice proposed pathway"), "{out}");
    assert!(out.contains("self_approval"), "the fix is named:\n{out}");
    assert_eq!(dir.effects(), 0);
    assert_eq!(by_key(&db_path, "mine").1, "human_gate");

    // Unless the policy allows it.
    let allowing = policy_file_allowing_self(&dir);
    // Another database: an identical call would be answered from the open pathway.
    let other = dir.join("rpr2.db");
    let call = gated_call(
        &config,
        &allowing,
        other.to_str().unwrap(),
        "mine2",
        &["--actor", "alice", "--approve-as", "alice"],
    );
    let out = step(&call, 0);
    assert!(out.contains("COMPLETED"), "{out}");
    assert_eq!(dir.effects(), 1);
}

fn policy_file_allowing_self(dir: &Scratch) -> String {
    let path = policy(dir, &json!({"self_approval": true}));
    let moved = dir.join("policy-self.json");
    std::fs::rename(&path, &moved).unwrap();
    moved.display().to_string()
}

#[test]
fn a_break_glass_approval_sends_alone_and_is_recorded_as_such() {
    let dir = Scratch::new("approvals-glass");
    let config = dir.fault_config("none");
    let policy = policy(
        &dir,
        &json!({"approvers": ["bob"], "quorum": 2, "break_glass": ["oncall"]}),
    );
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let call = gated_call(&config, &policy, db, "bg", &[]);
    step(&call, 3);
    let files = ["--config", &config, "--policy", &policy, "--database", db];
    // bob may approve but not break glass.
    let mut bob = approve(&files, "bg", "bob");
    bob.extend(["--break-glass", "hurry"]);
    let out = step(&bob, 1);
    assert!(out.contains("break_glass"), "{out}");
    assert_eq!(dir.effects(), 0);

    let mut glass = approve(&files, "bg", "oncall");
    glass.extend(["--break-glass", "outage INC-7"]);
    let out = step(&glass, 0);
    assert!(out.contains("BREAK-GLASS approval by oncall"), "{out}");
    assert!(out.contains("COMPLETED"), "{out}");
    assert_eq!(dir.effects(), 1);
    let (id, _) = by_key(&db_path, "bg");
    let events = events(&db_path, &id);
    let granted = events
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap();
    assert_eq!(granted["actor"], "oncall");
    assert_eq!(granted["data"]["break_glass"], true);
    assert_eq!(granted["data"]["reason"], "outage INC-7");
}

#[test]
fn a_policy_whose_approval_rule_cannot_hold_is_refused() {
    let dir = Scratch::new("approvals-bad");
    let config = dir.fault_config("none");
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    for (bad, needle) in [
        (json!({"quorum": 0}), "approval.quorum must be at least 1"),
        (
            json!({"approvers": ["bob"], "quorum": 3}),
            "approval.quorum is 3, but only 2 distinct approver(s) may approve",
        ),
        (json!({"approvers": [""]}), "an empty approver name"),
        (json!({"quorom": 2}), "unknown field `quorom`"),
    ] {
        let policy = policy(&dir, &bad);
        let out = step(&gated_call(&config, &policy, db, "bad", &[]), 1);
        assert!(out.contains(needle), "{bad}: {out}");
    }
    let ttl = dir.write(
        "ttl.json",
        &json!({"approval_ttl": 0, "servers": {"ledger": {"get": {"read_only": true}}}}),
    );
    let out = step(&gated_call(&config, &ttl, db, "ttl", &[]), 1);
    assert!(out.contains("approval_ttl must be above 0"), "{out}");
    assert_eq!(dir.effects(), 0);
}

#[test]
fn the_policy_sets_the_message_limit() {
    let dir = Scratch::new("limits");
    let config = dir.fault_config("none");
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let limited = dir.write(
        "small.json",
        &json!({"max_message_bytes": 2048, "servers": {"ledger": {
            "get": {"read_only": true},
            "put": {"human_gate": false, "readback": {"tool": "get", "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"}}}
        }}}),
    );
    let big = format!(r#"{{"key": "k", "value": "{}"}}"#, "x".repeat(3000));
    let mut call = host_support::call_args(&config, &limited, db, "put", &big);
    call.retain(|a| *a != "--approve-as" && *a != "alice");
    let out = step(&call, 3);
    assert!(out.contains("over the 2048-byte limit"), "{out}");
    assert!(out.contains("`max_message_bytes` in the policy"), "{out}");
    assert!(out.contains("attempt not_sent"), "{out}");
    assert_eq!(dir.effects(), 0, "nothing sent");

    // A limit out of range is refused when the policy is read.
    for n in [10, 2_000_000_000_usize] {
        let bad = dir.write(
            "bad.json",
            &json!({"max_message_bytes": n, "servers": {"ledger": {}}}),
        );
        let out = step(&gated_call(&config, &bad, db, "bad", &[]), 1);
        assert!(out.contains(&format!("max_message_bytes is {n}")), "{out}");
    }
}

/// The policy's `read_only` is the operator's word on a tool whose server claims nothing
/// (`put` here carries no `readOnlyHint`): `rpr call` binds with the policy's class, as the
/// gate does. Before, it bound with the server's claim and refused the call it had already
/// admitted ("declared read-only but the executor binds a mutating target"), leaving an
/// approved pathway behind.
#[test]
fn a_tool_the_policy_calls_read_only_is_called_as_a_read_whatever_the_server_claims() {
    let dir = Scratch::new("policy-read-only");
    let config = dir.fault_config("none");
    let policy = dir.write(
        "policy-ro.json",
        &json!({"authority": {"approval_authority": "alice", "repair_owner": "bob"},
                "servers": {"ledger": {"get": {"read_only": true}, "put": {"read_only": true}}}}),
    );
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let mut args =
        host_support::call_args(&config, &policy, db, "put", r#"{"key": "k", "value": "v"}"#);
    args.extend(["--key", "ro"]);
    let out = step(&args, 0);
    assert!(out.contains("COMPLETED (a read-only call)"), "{out}");
    assert_eq!(by_key(&db_path, "ro").1, "completed");
}
