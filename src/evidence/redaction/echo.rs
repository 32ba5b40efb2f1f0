//! The second half of [`redact`](super::redact): every other copy of a secret.
//!
//! [`redact_members`](super::redact_members) replaces the values under secret
//! names and yields the strings it found there; this module looks for those
//! strings in every other string of the value (see `redact` for the rules).

use serde_json::Value;

use super::{MIN_SEARCHED_BYTES, REDACTED, redact_members};

/// [`redact`](super::redact), with `outer` (the secrets of an enclosing value,
/// when `value` was parsed from one of its strings) searched for as well.
pub(super) fn redact_with(value: &Value, outer: &[String]) -> Value {
    let mut found = outer.to_vec();
    let mut copy = redact_members(value, &mut found);
    // An empty string or the marker hides nothing, and would match everywhere.
    found.retain(|s| !s.is_empty() && s != REDACTED);
    // Longest first, so a shorter secret inside a longer one cannot leave the
    // rest of the longer one behind.
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.dedup();
    let secrets: Vec<Secret> = found.into_iter().map(Secret::new).collect();
    scrub(&mut copy, &secrets, &outer_of(&secrets));
    copy
}

/// One secret, as written and as written inside a JSON string.
struct Secret {
    text: String,
    /// The JSON-escaped form, when it differs (quotes, backslashes, controls).
    escaped: Option<String>,
}

impl Secret {
    fn new(text: String) -> Self {
        let quoted = serde_json::to_string(&text).unwrap_or_default();
        let escaped = quoted
            .get(1..quoted.len().saturating_sub(1))
            .filter(|e| *e != text)
            .map(str::to_owned);
        Self { text, escaped }
    }

    fn forms(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.text.as_str()).chain(self.escaped.as_deref())
    }
}

/// The secrets as plain strings, to hand down into a JSON text.
fn outer_of(secrets: &[Secret]) -> Vec<String> {
    secrets.iter().map(|s| s.text.clone()).collect()
}

/// Redacts every copy of `secrets` in the string values of `value`, in place.
/// JSON texts are redacted as JSON whether or not there are secrets, since they
/// may hold secret-named members of their own.
fn scrub(value: &mut Value, secrets: &[Secret], outer: &[String]) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => {
                if let Some(redacted) = scrub_text(text, secrets, outer) {
                    *text = redacted;
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(members) => stack.extend(members.values_mut()),
            _ => {}
        }
    }
}

/// The redacted form of `text`, or `None` when it holds nothing to redact.
fn scrub_text(text: &str, secrets: &[Secret], outer: &[String]) -> Option<String> {
    if text == REDACTED {
        return None;
    }
    if let Some(parsed) = json_text(text) {
        // Redacted by structure, so a secret of any length is removed without
        // cutting up the member names and other values around it.
        let redacted = redact_with(&parsed, outer);
        return (redacted != parsed)
            .then(|| serde_json::to_string(&redacted).unwrap_or_else(|_| REDACTED.to_owned()));
    }
    let mut out: Option<String> = None;
    for secret in secrets {
        for form in secret.forms() {
            let current = out.as_deref().unwrap_or(text);
            if !current.contains(form) {
                continue;
            }
            if secret.text.len() < MIN_SEARCHED_BYTES {
                return Some(REDACTED.to_owned());
            }
            out = Some(current.replace(form, REDACTED));
        }
    }
    out
}

/// `text` parsed, when it is a JSON object or array. (`serde_json` refuses
/// nesting deeper than 128, so what is parsed is shallow enough to drop and
/// serialize recursively; a deeper text is searched as text.)
fn json_text(text: &str) -> Option<Value> {
    let start = text.trim_start();
    if !(start.starts_with('{') || start.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}
