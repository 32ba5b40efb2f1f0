// Invariant: `approve` exists only where an approval is awaited; a proposed pathway cannot skip admission with a quorum.
use rpr::stage::Proposed;
use rpr::token::Quorum;
use rpr::{Pathway, Runtime};

fn misuse(proposed: Pathway<Proposed>, rt: &Runtime, quorum: Quorum) {
    let _approved = proposed.approve(rt, quorum);
}

fn main() {}
