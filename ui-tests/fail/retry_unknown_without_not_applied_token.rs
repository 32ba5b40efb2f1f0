// Invariant: the way from unknown towards a new attempt needs a reconciliation whose verdict is *not applied*.
use rpr::stage::Unknown;
use rpr::token::{Applied, Reconciliation};
use rpr::{Pathway, Runtime};

fn misuse(unknown: Pathway<Unknown>, rt: &Runtime, applied: Reconciliation<Applied>) {
    let _repair = unknown.require_repair(rt, applied);
}

fn main() {}
