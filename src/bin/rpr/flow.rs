//! The pathway steps of the operator commands: the runtime, the live server and tool, the
//! Human Gate summary, bind → dispatch → readback, and reconciliation.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use rpr::executor::{Binding, Keeping};
use rpr::policy::{Live, Policy};
use rpr::stage::{Bindable, Gated, RepairUnsettled, Returned, Stage, Unknown};
use rpr::token::Reconciled;
use rpr::{Actor, AttemptStatus, Confirmed, Outcome, Pathway, Runtime, StepPoint};
use serde_json::Value;

use crate::Failure;
use crate::config::Config;
use crate::launch::Launch;

/// How a command ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Done: the pathway is completed, or the asked-for step was taken: exit 0.
    Done,
    /// The pathway needs another step (at a gate, unknown, repair): exit 3.
    Pending,
    /// The call was denied (by policy or at the Human Gate); final: exit 4.
    Denied,
    /// Interrupted (`SIGINT`, `SIGTERM`) before anything was sent: exit 130.
    Interrupted,
}

/// What `call --json` reports besides the exit: the pathway the command worked on and the
/// server's reply, as the command learned them (one command per process).
#[derive(Debug, Default, Clone)]
pub(crate) struct Called {
    /// The pathway's id, once the call found or made it.
    pub(crate) pathway: Option<String>,
    /// The server's reply to the call this command sent, as it came.
    pub(crate) reply: Option<Value>,
}

static CALLED: std::sync::Mutex<Called> = std::sync::Mutex::new(Called {
    pathway: None,
    reply: None,
});

fn called_mut() -> std::sync::MutexGuard<'static, Called> {
    CALLED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Notes the pathway this command works on (for `call --json`).
pub(crate) fn note_pathway(id: &str) {
    called_mut().pathway = Some(id.to_owned());
}

/// What this command noted so far.
pub(crate) fn called() -> Called {
    called_mut().clone()
}

/// The lease of the attempts this process dispatches (`--lease`); the library's default
/// when unset.
static LEASE: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// Sets the lease of the attempts this process dispatches (once, before any runtime opens).
pub(crate) fn set_lease(lease: std::time::Duration) {
    let _ = LEASE.set(lease);
}

/// Opens the database with the default evidence bounds.
pub(crate) fn runtime(db: &Path) -> Result<Runtime, Failure> {
    runtime_with(db, rpr::evidence::Bounds::DEFAULT)
}

/// Opens the database; the step hook narrates the write-ahead attempt record.
pub(crate) fn runtime_with(db: &Path, bounds: rpr::evidence::Bounds) -> Result<Runtime, Failure> {
    let mut builder = crate::log::builder(db).bounds(bounds);
    if let Some(lease) = LEASE.get() {
        builder = builder.lease(*lease);
    }
    Ok(builder
        .step_hook(|point| match point {
            StepPoint::AfterAttemptCommit => {
                say!("    attempt record committed durably (status in_flight) — before any byte is sent");
            }
            StepPoint::AfterReply => say!("    the server answered (or the pipe broke); recording the outcome"),
            _ => {}
        })
        .open()
        .map_err(|e| match e {
            // It names the location already.
            rpr::store::StoreError::Unsupported(_) => e.to_string(),
            e => format!(
                "cannot open database {}: {e}",
                rpr::store::shown_location(db)
            ),
        })?)
}

pub(crate) fn short(v: &Value) -> String {
    v.as_str()
        .map_or_else(|| "?".into(), |s| s.chars().take(12).collect())
}

pub(crate) fn print_binding(b: &Binding) {
    say!("  bound to {}", b.target);
    say!(
        "    protocol {}, server {}@{}, capabilities digest {}…, tool digest {}…",
        b.details["protocol_version"].as_str().unwrap_or("?"),
        b.details["server_name"].as_str().unwrap_or("?"),
        b.details["server_version"].as_str().unwrap_or("?"),
        short(&b.details["capabilities_digest"]),
        short(&b.details["tool_digest"]),
    );
}

/// The directory the server of a pathway of `rpr call` ran in, as the call recorded it
/// (`metadata.cwd`); `None` for a pathway proposed before calls recorded it.
pub(crate) fn recorded_directory<S: Stage>(p: &Pathway<S>) -> Result<Option<PathBuf>, Failure> {
    match p.definition().metadata.get("cwd") {
        None => Ok(None),
        Some(Value::String(cwd)) => Ok(Some(PathBuf::from(cwd))),
        Some(other) => Err(format!(
            "pathway {}: its recorded server directory is not a path ({other}); nothing was done",
            p.id()
        )
        .into()),
    }
}

/// How the server of a pathway of `rpr call` was started, as the call recorded it
/// (`metadata.launch`); `None` for a pathway proposed before calls recorded it.
pub(crate) fn recorded_launch<S: Stage>(p: &Pathway<S>) -> Result<Option<Launch>, Failure> {
    match p.definition().metadata.get("launch") {
        None => Ok(None),
        Some(v) => Launch::from_json(v).map(Some).map_err(|e| {
            format!(
                "pathway {}: its recorded server command is not readable ({e}); nothing was done",
                p.id()
            )
            .into()
        }),
    }
}

/// Starts server `server` of the config in `dir` (with `launch`'s command and arguments
/// when given, else the config's), lists its tools and plans `tool` (the policy's notes
/// about unchecked readbacks go to stderr).
pub(crate) fn open_live(
    config: &Config,
    policy: &Policy,
    server: &str,
    tool: &str,
    dir: &Path,
    launch: Option<&Launch>,
) -> Result<Live, Failure> {
    policy.check_configured(config.names())?;
    let command = match launch {
        Some(l) => config.command_as(server, &l.program, &l.args)?,
        None => config.command(server)?,
    }
    .current_dir(dir);
    let started = Live::start(&command, policy, server, tool)?;
    for unchecked in &started.notes {
        note!("note: {unchecked}");
    }
    Ok(started.live)
}

/// Prints the command line of the next step (real mode), or nothing (the demo).
#[derive(Debug)]
pub(crate) struct Hint(Option<[String; 3]>);

impl Hint {
    /// The database is shown as [`rpr::store::shown_location`] shows it: a URL's password
    /// is never printed.
    pub(crate) fn new(config: &str, policy: &str, database: &str) -> Self {
        let database = rpr::store::shown_location(Path::new(database));
        Self(Some([config, policy, &database].map(str::to_owned)))
    }
    /// `rpr VERB … --pathway ID TAIL`, with the config and policy when VERB needs them.
    pub(crate) fn command(&self, verb: &str, id: &str, tail: &str) -> Option<String> {
        let [config, policy, database] = self.0.as_ref()?;
        let files = if matches!(verb, "approve" | "reconcile" | "resume") {
            format!(" --config {config} --policy {policy}")
        } else {
            String::new()
        };
        Some(format!(
            "rpr {verb}{files} --database {database} --pathway {id}{tail}"
        ))
    }
    pub(crate) fn next(&self, verb: &str, id: &str, tail: &str) {
        if let Some(c) = self.command(verb, id, tail) {
            say!("next: {c}");
        }
    }
}

/// Prints what a Human Gate decision is about: the exact target and request.
/// Returns the digest of the binding shown, which the dispatch must match.
pub(crate) fn show_gate<S: Stage>(p: &Pathway<S>, live: &Live) -> Result<String, Failure> {
    let binding = live.binding()?;
    let d = &binding.details;
    let authority = &p.definition().authority;
    say!(
        "Human Gate: pathway {} needs a decision by the approval authority ({}), because {}",
        p.id(),
        authority.approval_authority,
        live.plan.why
    );
    say!(
        "  server     {}: {}, protocol {}, capabilities digest {}…",
        live.server,
        live.client.server().identity(),
        d["protocol_version"].as_str().unwrap_or("?"),
        short(&d["capabilities_digest"])
    );
    say!(
        "  tool       {}, tool digest {}…, input schema digest {}…",
        live.tool.name,
        short(&d["tool_digest"]),
        short(&d["input_schema_digest"])
    );
    say!("  binding    digest {}", binding.digest);
    say!("  request    digest {}", p.request_digest());
    // The whole request, escaped (`say!` escapes the names above).
    let args = crate::shown::pretty(&p.definition().request.arguments);
    say!("  arguments  {}", args.replace('\n', "\n             "));
    Ok(binding.digest)
}

/// A Human Gate decision.
#[derive(Debug)]
pub(crate) enum Gate {
    Approve(Actor),
    /// A break-glass approval, with its reason.
    BreakGlass(Actor, String),
    Deny(Actor),
    Leave,
}

/// Records `approver`'s approval of `p` (a break-glass one with `break_glass`'s reason),
/// then approves it if that makes its quorum. `Ok(Err(Exit::Pending))`: recorded, and the
/// pathway waits at the gate for the approvers named (said on stdout, with the command).
pub(crate) fn grant<S: Gated + 'static>(
    rt: &Runtime,
    p: Pathway<S>,
    approver: &Actor,
    break_glass: Option<&str>,
    shown: Option<&str>,
    hint: &Hint,
) -> Result<Result<Pathway<rpr::stage::Approved>, Exit>, Failure> {
    let id = p.id().to_owned();
    let stays = |e: &dyn std::fmt::Display| format!("{e}; pathway {id} stays at the Human Gate");
    let quorum = if let Some(reason) = break_glass {
        let q = match shown {
            Some(digest) => rt.break_glass_of_binding(&p, approver, reason, digest),
            None => rt.break_glass(&p, approver, reason),
        }
        .map_err(|e| stays(&e))?;
        say!("Human Gate: BREAK-GLASS approval by {approver}, recorded as such: {reason}");
        q
    } else {
        let granted = match shown {
            Some(digest) => rt.grant_approval_of_binding(&p, approver, digest),
            None => rt.grant_approval(&p, approver),
        };
        match granted {
            Ok(_) => {}
            // Already counted: whether the quorum is there now is said below.
            Err(e @ rpr::PathwayError::AlreadyApproved { .. }) => say!("{e}"),
            Err(e) => return Err(stays(&e).into()),
        }
        // Of the binding shown, only the approvals of that binding: one given before the
        // server changed makes no quorum with it (its approver may approve this one).
        let quorum = match shown {
            Some(digest) => rt.quorum_of_binding(&p, digest),
            None => rt.quorum(&p),
        };
        match quorum {
            Ok(q) => q,
            Err(e @ rpr::PathwayError::QuorumShort { .. }) => {
                say!("Human Gate: approval by {approver} recorded; {e}; nothing was sent");
                hint.next("approve", &id, " --as NAME");
                return Ok(Err(Exit::Pending));
            }
            Err(e) => return Err(stays(&e).into()),
        }
    };
    let names: Vec<String> = quorum.approvers().map(ToString::to_string).collect();
    let until = quorum
        .expires_at()
        .map(|t| format!(", until {}", rpr::shown::utc(t)))
        .unwrap_or_default();
    let p = p.approve(rt, quorum)?;
    say!(
        "Human Gate: approved by {} → pathway {id} is APPROVED for this exact request{until}",
        names.join(", ")
    );
    Ok(Ok(p))
}

/// `rpr approve --binding DIGEST`: refused, before anything is recorded, unless the
/// binding the approval would be of (`now`) is the one the approver was shown. `what`
/// names what may have changed since.
pub(crate) fn as_shown(
    id: &str,
    now: &str,
    expected: Option<&str>,
    what: &str,
) -> Result<(), Failure> {
    match expected {
        Some(want) if want != now => Err(format!(
            "nothing was recorded: pathway {id}'s call is bound to {now}, not to {}, the \
             binding you were shown (`--binding`); {what} changed since. Look at it again \
             (`rpr show --pathway {id}`) and approve what it is now",
            rpr::shown::name(want)
        )
        .into()),
        _ => Ok(()),
    }
}

/// Whether the approved pathway `bound` may be sent to what it is bound to: a gate
/// pathway's tool must match its pin (the gate's own rule for what it sends,
/// [`rpr::gate::sender_pinned`]), and the Human Gate approvals that approved it must each
/// have been of that pinned tool; any other pathway's, of this very binding (recorded with
/// them, [`Runtime::approved_bindings`]). A pathway its policy admitted without a Human Gate has
/// no approval to compare. `Err`: why it is not sent, and what to do.
fn approved_as_bound(
    rt: &Runtime,
    live: &Live,
    bound: &Pathway<rpr::stage::Bound>,
    from: rpr::State,
) -> Result<(), String> {
    // What an approval of a gate pathway was of: the tool as pinned (its binding as the
    // server describes it; the bound one carries the policy's class). Of any other pathway:
    // the binding it is bound to.
    let digest = if rpr::gate::is_gate_pathway(bound) {
        rpr::gate::sender_pinned(rt, live).map_err(|e| e.to_string())?
    } else {
        bound.binding().digest.clone()
    };
    let digest = &digest;
    let approvals = rt
        .approved_bindings(bound.id())
        .map_err(|e| e.to_string())?;
    // A pathway `ready_to_resume` has no way back to the Human Gate.
    let again = if from == rpr::State::Approved {
        "Put it back before the Human Gate to approve what is bound now (`rpr hold`, then \
         `rpr escalate`), or end it (`rpr abort`)"
    } else {
        "A repaired pathway cannot go back to the Human Gate: end it (`rpr abort`) and make \
         the call again, to be approved as it is now"
    };
    for a in &approvals {
        match &a.binding_digest {
            Some(d) if d == digest => {}
            Some(d) => {
                let back = if from == rpr::State::Approved {
                    again
                } else {
                    "Send it to the server as it was approved, or end it (`rpr abort`) and make \
                     the call again, to be approved as it is now"
                };
                return Err(format!(
                    "the server changed since the Human Gate: approval {} by {} was of binding \
                     {d}, and the server now binds as {digest}; nobody approved sending it \
                     there. {back}",
                    a.approval, a.approver
                ));
            }
            None => {
                return Err(format!(
                    "approval {} by {} recorded no binding (it was given by an rpr or a gate \
                     before this release, with no pin recorded, or by a host through the \
                     library), so nothing shows that anyone approved sending it to {}. \
                     {again}",
                    a.approval, a.approver, live.server
                ));
            }
        }
    }
    Ok(())
}

/// Asks at the terminal; without a terminal, leaves the pathway at the gate.
pub(crate) fn ask() -> Result<Gate, Failure> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok(Gate::Leave);
    }
    let mut line = String::new();
    let mut read = |prompt: &str| -> Result<String, Failure> {
        print!("{prompt}");
        std::io::stdout().flush()?;
        line.clear();
        stdin.lock().read_line(&mut line)?;
        Ok(line.trim().to_owned())
    };
    let answer = read("Approve, deny, or leave it at the gate? [a/d/L] ")?;
    let approve = match answer.to_lowercase().as_str() {
        "a" | "approve" | "y" | "yes" => true,
        "d" | "deny" | "n" | "no" => false,
        _ => return Ok(Gate::Leave),
    };
    let name = read("Your name (the approval authority): ")?;
    if name.is_empty() {
        return Ok(Gate::Leave);
    }
    Ok(if approve {
        Gate::Approve(Actor::new(name))
    } else {
        Gate::Deny(Actor::new(name))
    })
}

/// Applies a gate decision. `Ok(Ok(p))`: approved; `Ok(Err(exit))`: denied
/// ([`Exit::Denied`]) or left at the gate ([`Exit::Pending`]).
pub(crate) fn decide<S: Gated + 'static>(
    rt: &Runtime,
    p: Pathway<S>,
    gate: Gate,
    shown: &str,
    hint: &Hint,
) -> Result<Result<Pathway<rpr::stage::Approved>, Exit>, Failure> {
    let id = p.id().to_owned();
    match gate {
        Gate::Approve(approver) => grant(rt, p, &approver, None, Some(shown), hint),
        Gate::BreakGlass(approver, reason) => {
            grant(rt, p, &approver, Some(&reason), Some(shown), hint)
        }
        Gate::Deny(actor) => {
            p.deny(rt, &actor, "denied at the Human Gate")?;
            say!("pathway {id} is DENIED by {actor}");
            Ok(Err(Exit::Denied))
        }
        Gate::Leave => {
            say!("pathway {id} is left at the HUMAN_GATE; nothing was sent");
            hint.next("approve", &id, " --as NAME");
            hint.next("deny", &id, " --as NAME");
            Ok(Err(Exit::Pending))
        }
    }
}

/// Binds, dispatches as `actor`, and reads back a mutating call's effect. An approved
/// pathway, or one repaired after it was sent on approvals, is sent only to what its
/// approvers were shown ([`approved_as_bound`]).
pub(crate) fn carry_out<S: Bindable>(
    rt: &Runtime,
    live: &Live,
    p: Pathway<S>,
    actor: &Actor,
    hint: &Hint,
) -> Result<Exit, Failure> {
    let id = p.id().to_owned();
    note_pathway(&id);
    let state = p.state();
    let later = hint
        .command("resume", &id, " --as NAME")
        .map(|c| format!(" Dispatch it later with: {c}"))
        .unwrap_or_default();
    let stays = |e: &dyn std::fmt::Display| {
        format!("{e}\npathway {id} stays {state}; nothing was sent.{later}")
    };
    // Bound with the policy's class, as the gate binds: the policy's `read_only` is the
    // operator's word on a tool whose server claims nothing, and its stricter class
    // overrules a server's `readOnlyHint`.
    let mut executor = Keeping::new(
        live.executor()
            .with_config(rpr::mcp::ExecutorConfig::default().with_class(live.plan.class)),
    );
    let bound = p.bind(&mut executor).map_err(|e| stays(&e))?;
    print_binding(bound.binding());
    // A pathway repaired after an approved attempt is sent again on the same approvals
    // (a repair records no approval), so it is held to them too.
    if matches!(state, rpr::State::Approved | rpr::State::ReadyToResume) {
        // Not "dispatch it later": a later `resume` is held to the same approvals.
        approved_as_bound(rt, live, &bound, state)
            .map_err(|e| format!("{e}\npathway {id} stays {state}; nothing was sent"))?;
    }
    if crate::interrupt::interrupted() {
        // Bound, not sent: the attempt record is not even begun.
        say!("{}", stays(&"interrupted before the send"));
        return Ok(Exit::Interrupted);
    }
    say!("  dispatch by {actor}:");
    match bound.dispatch(rt, actor, &mut executor) {
        Outcome::Completed(done) => {
            // The reply as the server sent it: the stored copy may be bounded (a large
            // result is stored as its digest).
            let reply = match executor.reply() {
                Some(reply) => Some(reply),
                None => rt.reader().attempts(done.id())?.pop().and_then(|a| a.outcome),
            };
            say!("  result: {}", result_text(reply.as_ref()));
            called_mut().reply.clone_from(&reply);
            say!("pathway {} is COMPLETED (a read-only call)", done.id());
            Ok(Exit::Done)
        }
        Outcome::Returned(returned) => {
            called_mut().reply = executor.reply();
            say!("  the server replied success — not proof yet; reading back…");
            confirm(rt, live, returned, hint)
        }
        Outcome::Unknown(u) => {
            let why = rt
                .reader()
                .attempts(u.id())?
                .pop()
                .and_then(|a| a.outcome)
                .and_then(|o| o["reason"].as_str().map(|r| format!(" ({r})")))
                .unwrap_or_default();
            say!(
                "pathway {} is WRITE_STATUS_UNKNOWN — the request was written but its outcome is unknown{why}; \
                 nothing will be re-sent",
                u.id()
            );
            hint.next("reconcile", u.id(), "");
            Ok(Exit::Pending)
        }
        Outcome::Failed(f) => {
            // Say what the attempt record says: nothing sent, the tool failed, or a
            // rejection the policy calls not applied.
            let last = rt.reader().attempts(f.id())?.pop();
            let (status, why) = match &last {
                Some(a) if a.status == AttemptStatus::NotSent => (
                    a.status,
                    format!(
                        "nothing was sent: {}",
                        a.outcome
                            .as_ref()
                            .and_then(|o| o["reason"].as_str())
                            .unwrap_or("the request never reached the server")
                    ),
                ),
                Some(a) if a.status == AttemptStatus::NotApplied => (
                    a.status,
                    "the server rejected the request before acting".to_owned(),
                ),
                _ => (
                    AttemptStatus::Failed,
                    "the tool reported a failure".to_owned(),
                ),
            };
            say!(
                "pathway {} is REPAIR_REQUIRED — attempt {status}: {why}",
                f.id()
            );
            hint.next("repair", f.id(), " --as NAME --evidence TEXT");
            Ok(Exit::Pending)
        }
        Outcome::ReadFailed(f) => {
            let outcome = rt
                .reader()
                .attempts(f.id())?
                .pop()
                .and_then(|a| a.outcome);
            let o = outcome.as_ref().unwrap_or(&Value::Null);
            let why = match (o["reason"].as_str(), o["error"]["message"].as_str()) {
                (Some(reason), _) => reason.to_owned(),
                (None, Some(message)) => format!("the server answered an error: {message}"),
                (None, None) => format!("the tool answered {}", result_text(Some(o))),
            };
            Err(format!(
                "pathway {} is FAILED — the read-only call failed: {why}. A read changes nothing: \
                 there is nothing to repair, and the same read again is a new pathway",
                f.id()
            )
            .into())
        }
        Outcome::Partial(p) => {
            say!(
                "pathway {} is PARTIALLY_COMPLETED — the repair owner must act",
                p.id()
            );
            Ok(Exit::Pending)
        }
        Outcome::NotSent(n) => Err(stays(n.error()).into()),
        Outcome::Unrecorded(u) => Err(format!(
            "the outcome of attempt {} could not be recorded ({}); `rpr unresolved` will report it as unknown",
            u.attempt, u.error
        )
        .into()),
        other => Err(format!("unexpected outcome {other:?}").into()),
    }
}

/// A tool result for people: its `structuredContent` (else its `content`), clipped.
fn result_text(reply: Option<&Value>) -> String {
    let reply = reply.unwrap_or(&Value::Null);
    let shown = match reply.get("structuredContent") {
        Some(v) => v,
        None => &reply["content"],
    };
    let text = shown.to_string();
    match text.char_indices().nth(2000) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// Confirms a returned mutating call by the policy's readback, as the execution actor.
pub(crate) fn confirm(
    rt: &Runtime,
    live: &Live,
    p: Pathway<Returned>,
    hint: &Hint,
) -> Result<Exit, Failure> {
    let actor = p.definition().authority.execution_actor.clone();
    let mut readback = live.plan.readback(&live.client)?;
    match p.confirm(rt, &actor, &mut readback)? {
        Confirmed::Completed(done) => {
            say!(
                "pathway {} is COMPLETED — readback verified the effect",
                done.id()
            );
            Ok(Exit::Done)
        }
        Confirmed::Unknown(u) => {
            say!(
                "pathway {} is WRITE_STATUS_UNKNOWN — the readback did not verify the effect",
                u.id()
            );
            hint.next("reconcile", u.id(), "");
            Ok(Exit::Pending)
        }
        other => Err(format!("unexpected confirmation {other:?}").into()),
    }
}

/// Reads back a pathway sent to repair after a reply: only a not-applied verdict settles it.
pub(crate) fn settle(
    rt: &Runtime,
    live: &Live,
    p: Pathway<RepairUnsettled>,
    hint: &Hint,
) -> Result<Exit, Failure> {
    let mut readback = live.plan.readback(&live.client)?;
    let id = p.id().to_owned();
    match rt.reconcile(&p, &mut readback) {
        Reconciled::NotApplied(token) => {
            p.settle(rt, token)?;
            say!(
                "readback found no effect → verdict not applied → pathway {id} is REPAIR_REQUIRED (settled)"
            );
            hint.next("repair", &id, " --as NAME --evidence TEXT");
            Ok(Exit::Pending)
        }
        Reconciled::Unresolved(token) => {
            let why = unresolved(token.evidence());
            p.keep_unsettled(rt, token)?;
            say!("{why} → pathway {id} stays unsettled (nothing re-sent)");
            Ok(Exit::Pending)
        }
        Reconciled::Applied(token) => {
            p.record_applied(rt, token)?;
            say!(
                "readback found the effect → recorded; pathway {id} cannot be repaired and sent \
                 again: abort it, naming the residual"
            );
            hint.next("abort", &id, " --as NAME --residuals TEXT");
            Ok(Exit::Pending)
        }
        other => Err(format!("unexpected reconciliation {other:?}").into()),
    }
}

/// Why a readback left the verdict unresolved: the readback itself was inconclusive, or it
/// found no effect that cannot be accepted yet (a process that may hold the request may
/// still be alive), and then the runtime's reason.
fn unresolved(evidence: &Value) -> String {
    match evidence.get("not_accepted_because").and_then(Value::as_str) {
        Some(why) => format!("readback found no effect, but that is not accepted: {why}"),
        None => "readback was inconclusive".to_owned(),
    }
}

/// Reconciles an unknown pathway by the policy's readback.
pub(crate) fn reconcile(
    rt: &Runtime,
    live: &Live,
    p: Pathway<Unknown>,
    hint: &Hint,
) -> Result<Exit, Failure> {
    let mut readback = live.plan.readback(&live.client)?;
    let id = p.id().to_owned();
    match rt.reconcile(&p, &mut readback) {
        Reconciled::Applied(token) => {
            p.complete(rt, token)?;
            say!("readback found the effect → verdict applied → pathway {id} is COMPLETED");
            Ok(Exit::Done)
        }
        Reconciled::NotApplied(token) => {
            p.require_repair(rt, token)?;
            say!(
                "readback found no effect → verdict not applied → pathway {id} is REPAIR_REQUIRED"
            );
            hint.next("repair", &id, " --as NAME --evidence TEXT");
            Ok(Exit::Pending)
        }
        Reconciled::Unresolved(token) => {
            let why = unresolved(token.evidence());
            p.keep_unknown(rt, token)?;
            say!("{why} → pathway {id} stays WRITE_STATUS_UNKNOWN (nothing re-sent)");
            Ok(Exit::Pending)
        }
        other => Err(format!("unexpected reconciliation {other:?}").into()),
    }
}
