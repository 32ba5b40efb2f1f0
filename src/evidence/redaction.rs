//! Redaction: which member names hold secrets, and the copy of a value with their values
//! replaced.

use serde_json::{Map, Value};

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
    let normalized: String = key
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_NAMES.contains(&normalized.as_str())
        || SECRET_WORDS.iter().any(|word| normalized.contains(word))
}

/// A copy of `value` in which the value of every member whose name
/// [`is_secret_key`], at any depth, is replaced by the string [`REDACTED`].
///
/// The member itself is kept (its name, and its place in member order), and the
/// whole value is replaced even when it is an array or an object, so nothing
/// under a secret name survives. Arrays and other members are copied unchanged.
#[must_use]
pub fn redact(value: &Value) -> Value {
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
                    Some((key, _)) if is_secret_key(key) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
