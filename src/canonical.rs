//! RFC 8785 canonical JSON (the JSON Canonicalization Scheme, "JCS").
//!
//! Every digest this crate records (bindings, evidence, ledger entries) is the
//! sha256 of the canonical form produced here, so two parties that hold the same
//! JSON value always compute the same bytes, whatever member order or number
//! spelling the value arrived in.
//!
//! The rules, from RFC 8785 section 3.2:
//!
//! * no whitespace between tokens;
//! * object members sorted by their names compared as arrays of UTF-16 code
//!   units (not UTF-8 bytes, not code points: `"\u{1F600}"` sorts before
//!   `"\u{FB33}"` because its leading surrogate is `0xD83D`);
//! * strings escaped exactly as ECMAScript `JSON.stringify` does: `\"`, `\\`,
//!   `\b`, `\f`, `\n`, `\r`, `\t`, other control characters below U+0020 as
//!   `\u00xx` with lowercase hex, and everything else (including `/`, non-ASCII,
//!   U+2028 and U+2029) written literally as UTF-8;
//! * numbers written as ECMAScript `Number.prototype.toString` writes an
//!   IEEE-754 double: the shortest digits that round-trip, plain notation for
//!   decimal exponents from -6 to 20 (`0.000001`, `100000000000000000000`),
//!   exponent notation outside them (`1e-7`, `1e+21`), and `-0` written as `0`.
//!
//! # Integers
//!
//! RFC 8785 requires I-JSON (RFC 7493): every number must be an IEEE-754 double.
//! `serde_json` keeps integers as exact `i64`/`u64`, which can hold values that
//! no double represents. This module writes an integer exactly (as ECMAScript
//! would write the equal double) when its magnitude is at most 2^53
//! (9 007 199 254 740 992). A larger magnitude is written only when its digits are
//! already the text ECMAScript writes for the nearest double (such as
//! `169313365100000000`, which is how this module writes the double 1.693133651e17,
//! and which `serde_json` reads back as an integer): writing it changes nothing, so the
//! canonical text of a value is itself canonical (found by the fuzz target
//! `canonical`). Every other integer above 2^53 is refused with
//! [`CanonicalError::UnsafeInteger`] instead of being rounded (9 007 199 254 740 993,
//! `u64::MAX`). A silently rounded identifier would hash as a *different* value than
//! the one that was sent, so refusing is the only honest answer; RFC 8785 Appendix D
//! recommends sending such numbers as JSON strings.
//! Numbers that `serde_json` holds as doubles (anything written with a fraction
//! or an exponent, such as `1e30`) are already doubles and are always accepted.
//!
//! # Parsing
//!
//! The canonical form is of a [`Value`], so a number's text only matters through
//! the double it was parsed into. This crate turns on `serde_json`'s
//! `float_roundtrip` feature: without it, `serde_json` may parse a decimal with 16
//! or more significant digits into a double one unit in the last place away from
//! the nearest, so a digest of JSON received as text could differ from another
//! RFC 8785 implementation's.
//!
//! The serializer is iterative: arbitrarily deep values cannot overflow the stack.

use serde_json::{Map, Value};
use sha2::Digest as _;

mod number;
pub(crate) mod scan;

use number::write_number;

/// Names the canonical form that every digest in this crate is computed over.
///
/// rpr does not store it; a host that exports digests can record it next to them,
/// so a reader knows which serialization to reproduce when it re-checks one. It
/// changes only if the canonical form itself changes.
pub const CANONICAL_FORM: &str = "rfc8785";

/// The largest integer magnitude written exactly: 2^53.
const MAX_SAFE_MAGNITUDE: u64 = 1 << 53;

/// Why a JSON value has no RFC 8785 canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonicalError {
    /// An integer's magnitude is above 2^53, so it cannot round-trip through the
    /// IEEE-754 double that RFC 8785 (I-JSON) requires.
    #[error(
        "integer {value} is outside ±9007199254740992 (2^53), the range that \
         survives an IEEE-754 double, so RFC 8785 cannot represent it exactly; \
         send it as a JSON string instead"
    )]
    UnsafeInteger {
        /// The integer as it was held.
        value: i128,
    },
    /// A number is not a finite IEEE-754 double. `serde_json` values normally
    /// cannot hold one; this guards builds where `serde_json` keeps numbers as text.
    #[error(
        "number {text} is not a finite IEEE-754 double, which RFC 8785 (I-JSON) \
         requires; send it as a JSON string instead"
    )]
    NonFinite {
        /// The number as `serde_json` displays it.
        text: String,
    },
}

/// The RFC 8785 canonical JSON text of `value`.
///
/// See the [module documentation](self) for the rules, and for why integers
/// above 2^53 in magnitude are refused.
pub fn to_string(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write(value, &mut out, Integers::Safe)?;
    Ok(out)
}

/// The length in bytes of [`to_string`]'s output, computed without building it.
pub fn byte_len(value: &Value) -> Result<usize, CanonicalError> {
    let mut counter = Counter(0);
    write(value, &mut counter, Integers::Safe)?;
    Ok(counter.0)
}

/// Lowercase hex sha256 of the UTF-8 bytes of [`to_string`]'s output.
///
/// The text is hashed as it is produced; it is never held in memory whole.
pub fn sha256_hex(value: &Value) -> Result<String, CanonicalError> {
    sha256_hex_and_len(value).map(|(hex, _)| hex)
}

/// Lowercase hex sha256 of `bytes`.
#[must_use]
pub fn sha256_hex_bytes(bytes: &[u8]) -> String {
    hex(&sha2::Sha256::digest(bytes))
}

/// [`sha256_hex`] together with [`byte_len`], in one pass.
pub(crate) fn sha256_hex_and_len(value: &Value) -> Result<(String, usize), CanonicalError> {
    let mut sink = Hashing::default();
    write(value, &mut sink, Integers::Safe)?;
    Ok(sink.finish())
}

/// Like [`sha256_hex_and_len`], but never fails: integers above 2^53 in
/// magnitude are written as their exact decimal digits instead of being refused
/// (and a non-finite number, which only a `serde_json` built with
/// `arbitrary_precision` can hold, as its text).
///
/// This is *not* RFC 8785 when such a number is present; it is a deterministic,
/// member-order-independent fingerprint for values that have no canonical form.
pub(crate) fn sha256_hex_and_len_lenient(value: &Value) -> (String, usize) {
    let mut sink = Hashing::default();
    match write(value, &mut sink, Integers::Lenient) {
        Ok(()) => sink.finish(),
        Err(error) => unreachable!("lenient canonical writing cannot fail: {error}"),
    }
}

/// How integers and unrepresentable numbers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Integers {
    /// RFC 8785: magnitudes above 2^53, and non-finite numbers, are refused.
    Safe,
    /// Every integer is written exactly; a non-finite number as its text.
    Lenient,
}

/// Where canonical text goes.
trait Sink {
    fn put(&mut self, s: &str);
}

impl Sink for String {
    fn put(&mut self, s: &str) {
        self.push_str(s);
    }
}

/// Counts bytes only.
struct Counter(usize);

impl Sink for Counter {
    fn put(&mut self, s: &str) {
        self.0 += s.len();
    }
}

/// Hashes and counts bytes.
#[derive(Default)]
struct Hashing {
    hasher: sha2::Sha256,
    len: usize,
}

impl Hashing {
    fn finish(self) -> (String, usize) {
        (hex(&self.hasher.finalize()), self.len)
    }
}

impl Sink for Hashing {
    fn put(&mut self, s: &str) {
        self.hasher.update(s.as_bytes());
        self.len += s.len();
    }
}

/// The lowercase hex of `bytes`: the one hex encoder of the crate.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let [high, low] = hex_pair(*byte);
        out.push(char::from(high));
        out.push(char::from(low));
    }
    out
}

/// The bytes of a hex string (either case), or `None` if it is not hex.
pub(crate) fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            let digit = |b: u8| char::from(b).to_digit(16);
            u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()
        })
        .collect()
}

/// The two lowercase hex digits of a byte.
const fn hex_pair(byte: u8) -> [u8; 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    [DIGITS[(byte >> 4) as usize], DIGITS[(byte & 0x0f) as usize]]
}

/// The lowercase hex of a sha256 digest, on the stack.
pub(crate) fn digest_hex(digest: &[u8; 32]) -> [u8; 64] {
    let mut out = [0_u8; 64];
    for (pair, byte) in out.chunks_exact_mut(2).zip(digest) {
        pair.copy_from_slice(&hex_pair(*byte));
    }
    out
}

/// A container being written: the members still to write, and whether any
/// has been written yet (every member after the first follows a comma).
enum Frame<'a> {
    Array {
        items: std::slice::Iter<'a, Value>,
        started: bool,
    },
    Object {
        members: std::vec::IntoIter<(&'a String, &'a Value)>,
        started: bool,
    },
}

/// Writes the canonical text of `root` to `sink`, iteratively.
fn write<S: Sink>(root: &Value, sink: &mut S, integers: Integers) -> Result<(), CanonicalError> {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(root);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Array(items) => {
                    sink.put("[");
                    stack.push(Frame::Array {
                        items: items.iter(),
                        started: false,
                    });
                }
                Value::Object(members) => {
                    sink.put("{");
                    stack.push(Frame::Object {
                        members: sorted_members(members).into_iter(),
                        started: false,
                    });
                }
                Value::Null => sink.put("null"),
                Value::Bool(true) => sink.put("true"),
                Value::Bool(false) => sink.put("false"),
                Value::Number(number) => write_number(number, sink, integers)?,
                Value::String(text) => write_string(text, sink),
            }
        }
        let Some(frame) = stack.last_mut() else {
            return Ok(());
        };
        match frame {
            Frame::Array { items, started } => {
                if let Some(item) = items.next() {
                    if *started {
                        sink.put(",");
                    }
                    *started = true;
                    next = Some(item);
                } else {
                    sink.put("]");
                    stack.pop();
                }
            }
            Frame::Object { members, started } => {
                if let Some((name, item)) = members.next() {
                    if *started {
                        sink.put(",");
                    }
                    *started = true;
                    write_string(name, sink);
                    sink.put(":");
                    next = Some(item);
                } else {
                    sink.put("}");
                    stack.pop();
                }
            }
        }
    }
}

/// The members of `object`, sorted by name as arrays of UTF-16 code units.
fn sorted_members(object: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut members: Vec<(&String, &Value)> = object.iter().collect();
    // Names in a `Map` are unique, so an unstable sort is deterministic.
    members.sort_unstable_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    members
}

/// Writes a string literal with ECMAScript `JSON.stringify` escaping.
fn write_string<S: Sink>(text: &str, sink: &mut S) {
    sink.put("\"");
    // Copy runs of characters that need no escape in one piece.
    let mut run_start = 0;
    for (index, ch) in text.char_indices() {
        let escape = match ch {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{0}'..='\u{1f}' => "",
            _ => continue,
        };
        sink.put(&text[run_start..index]);
        if escape.is_empty() {
            sink.put(&control_escape(ch));
        } else {
            sink.put(escape);
        }
        run_start = index + ch.len_utf8();
    }
    sink.put(&text[run_start..]);
    sink.put("\"");
}

/// `\u00xx` (lowercase hex) for a control character below U+0020.
fn control_escape(ch: char) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let code = u32::from(ch);
    let high = DIGITS[usize::try_from(code >> 4).expect("below 0x20")];
    let low = DIGITS[usize::try_from(code & 0x0f).expect("below 0x10")];
    format!("\\u00{}{}", char::from(high), char::from(low))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Number, json};

    fn canonical(text: &str) -> String {
        let value: Value = serde_json::from_str(text).expect("test input is valid JSON");
        to_string(&value).expect("test input canonicalizes")
    }

    fn double(bits: u64) -> String {
        let value = Value::Number(Number::from_f64(f64::from_bits(bits)).expect("finite"));
        to_string(&value).expect("doubles canonicalize")
    }

    /// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
    #[test]
    fn rfc8785_appendix_b_numbers() {
        let table: &[(u64, &str)] = &[
            (0x0000_0000_0000_0000, "0"),
            (0x8000_0000_0000_0000, "0"),
            (0x0000_0000_0000_0001, "5e-324"),
            (0x8000_0000_0000_0001, "-5e-324"),
            (0x7fef_ffff_ffff_ffff, "1.7976931348623157e+308"),
            (0xffef_ffff_ffff_ffff, "-1.7976931348623157e+308"),
            (0x4340_0000_0000_0000, "9007199254740992"),
            (0xc340_0000_0000_0000, "-9007199254740992"),
            (0x4430_0000_0000_0000, "295147905179352830000"),
            (0x44b5_2d02_c7e1_4af5, "9.999999999999997e+22"),
            (0x44b5_2d02_c7e1_4af6, "1e+23"),
            (0x44b5_2d02_c7e1_4af7, "1.0000000000000001e+23"),
            (0x444b_1ae4_d6e2_ef4e, "999999999999999700000"),
            (0x444b_1ae4_d6e2_ef4f, "999999999999999900000"),
            (0x444b_1ae4_d6e2_ef50, "1e+21"),
            (0x3eb0_c6f7_a0b5_ed8c, "9.999999999999997e-7"),
            (0x3eb0_c6f7_a0b5_ed8d, "0.000001"),
            (0x41b3_de43_5555_5553, "333333333.3333332"),
            (0x41b3_de43_5555_5554, "333333333.33333325"),
            (0x41b3_de43_5555_5555, "333333333.3333333"),
            (0x41b3_de43_5555_5556, "333333333.3333334"),
            (0x41b3_de43_5555_5557, "333333333.33333343"),
            (0xbecb_f647_612f_3696, "-0.0000033333333333333333"),
            (0x4314_3ff3_c1cb_0959, "1424953923781206.2"),
        ];
        for &(bits, expected) in table {
            assert_eq!(double(bits), expected, "bits {bits:#018x}");
        }
    }

    /// Exact ties between two shortest candidates go to the even digit, as in
    /// ECMAScript (Rust's own formatting rounds these up). Expected values from
    /// Node.js `JSON.stringify`.
    #[test]
    fn exact_ties_round_to_even() {
        assert_eq!(double(0x4003_81e4_0000_0000), "2.4384231567382812");
        assert_eq!(double(0x4314_3ff3_c1cb_0959), "1424953923781206.2");
        assert_eq!(double(0x4314_3ff3_c1cb_095b), "1424953923781206.8");
    }

    /// The ECMAScript switch points between plain and exponent notation.
    #[test]
    fn number_notation_boundaries() {
        let cases: &[(f64, &str)] = &[
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (123_456_789_012_345_680_000.0, "123456789012345680000"),
            (1e-6, "0.000001"),
            (1.5e-6, "0.0000015"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.1, "0.1"),
            (-0.5, "-0.5"),
            (4.5, "4.5"),
            (4.0, "4"),
            (-4.0, "-4"),
            (100.0, "100"),
            (123.456, "123.456"),
            (1e30, "1e+30"),
            (1e-27, "1e-27"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        ];
        for &(double, expected) in cases {
            let value = Value::Number(Number::from_f64(double).expect("finite"));
            assert_eq!(
                to_string(&value).expect("canonicalizes"),
                expected,
                "{double:e}"
            );
        }
        assert_eq!(canonical("-0"), "0");
        assert_eq!(canonical("-0.0"), "0");
        assert_eq!(
            canonical("[1.0, 1E2, 0.0000001, 12e-1]"),
            "[1,100,1e-7,1.2]"
        );
    }

    /// RFC 8785 section 3.2.2: whitespace, literals, numbers and string escapes.
    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50,
                        2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let expected = concat!(
            r#"{"literals":[null,true,false],"#,
            r#""numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"#,
            r#""string":"€$\u000f\nA'B\"\\\\\"/"}"#,
        );
        assert_eq!(canonical(input), expected);
        // RFC 8785 section 3.2.4 lists these UTF-8 bytes; spot-check the start,
        // the euro sign and the end.
        let bytes = expected.as_bytes();
        assert_eq!(&bytes[..4], &[0x7b, 0x22, 0x6c, 0x69]);
        assert!(bytes.windows(3).any(|w| w == [0xe2, 0x82, 0xac]));
        assert_eq!(bytes.len(), 118);
        assert_eq!(&bytes[bytes.len() - 3..], &[0x2f, 0x22, 0x7d]);
    }

    /// RFC 8785 section 3.2.3: names sort by UTF-16 code units.
    #[test]
    fn rfc8785_section_3_2_3_sorting() {
        let input = r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let expected = concat!(
            r#"{"\r":"Carriage Return","1":"One","#,
            "\"\u{80}\":\"Control\",",
            "\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",",
            "\"\u{20ac}\":\"Euro Sign\",",
            "\"\u{1f600}\":\"Emoji: Grinning Face\",",
            "\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        );
        assert_eq!(canonical(input), expected);
        // A UTF-8 byte (or code point) sort would put U+FB33 before U+1F600.
        let mut by_bytes = ["\u{fb33}", "\u{1f600}"];
        by_bytes.sort_unstable();
        assert_eq!(by_bytes, ["\u{fb33}", "\u{1f600}"]);
    }

    #[test]
    fn string_escapes_match_json_stringify() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        let value = Value::String(format!("{all_controls}\"\\/\u{7f}\u{2028}\u{2029}é😀"));
        assert_eq!(
            to_string(&value).expect("strings canonicalize"),
            concat!(
                r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007"#,
                r#"\b\t\n\u000b\f\r\u000e\u000f"#,
                r#"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017"#,
                r#"\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f"#,
                "\\\"\\\\/\u{7f}\u{2028}\u{2029}é😀\"",
            )
        );
        assert_eq!(canonical(r#""""#), r#""""#);
        assert_eq!(canonical(r#"{"a\nb":"x"}"#), r#"{"a\nb":"x"}"#);
    }

    #[test]
    fn nested_values_sort_at_every_level_and_keep_array_order() {
        let input = r#"{ "z": [ {"b": 2, "a": 1}, [3, 2, 1], {} ],
                         "a": { "y": { "d": [], "c": null }, "x": true },
                         "": "empty name" }"#;
        assert_eq!(
            canonical(input),
            concat!(
                r#"{"":"empty name","a":{"x":true,"y":{"c":null,"d":[]}},"#,
                r#""z":[{"a":1,"b":2},[3,2,1],{}]}"#,
            )
        );
        assert_eq!(canonical("[]"), "[]");
        assert_eq!(canonical("{}"), "{}");
        assert_eq!(canonical("[[[]],[{}]]"), "[[[]],[{}]]");
        assert_eq!(canonical("null"), "null");
        assert_eq!(canonical("true"), "true");
        assert_eq!(canonical(r#""x""#), r#""x""#);
        // Names that are prefixes of one another sort shorter first.
        assert_eq!(
            canonical(r#"{"ab":1,"a":2,"b":3,"aa":4}"#),
            r#"{"a":2,"aa":4,"ab":1,"b":3}"#
        );
    }

    #[test]
    fn integers_within_two_to_the_53_are_exact() {
        let limit: u64 = 1 << 53;
        let negative_limit = -(1_i64 << 53);
        assert_eq!(to_string(&json!(limit)).as_deref(), Ok("9007199254740992"));
        assert_eq!(
            to_string(&json!(negative_limit)).as_deref(),
            Ok("-9007199254740992")
        );
        assert_eq!(
            to_string(&json!(limit - 1)).as_deref(),
            Ok("9007199254740991")
        );
        assert_eq!(to_string(&json!(0)).as_deref(), Ok("0"));
        assert_eq!(to_string(&json!(-1)).as_deref(), Ok("-1"));
        assert_eq!(canonical("9007199254740992"), "9007199254740992");
        assert_eq!(canonical("-9007199254740992"), "-9007199254740992");
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_refused() {
        let limit: u64 = 1 << 53;
        let cases: &[(Value, i128)] = &[
            (json!(limit + 1), (1 << 53) + 1),
            (json!(-(1_i64 << 53) - 1), -(1 << 53) - 1),
            (json!(u64::MAX), i128::from(u64::MAX)),
            (json!(i64::MIN), i128::from(i64::MIN)),
            (json!({"nested": [1, u64::MAX]}), i128::from(u64::MAX)),
        ];
        for (value, expected) in cases {
            assert_eq!(
                to_string(value),
                Err(CanonicalError::UnsafeInteger { value: *expected }),
                "{value}"
            );
            assert!(sha256_hex(value).is_err());
            assert!(byte_len(value).is_err());
        }
        let parsed: Value = serde_json::from_str("9007199254740993").expect("valid JSON");
        assert!(to_string(&parsed).is_err());
        // Written as a double it is a double: rounded by the parser, then accepted.
        assert_eq!(canonical("9007199254740993.0"), "9007199254740992");
        // Digits that are a double's own text are that double, written unchanged.
        for (value, text) in [
            (json!(limit + 2), "9007199254740994"),
            (json!(-(1_i64 << 53) - 2), "-9007199254740994"),
            (json!(169_313_365_100_000_000_u64), "169313365100000000"),
            (json!(1_152_921_504_606_847_000_u64), "1152921504606847000"),
        ] {
            assert_eq!(to_string(&value).as_deref(), Ok(text), "{value}");
        }
        // 2^60 is a double, but its text is 1152921504606847000: its exact digits are refused.
        assert!(to_string(&json!(1_u64 << 60)).is_err());
        let message = to_string(&json!(u64::MAX)).unwrap_err().to_string();
        assert!(message.contains("18446744073709551615"), "{message}");
        assert!(message.contains("JSON string"), "{message}");
    }

    #[test]
    fn lenient_fingerprint_writes_large_integers_exactly() {
        let value = json!({"b": u64::MAX, "a": -(1_i64 << 53) - 1});
        let text = r#"{"a":-9007199254740993,"b":18446744073709551615}"#;
        assert_eq!(
            sha256_hex_and_len_lenient(&value),
            (sha256_hex_bytes(text.as_bytes()), text.len())
        );
        let safe = json!({"b": 1, "a": [2.5]});
        let canonical = to_string(&safe).expect("canonicalizes");
        assert_eq!(
            sha256_hex_and_len_lenient(&safe),
            (sha256_hex(&safe).expect("canonicalizes"), canonical.len())
        );
    }

    /// Digests computed independently with `printf '…' | sha256sum`.
    #[test]
    fn sha256_known_answers() {
        assert_eq!(
            sha256_hex(&json!({})).as_deref(),
            Ok("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
        );
        // Canonical text `{"a":1,"b":[true,null]}`.
        let value: Value =
            serde_json::from_str(r#"{ "b": [true, null], "a": 1.0 }"#).expect("valid JSON");
        assert_eq!(
            sha256_hex(&value).as_deref(),
            Ok("1cc69c7fa23616ca2ec3ee70d24390a6225c8832db8a4c814c7e0e7f942f8668")
        );
        assert_eq!(
            sha256_hex_bytes(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex_bytes(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // The RFC 8785 section 3.2.2 output.
        let rfc: Value = serde_json::from_str(
            r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],
                "string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                "literals":[null,true,false]}"#,
        )
        .expect("valid JSON");
        assert_eq!(
            sha256_hex(&rfc).as_deref(),
            Ok("2d5e01a318d0f0879ab568c4be289c8b1f64ef8921a53c6277d5e069978baacb")
        );
    }

    #[test]
    fn byte_len_and_digest_agree_with_to_string() {
        let value = json!({"k": ["é", 1.5, {"€": null}], "a": "\u{0}"});
        let text = to_string(&value).expect("canonicalizes");
        assert_eq!(byte_len(&value), Ok(text.len()));
        assert_eq!(
            sha256_hex_and_len(&value),
            Ok((sha256_hex_bytes(text.as_bytes()), text.len()))
        );
        assert_eq!(CANONICAL_FORM, "rfc8785");
    }

    #[test]
    fn deep_values_do_not_overflow_the_stack() {
        const DEPTH: usize = 100_000;
        // A small stack proves the writer does not recurse per level.
        let handle = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let mut value = json!(1);
                for _ in 0..DEPTH {
                    value = Value::Array(vec![value]);
                }
                let text = to_string(&value).expect("canonicalizes");
                // `Value`'s own `Drop` recurses; never drop this one.
                std::mem::forget(value);
                text
            })
            .expect("thread spawns");
        let text = handle.join().expect("no stack overflow");
        assert_eq!(text.len(), 2 * DEPTH + 1);
        assert!(text.starts_with("[[[") && text.contains("[1]") && text.ends_with("]]]"));
    }
}
