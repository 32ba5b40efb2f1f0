//! A small W3C `WebDriver` client for the console's browser tests: Debian's `chromedriver`
//! driving Debian's `chromium` headless, over plain HTTP/1.1 on loopback (std and
//! `serde_json` only).
//!
//! Each command is one HTTP request on a connection of its own (`Connection: close`); the
//! reply's body is read by `Content-Length`, chunked, or to the end of the stream. The
//! methods panic on failure (`#[track_caller]`: the panic names the test's line) with the
//! command sent and the driver's error code and message; [`Driver::command`] and
//! [`Element::command`] are the non-panicking way in. Nothing is skipped: without the two
//! binaries [`Driver::start`] panics and says what to install.
#![allow(
    dead_code,
    reason = "the self-test and the console's scenario tests each use a different part"
)]

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The key under which the protocol names a web element (W3C, "Elements").
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long chromedriver has to answer `GET /status` with `ready: true`.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one HTTP exchange may take (the session's own timeouts are 30 s).
const IO_TIMEOUT: Duration = Duration::from_secs(90);
/// How often the `wait_*` helpers poll.
const POLL: Duration = Duration::from_millis(50);

/// A failed command: the driver's error code (or `http`, `io`) and message.
#[derive(Debug, Clone)]
pub(crate) struct Error {
    /// What was sent, e.g. `POST /session/…/element`.
    pub(crate) command: String,
    /// The protocol's error code (`no such element`, `stale element reference`, …), or
    /// `http` (a reply that is not the protocol's) or `io` (no reply).
    pub(crate) code: String,
    /// The driver's message, or the transport's.
    pub(crate) message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Error {
            command,
            code,
            message,
        } = self;
        write!(f, "webdriver {command}: {code}: {message}")
    }
}

/// A chromedriver process and one headless chromium session in it; both end on drop.
#[derive(Debug)]
pub(crate) struct Driver {
    child: Child,
    addr: SocketAddr,
    session: String,
    /// chromedriver's log and chromium's profile; removed on drop (unless empty).
    dir: PathBuf,
}

/// One element of the page; valid while the page keeps it (else `stale element reference`).
#[derive(Debug, Clone)]
pub(crate) struct Element<'d> {
    driver: &'d Driver,
    id: String,
}

impl Driver {
    /// Starts chromedriver (`CHROMEDRIVER`, else `/usr/bin/chromedriver`) on a free loopback
    /// port, waits until it is ready, and opens a session of headless chromium (`CHROMIUM`,
    /// else `/usr/bin/chromium`) with a fresh profile. Panics, with chromedriver's log, if
    /// any of that fails.
    #[track_caller]
    pub(crate) fn start() -> Driver {
        let chromedriver = binary("CHROMEDRIVER", "/usr/bin/chromedriver");
        let chromium = binary("CHROMIUM", "/usr/bin/chromium");
        let dir = fresh_dir();
        let log = dir.join("chromedriver.log");
        let mut last = String::new();
        // The port is found free by binding and releasing it; another process may take it
        // before chromedriver does (then chromedriver exits), so a few tries.
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("bind a loopback port")
                .port();
            let out = std::fs::File::create(&log).expect("create chromedriver.log");
            let child = Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(out.try_clone().expect("clone chromedriver.log"))
                .stderr(out)
                .process_group(0) // a group of its own: drop ends chromium with it
                .spawn();
            let child = match child {
                Ok(child) => child,
                Err(e) => panic!("start {}: {e}", chromedriver.display()),
            };
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let mut driver = Driver {
                child,
                addr,
                session: String::new(),
                dir: dir.clone(),
            };
            match driver.wait_ready() {
                Ok(()) => {
                    driver.new_session(&chromium);
                    return driver;
                }
                Err(e) => last = e,
            }
            driver.dir = PathBuf::new(); // drop ends this chromedriver and keeps the log
        }
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        panic!("chromedriver did not become ready: {last}\nchromedriver's log:\n{log}");
    }

    /// Polls `GET /status` until it says ready, chromedriver exits, or [`READY_TIMEOUT`].
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("chromedriver exited ({status})"));
            }
            let reply = http(self.addr, "GET", "/status", None);
            if reply.as_ref().is_ok_and(|v| v["ready"] == true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("not ready after {READY_TIMEOUT:?}: {reply:?}"));
            }
            sleep(POLL);
        }
    }

    /// Opens the session: headless, a fresh profile, none of chromium's own network traffic
    /// (the machine has no network: without these flags chromium's connections fail).
    #[track_caller]
    fn new_session(&mut self, chromium: &Path) {
        let profile = format!("--user-data-dir={}", self.dir.join("profile").display());
        let args = [
            "--headless=new",
            "--no-sandbox", // as root, chromium does not start with its sandbox
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,800",
            &profile,
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "timeouts": {"implicit": 0, "pageLoad": 30_000, "script": 30_000},
        }}});
        let reply = match http(self.addr, "POST", "/session", Some(&capabilities)) {
            Ok(reply) => reply,
            Err(e) => {
                let log = std::fs::read_to_string(self.dir.join("chromedriver.log"));
                panic!("{e}\nchromedriver's log:\n{}", log.unwrap_or_default())
            }
        };
        let Some(id) = reply["sessionId"].as_str() else {
            panic!("new session: no id in {reply}")
        };
        id.clone_into(&mut self.session);
    }

    /// Sends one command of this session: `path` is relative to `/session/{id}` (`""` for
    /// the session itself); a `POST` without `body` sends `{}`. Returns the reply's `value`.
    pub(crate) fn command(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Error> {
        let body = body.or_else(|| (method == "POST").then(|| json!({})));
        let path = format!("/session/{}{path}", self.session);
        http(self.addr, method, &path, body.as_ref())
    }

    #[track_caller]
    fn get(&self, path: &str) -> Value {
        match self.command("GET", path, None) {
            Ok(value) => value,
            Err(e) => panic!("{e}"),
        }
    }

    #[track_caller]
    fn post(&self, path: &str, body: Value) -> Value {
        match self.command("POST", path, Some(body)) {
            Ok(value) => value,
            Err(e) => panic!("{e}"),
        }
    }

    /// Navigates to `url` and waits for the page to load (a page that cannot be reached is
    /// no error: chromium shows its error page).
    #[track_caller]
    pub(crate) fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url }));
    }

    /// Reloads the current page.
    #[track_caller]
    pub(crate) fn refresh(&self) {
        self.post("/refresh", json!({}));
    }

    /// The current page's URL.
    #[track_caller]
    pub(crate) fn current_url(&self) -> String {
        string(self.get("/url"))
    }

    /// The current page's title.
    #[track_caller]
    pub(crate) fn title(&self) -> String {
        string(self.get("/title"))
    }

    /// The current DOM, serialized.
    #[track_caller]
    pub(crate) fn page_source(&self) -> String {
        string(self.get("/source"))
    }

    /// The first element matching `css`; panics if there is none.
    #[track_caller]
    pub(crate) fn find(&self, css: &str) -> Element<'_> {
        self.element(&self.post("/element", by_css(css)))
    }

    /// The first element matching `css`, or `None` (other errors panic).
    #[track_caller]
    pub(crate) fn try_find(&self, css: &str) -> Option<Element<'_>> {
        match self.command("POST", "/element", Some(by_css(css))) {
            Ok(v) => Some(self.element(&v)),
            Err(e) if e.code == "no such element" => None,
            Err(e) => panic!("{e}"),
        }
    }

    /// Every element matching `css`, in document order (empty if none).
    #[track_caller]
    pub(crate) fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        self.elements(&self.post("/elements", by_css(css)))
    }

    /// Polls until an element matches `css`; panics after `timeout`.
    #[track_caller]
    pub(crate) fn wait_for(&self, css: &str, timeout: Duration) -> Element<'_> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(element) = self.try_find(css) {
                return element;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for an element to match {css:?}"
            );
            sleep(POLL);
        }
    }

    /// Polls until an element matching `css` has a text containing `needle`; panics after
    /// `timeout` with the text it had last.
    #[track_caller]
    pub(crate) fn wait_text(&self, css: &str, needle: &str, timeout: Duration) -> Element<'_> {
        let deadline = Instant::now() + timeout;
        let mut last = Value::from("(no such element)");
        loop {
            // The element may be replaced between find and read: any error polls again.
            if let Ok(v) = self.command("POST", "/element", Some(by_css(css))) {
                let element = self.element(&v);
                last = element
                    .command("GET", "/text", None)
                    .unwrap_or_else(|e| e.to_string().into());
                if last.as_str().is_some_and(|t| t.contains(needle)) {
                    return element;
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {css:?} to contain {needle:?}; it had {last}"
            );
            sleep(POLL);
        }
    }

    /// Polls `ready` until it returns true; panics after `timeout`, naming `what`.
    #[track_caller]
    pub(crate) fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        mut ready: impl FnMut(&Driver) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        while !ready(self) {
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting until {what}"
            );
            sleep(POLL);
        }
    }

    /// Runs `script` as a function body with `arguments` = `args` (pass an element with
    /// [`Element::as_arg`]); returns what it returns (an element as a `{ELEMENT_KEY: id}`).
    #[track_caller]
    pub(crate) fn execute(&self, script: &str, args: &[Value]) -> Value {
        self.post("/execute/sync", json!({ "script": script, "args": args }))
    }

    /// Writes a PNG screenshot of the viewport to `path` (1280 wide; `--window-size=1280,800`
    /// leaves 1280 x 657 of it to the page in `--headless=new`).
    #[track_caller]
    pub(crate) fn screenshot_png(&self, path: impl AsRef<Path>) {
        let path = path.as_ref();
        let png = match base64_decode(&string(self.get("/screenshot"))) {
            Ok(png) if png.starts_with(b"\x89PNG\r\n\x1a\n") => png,
            Ok(_) => panic!("screenshot: not a PNG"),
            Err(e) => panic!("screenshot: {e}"),
        };
        if let Err(e) = std::fs::write(path, png) {
            panic!("write {}: {e}", path.display());
        }
    }

    /// The current page's cookies, as the protocol's cookie objects (`name`, `value`, …).
    #[track_caller]
    pub(crate) fn cookies(&self) -> Vec<Value> {
        match self.get("/cookie") {
            Value::Array(cookies) => cookies,
            other => panic!("cookies: not a list: {other}"),
        }
    }

    #[track_caller]
    fn element(&self, v: &Value) -> Element<'_> {
        let id = v[ELEMENT_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("not an element: {v}"));
        Element {
            driver: self,
            id: id.to_owned(),
        }
    }

    #[track_caller]
    fn elements(&self, v: &Value) -> Vec<Element<'_>> {
        let list = v
            .as_array()
            .unwrap_or_else(|| panic!("not a list of elements: {v}"));
        list.iter().map(|e| self.element(e)).collect()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.command("DELETE", "", None); // quits chromium
        }
        // Then the whole group chromedriver leads: chromedriver, and any of chromium's
        // processes that outlived the session (or all of them, if the delete failed).
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Element<'_> {
    /// One command on this element: `path` is relative to `/session/{id}/element/{element}`.
    pub(crate) fn command(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Error> {
        let path = format!("/element/{}{path}", self.id);
        self.driver.command(method, &path, body)
    }

    #[track_caller]
    fn get(&self, path: &str) -> Value {
        self.driver.get(&format!("/element/{}{path}", self.id))
    }

    #[track_caller]
    fn post(&self, path: &str, body: Value) -> Value {
        self.driver
            .post(&format!("/element/{}{path}", self.id), body)
    }

    /// Clicks the element's centre (scrolled into view; fails if another element is on top).
    #[track_caller]
    pub(crate) fn click(&self) {
        self.post("/click", json!({}));
    }

    /// The element's rendered text (`innerText`-like: hidden text is left out).
    #[track_caller]
    pub(crate) fn text(&self) -> String {
        string(self.get("/text"))
    }

    /// The attribute `name` as the markup has it, or `None` if absent.
    #[track_caller]
    pub(crate) fn attribute(&self, name: &str) -> Option<String> {
        self.get(&format!("/attribute/{name}"))
            .as_str()
            .map(str::to_owned)
    }

    /// The DOM property `name` (an input's current `value`, a checkbox's `checked`, …).
    #[track_caller]
    pub(crate) fn property(&self, name: &str) -> Value {
        self.get(&format!("/property/{name}"))
    }

    /// Whether the element is enabled (a form control without `disabled`).
    #[track_caller]
    pub(crate) fn is_enabled(&self) -> bool {
        self.get("/enabled") == true
    }

    /// Types `text` into the element (focused first).
    #[track_caller]
    pub(crate) fn send_keys(&self, text: &str) {
        self.post("/value", json!({ "text": text }));
    }

    /// Empties an input or textarea.
    #[track_caller]
    pub(crate) fn clear(&self) {
        self.post("/clear", json!({}));
    }

    /// The first element within this one matching `css`; panics if there is none.
    #[track_caller]
    pub(crate) fn find(&self, css: &str) -> Element<'_> {
        self.driver.element(&self.post("/element", by_css(css)))
    }

    /// Every element within this one matching `css` (empty if none).
    #[track_caller]
    pub(crate) fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        self.driver.elements(&self.post("/elements", by_css(css)))
    }

    /// The element as an argument of [`Driver::execute`].
    pub(crate) fn as_arg(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }
}

/// The path in `var`, else `default`; panics, saying what to install, if it is not a file.
#[track_caller]
fn binary(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var).map_or_else(|| default.into(), PathBuf::from);
    assert!(
        path.is_file(),
        "{} not found (or set {var}): the console's browser tests need Debian's chromium and \
         chromium-driver: apt-get install chromium chromium-driver (.ci/install-chromium)",
        path.display()
    );
    path
}

/// A fresh, empty directory under the system's temporary directory.
fn fresh_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("rpr-webdriver-{}-{n}-{nanos}", std::process::id());
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

fn by_css(css: &str) -> Value {
    json!({ "using": "css selector", "value": css })
}

#[track_caller]
fn string(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => panic!("expected a string, got {other}"),
    }
}

/// One HTTP/1.1 exchange with chromedriver; returns the reply's `value`, or the error it
/// names (`value.error`), or an `http` error for any other status than 200.
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Error> {
    let fail = |code: &str, message| Error {
        command: format!("{method} {path}"),
        code: code.into(),
        message,
    };
    let io = |e: std::io::Error| fail("io", e.to_string());
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(io)?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all(format!("{head}{body}").as_bytes())
        .map_err(io)?;
    let (status, raw) = read_response(&mut BufReader::new(stream)).map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| fail("http", format!("HTTP {status}, not JSON ({e}): {text}")))?;
    let value = json.get("value").cloned().unwrap_or_default();
    if let Some(code) = value.get("error").and_then(Value::as_str) {
        let message = value["message"].as_str().unwrap_or_default();
        let message = message
            .strip_prefix(&format!("{code}: "))
            .unwrap_or(message);
        return Err(fail(code, format!("{message} (HTTP {status})")));
    }
    if status != 200 {
        return Err(fail("http", format!("HTTP {status}: {text}")));
    }
    Ok(value)
}

/// Reads a response: the status code and the body (by `Content-Length`, chunked, or to EOF).
fn read_response(r: &mut impl BufRead) -> std::io::Result<(u16, Vec<u8>)> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let line = read_line(r)?;
    let status = line.split(' ').nth(1).and_then(|s| s.parse().ok());
    let status = status.ok_or_else(|| bad(format!("bad status line {line:?}")))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        let line = read_line(r)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("bad header {line:?}")))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse()
                    .map_err(|_| bad(format!("bad header {line:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let line = read_line(r)?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size =
                usize::from_str_radix(size, 16).map_err(|_| bad(format!("bad chunk {line:?}")))?;
            if size == 0 {
                break; // trailers, if any, are left unread: the connection closes
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            read_line(r)?;
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        r.read_exact(&mut body)?;
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok((status, body))
}

/// One line without its line end; an error at the end of the stream.
fn read_line(r: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// Decodes standard base64 (RFC 4648: `+/`, `=` padding optional, whitespace ignored).
pub(crate) fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in text.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => return Err(format!("base64: bad byte {c:#04x} at {i}")),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from(acc >> bits).expect("8 bits"));
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[test]
fn base64_decodes_rfc4648_vectors() {
    for (text, plain) in [
        ("", ""),
        ("Zg==", "f"),
        ("Zm8=", "fo"),
        ("Zm9v", "foo"),
        ("Zm9vYg==", "foob"),
        ("Zm9vYmE=", "fooba"),
        ("Zm9vYmFy", "foobar"),
        ("Zm9v\r\nYmFy", "foobar"),
    ] {
        assert_eq!(base64_decode(text).unwrap(), plain.as_bytes(), "{text:?}");
    }
    assert_eq!(base64_decode("/+8=").unwrap(), [0xff, 0xef]);
    assert!(base64_decode("Zm9v!").unwrap_err().contains("0x21 at 4"));
}

#[test]
fn replies_are_read_by_length_chunked_or_to_the_end() {
    let read = |raw: &str| {
        let (status, body) = read_response(&mut raw.as_bytes()).unwrap();
        (status, String::from_utf8(body).unwrap())
    };
    let by_length = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n{}\r\nignored";
    assert_eq!(read(by_length), (200, "{}\r\n".to_owned()));
    let chunked = "HTTP/1.1 404 Not Found\r\ntransfer-encoding: Chunked\r\n\r\n\
                   3;x=y\r\n{\"v\r\na\r\nalue\": 1}\n\r\n0\r\n\r\n";
    assert_eq!(read(chunked), (404, "{\"value\": 1}\n".to_owned()));
    let to_eof = "HTTP/1.0 500 Internal Server Error\r\nServer: x\r\n\r\n{\"value\": null}";
    assert_eq!(read(to_eof), (500, "{\"value\": null}".to_owned()));
    assert!(
        read_response(&mut "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort".as_bytes()).is_err()
    );
    assert!(read_response(&mut "garbage\r\n\r\n".as_bytes()).is_err());
}
