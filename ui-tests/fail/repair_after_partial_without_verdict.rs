// Invariant: a partially completed call may have taken effect: its repair comes back
// `RepairUnsettled`, which cannot be repaired (and so resumed) without a not-applied verdict.
use rpr::stage::PartiallyCompleted;
use rpr::{Actor, Pathway, Runtime};

fn misuse(rt: &Runtime, partial: Pathway<PartiallyCompleted>, actor: &Actor) {
    let unsettled = partial.require_repair(rt, actor).unwrap();
    let _ready = unsettled.repair(rt, actor, &serde_json::json!({}), None);
}

fn main() {}
