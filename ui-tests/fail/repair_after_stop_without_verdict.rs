// Invariant: a call that returned success and was stopped may have taken effect: its repair
// comes back `RepairUnsettled`, which cannot be repaired (and so resumed) without a not-applied verdict.
use rpr::stage::Returned;
use rpr::{Actor, Pathway, Runtime};

fn misuse(rt: &Runtime, returned: Pathway<Returned>, actor: &Actor) {
    let unsettled = returned
        .stop(rt, actor, "halt")
        .unwrap()
        .require_repair(rt, actor)
        .unwrap();
    let _ready = unsettled.repair(rt, actor, &serde_json::json!({}), None);
}

fn main() {}
