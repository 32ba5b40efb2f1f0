// Invariant: `admit` consumes the proposed pathway; it cannot be admitted twice.
use rpr::stage::Proposed;
use rpr::{Actor, Admit, Pathway, Runtime};

fn misuse(proposed: Pathway<Proposed>, rt: &Runtime, actor: &Actor, policy: &dyn Admit) {
    let _first = proposed.admit(rt, actor, policy);
    let _second = proposed.admit(rt, actor, policy);
}

fn main() {}
