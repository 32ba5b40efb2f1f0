// Invariant: a pathway whose outcome is unknown has no `dispatch`; it must be reconciled first.
use rpr::executor::Executor;
use rpr::stage::Unknown;
use rpr::{Actor, Pathway, Runtime};

fn misuse(unknown: Pathway<Unknown>, rt: &Runtime, actor: &Actor, executor: &mut dyn Executor) {
    let _outcome = unknown.dispatch(rt, actor, executor);
}

fn main() {}
