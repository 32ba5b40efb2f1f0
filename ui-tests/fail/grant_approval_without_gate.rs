// Invariant: an approval can be granted only for a pathway that is waiting for one (AwaitingApproval or HumanGate).
use rpr::stage::Approved;
use rpr::{Actor, Pathway, Runtime};

fn misuse(approved: &Pathway<Approved>, rt: &Runtime, approver: &Actor) {
    let _approval = rt.grant_approval(approved, approver);
}

fn main() {}
