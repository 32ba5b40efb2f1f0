// Invariant: a `Pathway` cannot be built outside rpr: its fields (and the type of its core) are private.
use rpr::stage::Approved;
use rpr::Pathway;

// A diverging `panic!` stands in for the core, whose type cannot even be named outside rpr.
#[allow(unreachable_code)]
fn misuse(stage: Approved) -> Pathway<Approved> {
    Pathway { stage, core: panic!("no core can be made outside rpr") }
}

fn main() {}
