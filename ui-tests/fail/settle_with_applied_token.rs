// Invariant: only a not-applied verdict settles a repair whose last attempt may have taken effect.
use rpr::stage::RepairUnsettled;
use rpr::token::{Applied, Reconciliation};
use rpr::{Pathway, Runtime};

fn misuse(rt: &Runtime, unsettled: Pathway<RepairUnsettled>, token: Reconciliation<Applied>) {
    let _settled = unsettled.settle(rt, token);
}

fn main() {}
