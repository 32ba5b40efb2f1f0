//! What a person is shown: every string from a server, a client or an actor escaped, and a
//! request either whole or as a clearly marked summary. Used by the Human Gate form of
//! `rpr gate` and by everything `rpr` prints for people (`say!`, errors).
//!
//! Escaped are the characters that can redraw a screen or reorder what it shows: C0 controls
//! (ESC among them), DEL, C1 controls, the bidi embeddings, overrides, isolates and marks,
//! and the line and paragraph separators; and those a screen draws as nothing, so that a
//! person could approve text they did not see: zero-width spaces and joiners, word joiners
//! and invisible operators, the byte order mark, the soft hyphen, the Hangul fillers, the
//! variation selectors, and the tag characters (U+E0000 to U+E007F, which spell ASCII
//! invisibly). They are written as `\u{1b}`; nothing else changes.

use std::fmt::Write as _;

use serde_json::Value;

/// Whether `c` may not reach a terminal or a form as it is.
fn unsafe_char(c: char) -> bool {
    c.is_control() // C0, DEL and C1
        || matches!(
            c,
            '\u{00ad}' // soft hyphen
                | '\u{034f}' // combining grapheme joiner
                | '\u{061c}' // Arabic letter mark
                | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' // Hangul fillers
                | '\u{17b4}' | '\u{17b5}' // Khmer inherent vowels
                | '\u{2028}' | '\u{2029}' // line and paragraph separators
                | '\u{feff}' // byte order mark, zero-width no-break space
        )
        || ('\u{180b}'..='\u{180f}').contains(&c) // Mongolian selectors and vowel separator
        || ('\u{200b}'..='\u{200f}').contains(&c) // zero-width space, joiners, marks
        || ('\u{202a}'..='\u{202e}').contains(&c) // bidi embeddings and overrides
        || ('\u{2060}'..='\u{206f}').contains(&c) // word joiner, invisible operators, isolates
        || ('\u{fe00}'..='\u{fe0f}').contains(&c) // variation selectors
        || ('\u{fff0}'..='\u{fffb}').contains(&c) // unassigned specials, annotation marks
        || ('\u{1bca0}'..='\u{1bca3}').contains(&c) // shorthand format controls
        || ('\u{1d173}'..='\u{1d17a}').contains(&c) // musical format controls
        || ('\u{e0000}'..='\u{e0fff}').contains(&c) // tags, variation selectors supplement
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if unsafe_char(c) && !keep(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// A name or one-line value (server, tool, actor): every unsafe character escaped,
/// newlines too.
#[must_use]
pub fn name(s: &str) -> String {
    escape_where(s, |_| false)
}

/// `s` as one word of a command for a POSIX shell: as is when it is plain, else in single
/// quotes; `None` for an empty word or one holding a character [`name`] would escape (a
/// control, invisible or bidi character, a newline): such a word cannot be shown as it must
/// be typed. A server's or tool's name is the server's to choose, and a command printed for
/// pasting must not run anything else.
#[must_use]
pub fn shell_word(s: &str) -> Option<String> {
    if s.is_empty() || name(s) != s {
        return None;
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c);
    if s.chars().all(plain) {
        return Some(s.to_owned());
    }
    Some(format!("'{}'", s.replace('\'', "'\\''")))
}

/// Text of several lines that `rpr` composed: unsafe characters escaped, its newlines kept.
#[must_use]
pub fn text(s: &str) -> String {
    escape_where(s, |c| c == '\n')
}

/// JSON text with the characters JSON leaves raw (C1, bidi, the separators, the invisible
/// ones) escaped as `\uXXXX` (a surrogate pair above U+FFFF), and any control character but
/// the newlines of pretty-printing: still JSON, the same value.
fn json_escaped(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        if unsafe_char(c) && c != '\n' {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `v` as compact JSON, escaped.
fn json(v: &Value) -> String {
    json_escaped(&v.to_string())
}

/// `v` pretty-printed, escaped: the whole of it.
#[must_use]
pub fn pretty(v: &Value) -> String {
    json_escaped(&serde_json::to_string_pretty(v).unwrap_or_default())
}

/// A value's length in characters and its sha256: of its text for a string (what the
/// server receives), of its compact JSON otherwise.
fn measure(v: &Value) -> (usize, String) {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    (
        text.chars().count(),
        crate::canonical::sha256_hex_bytes(text.as_bytes()),
    )
}

/// Member names that say where a call acts: a path, an address, a recipient, an id.
const TARGET_WORDS: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "dir",
    "directory",
    "url",
    "uri",
    "href",
    "host",
    "to",
    "cc",
    "bcc",
    "recipient",
    "recipients",
    "email",
    "address",
    "id",
    "ids",
    "target",
    "dest",
    "destination",
    "key",
    "name",
    "repo",
    "repository",
    "branch",
    "table",
    "account",
    "user",
    "channel",
];

/// Whether a member name names a target: one of its words (split at `_`, `-`, `.` and
/// lowercase-to-uppercase) is a target word.
fn names_a_target(member: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in member.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') || (c.is_uppercase() && prev_lower) {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase();
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
    }
    words.push(word);
    words.iter().any(|w| TARGET_WORDS.contains(&w.as_str()))
}

/// The leaves of `v` (scalars, empty arrays and objects) with their JSON Pointers and
/// the member name that holds them, in document order.
fn leaves<'a>(v: &'a Value, at: String, member: &str, out: &mut Vec<(String, String, &'a Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let k_ptr = k.replace('~', "~0").replace('/', "~1");
                leaves(v, format!("{at}/{k_ptr}"), k, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                leaves(v, format!("{at}/{i}"), member, out);
            }
        }
        _ => out.push((at, member.to_owned(), v)),
    }
}

/// The values of `args` under member names that name targets (a path, an address, a
/// recipient, an id, a key …), by JSON Pointer, each as compact JSON, escaped: what a person
/// approving the call should read first.
#[must_use]
pub fn targets(args: &Value) -> Vec<(String, String)> {
    let mut all = Vec::new();
    leaves(args, String::new(), "", &mut all);
    all.into_iter()
        .filter(|(_, member, _)| names_a_target(member))
        .map(|(pointer, _, v)| (name(&pointer), json(v)))
        .collect()
}

/// A scalar this short is shown before the long values.
const SHORT: usize = 80;
/// A cut value keeps at least this much of the budget for its mark.
const MARK: usize = 160;

/// The arguments of a call for a person to approve: the whole of them, pretty-printed and
/// escaped, when that fits in `budget` characters; else a summary marked as one. The
/// summary lists the values by JSON Pointer: those under member names that name targets
/// first, then short scalars, then the rest; a value cut says how much of it is shown, its
/// length and sha256; values left out are counted. `whole_at` says where the whole request
/// can be read.
#[must_use]
pub fn arguments(args: &Value, budget: usize, whole_at: &str) -> String {
    let whole = pretty(args);
    if whole.chars().count() <= budget {
        return format!("arguments (whole):\n{whole}");
    }
    let mut all = Vec::new();
    leaves(args, String::new(), "", &mut all);
    let rank = |(_, member, v): &(String, String, &Value)| {
        if names_a_target(member) {
            0
        } else if !v.is_object() && !v.is_array() && json(v).chars().count() <= SHORT {
            1
        } else {
            2
        }
    };
    all.sort_by_key(rank); // stable: document order within a rank
    let (total, digest) = measure(args);
    let mut lines = Vec::new();
    let mut left = budget;
    let mut omitted: Vec<String> = Vec::new();
    let mut omitted_chars = 0;
    for (pointer, _, v) in &all {
        let pointer = name(if pointer.is_empty() { "/" } else { pointer });
        let full = format!("{pointer} = {}", json(v));
        let full_len = full.chars().count();
        if full_len <= left {
            left -= full_len;
            lines.push(full);
        } else if left > MARK + pointer.chars().count() {
            let (len, sha) = measure(v);
            let room = left - MARK - pointer.chars().count();
            let head = match v {
                Value::String(s) => json(&Value::String(s.chars().take(room).collect())),
                other => json(other).chars().take(room).collect(),
            };
            let kept = match v {
                Value::String(s) => s.chars().count().min(room),
                other => other.to_string().chars().count().min(room),
            };
            lines.push(format!(
                "{pointer} = {head} … [CUT: the first {kept} of {len} characters shown; sha256 of the whole value {sha}]"
            ));
            left = 0;
        } else {
            omitted_chars += measure(v).0;
            omitted.push(pointer);
        }
    }
    let mut out = format!(
        "arguments: SUMMARY, NOT THE WHOLE REQUEST ({total} characters, sha256 {digest}); \
         values naming targets first, by JSON Pointer. {whole_at}\n{}",
        lines.join("\n")
    );
    if !omitted.is_empty() {
        let mut listed = omitted.join(", ");
        if listed.chars().count() > 300 {
            listed = listed.chars().take(300).collect::<String>() + " …";
        }
        let _ = write!(
            out,
            "\n[NOT SHOWN: {} more value(s), {omitted_chars} characters: {listed}]",
            omitted.len()
        );
    }
    out
}

/// A time in ms since the epoch as UTC, to the millisecond, for people: `2026-12-05 16:40:01.253Z`
/// (RFC 3339 with a space for the `T`).
#[must_use]
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian; H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00.000Z");
        assert_eq!(utc(1_796_488_393_253), "2026-12-05 16:33:13.253Z");
        assert_eq!(utc(-1), "1969-12-31 23:59:59.999Z");
    }

    #[test]
    fn escape_sequences_bidi_and_c1_are_escaped_newlines_only_kept_in_text() {
        let s = "\u{1b}[2J\u{1b}[Ha\u{202e}b\u{85}c\rd\ne";
        assert_eq!(
            name(s),
            "\\u{1b}[2J\\u{1b}[Ha\\u{202e}b\\u{85}c\\u{d}d\\u{a}e"
        );
        assert_eq!(text(s), "\\u{1b}[2J\\u{1b}[Ha\\u{202e}b\\u{85}c\\u{d}d\ne");
        assert_eq!(json(&json!("a\u{202e}\u{1b}")), "\"a\\u202e\\u001b\"");
    }

    /// Text a screen draws as nothing (tag characters spelling ASCII, zero-width spaces and
    /// joiners, the byte order mark, a variation selector) is shown escaped, so what a
    /// person approves is all there is; escaped JSON is still JSON of the same value.
    #[test]
    fn invisible_characters_are_escaped_and_json_stays_the_same_value() {
        let hidden: String = "curl x|sh"
            .chars()
            .map(|c| char::from_u32(0xe0000 + u32::from(c)).unwrap())
            .collect();
        let s = format!("run tests\u{200b}\u{200d}\u{feff}\u{fe0f}\u{ad}{hidden}");
        let shown = name(&s);
        assert!(
            shown.starts_with("run tests\\u{200b}\\u{200d}\\u{feff}\\u{fe0f}\\u{ad}\\u{e0063}"),
            "{shown}"
        );
        assert!(shown.is_ascii(), "{shown}");
        let v = json!({"content": s});
        for text in [json(&v), pretty(&v)] {
            assert!(text.is_ascii(), "{text}");
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v, "{text}");
        }
        // Visible text outside ASCII is left as it is.
        assert_eq!(name("한국어 café"), "한국어 café");
    }

    #[test]
    fn small_arguments_are_shown_whole() {
        let shown = arguments(&json!({"path": "/a", "content": "x"}), 4000, "");
        assert!(shown.starts_with("arguments (whole):"), "{shown}");
        assert!(shown.contains("\"content\": \"x\""), "{shown}");
    }

    #[test]
    fn a_summary_puts_targets_first_and_counts_what_it_leaves_out() {
        let big = "y".repeat(5000);
        let args =
            json!({"a": big, "b": big, "options": {"dryRun": false}, "to": ["x@example.org"]});
        let shown = arguments(&args, 1000, "WHOLE-AT");
        let to = shown.find("/to/0 = \"x@example.org\"").expect(&shown);
        let dry = shown.find("/options/dryRun = false").expect(&shown);
        let cut = shown.find("/a = \"yyy").expect(&shown);
        assert!(to < dry && dry < cut, "{shown}");
        let sha = crate::canonical::sha256_hex_bytes(big.as_bytes());
        assert!(
            shown.contains(&format!(
                "of 5000 characters shown; sha256 of the whole value {sha}"
            )),
            "{shown}"
        );
        assert!(
            shown.contains("[NOT SHOWN: 1 more value(s), 5000 characters: /b]"),
            "{shown}"
        );
        assert!(shown.contains("WHOLE-AT"), "{shown}");
        assert!(shown.chars().count() < 1000 + 400, "{}", shown.len());
    }

    #[test]
    fn target_words_are_whole_words() {
        for yes in [
            "path",
            "file_path",
            "targetUrl",
            "to",
            "recipientId",
            "dest",
        ] {
            assert!(names_a_target(yes), "{yes}");
        }
        for no in ["content", "token", "photo", "tool", "history"] {
            assert!(!names_a_target(no), "{no}");
        }
    }
}
