// Invariant: an unknown pathway completes only with a reconciliation whose verdict is *applied*.
use rpr::stage::Unknown;
use rpr::token::{NotApplied, Reconciliation};
use rpr::{Pathway, Runtime};

fn misuse(unknown: Pathway<Unknown>, rt: &Runtime, not_applied: Reconciliation<NotApplied>) {
    let _completed = unknown.complete(rt, not_applied);
}

fn main() {}
