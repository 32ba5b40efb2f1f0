//! JSON-RPC framing and message tests on in-memory bytes.

use std::io::{BufReader, Cursor, Read, Write};

use rpr::jsonrpc::{
    ErrorObject, Id, JsonRpcError, Message, MessageReader, MessageWriter, Notification, Request,
    Response,
};
use serde_json::json;

fn reader(bytes: &[u8], max: usize) -> MessageReader<Cursor<Vec<u8>>> {
    MessageReader::with_max_message_bytes(Cursor::new(bytes.to_vec()), max)
}

fn next(r: &mut MessageReader<impl std::io::BufRead>) -> Message {
    r.read_message().expect("a message").expect("not EOF")
}

#[test]
fn crlf_and_blank_lines() {
    let tail = br#"{"jsonrpc":"2.0","method":"b"}"#;
    let mut input = b"\r\n\n  \n{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\r\n".to_vec();
    input.extend_from_slice(tail);
    let mut r = reader(&input, 1024);
    assert_eq!(
        next(&mut r),
        Message::Notification(Notification {
            method: "a".into(),
            params: None
        })
    );
    // The last line has no line feed: it is reported, not parsed.
    assert!(
        matches!(r.read_message(), Err(JsonRpcError::UnterminatedLine { length }) if length == tail.len() as u64)
    );
    assert!(r.read_message().expect("clean EOF").is_none());
}

#[test]
fn invalid_utf8_and_non_json_lines_are_skipped() {
    let mut r = reader(b"\xff\xfe oops\nnot json\n{\"a\":1} {\"b\":2}\n{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n", 1024);
    assert!(matches!(
        r.read_message(),
        Err(JsonRpcError::InvalidUtf8 { valid_up_to: 0 })
    ));
    let e = r.read_message().unwrap_err();
    assert!(
        matches!(e, JsonRpcError::NotJson { .. }) && !e.is_fatal(),
        "{e}"
    );
    assert!(
        matches!(r.read_message(), Err(JsonRpcError::NotJson { .. })),
        "two values on one line"
    );
    let Message::Response(resp) = next(&mut r) else {
        panic!("expected a response")
    };
    assert_eq!(resp.id, Some(Id::Number(0)), "id 0 is a valid id");
    assert!(r.read_message().unwrap().is_none());
}

#[test]
fn size_cap_is_exact_and_cr_does_not_count() {
    let body = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"{}\"}}", "m".repeat(20));
    let max = body.len();
    let input = format!("{body}\n{body}\r\n{body} \n{body}\n");
    let mut r = reader(input.as_bytes(), max);
    next(&mut r);
    next(&mut r);
    let e = r.read_message().unwrap_err();
    assert!(
        matches!(e, JsonRpcError::LineTooLong { length, limit, .. } if length == max as u64 + 1 && limit == max),
        "{e}"
    );
    next(&mut r);
}

/// A reader that produces `len` bytes of `x` without holding them in memory.
fn endless_line(len: u64) -> impl Read {
    std::io::repeat(b'x').take(len)
}

#[test]
fn oversized_line_is_skipped_without_buffering_and_reading_goes_on() {
    // 64 MiB line streamed through a 1 KiB cap: the reader must skip it chunk by chunk.
    let huge = 64 * 1024 * 1024;
    let input = Cursor::new(b"{\"jsonrpc\":\"2.0\",\"method\":\"before\"}\n".to_vec())
        .chain(endless_line(huge))
        .chain(Cursor::new(
            b"\n{\"jsonrpc\":\"2.0\",\"method\":\"after\"}\n".to_vec(),
        ));
    let mut r = MessageReader::with_max_message_bytes(BufReader::new(input), 1024);
    assert!(matches!(next(&mut r), Message::Notification(n) if n.method == "before"));
    match r.read_message() {
        Err(JsonRpcError::LineTooLong {
            length,
            limit: 1024,
            ..
        }) => assert_eq!(length, huge),
        other => panic!("expected LineTooLong, got {other:?}"),
    }
    assert!(matches!(next(&mut r), Message::Notification(n) if n.method == "after"));
}

#[test]
fn huge_notification_under_the_default_cap_is_read() {
    let text = "y".repeat(11 * 1024 * 1024); // above the TS SDK's 10 MiB, under our 16 MiB
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": text}})
    );
    let mut r = MessageReader::new(Cursor::new(line.into_bytes()));
    let Message::Notification(n) = next(&mut r) else {
        panic!("expected a notification")
    };
    assert_eq!(
        n.params.unwrap()["data"].as_str().map(str::len),
        Some(11 * 1024 * 1024)
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let line = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let mut r = reader(line.as_bytes(), 1 << 20);
    assert!(matches!(
        r.read_message(),
        Err(JsonRpcError::NotJson { .. })
    ));
}

#[test]
fn ids_keep_their_json_type() {
    let mut r = reader(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}\n",
        1024,
    );
    let (Message::Response(a), Message::Response(b)) = (next(&mut r), next(&mut r)) else {
        panic!()
    };
    assert_eq!(a.id, Some(Id::Number(1)));
    assert_eq!(b.id, Some(Id::String("1".into())));
    assert_ne!(a.id, b.id);
    assert_eq!(Id::String("1".into()).to_string(), "\"1\"");
}

#[test]
fn invalid_messages_are_typed() {
    let cases: &[(&str, Option<Id>)] = &[
        (r#"{"id":1,"result":{}}"#, Some(Id::Number(1))),
        (
            r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"x"}}"#,
            Some(Id::Number(7)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","bogus":true}"#,
            Some(Id::String("a".into())),
        ),
        (r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, None),
        (r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#, None),
        (r#"{"jsonrpc":"2.0","method":"x","params":3}"#, None),
        (
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":"x","message":"m"}}"#,
            Some(Id::Number(2)),
        ),
        ("42", None),
    ];
    for (line, want) in cases {
        let mut r = reader(format!("{line}\n").as_bytes(), 1024);
        match r.read_message() {
            Err(JsonRpcError::InvalidMessage { id, .. }) => assert_eq!(&id, want, "{line}"),
            other => panic!("{line}: expected InvalidMessage, got {other:?}"),
        }
    }
    let mut r = reader(b"[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]\n", 1024);
    assert!(matches!(
        r.read_message(),
        Err(JsonRpcError::Batch { len: 1 })
    ));
}

#[test]
fn error_response_without_id_is_accepted() {
    let mut r = reader(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n", 1024);
    let Message::Response(resp) = next(&mut r) else {
        panic!()
    };
    assert_eq!(resp.id, None);
    assert_eq!(resp.outcome, Err(ErrorObject::new(-32700, "Parse error")));
}

#[test]
fn writer_is_compact_one_line_and_round_trips() {
    let messages = [
        Message::Request(Request {
            id: Id::String("r".into()),
            method: "tools/call".into(),
            params: Some(json!({"name": "put", "arguments": {"value": "two\nlines\r\n"}})),
        }),
        Message::Response(Response {
            id: Some(Id::Number(0)),
            outcome: Ok(json!({})),
        }),
        Message::Response(Response {
            id: Some(Id::Number(3)),
            outcome: Err(ErrorObject {
                code: -32601,
                message: "no".into(),
                data: Some(json!([1])),
            }),
        }),
    ];
    let mut w = MessageWriter::new(Vec::new());
    let mut total = 0;
    for m in &messages {
        total += w.write_message(m).unwrap();
    }
    let bytes = w.into_inner();
    assert_eq!(bytes.len(), total);
    assert_eq!(
        bytes.split(|&b| b == b'\n').count() - 1,
        messages.len(),
        "one line per message"
    );
    assert!(
        !bytes.windows(2).any(|w| w == b": " || w == b", "),
        "compact output"
    );
    let mut r = MessageReader::new(Cursor::new(bytes));
    for m in &messages {
        assert_eq!(&next(&mut r), m);
    }
}

/// Accepts `limit` bytes in total, then fails.
struct Choking {
    accepted: Vec<u8>,
    limit: usize,
}

impl Write for Choking {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.limit - self.accepted.len();
        if room == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "closed",
            ));
        }
        let n = buf.len().min(room).min(4);
        self.accepted.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn writer_reports_how_many_bytes_got_out() {
    let message = Message::Notification(Notification {
        method: "notifications/initialized".into(),
        params: None,
    });
    for (limit, want) in [(0, 0), (10, 10)] {
        let mut w = MessageWriter::new(Choking {
            accepted: Vec::new(),
            limit,
        });
        let mut seen = Vec::new();
        let line = w.encode(&message.to_value()).unwrap();
        let e = w.write_encoded(&line, |n| seen.push(n)).unwrap_err();
        assert!(e.is_fatal());
        assert_eq!(e.bytes_written(), Some(want), "{e}");
        assert!(
            matches!(e, JsonRpcError::Write { written, total, .. } if written == want && total == line.len())
        );
        assert_eq!(seen.last().copied().unwrap_or(0), want);
    }
    let mut w = MessageWriter::with_max_message_bytes(Vec::new(), 16);
    let e = w.write_message(&message).unwrap_err();
    assert!(matches!(e, JsonRpcError::MessageTooLarge { limit: 16, .. }));
    assert_eq!(e.bytes_written(), Some(0));
    assert!(w.get_ref().is_empty(), "nothing written");
}
