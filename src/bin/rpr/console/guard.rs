//! Who may use the console, checked on every request before anything is read or done:
//!
//! - the request names the loopback address the console listens on as its `Host` (a page
//!   of another site that rebinds a name of its own to 127.0.0.1 gets nothing);
//! - it is for a page under the console's own path, a random prefix printed with the URL
//!   (`/c-…/`): a browser sends a host's cookies to every port of that host, so the cookie
//!   is scoped to that path, and a service on another port of 127.0.0.1 that the browser
//!   visits never receives it;
//! - it carries the token printed when the console started: in the URL once (the console
//!   then sets it as a cookie only this origin gets back, `HttpOnly`, `SameSite=Strict`,
//!   `Path` the console's prefix, and sends the browser to the same page without it), or
//!   in that cookie;
//! - a form (every `POST`) also carries the form token written into the console's own
//!   pages, and comes from the console's own origin when the browser says where it comes
//!   from (`Origin`, `Sec-Fetch-Site`): another site's page cannot post it.

use std::fmt::Write as _;

/// The console's tokens and the one origin it answers for.
pub(crate) struct Guard {
    token: String,
    form_token: String,
    /// The `Host` values accepted: the address listened on, and `localhost` at its port.
    hosts: Vec<String>,
    cookie: String,
    /// The path every page is under (`/c-` and 16 random hex digits, no trailing slash).
    prefix: String,
}

/// What a request may do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Go on.
    Allowed,
    /// The token came in the URL: set the cookie, then go to `location` (the same path,
    /// without the token).
    Enter { location: String },
    /// Refused: the status and why, for the page that says so.
    Refused(u16, &'static str),
}

/// 32 random bytes from the operating system, as hex.
pub(crate) fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut s = String::with_capacity(64);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    Ok(s)
}

/// Compares two secrets in time independent of where they first differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Guard {
    /// New tokens for a console listening on `addr` (a loopback address).
    pub(crate) fn new(addr: std::net::SocketAddr) -> std::io::Result<Self> {
        let port = addr.port();
        let ip = match addr {
            std::net::SocketAddr::V4(a) => a.ip().to_string(),
            std::net::SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        Ok(Self {
            token: random_token()?,
            form_token: random_token()?,
            hosts: vec![format!("{ip}:{port}"), format!("localhost:{port}")],
            cookie: format!("rpr_console_{port}"),
            prefix: format!("/c-{}", &random_token()?[..16]),
        })
    }

    /// The URL to open: the address and the console's path, with the token.
    pub(crate) fn url(&self) -> String {
        format!(
            "http://{}{}/?token={}",
            self.hosts[0], self.prefix, self.token
        )
    }

    /// The console's own path for a page's `path` (`/`, `/pathway/…`).
    pub(crate) fn under(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// `url` (path and query as requested) without the console's path, when it is under
    /// it: what the routes see. `None`: not a page of this console.
    pub(crate) fn inner<'u>(&self, url: &'u str) -> Option<&'u str> {
        // Compared as a secret: a page that knew it could have a listener on another port
        // of this host receive the cookie.
        let n = self.prefix.len();
        let head = url.get(..n)?;
        let rest = &url[n..];
        (same_secret(head, &self.prefix) && rest.starts_with('/')).then_some(rest)
    }

    /// The form token every form of the console's pages carries.
    pub(crate) fn form_token(&self) -> &str {
        &self.form_token
    }

    /// The `Set-Cookie` value that lets this browser in from now on.
    pub(crate) fn set_cookie(&self) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path={}/",
            self.cookie, self.token, self.prefix
        )
    }

    /// Checks a request's address, token and (for a `POST`) origin. `url` is the path and
    /// query as requested; `header` looks a header up by name (any case).
    pub(crate) fn check(
        &self,
        method: &str,
        url: &str,
        header: &dyn Fn(&str) -> Option<String>,
    ) -> Verdict {
        let host = header("host").unwrap_or_default();
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
            return Verdict::Refused(
                421,
                "this console answers only at the loopback address it printed",
            );
        }
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let from_cookie = header("cookie").is_some_and(|c| {
            c.split(';').any(|kv| {
                kv.trim()
                    .split_once('=')
                    .is_some_and(|(k, v)| k == self.cookie && same_secret(v, &self.token))
            })
        });
        if method == "GET"
            && let Some(given) = super::form::pairs(query)
                .into_iter()
                .find_map(|(k, v)| (k == "token").then_some(v))
        {
            if !same_secret(&given, &self.token) {
                return Verdict::Refused(403, "the token in this URL is not this console's");
            }
            // Only to a page of this console: `//host` or `/\host` would leave it.
            let own = path.starts_with('/') && !path.starts_with("//") && !path.starts_with("/\\");
            return Verdict::Enter {
                location: self.under(if own { path } else { "/" }),
            };
        }
        if !from_cookie {
            return Verdict::Refused(
                403,
                "open the URL the console printed when it started (it carries the token)",
            );
        }
        if method == "POST" {
            let own = header("origin").is_none_or(|o| {
                self.hosts
                    .iter()
                    .any(|h| o.eq_ignore_ascii_case(&format!("http://{h}")))
            });
            let same_site = header("sec-fetch-site").is_none_or(|s| s == "same-origin");
            if !own || !same_site {
                return Verdict::Refused(403, "a form of another site cannot act here");
            }
        }
        Verdict::Allowed
    }

    /// Whether a posted form carries the console's form token.
    pub(crate) fn form_allowed(&self, given: Option<&str>) -> bool {
        given.is_some_and(|g| same_secret(g, &self.form_token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new("127.0.0.1:8123".parse().unwrap()).unwrap()
    }

    fn headers<'a>(list: &'a [(&'a str, String)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            list.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn pages_are_under_a_random_path_and_the_cookie_is_scoped_to_it() {
        let (g, other) = (guard(), guard());
        assert!(
            g.prefix.starts_with("/c-") && g.prefix.len() == 19,
            "{}",
            g.prefix
        );
        assert_ne!(g.prefix, other.prefix, "random");
        assert!(g.url().contains(&format!("{}/?token=", g.prefix)));
        assert!(
            g.set_cookie().ends_with(&format!("Path={}/", g.prefix)),
            "a browser sends it to no other path, so to no other port's pages: {}",
            g.set_cookie()
        );
        assert_eq!(g.inner(&g.under("/approve")), Some("/approve"));
        assert_eq!(
            g.inner(&format!("{}/?token=x", g.prefix)),
            Some("/?token=x")
        );
        assert_eq!(g.inner("/"), None);
        assert_eq!(g.inner("/approve"), None);
        assert_eq!(g.inner(&other.under("/")), None);
        assert_eq!(g.inner(&g.prefix), None, "no trailing slash: not a page");
        assert_eq!(g.inner(&format!("{}x/", g.prefix)), None);
    }

    #[test]
    fn the_token_in_the_url_sets_the_cookie_and_only_the_cookie_lets_in_after() {
        let g = guard();
        let host = ("host", "127.0.0.1:8123".to_owned());
        let url = format!("/?token={}", g.token);
        assert_eq!(
            g.check("GET", &url, &headers(std::slice::from_ref(&host))),
            Verdict::Enter {
                location: g.under("/")
            }
        );
        let away = format!("//evil.example/?token={}", g.token);
        assert_eq!(
            g.check("GET", &away, &headers(std::slice::from_ref(&host))),
            Verdict::Enter {
                location: g.under("/")
            },
            "the sign-in sends the browser to this console only"
        );
        assert!(matches!(
            g.check("GET", "/?token=00", &headers(std::slice::from_ref(&host))),
            Verdict::Refused(403, _)
        ));
        assert!(matches!(
            g.check("GET", "/", &headers(std::slice::from_ref(&host))),
            Verdict::Refused(403, _)
        ));
        let cookie = ("cookie", format!("a=b; rpr_console_8123={}", g.token));
        assert_eq!(
            g.check("GET", "/", &headers(&[host.clone(), cookie.clone()])),
            Verdict::Allowed
        );
        let other_port = ("cookie", format!("rpr_console_9000={}", g.token));
        assert!(matches!(
            g.check("GET", "/", &headers(&[host, other_port])),
            Verdict::Refused(403, _)
        ));
    }

    #[test]
    fn another_host_name_or_another_sites_form_is_refused() {
        let g = guard();
        let cookie = ("cookie", format!("rpr_console_8123={}", g.token));
        let rebound = ("host", "evil.example:8123".to_owned());
        assert!(matches!(
            g.check("GET", "/", &headers(&[rebound, cookie.clone()])),
            Verdict::Refused(421, _)
        ));
        let host = ("host", "localhost:8123".to_owned());
        let foreign = ("origin", "http://evil.example".to_owned());
        assert!(matches!(
            g.check(
                "POST",
                "/approve",
                &headers(&[host.clone(), cookie.clone(), foreign])
            ),
            Verdict::Refused(403, _)
        ));
        let cross = ("sec-fetch-site", "cross-site".to_owned());
        assert!(matches!(
            g.check(
                "POST",
                "/approve",
                &headers(&[host.clone(), cookie.clone(), cross])
            ),
            Verdict::Refused(403, _)
        ));
        let own = ("origin", "http://localhost:8123".to_owned());
        assert_eq!(
            g.check("POST", "/approve", &headers(&[host, cookie, own])),
            Verdict::Allowed
        );
        assert!(g.form_allowed(Some(g.form_token())));
        assert!(!g.form_allowed(Some("x")));
        assert!(!g.form_allowed(None));
    }
}
