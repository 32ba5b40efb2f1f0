//! The `rpr console` web page in a real browser: Debian's headless chromium, driven through
//! chromedriver by the small `WebDriver` client in `webdriver.rs` (`.ci/install-chromium`
//! installs both; without them these tests fail, they are not skipped).
//!
//! One test binary for many files (issue 27 item 5); see `tests/core/main.rs`. This file
//! holds the client's own self-test, against a static page served here.

mod http;
mod page;
mod scene;
mod webdriver;

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use webdriver::Driver;

/// The self-test's page: a form whose script (a `<script src>`, no inline code, under a
/// CSP that forbids inline code) echoes the input into `#out` and retitles the page.
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>webdriver self-test</title></head>
<body>
<form id="form"><input id="name" type="text" value="old"> <button id="go" type="submit">Echo</button></form>
<p id="out"></p>
<script src="/app.js"></script>
</body></html>
"#;

const SCRIPT: &str = r"
document.getElementById('form').addEventListener('submit', function (event) {
  event.preventDefault();
  var name = document.getElementById('name').value;
  document.getElementById('out').textContent = 'Hello, ' + name + '!';
  setTimeout(function () { document.title = 'echoed ' + name; }, 100);
});
";

/// A static HTTP server on 127.0.0.1 for the self-test: `/` is [`PAGE`] (with a cookie),
/// `/app.js` is [`SCRIPT`], anything else 404. Stops on drop.
struct Site {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Site {
    fn start() -> Site {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the site");
        let addr = listener.local_addr().expect("site address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let _ = serve(stream);
                }
            }
        });
        Site {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request (the connection is closed after it).
fn serve(stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim_end().is_empty() {
            break;
        }
    }
    let path = request.split(' ').nth(1).unwrap_or("/");
    let (status, kind, body, extra) = match path {
        "/" => (
            "200 OK",
            "text/html; charset=utf-8",
            PAGE,
            "Set-Cookie: rpr-selftest=1; Path=/; SameSite=Strict\r\n",
        ),
        "/app.js" => ("200 OK", "text/javascript; charset=utf-8", SCRIPT, ""),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found",
            "",
        ),
    };
    let mut stream = reader.into_inner();
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Content-Security-Policy: default-src 'self'\r\n{extra}\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

#[test]
fn webdriver_drives_headless_chromium() {
    let started = Instant::now();
    let site = Site::start();
    let driver = Driver::start();
    let wait = Duration::from_secs(10);

    driver.goto(&site.url("/"));
    assert_eq!(driver.current_url(), site.url("/"));
    assert_eq!(driver.title(), "webdriver self-test");
    assert!(
        driver.page_source().contains(r#"<p id="out">"#),
        "{}",
        driver.page_source()
    );

    // Find, clear, type, click, and wait for the script's effects.
    let form = driver.wait_for("#form", wait);
    let input = form.find("input#name");
    assert_eq!(input.attribute("type").as_deref(), Some("text"));
    assert_eq!(input.attribute("placeholder"), None);
    assert_eq!(input.property("value"), "old");
    input.clear();
    input.send_keys("rpr operator");
    assert_eq!(input.property("value"), "rpr operator");
    let button = driver.find("#go");
    assert!(button.is_enabled());
    button.click();
    let out = driver.wait_text("#out", "Hello, rpr operator!", wait);
    assert_eq!(out.text(), "Hello, rpr operator!");
    driver.wait_until(wait, "the script retitles the page", |d| {
        d.title() == "echoed rpr operator"
    });

    // Lists: a missing selector is an empty list, not an error; within an element too.
    assert!(driver.find_all("#missing, .nothing-here").is_empty());
    assert!(driver.try_find("#missing").is_none());
    assert_eq!(form.find_all("input, button").len(), 2);
    assert!(form.find_all("p").is_empty());
    assert_eq!(driver.find_all("p").len(), 1);

    // Scripts, with an element as an argument.
    let text = driver.execute(
        "return arguments[0].textContent + arguments[1];",
        &[out.as_arg(), json!("?")],
    );
    assert_eq!(text, "Hello, rpr operator!?");

    // The cookie the page was served with.
    let cookies = driver.cookies();
    assert!(
        cookies
            .iter()
            .any(|c| c["name"] == "rpr-selftest" && c["value"] == "1"),
        "{cookies:?}"
    );

    // A screenshot is a real PNG of the window's size (1280 wide, from its IHDR chunk).
    let png_path =
        std::env::temp_dir().join(format!("rpr-webdriver-selftest-{}.png", std::process::id()));
    driver.screenshot_png(&png_path);
    let png = std::fs::read(&png_path).expect("read the screenshot");
    let _ = std::fs::remove_file(&png_path);
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1280);

    // Reloading gives the page afresh; a failed command names itself and WebDriver's error.
    driver.refresh();
    assert_eq!(driver.find("#out").text(), "");
    let error = driver
        .find("#out")
        .command("POST", "/nonsense", None)
        .unwrap_err();
    assert!(error.to_string().contains("/nonsense"), "{error}");
    assert!(
        !error.code.is_empty() && !error.message.is_empty(),
        "{error:?}"
    );

    drop(driver);
    eprintln!(
        "webdriver self-test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
