// Invariant: `approve` consumes the Human Gate approval; one approval cannot approve twice.
use rpr::stage::HumanGate;
use rpr::token::Approval;
use rpr::{Pathway, Runtime};

fn misuse(first: Pathway<HumanGate>, second: Pathway<HumanGate>, rt: &Runtime, approval: Approval) {
    let _one = first.approve(rt, approval);
    let _two = second.approve(rt, approval);
}

fn main() {}
