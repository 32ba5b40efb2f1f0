//! One governed `tools/call`: the pin, the pathway (propose and admit, the Human Gate
//! through the client's elicitation, bind, the durable attempt record, dispatch, readback)
//! and an honest answer to the client. An identical call that is still open (unknown,
//! at the gate, in flight) is answered from its pathway and never sent again.

use std::sync::Arc;
use std::time::Duration;

use rpr::executor::{Binding, Delivery, Request};
use rpr::jsonrpc::{ErrorObject, codes};
use rpr::mcp::{
    ArgumentValidator, ExecutorConfig, McpClient, McpExecutor, Reply, Tool, ToolBinding, ToolList,
};
use rpr::stage::{Bindable, Gated};
use rpr::store::PinCheck;
use rpr::{Admission, Confirmed, Decided, Definition, Outcome, Pathway, StoredPathway};
use serde_json::{Value, json};

use super::Gate;
use crate::config::Plan;
use crate::flow::Keeping;

/// The `_meta` member a client may set to name the call's identity (idempotency key).
pub(crate) const KEY_META: &str = "dev.rpr/idempotency-key";

/// What the client gets back: a `tools/call` result, or a JSON-RPC error.
pub(crate) type Answer = Result<Value, ErrorObject>;

/// A tool error result: the text for the model and person, and the pathway in `_meta`.
#[expect(
    clippy::unnecessary_wraps,
    reason = "a tool error is one kind of answer to a call; every path returns an `Answer`"
)]
pub(crate) fn tool_error(text: impl Into<String>, pathway: Option<(&str, &str)>) -> Answer {
    let mut result = json!({
        "content": [{"type": "text", "text": text.into()}],
        "isError": true,
    });
    if let Some((id, state)) = pathway {
        result["_meta"] = json!({"dev.rpr/pathway": {"id": id, "state": state}});
    }
    Ok(result)
}

/// The call the client asked for.
struct Asked {
    tool: String,
    arguments: Value,
    key: Option<String>,
    progress: Option<Value>,
    /// The client's request id, as text: the tag a cancellation finds the call by.
    tag: String,
}

fn parse(params: Option<&Value>) -> Result<Asked, ErrorObject> {
    let invalid = |m: &str| ErrorObject::new(codes::INVALID_PARAMS, m.to_owned());
    let params = params
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("`tools/call` needs params (an object)"))?;
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
    Ok(Asked {
        tool,
        arguments,
        key,
        progress,
        tag: String::new(),
    })
}

/// What the gate knows about the tool being called, checked before anything is recorded.
pub(crate) struct Live {
    pub(crate) client: Arc<McpClient>,
    /// The list the tool was checked in (against its pin and the policy).
    pub(crate) list: Arc<ToolList>,
    pub(crate) tool: Tool,
    pub(crate) plan: Plan,
    pub(crate) pinned: String,
    /// The digest the call must be bound to: the pinned binding with the policy's class.
    pub(crate) expected: String,
    /// The details of that binding (to name what changed when the bound one differs).
    pub(crate) bound_details: Value,
    pub(crate) server: String,
}

impl Gate {
    /// Handles one `tools/call` from the client.
    pub(crate) fn call(&self, params: Option<&Value>, tag: &str) -> Answer {
        let mut asked = parse(params)?;
        tag.clone_into(&mut asked.tag);
        let live = match self.live(&asked) {
            Ok(live) => live,
            Err(answer) => return answer,
        };
        let request = Request::new(asked.tool.clone(), asked.arguments.clone());
        let digest = request.digest().map_err(|e| {
            ErrorObject::new(
                codes::INVALID_PARAMS,
                format!("the arguments cannot be recorded: {e}"),
            )
        })?;
        // One identity-and-propose at a time in this gate: two identical calls racing
        // here find the same key (the store's unique key settles it across processes).
        let decided = {
            let _turn = self
                .propose_lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = match &asked.key {
                Some(k) => format!("gate/{}/key/{k}", live.server),
                None => match self.open_identical(&live.server, &digest) {
                    Ok(Ok(key)) => key,
                    Ok(Err(existing)) => return self.existing(existing, &live, &asked, &request),
                    Err(answer) => return answer,
                },
            };
            let definition = Definition::new(
                request.clone(),
                live.plan.class,
                &key,
                self.policy.authority(),
            )
            .with_metadata(json!({"server": live.server, "gate": {"command": self.command_line}}));
            let decision = live.plan.decision();
            let decider = definition.authority.decision_owner.clone();
            self.rt
                .propose_and_admit(&self.actor, &decider, definition, &|_| decision.clone())
        };
        match decided {
            Ok(Decided::New(admission)) => self.admitted(admission, &live, &asked),
            // The same key with other content is refused by the store (a conflict, below).
            Ok(Decided::Existing(stored)) => self.existing(stored, &live, &asked, &request),
            Ok(other) => tool_error(
                format!("unexpected admission {other:?}; nothing was sent"),
                None,
            ),
            Err(e) => tool_error(
                format!("the call could not be recorded ({e}); nothing was sent"),
                None,
            ),
        }
    }

    /// The tool, its pin and what the policy says, before anything is recorded.
    fn live(&self, asked: &Asked) -> Result<Live, Answer> {
        let internal = |m: String| Err(ErrorObject::new(codes::INTERNAL_ERROR, m));
        let client = self.upstream.client().map_err(internal)?;
        let list: Arc<ToolList> = self.upstream.tools(&client).map_err(internal)?;
        let server = self.server_name_of(&client);
        let Some(tool) = list.get(&asked.tool).cloned() else {
            let why = list.rejection(&asked.tool).map_or_else(String::new, |r| {
                format!(" (it lists one with an invalid definition: {r})")
            });
            return Err(Err(ErrorObject::new(
                codes::INVALID_PARAMS,
                format!("Unknown tool: {}{why}", asked.tool),
            )));
        };
        let validator = ArgumentValidator::new(&tool).map_err(|e| {
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
        let claimed = ToolBinding::new(client.server(), &tool).map_err(|e| unbindable(&e))?;
        let binding = claimed.to_binding().map_err(|e| unbindable(&e))?;
        let pinned = self.pin(&server, &tool, &binding)?;
        let plan = self.policy.plan(&server, &tool, &list).map_err(|e| {
            tool_error(
                format!("refused by the gate's policy: {e}; nothing was recorded or sent"),
                None,
            )
        })?;
        // The class is the policy's word (the annotation is the server's claim): the call
        // is bound with it, so that is the digest the bound call must show.
        let mut as_planned = claimed;
        as_planned.class = plan.class;
        let planned = as_planned.to_binding().map_err(|e| unbindable(&e))?;
        let (expected, bound_details) = (planned.digest, planned.details);
        Ok(Live {
            client,
            list,
            tool,
            plan,
            pinned,
            expected,
            bound_details,
            server,
        })
    }

    /// Checks `binding` against the pin of `tool` (pinning it on first sight), reading
    /// first: a binding that matches its pin costs no write.
    fn pin(&self, server: &str, tool: &Tool, binding: &Binding) -> Result<String, Answer> {
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
            .pin(server, &tool.name)
            .map_err(|e| cannot(&e))?;
        if known.is_some_and(|p| p.digest == binding.digest) {
            return Ok(binding.digest.clone());
        }
        match self
            .rt
            .check_pin(server, &tool.name, binding, &tool.definition, &self.actor)
        {
            Ok(PinCheck::FirstSight(pin) | PinCheck::Matches(pin)) => Ok(pin.digest),
            Ok(PinCheck::Changed(pin)) => Err(tool_error(
                self.changed_text(server, &tool.name, &pin.binding, binding),
                None,
            )),
            Err(e) => Err(cannot(&e)),
        }
    }

    fn changed_text(&self, server: &str, tool: &str, pinned: &Value, seen: &Binding) -> String {
        let changed = rpr::mcp::changed_fields(pinned, &seen.details).join(", ");
        format!(
            "refused: tool `{tool}` of server `{server}` is not the one pinned (changed: {changed}; now {}). \
             Nothing was recorded or sent. An operator reviews the change and pins it with: \
             rpr pin --database {} --server {server} --tool {tool} --digest {} --as NAME",
            seen.target, self.database, seen.digest
        )
    }

    /// An open pathway for the identical call (`Err`), or the key for a new one (`Ok`).
    fn open_identical(
        &self,
        server: &str,
        digest: &str,
    ) -> Result<Result<String, StoredPathway>, Answer> {
        let failed = |e: &dyn std::fmt::Display| {
            tool_error(
                format!("the store cannot be read ({e}); nothing was sent"),
                None,
            )
        };
        let (open, count) = {
            let reader = self.rt.reader();
            let open = reader.open_with_request(digest).map_err(|e| failed(&e))?;
            let count = reader.count_with_request(digest).map_err(|e| failed(&e))?;
            (open, count)
        };
        if let Some(open) = open
            .iter()
            .find(|r| r.definition["metadata"]["server"] == server)
        {
            let stored = self.rt.load(&open.id).map_err(|e| failed(&e))?;
            return Ok(Err(stored));
        }
        // Every pathway of this digest counts (on any server): a key's number only grows,
        // so it is new; two gates deriving it at once meet at the store's unique key.
        Ok(Ok(format!("gate/{server}/{digest}/{}", count + 1)))
    }

    /// Goes on from a fresh admission.
    fn admitted(&self, admission: Admission, live: &Live, asked: &Asked) -> Answer {
        match admission {
            Admission::Approved(p) => self.carry(p, live, asked),
            Admission::HumanGate(p) => self.human_gate(p, live, asked),
            Admission::AwaitingApproval(p) => tool_error(
                format!(
                    "held for approval by the policy: pathway {} waits for the approval authority ({}); nothing was sent. \
                     Approve it with: rpr approve --database {} --pathway {} --as NAME, then make the same call again",
                    p.id(),
                    p.definition().authority.approval_authority,
                    self.database,
                    p.id()
                ),
                Some((p.id(), "awaiting_approval")),
            ),
            Admission::Denied(p) => tool_error(
                format!(
                    "denied by the gate's policy (pathway {}); nothing was sent",
                    p.id()
                ),
                Some((p.id(), "denied")),
            ),
            other => tool_error(
                format!("unexpected admission {other:?}; nothing was sent"),
                None,
            ),
        }
    }

    /// Answers an identical or same-key call from its stored pathway; dispatches it only
    /// when it is approved and was never sent.
    fn existing(
        &self,
        stored: StoredPathway,
        live: &Live,
        asked: &Asked,
        request: &Request,
    ) -> Answer {
        let id = stored.id().to_owned();
        macro_rules! restored {
            ($p:expr) => {{
                let p = $p;
                if p.is_redacted() {
                    match p.restore_request(request.clone()) {
                        Ok(p) => p,
                        Err(e) => {
                            return tool_error(
                                format!("pathway {id}: {e}; nothing was sent"),
                                Some((&id, "unknown")),
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
                let decision = live.plan.decision();
                let decider = p.definition().authority.decision_owner.clone();
                match p.admit(&self.rt, &decider, &|_| decision.clone()) {
                    Ok(admission) => self.admitted(admission, live, asked),
                    Err(e) => tool_error(
                        format!("pathway {id} could not be admitted ({e}); nothing was sent"),
                        Some((&id, "proposed")),
                    ),
                }
            }
            StoredPathway::Approved(p) => {
                let p = restored!(p);
                self.carry(p, live, asked)
            }
            StoredPathway::HumanGate(p) => {
                let p = restored!(p);
                self.human_gate(p, live, asked)
            }
            StoredPathway::Completed(p) => {
                // Only a same-key repeat reaches a completed pathway: its result, replayed.
                let reply = self
                    .rt
                    .reader()
                    .attempts(p.id())
                    .ok()
                    .and_then(|mut a| a.pop())
                    .and_then(|a| a.outcome)
                    .and_then(|o| o.get("reply").cloned().or(Some(o)));
                match reply {
                    Some(r) if r.get("content").is_some() => Ok(with_pathway(r, &id, "completed")),
                    _ => tool_error(
                        format!(
                            "pathway {id} (this idempotency key) is completed; its stored result is not available in full. Nothing was sent again"
                        ),
                        Some((&id, "completed")),
                    ),
                }
            }
            StoredPathway::Unknown(_) => tool_error(
                self.unknown_text(&id, "an identical call before this one"),
                Some((&id, "write_status_unknown")),
            ),
            StoredPathway::InFlightElsewhere { .. } => tool_error(
                format!(
                    "an identical call (pathway {id}) is in flight right now; it was not sent again. Wait for it, then check: rpr status --database {}",
                    self.database
                ),
                Some((&id, "running")),
            ),
            other => {
                let state = other.state().as_str().to_owned();
                tool_error(
                    format!(
                        "an identical call is pathway {id}, which is {state}; it was not sent again. \
                         See what it needs: rpr unresolved --database {}",
                        self.database
                    ),
                    Some((&id, &state)),
                )
            }
        }
    }

    fn unknown_text(&self, id: &str, what: &str) -> String {
        format!(
            "write status unknown: {what} (pathway {id}) was sent, but whether it took effect is not known. \
             It will not be sent again, and an identical call is refused until it is settled. \
             Reconcile it by readback with: rpr reconcile --database {} --policy {} --pathway {id}",
            self.database, self.policy_path
        )
    }

    /// The Human Gate: asks the person at the client when it can elicit; otherwise
    /// leaves the pathway at the gate and says how to approve it.
    fn human_gate<S: Gated + 'static>(&self, p: Pathway<S>, live: &Live, asked: &Asked) -> Answer {
        let id = p.id().to_owned();
        let approve_hint = format!(
            "Approve it with: rpr approve --database {} --pathway {id} --as NAME, then make the same call again \
             (it is sent once, then); or deny it with: rpr deny --database {} --pathway {id} --as NAME",
            self.database, self.database
        );
        if !self.down.elicits_forms() {
            return tool_error(
                format!(
                    "this call needs a Human Gate decision by the approval authority ({}), because {}, and the client \
                     cannot ask (it declared no form elicitation). Pathway {id} waits at the gate; nothing was sent. {approve_hint}",
                    p.definition().authority.approval_authority,
                    live.plan.why
                ),
                Some((&id, "human_gate")),
            );
        }
        let shown =
            serde_json::to_string_pretty(&p.definition().request.arguments).unwrap_or_default();
        let shown: String = shown.chars().take(4000).collect();
        let message = format!(
            "rpr gate: approve this call?\n\ntool: {}\nserver: {} ({})\nbinding digest: {}\npathway: {id}\nwhy a Human Gate: {}\narguments:\n{shown}",
            live.tool.name,
            live.server,
            live.client.server().identity(),
            live.pinned,
            live.plan.why,
        );
        let params = json!({
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Approve this exact call (this tool, server and arguments), once",
                        "default": false
                    }
                },
                "required": ["approve"]
            }
        });
        let reply = self
            .down
            .request("elicitation/create", Some(params), self.approval_timeout);
        let approver = p.definition().authority.approval_authority.clone();
        let action = match &reply {
            Ok(Reply::Result(r)) => r["action"].as_str().unwrap_or("").to_owned(),
            _ => String::new(),
        };
        let said_yes = matches!(&reply, Ok(Reply::Result(r)) if r["content"]["approve"] == true);
        match action.as_str() {
            "accept" if said_yes => {
                let approval = match self.rt.grant_approval(&p, &approver) {
                    Ok(a) => a,
                    Err(e) => {
                        return tool_error(
                            format!(
                                "the approval could not be recorded ({e}); pathway {id} stays at the gate; nothing was sent"
                            ),
                            Some((&id, "human_gate")),
                        );
                    }
                };
                match p.approve(&self.rt, approval) {
                    Ok(p) => {
                        eprintln!(
                            "rpr gate: pathway {id} approved at the client (recorded as {approver})"
                        );
                        self.carry(p, live, asked)
                    }
                    Err(e) => tool_error(
                        format!("the approval could not be applied ({e}); nothing was sent"),
                        Some((&id, "human_gate")),
                    ),
                }
            }
            "accept" | "decline" => {
                let reason = "declined at the client's Human Gate";
                match p.deny(&self.rt, &approver, reason) {
                    Ok(_) => tool_error(
                        format!(
                            "denied at the Human Gate by the person at the client (pathway {id}); nothing was sent"
                        ),
                        Some((&id, "denied")),
                    ),
                    Err(e) => tool_error(
                        format!(
                            "the denial could not be recorded ({e}); pathway {id} stays at the gate; nothing was sent"
                        ),
                        Some((&id, "human_gate")),
                    ),
                }
            }
            _ => {
                let why = match &reply {
                    Ok(Reply::Result(_)) => "the person at the client cancelled".to_owned(),
                    Ok(Reply::Error(e)) => format!("the client could not ask ({})", e.message),
                    Err(e) => e.clone(),
                };
                tool_error(
                    format!(
                        "no Human Gate decision: {why}. Pathway {id} waits at the gate; nothing was sent. Make the same call again to be asked again. {approve_hint}"
                    ),
                    Some((&id, "human_gate")),
                )
            }
        }
    }

    /// Binds, records the attempt durably, sends, and reads a mutating call's effect back.
    fn carry<S: Bindable>(&self, p: Pathway<S>, live: &Live, asked: &Asked) -> Answer {
        let id = p.id().to_owned();
        let state = p.state().as_str().to_owned();
        let mut config = ExecutorConfig::default()
            .with_class(live.plan.class)
            .with_call_timeout(self.call_timeout)
            .with_call_tag(asked.tag.clone());
        if let Some(meta) = &asked.progress {
            config = config.with_call_meta(meta.clone());
        }
        if live.plan.class == rpr::ActionClass::ReadOnly {
            // A read changes nothing: it is bound to the list its pin was just checked in
            // (kept until the server says its tools changed, or restarts) instead of
            // listing three more times. A call that changes the world lists each time.
            config = config.with_tool_list(Arc::clone(&live.list));
        }
        let mut executor = Keeping::new(
            McpExecutor::new(Arc::clone(&live.client), live.tool.name.clone()).with_config(config),
        );
        let bound = match p.bind(&mut executor) {
            Ok(b) => b,
            Err(e) => {
                self.upstream.forget_tools();
                return tool_error(
                    format!(
                        "pathway {id} could not be bound ({e}); it stays {state}; nothing was sent"
                    ),
                    Some((&id, &state)),
                );
            }
        };
        if bound.binding().digest != live.expected {
            // The server changed between the pin check and the bind: nothing is sent; the
            // next call lists the tools again and checks the new definition against the pin.
            self.upstream.forget_tools();
            let changed =
                rpr::mcp::changed_fields(&bound.binding().details, &live.bound_details).join(", ");
            return tool_error(
                format!(
                    "refused: the server changed while this call was being bound (changed: {changed}; now {}); \
                     nothing was sent and pathway {id} stays {state}. Make the call again: the gate checks the \
                     new definition against its pin",
                    bound.binding().target
                ),
                Some((&id, &state)),
            );
        }
        let actor = bound.definition().authority.execution_actor.clone();
        // A mutating call with a readback: the reply and the readback in one durable commit.
        let readback = if live.plan.class == rpr::ActionClass::Mutating {
            live.plan.readback(&live.client).ok()
        } else {
            None
        };
        let outcome = match readback {
            Some(mut readback) => {
                bound.dispatch_and_confirm(&self.rt, &actor, &mut executor, &mut readback)
            }
            None => bound.dispatch(&self.rt, &actor, &mut executor),
        };
        let delivery = executor.delivery.take();
        match outcome {
            Outcome::Completed(done) => {
                eprintln!("rpr gate: pathway {} completed", done.id());
                reply_of(delivery, &id)
            }
            Outcome::Returned(returned) => {
                let mut readback = match live.plan.readback(&live.client) {
                    Ok(r) => r,
                    Err(e) => {
                        return tool_error(
                            format!(
                                "the server replied success, but the effect cannot be read back ({e}); pathway {id} awaits confirmation (returned). See: rpr unresolved --database {}",
                                self.database
                            ),
                            Some((&id, "returned")),
                        );
                    }
                };
                let actor = returned.definition().authority.execution_actor.clone();
                match returned.confirm(&self.rt, &actor, &mut readback) {
                    Ok(Confirmed::Completed(done)) => {
                        eprintln!("rpr gate: pathway {} completed, readback verified", done.id());
                        reply_of(delivery, &id)
                    }
                    Ok(Confirmed::Unknown(u)) => tool_error(
                        self.unknown_text(u.id(), "the server replied success but the readback did not verify the effect: this call"),
                        Some((&id, "write_status_unknown")),
                    ),
                    Ok(other) => tool_error(format!("unexpected confirmation {other:?}"), Some((&id, "returned"))),
                    Err(e) => tool_error(format!("the readback could not be recorded ({e}); pathway {id} awaits confirmation"), Some((&id, "returned"))),
                }
            }
            Outcome::Failed(f) => match delivery {
                Some(Delivery::ToolFailed { reply }) => {
                    Ok(with_pathway(reply, f.id(), "repair_required"))
                }
                Some(Delivery::Rejected { error, .. }) => {
                    Err(forwarded(&error, f.id(), "repair_required"))
                }
                _ => tool_error(
                    format!(
                        "the call failed; pathway {} needs repair. See: rpr unresolved --database {}",
                        f.id(),
                        self.database
                    ),
                    Some((f.id(), "repair_required")),
                ),
            },
            Outcome::Unknown(u) => {
                eprintln!(
                    "rpr gate: pathway {} is write_status_unknown; it will not be sent again",
                    u.id()
                );
                self.upstream.forget_tools();
                match delivery {
                    Some(Delivery::Rejected { error, .. }) => {
                        Err(forwarded(&error, u.id(), "write_status_unknown"))
                    }
                    Some(Delivery::Succeeded { .. }) => tool_error(
                        self.unknown_text(
                            u.id(),
                            "the server replied success, but the readback did not verify the effect of this call",
                        ),
                        Some((u.id(), "write_status_unknown")),
                    ),
                    _ => tool_error(
                        self.unknown_text(u.id(), "this call"),
                        Some((u.id(), "write_status_unknown")),
                    ),
                }
            }
            Outcome::Partial(p) => tool_error(
                format!(
                    "the server reports the call only partly done; pathway {} needs repair. See: rpr unresolved --database {}",
                    p.id(),
                    self.database
                ),
                Some((p.id(), "partially_completed")),
            ),
            Outcome::NotSent(n) => tool_error(
                format!(
                    "nothing was sent: {}; pathway {id} stays {state}; the same call again sends it",
                    n.error()
                ),
                Some((&id, &state)),
            ),
            Outcome::Unrecorded(u) => tool_error(
                format!(
                    "the outcome of attempt {} could not be recorded ({}); the pathway will be reported unknown and not sent again",
                    u.attempt, u.error
                ),
                Some((&id, "running")),
            ),
            other => tool_error(format!("unexpected outcome {other:?}"), Some((&id, &state))),
        }
    }
}

/// The server's own result, with the pathway named in `_meta`.
fn reply_of(delivery: Option<Delivery>, id: &str) -> Answer {
    match delivery {
        Some(Delivery::Succeeded { reply }) => Ok(with_pathway(reply, id, "completed")),
        _ => tool_error(
            format!("pathway {id} is completed, but the server's reply was not kept"),
            Some((id, "completed")),
        ),
    }
}

fn with_pathway(mut reply: Value, id: &str, state: &str) -> Value {
    if let Some(obj) = reply.as_object_mut() {
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("dev.rpr/pathway".into(), json!({"id": id, "state": state}));
        }
    }
    reply
}

/// The server's JSON-RPC error, passed on with the pathway in its data.
fn forwarded(error: &Value, id: &str, state: &str) -> ErrorObject {
    let mut e = ErrorObject::new(
        error["code"].as_i64().unwrap_or(codes::INTERNAL_ERROR),
        error["message"]
            .as_str()
            .unwrap_or("the server answered with an error"),
    );
    let mut data = error.get("data").cloned().unwrap_or(Value::Null);
    let note = json!({"id": id, "state": state});
    data = match data {
        Value::Object(mut m) => {
            m.insert("dev.rpr/pathway".into(), note);
            Value::Object(m)
        }
        Value::Null => json!({"dev.rpr/pathway": note}),
        other => json!({"data": other, "dev.rpr/pathway": note}),
    };
    e.data = Some(data);
    e
}

/// How long an elicitation may wait for the person at the client, by default.
pub(crate) const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_mins(10);
