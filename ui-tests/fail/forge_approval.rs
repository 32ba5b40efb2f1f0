// Invariant: a Human Gate approval cannot be built outside rpr: its fields are private.
use rpr::token::Approval;
use rpr::Actor;

fn misuse(pathway: String, request_digest: String, approver: Actor) -> Approval {
    Approval { id: "ap_forged".into(), pathway, request_digest, approver }
}

fn main() {}
