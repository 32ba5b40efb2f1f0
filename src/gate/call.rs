//! One governed `tools/call`: the pin, the pathway (propose and admit, the Human Gate
//! through the client's elicitation, bind, the durable attempt record, dispatch, readback)
//! and an honest answer to the client. An identical call (same server, tool and canonical
//! arguments) that is still open (unknown, at the gate, in flight) is answered from its
//! pathway and never sent again, whatever idempotency key either call carries.

use std::sync::Arc;

use crate::executor::{Binding, Request};
use crate::jsonrpc::{ErrorObject, codes};
use crate::mcp::{ArgumentValidator, McpClient, Tool, ToolBinding, ToolList};
use crate::runtime::Key;
use crate::store::PinCheck;
use crate::{Admission, Definition, Ready, State, StoredPathway};
use serde_json::{Value, json};

use super::Gate;
pub(crate) use super::asked::{APPROVAL_INPUT, Answer, Answered, Asked, Checked, tool_error};
use super::carry::with_pathway;
use super::era::Era;
use super::request_state::StateKey;
use super::turns::{Claim, Held};
use crate::policy::{Live, Plan};

/// The `_meta` member a client may set to name the call's identity (idempotency key).
pub(crate) const KEY_META: &str = "dev.rpr/idempotency-key";

/// What the propose step found: an identical call's open pathway, or what proposing this
/// call gave (with its turn on a new pathway).
enum Found<'t> {
    Open(StoredPathway),
    Made(Result<Ready, crate::PathwayError>, Option<Held<'t>>),
}

fn parse(params: Option<&Value>) -> Result<Asked, ErrorObject> {
    let invalid = |m: &str| ErrorObject::new(codes::INVALID_PARAMS, m.to_owned());
    let params = params
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("`tools/call` needs params (an object)"))?;
    if params.contains_key("task") {
        // Refused before anything is recorded: no pathway (the gate cannot carry a task's
        // later result to a pathway, and does not advertise `tasks`).
        return Err(invalid(
            "a task-augmented `tools/call` is not governed by rpr gate (it does not support              tasks); nothing was recorded or sent. Make the call without `task`: the gate then              records, admits and sends it as one call",
        ));
    }
    let tool = params
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid("`tools/call` needs `name` (a non-empty string)"))?
        .to_owned();
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(invalid("`arguments` must be an object")),
    };
    let meta = params.get("_meta");
    let key = match meta.and_then(|m| m.get(KEY_META)) {
        None => None,
        Some(Value::String(k)) if !k.is_empty() => Some(k.clone()),
        Some(_) => {
            return Err(invalid(
                "`_meta` idempotency key must be a non-empty string",
            ));
        }
    };
    let progress = meta
        .and_then(|m| m.get("progressToken"))
        .map(|t| json!({"progressToken": t}));
    let retry = match params.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(state)) => Some((
            state.clone(),
            params.get("inputResponses").cloned().unwrap_or(Value::Null),
        )),
        Some(_) => return Err(invalid("`requestState` must be a string")),
    };
    Ok(Asked {
        tool,
        arguments,
        key,
        progress,
        tag: String::new(),
        era: Era::Legacy,
        retry,
        answered: None,
        outlet: None,
    })
}

impl Gate {
    /// Handles one `tools/call` from the client.
    pub(crate) fn call(
        &self,
        params: Option<&Value>,
        tag: &str,
        era: &Era,
        outlet: &Arc<super::rounds::Outlet>,
    ) -> Answer {
        let mut asked = parse(params)?;
        tag.clone_into(&mut asked.tag);
        asked.era = era.clone();
        asked.outlet = Some(Arc::clone(outlet));
        let request = Request::new(asked.tool.clone(), asked.arguments.clone());
        let digest = request.digest().map_err(|e| {
            ErrorObject::new(
                codes::INVALID_PARAMS,
                format!("the arguments cannot be recorded: {e}"),
            )
        })?;
        if let Some((state, responses)) = &asked.retry
            && StateKey::is_round(state)
        {
            // A later round of a call in flight: it goes to that call, whose attempt is
            // recorded already; nothing here proposes, records or sends on its own.
            let round = self.state_key.check_round(state, &digest).map_err(|e| {
                ErrorObject::new(codes::INVALID_PARAMS, format!("{e}; nothing was sent"))
            })?;
            return self
                .rounds
                .continue_round(&round, responses, tag, &|| self.down.is_cancelled(tag));
        }
        let checked = match self.checked(&asked) {
            Ok(checked) => checked,
            Err(answer) => return answer,
        };
        if let Some((state, responses)) = asked.retry.take() {
            return self.retried(&state, responses, &digest, &checked, &mut asked, &request);
        }
        // An identical call stored first while this one was not stored yet takes its key:
        // this one sent nothing (a read may have been sent: its answer is withheld, since
        // it is not recorded), and is handled again: answered from that one, or (a read,
        // which an identical read does not hold) made again under the next key.
        for _ in 0..2 {
            if let Some(answer) = self.propose_and_send(&checked, &asked, &request, &digest) {
                return answer;
            }
        }
        tool_error(
            "identical calls kept taking this call's key; nothing of this call was recorded (a call \
             that may change something was not sent; a read may have been, and its answer is \
             withheld). Make the call again",
            None,
        )
    }

    /// Proposes, admits and (when the policy allows it) binds and sends the call: an allowed
    /// call's pathway is stored with its attempt record, in one commit (a read's with its
    /// attempt and outcome, after the server answered). `None` when an identical call,
    /// stored first, took its key.
    fn propose_and_send(
        &self,
        checked: &Checked,
        asked: &Asked,
        request: &Request,
        digest: &str,
    ) -> Option<Answer> {
        let mut executor = self.executor(checked, asked, true);
        let read_only = checked.live.plan.class == crate::ActionClass::ReadOnly;
        // The identity of a call that may change something, under which its new pathway's
        // turn is claimed: an identical call finds that pathway by it before it is stored.
        let identity = (!read_only).then(|| format!("{}\n{digest}", checked.live.server));
        // One identity-and-propose at a time in this gate: two identical calls racing
        // here find the same key (the store's unique key settles it across processes).
        // Only this short step is serialised; forms and sends happen in a pathway's turn.
        let found = loop {
            let (proposed, turn) = {
                let _propose = self
                    .propose_lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(found) = identity.as_deref().and_then(|i| self.turns.proposed(i)) {
                    found
                } else {
                    match self.lookup_and_propose(
                        checked,
                        asked,
                        request,
                        digest,
                        identity.as_deref(),
                        &mut executor,
                    ) {
                        Ok(found) => break found,
                        Err(answer) => return Some(answer),
                    }
                }
            };
            // An identical call of this gate proposed its pathway and works on it, stored
            // or not yet (a call the policy allows is stored with its attempt record, at its
            // send). Whatever either call's key, this one waits for that turn, then goes on
            // from that pathway as it then stands; or, had it not been stored, looks again.
            turn.wait();
            match self.rt.reader().pathway(&proposed) {
                Ok(None) => {}
                Ok(Some(_)) => match self.rt.load(&proposed) {
                    Ok(stored) => break Found::Open(stored),
                    Err(e) => {
                        return Some(tool_error(
                            format!(
                                "pathway {proposed} cannot be read ({e}); this call was not sent"
                            ),
                            None,
                        ));
                    }
                },
                Err(e) => {
                    return Some(tool_error(
                        format!("the store cannot be read ({e}); nothing was sent"),
                        None,
                    ));
                }
            }
        };
        let (ready, _turn) = match found {
            Found::Open(existing) => return Some(self.in_turn(existing, checked, asked, request)),
            Found::Made(ready, held) => (ready, held),
        };
        match ready {
            Ok(Ready::Bound(bound)) => self.send(bound, executor, checked, asked, State::Approved),
            Ok(Ready::NotBound(refused)) => {
                self.upstream.forget_tools();
                let (p, e) = refused.into_parts();
                Some(tool_error(
                    format!(
                        "pathway {} could not be bound ({e}); it stays approved; nothing was sent",
                        p.id()
                    ),
                    Some((p.id(), State::Approved)),
                ))
            }
            Ok(Ready::Admitted(admission)) => Some(self.admitted(admission, checked, asked)),
            // The same key with other content is refused by the store (a conflict, below).
            Ok(Ready::Existing(stored)) => Some(self.in_turn(stored, checked, asked, request)),
            // An identical call stored first, in another process on the database: handled
            // again, answered from that one.
            Err(crate::PathwayError::Store(crate::store::StoreError::IdenticalOpen { .. })) => None,
            Err(e) => Some(tool_error(
                format!("the call could not be recorded ({e}); nothing was sent"),
                None,
            )),
        }
    }

    /// Inside the propose lock: an open identical call's pathway, or this call proposed (and,
    /// when the policy allows it, bound) with its turn claimed under `identity`. `Err`: the
    /// store could not be read.
    fn lookup_and_propose<'t>(
        &'t self,
        checked: &Checked,
        asked: &Asked,
        request: &Request,
        digest: &str,
        identity: Option<&str>,
        executor: &mut dyn crate::executor::Executor,
    ) -> Result<Found<'t>, Answer> {
        let read_only = checked.live.plan.class == crate::ActionClass::ReadOnly;
        // An identical call still open is answered from its pathway, whatever either
        // call's key: a key names a call; it cannot split one. A key of its own decides
        // only once no identical call is open (a completed key replays its result).
        match self.open_identical(&checked.live.server, digest, read_only) {
            Ok(Ok(derived)) => {
                // A read's derived key is random, new for this call: it is not looked
                // up before the proposal (the store's unique key still decides).
                let (key, made) = match &asked.key {
                    Some(k) => (format!("gate/{}/key/{k}", checked.live.server), Key::Given),
                    None if read_only => (derived, Key::Fresh),
                    None => (derived, Key::Given),
                };
                let definition = Definition::new(
                    request.clone(),
                    checked.live.plan.class,
                    &key,
                    self.policy.authority(),
                )
                .with_metadata(json!({"server": checked.live.server, "gate": self.recorded}));
                let decision = checked.live.plan.decision();
                let decider = definition.authority.decision_owner.clone();
                let ready = self.rt.propose_and_bind_keyed(
                    &self.actor,
                    &decider,
                    definition,
                    &|_| decision.clone(),
                    executor,
                    made,
                );
                // The new pathway's turn is taken before an identical call can find it.
                // A bound one is sent now: identical calls wait for that send too.
                let id = match &ready {
                    Ok(Ready::Admitted(admission)) => Some(admission.id()),
                    Ok(Ready::Bound(bound)) => Some(bound.id()),
                    _ => None,
                };
                let held = id.and_then(|id| {
                    let claim = match identity {
                        Some(identity) => self.turns.claim_proposed(id, identity),
                        None => self.turns.claim(id),
                    };
                    match claim {
                        Claim::Mine(held) => Some(held),
                        Claim::Taken(_) => None,
                    }
                });
                Ok(Found::Made(ready, held))
            }
            Ok(Err(existing)) => Ok(Found::Open(existing)),
            Err(answer) => Err(answer),
        }
    }

    /// A 2026-07-28 retry of a call the gate answered with its approval form: the
    /// `requestState` is checked (this gate's key, not expired, issued for this very
    /// request), then the call goes on from the pathway it names, in that pathway's turn:
    /// the answer is recorded only if the pathway is still at the gate, and a pathway
    /// that has moved on is answered from where it stands (never sent again).
    fn retried(
        &self,
        state: &str,
        responses: Value,
        digest: &str,
        checked: &Checked,
        asked: &mut Asked,
        request: &Request,
    ) -> Answer {
        let claims = self.state_key.check(state, digest).map_err(|e| {
            ErrorObject::new(
                codes::INVALID_PARAMS,
                format!("{e}; nothing was recorded or sent. Make the call again without `requestState` to be asked again"),
            )
        })?;
        let stored = self.rt.load(&claims.pathway).map_err(|e| {
            ErrorObject::new(
                codes::INTERNAL_ERROR,
                format!(
                    "pathway {} cannot be read ({e}); nothing was sent",
                    claims.pathway
                ),
            )
        })?;
        let answer = responses.get(APPROVAL_INPUT).cloned();
        asked.answered = Some(Answered {
            state: state.to_owned(),
            pathway: claims.pathway,
            version: claims.version,
            binding_digest: claims.binding_digest,
            answer,
        });
        self.in_turn(stored, checked, asked, request)
    }

    /// The tool, its pin and what the policy says, before anything is recorded.
    fn checked(&self, asked: &Asked) -> Result<Checked, Answer> {
        let internal = |m: String| Err(ErrorObject::new(codes::INTERNAL_ERROR, m));
        let client = self.upstream.client().map_err(internal)?;
        let list: Arc<ToolList> = self.tools(&client).map_err(internal)?;
        let server = self.name.clone();
        let Some(tool) = list.get(&asked.tool).cloned() else {
            let why = list.rejection(&asked.tool).map_or_else(String::new, |r| {
                format!(" (it lists one with an invalid definition: {r})")
            });
            return Err(Err(ErrorObject::new(
                codes::INVALID_PARAMS,
                format!("Unknown tool: {}{why}", asked.tool),
            )));
        };
        if tool.definition["execution"]["taskSupport"] == "required" {
            return Err(Err(ErrorObject::new(
                codes::METHOD_NOT_FOUND,
                format!(
                    "tool `{}` can only be called as a task, and rpr gate does not govern tasks; \
                     nothing was recorded or sent",
                    asked.tool
                ),
            )));
        }
        // Made once per tool on this session and list (gate/bindings.rs); a tool that
        // cannot be bound still has its arguments checked first, as before.
        let bindings = self.bindings.get(&client, &list, &tool);
        let compiled;
        let validator = if let Ok(b) = &bindings {
            &b.validator
        } else {
            compiled = ArgumentValidator::new(&tool).map_err(|e| e.to_string());
            &compiled
        };
        let validator = validator.as_ref().map_err(|e| {
            tool_error(
                format!(
                    "the tool's input schema cannot be checked ({e}); nothing was recorded or sent"
                ),
                None,
            )
        })?;
        validator.check(&asked.arguments).map_err(|problems| {
            tool_error(
                format!(
                    "the arguments do not match the input schema of `{}`: {}; nothing was recorded or sent",
                    asked.tool,
                    problems.join("; ")
                ),
                None,
            )
        })?;
        let unbindable = |e: &dyn std::fmt::Display| {
            tool_error(
                format!("the tool cannot be bound ({e}); nothing was recorded or sent"),
                None,
            )
        };
        let bindings = bindings.map_err(|e| unbindable(&e))?;
        let pinned = self.pin(&server, &tool, &bindings.claimed, None)?;
        let plan = self.policy.plan(&server, &tool, &list).map_err(|e| {
            tool_error(
                format!("refused by the gate's policy: {e}; nothing was recorded or sent"),
                None,
            )
        })?;
        plan.check_arguments(&tool.name, &asked.arguments)
            .map_err(|e| tool_error(format!("refused: {e}; nothing was recorded or sent"), None))?;
        let reader = self.reader_pin(&server, &tool, &plan, &client, &list)?;
        // The class is the policy's word (the annotation is the server's claim): the call
        // is bound with it, so that is the digest the bound call must show.
        let expected = bindings.planned(plan.class).map_err(|e| unbindable(&e))?;
        let listed = bindings.listed(plan.class).map_err(|e| unbindable(&e))?;
        Ok(Checked {
            live: Live {
                server,
                client,
                list,
                tool,
                plan,
            },
            pinned,
            expected,
            listed,
            reader,
        })
    }

    /// The binding of a mutating call's readback tool, checked against its pin (pinned on
    /// first sight): a readback through a tool that changed since it was reviewed proves
    /// nothing, so the call is refused before anything is recorded or sent.
    fn reader_pin(
        &self,
        server: &str,
        tool: &Tool,
        plan: &Plan,
        client: &McpClient,
        list: &ToolList,
    ) -> Result<Option<Binding>, Answer> {
        let Some(rb) = plan
            .readback
            .as_ref()
            .filter(|_| plan.class == crate::ActionClass::Mutating)
        else {
            return Ok(None);
        };
        // `plan` found the readback tool in this list.
        let Some(reader) = list.get(&rb.tool) else {
            return Ok(None);
        };
        let binding = ToolBinding::new(client.server(), reader)
            .and_then(|b| b.to_binding())
            .map_err(|e| {
                tool_error(
                    format!(
                        "the readback tool `{}` cannot be bound ({e}); nothing was recorded or sent",
                        rb.tool
                    ),
                    None,
                )
            })?;
        self.pin(server, reader, &binding, Some(&tool.name))?;
        Ok(Some(binding))
    }

    /// Checks `binding` against the pin of `tool` (pinning it on first sight), reading
    /// first: a binding that matches its pin costs no write. `read_back` names the call
    /// whose readback goes through `tool`, if that is why it is checked.
    fn pin(
        &self,
        server: &str,
        tool: &Tool,
        binding: &Binding,
        read_back: Option<&str>,
    ) -> Result<String, Answer> {
        let cannot = |e: &dyn std::fmt::Display| {
            tool_error(
                format!(
                    "the pin of `{}` cannot be checked ({e}); nothing was sent",
                    tool.name
                ),
                None,
            )
        };
        let known = self
            .rt
            .reader()
            .pin_digest(server, &tool.name)
            .map_err(|e| cannot(&e))?;
        if known.is_some_and(|d| d == binding.digest) {
            return Ok(binding.digest.clone());
        }
        match self
            .rt
            .check_pin(server, &tool.name, binding, &tool.definition, &self.actor)
        {
            Ok(PinCheck::FirstSight(pin) | PinCheck::Matches(pin)) => Ok(pin.digest),
            Ok(PinCheck::Changed(pin)) => {
                let text = self.changed_text(server, &tool.name, &pin.binding, binding);
                Err(tool_error(
                    match read_back {
                        Some(write) => format!(
                            "{text} A readback of `{write}` through it would prove nothing, so `{write}` \
                             is not sent either"
                        ),
                        None => text,
                    },
                    None,
                ))
            }
            Err(e) => Err(cannot(&e)),
        }
    }

    fn changed_text(&self, server: &str, tool: &str, pinned: &Value, seen: &Binding) -> String {
        let changed = crate::mcp::changed_fields(pinned, &seen.details).join(", ");
        format!(
            "refused: tool `{tool}` of server `{server}` is not the one pinned (changed: {changed}; now {}). \
             Nothing was recorded or sent. An operator reviews the change and pins it with: {}",
            seen.target,
            super::pin_command(Some(&self.database), server, tool, &seen.digest)
        )
    }

    /// An open pathway for the identical call that may have changed something (`Err`), or
    /// the key for a new one (`Ok`). `read_only`: the policy classes the call read-only.
    fn open_identical(
        &self,
        server: &str,
        digest: &str,
        read_only: bool,
    ) -> Result<Result<String, StoredPathway>, Answer> {
        let failed = |e: &dyn std::fmt::Display| {
            tool_error(
                format!("the store cannot be read ({e}); nothing was sent"),
                None,
            )
        };
        // A read's key needs no count: an identical read after it is a new call, so its key
        // is one of its own (random), and no two reads meet at one. Counting every pathway of
        // the digest grew with each identical read: a gate serving the same read all day
        // counted all of them on every call.
        let (open, count) = if read_only {
            let open = self
                .rt
                .reader()
                .open_with_request(digest)
                .map_err(|e| failed(&e))?;
            (open, None)
        } else {
            let (open, count) = self
                .rt
                .reader()
                .open_and_count_with_request(digest)
                .map_err(|e| failed(&e))?;
            (open, Some(count))
        };
        // Only a call that may change something holds an identical one once it was sent: a
        // read that was sent (in flight; one that failed is closed: `failed`) changed
        // nothing, so an identical call after it is a new call. A read not sent yet (waiting for a decision,
        // or approved by `rpr approve`) is the one the identical call carries on.
        let unsent = |s: State| {
            matches!(
                s,
                State::Proposed | State::HumanGate | State::AwaitingApproval | State::Approved
            )
        };
        if let Some(open) = open.iter().find(|r| {
            r.definition["metadata"]["server"] == server
                && (r.definition["class"] != "read_only" || unsent(r.state))
        }) {
            let stored = self.rt.load(&open.id).map_err(|e| failed(&e))?;
            return Ok(Err(stored));
        }
        // Every pathway of this digest counts (on any server): a key's number only grows, so
        // it is new; two gates deriving it at once meet at the store's unique key, and only
        // one of the identical calls that may change something is sent.
        if let Some(count) = count {
            return Ok(Ok(format!("gate/{server}/{digest}/{}", count + 1)));
        }
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(|e| failed(&e))?;
        let nonce = crate::canonical::hex(&nonce);
        Ok(Ok(format!("gate/{server}/{digest}/read/{nonce}")))
    }

    /// An approved pathway whose approval expired before the call came again: held and
    /// escalated to the Human Gate by the stop authority (recorded with why), then asked
    /// again like a new one. Nothing is sent on the old approval.
    fn ask_again(
        &self,
        p: crate::Pathway<crate::stage::Approved>,
        until: i64,
        checked: &Checked,
        asked: &Asked,
    ) -> Answer {
        let reason = format!("its approval expired at {}", crate::shown::utc(until));
        self.gate_again(p, &reason, checked, asked)
    }

    /// Sends an approved pathway only when every approval its last approval step used was
    /// of the binding pinned now (`checked.pinned`, the tool the bound call is made from):
    /// an approval given for another binding (a pin accepted since), or one that recorded
    /// none (given by an rpr before this release, or by a host through the library), does
    /// not show that anyone approved sending the call to the tool as it is now. Such a
    /// pathway is put back before the Human Gate and asked again, as one whose approval
    /// expired. A pathway its policy admitted without a Human Gate used no approval.
    pub(super) fn send_approved(
        &self,
        p: crate::Pathway<crate::stage::Approved>,
        checked: &Checked,
        asked: &Asked,
    ) -> Answer {
        let id = p.id().to_owned();
        let approvals = match self.rt.approved_bindings(&id) {
            Ok(a) => a,
            Err(e) => {
                return tool_error(
                    format!(
                        "pathway {id}: what its approvals were of cannot be read ({e}); nothing was sent"
                    ),
                    Some((&id, State::Approved)),
                );
            }
        };
        // The pin this call was checked against may have moved while it waited (for a form,
        // an approval out of band, an identical call's turn): then what it would compare
        // with is stale. Nothing is sent or changed; the repeat checks the tool afresh.
        let now = &checked.pinned;
        match self
            .rt
            .reader()
            .pin_digest(&checked.live.server, &checked.live.tool.name)
        {
            Ok(Some(pinned)) if pinned == *now => {}
            Ok(moved) => {
                self.upstream.forget_tools();
                return tool_error(
                    format!(
                        "pathway {id}: the tool's pin moved while this call waited (checked as \
                         {now}, pinned as {} now); nothing was sent, and it stays approved. \
                         Make the same call again: the gate checks the tool as it is now",
                        moved.as_deref().unwrap_or("nothing")
                    ),
                    Some((&id, State::Approved)),
                );
            }
            Err(e) => {
                return tool_error(
                    format!("pathway {id}: the tool's pin cannot be read ({e}); nothing was sent"),
                    Some((&id, State::Approved)),
                );
            }
        }
        let stale = approvals
            .iter()
            .find(|a| a.binding_digest.as_deref() != Some(now.as_str()));
        let Some(a) = stale else {
            return self.carry(p, checked, asked);
        };
        let who = crate::shown::name(a.approver.as_str());
        let reason = match &a.binding_digest {
            Some(then) => format!(
                "approval {} by {who} was of binding {then}, and the tool is pinned as {now} \
                 now: nobody approved sending the call to it",
                a.approval
            ),
            None => format!(
                "approval {} by {who} recorded no binding, so nothing shows that anyone \
                 approved sending the call to the tool pinned as {now}",
                a.approval
            ),
        };
        self.gate_again(p, &reason, checked, asked)
    }

    /// Holds an approved pathway and escalates it to the Human Gate by its stop authority,
    /// recorded with `reason`, then asks again like a new one. Nothing is sent on the
    /// approval it had.
    fn gate_again(
        &self,
        p: crate::Pathway<crate::stage::Approved>,
        reason: &str,
        checked: &Checked,
        asked: &Asked,
    ) -> Answer {
        let id = p.id().to_owned();
        let stop = p.definition().authority.stop_authority.clone();
        let recorded = format!("{reason}; asked again");
        let gated = p
            .hold(&self.rt, &stop, &recorded)
            .map_err(|r| r.to_string())
            .and_then(|held| held.escalate(&self.rt, &stop).map_err(|r| r.to_string()));
        match gated {
            Ok(p) => {
                note!(Info, "rpr gate: pathway {id}: {recorded}");
                self.human_gate(p, checked, asked)
            }
            Err(e) => tool_error(
                format!(
                    "pathway {id}: {reason}, but it could not be put back before the Human Gate ({e}); nothing was sent"
                ),
                Some((&id, State::Approved)),
            ),
        }
    }

    /// Goes on from a fresh admission.
    fn admitted(&self, admission: Admission, checked: &Checked, asked: &Asked) -> Answer {
        match admission {
            Admission::Approved(p) => self.carry(p, checked, asked),
            Admission::HumanGate(p) => self.human_gate(p, checked, asked),
            Admission::AwaitingApproval(p) => tool_error(
                format!(
                    "held for approval by the policy: pathway {} waits for the approval authority ({}); nothing was sent. \
                     Approve it with: {}, then make the same call again",
                    p.id(),
                    p.definition().authority.approval_authority,
                    self.approve_command(p.id(), Some(p.core.version), checked),
                ),
                Some((p.id(), State::AwaitingApproval)),
            ),
            Admission::Denied(p) => tool_error(
                format!(
                    "denied by the gate's policy (pathway {}); nothing was sent",
                    p.id()
                ),
                Some((p.id(), State::Denied)),
            ),
        }
    }

    /// Answers from an open pathway in its turn: while another call of this gate holds a
    /// form open on it or sends it, waits for that call, then answers from the pathway as it
    /// then stands (one form, one send, for every identical call that waited).
    fn in_turn(
        &self,
        mut stored: StoredPathway,
        checked: &Checked,
        asked: &Asked,
        request: &Request,
    ) -> Answer {
        loop {
            // A call without the answer to a form that is out waits for that answer too.
            if asked.answered.is_none() {
                self.turns.wait_for_form(stored.id());
            }
            let turn = match self.turns.claim(stored.id()) {
                Claim::Mine(_held) => return self.existing(stored, checked, asked, request),
                Claim::Taken(turn) => turn,
            };
            turn.wait();
            let id = stored.id().to_owned();
            stored = match self.rt.load(&id) {
                Ok(now) => now,
                Err(e) => {
                    return tool_error(
                        format!("pathway {id} cannot be read ({e}); this call was not sent"),
                        None,
                    );
                }
            };
        }
    }

    /// Answers an identical or same-key call from its stored pathway; dispatches it only
    /// when it is approved and was never sent.
    pub(super) fn existing(
        &self,
        stored: StoredPathway,
        checked: &Checked,
        asked: &Asked,
        request: &Request,
    ) -> Answer {
        let id = stored.id().to_owned();
        let stored_state = stored.state();
        macro_rules! restored {
            ($p:expr) => {{
                let p = $p;
                if p.is_redacted() {
                    match p.restore_request(request.clone()) {
                        Ok(p) => p,
                        Err(e) => {
                            return tool_error(
                                format!("pathway {id}: {e}; nothing was sent"),
                                Some((&id, stored_state)),
                            );
                        }
                    }
                } else {
                    p
                }
            }};
        }
        match stored {
            StoredPathway::Proposed(p) => {
                let p = restored!(p);
                let decision = checked.live.plan.decision();
                let decider = p.definition().authority.decision_owner.clone();
                match p.admit(&self.rt, &decider, &|_| decision.clone()) {
                    Ok(admission) => self.admitted(admission, checked, asked),
                    Err(e) => tool_error(
                        format!("pathway {id} could not be admitted ({e}); nothing was sent"),
                        Some((&id, State::Proposed)),
                    ),
                }
            }
            StoredPathway::Approved(p) => {
                let p = restored!(p);
                // Judged by the clock approvals are stamped by (the database's on
                // PostgreSQL), as the send will judge it.
                let expired = match p.approval_expires_at() {
                    None => Ok(None),
                    Some(until) => self
                        .rt
                        .approval_now()
                        .map(|now| (now >= until).then_some(until)),
                };
                match expired {
                    Ok(Some(until)) => self.ask_again(p, until, checked, asked),
                    Ok(None) => self.send_approved(p, checked, asked),
                    Err(e) => tool_error(
                        format!(
                            "pathway {id}: whether its approval still holds could not be read ({e}); nothing was sent"
                        ),
                        Some((&id, State::Approved)),
                    ),
                }
            }
            StoredPathway::HumanGate(p) => {
                let p = restored!(p);
                self.human_gate(p, checked, asked)
            }
            StoredPathway::Completed(p) => {
                // A same-key repeat, or an identical call that waited for this pathway's send:
                // its result, replayed.
                let reply = self
                    .rt
                    .reader()
                    .attempts(p.id())
                    .ok()
                    .and_then(|mut a| a.pop())
                    .and_then(|a| a.outcome)
                    .and_then(|o| o.get("reply").cloned().or(Some(o)));
                match reply {
                    Some(r) if r.get("content").is_some() => {
                        Ok(with_pathway(r, &id, State::Completed))
                    }
                    _ => tool_error(
                        format!(
                            "pathway {id} (this idempotency key) is completed; its stored result is not available in full. Nothing was sent again"
                        ),
                        Some((&id, State::Completed)),
                    ),
                }
            }
            StoredPathway::Failed(_) => tool_error(
                format!(
                    "pathway {id} (this idempotency key) is a read that failed; it was not sent again. \
                     Read again without this key (or with a new one): a read changes nothing"
                ),
                Some((&id, State::Failed)),
            ),
            StoredPathway::Unknown(_) => tool_error(
                self.unknown_text(&id, "an identical call before this one"),
                Some((&id, State::WriteStatusUnknown)),
            ),
            StoredPathway::InFlightElsewhere { .. } => tool_error(
                format!(
                    "an identical call (pathway {id}) is in flight right now; it was not sent again. Wait for it, then check: rpr status --database {}",
                    self.database
                ),
                Some((&id, State::Running)),
            ),
            other => {
                let state = other.state();
                tool_error(
                    format!(
                        "an identical call is pathway {id}, which is {state}; it was not sent again. \
                         See what it needs: rpr unresolved --database {}",
                        self.database
                    ),
                    Some((&id, state)),
                )
            }
        }
    }

    pub(crate) fn unknown_text(&self, id: &str, what: &str) -> String {
        format!(
            "write status unknown: {what} (pathway {id}) was sent, but whether it took effect is not known. \
             It will not be sent again, and an identical call is refused until it is settled. \
             Reconcile it by readback with: rpr reconcile --database {} --policy {} --pathway {id}",
            self.database, self.policy_path
        )
    }
}
