//! One pass over a JSON text that answers two questions without building a value tree:
//! is this text exactly the RFC 8785 canonical form of the value it denotes, and where
//! are the members of its top-level object (and of the objects directly inside it)?
//!
//! The ledger verifier runs this over every stored event. It replaces "parse into a
//! [`serde_json::Value`], write the canonical form again, compare the two texts" and
//! must give the same answer: [`scan`] returns `true` exactly when
//! `serde_json::from_str` accepts the text and [`super::to_string`] of the result is the
//! text itself (a differential property test holds it to that). Any text it refuses
//! (not JSON, or JSON in another spelling) goes back to the slow path, which says which.
//!
//! A canonical text has a useful property: the text of any value inside it is that
//! value's canonical form. So a member's raw slice is already the canonical text of the
//! member; nothing needs to be written again.

use std::borrow::Cow;

/// The deepest nesting `serde_json` parses (its recursion limit refuses a 128th level);
/// deeper texts are refused here too.
const MAX_DEPTH: usize = 127;

/// A member of the top-level object, or of an object that is a value of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member<'a> {
    /// For a member of a nested object: the name (unescaped) of the top-level member
    /// whose value that object is. `None` for a top-level member.
    pub(crate) parent: Option<Cow<'a, str>>,
    /// The member's name, unescaped.
    pub(crate) name: Cow<'a, str>,
    /// The member value's text: its canonical form.
    pub(crate) raw: &'a str,
}

/// Whether `text` is the canonical form of a JSON value (see the [module
/// documentation](self)); hands `visit` each member of its top-level object and of the
/// objects directly inside it as the member's value ends (so a nested object's members
/// come before the member holding it). Members already handed on when the text turns
/// out not to be canonical are to be dropped by the caller.
///
/// Nothing is collected: a ledger event is scanned without allocating anything but the
/// stack of open containers (and a name with an escape in it, which a ledger event never
/// has). A list of members per event, grown past the allocator's per-thread cache, was
/// once a fifth of the whole check's time.
pub(crate) fn scan<'a>(text: &'a str, visit: impl FnMut(Member<'a>)) -> bool {
    Scanner {
        text,
        bytes: text.as_bytes(),
        at: 0,
        stack: Vec::with_capacity(8),
        visit,
    }
    .run()
    .is_some()
}

/// The value of a canonical string literal (`raw` includes its quotes), or `None` when
/// `raw` is not a string.
#[must_use]
pub(crate) fn string_value(raw: &str) -> Option<Cow<'_, str>> {
    string_value_between(raw.strip_prefix('"')?.strip_suffix('"')?)
}

/// The value of a canonical string literal given without its quotes.
fn string_value_between(inner: &str) -> Option<Cow<'_, str>> {
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        let decoded = match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let code: String = chars.by_ref().take(4).collect();
                char::from_u32(u32::from_str_radix(&code, 16).ok()?)?
            }
            _ => return None,
        };
        out.push(decoded);
    }
    Some(Cow::Owned(out))
}

/// The value of a canonical integer literal within ±2^53 (the integers RFC 8785 writes
/// exactly); `None` for any other value.
#[must_use]
pub(crate) fn integer_value(raw: &str) -> Option<i64> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse()
        .ok()
        .filter(|v: &i64| v.unsigned_abs() <= super::MAX_SAFE_MAGNITUDE)
}

/// An open container.
struct Frame<'a> {
    object: bool,
    /// Whether a member was read (objects only).
    has_previous: bool,
    /// The previous member's name as written (between its quotes), to check the order.
    previous: &'a str,
    /// Whether that name holds an escape (then it is compared unescaped).
    previous_escaped: bool,
    /// For a member being read whose slice is recorded: its name (`None` if none) and
    /// where its value starts.
    pending: Option<Cow<'a, str>>,
    pending_start: usize,
    /// The top-level member whose value this object is (depth-two objects only).
    parent: Option<Cow<'a, str>>,
}

struct Scanner<'a, V> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Frame<'a>>,
    visit: V,
}

impl<'a, V: FnMut(Member<'a>)> Scanner<'a, V> {
    fn run(mut self) -> Option<()> {
        loop {
            // A value starts here.
            match *self.bytes.get(self.at)? {
                open @ (b'{' | b'[') => {
                    if self.stack.len() >= MAX_DEPTH {
                        return None;
                    }
                    let object = open == b'{';
                    let parent = match self.stack.as_slice() {
                        [root] if object && root.object => root.pending.clone(),
                        _ => None,
                    };
                    self.at += 1;
                    self.stack.push(Frame {
                        object,
                        has_previous: false,
                        previous: "",
                        previous_escaped: false,
                        pending: None,
                        pending_start: 0,
                        parent,
                    });
                    let close = if object { b'}' } else { b']' };
                    if self.bytes.get(self.at) == Some(&close) {
                        self.at += 1;
                        self.stack.pop();
                    } else {
                        self.begin_item()?;
                        continue;
                    }
                }
                b'"' => {
                    self.string()?;
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return None,
            }
            // A value ended here: close what it completes, or start the next item.
            loop {
                let end = self.at;
                let Some(frame) = self.stack.last_mut() else {
                    return (self.at == self.bytes.len()).then_some(());
                };
                if let Some(name) = frame.pending.take() {
                    (self.visit)(Member {
                        parent: frame.parent.clone(),
                        name,
                        raw: &self.text[frame.pending_start..end],
                    });
                }
                let close = if frame.object { b'}' } else { b']' };
                match *self.bytes.get(self.at)? {
                    b',' => {
                        self.at += 1;
                        self.begin_item()?;
                        break;
                    }
                    b if b == close => {
                        self.at += 1;
                        self.stack.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// Reads what precedes an item's value: nothing in an array, `"name":` in an object
    /// (checking that names strictly ascend), and notes the value's start if it is recorded.
    fn begin_item(&mut self) -> Option<()> {
        let depth = self.stack.len();
        if !self.stack.last()?.object {
            return Some(());
        }
        if self.bytes.get(self.at) != Some(&b'"') {
            return None;
        }
        let start = self.at + 1;
        let escaped = self.string()?;
        // As written, between the quotes.
        let written = &self.text[start..self.at - 1];
        if self.bytes.get(self.at) != Some(&b':') {
            return None;
        }
        self.at += 1;
        let frame = self.stack.last_mut()?;
        if frame.has_previous {
            let ascending = if escaped || frame.previous_escaped {
                let previous = string_value_between(frame.previous)?;
                let name = string_value_between(written)?;
                utf16_order(&previous, &name) == std::cmp::Ordering::Less
            } else {
                utf16_order(frame.previous, written) == std::cmp::Ordering::Less
            };
            if !ascending {
                return None;
            }
        }
        let record = depth == 1 || (depth == 2 && frame.parent.is_some());
        if record {
            frame.pending_start = self.at;
            frame.pending = Some(if escaped {
                string_value_between(written)?
            } else {
                Cow::Borrowed(written)
            });
        }
        frame.has_previous = true;
        frame.previous = written;
        frame.previous_escaped = escaped;
        Some(())
    }

    /// Skips a string literal spelled as RFC 8785 writes it; says whether it holds an
    /// escape.
    fn string(&mut self) -> Option<bool> {
        debug_assert_eq!(self.bytes.get(self.at), Some(&b'"'));
        self.at += 1;
        let mut escaped = false;
        loop {
            self.at += plain_run(self.bytes.get(self.at..)?);
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    let escape = self.bytes.get(self.at + 1)?;
                    match escape {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
                        b'u' => {
                            // Only control characters without a short escape.
                            let code = self.bytes.get(self.at + 2..self.at + 6)?;
                            let [b'0', b'0', high @ (b'0' | b'1'), low] = *code else {
                                return None;
                            };
                            let low = match low {
                                b'0'..=b'9' => low - b'0',
                                b'a'..=b'f' => low - b'a' + 10,
                                _ => return None,
                            };
                            let value = (high - b'0') * 16 + low;
                            if matches!(value, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return None;
                            }
                            self.at += 6;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.bytes.get(self.at..self.at + word.len())? == word {
            self.at += word.len();
            Some(())
        } else {
            None
        }
    }

    /// Skips a number spelled as RFC 8785 writes it: as ECMAScript writes the double the
    /// token denotes. Short plain integers are checked here; any other token is parsed as
    /// a double and written again by the same code as [`super::to_string`].
    ///
    /// This is RFC 8785's rule, and it is not quite "what `serde_json` parses, written
    /// again": `serde_json` reads `11097577120315846` as an integer above 2^53, which
    /// [`super::to_string`] refuses, yet it is the canonical text of the double
    /// 1.1097577120315846e16, and the writer produces it from that double.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        let len = self.bytes[start..]
            .iter()
            .position(|&b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(self.bytes.len() - start);
        let token = &self.text[start..start + len];
        self.at += len;
        let digits = token.strip_prefix('-').unwrap_or(token);
        let plain = !digits.is_empty()
            && digits.len() <= 15
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (!digits.starts_with('0') || token == "0");
        if plain {
            return Some(());
        }
        // Only ECMAScript's own output survives this round trip, and that output is
        // always valid JSON (no `+1`, `.5`, `1.` or `inf`).
        let double: f64 = token.parse().ok().filter(|d: &f64| d.is_finite())?;
        let mut written = String::with_capacity(len);
        super::number::write_double(double, &mut written);
        (written == token).then_some(())
    }
}

/// How many leading bytes of `bytes` need no attention inside a string literal (not `"`,
/// not `\\`, not a control character). Eight bytes at a time while it can.
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_le_bytes([0x20; 8]);
    // Flags (in its high bit) every byte of `w` that is zero, and possibly bytes above
    // the first such byte, never one below it.
    let zero_byte = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // A byte below 0x20: subtracting 0x20 borrows into its high bit (bytes of 0x80
        // and above are masked out by `!w`).
        let special = zero_byte(w ^ QUOTES)
            | zero_byte(w ^ BACKSLASHES)
            | (w.wrapping_sub(SPACES) & !w & HIGHS);
        if special != 0 {
            // The lowest flagged byte is exact (a borrow only runs upwards), and in
            // little-endian order it is the first in memory.
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(bytes.len() - at)
}

/// RFC 8785's member order: names compared as arrays of UTF-16 code units.
///
/// UTF-8 bytes sort as code points, and code points sort as UTF-16 units except that a
/// character above U+FFFF (lead byte 0xF0 and up, a surrogate pair from 0xD800) sorts
/// before one from U+E000 to U+FFFF (lead byte 0xEE or 0xEF). Bytes from 0xEE up are
/// always lead bytes, so the first differing byte says which case applies.
fn utf16_order(left: &str, right: &str) -> std::cmp::Ordering {
    let (left, right) = (left.as_bytes(), right.as_bytes());
    match left.iter().zip(right).position(|(l, r)| l != r) {
        None => left.len().cmp(&right.len()),
        Some(at) => {
            let (l, r) = (left[at], right[at]);
            if l >= 0xEE && r >= 0xEE && (l >= 0xF0) != (r >= 0xF0) {
                r.cmp(&l)
            } else {
                l.cmp(&r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// The slow path this module replaces: parse, write the canonical form again,
    /// compare. Numbers are doubles in RFC 8785, so an integer `serde_json` holds above
    /// 2^53 is written as the double it denotes.
    fn canonical_by_value(text: &str) -> bool {
        serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| super::super::to_string(&as_doubles(v)).ok())
            .is_some_and(|c| c == text)
    }

    fn as_doubles(value: Value) -> Value {
        match value {
            Value::Number(n)
                if n.as_f64()
                    .is_some_and(|f| f.abs() > 9_007_199_254_740_992.0) =>
            {
                Value::from(n.as_f64().unwrap())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(as_doubles).collect()),
            Value::Object(m) => {
                Value::Object(m.into_iter().map(|(k, v)| (k, as_doubles(v))).collect())
            }
            other => other,
        }
    }

    /// Every member `scan` hands on, in text order, or `None` when it refuses the text.
    fn members(text: &str) -> Option<Vec<Member<'_>>> {
        let mut found = Vec::new();
        let canonical = scan(text, |m| found.push(m));
        found.sort_by_key(|m: &Member<'_>| m.raw.as_ptr() as usize);
        canonical.then_some(found)
    }

    fn agrees(text: &str) {
        assert_eq!(
            members(text).is_some(),
            canonical_by_value(text),
            "scan and the Value round trip disagree on {text:?}"
        );
    }

    #[test]
    fn known_texts_are_judged_like_the_value_round_trip() {
        for text in [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a": 1}"#,
            " {}",
            "{}",
            "[]",
            "[1,]",
            "0",
            "-0",
            "01",
            "1.0",
            "1.5",
            "1e21",
            "1e+21",
            "100000000000000000000",
            "1000000000000000000000",
            "9007199254740992",
            "9007199254740993",
            "-9007199254740992",
            "123456789012345",
            "11097577120315846",
            "-11097577120315846",
            "11097577120315847",
            "1.1097577120315846e16",
            "0.000001",
            "1e-7",
            "0.0000001",
            "\"\\u001f\"",
            "\"\\u001F\"",
            "\"\\u000a\"",
            "\"\\n\"",
            "\"\\/\"",
            "\"\\u0041\"",
            "\"é\"",
            "\"\\ud83d\\ude00\"",
            "\"\u{2028}\"",
            r#"{"\u00e9":1,"z":2}"#,
            r#"{"z":2,"é":1}"#,
            "{\"\u{1F600}\":1,\"\u{FB33}\":2}",
            "{\"\u{FB33}\":2,\"\u{1F600}\":1}",
            "tru",
            "nul",
            "\"abc",
            "{\"a\"}",
            "{\"a\":}",
            "[1 ]",
            "{} ",
            "[1][2]",
            "1-2",
            "-",
            "1.",
            ".5",
            "1e",
        ] {
            agrees(text);
        }
    }

    #[test]
    fn nesting_is_refused_where_serde_json_refuses_it() {
        for depth in [126, 127, 128, 129, 130] {
            let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            agrees(&text);
        }
    }

    #[test]
    fn members_of_the_top_object_and_the_objects_in_it_are_found_with_their_canonical_text() {
        let text = r#"{"a":{"b":[1,{"c":2}],"d":"x\"y"},"e":3,"f":[{"g":1}]}"#;
        let members = members(text).expect("canonical");
        let found: Vec<_> = members
            .iter()
            .map(|m| (m.parent.as_deref(), m.name.as_ref(), m.raw))
            .collect();
        assert_eq!(
            found,
            vec![
                (None, "a", r#"{"b":[1,{"c":2}],"d":"x\"y"}"#),
                (Some("a"), "b", r#"[1,{"c":2}]"#),
                (Some("a"), "d", r#""x\"y""#),
                (None, "e", "3"),
                (None, "f", r#"[{"g":1}]"#),
            ]
        );
        assert_eq!(string_value(r#""x\"y""#).as_deref(), Some("x\"y"));
        assert_eq!(integer_value("3"), Some(3));
        assert_eq!(integer_value("1.5"), None);
        assert_eq!(integer_value("\"3\""), None);
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1_000_000_i64..1_000_000).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::String),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-zé\u{1F600}\u{FB33}]{0,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// What the canonical writer writes is accepted, with the members the value has.
        #[test]
        fn scan_accepts_what_the_canonical_writer_writes(value in json_value()) {
            if let Ok(text) = super::super::to_string(&value) {
                let members = members(&text);
                prop_assert!(members.is_some(), "refused {}", text);
                if let (Value::Object(map), Some(members)) = (&value, members) {
                    let top: Vec<_> = members.iter().filter(|m| m.parent.is_none()).collect();
                    prop_assert_eq!(top.len(), map.len());
                    for m in top {
                        let expected = super::super::to_string(&map[m.name.as_ref()]).unwrap();
                        prop_assert_eq!(m.raw, expected.as_str());
                    }
                }
            }
        }

        /// Any edit of a canonical text is judged exactly like the Value round trip judges it.
        #[test]
        fn scan_agrees_with_the_value_round_trip_on_edited_texts(
            value in json_value(),
            at in any::<prop::sample::Index>(),
            edit in prop_oneof![
                Just(" "), Just(","), Just("0"), Just("-"), Just("\\"), Just("\""),
                Just("e"), Just("."), Just("1"), Just("}"), Just("]"), Just("\\u0041"),
                Just("\\/"), Just("\\u001f"), Just("{"), Just(":"), Just("\"a\":1,")
            ],
            delete in any::<bool>(),
        ) {
            if let Ok(text) = super::super::to_string(&value) {
                let mut cut = at.index(text.len() + 1);
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                let mut edited = text[..cut].to_owned();
                if delete {
                    let mut next = cut + 1;
                    while next < text.len() && !text.is_char_boundary(next) {
                        next += 1;
                    }
                    edited.push_str(text.get(next.min(text.len())..).unwrap_or(""));
                } else {
                    edited.push_str(edit);
                    edited.push_str(&text[cut..]);
                }
                prop_assert_eq!(members(&edited).is_some(), canonical_by_value(&edited), "{}", edited);
            }
        }

        /// Arbitrary short texts over JSON's alphabet, too.
        #[test]
        fn scan_agrees_with_the_value_round_trip_on_arbitrary_texts(
            text in "[\\[\\]{}\",:0-9eE.+\\-tfnrulsa\\\\ ]{0,16}"
        ) {
            prop_assert_eq!(members(&text).is_some(), canonical_by_value(&text), "{}", text);
        }
    }

    proptest! {
        #[test]
        fn plain_run_stops_at_the_first_byte_that_needs_attention(text in any::<Vec<u8>>()) {
            let expected = text
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(text.len());
            prop_assert_eq!(plain_run(&text), expected);
        }

        #[test]
        fn utf16_order_is_the_order_of_utf16_code_units(a in any::<String>(), b in any::<String>()) {
            prop_assert_eq!(utf16_order(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }

        #[test]
        fn utf16_order_on_the_characters_where_it_differs(
            a in "[a\u{e000}\u{ffff}\u{10000}\u{10ffff}\u{d7ff}é]{0,3}",
            b in "[a\u{e000}\u{ffff}\u{10000}\u{10ffff}\u{d7ff}é]{0,3}",
        ) {
            prop_assert_eq!(utf16_order(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }
    }

    #[test]
    fn plain_run_finds_bytes_in_every_lane() {
        for lane in 0..20 {
            for special in [b'"', b'\\', 0x00, 0x1f] {
                let mut text = vec![b'a'; 24];
                text[lane] = special;
                assert_eq!(plain_run(&text), lane);
            }
            let mut high = vec![0xC3; 24];
            high[lane] = b'"';
            assert_eq!(plain_run(&high), lane, "bytes above 0x7f are plain");
        }
    }

    #[test]
    fn a_nested_member_names_its_parent_unescaped_and_a_refused_text_is_refused_whole() {
        let text = r#"{"a\"b":{"c":1},"d":2}"#;
        let found = members(text).expect("canonical");
        assert_eq!(
            found
                .iter()
                .map(|m| (m.parent.as_deref(), m.name.as_ref(), m.raw))
                .collect::<Vec<_>>(),
            vec![
                (None, "a\"b", r#"{"c":1}"#),
                (Some("a\"b"), "c", "1"),
                (None, "d", "2"),
            ]
        );
        // Members before the fault were handed on; the answer still refuses the text.
        let mut seen = 0;
        assert!(!scan(r#"{"a":1,"b":01}"#, |_| seen += 1));
        assert_eq!(seen, 1);
    }

    #[test]
    fn an_event_shaped_text_is_found() {
        let value = json!({"kind": "proposed", "seq": 1, "data": {"request_digest": "ab"}});
        let text = super::super::to_string(&value).unwrap();
        let members = members(&text).unwrap();
        assert!(
            members
                .iter()
                .any(|m| m.parent.is_some() && m.name == "request_digest" && m.raw == "\"ab\"")
        );
    }
}
