//! Newline-delimited framing: one JSON message per line, with a size cap.

use std::io::{BufRead, ErrorKind, Write};

use serde_json::Value;

use super::{Id, JsonRpcError, Message};

/// Default cap on one message (one line), in bytes: 16 MiB.
///
/// The TypeScript SDK, which most MCP servers and clients use, refuses messages
/// above 10 MiB, so every message a conforming peer can send fits under 16 MiB with
/// room to spare. The cap is still bounded so that one endless line cannot exhaust
/// memory: a longer line is skipped to its end without being buffered.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How many bytes of each end of an over-long line are kept to find its id.
const EDGE: usize = 512;

/// Appends `chunk` to `tail`, keeping its last [`EDGE`] bytes.
fn keep_tail(tail: &mut Vec<u8>, chunk: &[u8]) {
    if chunk.len() >= EDGE {
        tail.clear();
        tail.extend_from_slice(&chunk[chunk.len() - EDGE..]);
    } else {
        tail.extend_from_slice(chunk);
        let extra = tail.len().saturating_sub(EDGE);
        tail.drain(..extra);
    }
}

/// The id of an over-long message, where its first or last bytes show it without doubt:
/// a top-level `"id"` member among the short members that open the object (`serde_json` and
/// most servers write `{"id":…,"jsonrpc":…,"result":…}`), or as the object's last member
/// (`…,"id":5}`, as the TypeScript SDK writes replies). Only numbers and strings without
/// escapes are read; anything less certain is `None`. The id may be a request's (a server
/// reads it to answer the line); a reader that wants only the id of a reply
/// ([`MessageReader::replies_only`]) drops it when a `method` member shows among the
/// opening members. A wrong `Some` is then possible only for a line that is not JSON, or a
/// request whose `method` follows a long member, and its cost is a request failed as
/// lost (fail closed).
#[must_use]
pub(crate) fn overflow_id(head: &[u8], tail: &[u8]) -> Option<Id> {
    head_id(head).or_else(|| tail_id(tail))
}

/// A string without escapes at the start of `s`: (its content, the rest after it).
fn plain_string(s: &str) -> Option<(&str, &str)> {
    let inner = s.strip_prefix('"')?;
    let end = inner.find('"')?;
    let content = &inner[..end];
    (!content.contains('\\')).then(|| (content, &inner[end + 1..]))
}

/// A number or a plain string at the start of `s`, complete (something follows it):
/// (its JSON text, the rest).
fn short_scalar(s: &str) -> Option<(&str, &str)> {
    if s.starts_with('"') {
        let (content, rest) = plain_string(s)?;
        return Some((&s[..content.len() + 2], rest));
    }
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))?;
    (end > 0).then(|| (&s[..end], &s[end..]))
}

fn id_from(text: &str) -> Option<Id> {
    Id::from_value(&serde_json::from_str(text).ok()?)
}

/// The short members that open the object whose first bytes are `head`, in order, as (key,
/// JSON text of the value): up to the first member whose value is not a number or a plain
/// string.
fn opening_members(head: &[u8]) -> Vec<(&str, &str)> {
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    let mut members = Vec::new();
    let Some(mut rest) = text.trim_start().strip_prefix('{') else {
        return members;
    };
    while let Some((key, after)) = plain_string(rest.trim_start()) {
        let Some((value, after)) = after
            .trim_start()
            .strip_prefix(':')
            .and_then(|a| short_scalar(a.trim_start()))
        else {
            break;
        };
        members.push((key, value));
        match after.trim_start().strip_prefix(',') {
            Some(next) => rest = next,
            None => break,
        }
    }
    members
}

fn head_id(head: &[u8]) -> Option<Id> {
    let members = opening_members(head);
    let (_, value) = members.iter().find(|(key, _)| *key == "id")?;
    id_from(value)
}

/// Whether the first bytes of a line show a `method` member among the short members that
/// open it: the line is a request or a notification, never a reply.
fn head_names_method(head: &[u8]) -> bool {
    opening_members(head)
        .iter()
        .any(|(key, _)| *key == "method")
}

fn tail_id(tail: &[u8]) -> Option<Id> {
    // The tail may start inside a UTF-8 sequence: skip to the first whole character.
    let start = tail.iter().position(|b| (b & 0xC0) != 0x80)?;
    let text = std::str::from_utf8(&tail[start..]).ok()?;
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    let value_start = if let Some(inner) = body.strip_suffix('"') {
        let open = inner.rfind('"')?;
        if inner[open + 1..].contains('\\') || inner[..open].ends_with('\\') {
            return None;
        }
        open
    } else {
        // Digits and '-' are ASCII: the value starts that many bytes before the end (a
        // character before it may be several bytes long, so no index arithmetic on it).
        let digits = body
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .count();
        body.len() - digits
    };
    let (before, value) = body.split_at(value_start);
    let before = before.trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?;
    // The quote that opens "id" follows a comma: a member of the outermost object.
    before.trim_end().ends_with(',').then_some(())?;
    id_from(value)
}

/// Reads JSON-RPC messages, one per line, from any [`BufRead`].
///
/// A trailing `\r` is stripped, blank lines are skipped, and a line longer than the
/// cap is consumed and dropped without being held in memory. Every per-line problem
/// comes back as a [`JsonRpcError`] after the line has been consumed, so the next
/// call reads the next line.
#[derive(Debug)]
pub struct MessageReader<R> {
    inner: R,
    max: usize,
    replies_only: bool,
}

impl<R: BufRead> MessageReader<R> {
    /// A reader with the default cap ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub fn new(inner: R) -> Self {
        Self::with_max_message_bytes(inner, DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A reader that refuses lines longer than `max` bytes (line terminator excluded).
    pub fn with_max_message_bytes(inner: R, max: usize) -> Self {
        Self {
            inner,
            max,
            replies_only: false,
        }
    }

    /// For a client: the id of a line over the cap ([`JsonRpcError::LineTooLong`]) is given
    /// only when the line's first bytes do not show it is a request or a notification (a
    /// `method` member among its opening members). A request of the server's carries an id
    /// of the server's own, which says nothing about the client's requests.
    pub(crate) fn replies_only(mut self) -> Self {
        self.replies_only = true;
        self
    }

    /// The cap in force, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max
    }

    /// Reads the next non-blank line, without its `\n` or trailing `\r`.
    ///
    /// Returns `Ok(None)` at a clean end of the stream.
    pub fn read_line(&mut self) -> Result<Option<Vec<u8>>, JsonRpcError> {
        self.read_line_skipping(|line| line.iter().all(u8::is_ascii_whitespace))
    }

    /// [`Self::read_line`] with its own notion of a blank line (skipped): the server loop
    /// skips JSON whitespace only, so that a form feed alone is answered as a parse error.
    pub(crate) fn read_line_skipping(
        &mut self,
        blank: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<Vec<u8>>, JsonRpcError> {
        loop {
            let mut line = Vec::new();
            let mut seen: u64 = 0;
            let mut overflow = false;
            let mut terminated = false;
            // Of a line over the cap, only its first and last bytes are kept: enough to
            // find the id of a reply (see `overflow_id`).
            let mut head: Vec<u8> = Vec::new();
            let mut tail: Vec<u8> = Vec::new();
            while !terminated {
                let buf = match self.inner.fill_buf() {
                    Ok(buf) => buf,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(JsonRpcError::Read(e)),
                };
                if buf.is_empty() {
                    if seen == 0 {
                        return Ok(None);
                    }
                    return Err(JsonRpcError::UnterminatedLine { length: seen });
                }
                let (chunk_len, consumed) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        terminated = true;
                        (i, i + 1)
                    }
                    None => (buf.len(), buf.len()),
                };
                // One extra byte of room for a trailing '\r' that is stripped below.
                if !overflow && line.len() + chunk_len <= self.max.saturating_add(1) {
                    line.extend_from_slice(&buf[..chunk_len]);
                } else {
                    if !overflow {
                        overflow = true;
                        head = line[..line.len().min(EDGE)].to_vec();
                        let room = EDGE - head.len();
                        head.extend_from_slice(&buf[..chunk_len.min(room)]);
                        tail = line[line.len().saturating_sub(EDGE)..].to_vec();
                        line = Vec::new();
                    }
                    keep_tail(&mut tail, &buf[..chunk_len]);
                }
                seen += chunk_len as u64;
                self.inner.consume(consumed);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if overflow || line.len() > self.max {
                if !overflow {
                    head = line[..line.len().min(EDGE)].to_vec();
                    tail = line[line.len().saturating_sub(EDGE)..].to_vec();
                }
                return Err(JsonRpcError::LineTooLong {
                    length: seen,
                    limit: self.max,
                    id: overflow_id(&head, &tail)
                        .filter(|_| !(self.replies_only && head_names_method(&head))),
                });
            }
            if !blank(&line) {
                return Ok(Some(line));
            }
        }
    }

    /// Reads the next line as one JSON value.
    pub fn read_value(&mut self) -> Result<Option<Value>, JsonRpcError> {
        self.read_line()?.map(|line| parse_value(&line)).transpose()
    }

    /// Reads the next line as one JSON-RPC message.
    pub fn read_message(&mut self) -> Result<Option<Message>, JsonRpcError> {
        match self.read_value()? {
            Some(value) => Message::from_value(value).map(Some),
            None => Ok(None),
        }
    }

    /// Gives the underlying reader back.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

/// One line as one JSON value: UTF-8, then JSON.
pub(crate) fn parse_value(line: &[u8]) -> Result<Value, JsonRpcError> {
    let text = std::str::from_utf8(line).map_err(|e| JsonRpcError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    serde_json::from_str(text).map_err(|source| JsonRpcError::NotJson { source })
}

/// Writes JSON-RPC messages, one compact line each, and counts the bytes that got out.
///
/// Use an unbuffered writer (such as a child's stdin pipe): the count is the number
/// of bytes accepted by `W::write`, which for a pipe is the number that reached the
/// peer's side. Behind a `BufWriter` the count would only say what reached the buffer.
#[derive(Debug)]
pub struct MessageWriter<W> {
    inner: W,
    max: usize,
}

impl<W: Write> MessageWriter<W> {
    /// A writer with the default cap ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub fn new(inner: W) -> Self {
        Self::with_max_message_bytes(inner, DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A writer that refuses to send messages longer than `max` bytes.
    pub fn with_max_message_bytes(inner: W, max: usize) -> Self {
        Self { inner, max }
    }

    /// Encodes `value` as one compact line (with its `\n`), checking the cap.
    pub fn encode(&self, value: &Value) -> Result<Vec<u8>, JsonRpcError> {
        encode_line(value, self.max)
    }

    /// Writes an already encoded line, calling `progress` with the running count of
    /// bytes accepted so far, then flushes. Returns the number of bytes written.
    ///
    /// On failure, [`JsonRpcError::Write`] says how many bytes got out before it.
    pub fn write_encoded(
        &mut self,
        line: &[u8],
        mut progress: impl FnMut(usize),
    ) -> Result<usize, JsonRpcError> {
        let total = line.len();
        let mut written = 0;
        while written < total {
            match self.inner.write(&line[written..]) {
                Ok(0) => {
                    let source =
                        std::io::Error::new(ErrorKind::WriteZero, "the pipe accepted no bytes");
                    return Err(JsonRpcError::Write {
                        written,
                        total,
                        source,
                    });
                }
                Ok(n) => {
                    written += n;
                    progress(written);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(JsonRpcError::Write {
                        written,
                        total,
                        source,
                    });
                }
            }
        }
        self.inner.flush().map_err(|source| JsonRpcError::Write {
            written,
            total,
            source,
        })?;
        Ok(total)
    }

    /// Encodes and writes one message. Returns the number of bytes written.
    pub fn write_message(&mut self, message: &Message) -> Result<usize, JsonRpcError> {
        let line = self.encode(&message.to_value())?;
        self.write_encoded(&line, |_| {})
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Gives the underlying writer back.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// Encodes `value` as one compact JSON line ending in `\n`, refusing more than `max`
/// bytes (line feed excluded). Nothing is written; see [`MessageWriter::write_encoded`].
pub fn encode_line(value: &Value, max: usize) -> Result<Vec<u8>, JsonRpcError> {
    let mut line = serde_json::to_vec(value).map_err(JsonRpcError::Encode)?;
    if line.len() > max {
        return Err(JsonRpcError::MessageTooLarge {
            length: line.len(),
            limit: max,
        });
    }
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod overflow_tests {
    use super::{Id, MessageReader, overflow_id};
    use crate::jsonrpc::JsonRpcError;

    fn id(head: &str, tail: &str) -> Option<Id> {
        overflow_id(head.as_bytes(), tail.as_bytes())
    }

    #[test]
    fn an_id_among_the_opening_members_is_found() {
        assert_eq!(
            id(r#"{"id":7,"jsonrpc":"2.0","result":{"content":[{"te"#, ""),
            Some(Id::Number(7))
        );
        assert_eq!(
            id(r#" { "jsonrpc" : "2.0" , "id" : "a-1" , "result": "xx"#, ""),
            Some(Id::String("a-1".into()))
        );
    }

    #[test]
    fn an_id_as_the_last_member_is_found() {
        assert_eq!(
            id(
                r#"{"result":{"content":"#,
                r#"xxxx"}]},"jsonrpc":"2.0","id":42}"#
            ),
            Some(Id::Number(42))
        );
        assert_eq!(
            id("", "xx\"}, \"id\" : \"k\" }\r"),
            Some(Id::String("k".into()))
        );
    }

    #[test]
    fn anything_uncertain_is_no_id() {
        // The opening member's value is long: the head ends inside it.
        assert_eq!(
            id(r#"{"result":{"content":[{"text":"xx"#, r#"xxxx"}]}}"#),
            None
        );
        // An "id" nested in the result, not the message's.
        assert_eq!(id(r#"{"result":{"id":3,"#, r#"x","id":9}}"#), None);
        // A number cut at the end of the head.
        assert_eq!(id(r#"{"id":12"#, ""), None);
        // Escapes: the quote before the id's value is escaped, so it is inside a string.
        assert_eq!(id("", r#"xx\",\"id\":\"5\"}"#), None);
        assert_eq!(id("", r#"x"id":5}"#), None, "no comma before the member");
        assert_eq!(id("", "x,\"id\":1.5}"), None, "not an integer");
        assert_eq!(id("not json", "neither"), None);
        // A multi-byte character right before the value (found by tests/runtime/robustness.rs).
        assert_eq!(id("", ":\"\u{5fe}7}"), None);
        assert_eq!(id("", ",\"id\":\u{5fe}7}"), None);
    }

    #[test]
    fn any_bytes_at_either_end_give_an_answer_not_a_panic() {
        // Short random strings over an alphabet of JSON punctuation, digits and multi-byte
        // characters, split anywhere (a seeded xorshift: the same cases every run).
        let alphabet: Vec<char> = "{}[]\":,\\ -0123456789idx\u{5fe}\u{1f600}"
            .chars()
            .collect();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..next() % 16 {
                let i = usize::try_from(next() % alphabet.len() as u64).unwrap();
                text.push(alphabet[i]);
            }
            if next() % 2 == 0 {
                text.push('}');
            }
            let bytes = text.as_bytes();
            let cut = usize::try_from(next() % (bytes.len() as u64 + 1)).unwrap();
            let _ = overflow_id(&bytes[..cut], &bytes[cut..]);
            let _ = overflow_id(&bytes[cut..], &bytes[..cut]);
        }
    }

    #[test]
    fn a_reader_of_replies_gives_no_id_for_a_request_over_the_cap() {
        let big = "x".repeat(2_000);
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":\"{big}\"}}\n"
        );
        let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"{big}\"}}\n");
        let input = format!("{request}{reply}");
        let ids = |reader: MessageReader<&[u8]>| {
            let mut reader = reader;
            std::iter::from_fn(|| match reader.read_line() {
                Err(JsonRpcError::LineTooLong { id, .. }) => Some(id),
                _ => None,
            })
            .collect::<Vec<_>>()
        };
        // A server answers the request over its cap with the request's id.
        let plain = MessageReader::with_max_message_bytes(input.as_bytes(), 1000);
        assert_eq!(ids(plain), [Some(Id::Number(1)), Some(Id::Number(1))]);
        // A client: the server's request names an id of the server's, not one of its own.
        let client = MessageReader::with_max_message_bytes(input.as_bytes(), 1000).replies_only();
        assert_eq!(ids(client), [None, Some(Id::Number(1))]);
    }

    #[test]
    fn the_reader_reports_the_id_of_a_line_over_the_cap() {
        let big = "x".repeat(10_000);
        let line = format!("{{\"id\":5,\"jsonrpc\":\"2.0\",\"result\":\"{big}\"}}\n");
        let ts = format!("{{\"result\":\"{big}\",\"jsonrpc\":\"2.0\",\"id\":6}}\n");
        let input = format!("{line}{ts}");
        let mut reader = MessageReader::with_max_message_bytes(input.as_bytes(), 1000);
        for want in [5, 6] {
            match reader.read_line() {
                Err(JsonRpcError::LineTooLong { id, .. }) => assert_eq!(id, Some(Id::Number(want))),
                other => panic!("{other:?}"),
            }
        }
        assert!(reader.read_line().unwrap().is_none());
    }
}
