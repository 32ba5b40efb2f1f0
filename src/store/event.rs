//! The fields of one stored ledger event that the replay reads, taken from its text.
//!
//! A stored event is canonical JSON (RFC 8785). [`Event::read`] scans that text once
//! ([`crate::canonical::scan`]) and borrows the few fields the replay needs from it; no
//! value tree is built and nothing is written again. A text that is not canonical (a
//! hand-edited row, say) is parsed into a [`Value`] instead, so the replay sees the same
//! fields either way and the caller learns that the text was not canonical.

use std::borrow::Cow;

use serde_json::Value;

use crate::canonical::scan::{self, integer_value, string_value};

/// The fields of an event's `data` object that the replay reads.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct EventData<'a> {
    pub(crate) idempotency_key: Option<Cow<'a, str>>,
    pub(crate) definition_digest: Option<Cow<'a, str>>,
    pub(crate) request_digest: Option<Cow<'a, str>>,
    pub(crate) definition_text_digest: Option<Cow<'a, str>>,
    pub(crate) approval: Option<Cow<'a, str>>,
    pub(crate) previous_attempt: Option<Cow<'a, str>>,
    pub(crate) seq: Option<i64>,
    pub(crate) binding_digest: Option<Cow<'a, str>>,
    pub(crate) request_text_digest: Option<Cow<'a, str>>,
    pub(crate) owner: Option<Cow<'a, str>>,
    /// The canonical text of `carrier`; `None` when absent or `null`.
    pub(crate) carrier: Option<Cow<'a, str>>,
    /// The canonical text of `evidence` when present (`"null"` for `null`).
    pub(crate) evidence: Option<Cow<'a, str>>,
}

/// The fields of an event that the replay reads. A field that is absent, or not of the
/// expected JSON type, is `None`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Event<'a> {
    pub(crate) seq: Option<i64>,
    pub(crate) pathway: Option<Cow<'a, str>>,
    pub(crate) kind: Option<Cow<'a, str>>,
    pub(crate) from: Option<Cow<'a, str>>,
    pub(crate) to: Option<Cow<'a, str>>,
    pub(crate) at: Option<i64>,
    pub(crate) v: Option<i64>,
    pub(crate) actor: Option<Cow<'a, str>>,
    pub(crate) attempt: Option<Cow<'a, str>>,
    pub(crate) attempt_status: Option<Cow<'a, str>>,
    pub(crate) data: EventData<'a>,
}

/// How [`Event::read`] found the text.
#[derive(Debug)]
pub(crate) enum Reading<'a> {
    /// Canonical: the fields borrow from the text.
    Canonical(Event<'a>),
    /// JSON, but not in canonical form: the fields as `serde_json` parses the text.
    NotCanonical(Event<'static>),
    /// Not JSON at all.
    NotJson(serde_json::Error),
}

/// One member value: a slice of a canonical text, or a parsed value.
#[derive(Clone, Copy)]
enum Raw<'a> {
    Canonical(&'a str),
    Parsed(&'a Value),
}

impl<'a> Raw<'a> {
    fn string(self) -> Option<Cow<'a, str>> {
        match self {
            Raw::Canonical(raw) => string_value(raw),
            Raw::Parsed(value) => value.as_str().map(Cow::Borrowed),
        }
    }

    fn integer(self) -> Option<i64> {
        match self {
            Raw::Canonical(raw) => integer_value(raw),
            Raw::Parsed(value) => value.as_i64().filter(|v| v.unsigned_abs() <= 1_u64 << 53),
        }
    }

    fn is_null(self) -> bool {
        match self {
            Raw::Canonical(raw) => raw == "null",
            Raw::Parsed(value) => value.is_null(),
        }
    }

    fn canonical(self) -> Option<Cow<'a, str>> {
        match self {
            Raw::Canonical(raw) => Some(Cow::Borrowed(raw)),
            Raw::Parsed(value) => crate::canonical::to_string(value).ok().map(Cow::Owned),
        }
    }
}

impl<'a> Event<'a> {
    /// Reads the fields of a stored event text.
    pub(crate) fn read(text: &'a str) -> Reading<'a> {
        let mut event = Event::default();
        let canonical = scan::scan(text, |m| match m.parent.as_deref() {
            None => event.set(&m.name, Raw::Canonical(m.raw)),
            Some("data") => event.data.set(&m.name, Raw::Canonical(m.raw)),
            Some(_) => {}
        });
        if canonical {
            return Reading::Canonical(event);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value) => Reading::NotCanonical(Event::from_value(&value).into_owned()),
            Err(error) => Reading::NotJson(error),
        }
    }

    /// The fields of a parsed event.
    pub(crate) fn from_value(value: &'a Value) -> Self {
        let mut event = Event::default();
        if let Some(members) = value.as_object() {
            for (name, member) in members {
                event.set(name, Raw::Parsed(member));
            }
            if let Some(data) = members.get("data").and_then(Value::as_object) {
                for (name, member) in data {
                    event.data.set(name, Raw::Parsed(member));
                }
            }
        }
        event
    }

    fn set(&mut self, name: &str, raw: Raw<'a>) {
        match name {
            "seq" => self.seq = raw.integer(),
            "pathway" => self.pathway = raw.string(),
            "kind" => self.kind = raw.string(),
            "from" => self.from = raw.string(),
            "to" => self.to = raw.string(),
            "at" => self.at = raw.integer(),
            "v" => self.v = raw.integer(),
            "actor" => self.actor = raw.string(),
            "attempt" => self.attempt = raw.string(),
            "attempt_status" => self.attempt_status = raw.string(),
            _ => {}
        }
    }

    fn into_owned(self) -> Event<'static> {
        Event {
            seq: self.seq,
            pathway: owned(self.pathway),
            kind: owned(self.kind),
            from: owned(self.from),
            to: owned(self.to),
            at: self.at,
            v: self.v,
            actor: owned(self.actor),
            attempt: owned(self.attempt),
            attempt_status: owned(self.attempt_status),
            data: self.data.into_owned(),
        }
    }
}

impl<'a> EventData<'a> {
    fn set(&mut self, name: &str, raw: Raw<'a>) {
        match name {
            "idempotency_key" => self.idempotency_key = raw.string(),
            "definition_digest" => self.definition_digest = raw.string(),
            "request_digest" => self.request_digest = raw.string(),
            "definition_text_digest" => self.definition_text_digest = raw.string(),
            "approval" => self.approval = raw.string(),
            "previous_attempt" => self.previous_attempt = raw.string(),
            "seq" => self.seq = raw.integer(),
            "binding_digest" => self.binding_digest = raw.string(),
            "request_text_digest" => self.request_text_digest = raw.string(),
            "owner" => self.owner = raw.string(),
            "carrier" => self.carrier = if raw.is_null() { None } else { raw.canonical() },
            "evidence" => self.evidence = raw.canonical(),
            _ => {}
        }
    }

    fn into_owned(self) -> EventData<'static> {
        EventData {
            idempotency_key: owned(self.idempotency_key),
            definition_digest: owned(self.definition_digest),
            request_digest: owned(self.request_digest),
            definition_text_digest: owned(self.definition_text_digest),
            approval: owned(self.approval),
            previous_attempt: owned(self.previous_attempt),
            seq: self.seq,
            binding_digest: owned(self.binding_digest),
            request_text_digest: owned(self.request_text_digest),
            owner: owned(self.owner),
            carrier: owned(self.carrier),
            evidence: owned(self.evidence),
        }
    }
}

fn owned(field: Option<Cow<'_, str>>) -> Option<Cow<'static, str>> {
    field.map(|f| Cow::Owned(f.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn field() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            (-100_i64..100).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z\"\\\\\u{1}é]{0,6}".prop_map(Value::String),
            Just(json!({"k": [1, "x"], "a": null})),
            Just(json!([1, 2])),
        ]
    }

    const TOP: &[&str] = &[
        "seq",
        "pathway",
        "kind",
        "from",
        "to",
        "at",
        "v",
        "actor",
        "attempt",
        "attempt_status",
        "other",
    ];
    const DATA: &[&str] = &[
        "idempotency_key",
        "definition_digest",
        "request_digest",
        "definition_text_digest",
        "approval",
        "previous_attempt",
        "seq",
        "binding_digest",
        "request_text_digest",
        "owner",
        "carrier",
        "evidence",
        "other",
    ];

    fn event_value() -> impl Strategy<Value = Value> {
        let top = prop::collection::btree_map(prop::sample::select(TOP), field(), 0..8);
        let data = prop::collection::btree_map(prop::sample::select(DATA), field(), 0..10);
        (
            top,
            prop_oneof![data.prop_map(Some), Just(None)],
            any::<bool>(),
        )
            .prop_map(|(top, data, data_is_text)| {
                let mut map: serde_json::Map<String, Value> =
                    top.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                if let Some(data) = data {
                    let data: serde_json::Map<String, Value> =
                        data.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                    map.insert("data".into(), Value::Object(data));
                } else if data_is_text {
                    map.insert("data".into(), json!("not an object"));
                }
                Value::Object(map)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// The scanned fields of a canonical text are the fields of the value
        /// `serde_json` parses from it.
        #[test]
        fn scanned_fields_are_the_parsed_fields(value in event_value()) {
            if let Ok(text) = crate::canonical::to_string(&value) {
                let Reading::Canonical(scanned) = Event::read(&text) else {
                    panic!("canonical text not read as canonical: {text}");
                };
                let parsed: Value = serde_json::from_str(&text).unwrap();
                // A double above 2^53 parses as an integer the Value path cannot write
                // canonically; such texts are compared in the test below instead.
                if crate::canonical::to_string(&parsed).is_ok() {
                    prop_assert_eq!(scanned, Event::from_value(&parsed));
                }
            }
        }
    }

    #[test]
    fn a_double_above_two_to_the_53_is_read_as_the_writer_wrote_it() {
        let value = json!({"seq": 1.109_757_712_031_584_6e16, "data": {"carrier": [1.109_757_712_031_584_6e16]}});
        let text = crate::canonical::to_string(&value).unwrap();
        assert_eq!(
            text,
            r#"{"data":{"carrier":[11097577120315846]},"seq":11097577120315846}"#
        );
        let Reading::Canonical(event) = Event::read(&text) else {
            panic!("the writer's own text must read as canonical");
        };
        assert_eq!(event.seq, None, "not an integer RFC 8785 writes exactly");
        assert_eq!(event.data.carrier.as_deref(), Some("[11097577120315846]"));
    }

    #[test]
    fn a_text_in_another_spelling_is_read_but_flagged() {
        let Reading::NotCanonical(event) = Event::read(r#"{"seq": 3, "kind":"proposed"}"#) else {
            panic!("expected not canonical");
        };
        assert_eq!(event.seq, Some(3));
        assert_eq!(event.kind.as_deref(), Some("proposed"));
        assert!(matches!(Event::read("{\"seq\":"), Reading::NotJson(_)));
    }
}
