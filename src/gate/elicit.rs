//! The Human Gate of a governed call: the person at the client approves or declines through
//! `elicitation/create` (form mode), or, when the client cannot elicit, the call returns a
//! tool error naming the exact `rpr approve` command.

use std::time::Duration;

use crate::mcp::Reply;
use crate::stage::Gated;
use crate::{Actor, Pathway, PathwayError, State};
use serde_json::{Value, json};

use super::Gate;
use super::asked::{APPROVAL_INPUT, Answer, Answered, Asked, Checked, tool_error};
use super::request_state::Claims;
use crate::shown;

/// How many characters of argument values a form shows before it summarises.
const FORM_BUDGET: usize = 4000;

/// How long an elicitation may wait for the person at the client, by default.
pub const DEFAULT_APPROVAL_WAIT: Duration = Duration::from_mins(10);

impl Gate {
    /// The Human Gate: asks the person at the client when it can elicit; otherwise
    /// leaves the pathway at the gate and says how to approve it.
    pub(crate) fn human_gate<S: Gated + 'static>(
        &self,
        p: Pathway<S>,
        checked: &Checked,
        asked: &Asked,
    ) -> Answer {
        let id = p.id().to_owned();
        let approve_hint = format!(
            "Approve it with: {}, then make the same call again \
             (it is sent once, then); or deny it with: rpr deny --database {} --pathway {id} --as NAME",
            self.approve_command(&id, Some(p.core.version), checked),
            self.database
        );
        let can_ask = if asked.era.is_modern() {
            asked.era.elicits_forms()
        } else {
            self.down.elicits_forms()
        };
        if !can_ask {
            let request = p.definition().request.clone();
            let authority = p.definition().authority.approval_authority.clone();
            drop(p);
            if let Some(decided) = self.wait_out_of_band(&id, &request, checked, asked) {
                return decided;
            }
            return tool_error(
                format!(
                    "this call needs a Human Gate decision by the approval authority ({authority}), because {}, and the client \
                     cannot ask (it declared no form elicitation). Pathway {id} waits at the gate; nothing was sent{}. {approve_hint}",
                    checked.live.plan.why,
                    self.waited_for()
                ),
                Some((&id, State::HumanGate)),
            );
        }
        // The whole arguments when they fit the form, else a marked summary that shows the
        // targets first; every string escaped (it may come from the client or the server).
        let whole_at = format!(
            "The whole request (values under secret-like member names redacted): tool rpr.get_pathway \
             {{\"pathway_id\": \"{id}\"}} of `rpr-mcp --database {}`; its request digest is {}.",
            crate::store::shown_location(std::path::Path::new(&self.database)),
            p.request_digest()
        );
        let shown = shown::arguments(&p.definition().request.arguments, FORM_BUDGET, &whole_at);
        let message = shown::text(&format!(
            "rpr gate: approve this call?\n\ntool: {}\nserver: {} ({})\nbinding digest: {}\npathway: {id}\nwhy a Human Gate: {}\n{shown}",
            shown::name(&checked.live.tool.name),
            shown::name(&checked.live.server),
            shown::name(&checked.live.client.server().identity()),
            checked.pinned,
            checked.live.plan.why,
        ));
        let mut params = json!({
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
        // The form again, should an answer come back for a binding not pinned now.
        let params_again = params.clone();
        // `shown_binding`: the binding the form showed, which an approval given in it is of (an
        // answer to an earlier form showed the binding pinned when that form was issued).
        let (reply, shown_binding) = if asked.era.is_modern() {
            match &asked.answered {
                // The answer is for this gating only: a pathway that left the gate since the
                // form was issued (and came back) is at another version, and asked again.
                // A state whose answer was taken before records nothing again.
                Some(Answered {
                    state,
                    pathway,
                    version,
                    binding_digest,
                    answer: Some(answer),
                }) if *pathway == id
                    && *version == p.core.version
                    && self.spent.first_use(state, self.approval_timeout) =>
                {
                    self.turns.form_answered(&id);
                    (Ok(Reply::Result(answer.clone())), binding_digest.clone())
                }
                _ => {
                    params["mode"] = json!("form");
                    return Ok(self.input_required(
                        &id,
                        p.core.version,
                        &checked.pinned,
                        p.request_digest(),
                        params,
                    ));
                }
            }
        } else {
            let reply =
                self.down
                    .request("elicitation/create", Some(params), self.approval_timeout);
            (reply, checked.pinned.clone())
        };
        let approver = p.definition().authority.approval_authority.clone();
        let action = match &reply {
            Ok(Reply::Result(r)) => r["action"].as_str().unwrap_or("").to_owned(),
            _ => String::new(),
        };
        // The form's one field: `true` approves, `false` declines; an `accept` without it
        // (or with anything but a boolean) says neither, and records nothing.
        let approve = match &reply {
            Ok(Reply::Result(r)) => r["content"]["approve"].as_bool(),
            _ => None,
        };
        let said_yes = approve == Some(true);
        match action.as_str() {
            // An answer to a form that showed another binding than the tool is pinned as
            // now (a 2026-07-28 retry that came back after a new pin): it approves nothing,
            // and the person is shown the tool as it is now.
            "accept" if said_yes && shown_binding != checked.pinned => {
                note!(
                    Info,
                    "rpr gate: pathway {id}: the form was answered for binding {shown_binding}, \
                     pinned as {} now; asked again",
                    checked.pinned
                );
                let mut params = params_again;
                params["mode"] = json!("form");
                Ok(self.input_required(
                    &id,
                    p.core.version,
                    &checked.pinned,
                    p.request_digest(),
                    params,
                ))
            }
            "accept" if said_yes => {
                match self
                    .rt
                    .grant_approval_of_binding(&p, &approver, &shown_binding)
                {
                    // Already counted: the quorum decides below.
                    Ok(_) | Err(PathwayError::AlreadyApproved { .. }) => {}
                    Err(e) => {
                        return tool_error(
                            format!(
                                "the approval could not be recorded ({e}); pathway {id} stays at the gate; nothing was sent"
                            ),
                            Some((&id, State::HumanGate)),
                        );
                    }
                }
                // Only the approvals of the binding this answer was given for count: one
                // given before the pin moved does not make a quorum with it.
                let quorum = match self.rt.quorum_of_binding(&p, &shown_binding) {
                    Ok(q) => q,
                    Err(e) => {
                        let request = p.definition().request.clone();
                        drop(p);
                        if let Some(decided) = self.wait_out_of_band(&id, &request, checked, asked)
                        {
                            return decided;
                        }
                        return tool_error(
                            format!(
                                "approved at the client as {}, and recorded; {e}. Pathway {id} stays at the gate and nothing was sent{}; once they approve, the same call sends it. {approve_hint}",
                                shown::name(approver.as_str()),
                                self.waited_for()
                            ),
                            Some((&id, State::HumanGate)),
                        );
                    }
                };
                match p.approve(&self.rt, quorum) {
                    Ok(p) => {
                        note!(
                            Info,
                            "rpr gate: pathway {id} approved at the client (recorded as {})",
                            shown::name(approver.as_str())
                        );
                        self.send_approved(p, checked, asked)
                    }
                    Err(e) => tool_error(
                        format!("the approval could not be applied ({e}); nothing was sent"),
                        Some((&id, State::HumanGate)),
                    ),
                }
            }
            "accept" if approve == Some(false) => self.declined(p, &approver),
            "decline" => self.declined(p, &approver),
            _ => {
                let why = match &reply {
                    Ok(Reply::Result(r)) if r["action"] == "accept" => {
                        "the form came back accepted but without a yes or no (`approve` missing, or not a boolean)"
                            .to_owned()
                    }
                    Ok(Reply::Result(_)) => "the person at the client cancelled".to_owned(),
                    Ok(Reply::Error(e)) => format!("the client could not ask ({})", e.message),
                    Err(e) => e.clone(),
                };
                tool_error(
                    format!(
                        "no Human Gate decision: {why}. Pathway {id} waits at the gate; nothing was sent. Make the same call again to be asked again. {approve_hint}"
                    ),
                    Some((&id, State::HumanGate)),
                )
            }
        }
    }

    /// The person at the client said no: the pathway is denied.
    fn declined<S: Gated + 'static>(&self, p: Pathway<S>, approver: &Actor) -> Answer {
        let id = p.id().to_owned();
        let reason = "declined at the client's Human Gate";
        match p.deny(&self.rt, approver, reason) {
            Ok(_) => tool_error(
                format!(
                    "denied at the Human Gate by the person at the client (pathway {id}); nothing was sent"
                ),
                Some((&id, State::Denied)),
            ),
            Err(e) => tool_error(
                format!(
                    "the denial could not be recorded ({e}); pathway {id} stays at the gate; nothing was sent"
                ),
                Some((&id, State::HumanGate)),
            ),
        }
    }

    /// The Human Gate as a 2026-07-28 multi round-trip request: the approval form in
    /// `inputRequests`, and a `requestState` naming this pathway and request, valid as long
    /// as a form would wait for its answer. Nothing is recorded: the pathway waits at the
    /// gate until the retry brings the person's answer.
    fn input_required(
        &self,
        id: &str,
        version: i64,
        binding_digest: &str,
        request_digest: &str,
        form: Value,
    ) -> Value {
        let claims = Claims {
            pathway: id.to_owned(),
            version,
            binding_digest: binding_digest.to_owned(),
            request_digest: request_digest.to_owned(),
        };
        let state = self.state_key.issue(&claims, self.approval_timeout);
        self.turns
            .form_out(id, std::time::Instant::now() + self.approval_timeout);
        note!(
            Info,
            "rpr gate: pathway {id} asks the client for a Human Gate decision (input_required)"
        );
        json!({
            "resultType": "input_required",
            "inputRequests": {
                APPROVAL_INPUT: {"method": "elicitation/create", "params": form},
            },
            "requestState": state,
            "_meta": {"dev.rpr/pathway": {"id": id, "state": State::HumanGate.as_str()}},
        })
    }
}

/// How often a call waiting for an approval out of band reads its pathway's state.
const WAIT_POLL: Duration = Duration::from_millis(200);
/// How often it tells the client (when the call asked for progress) that it still waits.
const WAIT_PROGRESS: Duration = Duration::from_secs(5);

impl Gate {
    /// Waits up to `approval_wait` for pathway `id`, at the Human Gate, to be decided out
    /// of band (`rpr approve`, `rpr deny`, another approver), reading its stored state. Once
    /// it moved, answers from it as an identical call would (an approved pathway is sent,
    /// once; this call holds its turn). `None`: still undecided when the wait ended, the
    /// client cancelled the call or went away, or the state could not be read; nothing was
    /// sent. A call that asked for progress is told it waits, and for whom.
    fn wait_out_of_band(
        &self,
        id: &str,
        request: &crate::executor::Request,
        checked: &Checked,
        asked: &Asked,
    ) -> Option<Answer> {
        if self.approval_wait.is_zero() {
            return None;
        }
        let start = std::time::Instant::now();
        let deadline = start + self.approval_wait;
        note!(
            Info,
            "rpr gate: pathway {id} waits up to {} s for an approval out of band ({})",
            self.approval_wait.as_secs(),
            self.approve_command(id, None, checked)
        );
        let mut told: Option<std::time::Instant> = None;
        loop {
            if self.down.is_cancelled(&asked.tag)
                || self.down.is_closed()
                || self.stopping.load(std::sync::atomic::Ordering::SeqCst)
            {
                return None;
            }
            match self.rt.pathway_record(id) {
                Ok(Some(r)) if !matches!(r.state, State::HumanGate | State::AwaitingApproval) => {
                    break;
                }
                Ok(Some(_)) => {}
                _ => return None,
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            if told.is_none_or(|t| now.duration_since(t) >= WAIT_PROGRESS) {
                told = Some(now);
                self.waiting_progress(id, asked, checked, now.duration_since(start));
            }
            std::thread::sleep(WAIT_POLL.min(deadline - now));
        }
        let stored = match self.rt.load(id) {
            Ok(stored) => stored,
            Err(e) => {
                return Some(tool_error(
                    format!(
                        "pathway {id} was decided out of band but cannot be read ({e}); nothing was sent"
                    ),
                    None,
                ));
            }
        };
        note!(
            Info,
            "rpr gate: pathway {id} was decided out of band ({}); answering the call that waited",
            stored.state().as_str()
        );
        Some(self.existing(stored, checked, asked, request))
    }

    /// `notifications/progress` for a call that waits for an approval, when it asked for
    /// progress.
    fn waiting_progress(&self, id: &str, asked: &Asked, checked: &Checked, waited: Duration) {
        let Some(token) = asked.progress.as_ref().and_then(|p| p.get("progressToken")) else {
            return;
        };
        self.down.send_value(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {
                "progressToken": token,
                "progress": waited.as_secs(),
                "total": self.approval_wait.as_secs(),
                "message": format!(
                    "waiting for an approval of pathway {id} ({})",
                    self.approve_command(id, None, checked)
                ),
            }
        }));
    }

    /// The command that approves pathway `id` as the person was shown it: at `version` (the
    /// pathway's when the call was answered, if known) and of the binding this call was
    /// checked against (`--binding`: refused, nothing recorded, once the pin moved).
    pub(crate) fn approve_command(
        &self,
        id: &str,
        version: Option<i64>,
        checked: &Checked,
    ) -> String {
        let at = version
            .map(|v| format!(" --at-version {v}"))
            .unwrap_or_default();
        format!(
            "rpr approve --database {} --pathway {id} --as NAME{at} --binding {}",
            self.database, checked.pinned
        )
    }

    /// What a waiting call's answer says of its wait: nothing without one.
    fn waited_for(&self) -> String {
        if self.approval_wait.is_zero() {
            String::new()
        } else {
            format!(
                " (nobody approved or denied it out of band within the {} s this call waited)",
                self.approval_wait.as_secs()
            )
        }
    }
}
