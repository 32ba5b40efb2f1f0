// Invariant: `complete` consumes the reconciliation token; one verdict cannot settle two pathways.
use rpr::stage::Unknown;
use rpr::token::{Applied, Reconciliation};
use rpr::{Pathway, Runtime};

fn misuse(first: Pathway<Unknown>, second: Pathway<Unknown>, rt: &Runtime, applied: Reconciliation<Applied>) {
    let _one = first.complete(rt, applied);
    let _two = second.complete(rt, applied);
}

fn main() {}
