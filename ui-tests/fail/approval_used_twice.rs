// Invariant: `approve` consumes the quorum; one quorum of approvals cannot approve twice.
use rpr::stage::HumanGate;
use rpr::token::Quorum;
use rpr::{Pathway, Runtime};

fn misuse(first: Pathway<HumanGate>, second: Pathway<HumanGate>, rt: &Runtime, quorum: Quorum) {
    let _one = first.approve(rt, quorum);
    let _two = second.approve(rt, quorum);
}

fn main() {}
