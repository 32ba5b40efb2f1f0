//! JSON-RPC framing: arbitrary bytes, delivered in arbitrary pieces, followed by one good
//! message. Never a panic; no line over the cap is ever returned; a line cut short at the
//! end is an error, not a message; and after whatever came before, the good message is
//! read (every per-line problem consumes its line and leaves the stream readable).
#![no_main]

use std::io::{BufRead, Read};

use libfuzzer_sys::fuzz_target;
use rpr::jsonrpc::{Message, MessageReader};

/// A reader that hands out its bytes in pieces whose sizes come from the input.
struct Pieces<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    at: usize,
    piece: usize,
    buf_end: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Pieces<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.at >= self.buf_end {
            let size = self
                .sizes
                .get(self.piece % self.sizes.len().max(1))
                .map_or(4096, |s| usize::from(*s) + 1);
            self.piece += 1;
            self.buf_end = (self.at + size).min(self.data.len());
        }
        Ok(&self.data[self.at..self.buf_end])
    }
    fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.buf_end);
    }
}

const GOOD: &[u8] = br#"{"jsonrpc":"2.0","id":"fuzz-end","method":"ping"}"#;

fuzz_target!(|input: &[u8]| {
    // First byte: the cap (small, so that over-long lines are common); next 8 bytes: piece sizes.
    let Some((&cap, rest)) = input.split_first() else {
        return;
    };
    let (sizes, body) = rest.split_at(rest.len().min(8));
    let max = usize::from(cap) * 4 + 64;
    let mut data = body.to_vec();
    data.push(b'\n');
    data.extend_from_slice(GOOD);
    data.push(b'\n');
    let pieces = || Pieces {
        data: &data,
        sizes,
        at: 0,
        piece: 0,
        buf_end: 0,
    };
    // Lines: none over the cap is handed out.
    let mut lines = MessageReader::with_max_message_bytes(pieces(), max);
    loop {
        match lines.read_line() {
            Ok(None) => break,
            Ok(Some(line)) => assert!(
                line.len() <= max,
                "a line of {} bytes over the cap {max}",
                line.len()
            ),
            Err(e) => assert!(!e.is_fatal(), "a reader over memory failed: {e}"),
        }
    }
    // Messages: whatever came first, the good message is read last.
    let mut reader = MessageReader::with_max_message_bytes(pieces(), max);
    let mut last_good = false;
    loop {
        match reader.read_message() {
            Ok(None) => break,
            Ok(Some(message)) => {
                last_good = matches!(&message, Message::Request(r) if r.method == "ping"
                    && r.id.to_value() == serde_json::json!("fuzz-end"));
            }
            Err(e) => {
                assert!(!e.is_fatal(), "a reader over memory failed: {e}");
                last_good = false;
            }
        }
    }
    assert!(
        last_good,
        "the good message after the fuzzed bytes was not read last"
    );
});
