// Invariant: no stage and no token can be deserialized: none can be forged from JSON.
use rpr::stage::*;
use rpr::token::{Applied, Approval, NotApplied, Reconciliation, Unresolved};
use rpr::Pathway;

fn misuse(json: &str) {
    let _ = serde_json::from_str::<Pathway<Proposed>>(json);
    let _ = serde_json::from_str::<Pathway<AwaitingApproval>>(json);
    let _ = serde_json::from_str::<Pathway<HumanGate>>(json);
    let _ = serde_json::from_str::<Pathway<Held>>(json);
    let _ = serde_json::from_str::<Pathway<Approved>>(json);
    let _ = serde_json::from_str::<Pathway<Bound>>(json);
    let _ = serde_json::from_str::<Pathway<Returned>>(json);
    let _ = serde_json::from_str::<Pathway<Unknown>>(json);
    let _ = serde_json::from_str::<Pathway<Stopped>>(json);
    let _ = serde_json::from_str::<Pathway<PartiallyCompleted>>(json);
    let _ = serde_json::from_str::<Pathway<RepairRequired>>(json);
    let _ = serde_json::from_str::<Pathway<RepairUnsettled>>(json);
    let _ = serde_json::from_str::<Pathway<ReadyToResume>>(json);
    let _ = serde_json::from_str::<Pathway<Completed>>(json);
    let _ = serde_json::from_str::<Pathway<Denied>>(json);
    let _ = serde_json::from_str::<Pathway<Aborted>>(json);
    let _ = serde_json::from_str::<Approval>(json);
    let _ = serde_json::from_str::<Reconciliation<Applied>>(json);
    let _ = serde_json::from_str::<Reconciliation<NotApplied>>(json);
    let _ = serde_json::from_str::<Reconciliation<Unresolved>>(json);
}

fn main() {}
