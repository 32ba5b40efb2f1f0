// Invariant: a bound pathway is not `Clone`, so it cannot be copied and dispatched twice.
use rpr::stage::Bound;
use rpr::Pathway;

fn misuse(bound: Pathway<Bound>) -> (Pathway<Bound>, Pathway<Bound>) {
    let copy = Clone::clone(&bound);
    (bound, copy)
}

fn main() {}
