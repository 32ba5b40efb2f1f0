// Invariant: an admitted but unbound pathway has no `dispatch`; it must be bound to a target first.
use rpr::executor::Executor;
use rpr::stage::Approved;
use rpr::{Actor, Pathway, Runtime};

fn misuse(approved: Pathway<Approved>, rt: &Runtime, actor: &Actor, executor: &mut dyn Executor) {
    let _outcome = approved.dispatch(rt, actor, executor);
}

fn main() {}
