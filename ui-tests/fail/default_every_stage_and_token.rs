// Invariant: no stage and no token has a `Default`: none can be conjured without the runtime.
use rpr::stage::*;
use rpr::token::{Applied, Approval, NotApplied, Reconciliation, Unresolved};
use rpr::Pathway;

fn misuse() {
    let _: Pathway<Proposed> = Default::default();
    let _: Pathway<AwaitingApproval> = Default::default();
    let _: Pathway<HumanGate> = Default::default();
    let _: Pathway<Held> = Default::default();
    let _: Pathway<Approved> = Default::default();
    let _: Pathway<Bound> = Default::default();
    let _: Pathway<Returned> = Default::default();
    let _: Pathway<Unknown> = Default::default();
    let _: Pathway<Stopped> = Default::default();
    let _: Pathway<PartiallyCompleted> = Default::default();
    let _: Pathway<RepairRequired> = Default::default();
    let _: Pathway<RepairUnsettled> = Default::default();
    let _: Pathway<ReadyToResume> = Default::default();
    let _: Pathway<Completed> = Default::default();
    let _: Pathway<Denied> = Default::default();
    let _: Pathway<Aborted> = Default::default();
    let _: Approval = Default::default();
    let _: Reconciliation<Applied> = Default::default();
    let _: Reconciliation<NotApplied> = Default::default();
    let _: Reconciliation<Unresolved> = Default::default();
}

fn main() {}
