//! `rpr console`: a local web page for operators. It lists the pathways waiting for a
//! decision with the whole request, the other unresolved pathways with who acts next, the
//! tool changes waiting for review and the ledger's verification; and it approves, denies
//! and reconciles by readback by running the same `rpr` commands an operator would type
//! (docs/console.md).
//!
//! It listens on a loopback address only, answers only requests that carry the token it
//! printed when it started, and accepts a form only from its own page ([`guard`]). It is
//! served by `tiny_http`, a small synchronous HTTP/1.1 server: no async runtime, a few
//! threads, nothing else to configure.

mod act;
mod form;
mod guard;
mod page;
mod view;

use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;
use parking_lot::Mutex;
use tiny_http::{Header, Method, Request, Response, Server};

use crate::commands::Database;
use crate::{Exit, Failure, Usage};
use guard::{Guard, Verdict};

/// The arguments of `console`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    #[command(flatten)]
    db: Database,
    /// Who acts in this console: approvals and denials made in it are recorded under this
    /// name (as `rpr approve --as NAME`).
    #[arg(long = "as", value_name = "NAME")]
    approver: String,
    /// The policy (JSON): lets the console reconcile unknown pathways by its readback.
    #[arg(long, value_name = "P")]
    policy: Option<String>,
    /// The MCP client configuration, for reconciling a pathway of `rpr call` (one of
    /// `rpr gate` needs none).
    #[arg(long, value_name = "F")]
    config: Option<String>,
    /// Where to listen: a loopback address and port (port 0: any free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: String,
    /// How often the ledger is verified again though its head did not move, in seconds: a
    /// row changed behind the ledger's back (no new event) shows within that time.
    #[arg(long = "verify-every", value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    verify_every: u64,
}

/// Threads answering requests (a readback may take a while; the others go on meanwhile).
const THREADS: usize = 4;
/// The largest form accepted.
const MAX_FORM_BYTES: u64 = 64 * 1024;

/// Everything a request handler reads.
struct Console {
    database: String,
    shown_database: String,
    approver: String,
    policy: Option<String>,
    config: Option<String>,
    /// The signing flags it was given, passed on to every command it runs.
    signing: Vec<String>,
    guard: Guard,
    log: act::Log,
    /// The ledger's verification, the head it was made at and when: verified again when
    /// the head moved or `verify_every` passed.
    ledger: Mutex<Option<(view::LedgerView, std::time::Instant)>>,
    verify_every: std::time::Duration,
}

/// `console`: serves until interrupted.
pub(crate) fn run(args: &ConsoleArgs, signing: &crate::log::SigningArgs) -> Result<Exit, Failure> {
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        Usage(format!(
            "--listen {}: give an address and a port, such as 127.0.0.1:8080",
            rpr::shown::name(&args.listen)
        ))
    })?;
    if !addr.ip().is_loopback() {
        return Err(Usage(format!(
            "--listen {addr}: the console listens on a loopback address only (127.0.0.1 or ::1); it approves calls, and is not meant to be reached from another machine"
        ))
        .into());
    }
    if args.approver.trim().is_empty() {
        return Err(Usage("--as: give the name you approve and deny as".into()).into());
    }
    // The database must exist and be an rpr database; pages read it read-only.
    crate::config::existing_database(args.db.location())?;
    let server = Server::http(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or("the console's listening address is not an IP address")?;
    let console = Arc::new(Console {
        database: args.db.location().to_owned(),
        shown_database: args.db.shown(),
        approver: args.approver.clone(),
        policy: args.policy.clone(),
        config: args.config.clone(),
        signing: signing.to_args(),
        guard: Guard::new(bound)?,
        log: act::Log::default(),
        ledger: Mutex::new(None),
        verify_every: std::time::Duration::from_secs(args.verify_every),
    });
    outln!("rpr console: {}", console.guard.url());
    errln!(
        "rpr console: serving {} to the browser that opens the URL above, acting as {}; Ctrl-C stops it",
        rpr::shown::name(&console.shown_database),
        rpr::shown::name(&console.approver)
    );
    let server = Arc::new(server);
    let mut threads = Vec::new();
    for i in 0..THREADS {
        let (server, console) = (Arc::clone(&server), Arc::clone(&console));
        threads.push(
            std::thread::Builder::new()
                .name(format!("rpr-console-{i}"))
                .spawn(move || {
                    while let Ok(request) = server.recv() {
                        console.answer(request);
                    }
                })?,
        );
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(Exit::Done)
}

/// A response with the headers every page of the console carries.
fn respond(
    request: Request,
    status: u16,
    content_type: &str,
    body: String,
    extra: &[(&str, String)],
    nonce: Option<&str>,
) {
    let mut response = Response::from_string(body).with_status_code(status);
    let mut headers: Vec<(&str, String)> = vec![
        ("Content-Type", content_type.to_owned()),
        ("Cache-Control", "no-store".to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
        ("X-Frame-Options", "DENY".to_owned()),
        ("Referrer-Policy", "same-origin".to_owned()),
        (
            "Content-Security-Policy",
            nonce.map_or_else(|| page::policy(""), page::policy),
        ),
    ];
    headers.extend(extra.iter().cloned());
    for (name, value) in headers {
        if let Ok(h) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(h);
        }
    }
    if let Err(e) = request.respond(response) {
        errln!("rpr console: answering a request: {e}");
    }
}

/// A fresh nonce for one page's style and script.
fn nonce() -> String {
    guard::random_token().unwrap_or_default()
}

impl Console {
    fn ctx(&self) -> view::Ctx<'_> {
        view::Ctx {
            shown_database: &self.shown_database,
            approver: &self.approver,
            form_token: self.guard.form_token(),
            can_reconcile: self.policy.is_some(),
        }
    }

    /// Whether pathway `id` is a call of `rpr gate` (false when it is not stored: the
    /// command says so).
    fn is_gate_call(&self, id: &str) -> Result<bool, Failure> {
        Ok(self
            .store()?
            .pathway(id)?
            .is_some_and(|r| view::is_gate_call(&r.definition)))
    }

    fn store(&self) -> Result<rpr::store::ReadStore, Failure> {
        Ok(rpr::store::ReadStore::open_read_only(
            crate::config::existing_database(&self.database)?,
        )?)
    }

    /// The ledger's verification, made again when its head moved, and at least every
    /// `verify_every`: the head alone does not show a row changed without a new event,
    /// which a "Verified" kept by the head would hide for good.
    fn ledger(&self, store: &rpr::store::ReadStore) -> Result<view::LedgerView, Failure> {
        let head = store.ledger_head()?;
        let mut kept = self.ledger.lock();
        if let Some((v, at)) = kept.as_ref()
            && v.head == head
            && at.elapsed() < self.verify_every
        {
            return Ok(v.clone());
        }
        let v = view::verify(store)?;
        *kept = Some((v.clone(), std::time::Instant::now()));
        Ok(v)
    }

    fn dashboard_body(&self) -> Result<String, Failure> {
        let store = self.store()?;
        let ledger = self.ledger(&store)?;
        view::dashboard(&store, &self.ctx(), &ledger, &self.log.all())
    }

    fn answer(&self, mut request: Request) {
        let method = request.method().clone();
        let url = request.url().to_owned();
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .map(|h| {
                (
                    h.field.as_str().as_str().to_owned(),
                    h.value.as_str().to_owned(),
                )
            })
            .collect();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        // Only the console's own path: a page of any other says nothing of it.
        let Some(url) = self.guard.inner(&url).map(str::to_owned) else {
            return respond(
                request,
                404,
                "text/plain; charset=utf-8",
                "not found\n".into(),
                &[],
                None,
            );
        };
        match self.guard.check(method.as_str(), &url, &header) {
            Verdict::Allowed => {}
            Verdict::Enter { location } => {
                return respond(
                    request,
                    303,
                    "text/plain; charset=utf-8",
                    "signed in\n".into(),
                    &[
                        ("Set-Cookie", self.guard.set_cookie()),
                        ("Location", location),
                    ],
                    None,
                );
            }
            Verdict::Refused(status, why) => {
                errln!(
                    "rpr console: refused {} {}: {why}",
                    method.as_str(),
                    rpr::shown::name(url.split('?').next().unwrap_or(""))
                );
                return respond(
                    request,
                    status,
                    "text/plain; charset=utf-8",
                    format!("rpr console: {why}\n"),
                    &[],
                    None,
                );
            }
        }
        let path = url
            .split_once('?')
            .map_or(url.as_str(), |(p, _)| p)
            .to_owned();
        let result = match (&method, path.as_str()) {
            (Method::Get, "/") => Self::page("rpr console", true, self.dashboard_body()),
            (Method::Get, "/state") => self.dashboard_body().map(|body| {
                let stamp = rpr::canonical::sha256_hex_bytes(body.as_bytes());
                Page::Json(serde_json::json!({ "stamp": stamp }).to_string())
            }),
            (Method::Get, p) if p.starts_with("/pathway/") => {
                let id = form::pairs(&format!("id={}", &p["/pathway/".len()..]))
                    .into_iter()
                    .next()
                    .map(|(_, v)| v)
                    .unwrap_or_default();
                let body = self.store().and_then(|s| view::detail(&s, &id));
                Self::page(&format!("pathway {id}"), false, body)
            }
            (Method::Post, "/approve" | "/deny" | "/reconcile") => {
                self.act(&path, &mut request).map(|()| Page::Back)
            }
            (Method::Get | Method::Post, _) => Ok(Page::NotFound),
            _ => Ok(Page::Method),
        };
        match result {
            Ok(Page::Html { body, nonce }) => respond(
                request,
                200,
                "text/html; charset=utf-8",
                body,
                &[],
                Some(&nonce),
            ),
            Ok(Page::Json(body)) => respond(request, 200, "application/json", body, &[], None),
            Ok(Page::Back) => respond(
                request,
                303,
                "text/plain; charset=utf-8",
                "done\n".into(),
                &[("Location", self.guard.under("/#actions"))],
                None,
            ),
            Ok(Page::NotFound) => respond(
                request,
                404,
                "text/plain; charset=utf-8",
                "rpr console: no such page\n".into(),
                &[],
                None,
            ),
            Ok(Page::Method) => respond(
                request,
                405,
                "text/plain; charset=utf-8",
                "rpr console: only GET and POST\n".into(),
                &[],
                None,
            ),
            Err(e) => {
                errln!(
                    "rpr console: {} {}: {}",
                    method.as_str(),
                    rpr::shown::name(&path),
                    rpr::shown::text(&e.to_string())
                );
                let nonce = nonce();
                let body = page::layout(
                    "rpr console: error",
                    &nonce,
                    None,
                    &format!(
                        "<p><a href=\"{}\">Back to the console</a></p><h1>Refused</h1><p class=\"bad\" id=\"error\">{}</p>",
                        page::html(&self.guard.under("/")),
                        page::esc(&e.to_string())
                    ),
                );
                respond(
                    request,
                    if e.is::<Usage>() { 400 } else { 500 },
                    "text/html; charset=utf-8",
                    body,
                    &[],
                    Some(&nonce),
                );
            }
        }
    }

    fn page(title: &str, live: bool, body: Result<String, Failure>) -> Result<Page, Failure> {
        let body = body?;
        let stamp = live.then(|| rpr::canonical::sha256_hex_bytes(body.as_bytes()));
        let nonce = nonce();
        Ok(Page::Html {
            body: page::layout(title, &nonce, stamp.as_deref(), &body),
            nonce,
        })
    }

    /// Runs the command a posted form asks for.
    fn act(&self, path: &str, request: &mut Request) -> Result<(), Failure> {
        let form_type = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Content-Type"))
            .map(|h| h.value.as_str().to_owned())
            .unwrap_or_default();
        if !form_type.starts_with("application/x-www-form-urlencoded") {
            return Err(Usage("a form of the console is expected".into()).into());
        }
        let mut body = String::new();
        request
            .as_reader()
            .take(MAX_FORM_BYTES + 1)
            .read_to_string(&mut body)?;
        if body.len() as u64 > MAX_FORM_BYTES {
            return Err(Usage(format!("a form over {MAX_FORM_BYTES} bytes")).into());
        }
        let fields = form::pairs(&body);
        if !self.guard.form_allowed(form::value(&fields, "form_token")) {
            return Err(Usage(
                "the form is not from this console's page (reload the page and try again)".into(),
            )
            .into());
        }
        let pathway = form::value(&fields, "pathway")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| Usage("the form names no pathway".into()))?;
        // A stored pathway's id, as the page links it: `rpr`'s `--pathway` also takes an
        // idempotency key, which would pass the checks below made on an id.
        if self.store()?.pathway(pathway)?.is_none() {
            return Err(Usage(format!(
                "the form names no stored pathway ({}); nothing was done",
                rpr::shown::name(pathway)
            ))
            .into());
        }
        let db = self.database.as_str();
        let mut args: Vec<String> = Vec::new();
        let mut shown: Vec<String> = Vec::new();
        let mut both = |a: &str, s: &str| {
            args.push(a.to_owned());
            shown.push(s.to_owned());
        };
        for flag in &self.signing {
            both(flag, flag);
        }
        let verb = &path[1..];
        both(verb, verb);
        // The database reaches the command in its environment (`RPR_DATABASE`), not on its
        // command line, where a PostgreSQL location's password would be readable by every
        // local user (`/proc/PID/cmdline`); the line shown names it as `rpr show` does.
        let database_shown_at = self.signing.len() + 1;
        both("--pathway", "--pathway");
        both(pathway, pathway);
        // The version the page showed: the step is refused if the pathway moved since
        // (held, escalated, back at the gate), so nobody decides on a page that no longer
        // describes it.
        let version = form::value(&fields, "version")
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| Usage("the form names no version of the pathway it showed".into()))?;
        both("--at-version", "--at-version");
        both(version, version);
        match verb {
            "approve" | "deny" => {
                both("--as", "--as");
                both(&self.approver, &self.approver);
                if verb == "deny"
                    && let Some(reason) =
                        form::value(&fields, "reason").filter(|r| !r.trim().is_empty())
                {
                    // One word: a reason that begins with `-` is not taken for a flag.
                    both(
                        &format!("--reason={reason}"),
                        &format!("--reason={reason:?}"),
                    );
                }
                // A pathway of `rpr call`, approved, is carried out by `rpr approve` itself,
                // which needs the files that start its server again; a gate's ignores them.
                if verb == "approve" {
                    // The binding the page showed: the approval is of it, or refused. A
                    // gate's call is approved only with the one its page showed.
                    let binding = form::value(&fields, "binding").filter(|d| !d.is_empty());
                    if binding.is_none() && self.is_gate_call(pathway)? {
                        return Err(Usage(
                            "the form names no binding: a gate's call is approved only as its page showed it".into(),
                        )
                        .into());
                    }
                    if let Some(digest) = binding {
                        if !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                            return Err(Usage(
                                "the form's binding is not a digest (hexadecimal)".into(),
                            )
                            .into());
                        }
                        both("--binding", "--binding");
                        both(digest, digest);
                    }
                    for (flag, file) in [("--policy", &self.policy), ("--config", &self.config)] {
                        if let Some(file) = file {
                            both(flag, flag);
                            both(file, file);
                        }
                    }
                }
            }
            _ => {
                let Some(policy) = &self.policy else {
                    return Err(Usage(
                        "this console was started without --policy: it cannot reconcile by readback".into(),
                    )
                    .into());
                };
                both("--policy", "--policy");
                both(policy, policy);
                if let Some(config) = &self.config {
                    both("--config", "--config");
                    both(config, config);
                }
            }
        }
        shown.splice(
            database_shown_at..database_shown_at,
            ["--database".to_owned(), self.shown_database.clone()],
        );
        self.log.run(&args, db, format!("rpr {}", shown.join(" ")));
        Ok(())
    }
}

/// What a request gets.
enum Page {
    Html {
        body: String,
        nonce: String,
    },
    Json(String),
    /// Back to the dashboard, where the command's result shows.
    Back,
    NotFound,
    Method,
}
