// Invariant: a mutating call that returned success has no `complete`; only readback (`confirm`) completes it.
use rpr::stage::Returned;
use rpr::token::{Applied, Reconciliation};
use rpr::{Pathway, Runtime};

fn misuse(returned: Pathway<Returned>, rt: &Runtime, applied: Reconciliation<Applied>) {
    let _completed = returned.complete(rt, applied);
}

fn main() {}
