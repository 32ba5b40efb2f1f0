// Invariant: `approve` exists only where an approval is awaited; a proposed pathway cannot skip admission with one.
use rpr::stage::Proposed;
use rpr::token::Approval;
use rpr::{Pathway, Runtime};

fn misuse(proposed: Pathway<Proposed>, rt: &Runtime, approval: Approval) {
    let _approved = proposed.approve(rt, approval);
}

fn main() {}
