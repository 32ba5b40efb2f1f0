//! What a call is, for every part of the gate that answers one: what the client asked
//! ([`Asked`]), the tool checked against its pins ([`Checked`]), and the answer.

use std::sync::Arc;

use serde_json::{Value, json};

use super::era::Era;
use crate::State;
use crate::executor::Binding;
use crate::jsonrpc::ErrorObject;
use crate::policy::Live;

/// What the client gets back: a `tools/call` result, or a JSON-RPC error.
pub(crate) type Answer = Result<Value, ErrorObject>;

/// A tool error result: the text for the model and person, and the pathway in `_meta`.
#[expect(
    clippy::unnecessary_wraps,
    reason = "a tool error is one kind of answer to a call; every path returns an `Answer`"
)]
pub(crate) fn tool_error(text: impl Into<String>, pathway: Option<(&str, State)>) -> Answer {
    let mut result = json!({
        "content": [{"type": "text", "text": text.into()}],
        "isError": true,
    });
    if let Some((id, state)) = pathway {
        result["_meta"] = json!({"dev.rpr/pathway": {"id": id, "state": state.as_str()}});
    }
    Ok(result)
}

/// The call the client asked for.
pub(crate) struct Asked {
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    pub(crate) key: Option<String>,
    pub(crate) progress: Option<Value>,
    /// The client's request id, as text: the tag a cancellation finds the call by.
    pub(crate) tag: String,
    /// The protocol era of the request (2026-07-28 answers a Human Gate with
    /// `input_required`).
    pub(crate) era: Era,
    /// A 2026-07-28 retry's `requestState` and `inputResponses`, as sent.
    pub(crate) retry: Option<(String, Value)>,
    /// What a checked `requestState` names, and the answer to its form.
    pub(crate) answered: Option<Answered>,
    /// Where the call's answer goes (gate/rounds.rs): a 2026-07-28 client's call carries a
    /// server's `input_required` rounds through it.
    pub(crate) outlet: Option<std::sync::Arc<super::rounds::Outlet>>,
}

/// A 2026-07-28 retry's answer to the gate's approval form, with what its checked
/// `requestState` names.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The `requestState` as the retry sent it: its answer is used once.
    pub(crate) state: String,
    pub(crate) pathway: String,
    /// The pathway's version when the form was issued: the answer holds only for a
    /// pathway still at that version (`gate/request_state.rs`).
    pub(crate) version: i64,
    /// The digest of the binding the form showed: an approval given in it is of that one.
    pub(crate) binding_digest: String,
    /// `None` when the retry carries no answer under the gate's key.
    pub(crate) answer: Option<Value>,
}

/// The key of the gate's approval form in `inputRequests` and `inputResponses`.
pub(crate) const APPROVAL_INPUT: &str = "rpr_approval";

/// The tool being called, checked before anything is recorded: the [`Live`] tool with its
/// plan, and what its pin and its readback tool's pin say.
pub(crate) struct Checked {
    pub(crate) live: Live,
    pub(crate) pinned: String,
    /// The binding the call must be bound to (its digest): the pinned binding with the
    /// policy's class. Its details name what changed when the bound one differs.
    pub(crate) expected: Arc<Binding>,
    /// What the call's executor binds and checks, made once per tool, class and list.
    pub(crate) listed: Arc<crate::mcp::executor::Listed>,
    /// The binding of a mutating call's readback tool, which matched its pin: a readback
    /// through a tool that no longer does proves nothing.
    pub(crate) reader: Option<Binding>,
}
