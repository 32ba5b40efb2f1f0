//! The client's `notifications/cancelled`: the request it names is cancelled toward the
//! server (a `notifications/cancelled` under the id the gate used there), governed or
//! passed through, and the client gets no answer to it. A governed call goes on waiting
//! for the server's answer: one that arrives is its outcome, recorded; without one a call
//! that may change something stays unknown, and a read ends failed.
//!
//! A 2026-07-28 retry that continued a round of a governed call's `input_required`
//! (gate/rounds.rs) has no request of its own at the server: the round it carries goes under
//! the tag of the request that started the call, and the cancellation goes there.
//!
//! A request not sent yet is never sent: the request is marked cancelled here *before* the
//! session is asked to cancel it, and the session asks the request's guard
//! ([`Gate::cancelled_guard`], and `Upstream::pass`'s) under the same lock under which it
//! queues the request and makes it findable. So either the session finds the request (it
//! was queued first, and the cancellation is written after it) or the guard sees the mark
//! (and not one byte of the request is written).

use crate::jsonrpc::Id;
use serde_json::Value;

use super::Gate;

impl Gate {
    /// Handles the client's `notifications/cancelled` (its `params`).
    pub(crate) fn client_cancelled(&self, params: Option<&Value>) {
        let Some(id) = params
            .and_then(|p| p.get("requestId"))
            .and_then(Id::from_value)
        else {
            note!(
                Debug,
                "rpr gate: the client sent a cancellation without a usable requestId; ignored"
            );
            return;
        };
        let reason = match params.and_then(|p| p.get("reason")).and_then(Value::as_str) {
            Some(theirs) => format!("cancelled by the client: {theirs}"),
            None => "cancelled by the client".to_owned(),
        };
        // The tag a request the gate sent on waits under: the client's id as JSON text.
        let tag = id.to_value().to_string();
        if !self.down.cancel(&tag) {
            note!(
                Debug,
                "rpr gate: the client cancelled request {id}, which is not being served; ignored"
            );
            return;
        }
        if self.upstream.cancel(&tag, &reason) {
            note!(
                Info,
                "rpr gate: request {id} {reason}; the server was told, and the client gets no answer"
            );
        } else if let Some(call) = self.rounds.carrying(&tag)
            && self.upstream.cancel(&call, &reason)
        {
            // A retry that continued a round of the server's `input_required`: the round in
            // flight goes to the server under the tag of the request that started the call.
            note!(
                Info,
                "rpr gate: request {id} {reason}; it continued a round of a governed call, whose request in flight the server was told to cancel; the client gets no answer"
            );
        } else {
            note!(
                Info,
                "rpr gate: request {id} {reason}; it is not waiting on the server now (a call not yet sent is not sent), and the client gets no answer"
            );
        }
    }
}
