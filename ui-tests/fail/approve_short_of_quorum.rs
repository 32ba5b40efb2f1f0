// Invariant: one approver's approval does not approve a pathway: `approve` takes a Quorum,
// made only by the runtime once enough distinct approvers have approved (Approval::quorum,
// Runtime::quorum, Runtime::break_glass). A pathway short of its quorum stays at the gate,
// where nothing binds or dispatches it.
use rpr::stage::HumanGate;
use rpr::token::Approval;
use rpr::{Actor, Pathway, Runtime};

fn misuse(gated: Pathway<HumanGate>, rt: &Runtime, alice: &Actor) {
    let approval: Approval = rt.grant_approval(&gated, alice).unwrap();
    let _approved = gated.approve(rt, approval);
}

fn main() {}
