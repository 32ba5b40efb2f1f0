// Invariant: a `BoundRead` (a read's one-commit dispatch) is made only by `into_read`, which
// checks that the definition and the binding are both read-only; it cannot be built.
use rpr::stage::Bound;
use rpr::{BoundRead, Pathway};

fn misuse(bound: Pathway<Bound>) -> BoundRead {
    BoundRead { pathway: bound }
}

fn main() {}
