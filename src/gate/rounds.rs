//! A 2026-07-28 server's own `input_required` to a governed `tools/call` of a 2026-07-28
//! client, carried across that client's retries within one attempt.
//!
//! A call that may change something has its attempt recorded before the first round is
//! sent; a read's attempt is recorded with its outcome, after the last round
//! ([`crate::BoundRead::dispatch`]), so a crash in the middle of a read's rounds leaves no
//! record of it (and no effect: a read changes nothing). Every later round goes to
//! the same server under the same binding, from the thread that carries the attempt (the
//! thread of the client's first request). When the server asks for input, that thread
//! answers the client's *current* request (the first, or the retry that continued the last
//! round) with `input_required`: the server's `inputRequests` as the server gave them, and a
//! `requestState` of the gate's own ([`StateKey::issue_round`]: HMAC-tagged, naming a
//! random round nonce, the request's digest and an expiry), then waits for the client's
//! retry. The retry (a new request, its own thread) checks the state, takes the round from
//! the table of open rounds (so a round is continued once: a replay finds nothing), hands
//! its `inputResponses` over, and waits for what the carrying thread answers next (another
//! `input_required`, or the call's outcome), which it returns as its own answer.
//!
//! A round the client does not continue within `--call-timeout` is abandoned: the round is
//! taken off the table (a late retry is refused) and the call ends as any call whose server
//! was asked and may have acted: write status unknown (a read: failed), with the reason in
//! the attempt's record. Nobody waits for that answer: the client's last request was
//! answered with the round.

use std::collections::HashMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::asked::Answer;
use super::downstream::Downstream;
use super::era::Era;
use super::lock;
use super::request_state::StateKey;
use crate::jsonrpc::{ErrorObject, Id, codes};
use crate::mcp::InputAnswerer;

/// A retry's input, handed to the thread that carries the call.
pub(crate) struct Continue {
    responses: Map<String, Value>,
    /// Where that thread sends what it answers next.
    reply: mpsc::Sender<Answer>,
}

/// One round waiting for the client's retry.
struct Open {
    to: mpsc::Sender<Continue>,
    /// The keys of the round's input requests: a retry must answer each.
    keys: Vec<String>,
    /// The tag of the client request that started the call: every round goes to the server
    /// under it.
    call_tag: String,
}

/// The rounds waiting for the client's retries, by nonce, and the retries that continued
/// one and wait for what comes next.
#[derive(Default)]
pub(crate) struct Rounds {
    open: Mutex<HashMap<String, Open>>,
    /// A retry's tag → the tag its call's rounds go to the server under, while the retry
    /// waits: a cancellation of the retry is a cancellation of the round in flight.
    continuing: Mutex<HashMap<String, String>>,
}

/// Where the answer to a client's `tools/call` goes: to that request, or, once the call's
/// rounds were carried to the client, to the retry that continued the last round.
pub(crate) struct Outlet {
    target: Mutex<Target>,
    down: Arc<Downstream>,
    id: Id,
    tag: String,
    era: Era,
    info: Value,
}

enum Target {
    /// The client's own request (not answered yet).
    Client,
    /// The retry that continued the last round (its thread waits).
    Retry(mpsc::Sender<Answer>),
    /// The last request was answered with a round; no request waits.
    Spent,
}

impl Outlet {
    pub(crate) fn new(down: Arc<Downstream>, id: Id, tag: &str, era: Era, info: Value) -> Self {
        Self {
            target: Mutex::new(Target::Client),
            down,
            id,
            tag: tag.to_owned(),
            era,
            info,
        }
    }

    /// Sends `answer` to the request that waits for it; whether one did (a request the
    /// client cancelled does not count: its answer is not sent).
    pub(crate) fn deliver(&self, answer: Answer) -> bool {
        let target = std::mem::replace(&mut *lock(&self.target), Target::Spent);
        match target {
            Target::Client => {
                let cancelled = self.down.is_cancelled(&self.tag);
                let shaped = self.era.shape("tools/call", answer, &self.info);
                self.down.respond(self.id.clone(), shaped);
                !cancelled
            }
            Target::Retry(to) => to.send(answer).is_ok(),
            Target::Spent => {
                note!(
                    Warn,
                    "rpr gate: the outcome of the call of request {} has no request to answer (its last round was not continued); it is recorded on its pathway",
                    self.id
                );
                false
            }
        }
    }

    fn continued_by(&self, reply: mpsc::Sender<Answer>) {
        *lock(&self.target) = Target::Retry(reply);
    }
}

/// The capability a client must have declared for a server to ask it `method`.
fn capability_of(method: &str) -> &'static str {
    match method {
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        _ => "elicitation",
    }
}

/// What a 2026-07-28 client's governed call needs to carry its server's rounds.
pub(crate) struct Carrier {
    pub(crate) rounds: Arc<Rounds>,
    pub(crate) key: Arc<StateKey>,
    pub(crate) outlet: Arc<Outlet>,
    /// The digest of the request (tool and arguments) the rounds' states are bound to.
    pub(crate) digest: String,
    /// What the client declared on its request that a server may ask of it.
    pub(crate) declared: Value,
    /// How long a round waits for the client's retry.
    pub(crate) wait: Duration,
}

impl Carrier {
    /// The answerer the call's executor asks for each round.
    pub(crate) fn answerer(self) -> InputAnswerer {
        InputAnswerer::new(move |round, requests| self.round(round, requests))
    }

    fn round(
        &self,
        round: usize,
        requests: &Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        for (key, request) in requests {
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let needed = capability_of(method);
            let declared = self.declared.get(needed).filter(|c| c.is_object());
            let url = request["params"]["mode"] == "url";
            let declared = match declared {
                Some(e) if url => e.get("url").is_some(),
                Some(_) => true,
                None => false,
            };
            if !declared {
                return Err(format!(
                    "input request {key:?} asks `{method}`{}, which the client did not declare on its request; it was not passed on",
                    if url { " in URL mode" } else { "" }
                ));
            }
        }
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| format!("no random round nonce: {e}"))?;
        let nonce = nonce.iter().fold(String::new(), |mut text, b| {
            use std::fmt::Write;
            let _ = write!(text, "{b:02x}");
            text
        });
        let (to, from) = mpsc::channel();
        lock(&self.rounds.open).insert(
            nonce.clone(),
            Open {
                to,
                keys: requests.keys().cloned().collect(),
                call_tag: self.outlet.tag.clone(),
            },
        );
        let state = self.key.issue_round(&nonce, &self.digest, self.wait);
        let asked = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": state,
        });
        note!(
            Info,
            "rpr gate: the server asks for input (round {round}); passed to the client"
        );
        if !self.outlet.deliver(Ok(asked)) {
            lock(&self.rounds.open).remove(&nonce);
            return Err(format!(
                "round {round} could not reach the client (its request was cancelled, or the request that continued the last round is gone)"
            ));
        }
        let next = match from.recv_timeout(self.wait) {
            Ok(next) => next,
            Err(RecvTimeoutError::Timeout) => {
                if lock(&self.rounds.open).remove(&nonce).is_some() {
                    return Err(format!(
                        "round {round} was passed to the client, which did not retry with its requestState within {:?}; the round was abandoned",
                        self.wait
                    ));
                }
                // A retry took the round just now: its input is on its way.
                from.recv()
                    .map_err(|_| format!("round {round} was taken by a retry that gave no input"))?
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(format!("round {round} was dropped unanswered"));
            }
        };
        self.outlet.continued_by(next.reply);
        Ok(next.responses)
    }
}

impl Rounds {
    /// A 2026-07-28 retry (request tag `retry_tag`) whose `requestState` names a round
    /// (`round`, checked under the gate's key): its `inputResponses` go to the call that
    /// waits in that round, once, and the retry is answered with what that call answers
    /// next. While it waits, [`Rounds::carrying`] names the call's tag for it.
    ///
    /// A retry the client cancelled before its input was handed over (`cancelled`, asked
    /// after the retry is findable, so that a cancellation is seen here or finds the call's
    /// tag) hands nothing over: the round is dropped, and its call ends as a call whose
    /// rounds were abandoned (the server was asked before: unknown, or failed for a read).
    pub(crate) fn continue_round(
        &self,
        round: &str,
        responses: &Value,
        retry_tag: &str,
        cancelled: &dyn Fn() -> bool,
    ) -> Answer {
        let invalid = |m: String| Err(ErrorObject::new(codes::INVALID_PARAMS, m));
        let Some(responses) = responses.as_object() else {
            return invalid(
                "`inputResponses` must be an object answering the round's input requests; nothing was sent"
                    .to_owned(),
            );
        };
        let open = {
            let mut open = lock(&self.open);
            let Some(waiting) = open.get(round) else {
                return invalid(
                    "the round this requestState names is no longer open: it was continued already, or it was abandoned (its call's outcome is recorded on its pathway); nothing was sent"
                        .to_owned(),
                );
            };
            let missing: Vec<&String> = waiting
                .keys
                .iter()
                .filter(|k| !responses.contains_key(*k))
                .collect();
            if !missing.is_empty() {
                return invalid(format!(
                    "`inputResponses` does not answer {missing:?}; nothing was sent, and the round is still open"
                ));
            }
            open.remove(round)
        };
        let Some(open) = open else {
            return invalid("the round is no longer open; nothing was sent".to_owned());
        };
        let (reply, answer) = mpsc::channel();
        // Findable before the input is handed over: a cancellation that comes once the next
        // round may be on its way to the server reaches it.
        lock(&self.continuing).insert(retry_tag.to_owned(), open.call_tag.clone());
        if cancelled() {
            lock(&self.continuing).remove(retry_tag);
            drop(open);
            return Err(ErrorObject::new(
                codes::INTERNAL_ERROR,
                "cancelled by the client before its input was sent; the round was dropped",
            ));
        }
        let handed = open.to.send(Continue {
            responses: responses.clone(),
            reply,
        });
        if handed.is_err() {
            lock(&self.continuing).remove(retry_tag);
            return Err(ErrorObject::new(
                codes::INTERNAL_ERROR,
                "the call this round belongs to no longer waits (it ended); nothing was sent",
            ));
        }
        let next = answer.recv().unwrap_or_else(|_| {
            Err(ErrorObject::new(
                codes::INTERNAL_ERROR,
                "the call this round belongs to ended without an answer; its outcome is recorded on its pathway",
            ))
        });
        lock(&self.continuing).remove(retry_tag);
        next
    }

    /// The tag a call's rounds go to the server under, when `retry_tag` is a retry that
    /// continued one of its rounds and waits for what comes next.
    pub(crate) fn carrying(&self, retry_tag: &str) -> Option<String> {
        lock(&self.continuing).get(retry_tag).cloned()
    }
}
