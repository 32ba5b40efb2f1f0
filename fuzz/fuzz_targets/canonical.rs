//! Canonical JSON (RFC 8785): for any JSON value, the canonical text parses back to an
//! equal value (numbers as equal doubles), canonicalising is idempotent, and two values that
//! differ only in member order and whitespace get the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// `a` and `b` are equal as JSON values, numbers compared as doubles.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The same value with every object's members in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fuzz_target!(|input: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    let Ok(text) = rpr::canonical::to_string(&value) else {
        return;
    };
    let back: Value = serde_json::from_str(&text).expect("canonical text is JSON");
    assert!(
        same(&back, &value),
        "{text} does not read back as the value"
    );
    assert_eq!(
        rpr::canonical::to_string(&back).expect("again"),
        text,
        "not idempotent"
    );
    assert_eq!(
        rpr::canonical::to_string(&reversed(&value)).expect("reordered"),
        text,
        "member order leaked"
    );
    assert_eq!(
        rpr::canonical::byte_len(&value).expect("length"),
        text.len()
    );
});
