// Invariant: re-hydration never yields a bound pathway: `StoredPathway` has no `Bound` variant.
use rpr::StoredPathway;

fn misuse(stored: StoredPathway) {
    if let StoredPathway::Bound(_bound) = stored {}
}

fn main() {}
