// Invariant: a reconciliation token is not `Clone`, so one verdict cannot be used twice.
use rpr::token::{NotApplied, Reconciliation};

fn misuse(token: Reconciliation<NotApplied>) -> (Reconciliation<NotApplied>, Reconciliation<NotApplied>) {
    let copy = Clone::clone(&token);
    (token, copy)
}

fn main() {}
