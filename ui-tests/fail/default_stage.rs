// Invariant: no pathway has a `Default`, so none can be conjured without the runtime.
use rpr::stage::Approved;
use rpr::Pathway;

fn misuse() -> Pathway<Approved> {
    Default::default()
}

fn main() {}
