//! The console in a real browser (headless chromium over WebDriver): a gated write that
//! waits in `rpr gate` is shown whole, approved or denied there, and sent once; a quorum of
//! two takes two approvers; an expired approval does not count; a write left unknown is
//! reconciled by readback, never sent again; hostile names and arguments stay text.

use std::time::Duration;

use rpr::State;
use serde_json::json;

use crate::scene::Scene;
use crate::webdriver::Driver;

const WAIT: Duration = Duration::from_secs(30);

/// The CSS selector of pathway `id`'s article.
fn article(id: &str) -> String {
    format!("article#pw-{id}")
}

/// Clicks "Approve as …" of pathway `id` on the page open.
fn approve_in(driver: &Driver, id: &str) {
    driver
        .wait_for(&article(id), WAIT)
        .find("form.approve button")
        .click();
}

/// Waits for the newest command the console ran: its exit status and what it said.
fn last_done(driver: &Driver) -> (Option<String>, String) {
    let done = driver.wait_for("li.action", WAIT);
    (done.attribute("data-exit"), done.text())
}

/// Opens `url` (the console's, with its token) and waits for the dashboard.
fn open(driver: &Driver, url: &str) {
    driver.goto(url);
    driver.wait_for("section#waiting", WAIT);
    assert!(
        !driver.current_url().contains("token="),
        "the token leaves the address bar once the cookie is set: {}",
        driver.current_url()
    );
}

#[test]
fn a_gated_write_is_approved_in_the_browser_and_sent_once() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "invoice-7", "value": "paid"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let driver = Driver::start();
    open(&driver, &console.url);

    let shown = driver.wait_for(&article(&id), WAIT);
    let text = shown.text();
    assert!(text.contains("Call put on server faults"), "{text}");
    assert!(
        text.contains("/key") && text.contains("\"invoice-7\""),
        "the target first: {text}"
    );
    assert!(
        text.contains("\"value\": \"paid\""),
        "the whole request: {text}"
    );
    assert!(text.contains("binding digest"), "{text}");
    assert!(text.contains("Who may still approve: host"), "{text}");
    assert!(text.contains("counts for 3600 s"), "the expiry: {text}");
    assert!(
        scene.effects().is_empty(),
        "nothing sent before the decision"
    );
    if let Ok(path) = std::env::var("RPR_CONSOLE_SCREENSHOT") {
        driver.screenshot_png(path);
    }

    shown.find("form.approve button").click();
    let answer = call.join().unwrap();
    assert_ne!(answer["isError"], true, "{answer}");
    assert_eq!(scene.state(&id), State::Completed);
    assert_eq!(scene.effects().len(), 1, "sent once");
    assert_eq!(scene.attempts(&id), 1);
    // The page shows what it ran, and (reloading itself) that nothing waits any more.
    driver.wait_text("section#actions", "rpr approve --database", WAIT);
    driver.wait_text("section#waiting", "No pathway waits", WAIT);
    assert!(driver.find("li.action").attribute("data-exit").as_deref() == Some("3"));
}

#[test]
fn a_denial_in_the_browser_answers_the_waiting_call_and_sends_nothing() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "k", "value": "v"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let driver = Driver::start();
    open(&driver, &console.url);
    let shown = driver.wait_for(&article(&id), WAIT);
    shown
        .find("form.deny input[name=reason]")
        .send_keys("- wrong invoice");
    shown.find("form.deny button").click();
    let answer = call.join().unwrap();
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(answer.to_string().contains("denied"), "{answer}");
    assert_eq!(scene.state(&id), State::Denied);
    assert!(scene.effects().is_empty());
    let done = driver.wait_for("li.action", WAIT);
    assert_eq!(done.attribute("data-exit").as_deref(), Some("4"));
    assert!(
        done.text().contains("--reason=\"- wrong invoice\""),
        "{}",
        done.text()
    );
}

#[test]
fn a_quorum_of_two_takes_two_approvers_each_in_their_own_console() {
    let scene = Scene::new(
        &json!({"approval": {"approvers": ["alice", "bob"], "quorum": 2}}),
        &[],
    );
    let call = scene.put_in_background(json!({"key": "q", "value": "2"}));
    let id = scene.pathway_in(State::HumanGate);
    let (alice, bob) = (scene.console("alice"), scene.console("bob"));
    let driver = Driver::start();

    open(&driver, &alice.url);
    approve_in(&driver, &id);
    let (exit, said) = last_done(&driver);
    assert_eq!(exit.as_deref(), Some("3"), "{said}");
    let shown = driver.wait_text(
        &format!("{} ul.granted", article(&id)),
        "approved by alice",
        WAIT,
    );
    assert!(!shown.text().contains("EXPIRED"));
    let who = driver.find(&format!("{} p.approvers", article(&id))).text();
    assert!(
        who.contains("Approvals needed: 2") && who.contains("bob") && !who.contains("alice"),
        "{who}"
    );
    assert_eq!(
        scene.state(&id),
        State::HumanGate,
        "one approval of two sends nothing"
    );
    assert!(scene.effects().is_empty());

    open(&driver, &bob.url);
    approve_in(&driver, &id);
    let answer = call.join().unwrap();
    assert_ne!(answer["isError"], true, "{answer}");
    assert_eq!(scene.state(&id), State::Completed);
    assert_eq!(scene.effects().len(), 1);
}

/// The page never reloads under the cursor: once what it shows changed (here the waiting
/// call was denied elsewhere), every button of its forms is off and a bar fixed at the top
/// says so, the page otherwise as it was drawn; its Reload draws the page as it is now.
#[test]
fn a_page_whose_pathways_changed_turns_its_buttons_off_until_it_is_reloaded() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "s", "value": "1"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let driver = Driver::start();
    open(&driver, &console.url);
    let shown = driver.wait_for(&article(&id), WAIT);
    assert!(shown.find("form.approve button").is_enabled());

    let db = scene.db.display().to_string();
    let denied = std::process::Command::new(crate::scene::RPR)
        .args(["deny", "--database", &db, "--pathway", &id, "--as", "host"])
        .output()
        .unwrap();
    assert_eq!(denied.status.code(), Some(4), "denied: {denied:?}");
    let answer = call.join().unwrap();
    assert_eq!(answer["isError"], true, "{answer}");

    driver.wait_text("div#stale", "changed since it was drawn", WAIT);
    let buttons = driver.find_all("form button");
    assert!(!buttons.is_empty());
    assert!(
        buttons.iter().all(|b| !b.is_enabled()),
        "every button of the page's forms is off"
    );
    assert!(
        driver
            .find(&article(&id))
            .text()
            .contains("Approve as host"),
        "the page was not redrawn under the cursor"
    );
    driver.find("div#stale button").click();
    driver.wait_text("section#waiting", "No pathway waits", WAIT);
    assert!(driver.find_all("div#stale").is_empty());
    assert!(scene.effects().is_empty());
}

#[test]
fn an_expired_approval_is_shown_expired_and_does_not_count() {
    let scene = Scene::new(
        &json!({"approval": {"approvers": ["alice", "bob"], "quorum": 2}, "approval_ttl": 4}),
        &[],
    );
    let call = scene.put_in_background(json!({"key": "e", "value": "1"}));
    let id = scene.pathway_in(State::HumanGate);
    let (alice, bob) = (scene.console("alice"), scene.console("bob"));
    let driver = Driver::start();
    open(&driver, &alice.url);
    approve_in(&driver, &id);
    driver.wait_for("li.action", WAIT);
    std::thread::sleep(Duration::from_millis(4500));

    open(&driver, &bob.url);
    driver.wait_text(&format!("{} ul.granted", article(&id)), "EXPIRED", WAIT);
    driver
        .find(&format!("{} form.approve button", article(&id)))
        .click();
    let (exit, said) = last_done(&driver);
    assert_eq!(exit.as_deref(), Some("3"), "{said}");
    assert_eq!(
        scene.state(&id),
        State::HumanGate,
        "alice's expired approval did not count"
    );
    assert!(scene.effects().is_empty());

    // alice approves again, within bob's 4 s: the quorum is made, the call sent once.
    open(&driver, &alice.url);
    approve_in(&driver, &id);
    let answer = call.join().unwrap();
    assert_ne!(answer["isError"], true, "{answer}");
    assert_eq!(scene.effects().len(), 1);
}

#[test]
fn a_write_left_unknown_is_reconciled_by_readback_and_never_sent_again() {
    let scene = Scene::with(false, &json!({}), &[], &["--fault", "crash-after-effect"]);
    let client = scene.client();
    let answer = client
        .call_tool(
            "put",
            &json!({"key": "u", "value": "once"}),
            Duration::from_mins(1),
        )
        .unwrap();
    drop(client);
    let id = scene.pathway_in(State::WriteStatusUnknown);
    assert!(answer_is_error(&answer), "{answer:?}");
    assert_eq!(
        scene.effects().len(),
        1,
        "the effect happened; its reply was lost"
    );

    let console = scene.console("host");
    let driver = Driver::start();
    open(&driver, &console.url);
    let shown = driver.wait_for(&article(&id), WAIT);
    assert!(
        shown.text().contains("write_status_unknown"),
        "{}",
        shown.text()
    );
    assert!(
        driver
            .find_all("button")
            .iter()
            .all(|b| !b.text().to_lowercase().contains("send")),
        "no button sends anything again"
    );
    shown.find("form.reconcile button").click();
    let done = driver.wait_for("li.action", WAIT);
    assert_eq!(
        done.attribute("data-exit").as_deref(),
        Some("0"),
        "{}",
        done.text()
    );
    assert_eq!(
        scene.state(&id),
        State::Completed,
        "the readback found the effect"
    );
    assert_eq!(scene.effects().len(), 1, "never sent again");
    assert_eq!(scene.attempts(&id), 1);
}

fn answer_is_error(reply: &rpr::mcp::Reply) -> bool {
    matches!(reply, rpr::mcp::Reply::Result(r) if r["isError"] == true)
}

#[test]
fn a_hostile_server_name_and_hostile_arguments_are_shown_as_text() {
    let name = "<img src=x onerror=\"document.title='pwned-name'\">";
    let scene = Scene::new(&json!({}), &["--server-name", name]);
    let key = "<script>document.title='pwned-key'</script>";
    let value = "</pre><img src=y onerror=\"document.title='pwned-value'\">\u{202e}gnp.exe";
    let call = scene.put_in_background(json!({"key": key, "value": value}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let driver = Driver::start();
    open(&driver, &console.url);
    let shown = driver.wait_for(&article(&id), WAIT);
    let text = shown.text();
    assert!(text.contains(name), "the server's name, as text: {text}");
    assert!(
        text.contains("<script>document.title='pwned-key'</script>"),
        "{text}"
    );
    assert!(text.contains("</pre><img src=y"), "{text}");
    assert!(
        text.contains("\\u202e"),
        "the bidi override made visible: {text}"
    );
    assert!(
        driver.find_all("img").is_empty(),
        "no image element came from a value"
    );
    assert_eq!(
        driver.find_all("script").len(),
        1,
        "the page's own script only"
    );
    assert_eq!(driver.title(), "rpr console");
    shown.find("form.deny button").click();
    driver.wait_for("li.action", WAIT);
    let _ = call.join().unwrap();
    assert_eq!(driver.title(), "rpr console");
}
