//! Secrets in a request are stored redacted, and a redacted copy never decides anything.

mod common;

use common::*;
use rpr::executor::{Delivery, Request};
use rpr::token::Reconciled;
use rpr::{ActionClass, Outcome, StoredPathway};
use serde_json::json;

fn secret_definition() -> rpr::Definition {
    let mut d = definition("secret", ActionClass::Mutating);
    d.request = Request::new("put", json!({"key": "k", "api_key": "s3cret"}));
    d
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
    let Reconciled::Unresolved(t) = rt.reconcile(&u, &mut Sees("applied")) else {
        panic!("a redacted request must not be reconciled")
    };
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
    let Reconciled::Applied(t) = rt.reconcile(&u, &mut Sees("applied")) else {
        panic!()
    };
    u.complete(&rt, t).unwrap();
    assert!(rt.verify(None).unwrap().is_ok());
}
