// Invariant: `dispatch` consumes the bound pathway; it cannot be dispatched again.
use rpr::executor::Executor;
use rpr::stage::Bound;
use rpr::{Actor, Pathway, Runtime};

fn misuse(bound: Pathway<Bound>, rt: &Runtime, actor: &Actor, executor: &mut dyn Executor) {
    let _first = bound.dispatch(rt, actor, executor);
    let _second = bound.dispatch(rt, actor, executor);
}

fn main() {}
