//! Carrying an admitted call: bind (checked against the pin), the durable attempt record,
//! the call, the reply and its readback, and the honest answer to the client.

use std::sync::Arc;

use crate::executor::{Binding, Delivery, Request};
use crate::jsonrpc::{ErrorObject, codes};
use crate::mcp::{ExecutorConfig, McpClient, McpExecutor, McpReadback, SendGuard, ToolBinding};
use crate::stage::{Bindable, Bound};
use crate::{Confirmed, Outcome, Pathway, State};
use serde_json::{Value, json};

use super::Gate;
use super::asked::{Answer, Asked, Checked, tool_error};
use crate::executor::Keeping;

impl Gate {
    /// The executor of `live`'s tool for this call. A read is bound to the list its pin was
    /// just checked in. A call that may change the world and is proposed now (`fresh`) is
    /// bound to that list too and checked against a fresh `tools/list` right before it is
    /// sent (a tool changed since is not sent); one stored earlier (approved at a Human
    /// Gate, say) lists the tools at its bind, its prepare and its send.
    pub(crate) fn executor(
        &self,
        checked: &Checked,
        asked: &Asked,
        fresh: bool,
    ) -> Keeping<McpExecutor> {
        let mut config = ExecutorConfig::default()
            .with_class(checked.live.plan.class)
            .with_call_timeout(self.call_timeout)
            .with_call_tag(asked.tag.clone())
            .with_send_guard(self.cancelled_guard(&asked.tag));
        let mut meta = asked.progress.clone();
        if let Some(level) = asked.era.log_level()
            && checked.live.client.server().era == crate::mcp::Era::Modern
        {
            // The level the 2026-07-28 client asked for, for the server's log of this call.
            let meta = meta.get_or_insert_with(|| json!({}));
            meta[super::era::LOG_LEVEL_META] = json!(level);
        }
        if let (Some(declared), Some(outlet), Ok(digest)) = (
            asked.era.client_side(),
            asked.outlet.as_ref(),
            Request::new(asked.tool.clone(), asked.arguments.clone()).digest(),
        ) && checked.live.client.server().era == crate::mcp::Era::Modern
        {
            // A 2026-07-28 client to a 2026-07-28 server: what it declared it can be asked
            // is declared to the server with the call, and the server's rounds are carried
            // to it across its retries, within this attempt (gate/rounds.rs).
            let meta = meta.get_or_insert_with(|| json!({}));
            meta[super::era::CAPABILITIES_META] = declared.clone();
            config = config.with_input_answerer(
                super::rounds::Carrier {
                    rounds: Arc::clone(&self.rounds),
                    key: Arc::clone(&self.state_key),
                    outlet: Arc::clone(outlet),
                    digest,
                    declared,
                    wait: self.call_timeout,
                }
                .answerer(),
            );
        }
        if let Some(meta) = meta {
            config = config.with_call_meta(meta);
        }
        if checked.live.plan.class == crate::ActionClass::ReadOnly {
            // A read changes nothing: it is bound to the list its pin was just checked in
            // (kept until the server says its tools changed, or restarts) instead of
            // listing three more times.
            config = config.with_tool_list(Arc::clone(&checked.live.list));
        } else if fresh {
            // The pin was checked in this list a moment ago: bind and prepare against it, and
            // list once, at the send, where a change means nothing is sent.
            config = config.with_tool_list_checked_at_send(Arc::clone(&checked.live.list));
        }
        Keeping::new(
            McpExecutor::new(
                Arc::clone(&checked.live.client),
                checked.live.tool.name.clone(),
            )
            .with_config(config)
            .with_listed(Arc::clone(&checked.listed)),
        )
    }

    /// Withdraws the request sent for the client's request `tag` once the client cancelled
    /// it. Asked under the session's lock as the request is queued, while the client's
    /// cancellation marks the request before it looks for it there (gate/cancel.rs): a
    /// cancellation either finds the request sent or keeps it from being sent.
    pub(crate) fn cancelled_guard(&self, tag: &str) -> SendGuard {
        let (down, tag) = (Arc::clone(&self.down), tag.to_owned());
        SendGuard::new(move || {
            down.is_cancelled(&tag)
                .then(|| "cancelled by the client before it was sent".to_owned())
        })
    }

    /// Binds a stored pathway, then [`Gate::send`]s it.
    pub(crate) fn carry<S: Bindable>(
        &self,
        p: Pathway<S>,
        checked: &Checked,
        asked: &Asked,
    ) -> Answer {
        let id = p.id().to_owned();
        let state = p.state();
        let mut executor = self.executor(checked, asked, false);
        match p.bind(&mut executor) {
            Ok(bound) => self
                .send(bound, executor, checked, asked, state)
                .unwrap_or_else(|| {
                    tool_error(
                        format!("pathway {id} was not sent; it stays {state}"),
                        Some((&id, state)),
                    )
                }),
            Err(e) => {
                self.upstream.forget_tools();
                tool_error(
                    format!(
                        "pathway {id} could not be bound ({e}); it stays {state}; nothing was sent"
                    ),
                    Some((&id, state)),
                )
            }
        }
    }

    /// Checks the binding against the pin, records the attempt durably (with the pathway
    /// itself when it is not stored yet), sends, and reads a mutating call's effect back.
    /// `state` is where a stored pathway stays when nothing is sent. `None`: the pathway
    /// was not stored yet and an identical call's, stored first, holds its key (nothing was
    /// sent; the caller answers from that one). A call the client cancelled before this
    /// point is not sent.
    pub(crate) fn send(
        &self,
        bound: Pathway<Bound>,
        mut executor: Keeping<McpExecutor>,
        checked: &Checked,
        asked: &Asked,
        state: State,
    ) -> Option<Answer> {
        let id = bound.id().to_owned();
        let stays = if bound.is_stored() {
            format!("pathway {id} stays {state}")
        } else {
            "nothing was recorded".to_owned()
        };
        let named = |state: State| bound.is_stored().then(|| (id.clone(), state));
        if self.down.is_cancelled(&asked.tag) {
            // Not answered either (the client cancelled it): said for the log.
            note!(
                Info,
                "rpr gate: a call cancelled by the client before it was sent: not sent; {stays}"
            );
            let pathway = named(state);
            return Some(tool_error(
                format!("cancelled by the client before it was sent; nothing was sent and {stays}"),
                pathway.as_ref().map(|(i, s)| (i.as_str(), *s)),
            ));
        }
        if bound.binding().digest != checked.expected.digest {
            // The server changed between the pin check and the bind: nothing is sent; the
            // next call lists the tools again and checks the new definition against the pin.
            self.upstream.forget_tools();
            let changed =
                crate::mcp::changed_fields(&bound.binding().details, &checked.expected.details)
                    .join(", ");
            let pathway = named(state);
            return Some(tool_error(
                format!(
                    "refused: the server changed while this call was being bound (changed: {changed}; now {}); \
                     nothing was sent and {stays}. Make the call again: the gate checks the \
                     new definition against its pin",
                    bound.binding().target
                ),
                pathway.as_ref().map(|(i, s)| (i.as_str(), *s)),
            ));
        }
        let actor = bound.definition().authority.execution_actor.clone();
        // A mutating call with a readback: the reply and the readback in one durable commit.
        let mut readback = if checked.live.plan.class == crate::ActionClass::Mutating {
            self.readback(checked).ok()
        } else {
            None
        };
        let was_stored = bound.is_stored();
        let outcome = match readback.as_mut() {
            Some(readback) => bound.dispatch_and_confirm(&self.rt, &actor, &mut executor, readback),
            // A read (read-only by the policy's class, which the definition and the binding
            // carry): its attempt and outcome in one commit, before the client's answer.
            None => match bound.into_read() {
                Ok(read) => read.dispatch(&self.rt, &actor, &mut executor),
                Err(bound) => bound.dispatch(&self.rt, &actor, &mut executor),
            },
        };
        let mut refused = readback
            .as_ref()
            .and_then(|r| r.refused().map(str::to_owned));
        let delivery = executor.delivery.take();
        // Another call took this call's key, or (in another process on the database, or
        // not stored yet here) stored an identical call that is open: nothing was sent;
        // the call is handled again, answered from that one.
        if let Outcome::NotSent(n) = &outcome
            && matches!(
                n.error(),
                crate::PathwayError::KeyTaken { .. }
                    | crate::PathwayError::Store(crate::store::StoreError::IdenticalOpen { .. })
            )
        {
            return None;
        }
        // An identical read stored first took this read's key: this one was sent and
        // answered, but nothing of it is recorded, so its answer is not given; made again
        // under a new key (a read changes nothing).
        if let Outcome::ReadUnrecorded(u) = &outcome
            && matches!(u.error, crate::PathwayError::KeyTaken { .. })
        {
            note!(
                Info,
                "rpr gate: a read's record lost its key to an identical read stored first; read again under a new key"
            );
            return None;
        }
        Some(match outcome {
            Outcome::Completed(done) => {
                note!(Info, "rpr gate: pathway {} completed", done.id());
                reply_of(delivery, &id)
            }
            Outcome::Returned(returned) => {
                let mut readback = match self.readback(checked) {
                    Ok(r) => r,
                    Err(e) => {
                        return Some(tool_error(
                            format!(
                                "the server replied success, but the effect cannot be read back ({e}); pathway {id} awaits confirmation (returned). See: rpr unresolved --database {}",
                                self.database
                            ),
                            Some((&id, State::Running)),
                        ));
                    }
                };
                let actor = returned.definition().authority.execution_actor.clone();
                let confirmed = returned.confirm(&self.rt, &actor, &mut readback);
                refused = readback.refused().map(str::to_owned);
                match confirmed {
                    Ok(Confirmed::Completed(done)) => {
                        note!(Info, "rpr gate: pathway {} completed, readback verified", done.id());
                        reply_of(delivery, &id)
                    }
                    Ok(Confirmed::Unknown(u)) => tool_error(
                        self.unknown_text(u.id(), "the server replied success but the readback did not verify the effect: this call")
                            + &self.refusal(checked, refused.as_deref()),
                        Some((&id, State::WriteStatusUnknown)),
                    ),
                    Err(e) => tool_error(format!("the readback could not be recorded ({e}); pathway {id} awaits confirmation"), Some((&id, State::Running))),
                }
            }
            Outcome::Failed(f) => match delivery {
                Some(Delivery::Rejected { error, .. }) => {
                    Err(forwarded(&error, f.id(), State::RepairRequired))
                }
                Some(Delivery::NothingWritten { reason }) => {
                    // A tool changed since its pin was checked is found at the send.
                    self.upstream.forget_tools();
                    tool_error(
                        format!(
                            "nothing was sent: {reason}. Pathway {} needs repair before it may be sent \
                             again. See: rpr unresolved --database {}",
                            f.id(),
                            self.database
                        ),
                        Some((f.id(), State::RepairRequired)),
                    )
                }
                _ => tool_error(
                    format!(
                        "the call failed; pathway {} needs repair. See: rpr unresolved --database {}",
                        f.id(),
                        self.database
                    ),
                    Some((f.id(), State::RepairRequired)),
                ),
            },
            Outcome::ReadFailed(f) => read_failed(delivery, f.id()),
            // A JSON-RPC error is passed on, else the text for the state (unknown and
            // failed say different things).
            Outcome::Unknown(u) => {
                note!(
                    Warn,
                    "rpr gate: pathway {} is write_status_unknown; it will not be sent again",
                    u.id()
                );
                self.upstream.forget_tools();
                match delivery {
                    Some(Delivery::Rejected { error, .. }) => {
                        Err(forwarded(&error, u.id(), State::WriteStatusUnknown))
                    }
                    // The server's own error result, passed on: it does not prove the call
                    // did nothing, so the pathway is unknown.
                    Some(Delivery::ToolFailed { reply }) => {
                        Ok(with_pathway(reply, u.id(), State::WriteStatusUnknown))
                    }
                    Some(Delivery::Succeeded { .. }) => tool_error(
                        self.unknown_text(
                            u.id(),
                            "the server replied success, but the readback did not verify the effect of this call",
                        ) + &self.refusal(checked, refused.as_deref()),
                        Some((u.id(), State::WriteStatusUnknown)),
                    ),
                    Some(Delivery::PossiblyWritten { reason }) => tool_error(
                        self.unknown_text(u.id(), "this call") + &format!(" What happened: {reason}."),
                        Some((u.id(), State::WriteStatusUnknown)),
                    ),
                    _ => tool_error(
                        self.unknown_text(u.id(), "this call"),
                        Some((u.id(), State::WriteStatusUnknown)),
                    ),
                }
            }
            Outcome::Partial(p) => tool_error(
                format!(
                    "the server reports the call only partly done; pathway {} needs repair. See: rpr unresolved --database {}",
                    p.id(),
                    self.database
                ),
                Some((p.id(), State::PartiallyCompleted)),
            ),
            Outcome::NotSent(n)
                if matches!(
                    n.error(),
                    crate::PathwayError::Store(crate::store::StoreError::Conflict { .. })
                ) =>
            {
                self.taken_elsewhere(&id)
            }
            Outcome::NotSent(n) => {
                let error = n.error().to_string();
                let pathway = n.into_pathway();
                let stays = if pathway.is_stored() {
                    format!("pathway {id} stays {state}")
                } else {
                    "nothing was recorded".to_owned()
                };
                tool_error(
                    format!("nothing was sent: {error}; {stays}; the same call again sends it"),
                    pathway.is_stored().then_some((id.as_str(), state)),
                )
            }
            Outcome::ReadUnrecorded(u) => tool_error(
                format!(
                    "the read was answered, but its record could not be stored ({}); its answer is \
                     withheld, since nothing may be answered that is not recorded. A read changes \
                     nothing: make the call again{}",
                    u.error,
                    if was_stored {
                        format!("; pathway {id} was not moved by this call")
                    } else {
                        String::new()
                    }
                ),
                None,
            ),
            Outcome::Unrecorded(u) => tool_error(
                format!(
                    "the outcome of attempt {} could not be recorded ({}); the pathway will be reported unknown and not sent again",
                    u.attempt, u.error
                ),
                Some((&id, State::Running)),
            ),
        })
    }
}

impl Gate {
    /// The policy's readback of a mutating call, guarded: before the readback tool is
    /// called, the tools are listed again and the tool must still match the pin it matched
    /// when the call was checked. A readback through a tool that changed (silently, or since
    /// the gate last listed) proves nothing: it is not called, and the call stays unknown.
    fn readback(&self, checked: &Checked) -> Result<McpReadback, crate::policy::PolicyError> {
        let readback = checked.live.plan.readback(&checked.live.client)?;
        let (Some(pinned), Some(rule)) =
            (checked.reader.clone(), checked.live.plan.readback.as_ref())
        else {
            return Ok(readback);
        };
        let (tool, server, database) = (
            rule.tool.clone(),
            checked.live.server.clone(),
            self.database.clone(),
        );
        Ok(readback.guarded_by(move |client: &McpClient, _: &Request| {
            reader_as_pinned(client, &tool, &pinned).map_err(|(why, digest)| {
                let pin = digest.map_or_else(String::new, |d| {
                    format!(
                        ". An operator reviews the change and pins it with: {}",
                        super::pin_command(Some(&database), &server, &tool, &d)
                    )
                });
                format!(
                    "the readback tool `{tool}` of server `{server}` {why}, so a readback through it \
                     proves nothing; it was not called{pin}"
                )
            })
        }))
    }

    /// The answer of a call whose pathway another process took first (the compare-and-set
    /// of its attempt record lost): what the pathway is now and who took it, read after
    /// the loss. This call sent nothing.
    fn taken_elsewhere(&self, id: &str) -> Answer {
        let now = match self.rt.load(id) {
            Ok(stored) => stored.state(),
            Err(e) => {
                return tool_error(
                    format!(
                        "another process took pathway {id} first, and it cannot be read now ({e}); \
                         this call sent nothing"
                    ),
                    None,
                );
            }
        };
        let by = self
            .rt
            .reader()
            .attempts(id)
            .ok()
            .and_then(|mut attempts| attempts.pop())
            .map_or_else(String::new, |a| {
                format!(
                    "; its attempt {} ({}) was started{}",
                    a.id,
                    a.status,
                    self.started_by(id, &a.id)
                )
            });
        tool_error(
            format!(
                "another process took pathway {id} first: it is now {now}{by}; this call sent nothing. \
                 See every open pathway with: rpr unresolved --database {}",
                self.database
            ),
            Some((id, now)),
        )
    }

    /// ` by process PID on HOST`, from the ledger's `attempt_started` event of `attempt`
    /// (its owner), or nothing when that cannot be read.
    fn started_by(&self, id: &str, attempt: &str) -> String {
        let events = self.rt.reader().events(id, 0, 1000).unwrap_or_default();
        events
            .iter()
            .filter_map(|row| serde_json::from_str::<Value>(&row.event).ok())
            .find(|e| e["kind"] == "attempt_started" && e["attempt"] == attempt)
            .and_then(|e| {
                let mut owner = e["data"]["owner"].as_str()?.split('/');
                let (host, pid) = (owner.next()?, owner.next()?);
                Some(format!(" by process {pid} on {host}"))
            })
            .unwrap_or_default()
    }

    /// Why the readback proved nothing, for the answer (empty when it ran). A readback tool
    /// that changed is recorded as a change waiting for `rpr pin`, and the tools are listed
    /// again before the next call, which refuses the tool until it is pinned.
    fn refusal(&self, checked: &Checked, refused: Option<&str>) -> String {
        let Some(why) = refused else {
            return String::new();
        };
        self.upstream.forget_tools();
        if let (Some(rule), Ok(list)) = (
            checked.live.plan.readback.as_ref(),
            self.tools(&checked.live.client),
        ) && let Some(reader) = list.get(&rule.tool)
            && let Ok(seen) =
                ToolBinding::new(checked.live.client.server(), reader).and_then(|b| b.to_binding())
            && let Err(e) = self.rt.check_pin(
                &checked.live.server,
                &rule.tool,
                &seen,
                &reader.definition,
                &self.actor,
            )
        {
            note!(
                Warn,
                "rpr gate: the pin of `{}` cannot be checked: {e}",
                rule.tool
            );
        }
        format!(" The readback proved nothing: {why}.")
    }
}

/// Whether `tool`, listed now, is still bound as `pinned`: `Err` says what changed, with
/// the digest it has now when it has one.
fn reader_as_pinned(
    client: &McpClient,
    tool: &str,
    pinned: &Binding,
) -> Result<(), (String, Option<String>)> {
    let list = client.list_tools().map_err(|e| {
        (
            format!("could not be checked against its pin (`tools/list` failed: {e})"),
            None,
        )
    })?;
    let reader = list
        .get(tool)
        .ok_or_else(|| ("is no longer listed by the server".to_owned(), None))?;
    let seen = ToolBinding::new(client.server(), reader)
        .and_then(|b| b.to_binding())
        .map_err(|e| (format!("cannot be bound ({e})"), None))?;
    if seen.digest == pinned.digest {
        return Ok(());
    }
    let changed = crate::mcp::changed_fields(&pinned.details, &seen.details).join(", ");
    Err((
        format!(
            "is not the one pinned (changed: {changed}; now {})",
            seen.target
        ),
        Some(seen.digest),
    ))
}

/// The answer to a read that failed: the server's own error result or JSON-RPC error,
/// else why it failed (timed out, cut off, cancelled), with the pathway, which is `failed`.
fn read_failed(delivery: Option<Delivery>, id: &str) -> Answer {
    match delivery {
        Some(Delivery::ToolFailed { reply }) => Ok(with_pathway(reply, id, State::Failed)),
        Some(Delivery::Rejected { error, .. }) => Err(forwarded(&error, id, State::Failed)),
        Some(Delivery::PossiblyWritten { reason } | Delivery::NothingWritten { reason }) => {
            tool_error(
                format!(
                    "the read failed: {reason}. Pathway {id} is failed; a read changes nothing, so \
                 the same read again is a new call"
                ),
                Some((id, State::Failed)),
            )
        }
        _ => tool_error(
            format!("the read failed; pathway {id} is failed. The same read again is a new call"),
            Some((id, State::Failed)),
        ),
    }
}

/// The server's own result, with the pathway named in `_meta`.
pub(crate) fn reply_of(delivery: Option<Delivery>, id: &str) -> Answer {
    match delivery {
        Some(Delivery::Succeeded { reply }) => Ok(with_pathway(reply, id, State::Completed)),
        _ => tool_error(
            format!("pathway {id} is completed, but the server's reply was not kept"),
            Some((id, State::Completed)),
        ),
    }
}

/// The server's own result, with the pathway and its stored state named in `_meta`.
pub(crate) fn with_pathway(mut reply: Value, id: &str, state: State) -> Value {
    if let Some(obj) = reply.as_object_mut() {
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "dev.rpr/pathway".into(),
                json!({"id": id, "state": state.as_str()}),
            );
        }
    }
    reply
}

/// The server's JSON-RPC error, passed on with the pathway in its data.
pub(crate) fn forwarded(error: &Value, id: &str, state: State) -> ErrorObject {
    let mut e = ErrorObject::new(
        error["code"].as_i64().unwrap_or(codes::INTERNAL_ERROR),
        error["message"]
            .as_str()
            .unwrap_or("the server answered with an error"),
    );
    let mut data = error.get("data").cloned().unwrap_or(Value::Null);
    let note = json!({"id": id, "state": state.as_str()});
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
