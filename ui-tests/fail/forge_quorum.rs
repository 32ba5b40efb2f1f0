// Invariant: a `Quorum` (what `approve` takes) cannot be built by a struct literal: only the
// runtime makes one, from approvals the store holds.
use rpr::stage::HumanGate;
use rpr::token::Quorum;
use rpr::{Pathway, Runtime};

fn forged(gated: Pathway<HumanGate>, rt: &Runtime) {
    let quorum = Quorum {
        approvals: Vec::new(),
        break_glass: true,
    };
    let _approved = gated.approve(rt, quorum);
}

fn main() {}
