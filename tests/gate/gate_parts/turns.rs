//! Turns (issue 26, item 4): a call being sent holds up only calls of its own identity, and
//! an identical call that arrives meanwhile waits for it and gets its result.

use super::*;

/// A write the policy allows needs no form: it is proposed, bound and sent in one go. An
/// identical write arriving while it is being sent used to get "in flight right now" (a tool
/// error) instead of its result; it now waits for that send and is answered from the
/// pathway: one effect, one pathway, both calls answered with the write's result.
#[test]
fn an_identical_call_during_an_allowed_send_waits_and_gets_its_result() {
    let (dir, _policy, gate) = fault_setup("gate-turn-send", "slow", &["--sleep-ms", "1500"]);
    let client = std::sync::Arc::new(connect(&gate));
    let args = json!({"key": "k", "value": "v"});
    let put = |client: &std::sync::Arc<McpClient>| {
        let (client, args) = (std::sync::Arc::clone(client), args.clone());
        std::thread::spawn(move || result(call(&client, "put", &args)))
    };
    let first = put(&client);
    std::thread::sleep(Duration::from_millis(400));
    let second = put(&client);
    let (first, second) = (first.join().unwrap(), second.join().unwrap());
    for answer in [&first, &second] {
        assert_ne!(answer["isError"], true, "{answer}");
    }
    assert_eq!(meta_id(&first), meta_id(&second), "one pathway for both");
    assert_eq!(effects(&dir), 1, "written once");
    assert_eq!(state(&dir, &meta_id(&first)), State::Completed);
}

/// Found by the client matrix: a read the policy sends to the Human Gate, approved out of
/// band with `rpr approve`, was never sent: an identical read skipped every open read, so the
/// same call made again opened a new pathway, held again. A read not sent yet is now carried
/// on by the identical call (a read that *was* sent still holds nothing).
#[test]
fn a_gated_read_approved_with_rpr_approve_is_sent_by_the_same_call_made_again() {
    let dir = TempDir::new("gate-approved-read");
    let policy = write_policy(
        &dir,
        &json!({
            "authority": {"approval_authority": "alice", "repair_owner": "bob", "resume_authority": "bob"},
            "servers": {"faults": {
                "get": {"read_only": true, "human_gate": true},
                "put": {"human_gate": false, "readback": {"tool": "get", "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"}}}
            }}
        }),
    );
    std::fs::write(dir.join("state.json"), r#"{"k": "v"}"#).unwrap();
    let gate = fault_gate(&dir, &policy, "none", &[]);
    let client = connect(&gate);
    let held = result(call(&client, "get", &json!({"key": "k"})));
    let said = held["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("rpr approve --database"), "{said}");
    let id = meta_id(&held);
    assert_eq!(state(&dir, &id), State::HumanGate);
    let approved = rpr(&[
        "approve",
        "--database",
        &dir.join("rpr.db").display().to_string(),
        "--pathway",
        &id,
        "--as",
        "alice",
    ]);
    // Approved; the call is still to be made: exit 3, the pathway needs another step.
    assert_eq!(approved.status.code(), Some(3), "{}", text(&approved));
    let sent = result(call(&client, "get", &json!({"key": "k"})));
    assert_ne!(sent["isError"], true, "{sent}");
    assert_eq!(meta_id(&sent), id, "the approved pathway is the one sent");
    assert_eq!(state(&dir, &id), State::Completed);
    assert_eq!(pathway_count(&dir), 1);
    client.shutdown();
}
