// Invariant: a pathway whose call returned (running, awaiting readback) cannot be aborted.
use rpr::stage::Returned;
use rpr::{Actor, Pathway, Runtime};
use serde_json::Value;

fn misuse(returned: Pathway<Returned>, rt: &Runtime, actor: &Actor, residuals: &Value) {
    let _aborted = returned.abort(rt, actor, residuals);
}

fn main() {}
