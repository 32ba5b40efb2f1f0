//! Newline-delimited framing: one JSON message per line, with a size cap.

use std::io::{BufRead, ErrorKind, Write};

use serde_json::Value;

use super::{JsonRpcError, Message};

/// Default cap on one message (one line), in bytes: 16 MiB.
///
/// The TypeScript SDK, which most MCP servers and clients use, refuses messages
/// above 10 MiB, so every message a conforming peer can send fits under 16 MiB with
/// room to spare. The cap is still bounded so that one endless line cannot exhaust
/// memory: a longer line is skipped to its end without being buffered.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

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
}

impl<R: BufRead> MessageReader<R> {
    /// A reader with the default cap ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub fn new(inner: R) -> Self {
        Self::with_max_message_bytes(inner, DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A reader that refuses lines longer than `max` bytes (line terminator excluded).
    pub fn with_max_message_bytes(inner: R, max: usize) -> Self {
        Self { inner, max }
    }

    /// The cap in force, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        self.max
    }

    /// Reads the next non-blank line, without its `\n` or trailing `\r`.
    ///
    /// Returns `Ok(None)` at a clean end of the stream.
    pub fn read_line(&mut self) -> Result<Option<Vec<u8>>, JsonRpcError> {
        loop {
            let mut line = Vec::new();
            let mut seen: u64 = 0;
            let mut overflow = false;
            let mut terminated = false;
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
                } else if !overflow {
                    overflow = true;
                    line = Vec::new();
                }
                seen += chunk_len as u64;
                self.inner.consume(consumed);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if overflow || line.len() > self.max {
                return Err(JsonRpcError::LineTooLong {
                    length: seen,
                    limit: self.max,
                });
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some(line));
            }
        }
    }

    /// Reads the next line as one JSON value.
    pub fn read_value(&mut self) -> Result<Option<Value>, JsonRpcError> {
        let Some(line) = self.read_line()? else {
            return Ok(None);
        };
        let text = std::str::from_utf8(&line).map_err(|e| JsonRpcError::InvalidUtf8 {
            valid_up_to: e.valid_up_to(),
        })?;
        serde_json::from_str(text)
            .map(Some)
            .map_err(|source| JsonRpcError::NotJson { source })
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
