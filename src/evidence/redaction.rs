//! Redaction: which member names hold secrets, and the copy of a value with their values
//! replaced.

use serde_json::{Map, Value};

mod echo;

/// The string that replaces the value of every secret-named member.
pub const REDACTED: &str = "[redacted]";

/// Secret words matched anywhere inside a normalized member name.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "cookie",
    "credential",
    "sessionid",
    "signature",
];

/// Secret words matched only as the whole normalized member name.
const SECRET_NAMES: &[&str] = &["auth"];

/// Whether a member named `key` holds a secret, so its value must be redacted.
///
/// The name is normalized by removing every `-`, `_` and `.` and lowercasing
/// (Unicode lowercase). It is secret when the normalized name
///
/// * **contains** any of `password`, `passwd`, `passphrase`, `secret`, `token`,
///   `apikey`, `accesskey`, `privatekey`, `authorization`, `cookie`,
///   `credential`, `sessionid`, `signature`; or
/// * **is exactly** `auth` (so `author`, `authority` and `auth_method` are not
///   secret, while `Auth` and `AUTH` are).
///
/// The rule is a plain substring match, chosen to be predictable, and it errs on
/// the side of redaction: `api_key`, `X-Api-Key`, `Authorization`,
/// `client_secret`, `refreshToken` and `Set-Cookie` are secret, but so are
/// `tokenizer`, `max_tokens` and `tokens_used`, whose values are lost from the
/// evidence. Rename such members if their values must be kept.
#[must_use]
pub fn is_secret_key(key: &str) -> bool {
    // Every member name of every recorded value passes here (a gated read: about a hundred),
    // and most are short ASCII: those are normalized on the stack and searched byte by byte.
    if let Some(secret) = ascii_secret(key) {
        return secret;
    }
    let normalized: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    is_secret_normalized(normalized.as_bytes())
}

/// Longest member name [`ascii_secret`] normalizes on the stack.
const SHORT_NAME: usize = 64;

/// [`is_secret_key`] of an ASCII name of at most [`SHORT_NAME`] bytes (its lowercase is
/// ASCII's); `None` for any other name.
fn ascii_secret(key: &str) -> Option<bool> {
    if key.len() > SHORT_NAME || !key.is_ascii() {
        return None;
    }
    let mut buf = [0u8; SHORT_NAME];
    let mut len = 0;
    for b in key.bytes().filter(|b| !matches!(b, b'-' | b'_' | b'.')) {
        buf[len] = b.to_ascii_lowercase();
        len += 1;
    }
    Some(is_secret_normalized(&buf[..len]))
}

fn is_secret_normalized(name: &[u8]) -> bool {
    SECRET_NAMES.iter().any(|n| n.as_bytes() == name)
        || SECRET_WORDS.iter().any(|word| {
            let word = word.as_bytes();
            name.len() >= word.len() && name.windows(word.len()).any(|w| w == word)
        })
}

/// A copy of `value` in which the value of every member whose name
/// [`is_secret_key`], at any depth, is replaced by the string [`REDACTED`], and
/// every other copy of such a value is redacted too.
///
/// The member itself is kept (its name, and its place in member order), and the
/// whole value is replaced even when it is an array or an object, so nothing
/// under a secret name survives.
///
/// A secret is often repeated elsewhere in the same value: an MCP server sends
/// `structuredContent` again as a JSON text in `content[].text`, an error's
/// `message` quotes the `data` it carries, a log line echoes an argument. So the
/// strings found under secret names (the **secrets**) are then looked for in
/// every other string value, at any depth:
///
/// * A string that is JSON text (an object or an array, as `serde_json` parses
///   it) is redacted as JSON by this same function, with the secrets of the
///   enclosing value applied inside it too, and written back compactly
///   (`serde_json`'s formatting, not the original one) if anything in it changed.
///   So a JSON echo of `structuredContent` keeps its shape and its other values.
/// * Any other string has each occurrence of a secret, and of the secret as it
///   is written inside a JSON string (escaped), replaced by [`REDACTED`], longest
///   secret first, when the secret is at least [`MIN_SEARCHED_BYTES`] long. A
///   shorter secret is not cut out of the text, which would shred it (a secret
///   `"a"` would take every letter a): if it occurs at all, the **whole string**
///   is replaced by [`REDACTED`]. This errs on the side of redaction.
///
/// Only strings are secrets: an empty string or one that is [`REDACTED`] hides
/// nothing, and numbers, booleans and `null` under secret names are redacted in
/// place but not searched for elsewhere (the name rule also matches counts such
/// as `max_tokens`, and searching for `3` would erase most text). Member names
/// are not searched either. A secret under an innocent name is not known to be
/// a secret, and is stored as it is.
#[must_use]
pub fn redact(value: &Value) -> Value {
    echo::redact_with(value, &[])
}

/// [`redact`], with the secrets of `context` searched for as well: the strings
/// under secret names in `context`, at any depth (`context` itself is not
/// returned). Used for what a target answered to a request, which may echo the
/// request's secret arguments.
#[must_use]
pub fn redact_beside(value: &Value, context: &Value) -> Value {
    let mut secrets = Vec::new();
    let mut stack = vec![context];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => {
                for (key, item) in members {
                    if is_secret_key(key) {
                        collect_strings(item, &mut secrets);
                    } else {
                        stack.push(item);
                    }
                }
            }
            _ => {}
        }
    }
    echo::redact_with(value, &secrets)
}

/// The least length in bytes of a secret that is cut out of a text where it
/// occurs; a text holding a shorter secret is redacted whole (see [`redact`]).
pub const MIN_SEARCHED_BYTES: usize = 4;

/// A copy of `value` in which the value of every secret-named member is
/// [`REDACTED`]; the strings found under those names are appended to `secrets`.
fn redact_members(value: &Value, secrets: &mut Vec<String>) -> Value {
    /// A container being copied: the elements still to copy, and the copy so far.
    enum Frame<'a> {
        Array {
            items: std::slice::Iter<'a, Value>,
            copy: Vec<Value>,
        },
        Object {
            members: serde_json::map::Iter<'a>,
            copy: Map<String, Value>,
            /// The name of the member whose value is being copied.
            name: Option<String>,
        },
    }

    impl Frame<'_> {
        fn into_value(self) -> Value {
            match self {
                Frame::Array { copy, .. } => Value::Array(copy),
                Frame::Object { copy, .. } => Value::Object(copy),
            }
        }
    }

    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        let mut done = None;
        if let Some(value) = next.take() {
            match value {
                Value::Array(items) => stack.push(Frame::Array {
                    items: items.iter(),
                    copy: Vec::with_capacity(items.len()),
                }),
                Value::Object(members) => stack.push(Frame::Object {
                    members: members.iter(),
                    copy: Map::with_capacity(members.len()),
                    name: None,
                }),
                scalar => done = Some(scalar.clone()),
            }
        } else {
            let frame = stack.last_mut().expect("a container is being copied");
            match frame {
                Frame::Array { items, .. } => match items.next() {
                    Some(item) => next = Some(item),
                    None => done = stack.pop().map(Frame::into_value),
                },
                Frame::Object {
                    members,
                    copy,
                    name,
                } => match members.next() {
                    Some((key, item)) if is_secret_key(key) => {
                        collect_strings(item, secrets);
                        copy.insert(key.clone(), Value::String(REDACTED.to_owned()));
                    }
                    Some((key, item)) => {
                        *name = Some(key.clone());
                        next = Some(item);
                    }
                    None => done = stack.pop().map(Frame::into_value),
                },
            }
        }
        if let Some(value) = done {
            match stack.last_mut() {
                None => return value,
                Some(Frame::Array { copy, .. }) => copy.push(value),
                Some(Frame::Object { copy, name, .. }) => {
                    let name = name.take().expect("a member value follows its name");
                    copy.insert(name, value);
                }
            }
        }
    }
}

/// Appends every string in `value`, at any depth, to `out` (iteratively).
fn collect_strings(value: &Value, out: &mut Vec<String>) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => stack.extend(items),
            Value::Object(members) => stack.extend(members.values()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// [`is_secret_key`] as it was written before its ASCII fast path: the rule itself.
    fn by_the_rule(key: &str) -> bool {
        let normalized: String = key
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | '.'))
            .flat_map(char::to_lowercase)
            .collect();
        SECRET_NAMES.contains(&normalized.as_str())
            || SECRET_WORDS.iter().any(|word| normalized.contains(word))
    }

    /// Names made of pieces of the secret words, separators, other letters in both cases
    /// and a few non-ASCII characters that lowercase to ASCII or grow (the Kelvin sign,
    /// dotted capital I), at lengths around the fast path's bound.
    fn names() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            proptest::sample::select(SECRET_WORDS.to_vec()).prop_map(str::to_owned),
            proptest::sample::select(vec!["auth", "AUTH", "Tok", "EN", "pass", "Word", "x"])
                .prop_map(str::to_owned),
            proptest::sample::select(vec!["-", "_", ".", " ", "\u{212a}", "\u{130}", "é"])
                .prop_map(str::to_owned),
            "[a-zA-Z]{1,9}",
        ];
        proptest::collection::vec(piece, 0..14).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// The fast path answers as the rule does, for every name.
        #[test]
        fn the_ascii_fast_path_answers_as_the_rule(key in names()) {
            prop_assert_eq!(is_secret_key(&key), by_the_rule(&key), "{:?}", key);
        }
    }

    #[test]
    fn names_past_the_fast_path_and_non_ascii_ones_follow_the_rule() {
        let long = format!("{}password", "a".repeat(SHORT_NAME));
        assert!(is_secret_key(&long) && ascii_secret(&long).is_none());
        let long_plain = "a".repeat(SHORT_NAME + 1);
        assert!(!is_secret_key(&long_plain));
        // The Kelvin sign lowercases to an ASCII `k`: "to\u{212a}en" is "token".
        assert!(ascii_secret("to\u{212a}en").is_none());
        assert!(is_secret_key("to\u{212a}en"));
        assert_eq!(ascii_secret(&"-".repeat(SHORT_NAME)), Some(false));
    }

    #[test]
    fn secret_keys() {
        for key in [
            "password",
            "Password",
            "db_password",
            "passwd",
            "passphrase",
            "secret",
            "client_secret",
            "CLIENT-SECRET",
            "token",
            "access_token",
            "refreshToken",
            "id.token",
            "api_key",
            "apiKey",
            "X-Api-Key",
            "aws_access_key_id",
            "private_key",
            "privateKey",
            "Authorization",
            "Proxy-Authorization",
            "auth",
            "Auth",
            "_AUTH_",
            "cookie",
            "Set-Cookie",
            "credentials",
            "session_id",
            "sessionId",
            "signature",
            "X-Hub-Signature-256",
            // Separators anywhere are ignored.
            "tok-en",
            "p.a.s.s.w.o.r.d",
            // Errs on the side of redaction.
            "tokenizer",
            "max_tokens",
            "tokens_used",
        ] {
            assert!(is_secret_key(key), "{key} should be secret");
        }
        for key in [
            "",
            "author",
            "authority",
            "auth_method",
            "oauth",
            "path",
            "content",
            "key",
            "api",
            "pass",
            "session",
            "sign",
            "name",
            "pass word",
        ] {
            assert!(!is_secret_key(key), "{key} should not be secret");
        }
    }

    #[test]
    fn redact_replaces_values_at_any_depth_and_keeps_the_rest() {
        let value = json!({
            "path": "/tmp/x",
            "headers": {"Authorization": "Bearer abc", "Accept": "*/*"},
            "items": [{"api_key": {"nested": ["k"]}, "n": 1}, [{"password": null}]],
            "token": ["a", "b"],
            "z": 1.5
        });
        let redacted = redact(&value);
        assert_eq!(
            redacted,
            json!({
                "path": "/tmp/x",
                "headers": {"Authorization": "[redacted]", "Accept": "*/*"},
                "items": [{"api_key": "[redacted]", "n": 1}, [{"password": "[redacted]"}]],
                "token": "[redacted]",
                "z": 1.5
            })
        );
        // Member order is kept.
        let keys: Vec<&String> = redacted.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["path", "headers", "items", "token", "z"]);
        // Scalars and values without secrets come back unchanged.
        for plain in [
            json!(null),
            json!("secret"),
            json!([1, {"a": []}]),
            json!({}),
        ] {
            assert_eq!(redact(&plain), plain);
        }
    }

    #[test]
    fn every_copy_of_a_secret_is_redacted() {
        let echo = r#"{"user":"alice","password":"hunter2-secret"}"#;
        let value = json!({
            "structuredContent": {"user": "alice", "password": "hunter2-secret"},
            "content": [
                {"type": "text", "text": echo},
                {"type": "text", "text": "alice: hunter2-secret, again hunter2-secret"},
                {"type": "text", "text": "quoted {\"p\": \"hunter2-secret\"} as text"},
            ],
            "error": {"message": "bad \"q\\uote\"", "data": {"token": "q\"uote"}},
        });
        let redacted = redact(&value);
        assert_eq!(
            redacted["content"][0]["text"], r#"{"user":"alice","password":"[redacted]"}"#,
            "a JSON echo is redacted as JSON and keeps its other values"
        );
        assert_eq!(
            redacted["content"][1]["text"],
            "alice: [redacted], again [redacted]"
        );
        assert_eq!(
            redacted["content"][2]["text"],
            r#"quoted {"p": "[redacted]"} as text"#
        );
        // The escaped form is found too: `q"uote` is written `q\"uote` in JSON text.
        assert_eq!(redacted["error"]["message"], "bad \"q\\uote\"");
        let escaped = json!({"data": {"token": "q\"uote"}, "log": "saw {\"t\":\"q\\\"uote\"}"});
        assert_eq!(redact(&escaped)["log"], "saw {\"t\":\"[redacted]\"}");
    }

    #[test]
    fn a_short_secret_redacts_the_whole_text_it_occurs_in() {
        let value = json!({
            "pin": {"password": "a1"},
            "echo": r#"{"password":"a1","name":"bob"}"#,
            "prose": "code a1 accepted",
            "other": "nothing here",
            "empty": {"secret": ""},
            "count": {"max_tokens": 3, "used": 3},
        });
        let redacted = redact(&value);
        // A JSON echo is redacted by structure, each of its strings as a text of its own.
        assert_eq!(
            redacted["echo"],
            r#"{"password":"[redacted]","name":"bob"}"#
        );
        assert_eq!(redacted["prose"], REDACTED);
        assert_eq!(redacted["other"], "nothing here");
        // Numbers under secret names are redacted in place, not searched for.
        assert_eq!(
            redacted["count"],
            json!({"max_tokens": "[redacted]", "used": 3})
        );
    }

    #[test]
    fn a_context_secret_is_redacted_where_the_value_repeats_it() {
        let request = json!({"arguments": {"api_key": "s3cret-key", "path": "/x"}});
        let reply = json!({"text": "wrote /x using s3cret-key"});
        assert_eq!(
            redact_beside(&reply, &request),
            json!({"text": "wrote /x using [redacted]"})
        );
        assert_eq!(redact(&reply), reply, "without the context it is not known");
    }
}
