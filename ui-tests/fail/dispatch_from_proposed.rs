// Invariant: a proposed (not yet admitted) pathway has no `dispatch`.
use rpr::executor::Executor;
use rpr::stage::Proposed;
use rpr::{Actor, Pathway, Runtime};

fn misuse(proposed: Pathway<Proposed>, rt: &Runtime, actor: &Actor, executor: &mut dyn Executor) {
    let _outcome = proposed.dispatch(rt, actor, executor);
}

fn main() {}
