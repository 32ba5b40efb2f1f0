// Invariant: an unknown outcome cannot be repaired directly: only `require_repair` with a
// not-applied verdict leads towards a new attempt.
use rpr::stage::Unknown;
use rpr::{Actor, Pathway, Runtime};

fn misuse(rt: &Runtime, unknown: Pathway<Unknown>, actor: &Actor) {
    let _ready = unknown.repair(rt, actor, &serde_json::json!({}), None);
}

fn main() {}
