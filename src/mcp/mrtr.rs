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

/// Answers a server's input requests for a call in place of the session's handler
/// ([`SessionConfig::on_request`](super::SessionConfig::on_request)): given the round (1
/// for the first `input_required`) and that result's `inputRequests` (each already checked
/// to ask only what a server may ask), it returns the `inputResponses`, one per key, or why
/// it cannot (the call's effect is then unknown: [`McpError::InputRequired`]). A proxy
/// whose own client answers by retrying its request (a 2026-07-28 client) sets one.
#[derive(Clone)]
pub struct InputAnswerer(std::sync::Arc<AnswerFn>);

/// What an [`InputAnswerer`] calls: (round, `inputRequests`) to `inputResponses`.
type AnswerFn =
    dyn Fn(usize, &Map<String, Value>) -> Result<Map<String, Value>, String> + Send + Sync;

impl InputAnswerer {
    /// An answerer that calls `answer(round, input_requests)`.
    pub fn new(
        answer: impl Fn(usize, &Map<String, Value>) -> Result<Map<String, Value>, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self(std::sync::Arc::new(answer))
    }

    fn answer(
        &self,
        round: usize,
        requests: &Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        (self.0)(round, requests)
    }
}

impl std::fmt::Debug for InputAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InputAnswerer")
    }
}

/// The `_meta` member of a call's last result that lists the rounds before it (rpr's own:
/// each round's input requests by key, with the method asked and, for an elicitation, the
/// action answered), so that the record of the call shows every round.
pub const ROUNDS_META: &str = "dev.rpr/rounds";

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
    answerer: Option<&InputAnswerer>,
) -> Result<Reply, McpError> {
    let mut rounds: Vec<Value> = Vec::new();
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
            ResultType::Complete => return Ok(Reply::Result(with_rounds(result, rounds))),
            ResultType::InputRequired => {
                let (responses, state) = answer(session, method, &result, timeout, round, answerer)
                    .map_err(|e| after_rounds(e, &rounds))?;
                rounds.push(round_record(round, &result, responses.as_ref()));
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

/// What the record keeps of one round: the input requests by key, each with its method
/// and, where the answer has one, its `action` (the answers' content is not kept here).
fn round_record(round: usize, result: &Value, responses: Option<&Map<String, Value>>) -> Value {
    let asked: Map<String, Value> = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|requests| {
            requests
                .iter()
                .map(|(key, request)| {
                    let mut entry = Map::new();
                    entry.insert(
                        "method".into(),
                        request.get("method").cloned().unwrap_or(Value::Null),
                    );
                    if let Some(action) = responses
                        .and_then(|r| r.get(key))
                        .and_then(|r| r.get("action"))
                    {
                        entry.insert("action".into(), action.clone());
                    }
                    (key.clone(), Value::Object(entry))
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({"round": round, "inputRequests": asked})
}

/// A round that could not be finished, its reason naming the rounds answered before it
/// (as [`ROUNDS_META`] lists them), so that the record of the call shows every round.
fn after_rounds(error: McpError, rounds: &[Value]) -> McpError {
    match error {
        McpError::InputRequired { method, reason } if !rounds.is_empty() => {
            McpError::InputRequired {
                method,
                reason: format!(
                    "{reason}; the rounds answered before it: {}",
                    Value::from(rounds.to_vec())
                ),
            }
        }
        other => other,
    }
}

/// A complete result with the rounds before it in `_meta` ([`ROUNDS_META`]), when there
/// were any.
fn with_rounds(mut result: Value, rounds: Vec<Value>) -> Value {
    if rounds.is_empty() {
        return result;
    }
    if let Some(object) = result.as_object_mut() {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(ROUNDS_META.into(), Value::Array(rounds));
        }
    }
    result
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
    answerer: Option<&InputAnswerer>,
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
    for (key, asked) in &requests {
        let method = asked.get("method").and_then(Value::as_str).unwrap_or("");
        if !ASKABLE.contains(&method) {
            return Err(invalid(&format!(
                "input request {key:?} asks for {method:?}, which a server may not ask"
            )));
        }
    }
    if let Some(answerer) = answerer.filter(|_| !requests.is_empty()) {
        let responses = answerer.answer(round, &requests).map_err(|why| {
            unknown(
                call,
                format!("the server's input requests of round {round} were not answered: {why}"),
            )
        })?;
        return Ok((Some(responses), state));
    }
    let mut responses = Map::new();
    for (key, asked) in requests {
        let method = asked.get("method").and_then(Value::as_str).unwrap_or("");
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
