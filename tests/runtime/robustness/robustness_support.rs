//! Support for `tests/runtime/robustness.rs`: a deterministic PRNG (splitmix64) and
//! generators of hostile JSON-RPC input. No external crate: every case is
//! reproducible from its printed seed.

use serde_json::{Map, Value, json};

/// The base seed when `RPR_ROBUST_SEED` is not set.
pub(crate) const DEFAULT_SEED: u64 = 0x0052_5052_0B05_7EED;

/// The base seed: `RPR_ROBUST_SEED` (decimal or `0x` hex) or [`DEFAULT_SEED`].
pub(crate) fn base_seed() -> u64 {
    let Ok(text) = std::env::var("RPR_ROBUST_SEED") else {
        return DEFAULT_SEED;
    };
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("RPR_ROBUST_SEED={text:?} is not a u64: {e}"))
}

/// The seed of case `index` under `base`.
pub(crate) fn case_seed(base: u64, index: u64) -> u64 {
    Rng::new(base ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// splitmix64: tiny, fast, and good enough to drive test-case generation.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "below(0)");
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..hi` (`lo < hi`).
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo)
    }

    /// True with probability `percent`/100.
    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// A length biased towards small values: mostly under 16, sometimes up to `max`.
    pub(crate) fn len(&mut self, max: usize) -> usize {
        match self.below(8) {
            0..=4 => self.below(16.min(max + 1)),
            5 | 6 => self.below(256.min(max + 1)),
            _ => self.below(max + 1),
        }
    }

    fn char(&mut self) -> char {
        loop {
            let code = match self.below(10) {
                0..=4 => self.range(0x20, 0x7f),
                5 => self.below(0x20),
                6 => self.range(0x80, 0x800),
                7 => self.range(0x800, 0x1_0000),
                8 => self.range(0x1_0000, 0x11_0000),
                _ => self.pick(&[0x7f, 0xfeff, 0x2028, 0x2029, 0xfffd, 0xffff, 0x10_ffff, 0]),
            };
            if let Some(c) = u32::try_from(code).ok().and_then(char::from_u32) {
                return c;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// JSON values
// ---------------------------------------------------------------------------

const WORDS: &[&str] = &[
    "",
    "2.0",
    "1.0",
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "rpr.get_status",
    "rpr.list_pathways",
    "rpr.get_pathway",
    "rpr.get_evidence",
    "rpr.list_unresolved",
    "put",
    "get",
    "\u{0}",
    "\u{feff}",
    "\r\n",
    "\\",
    "\"",
    "é",
    "😀",
    "\u{2028}",
    "null",
    "{}",
];

/// A string: empty, a protocol word, ASCII, any Unicode (controls, astral), or long.
pub(crate) fn string(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 | 1 => rng.pick(WORDS).to_owned(),
        2 | 3 => {
            let n = rng.range(1, 12);
            (0..n)
                .map(|_| char::from(rng.pick(b"abcdefghijklmnopqrstuvwxyz0123456789_/.-")))
                .collect()
        }
        4 | 5 => {
            let n = rng.len(40);
            (0..n).map(|_| rng.char()).collect()
        }
        6 => "x".repeat(rng.len(5000)),
        _ => {
            let c = rng.char();
            std::iter::repeat_n(c, rng.len(300)).collect()
        }
    }
}

/// A JSON number, with the edges: zero, the i64/u64 limits, -0.0, huge and tiny floats.
pub(crate) fn number(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => json!(0),
        1 => json!(i64::MIN),
        2 => json!(i64::MAX),
        3 => json!(u64::MAX),
        4 => json!(-0.0),
        5 => json!(f64::MAX),
        6 => json!(5e-324),
        7 => json!(1.5),
        8 => json!(rng.next_u64() as i64),
        9 => json!(rng.next_u64()),
        10 => {
            let f = f64::from_bits(rng.next_u64());
            if f.is_finite() { json!(f) } else { json!(-2.5) }
        }
        _ => json!(rng.below(200) as i64 - 100),
    }
}

/// Any JSON value, nested up to `depth`.
pub(crate) fn value(rng: &mut Rng, depth: usize) -> Value {
    let top = if depth == 0 { 5 } else { 8 };
    match rng.below(top) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => number(rng),
        3 | 4 => Value::String(string(rng)),
        5 | 6 => {
            let n = rng.len(8);
            Value::Array((0..n).map(|_| value(rng, depth - 1)).collect())
        }
        _ => {
            let n = rng.len(8);
            let mut map = Map::new();
            for _ in 0..n {
                let key = string(rng);
                map.insert(key, value(rng, depth - 1));
            }
            Value::Object(map)
        }
    }
}

/// A value that is not a valid request id (not a string, not an integer).
pub(crate) fn bad_id(rng: &mut Rng) -> Value {
    match rng.below(7) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => json!(1.5),
        3 => json!(-0.5),
        4 => json!(f64::MAX),
        5 => json!([1]),
        _ => json!({"id": 1}),
    }
}

/// Arrays nested `depth` deep around `inner`.
pub(crate) fn nested(depth: usize, inner: Value) -> Value {
    let mut v = inner;
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// Objects nested `depth` deep.
pub(crate) fn nested_objects(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = json!({ "a": v });
    }
    v
}

/// Inserts `entries` into a new object in random order.
pub(crate) fn shuffled_object(rng: &mut Rng, mut entries: Vec<(String, Value)>) -> Value {
    let mut map = Map::new();
    while !entries.is_empty() {
        let i = rng.below(entries.len());
        let (k, v) = entries.swap_remove(i);
        map.insert(k, v);
    }
    Value::Object(map)
}

/// A well-formed JSON-RPC message (request, notification, result or error
/// response) whose id, if any, comes from `id`.
pub(crate) fn message(rng: &mut Rng, id: &mut dyn FnMut(&mut Rng) -> Value) -> Value {
    let mut entries = vec![("jsonrpc".to_owned(), json!("2.0"))];
    let kind = rng.below(4);
    if kind != 1 {
        entries.push(("id".into(), id(rng)));
    }
    if kind <= 1 {
        entries.push(("method".into(), Value::String(string(rng))));
        match rng.below(3) {
            0 => {}
            1 => entries.push(("params".into(), json!({ "x": value(rng, 3) }))),
            _ => entries.push(("params".into(), json!([value(rng, 3)]))),
        }
    } else if kind == 2 {
        entries.push(("result".into(), value(rng, 4)));
    } else {
        let mut error = vec![
            ("code".to_owned(), json!(rng.next_u64() as i64)),
            ("message".to_owned(), Value::String(string(rng))),
        ];
        if rng.chance(50) {
            error.push(("data".into(), value(rng, 3)));
        }
        entries.push(("error".into(), shuffled_object(rng, error)));
    }
    if rng.chance(10) {
        entries.push((string(rng), value(rng, 2)));
    }
    shuffled_object(rng, entries)
}

/// Replaces, removes or adds one member of a message (at the top level, in
/// `params` or in `error`) with a value of the wrong type.
pub(crate) fn near_valid(rng: &mut Rng, mut message: Value) -> Value {
    let Value::Object(obj) = &mut message else {
        return message;
    };
    let fields = [
        "jsonrpc",
        "id",
        "method",
        "params",
        "result",
        "error",
        "error.code",
        "error.message",
    ];
    for _ in 0..rng.range(1, 3) {
        let field = rng.pick(&fields);
        let wrong = match rng.below(4) {
            0 => None,
            1 => Some(bad_id(rng)),
            _ => Some(value(rng, 2)),
        };
        if let Some((outer, inner)) = field.split_once('.') {
            if let Some(Value::Object(error)) = obj.get_mut(outer) {
                match wrong {
                    Some(v) => error.insert(inner.into(), v),
                    None => error.remove(inner),
                };
            }
        } else {
            match wrong {
                Some(v) => obj.insert(field.into(), v),
                None => obj.remove(field),
            };
        }
    }
    message
}

/// Hand-written lines that stress the parser: deep nesting, numbers out of
/// range, lone surrogates, duplicate keys, batches, trailing bytes.
pub(crate) fn tricky(rng: &mut Rng) -> Vec<u8> {
    const FIXED: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":1e999,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":-1e999,"result":{}}"#,
        "1e999",
        "-1e999",
        r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":1E2,"result":null}"#,
        r#"{"jsonrpc":"2.0","method":"\ud800"}"#,
        r#"{"jsonrpc":"2.0","method":"\udc00\ud800"}"#,
        r#"{"jsonrpc":"2.0","method":"\ud800\u0041"}"#,
        r#"{"jsonrpc":"2.0","method":"\ud83d\ude00"}"#,
        r#"{"jsonrpc":"2.0","id":"\udfff","result":1}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"\ud800"}}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"1.0","method":"m"}"#,
        r#"{"jsonrpc":"1.0","jsonrpc":"2.0","method":"m"}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":null,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":null,"id":"dup","result":{}}"#,
        r#"{"jsonrpc":"2.0","method":"m","method":7}"#,
        r#"{"jsonrpc":"2.0","id":"d","result":1,"result":2}"#,
        "[]",
        r#"[{"jsonrpc":"2.0","method":"m"}]"#,
        r#"[{"jsonrpc":"2.0","id":"b1","method":"ping"},{"jsonrpc":"2.0","id":"b2","method":"ping"}]"#,
        "[1,2,3]",
        "[[]]",
        "null",
        "true",
        "\"2.0\"",
        "0",
        "{}",
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":"x"}"#,
        r#"{"jsonrpc":"2.0","id":"x","result":null}"#,
        r#"{"jsonrpc":"2.0","id":"x","error":null}"#,
        r#"{"jsonrpc":"2.0","id":"x","error":{"code":1.5,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":"x","error":{"code":1e999,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":"x","result":1,"error":{"code":1,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","method":"m","params":"x"}"#,
        r#"{"jsonrpc":"2.0","method":"m","params":null}"#,
        r#"{"jsonrpc":"2.0","method":"m"} {"jsonrpc":"2.0","method":"m"}"#,
        r#"{"jsonrpc":"2.0","method":"m"}x"#,
        "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        r#"{"jsonrpc":"2.0","method":"m\u0000"}"#,
        "{\"jsonrpc\":\"2.0\",\"method\":\"m\u{0}\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\"}",
        r#"{"jsonrpc":"2.0","method":"m",}"#,
        r#"{"jsonrpc":"2.0" "method":"m"}"#,
        r"{'jsonrpc':'2.0'}",
        "NaN",
        "Infinity",
        "-",
        "\"",
        "{",
        "}",
        "\u{0}",
        "\u{b}",
        "\u{c}",
        "\u{a0}",
        "\u{2028}",
    ];
    let depth = rng.pick(&[127, 128, 129, 1000, 10_000]);
    match rng.below(10) {
        0 => "[".repeat(depth).into_bytes(),
        1 => format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes(),
        2 => format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth)).into_bytes(),
        3 => {
            // Built as a Value, so kept shallow enough to drop and serialize on a test stack.
            let params = nested(depth.min(1000), json!(1));
            let v = json!({"jsonrpc": "2.0", "method": "m", "params": [params]});
            // serde_json refuses to *parse* beyond 128 levels but serializes any depth.
            serde_json::to_vec(&v).unwrap_or_default()
        }
        _ => rng.pick(FIXED).as_bytes().to_vec(),
    }
}

/// Random bytes: any byte, printable ASCII, JSON punctuation, CR, NUL, high bytes,
/// and (only when `newlines`) the odd LF.
pub(crate) fn junk(rng: &mut Rng, max: usize, newlines: bool) -> Vec<u8> {
    let n = rng.len(max);
    (0..n)
        .map(|_| match rng.below(12) {
            0 => match rng.next_u64() as u8 {
                b'\n' if !newlines => b'\r',
                b => b,
            },
            1..=4 => rng.range(0x20, 0x7f) as u8,
            5 => rng.pick(b"{}[]\":,\\"),
            6 => b'\r',
            7 => 0,
            8 => rng.range(0x80, 0x100) as u8,
            9 => rng.pick(&[0xc0, 0xc1, 0xed, 0xf4, 0xf5, 0xff, 0xfe, 0xe2, 0x82]),
            10 if newlines => b'\n',
            _ => b' ',
        })
        .collect()
}

/// Flips, deletes, inserts or truncates bytes of `line`.
pub(crate) fn mutate(rng: &mut Rng, mut line: Vec<u8>, newlines: bool) -> Vec<u8> {
    for _ in 0..rng.range(1, 4) {
        if line.is_empty() {
            break;
        }
        let at = rng.below(line.len());
        match rng.below(5) {
            0 => line[at] = rng.next_u64() as u8,
            1 => {
                let end = (at + rng.len(16)).min(line.len());
                line.drain(at..end);
            }
            2 => {
                let bytes = junk(rng, 8, newlines);
                line.splice(at..at, bytes);
            }
            3 => line.truncate(at),
            _ => line[at] ^= 1 << rng.below(8),
        }
    }
    if !newlines {
        line.retain(|&b| b != b'\n');
    }
    line
}

/// `serde_json::to_vec`, which cannot fail on a `Value`.
pub(crate) fn to_line(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a Value always serializes")
}
