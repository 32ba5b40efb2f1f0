//! Multi Round-Trip Requests (2026-07-28): a `tools/call` answered with
//! `resultType: "input_required"` is answered by the client and sent again.
//!
//! Every round belongs to the one call: the caller sees one reply, the last round's.
//! After the first round the server may already have acted (the spec does not say it
//! acted on nothing before it asked), so from then on no failure is reported as "not
//! sent": a retry that could not be written, a JSON-RPC error to a retry, or a round that
//! cannot be finished is [`McpError::InputRequired`], an unknown effect.

use std::time::Duration;

use serde_json::{Map, Value};

use super::McpError;
use super::era::{self, ResultType};
use super::session::{Reply, SendGuard, Session};
use crate::jsonrpc::{Id, Request};

/// Most rounds of one call (the TypeScript SDK's limit too).
pub(super) const MAX_ROUNDS: usize = 10;

/// What a server may ask the client for inside an `input_required` result.
const ASKABLE: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

/// The requests a server may answer with `input_required`.
pub(crate) const ASKING: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

fn unknown(method: &str, reason: String) -> McpError {
    McpError::InputRequired {
        method: method.into(),
        reason,
    }
}

/// Sends `params` as a `method` request (one of [`ASKING`]) and answers the server's input requests, round after
/// round, until a complete result, an error, or a round that cannot be finished. `guard`
/// is asked before every round ([`SendGuard`]); a later round it withdraws is unknown, as
/// any later round not sent.
pub(super) fn call(
    session: &Session,
    method: &str,
    mut params: Value,
    timeout: Duration,
    tag: Option<&str>,
    guard: Option<&SendGuard>,
) -> Result<Reply, McpError> {
    for round in 1..=MAX_ROUNDS {
        let reply = session
            .request_guarded(method, Some(params.clone()), timeout, tag, guard)
            .map_err(|e| match e {
                e if round > 1 && e.nothing_written() => unknown(method, format!(
                    "the retry of round {round}, after the server asked for input, was not sent ({e})"
                )),
                e => e,
            })?;
        let result = match reply {
            Reply::Result(result) => result,
            Reply::Error(error) if round == 1 => return Ok(Reply::Error(error)),
            Reply::Error(error) => {
                return Err(unknown(
                    method,
                    format!(
                        "the server answered the retry of round {round} with an error ({error})"
                    ),
                ));
            }
        };
        match era::result_type(&result) {
            ResultType::Complete => return Ok(Reply::Result(result)),
            ResultType::InputRequired => {
                let (responses, state) = answer(session, method, &result, timeout, round)?;
                set(&mut params, "inputResponses", responses.map(Value::Object));
                set(&mut params, "requestState", state);
            }
            ResultType::Other(kind) => {
                return Err(McpError::InvalidReply {
                    method: method.into(),
                    reason: format!(
                        "`resultType` is {kind:?}, which this client did not ask for; the server \
                         may have acted, treat its effect as unknown"
                    ),
                });
            }
        }
    }
    Err(unknown(
        method,
        format!("the server still asked for input after {MAX_ROUNDS} rounds"),
    ))
}

fn set(params: &mut Value, key: &str, value: Option<Value>) {
    if let Some(params) = params.as_object_mut() {
        match value {
            Some(value) => params.insert(key.into(), value),
            None => params.remove(key),
        };
    }
}

/// What the retry carries: the `inputResponses`, and the `requestState` verbatim.
type Retry = (Option<Map<String, Value>>, Option<Value>);

/// Answers the input requests of one `input_required` result.
fn answer(
    session: &Session,
    call: &str,
    result: &Value,
    timeout: Duration,
    round: usize,
) -> Result<Retry, McpError> {
    let invalid = |reason: &str| McpError::InvalidReply {
        method: call.into(),
        reason: format!(
            "{reason} (an `input_required` result); the server may have acted, treat its effect \
             as unknown"
        ),
    };
    let requests = match result.get("inputRequests") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(requests)) => requests.clone(),
        Some(_) => return Err(invalid("`inputRequests` is not an object")),
    };
    let state = match result.get("requestState") {
        None | Some(Value::Null) => None,
        Some(state @ Value::String(_)) => Some(state.clone()),
        Some(_) => return Err(invalid("`requestState` is not a string")),
    };
    if requests.is_empty() && state.is_none() {
        return Err(invalid("it has neither `inputRequests` nor `requestState`"));
    }
    let mut responses = Map::new();
    for (key, asked) in requests {
        let method = asked.get("method").and_then(Value::as_str).unwrap_or("");
        if !ASKABLE.contains(&method) {
            return Err(invalid(&format!(
                "input request {key:?} asks for {method:?}, which a server may not ask"
            )));
        }
        let request = Request {
            id: Id::String(format!("input-{round}-{key}")),
            method: method.to_owned(),
            params: asked.get("params").filter(|p| p.is_object()).cloned(),
        };
        let answer = session.ask_client(request, timeout).map_err(|why| {
            unknown(
                call,
                format!(
                    "the server asked for input (`{method}`) that this client cannot give: {why}"
                ),
            )
        })?;
        let answer = answer.map_err(|error| {
            unknown(
                call,
                format!("the client answered the server's `{method}` with an error ({error})"),
            )
        })?;
        responses.insert(key, answer);
    }
    Ok(((!responses.is_empty()).then_some(responses), state))
}
