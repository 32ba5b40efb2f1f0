// Invariant: a verdict marker cannot be built outside rpr: its tuple constructor is private.
use rpr::token::Applied;

fn misuse() -> Applied {
    Applied(())
}

fn main() {}
