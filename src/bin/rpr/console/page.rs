//! HTML: every string that comes from a store, a server, a client or an actor is escaped
//! twice over: first as `rpr` escapes it for a terminal ([`rpr::shown`]: controls and bidi
//! overrides made visible), then for HTML (`&`, `<`, `>`, `"`, `'`). Nothing is loaded from
//! elsewhere: the style and the one small script are in the page, allowed by a nonce.

use std::fmt::Write as _;

/// `s` as HTML text or attribute value, its unsafe characters made visible.
pub(crate) fn esc(s: &str) -> String {
    html(&rpr::shown::text(s))
}

/// `s` escaped for HTML only (it was escaped for people already).
pub(crate) fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:72rem;color:#111}
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ccc}
h3{font-size:1rem;margin:0 0 .4rem}
article{border:1px solid #bbb;border-radius:6px;padding:.8rem 1rem;margin:.8rem 0}
article.waiting{border-color:#b36b00;background:#fffaf2}
pre{background:#f4f4f4;padding:.6rem;overflow:auto;max-height:28rem;white-space:pre-wrap;word-break:break-all}
code{background:#f4f4f4;padding:0 .2rem}
.meta{color:#444;font-size:.9rem}
.ok{color:#0a6b0a;font-weight:600}.bad{color:#b00000;font-weight:600}
form{display:inline-block;margin:.4rem .6rem .2rem 0}
button{font-size:1rem;padding:.3rem .9rem}
button.approve{background:#0a6b0a;color:#fff;border:0;border-radius:4px}
button.deny{background:#b00000;color:#fff;border:0;border-radius:4px}
.side{display:grid;grid-template-columns:1fr 1fr;gap:.8rem}
li.action{margin:.4rem 0}
#stale{position:fixed;top:0;left:0;right:0;background:#fff3cd;border-bottom:2px solid #b36b00;padding:.6rem 1.5rem;font-weight:600}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top}
";

/// Watches whether what the page shows changed (the stamp `state` answers: a URL relative
/// to the console's own path, as every link and form of its pages). It never reloads the
/// page by itself: a page that changed under the cursor would take a click meant for one
/// pathway on another's button. Once the stamp moved, every button of its forms is turned
/// off and a bar fixed at the top (it shifts nothing) says so, with a button that reloads.
const SCRIPT: &str = "
(function(){
  var stamp = document.body.dataset.stamp;
  var timer = setInterval(function(){
    fetch('state', {credentials: 'same-origin', cache: 'no-store'})
      .then(function(r){ return r.ok ? r.json() : null; })
      .then(function(s){
        if (!s || s.stamp === stamp || document.getElementById('stale')) return;
        clearInterval(timer);
        var buttons = document.querySelectorAll('form button');
        for (var i = 0; i < buttons.length; i++) { buttons[i].disabled = true; }
        var bar = document.createElement('div');
        bar.id = 'stale';
        bar.setAttribute('role', 'alert');
        bar.textContent = 'What this page shows has changed since it was drawn: its buttons are off until you reload it. ';
        var again = document.createElement('button');
        again.type = 'button';
        again.textContent = 'Reload';
        again.addEventListener('click', function(){ location.reload(); });
        bar.appendChild(again);
        document.body.appendChild(bar);
      })
      .catch(function(){});
  }, 1500);
})();
";

/// A whole page: `title`, the `body` HTML, and the `stamp` the page watches for a change.
pub(crate) fn layout(title: &str, nonce: &str, stamp: Option<&str>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 4096);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style nonce=\"{nonce}\">{STYLE}</style></head>",
        esc(title)
    );
    match stamp {
        Some(stamp) => {
            let _ = write!(out, "<body data-stamp=\"{}\">{body}", html(stamp));
            let _ = write!(out, "<script nonce=\"{nonce}\">{SCRIPT}</script>");
        }
        None => {
            let _ = write!(out, "<body>{body}");
        }
    }
    out.push_str("</body></html>");
    out
}

/// The `Content-Security-Policy` of a page with `nonce`: nothing from elsewhere, no
/// frames, forms only to the console itself.
pub(crate) fn policy(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
}

/// A form that posts `fields` (hidden) and the form token to `action`, with one button.
pub(crate) fn form(
    action: &str,
    form_token: &str,
    fields: &[(&str, &str)],
    extra: &str,
    button: (&str, &str),
) -> String {
    let mut out = format!(
        "<form class=\"{}\" method=\"post\" action=\"{}\">\
         <input type=\"hidden\" name=\"form_token\" value=\"{}\">",
        html(button.0),
        html(action),
        html(form_token)
    );
    for (name, value) in fields {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            html(name),
            esc(value)
        );
    }
    out.push_str(extra);
    let _ = write!(
        out,
        "<button type=\"submit\" class=\"{}\">{}</button></form>",
        html(button.0),
        esc(button.1)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_in_a_value_stay_text() {
        assert_eq!(
            esc("<img src=x onerror=alert(1)>\"'&"),
            "&lt;img src=x onerror=alert(1)&gt;&quot;&#39;&amp;"
        );
        assert_eq!(esc("a\u{1b}[2Jb\u{202e}c"), "a\\u{1b}[2Jb\\u{202e}c");
        let f = form(
            "/deny",
            "t",
            &[("pathway", "pw\"><x")],
            "",
            ("deny", "Deny"),
        );
        assert!(f.contains("value=\"pw&quot;&gt;&lt;x\""), "{f}");
    }
}
