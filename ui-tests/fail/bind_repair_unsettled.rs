// Invariant: a repair whose last attempt may have taken effect cannot be bound for a new attempt.
use rpr::executor::Executor;
use rpr::stage::RepairUnsettled;
use rpr::Pathway;

fn misuse(unsettled: Pathway<RepairUnsettled>, executor: &mut dyn Executor) {
    let _bound = unsettled.bind(executor);
}

fn main() {}
