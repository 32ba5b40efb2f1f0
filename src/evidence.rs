//! Evidence redaction and bounds, and the formats of signed evidence.
//!
//! The submodules [`merkle`], [`note`], [`checkpoint`] and [`proof`] are the building
//! blocks of evidence a database writer cannot rewrite (`docs/evidence.md`): an RFC 6962
//! Merkle log, C2SP signed notes with Ed25519 keys, C2SP checkpoints and proof files. The
//! store's signed log ([`crate::store::log`]) is built on them. The rest of this page is
//! about redaction.
//!
//! Evidence is JSON that the runtime stores in the ledger and the database: the
//! arguments a pathway carried, what a target answered, what a readback saw.
//! Before it is stored it is **redacted** (values under secret-named keys, and
//! every other copy of them, are replaced; see [`redact`]) and **bounded**
//! (depth, node count, string length and total size are limited), so that a
//! stored record never holds a credential under a secret name, nor a copy of
//! one, and never grows without limit.
//!
//! Two entry points apply the same redaction and the same [`Bounds`]:
//!
//! * [`check`] refuses a value that exceeds a bound, naming the first violation.
//!   It is used **before dispatch**, where refusing is safe: nothing has happened yet.
//! * [`fit`] never fails: a value that exceeds a bound is replaced by a small
//!   marker carrying its digest. It is used **after dispatch**, where the target
//!   may already have acted and an error would lose the record of that outcome.
//!
//! # Measures
//!
//! All measures are taken on the *redacted* value.
//!
//! * **depth**: a scalar, `[]` or `{}` has depth 1; a non-empty array or object
//!   has depth 1 + the largest depth among its elements or member values
//!   (names do not count). So `1` and `[]` have depth 1, `[1]` and `{"a":1}`
//!   depth 2, and `{"a":{"b":1}}` depth 3: the depth is the number of values on
//!   the longest path from the root down to a leaf.
//! * **nodes**: the number of JSON values, counting every container and every
//!   scalar, but not object member names. `{"a":[1,2]}` has 4 nodes.
//! * **string bytes**: the UTF-8 length of each string value and of each object
//!   member name, each measured on its own (not summed).
//! * **total bytes**: the length of the RFC 8785 canonical serialization
//!   ([`crate::canonical`]), which is what digests are computed over.
//!
//! A value is within bounds when every measure is **at most** its limit.
//!
//! # Stack safety
//!
//! Redaction, measuring and canonicalization are iterative, so a value built
//! programmatically to any depth is measured (and refused) without overflowing
//! the stack. Values this module builds and then discards are dismantled
//! iteratively too. (`serde_json::Value`'s own `Drop` is recursive, so a caller
//! holding a very deep value must still take care when dropping it.)

use serde_json::{Map, Value};

use crate::canonical::{self, CanonicalError};

mod base64;
pub mod checkpoint;
pub mod merkle;
pub mod note;
pub mod proof;
mod redaction;

pub use redaction::{MIN_SEARCHED_BYTES, REDACTED, is_secret_key, redact, redact_beside};

/// Limits for one evidence value. See the [module documentation](self) for
/// exactly how each measure is counted; a value is within bounds when every
/// measure is at most its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Bounds {
    /// Greatest nesting depth (a scalar or empty container at the top is 1).
    pub max_depth: usize,
    /// Greatest number of JSON values (containers and scalars, not names).
    pub max_nodes: usize,
    /// Greatest UTF-8 length of any one string value or member name.
    pub max_string_bytes: usize,
    /// Greatest length of the RFC 8785 canonical serialization.
    pub max_total_bytes: usize,
}

impl Bounds {
    /// Depth 32, 10 000 nodes, 64 KiB per string, 1 MiB in total.
    pub const DEFAULT: Bounds = Bounds::new(32, 10_000, 65_536, 1_048_576);

    /// Bounds with the given limits, in field order.
    #[must_use]
    pub const fn new(
        max_depth: usize,
        max_nodes: usize,
        max_string_bytes: usize,
        max_total_bytes: usize,
    ) -> Self {
        Self {
            max_depth,
            max_nodes,
            max_string_bytes,
            max_total_bytes,
        }
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why a value was refused as evidence.
///
/// Paths are JSON Pointers (RFC 6901) into the redacted value; `""` is the
/// whole value. A path segment longer than 64 bytes is shortened to its first
/// 64 bytes (at a character boundary) followed by `…`, so that an over-long
/// member name cannot make the message itself over-long.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvidenceError {
    /// The value nests deeper than [`Bounds::max_depth`].
    #[error(
        "evidence nests deeper than {limit} levels at {path:?}; flatten it, \
         summarize the nested part, or raise the limit (max_depth of the evidence bounds: `evidence_bounds.max_depth` in an rpr policy)"
    )]
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
        /// Where the first value deeper than the limit is.
        path: String,
    },
    /// The value has more than [`Bounds::max_nodes`] JSON values.
    #[error(
        "evidence has more than {limit} JSON values (the first one over is at \
         {path:?}); send a summary or a sample instead, or raise the limit (max_nodes of the evidence bounds: `evidence_bounds.max_nodes` in an rpr policy)"
    )]
    TooManyNodes {
        /// The limit that was exceeded.
        limit: usize,
        /// Where the first value over the limit is.
        path: String,
    },
    /// A string value or member name is longer than [`Bounds::max_string_bytes`].
    #[error(
        "evidence {} at {path:?} is {bytes} bytes, over the limit of {limit}; \
         shorten it, store it elsewhere and send its digest, or raise \
         the limit (max_string_bytes of the evidence bounds: `evidence_bounds.max_string_bytes` \
         in an rpr policy)",
        if *.name { "member name" } else { "string" }
    )]
    StringTooLong {
        /// Where the string is; for a member name, the path of that member.
        path: String,
        /// Whether the over-long string is a member name rather than a value.
        name: bool,
        /// Its UTF-8 length.
        bytes: usize,
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The canonical serialization is longer than [`Bounds::max_total_bytes`].
    #[error(
        "evidence is {bytes} bytes in canonical form, over the limit of {limit}; \
         send a summary, or raise the limit (max_total_bytes of the evidence bounds: `evidence_bounds.max_total_bytes` in an rpr policy)"
    )]
    TooLarge {
        /// The canonical length.
        bytes: usize,
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The value has no RFC 8785 canonical form, so it cannot be digested.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

impl EvidenceError {
    /// A stable name for what was violated: the [`Bounds`] field name
    /// (`max_depth`, `max_nodes`, `max_string_bytes`, `max_total_bytes`), or
    /// `canonical` when the value has no canonical form. [`fit`] records it as
    /// the marker's `reason`.
    #[must_use]
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::TooDeep { .. } => "max_depth",
            Self::TooManyNodes { .. } => "max_nodes",
            Self::StringTooLong { .. } => "max_string_bytes",
            Self::TooLarge { .. } => "max_total_bytes",
            Self::Canonical(_) => "canonical",
        }
    }
}

/// Redacts `value` (see [`redact`]) and returns the redacted value if it is
/// within `bounds`; otherwise refuses it, naming the first violation.
///
/// Use this **before dispatch**, where refusing is safe because nothing has
/// happened yet. A returned value always has a canonical form.
///
/// The redacted value is walked in document order (array elements by index,
/// object members in the order the `Map` holds them), checking for each value
/// its depth, then the node count, then (for a string) its length, and for each
/// member its name's length before its value. The first of these that exceeds
/// its limit is reported. Only when all pass is the canonical length checked
/// against [`Bounds::max_total_bytes`]; a value without a canonical form (an
/// integer beyond ±2^53) is refused with [`EvidenceError::Canonical`].
pub fn check(value: &Value, bounds: &Bounds) -> Result<Value, EvidenceError> {
    let redacted = redact(value);
    match measure(&redacted, bounds) {
        Ok(()) => Ok(redacted),
        Err(error) => {
            dispose(redacted);
            Err(error)
        }
    }
}

/// Redacts `value` (see [`redact`]) and returns it if it is within `bounds`, as
/// [`check`] would; otherwise returns, instead of an error, a marker object
/// standing for it:
///
/// ```json
/// {"truncated":true,"reason":"max_total_bytes","sha256":"<64 hex digits>","bytes":1048577}
/// ```
///
/// * `reason` is [`EvidenceError::reason`] of the violation [`check`] would report;
/// * `sha256` is the lowercase hex sha256 of the redacted value's RFC 8785
///   canonical form, and `bytes` its length in bytes, both of the **whole**
///   redacted value, not just up to the violation;
/// * when the redacted value has no canonical form (reason `canonical`: an
///   integer beyond ±2^53), `sha256` and `bytes` are taken over the same
///   serialization with such integers written as their exact decimal digits
///   instead. This keeps the fingerprint deterministic and independent of member
///   order (unlike `serde_json`'s own output), and it is computed iteratively,
///   where `serde_json`'s serializer would recurse.
///
/// Use this **after dispatch**: the target may already have acted, and refusing
/// to record its answer would lose the only evidence of what happened. The
/// marker records that a value existed, why it was not kept, and a digest that
/// matches the value if it is retained elsewhere. It is never checked against
/// `bounds` itself: it has depth 2, 5 nodes and fewer than 150 canonical bytes.
/// A returned value always has a canonical form.
#[must_use]
pub fn fit(value: &Value, bounds: &Bounds) -> Value {
    fit_redacted(redact(value), bounds)
}

/// [`fit`], redacting with [`redact_beside`]: the secrets of `context` (the
/// request a reply answers) are redacted wherever the reply repeats them.
#[must_use]
pub fn fit_beside(value: &Value, context: &Value, bounds: &Bounds) -> Value {
    fit_redacted(redact_beside(value, context), bounds)
}

/// The second half of [`fit`]: bounds an already redacted value.
fn fit_redacted(redacted: Value, bounds: &Bounds) -> Value {
    let Err(error) = measure(&redacted, bounds) else {
        return redacted;
    };
    let marker = truncation_marker(&redacted, error.reason());
    dispose(redacted);
    marker
}

/// The marker that stands for a value not kept, and why: the one shape used wherever rpr
/// leaves a value out (evidence over its bounds in [`fit`], values over the size budgets of
/// [`crate::inspect`]).
///
/// ```json
/// {"truncated":true,"reason":"<why>","sha256":"<64 hex digits>","bytes":<length>}
/// ```
///
/// `sha256` and `bytes` are of `value`'s RFC 8785 canonical form (for a value that has
/// none, of the same serialization with integers beyond ±2^53 written as their exact
/// digits; see [`fit`]). The members are in this order.
#[must_use]
pub fn truncation_marker(value: &Value, reason: &str) -> Value {
    let (sha256, bytes) = canonical::sha256_hex_and_len(value)
        .unwrap_or_else(|_| canonical::sha256_hex_and_len_lenient(value));
    let mut marker = Map::new();
    marker.insert("truncated".to_owned(), Value::Bool(true));
    marker.insert("reason".to_owned(), Value::from(reason));
    marker.insert("sha256".to_owned(), Value::String(sha256));
    marker.insert("bytes".to_owned(), Value::from(bytes));
    Value::Object(marker)
}

/// One step of a JSON Pointer.
#[derive(Debug, Clone, Copy)]
enum Segment<'a> {
    Index(usize),
    Name(&'a str),
}

/// The longest path segment written out in full in an error.
const MAX_SEGMENT_BYTES: usize = 64;

/// The JSON Pointer (RFC 6901) for `path`, long segments shortened.
fn pointer(path: &[Segment<'_>]) -> String {
    let mut out = String::new();
    for segment in path {
        out.push('/');
        match segment {
            Segment::Index(index) => out.push_str(&index.to_string()),
            Segment::Name(name) => {
                let mut end = name.len().min(MAX_SEGMENT_BYTES);
                while !name.is_char_boundary(end) {
                    end -= 1;
                }
                out.push_str(&name[..end].replace('~', "~0").replace('/', "~1"));
                if end < name.len() {
                    out.push('…');
                }
            }
        }
    }
    out
}

/// Checks `value` (already redacted) against `bounds`, iteratively.
fn measure(value: &Value, bounds: &Bounds) -> Result<(), EvidenceError> {
    /// The elements of a container still to visit.
    enum Children<'a> {
        Array(std::iter::Enumerate<std::slice::Iter<'a, Value>>),
        Object(serde_json::map::Iter<'a>),
    }

    // `path` names the value being visited; `stack` holds the containers above
    // it, so the value being visited has depth `path.len() + 1`, and while a
    // container's children are being chosen `path.len() + 1 == stack.len()`.
    let mut path: Vec<Segment<'_>> = Vec::new();
    let mut stack: Vec<Children<'_>> = Vec::new();
    let mut nodes: usize = 0;
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            if path.len() + 1 > bounds.max_depth {
                return Err(EvidenceError::TooDeep {
                    limit: bounds.max_depth,
                    path: pointer(&path),
                });
            }
            nodes += 1;
            if nodes > bounds.max_nodes {
                return Err(EvidenceError::TooManyNodes {
                    limit: bounds.max_nodes,
                    path: pointer(&path),
                });
            }
            match value {
                Value::Array(items) => stack.push(Children::Array(items.iter().enumerate())),
                Value::Object(members) => stack.push(Children::Object(members.iter())),
                scalar => {
                    if let Value::String(text) = scalar {
                        check_string(&path, text, false, bounds)?;
                    }
                    // Done with this scalar (a no-op for a scalar at the top).
                    path.pop();
                }
            }
        }
        let Some(children) = stack.last_mut() else {
            break;
        };
        let child = match children {
            Children::Array(items) => items
                .next()
                .map(|(index, item)| (Segment::Index(index), item)),
            Children::Object(members) => members
                .next()
                .map(|(name, item)| (Segment::Name(name), item)),
        };
        let Some((segment, item)) = child else {
            // Done with this container (a no-op for the container at the top).
            stack.pop();
            path.pop();
            continue;
        };
        path.push(segment);
        if let Segment::Name(name) = segment {
            check_string(&path, name, true, bounds)?;
        }
        next = Some(item);
    }
    let bytes = canonical::byte_len(value)?;
    if bytes > bounds.max_total_bytes {
        return Err(EvidenceError::TooLarge {
            bytes,
            limit: bounds.max_total_bytes,
        });
    }
    Ok(())
}

/// Refuses `text` (at `path`; a member name when `name`) if it is longer than
/// [`Bounds::max_string_bytes`].
fn check_string(
    path: &[Segment<'_>],
    text: &str,
    name: bool,
    bounds: &Bounds,
) -> Result<(), EvidenceError> {
    if text.len() > bounds.max_string_bytes {
        return Err(EvidenceError::StringTooLong {
            path: pointer(path),
            name,
            bytes: text.len(),
            limit: bounds.max_string_bytes,
        });
    }
    Ok(())
}

/// Drops `value` without recursion, however deep it is.
fn dispose(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(members) => pending.extend(members.into_iter().map(|(_, item)| item)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Bounds that only limit one measure.
    fn only(max_depth: usize, max_nodes: usize, max_string: usize, max_total: usize) -> Bounds {
        Bounds::new(max_depth, max_nodes, max_string, max_total)
    }

    const UNLIMITED: usize = usize::MAX;

    fn depth_bounds(limit: usize) -> Bounds {
        only(limit, UNLIMITED, UNLIMITED, UNLIMITED)
    }

    fn node_bounds(limit: usize) -> Bounds {
        only(UNLIMITED, limit, UNLIMITED, UNLIMITED)
    }

    fn string_bounds(limit: usize) -> Bounds {
        only(UNLIMITED, UNLIMITED, limit, UNLIMITED)
    }

    fn total_bounds(limit: usize) -> Bounds {
        only(UNLIMITED, UNLIMITED, UNLIMITED, limit)
    }

    /// `depth - 1` arrays around `1`: a value of exactly `depth`.
    fn nested(depth: usize) -> Value {
        let mut value = json!(1);
        for _ in 1..depth {
            value = Value::Array(vec![value]);
        }
        value
    }

    /// An array of strings whose canonical form is exactly `total` bytes.
    fn of_canonical_len(total: usize) -> Value {
        const CHUNK: usize = 60_000;
        let count = total / CHUNK + 1;
        // "[" + "]" + (count - 1) commas + 2 quotes per string.
        let mut content = total - (3 * count + 1);
        let mut items = Vec::new();
        for _ in 0..count {
            let len = content.min(CHUNK);
            items.push(Value::String("x".repeat(len)));
            content -= len;
        }
        let value = Value::Array(items);
        assert_eq!(canonical::byte_len(&value), Ok(total));
        value
    }

    #[test]
    fn defaults() {
        let bounds = Bounds::default();
        assert_eq!(bounds, Bounds::DEFAULT);
        assert_eq!(bounds.max_depth, 32);
        assert_eq!(bounds.max_nodes, 10_000);
        assert_eq!(bounds.max_string_bytes, 65_536);
        assert_eq!(bounds.max_total_bytes, 1_048_576);
        assert_eq!(REDACTED, "[redacted]");
    }

    #[test]
    fn check_returns_the_redacted_value() {
        let value = json!({"user": "ann", "password": "hunter2"});
        assert_eq!(
            check(&value, &Bounds::DEFAULT),
            Ok(json!({"user": "ann", "password": "[redacted]"}))
        );
    }

    #[test]
    fn depth_boundaries() {
        assert_eq!(check(&json!(1), &depth_bounds(1)), Ok(json!(1)));
        assert_eq!(check(&json!([]), &depth_bounds(1)), Ok(json!([])));
        assert_eq!(check(&json!({}), &depth_bounds(1)), Ok(json!({})));
        assert!(matches!(
            check(&json!(1), &depth_bounds(0)),
            Err(EvidenceError::TooDeep { limit: 0, ref path }) if path.is_empty()
        ));
        assert!(check(&json!([[]]), &depth_bounds(2)).is_ok());
        assert!(check(&json!([[]]), &depth_bounds(1)).is_err());
        assert!(check(&json!([1]), &depth_bounds(2)).is_ok());
        assert!(check(&json!({"a": 1}), &depth_bounds(2)).is_ok());
        assert!(check(&json!({"a": 1}), &depth_bounds(1)).is_err());

        let three = json!({"a": {"b": 1}});
        assert!(check(&three, &depth_bounds(3)).is_ok());
        assert_eq!(
            check(&three, &depth_bounds(2)),
            Err(EvidenceError::TooDeep {
                limit: 2,
                path: "/a/b".to_owned()
            })
        );
        // The deepest branch counts, wherever it is.
        let wide = json!({"x": 1, "y": [2, [3, [4]]], "z": {}});
        assert!(check(&wide, &depth_bounds(5)).is_ok());
        assert_eq!(
            check(&wide, &depth_bounds(4)),
            Err(EvidenceError::TooDeep {
                limit: 4,
                path: "/y/1/1/0".to_owned()
            })
        );
        // The default limit, at 32 and 33.
        assert!(check(&nested(32), &Bounds::DEFAULT).is_ok());
        assert_eq!(
            check(&nested(33), &Bounds::DEFAULT),
            Err(EvidenceError::TooDeep {
                limit: 32,
                path: "/0".repeat(32)
            })
        );
    }

    #[test]
    fn node_boundaries() {
        let four = json!({"a": [1, 2]});
        assert!(check(&four, &node_bounds(4)).is_ok());
        assert_eq!(
            check(&four, &node_bounds(3)),
            Err(EvidenceError::TooManyNodes {
                limit: 3,
                path: "/a/1".to_owned()
            })
        );
        assert!(check(&json!(null), &node_bounds(1)).is_ok());
        assert!(check(&json!(null), &node_bounds(0)).is_err());
        // Names are not nodes.
        assert!(check(&json!({"a": null, "b": null}), &node_bounds(3)).is_ok());
        // The default limit: the array itself plus its elements.
        let at_limit = Value::Array(vec![Value::Null; 9_999]);
        assert!(check(&at_limit, &Bounds::DEFAULT).is_ok());
        let over = Value::Array(vec![Value::Null; 10_000]);
        assert_eq!(
            check(&over, &Bounds::DEFAULT),
            Err(EvidenceError::TooManyNodes {
                limit: 10_000,
                path: "/9999".to_owned()
            })
        );
    }

    #[test]
    fn string_boundaries() {
        // Bytes, not characters: "é" is 2 bytes.
        let value = json!({"k": "éé"});
        assert!(check(&value, &string_bounds(4)).is_ok());
        assert_eq!(
            check(&value, &string_bounds(3)),
            Err(EvidenceError::StringTooLong {
                path: "/k".to_owned(),
                name: false,
                bytes: 4,
                limit: 3
            })
        );
        // Member names are measured too.
        let value = json!({"abcd": "x", "list": ["ab"]});
        assert!(check(&value, &string_bounds(4)).is_ok());
        assert_eq!(
            check(&value, &string_bounds(3)),
            Err(EvidenceError::StringTooLong {
                path: "/abcd".to_owned(),
                name: true,
                bytes: 4,
                limit: 3
            })
        );
        assert_eq!(
            check(&json!(["a", "abc"]), &string_bounds(2)),
            Err(EvidenceError::StringTooLong {
                path: "/1".to_owned(),
                name: false,
                bytes: 3,
                limit: 2
            })
        );
        // The default limit, at 65 536 and 65 537 bytes.
        let at_limit = json!({"data": "x".repeat(65_536)});
        assert!(check(&at_limit, &Bounds::DEFAULT).is_ok());
        let over = json!({"data": "x".repeat(65_537)});
        assert!(matches!(
            check(&over, &Bounds::DEFAULT),
            Err(EvidenceError::StringTooLong {
                bytes: 65_537,
                limit: 65_536,
                name: false,
                ..
            })
        ));
        let long_name = json!({ "x".repeat(65_537): 1 });
        assert!(matches!(
            check(&long_name, &Bounds::DEFAULT),
            Err(EvidenceError::StringTooLong {
                bytes: 65_537,
                name: true,
                ..
            })
        ));
    }

    #[test]
    fn total_boundaries() {
        // Canonical form `{"a":[1,"b"]}` is 13 bytes, whatever the input spacing.
        let value: Value = serde_json::from_str(r#"{ "a" : [ 1.0 , "b" ] }"#).expect("valid");
        assert!(check(&value, &total_bounds(13)).is_ok());
        assert_eq!(
            check(&value, &total_bounds(12)),
            Err(EvidenceError::TooLarge {
                bytes: 13,
                limit: 12
            })
        );
        // The default limit, at exactly 1 MiB and one byte more.
        let at_limit = of_canonical_len(1_048_576);
        assert!(check(&at_limit, &Bounds::DEFAULT).is_ok());
        let over = of_canonical_len(1_048_577);
        assert_eq!(
            check(&over, &Bounds::DEFAULT),
            Err(EvidenceError::TooLarge {
                bytes: 1_048_577,
                limit: 1_048_576
            })
        );
    }

    #[test]
    fn bounds_apply_to_the_redacted_value() {
        // Redaction can shrink a value below a bound...
        let deep_secret = json!({"token": [[[[1]]]]});
        assert_eq!(
            check(&deep_secret, &depth_bounds(2)),
            Ok(json!({"token": "[redacted]"}))
        );
        // ...and can grow it past one: `{"password":"[redacted]"}` is 25 bytes.
        let short_secret = json!({"password": ""});
        assert!(check(&short_secret, &total_bounds(25)).is_ok());
        assert!(check(&short_secret, &total_bounds(24)).is_err());
        assert!(check(&short_secret, &string_bounds(10)).is_ok());
        assert!(check(&short_secret, &string_bounds(9)).is_err());
    }

    #[test]
    fn the_first_violation_in_document_order_is_reported() {
        let value = json!({"long": "xxxxx", "deep": [[1]]});
        let bounds = only(2, UNLIMITED, 4, UNLIMITED);
        assert!(matches!(
            check(&value, &bounds),
            Err(EvidenceError::StringTooLong { ref path, .. }) if path == "/long"
        ));
        let value = json!({"deep": [[1]], "long": "xxxxx"});
        assert!(matches!(
            check(&value, &bounds),
            Err(EvidenceError::TooDeep { ref path, .. }) if path == "/deep/0"
        ));
        // Total size is checked last.
        assert!(matches!(
            check(&json!(["xxxxx"]), &only(UNLIMITED, UNLIMITED, 4, 3)),
            Err(EvidenceError::StringTooLong { .. })
        ));
    }

    #[test]
    fn unsafe_integers_are_refused() {
        let value = json!({"id": u64::MAX});
        assert_eq!(
            check(&value, &Bounds::DEFAULT),
            Err(EvidenceError::Canonical(CanonicalError::UnsafeInteger {
                value: i128::from(u64::MAX)
            }))
        );
        assert!(check(&json!({"id": 1_u64 << 53}), &Bounds::DEFAULT).is_ok());
    }

    #[test]
    fn paths_are_escaped_json_pointers_with_long_segments_shortened() {
        let value = json!({"a/b~c": {"": ["x"]}});
        assert!(matches!(
            check(&value, &depth_bounds(3)),
            Err(EvidenceError::TooDeep { ref path, .. }) if path == "/a~1b~0c//0"
        ));
        let name = format!("{}é{}", "n".repeat(63), "m".repeat(100));
        let value = json!({ name: [1] });
        let Err(EvidenceError::TooDeep { path, .. }) = check(&value, &depth_bounds(2)) else {
            panic!("too deep");
        };
        // 63 bytes, then "é" would cross the 64-byte mark.
        assert_eq!(path, format!("/{}…/0", "n".repeat(63)));
    }

    #[test]
    fn errors_say_what_to_do() {
        let cases = [
            (
                EvidenceError::TooDeep {
                    limit: 3,
                    path: "/a".into(),
                },
                "`evidence_bounds.max_depth` in an rpr policy",
            ),
            (
                EvidenceError::TooManyNodes {
                    limit: 3,
                    path: "/a".into(),
                },
                "`evidence_bounds.max_nodes` in an rpr policy",
            ),
            (
                EvidenceError::StringTooLong {
                    path: "/a".into(),
                    name: true,
                    bytes: 5,
                    limit: 4,
                },
                "member name at \"/a\" is 5 bytes",
            ),
            (
                EvidenceError::StringTooLong {
                    path: "/a".into(),
                    name: false,
                    bytes: 5,
                    limit: 4,
                },
                "string at \"/a\" is 5 bytes",
            ),
            (
                EvidenceError::TooLarge { bytes: 5, limit: 4 },
                "`evidence_bounds.max_total_bytes` in an rpr policy",
            ),
            (
                EvidenceError::Canonical(CanonicalError::UnsafeInteger { value: 1 << 60 }),
                "JSON string",
            ),
        ];
        for (error, needle) in cases {
            let message = error.to_string();
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            // The knob in words a user of the command line can act on, not a Rust path.
            assert!(!message.contains("Bounds::"), "{message:?}");
        }
    }

    fn marker(reason: &str, redacted: &Value) -> Value {
        let text = canonical::to_string(redacted).expect("canonicalizes");
        json!({
            "truncated": true,
            "reason": reason,
            "sha256": canonical::sha256_hex_bytes(text.as_bytes()),
            "bytes": text.len(),
        })
    }

    #[test]
    fn fit_keeps_values_within_bounds() {
        let value = json!({"a": [1, "b"], "secret": "s"});
        assert_eq!(
            fit(&value, &Bounds::DEFAULT),
            json!({"a": [1, "b"], "secret": "[redacted]"})
        );
        // `{"a":[1,"b"],"secret":"[redacted]"}` is 35 bytes.
        assert_eq!(
            fit(&value, &total_bounds(35)),
            json!({"a": [1, "b"], "secret": "[redacted]"})
        );
        assert_eq!(
            fit(&value, &total_bounds(34))["reason"],
            json!("max_total_bytes")
        );
    }

    #[test]
    fn fit_replaces_values_over_a_bound_with_a_marker() {
        let value = json!({"a": {"b": "cc"}, "api_key": "k"});
        let redacted = redact(&value);
        for (bounds, reason) in [
            (depth_bounds(2), "max_depth"),
            (node_bounds(2), "max_nodes"),
            (string_bounds(1), "max_string_bytes"),
            (total_bounds(10), "max_total_bytes"),
        ] {
            let fitted = fit(&value, &bounds);
            assert_eq!(fitted, marker(reason, &redacted), "{reason}");
            assert_eq!(
                check(&value, &bounds).map_err(|error| error.reason()),
                Err(reason)
            );
        }
        // The marker's members are in a fixed order and it canonicalizes.
        let fitted = fit(&value, &depth_bounds(2));
        let keys: Vec<&String> = fitted.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["truncated", "reason", "sha256", "bytes"]);
        assert!(canonical::to_string(&fitted).is_ok());
        // The digest is of the redacted value: the secret is not in it.
        assert_eq!(
            fitted["sha256"],
            json!(
                canonical::sha256_hex(&json!({"a": {"b": "cc"}, "api_key": "[redacted]"}))
                    .expect("canonicalizes")
            )
        );
        // `{"a":{"b":"cc"},"api_key":"[redacted]"}` is 39 bytes.
        assert_eq!(fitted["bytes"], json!(39));
    }

    #[test]
    fn fit_marks_values_without_a_canonical_form() {
        let value = json!({"id": u64::MAX, "a": 1});
        let fitted = fit(&value, &Bounds::DEFAULT);
        let text = r#"{"a":1,"id":18446744073709551615}"#;
        assert_eq!(
            fitted,
            json!({
                "truncated": true,
                "reason": "canonical",
                "sha256": canonical::sha256_hex_bytes(text.as_bytes()),
                "bytes": text.len(),
            })
        );
        // A bound violation found first is the reason, and the digest still
        // falls back to exact integers.
        let fitted = fit(&value, &node_bounds(1));
        assert_eq!(fitted["reason"], json!("max_nodes"));
        assert_eq!(
            fitted["sha256"],
            json!(canonical::sha256_hex_bytes(text.as_bytes()))
        );
    }

    #[test]
    fn deep_values_are_refused_without_overflowing_the_stack() {
        const DEPTH: usize = 100_000;
        // A small stack proves nothing here recurses per level.
        let handle = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(|| {
                let value = nested(DEPTH);
                let checked = check(&value, &Bounds::DEFAULT);
                let fitted = fit(&value, &Bounds::DEFAULT);
                let redacted = redact(&value);
                // `Value`'s own `Drop` recurses; take these apart iteratively.
                dispose(redacted);
                dispose(value);
                (checked, fitted)
            })
            .expect("thread spawns");
        let (checked, fitted) = handle.join().expect("no stack overflow");
        assert_eq!(
            checked,
            Err(EvidenceError::TooDeep {
                limit: 32,
                path: "/0".repeat(32)
            })
        );
        let text = format!("{}1{}", "[".repeat(DEPTH - 1), "]".repeat(DEPTH - 1));
        assert_eq!(
            fitted,
            json!({
                "truncated": true,
                "reason": "max_depth",
                "sha256": canonical::sha256_hex_bytes(text.as_bytes()),
                "bytes": text.len(),
            })
        );
    }
}
