//! Carrying an admitted call: bind (checked against the pin), the durable attempt record,
//! the call, the reply and its readback, and the honest answer to the client.

use std::sync::Arc;

use rpr::executor::{Binding, Delivery, Request};
use rpr::jsonrpc::{ErrorObject, codes};
use rpr::mcp::{ExecutorConfig, McpClient, McpExecutor, McpReadback, ToolBinding};
use rpr::stage::{Bindable, Bound};
use rpr::{Confirmed, Outcome, Pathway};
use serde_json::{Value, json};

use super::Gate;
use super::call::{Answer, Asked, Live, tool_error};
use crate::flow::Keeping;

impl Gate {
    /// The executor of `live`'s tool for this call: a read-only call is bound to the list its
    /// pin was just checked in; a call that changes the world lists the tools each time.
    pub(crate) fn executor(&self, live: &Live, asked: &Asked) -> Keeping {
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
            // listing three more times.
            config = config.with_tool_list(Arc::clone(&live.list));
        }
        Keeping::new(
            McpExecutor::new(Arc::clone(&live.client), live.tool.name.clone()).with_config(config),
        )
    }

    /// Binds a stored pathway, then [`Gate::send`]s it.
    pub(crate) fn carry<S: Bindable>(&self, p: Pathway<S>, live: &Live, asked: &Asked) -> Answer {
        let id = p.id().to_owned();
        let state = p.state().as_str().to_owned();
        let mut executor = self.executor(live, asked);
        match p.bind(&mut executor) {
            Ok(bound) => self
                .send(bound, executor, live, asked, &state)
                .unwrap_or_else(|| {
                    tool_error(
                        format!("pathway {id} was not sent; it stays {state}"),
                        Some((&id, &state)),
                    )
                }),
            Err(e) => {
                self.upstream.forget_tools();
                tool_error(
                    format!(
                        "pathway {id} could not be bound ({e}); it stays {state}; nothing was sent"
                    ),
                    Some((&id, &state)),
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
        mut executor: Keeping,
        live: &Live,
        asked: &Asked,
        state: &str,
    ) -> Option<Answer> {
        let id = bound.id().to_owned();
        let stays = if bound.is_stored() {
            format!("pathway {id} stays {state}")
        } else {
            "nothing was recorded".to_owned()
        };
        let named = |state: &str| bound.is_stored().then(|| (id.clone(), state.to_owned()));
        if self.down.is_cancelled(&asked.tag) {
            // Not answered either (the client cancelled it): said for the log.
            note!("rpr gate: a call cancelled by the client before it was sent: not sent; {stays}");
            let pathway = named(state);
            return Some(tool_error(
                format!("cancelled by the client before it was sent; nothing was sent and {stays}"),
                pathway.as_ref().map(|(i, s)| (i.as_str(), s.as_str())),
            ));
        }
        if bound.binding().digest != live.expected {
            // The server changed between the pin check and the bind: nothing is sent; the
            // next call lists the tools again and checks the new definition against the pin.
            self.upstream.forget_tools();
            let changed =
                rpr::mcp::changed_fields(&bound.binding().details, &live.bound_details).join(", ");
            let pathway = named(state);
            return Some(tool_error(
                format!(
                    "refused: the server changed while this call was being bound (changed: {changed}; now {}); \
                     nothing was sent and {stays}. Make the call again: the gate checks the \
                     new definition against its pin",
                    bound.binding().target
                ),
                pathway.as_ref().map(|(i, s)| (i.as_str(), s.as_str())),
            ));
        }
        let actor = bound.definition().authority.execution_actor.clone();
        // A mutating call with a readback: the reply and the readback in one durable commit.
        let mut readback = if live.plan.class == rpr::ActionClass::Mutating {
            self.readback(live).ok()
        } else {
            None
        };
        let outcome = match readback.as_mut() {
            Some(readback) => bound.dispatch_and_confirm(&self.rt, &actor, &mut executor, readback),
            None => bound.dispatch(&self.rt, &actor, &mut executor),
        };
        let mut refused = readback
            .as_ref()
            .and_then(|r| r.refused().map(str::to_owned));
        let delivery = executor.delivery.take();
        if let Outcome::NotSent(n) = &outcome
            && matches!(n.error(), rpr::PathwayError::KeyTaken { .. })
        {
            return None;
        }
        Some(match outcome {
            Outcome::Completed(done) => {
                note!("rpr gate: pathway {} completed", done.id());
                reply_of(delivery, &id)
            }
            Outcome::Returned(returned) => {
                let mut readback = match self.readback(live) {
                    Ok(r) => r,
                    Err(e) => {
                        return Some(tool_error(
                            format!(
                                "the server replied success, but the effect cannot be read back ({e}); pathway {id} awaits confirmation (returned). See: rpr unresolved --database {}",
                                self.database
                            ),
                            Some((&id, "returned")),
                        ));
                    }
                };
                let actor = returned.definition().authority.execution_actor.clone();
                let confirmed = returned.confirm(&self.rt, &actor, &mut readback);
                refused = readback.refused().map(str::to_owned);
                match confirmed {
                    Ok(Confirmed::Completed(done)) => {
                        note!("rpr gate: pathway {} completed, readback verified", done.id());
                        reply_of(delivery, &id)
                    }
                    Ok(Confirmed::Unknown(u)) => tool_error(
                        self.unknown_text(u.id(), "the server replied success but the readback did not verify the effect: this call")
                            + &self.refusal(live, refused.as_deref()),
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
            Outcome::ReadFailed(f) => read_failed(delivery, f.id()),
            // Same shape as the Failed arm above: a JSON-RPC error passed on, else the text
            // for its state (unknown and failed say different things).
            Outcome::Unknown(u) => {
                note!(
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
                        ) + &self.refusal(live, refused.as_deref()),
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
            Outcome::NotSent(n)
                if matches!(
                    n.error(),
                    rpr::PathwayError::Store(rpr::store::StoreError::Conflict { .. })
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
            Outcome::Unrecorded(u) => tool_error(
                format!(
                    "the outcome of attempt {} could not be recorded ({}); the pathway will be reported unknown and not sent again",
                    u.attempt, u.error
                ),
                Some((&id, "running")),
            ),
            other => tool_error(format!("unexpected outcome {other:?}"), Some((&id, state))),
        })
    }
}

impl Gate {
    /// The policy's readback of a mutating call, guarded: before the readback tool is
    /// called, the tools are listed again and the tool must still match the pin it matched
    /// when the call was checked. A readback through a tool that changed (silently, or since
    /// the gate last listed) proves nothing: it is not called, and the call stays unknown.
    fn readback(&self, live: &Live) -> Result<McpReadback, crate::Failure> {
        let readback = live.plan.readback(&live.client)?;
        let (Some(pinned), Some(rule)) = (live.reader.clone(), live.plan.readback.as_ref()) else {
            return Ok(readback);
        };
        let (tool, server, database) = (
            rule.tool.clone(),
            live.server.clone(),
            self.database.clone(),
        );
        Ok(readback.guarded_by(move |client: &McpClient, _: &Request| {
            reader_as_pinned(client, &tool, &pinned).map_err(|(why, digest)| {
                let pin = digest.map_or_else(String::new, |d| {
                    format!(
                        ". An operator reviews the change and pins it with: rpr pin --database {database} \
                         --server {server} --tool {tool} --digest {d} --as NAME"
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
            Ok(stored) => stored.state().as_str().to_owned(),
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
            Some((id, &now)),
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
    fn refusal(&self, live: &Live, refused: Option<&str>) -> String {
        let Some(why) = refused else {
            return String::new();
        };
        self.upstream.forget_tools();
        if let (Some(rule), Ok(list)) = (live.plan.readback.as_ref(), self.tools(&live.client))
            && let Some(reader) = list.get(&rule.tool)
            && let Ok(seen) =
                ToolBinding::new(live.client.server(), reader).and_then(|b| b.to_binding())
            && let Err(e) = self.rt.check_pin(
                &live.server,
                &rule.tool,
                &seen,
                &reader.definition,
                &self.actor,
            )
        {
            note!(
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
    let changed = rpr::mcp::changed_fields(&pinned.details, &seen.details).join(", ");
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
        Some(Delivery::ToolFailed { reply }) => Ok(with_pathway(reply, id, "failed")),
        Some(Delivery::Rejected { error, .. }) => Err(forwarded(&error, id, "failed")),
        Some(Delivery::PossiblyWritten { reason } | Delivery::NothingWritten { reason }) => {
            tool_error(
                format!(
                    "the read failed: {reason}. Pathway {id} is failed; a read changes nothing, so \
                 the same read again is a new call"
                ),
                Some((id, "failed")),
            )
        }
        _ => tool_error(
            format!("the read failed; pathway {id} is failed. The same read again is a new call"),
            Some((id, "failed")),
        ),
    }
}

/// The server's own result, with the pathway named in `_meta`.
pub(crate) fn reply_of(delivery: Option<Delivery>, id: &str) -> Answer {
    match delivery {
        Some(Delivery::Succeeded { reply }) => Ok(with_pathway(reply, id, "completed")),
        _ => tool_error(
            format!("pathway {id} is completed, but the server's reply was not kept"),
            Some((id, "completed")),
        ),
    }
}

pub(crate) fn with_pathway(mut reply: Value, id: &str, state: &str) -> Value {
    if let Some(obj) = reply.as_object_mut() {
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("dev.rpr/pathway".into(), json!({"id": id, "state": state}));
        }
    }
    reply
}

/// The server's JSON-RPC error, passed on with the pathway in its data.
pub(crate) fn forwarded(error: &Value, id: &str, state: &str) -> ErrorObject {
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
