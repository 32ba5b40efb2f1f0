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
