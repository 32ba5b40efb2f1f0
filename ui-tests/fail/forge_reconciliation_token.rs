// Invariant: a reconciliation token cannot be built outside rpr: its fields are private.
use rpr::token::{Applied, Reconciliation};
use serde_json::Value;
use std::marker::PhantomData;

fn misuse(pathway: String, attempt: String, evidence: Value) -> Reconciliation<Applied> {
    Reconciliation { pathway, attempt, source: "readback", actor: "me".into(), evidence, _verdict: PhantomData }
}

fn main() {}
