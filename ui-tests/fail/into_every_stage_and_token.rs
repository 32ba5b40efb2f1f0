// Invariant: there is no `From`/`Into` into any stage or token: a stage changes only through a
// transition, a token comes only from the runtime. (Each target is tried from a proposed pathway,
// from a string and from another token.)
use rpr::stage::*;
use rpr::token::{Applied, Approval, NotApplied, Reconciliation, Unresolved};
use rpr::Pathway;

fn misuse(s: String, a: Reconciliation<Applied>, u: Reconciliation<Unresolved>) {
    let _: Pathway<AwaitingApproval> = todo_p().into();
    let _: Pathway<HumanGate> = todo_p().into();
    let _: Pathway<Held> = todo_p().into();
    let _: Pathway<Approved> = todo_p().into();
    let _: Pathway<Bound> = todo_p().into();
    let _: Pathway<Returned> = todo_p().into();
    let _: Pathway<Unknown> = todo_p().into();
    let _: Pathway<Stopped> = todo_p().into();
    let _: Pathway<PartiallyCompleted> = todo_p().into();
    let _: Pathway<RepairRequired> = todo_p().into();
    let _: Pathway<RepairUnsettled> = todo_p().into();
    let _: Pathway<ReadyToResume> = todo_p().into();
    let _: Pathway<Completed> = todo_p().into();
    let _: Pathway<Denied> = todo_p().into();
    let _: Pathway<Aborted> = todo_p().into();
    let _: Pathway<Proposed> = s.clone().into();
    let _: Approval = s.clone().into();
    let _: Reconciliation<NotApplied> = a.into();
    let _: Reconciliation<Applied> = u.into();
    let _: Reconciliation<Unresolved> = s.into();
}

fn todo_p() -> Pathway<Proposed> {
    panic!()
}

fn main() {}
