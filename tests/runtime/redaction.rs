//! Secrets in a request are stored redacted, and a redacted copy never decides anything.

use crate::common;

use common::*;
use rpr::executor::{Delivery, Observation, Readback, Request};
use rpr::token::Reconciled;
use rpr::{ActionClass, Outcome, StoredPathway};
use serde_json::json;

fn secret_definition() -> rpr::Definition {
    let mut d = definition("secret", ActionClass::Mutating);
    d.request = Request::new("put", json!({"key": "k", "api_key": "s3cret"}));
    d
}

/// A readback that notes every request it is asked to read back.
struct Counted(Sees, Vec<Request>);

impl Readback for Counted {
    fn observe(&mut self, request: &Request) -> Observation {
        self.1.push(request.clone());
        self.0.observe(request)
    }
}

#[test]
fn a_redacted_request_is_never_read_back_until_restored() {
    let dir = TempDir::new("redacted-reconcile");
    let id = {
        let rt = runtime(&dir.db());
        let p = allowed(&rt, secret_definition());
        let mut ex = Scripted::new(vec![Delivery::PossiblyWritten {
            reason: "pipe closed".into(),
        }]);
        let Outcome::Unknown(u) =
            p.bind(&mut ex)
                .unwrap()
                .dispatch(&rt, &actor("execution_actor"), &mut ex)
        else {
            panic!()
        };
        u.id().to_owned()
    };
    let db_text = db_dump(&dir.db());
    assert!(!db_text.contains("s3cret"), "the secret is never stored");

    let rt = runtime(&dir.db());
    let StoredPathway::Unknown(u) = rt.load(&id).unwrap() else {
        panic!()
    };
    assert!(u.is_redacted());
    // The readback would say "applied", but it must not even be asked.
    let mut asked = Counted(Sees("applied"), Vec::new());
    let Reconciled::Unresolved(t) = rt.reconcile(&u, &mut asked) else {
        panic!("a redacted request must not be reconciled")
    };
    assert!(
        asked.1.is_empty(),
        "the readback was asked with {:?}",
        asked.1
    );
    let u = u.keep_unknown(&rt, t).unwrap();
    // A wrong request is refused; the right one restores the pathway.
    let wrong = Request::new("put", json!({"key": "k", "api_key": "guess"}));
    let u = u.restore_request(wrong).unwrap_err().into_pathway();
    let u = u
        .restore_request(Request::new(
            "put",
            json!({"key": "k", "api_key": "s3cret"}),
        ))
        .unwrap();
    let mut asked = Counted(Sees("applied"), Vec::new());
    let Reconciled::Applied(t) = rt.reconcile(&u, &mut asked) else {
        panic!()
    };
    assert_eq!(asked.1.len(), 1, "restored, it is read back once");
    assert_eq!(asked.1[0].arguments["api_key"], "s3cret");
    u.complete(&rt, t).unwrap();
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A tool result as MCP servers usually send it: `structuredContent`, and the same
/// value repeated as a JSON text item, plus a prose line and an error echoing it.
fn echoing_reply(secret: &str) -> serde_json::Value {
    let structured = json!({"user": "alice", "password": secret});
    json!({
        "structuredContent": structured,
        "content": [
            {"type": "text", "text": serde_json::to_string(&structured).unwrap()},
            {"type": "text", "text": format!("logged in as alice with {secret}")},
        ]
    })
}

#[test]
fn a_secret_redacted_in_structured_content_is_redacted_in_every_text_copy() {
    let secret = "hunter2-secret";
    let dir = TempDir::new("redacted-echo");
    let rt = runtime(&dir.db());
    let p = allowed(&rt, definition("echo", ActionClass::ReadOnly));
    let mut ex = Scripted::new(vec![Delivery::Succeeded {
        reply: echoing_reply(secret),
    }]);
    let Outcome::Completed(_) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex)
    else {
        panic!("a read-only success completes")
    };
    let db_text = db_dump(&dir.db());
    assert!(
        !db_text.contains(secret),
        "the secret is stored in a text copy:\n{db_text}"
    );
    // The JSON echo is redacted as JSON, so what is not secret in it is kept.
    assert!(
        db_text.contains("alice"),
        "the rest of the evidence is kept"
    );
}

#[test]
fn a_secret_in_error_data_is_redacted_in_the_error_message_too() {
    let secret = "hunter2-secret";
    let dir = TempDir::new("redacted-error");
    let rt = runtime(&dir.db());
    let p = allowed(&rt, definition("error", ActionClass::ReadOnly));
    let mut ex = Scripted::new(vec![Delivery::Rejected {
        error: json!({
            "code": -32602,
            "message": format!("invalid password \"{secret}\""),
            "data": {"token": secret, "log": [format!("rejected {secret}")]},
        }),
        class: rpr::executor::RejectionClass::NotApplied,
    }]);
    let Outcome::ReadFailed(_) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex)
    else {
        panic!("a rejected read ends failed")
    };
    let db_text = db_dump(&dir.db());
    assert!(
        !db_text.contains(secret),
        "the secret is stored in an error copy:\n{db_text}"
    );
}

#[test]
fn a_secret_argument_echoed_in_the_reply_is_redacted() {
    let dir = TempDir::new("redacted-argument-echo");
    let rt = runtime(&dir.db());
    let mut d = secret_definition();
    d.class = ActionClass::ReadOnly;
    let p = allowed(&rt, d);
    let mut ex = Scripted::new(vec![Delivery::Succeeded {
        reply: json!({"content": [{"type": "text", "text": "stored k with key s3cret"}]}),
    }]);
    let Outcome::Completed(_) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex)
    else {
        panic!("a read-only success completes")
    };
    let db_text = db_dump(&dir.db());
    assert!(
        !db_text.contains("s3cret"),
        "the argument's secret is stored in the reply:\n{db_text}"
    );
}
