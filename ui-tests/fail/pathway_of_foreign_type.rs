// Invariant: `Pathway<S>` exists only for rpr's own stages.
use rpr::Pathway;

fn misuse(_pathway: Pathway<String>) {}

fn main() {}
