// Invariant: `Verdict` is sealed; no crate but rpr can invent a reconciliation verdict.
use rpr::token::Verdict;

struct Probably;

impl Verdict for Probably {
    const NAME: &'static str = "applied";
}

fn main() {}
