//! `application/x-www-form-urlencoded`: a query string or a posted form, decoded.

/// The `name=value` pairs of `s`, percent-decoded (`+` is a space), in order. A pair that
/// does not decode to UTF-8 is left out.
pub(crate) fn pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect()
}

/// The first value named `name` in `pairs`.
pub(crate) fn value<'p>(pairs: &'p [(String, String)], name: &str) -> Option<&'p str> {
    pairs
        .iter()
        .find_map(|(k, v)| (k == name).then_some(v.as_str()))
}

fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// `s` percent-encoded for a URL's path segment or query value.
pub(crate) fn encode(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_a_browser_posts_and_refuses_broken_escapes() {
        let p = pairs("pathway=pw_1&reason=not+now%2C+%3Cb%3E&x=%E2%9C%93&bad=%zz&cut=%4");
        assert_eq!(value(&p, "pathway"), Some("pw_1"));
        assert_eq!(value(&p, "reason"), Some("not now, <b>"));
        assert_eq!(value(&p, "x"), Some("✓"));
        assert_eq!(value(&p, "bad"), None);
        assert_eq!(value(&p, "cut"), None);
        assert_eq!(decode(&encode("a b/<é>")).as_deref(), Some("a b/<é>"));
    }
}
