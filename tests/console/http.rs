//! The console's guard from outside, over plain HTTP: only the printed token gets in, only
//! at the loopback address it printed, and a form from another site or without the page's
//! form token changes nothing. No browser needed.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rpr::State;
use serde_json::json;

use crate::scene::{Console, RPR, Scene};

/// One HTTP/1.1 request to `path` under `base` (`http://ADDR:PORT` and a path, the
/// console's own); the status, headers and body.
fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    let rest = base.strip_prefix("http://").unwrap();
    let (addr, under) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = format!("{under}{path}");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let _ = write!(req, "Host: {addr}\r\n");
    }
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    let _ = write!(req, "Content-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find_map(|(k, v)| (k == name).then_some(v.as_str()))
}

/// The value of the first hidden field `name` on `page`.
fn hidden(page: &str, name: &str) -> String {
    page.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no field {name} on the page: {page}"))
        .to_owned()
}

/// Signs in with the printed URL: the cookie it sets.
/// The headers of a form the console's own page posts.
fn form_headers<'a>(cookie: &'a str, origin: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("Cookie", cookie),
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", origin),
    ]
}

fn sign_in(console: &Console) -> String {
    let path = &console.url[console.base().len()..];
    let (status, headers, _) = http(&console.base(), "GET", path, &[], "");
    assert_eq!(status, 303);
    let home = format!("{}/", &console.base()[console.origin().len()..]);
    assert_eq!(header(&headers, "location"), Some(home.as_str()));
    let cookie = header(&headers, "set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains(&format!("Path={home}")),
        "{cookie}"
    );
    cookie.split(';').next().unwrap().to_owned()
}

#[test]
fn only_the_printed_token_gets_in_and_only_at_the_address_it_printed() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "k1", "value": "v1"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let origin = console.origin();

    let (status, _, body) = http(&console.base(), "GET", "/", &[], "");
    assert_eq!(status, 403, "{body}");
    assert!(
        !body.contains(&id),
        "nothing of the store without the token"
    );
    let (status, _, _) = http(&console.base(), "GET", "/?token=00ff", &[], "");
    assert_eq!(status, 403);

    let cookie = sign_in(&console);
    let (status, headers, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200);
    assert!(page.contains(&id), "the waiting pathway is listed");
    assert!(
        header(&headers, "set-cookie").is_none(),
        "the cookie was set once, at sign-in"
    );
    // Every page is under the console's own path, to which the cookie is scoped (a browser
    // sends a host's cookies to all its ports): the address's root is no page of it.
    let (status, _, body) = http(origin, "GET", "/", &[("Cookie", &cookie)], "");
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains(&id));
    // An error page, wherever it is, links back to the console's own first page.
    let (_, _, body) = http(
        &console.base(),
        "GET",
        "/pathway/pw_none",
        &[("Cookie", &cookie)],
        "",
    );
    let home = format!("{}/", &console.base()[origin.len()..]);
    assert!(
        body.contains(&format!("<a href=\"{home}\">Back to the console</a>")),
        "{body}"
    );
    let csp = header(&headers, "content-security-policy").unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );

    // A name that another site rebinds to 127.0.0.1 gets nothing, cookie or not.
    let port = origin.rsplit(':').next().unwrap();
    let evil = format!("evil.example:{port}");
    let (status, _, body) = http(
        &console.base(),
        "GET",
        "/",
        &[("Host", &evil), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 421);
    assert!(!body.contains(&id));

    drop(console);
    // Decided at the terminal instead: the waiting call goes on.
    let db = scene.db.display().to_string();
    let out = std::process::Command::new(RPR)
        .args(["deny", "--database", &db, "--pathway", &id, "--as", "host"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let answer = call.join().unwrap();
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(scene.effects().is_empty());
}

#[test]
fn a_form_from_another_site_or_without_the_pages_form_token_changes_nothing() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "k2", "value": "v2"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let origin = console.origin().to_owned();
    let cookie = sign_in(&console);
    let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    let form_token = hidden(&page, "form_token");
    let version = hidden(&page, "version");
    let binding = hidden(&page, "binding");
    let form = |token: &str| {
        format!("form_token={token}&pathway={id}&version={version}&binding={binding}")
    };
    let posted = |headers: &[(&str, &str)], body: &str| {
        let mut all = vec![
            ("Cookie", cookie.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        all.extend_from_slice(headers);
        http(&console.base(), "POST", "/approve", &all, body).0
    };

    assert_eq!(
        posted(&[("Origin", "http://evil.example")], &form(&form_token)),
        403
    );
    assert_eq!(
        posted(&[("Sec-Fetch-Site", "cross-site")], &form(&form_token)),
        403
    );
    assert_eq!(posted(&[("Origin", &origin)], &form("0000")), 400);
    assert_eq!(
        posted(&[("Origin", &origin)], &format!("pathway={id}")),
        400
    );
    // The page's form without the version or the binding it showed: refused, like one
    // without its token.
    assert_eq!(
        posted(
            &[("Origin", &origin)],
            &format!("form_token={form_token}&pathway={id}&binding={binding}")
        ),
        400
    );
    assert_eq!(
        posted(
            &[("Origin", &origin)],
            &format!("form_token={form_token}&pathway={id}&version={version}")
        ),
        400
    );
    assert_eq!(scene.state(&id), State::HumanGate, "nothing was recorded");
    assert!(scene.effects().is_empty());

    // The page's own form: approved, and the waiting call is sent, once.
    assert_eq!(posted(&[("Origin", &origin)], &form(&form_token)), 303);
    let answer = call.join().unwrap();
    assert_ne!(answer["isError"], true, "{answer}");
    assert_eq!(scene.state(&id), State::Completed);
    assert_eq!(scene.effects().len(), 1);
    assert_eq!(scene.attempts(&id), 1);
    let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    assert!(
        page.contains(&format!(
            "rpr approve --database {} --pathway {id} --at-version {version} --as host",
            scene.db.display()
        )),
        "the page shows the command it ran"
    );
}

#[test]
fn the_console_listens_on_a_loopback_address_and_an_existing_database_only() {
    let scene = Scene::new(&json!({}), &[]);
    drop(scene.client());
    let db = scene.db.display().to_string();
    let out = std::process::Command::new(RPR)
        .args([
            "console",
            "--database",
            &db,
            "--as",
            "host",
            "--listen",
            "0.0.0.0:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("loopback address only"), "{said}");
    let missing = scene.dir.path().join("none.db").display().to_string();
    let out = std::process::Command::new(RPR)
        .args(["console", "--database", &missing, "--as", "host"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "no URL printed"
    );
}

#[test]
fn a_changed_tool_is_shown_with_both_definitions_side_by_side() {
    let scene = Scene::with(
        false,
        &json!({}),
        &[],
        &["--fault", "change-schema", "--lists-before", "1"],
    );
    let client = scene.client();
    let put = |value: &str| {
        client
            .call_tool(
                "put",
                &json!({"key": "p", "value": value}),
                Duration::from_mins(1),
            )
            .unwrap()
    };
    // The first is refused at the send (the tool changed after it was listed); the gate
    // lists again, and the next call finds the change against the pin.
    let _ = put("1");
    let refused = put("2");
    drop(client);
    assert!(
        format!("{refused:?}").contains("rpr pin"),
        "the changed tool is refused until pinned: {refused:?}"
    );
    assert!(scene.effects().is_empty());
    let console = scene.console("host");
    let cookie = sign_in(&console);
    let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    assert!(
        page.contains("Tool changes waiting for review (1)"),
        "{page}"
    );
    let between = |start: &str| {
        page.split(start)
            .nth(1)
            .and_then(|rest| rest.split("</pre>").next())
            .unwrap_or_default()
            .to_owned()
    };
    let (old, new) = (
        between("<pre class=\"old\">"),
        between("<pre class=\"new\">"),
    );
    assert!(old.contains("&quot;name&quot;: &quot;put&quot;"), "{old}");
    assert!(new.contains("&quot;name&quot;: &quot;put&quot;"), "{new}");
    assert_ne!(old, new, "the two definitions differ");
    assert!(
        page.contains("--review --server faults"),
        "the command to review it"
    );
}

#[test]
fn the_consoles_commands_sign_the_log_with_the_key_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("log.key");
    let key_arg = key.display().to_string();
    let made = std::process::Command::new(RPR)
        .args(["keygen", "--out", &key_arg])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let scene = Scene::with(true, &json!({}), &["--signing-key", &key_arg], &[]);
    let call = scene.put_in_background(json!({"key": "s", "value": "1"}));
    let id = scene.pathway_in(State::HumanGate);

    // Without the key, the console's `rpr approve` is refused: the log is signed.
    let unsigned = Console::start(&scene.db, "host", Some(&scene.policy), &[]);
    let approve = |console: &Console| {
        let cookie = sign_in(console);
        let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
        let body = format!(
            "form_token={}&pathway={id}&version={}&binding={}",
            hidden(&page, "form_token"),
            hidden(&page, "version"),
            hidden(&page, "binding")
        );
        let headers = [
            ("Cookie", cookie.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        assert_eq!(
            http(&console.base(), "POST", "/approve", &headers, &body).0,
            303
        );
        http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "").2
    };
    let page = approve(&unsigned);
    assert!(page.contains("Give --signing-key"), "{page}");
    assert_eq!(scene.state(&id), State::HumanGate);

    // With it, the approval is recorded and signed; the waiting call is sent, once.
    let signed = Console::start(
        &scene.db,
        "host",
        Some(&scene.policy),
        &["--signing-key", &key_arg],
    );
    let page = approve(&signed);
    assert!(
        page.contains(&format!("rpr --signing-key {key_arg} approve")),
        "{page}"
    );
    let answer = call.join().unwrap();
    assert_ne!(answer["isError"], true, "{answer}");
    assert_eq!(scene.effects().len(), 1);
    let db = scene.db.display().to_string();
    let verified = std::process::Command::new(RPR)
        .args([
            "verify",
            "--database",
            &db,
            "--key",
            &format!("{key_arg}.pub"),
        ])
        .output()
        .unwrap();
    assert!(verified.status.success(), "{verified:?}");
}

#[test]
fn an_approval_from_a_page_that_no_longer_describes_the_pathway_is_refused() {
    // The gate gives up waiting after a second, so nothing is sent when it is approved out
    // of band: the pathway can be approved, held and escalated back to the gate.
    let scene = Scene::new(&json!({}), &[]).with_approval_wait("1");
    let call = scene.put_in_background(json!({"key": "k3", "value": "v3"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let origin = console.origin().to_owned();
    let cookie = sign_in(&console);
    let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    let (form_token, shown) = (hidden(&page, "form_token"), hidden(&page, "version"));
    let binding = hidden(&page, "binding");
    let answer = call.join().unwrap();
    assert_eq!(
        answer["isError"], true,
        "the gate stopped waiting: {answer}"
    );

    // Elsewhere, while that page is open: approved, held by the stop authority, and sent
    // back to the Human Gate. The page still shows the pathway at the gate.
    let db = scene.db.display().to_string();
    // (`approve` of a gate's call exits 3: approved, nothing sent yet.)
    for (step, code) in [
        (vec!["approve", "--as", "host"], 3),
        (vec!["hold", "--as", "host", "--reason", "wrong amount"], 0),
        (vec!["escalate", "--as", "host"], 0),
    ] {
        let mut args = vec![step[0], "--database", &db, "--pathway", &id];
        args.extend(&step[1..]);
        let out = std::process::Command::new(RPR)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{step:?}: {out:?}");
    }
    assert_eq!(scene.state(&id), State::HumanGate);

    let post = |version: &str| {
        let body =
            format!("form_token={form_token}&pathway={id}&version={version}&binding={binding}");
        let headers = form_headers(&cookie, &origin);
        assert_eq!(
            http(&console.base(), "POST", "/approve", &headers, &body).0,
            303
        );
        http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "").2
    };
    // The old page's approval: refused, nothing recorded, and the console says why.
    let page = post(&shown);
    assert_eq!(
        scene.state(&id),
        State::HumanGate,
        "the hold was overridden"
    );
    assert!(
        page.contains("not version") && page.contains("it changed since"),
        "{page}"
    );
    // The page as it is now: approved.
    let now = hidden(&page, "version");
    assert_ne!(now, shown);
    post(&now);
    assert_eq!(scene.state(&id), State::Approved);
    assert!(scene.effects().is_empty(), "nothing was sent");
}

/// The page's Approve form carries the binding digest the page shows (the tool's pin), and
/// the console approves only that binding (`rpr approve --binding`): a form whose binding
/// is not the pin now records nothing and says why; the page's own is approved and sent.
#[test]
fn an_approval_from_the_page_is_of_the_binding_it_showed() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "k5", "value": "v5"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let origin = console.origin().to_owned();
    let cookie = sign_in(&console);
    let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    let (form_token, version) = (hidden(&page, "form_token"), hidden(&page, "version"));
    let binding = hidden(&page, "binding");
    let pinned = rpr::store::ReadStore::open_read_only(&scene.db)
        .unwrap()
        .pin_digest("faults", "put")
        .unwrap();
    assert_eq!(
        Some(binding.as_str()),
        pinned.as_deref(),
        "the pin is shown"
    );
    assert!(
        page.contains(&format!("--binding {binding}")),
        "and in the command for a terminal"
    );
    let post = |binding: &str| {
        let body =
            format!("form_token={form_token}&pathway={id}&version={version}&binding={binding}");
        let headers = form_headers(&cookie, &origin);
        let status = http(&console.base(), "POST", "/approve", &headers, &body).0;
        (
            status,
            http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "").2,
        )
    };
    let other = "ab".repeat(32);
    let (status, page) = post(&other);
    assert_eq!(status, 303);
    assert!(
        page.contains("nothing was recorded") && page.contains(&format!("not to {other}")),
        "{page}"
    );
    assert_eq!(scene.state(&id), State::HumanGate);
    assert_eq!(post("not-hex").0, 400, "a binding that is no digest");
    assert_eq!(scene.state(&id), State::HumanGate);
    // Named by its idempotency key (which `rpr approve --pathway` also takes), without a
    // binding: refused as no stored pathway, not approved as whatever is pinned then.
    let key = rpr::store::ReadStore::open_read_only(&scene.db)
        .unwrap()
        .pathway(&id)
        .unwrap()
        .unwrap()
        .idempotency_key;
    let body = format!(
        "form_token={form_token}&pathway={}&version={version}",
        key.bytes().fold(String::new(), |mut s, b| {
            use std::fmt::Write;
            let _ = write!(s, "%{b:02X}");
            s
        })
    );
    let headers = form_headers(&cookie, &origin);
    assert_eq!(
        http(&console.base(), "POST", "/approve", &headers, &body).0,
        400,
        "a pathway named by its key"
    );
    assert_eq!(scene.state(&id), State::HumanGate);

    let (status, _) = post(&binding);
    assert_eq!(status, 303);
    let answer = call.join().unwrap();
    assert_ne!(answer["isError"], true, "{answer}");
    assert_eq!(scene.state(&id), State::Completed);
    assert_eq!(scene.effects().len(), 1);
}

/// A gate's call whose tool has no pin: nothing shows what an approval would be of, and the
/// console refuses an approval that names no binding, so its page offers no Approve button
/// (before, it offered one that could never work); it can still be denied.
#[test]
fn a_gate_call_without_a_pin_is_offered_no_approval() {
    let scene = Scene::new(&json!({}), &[]);
    let call = scene.put_in_background(json!({"key": "k7", "value": "v7"}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let cookie = sign_in(&console);
    let page = |cookie: &str| http(&console.base(), "GET", "/", &[("Cookie", cookie)], "").2;
    assert!(
        page(&cookie).contains("<form class=\"approve\""),
        "pinned: offered"
    );
    rusqlite::Connection::open(&scene.db)
        .unwrap()
        .execute("DELETE FROM pins", [])
        .unwrap();
    let shown = page(&cookie);
    assert!(!shown.contains("<form class=\"approve\""), "{shown}");
    assert!(shown.contains("pin the tool first"), "{shown}");
    let (form_token, version) = (hidden(&shown, "form_token"), hidden(&shown, "version"));
    let body = format!("form_token={form_token}&pathway={id}&version={version}&reason=no+pin");
    let origin = console.origin().to_owned();
    let headers = form_headers(&cookie, &origin);
    assert_eq!(
        http(&console.base(), "POST", "/deny", &headers, &body).0,
        303
    );
    let answer = call.join().unwrap();
    assert_eq!(answer["isError"], true, "{answer}");
    assert_eq!(scene.state(&id), State::Denied);
    assert!(scene.effects().is_empty());
}

/// "Verified" is not kept for the ledger's head alone: a chain-covered row changed behind
/// the ledger's back (no new event, so the head did not move) shows as NOT VERIFIED once
/// `--verify-every` passed.
#[test]
fn a_row_changed_without_a_new_event_is_shown_not_verified() {
    let scene = Scene::new(&json!({}), &[]);
    let client = scene.client();
    let read = client
        .call_tool("get", &json!({"key": "k"}), Duration::from_secs(30))
        .unwrap();
    client.shutdown();
    let id = match read {
        rpr::mcp::Reply::Result(r) => r["_meta"]["dev.rpr/pathway"]["id"]
            .as_str()
            .unwrap()
            .to_owned(),
        other @ rpr::mcp::Reply::Error(_) => panic!("{other:?}"),
    };
    let console = Console::start_with(&scene.db, "host", None, &[], &["--verify-every", "1"]);
    let cookie = sign_in(&console);
    let page = || http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "").2;
    assert!(page().contains("id=\"verified\">Verified"), "{}", page());

    let db = rusqlite::Connection::open(&scene.db).unwrap();
    let changed = db
        .execute(
            "UPDATE pathways SET proposer = 'mallory' WHERE id = ?1",
            [&id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    std::thread::sleep(Duration::from_millis(1200));
    let now = page();
    assert!(now.contains("NOT VERIFIED"), "{now}");
}

/// A request larger than a detail page's budget (`rpr::inspect::PAGE_BUDGET_BYTES`, which
/// cuts a large value to a marker) is shown whole where it is approved: what is approved
/// is what was shown.
#[test]
fn a_request_larger_than_a_detail_page_is_shown_whole_where_it_is_approved() {
    let big = "x".repeat(rpr::inspect::PAGE_BUDGET_BYTES + 100_000);
    let bounds = json!({"evidence_bounds": {
        "max_string_bytes": 4 * 1024 * 1024, "max_total_bytes": 8 * 1024 * 1024}});
    let scene = Scene::new(&bounds, &[]).with_approval_wait("1");
    let call = scene.put_in_background(json!({"key": "big", "value": big}));
    let id = scene.pathway_in(State::HumanGate);
    let console = scene.console("host");
    let cookie = sign_in(&console);
    let (_, _, page) = http(&console.base(), "GET", "/", &[("Cookie", &cookie)], "");
    assert!(
        page.contains("Call <code>put</code> on server <code>faults</code>"),
        "the call is named"
    );
    let page = unchunked(&page);
    assert!(page.contains(&big), "the whole value is on the page");
    let (_, _, detail) = http(
        &console.base(),
        "GET",
        &format!("/pathway/{id}"),
        &[("Cookie", &cookie)],
        "",
    );
    assert!(
        unchunked(&detail).contains(&big),
        "and on the pathway's own page"
    );
    let shown = std::process::Command::new(RPR)
        .args(["show", "--database", &scene.db.display().to_string(), &id])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{shown:?}");
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains(&big),
        "and by `rpr show`"
    );
    let _ = call.join().unwrap();
}

/// A body sent in chunks (`Transfer-Encoding: chunked`), joined.
fn unchunked(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}
