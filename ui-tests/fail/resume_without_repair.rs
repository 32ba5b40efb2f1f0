// Invariant: a pathway that requires repair cannot be bound (and so not dispatched) until it is repaired.
use rpr::executor::Executor;
use rpr::stage::RepairRequired;
use rpr::Pathway;

fn misuse(repair_required: Pathway<RepairRequired>, executor: &mut dyn Executor) {
    let _bound = repair_required.bind(executor);
}

fn main() {}
