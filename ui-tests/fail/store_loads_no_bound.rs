// Invariant: re-hydration never yields a bound pathway. Every `StoredPathway` variant carries a
// `Loadable` stage (an exhaustive match in src/pathway/outcome.rs proves it for every variant,
// present and future), and `Bound` is not `Loadable`.
use rpr::stage::{Bound, Loadable};

fn loadable<S: Loadable>() {}

fn misuse() {
    loadable::<Bound>();
}

fn main() {}
