// Invariant: an unknown pathway cannot be bound again (no retry by re-binding); only reconciliation leaves it.
use rpr::executor::Executor;
use rpr::stage::Unknown;
use rpr::Pathway;

fn misuse(unknown: Pathway<Unknown>, executor: &mut dyn Executor) {
    let _bound = unknown.bind(executor);
}

fn main() {}
