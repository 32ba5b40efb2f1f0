// Invariant: there is no `From`/`Into` between stages; a stage changes only through a transition.
use rpr::stage::{Approved, Proposed};
use rpr::Pathway;

fn misuse(proposed: Pathway<Proposed>) -> Pathway<Approved> {
    proposed.into()
}

fn main() {}
