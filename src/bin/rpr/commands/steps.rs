//! The next steps of one stored pathway: `approve`, `deny`, `reconcile`, `repair`, `hold`,
//! `release`, `escalate`, `stop`, `abort`, `attest`, `require-repair` and `resume`.

use rpr::executor::Request;
use rpr::stage::{Abortable, Stage};
use rpr::token::{Attestation, Reconciled};
use rpr::{Actor, Admission, AttemptStatus, Decision, Pathway, Runtime, StoredPathway};
use serde_json::{Value, json};

use super::{
    AbortArgs, ApproveArgs, AtVersion, AttestArgs, Database, LiveFiles, LiveStep, ReasonStep,
    ReconcileArgs, RepairArgs, Restore, Step, Target, Verdict, find, hint, json_object, show_next,
};
use rpr::policy::{Live, Policy};

use crate::config::{Config, existing_database};
use crate::flow::{self, Gate, Hint};
use crate::{Exit, Failure, Usage};

fn live_hint(files: &LiveFiles, db: &Database) -> Hint {
    Hint::new(
        files.config.as_deref().unwrap_or("CONFIG"),
        files.policy.as_deref().unwrap_or("POLICY"),
        &db.database,
    )
}

impl Step {
    /// Opens the database, loads the pathway (at the version `--at-version` names, if
    /// given) and names who takes the step.
    fn open(&self) -> Result<(Runtime, StoredPathway, Actor), Failure> {
        let (rt, stored) = load(&self.db, &self.target, &self.at)?;
        Ok((rt, stored, Actor::new(&self.actor)))
    }
}

impl ReasonStep {
    /// `--reason`, or `default` without one.
    fn reason_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.reason.as_deref().unwrap_or(default)
    }
}

/// Opens an existing database and loads the pathway named by `--pathway` or `--key`.
///
/// With `--at-version`, a pathway at another version is refused, before it is loaded (a
/// load may take an attempt over, a write) and again after: the step that follows writes
/// only if the stored pathway is still at the version loaded (the store's compare-and-set),
/// so nothing after these checks can move it unseen.
fn load(
    db: &Database,
    target: &Target,
    at: &AtVersion,
) -> Result<(Runtime, StoredPathway), Failure> {
    let rt = flow::runtime(existing_database(&db.database)?)?;
    // clap requires exactly one of the two.
    let wanted = target
        .pathway
        .as_deref()
        .or(target.key.as_deref())
        .ok_or("give --pathway ID or --key KEY")?;
    let id = find(&rt, wanted)?;
    let moved = |version: i64, state: rpr::State| -> Failure {
        format!(
            "pathway {id} is at version {version} ({state}), not version {} as it was shown: it changed since; nothing was done. Look at it again (`rpr show`) before deciding",
            at.at_version.unwrap_or_default()
        )
        .into()
    };
    if let (Some(shown), Some(record)) = (at.at_version, rt.pathway_record(&id)?)
        && record.version != shown
    {
        return Err(moved(record.version, record.state));
    }
    let stored = rt.load(&id)?;
    if at.at_version.is_some_and(|shown| stored.version() != shown) {
        return Err(moved(stored.version(), stored.state()));
    }
    Ok((rt, stored))
}

/// The live server and tool a stored pathway was proposed for.
fn live_for<S: Stage>(rt: &Runtime, files: &LiveFiles, p: &Pathway<S>) -> Result<Live, Failure> {
    let policy_path = files.policy.as_deref().ok_or_else(|| {
        Usage("`--policy` is required: the readback and the tool's plan come from it".into())
    })?;
    if rpr::gate::is_gate_pathway(p) {
        let policy = Policy::load(policy_path)?;
        let started = rpr::gate::recorded_live(rt, &policy, p)?;
        for unchecked in &started.notes {
            note!("note: {unchecked}");
        }
        return Ok(started.live);
    }
    let config_path = files.config.as_deref().ok_or_else(|| {
        Usage("`--config` is required (only a pathway proposed by `rpr gate` needs none)".into())
    })?;
    let config = Config::load(config_path)?;
    let policy = Policy::load(policy_path)?;
    let server = p.definition().metadata["server"]
        .as_str()
        .ok_or("the pathway does not name its server (not proposed by this host)")?;
    let dir = match flow::recorded_directory(p)? {
        Some(dir) if dir.is_dir() => {
            if let Ok(configured) = config.directory(server)
                && configured != dir
            {
                note!(
                    "note: the config's server `{server}` would run in {} today; this pathway's \
                     server ran in {}, and runs there again",
                    configured.display(),
                    dir.display()
                );
            }
            dir
        }
        Some(dir) => {
            return Err(format!(
                "pathway {}: its server ran in {}, which is no longer a directory here: a server \
                 started anywhere else may read or write another place, and a readback there \
                 proves nothing. Nothing was done. If a call was sent, settle it by attestation \
                 (`rpr attest`: its evidence or repair owner decides); otherwise end it with \
                 `rpr abort`",
                p.id(),
                dir.display()
            )
            .into());
        }
        None => {
            note!(
                "note: the call that proposed this pathway did not record the directory its server \
                 ran in (an older rpr): the server runs in the config's, and a readback that finds \
                 nothing there proves nothing of a server that keeps its data at a relative path"
            );
            config.directory(server)?
        }
    };
    let launch = if let Some(recorded) = flow::recorded_launch(p)? {
        let change = crate::launch::Change::of(&recorded, &config, server)?;
        if !change.env.is_empty() {
            return Err(format!(
                "pathway {}: the server `{server}` would not run as it ran for the call: {change}. \
                 A server given another environment may read or write another place, and a \
                 readback through it proves nothing. Nothing was done. Give the config the \
                 environment the call had and run this step again; or, if a call was sent, \
                 settle it by attestation (`rpr attest`: its evidence or repair owner \
                 decides); otherwise end it with `rpr abort`",
                p.id()
            )
            .into());
        }
        if !change.is_empty() {
            note!(
                "note: {change}; this pathway's server is started as the call started it: {}",
                recorded.shown()
            );
        }
        Some(recorded)
    } else {
        note!(
            "note: the call that proposed this pathway did not record how its server was \
             started (an older rpr): it is started as the config says today, and a readback \
             through a server started otherwise proves nothing"
        );
        None
    };
    flow::open_live(
        &config,
        &policy,
        server,
        &p.definition().request.action,
        &dir,
        launch.as_ref(),
    )
}

/// Restores a redacted request from `--args` (the full original arguments).
fn restored<S: Stage + 'static>(args: &Restore, p: Pathway<S>) -> Result<Pathway<S>, Failure> {
    if !p.is_redacted() {
        return Ok(p);
    }
    let Some(text) = &args.args else {
        return Err(format!(
            "the stored request of pathway {} was redacted (secret-named arguments); pass the \
             original arguments with --args JSON",
            p.id()
        )
        .into());
    };
    let request = Request::new(p.definition().request.action.clone(), json_object(text)?);
    Ok(p.restore_request(request)?)
}

fn wrong_state(rt: &Runtime, stored: &StoredPathway, command: &str) -> Result<Exit, Failure> {
    let id = stored.id().to_owned();
    say!("`{command}` does not apply to pathway {id} in its state");
    show_next(rt, &id)?;
    let state = rt.reader().pathway(&id)?.map_or_else(
        || "unknown to the store".to_owned(),
        |r| r.state.as_str().to_owned(),
    );
    Err(format!("nothing done to pathway {id}: `{command}` does not apply in state {state}").into())
}

/// `approve`: approves a pathway left at the gate, then carries the call out.
pub(crate) fn approve(args: &ApproveArgs) -> Result<Exit, Failure> {
    let break_glass = args.break_glass.as_deref();
    let binding = args.binding.as_deref();
    let args = &args.live;
    let (rt, stored, approver) = args.step.open()?;
    let hint = live_hint(&args.files, &args.step.db);
    macro_rules! approve_and_go {
        ($p:expr) => {{
            let p = restored(&args.restore, $p)?;
            if rpr::gate::is_gate_pathway(&p) {
                return crate::gate::approve_only(&rt, p, &approver, break_glass, binding, &hint);
            }
            let live = live_for(&rt, &args.files, &p)?;
            let shown = flow::show_gate(&p, &live)?;
            flow::as_shown(p.id(), &shown, binding, "the server")?;
            let executor = p.definition().authority.execution_actor.clone();
            let gate = match break_glass {
                Some(reason) => Gate::BreakGlass(approver, reason.to_owned()),
                None => Gate::Approve(approver),
            };
            match flow::decide(&rt, p, gate, &shown, &hint)? {
                Ok(p) => flow::carry_out(&rt, &live, p, &executor, &hint),
                Err(exit) => Ok(exit),
            }
        }};
    }
    match stored {
        StoredPathway::HumanGate(p) => approve_and_go!(p),
        StoredPathway::AwaitingApproval(p) => approve_and_go!(p),
        other => wrong_state(&rt, &other, "approve"),
    }
}

/// `deny`: denies a pathway left at the gate, or one left proposed (its decision owner
/// admits it with a deny decision: a proposed pathway has no `abort`).
pub(crate) fn deny(args: &ReasonStep) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.step.open()?;
    let reason = args.reason_or("denied at the Human Gate");
    let id = stored.id().to_owned();
    match stored {
        StoredPathway::Proposed(p) => {
            let reason = args.reason_or("denied at admission");
            match p.admit(&rt, &actor, &|_| Decision::Deny(reason.to_owned()))? {
                Admission::Denied(_) => {}
                other => return Err(format!("unexpected admission {other:?}").into()),
            }
        }
        StoredPathway::HumanGate(p) => drop(p.deny(&rt, &actor, reason)?),
        StoredPathway::AwaitingApproval(p) => drop(p.deny(&rt, &actor, reason)?),
        other => return wrong_state(&rt, &other, "deny"),
    }
    say!("pathway {id} is DENIED by {actor}: nothing was or will be sent");
    // The exit status says what became of the pathway, as for `call --deny-as`: 4.
    Ok(Exit::Denied)
}

/// `reconcile`: readback per policy for an unknown (or returned) pathway.
pub(crate) fn reconcile(args: &ReconcileArgs) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.db, &args.target, &args.at)?;
    let hint = live_hint(&args.files, &args.db);
    match stored {
        StoredPathway::Unknown(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&rt, &args.files, &p)?;
            say!(
                "reconciling pathway {} by readback (`{}` on a fresh session of `{}`)",
                p.id(),
                live.plan.readback.as_ref().map_or("?", |r| r.tool.as_str()),
                live.server
            );
            flow::reconcile(&rt, &live, p, &hint)
        }
        StoredPathway::Returned(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&rt, &args.files, &p)?;
            flow::confirm(&rt, &live, p, &hint)
        }
        StoredPathway::RepairUnsettled(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&rt, &args.files, &p)?;
            flow::settle(&rt, &live, p, &hint)
        }
        other => wrong_state(&rt, &other, "reconcile"),
    }
}

/// `repair`: the repair owner records repair evidence; the pathway may then resume.
pub(crate) fn repair(args: &RepairArgs) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.step.open()?;
    let evidence = json!({"text": args.evidence});
    let p = match stored {
        StoredPathway::RepairRequired(p) => p,
        StoredPathway::RepairUnsettled(p) => {
            let id = p.id();
            let found_applied = rt
                .reader()
                .attempts(id)?
                .iter()
                .any(|a| a.id == p.attempt() && a.status == AttemptStatus::Applied);
            if found_applied {
                return Err(format!(
                    "nothing done to pathway {id}: its last attempt was found applied (the effect is there), so a repair and resume would send it again; end it with `rpr abort`, naming the residual"
                )
                .into());
            }
            return Err(format!(
                "nothing done to pathway {id}: it is repair_required, but its last attempt is not settled (it may have taken effect); settle it first with `rpr reconcile` (a readback) or `rpr attest`"
            )
            .into());
        }
        other => return wrong_state(&rt, &other, "repair"),
    };
    let p = p.repair(&rt, &actor, &evidence, None)?;
    say!(
        "pathway {} is READY_TO_RESUME (repaired by {actor})",
        p.id()
    );
    hint(None, &args.step.db).next("resume", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// Says the risk a not-applied attestation accepted, when it accepted one (a sender of the
/// request may still be alive: `accepted_risk`, recorded with the verdict).
fn say_risk(token: &rpr::token::Reconciliation<rpr::token::NotApplied>) {
    if let Some(why) = token.evidence()["accepted_risk"].as_str() {
        say!("  recorded as accepting a risk: {why}");
    }
}

/// The risk accepted by the verdict that settled the attempt pathway `id`'s last repair
/// was of, if it accepted one (`accepted_risk` with a not-applied attestation).
fn accepted_risk(rt: &Runtime, id: &str) -> Result<Option<String>, Failure> {
    let mut risk = RiskOfRepair::default();
    for_each_event(rt, id, |e| risk.fold(e))?;
    Ok(risk.accepted())
}

/// Folds a pathway's events, oldest first, into the risk its last repair rests on.
#[derive(Default)]
struct RiskOfRepair {
    /// Per attempt, the risk its last verdict accepted (none: `None`).
    verdicts: std::collections::HashMap<Value, Option<String>>,
    /// The attempt the last repair was of.
    repaired: Option<Value>,
}

impl RiskOfRepair {
    fn fold(&mut self, e: &Value) {
        match e["kind"].as_str() {
            Some("reconciled") => {
                let risk = e["data"]["evidence"]["accepted_risk"].as_str();
                self.verdicts
                    .insert(e["attempt"].clone(), risk.map(str::to_owned));
            }
            Some("repaired") => self.repaired = Some(e["data"]["attempt"].clone()),
            _ => {}
        }
    }

    fn accepted(mut self) -> Option<String> {
        let attempt = self.repaired.take()?;
        self.verdicts.remove(&attempt).flatten()
    }
}

/// Calls `f` with each of pathway `id`'s events, oldest first.
fn for_each_event(rt: &Runtime, id: &str, mut f: impl FnMut(&Value)) -> Result<(), Failure> {
    const PAGE: usize = 1_000;
    let mut after = 0;
    loop {
        let rows = rt.reader().events(id, after, PAGE)?;
        for row in &rows {
            let e: Value = serde_json::from_str(&row.event)
                .map_err(|e| format!("ledger event {} is not JSON: {e}", row.seq))?;
            f(&e);
        }
        match rows.last() {
            Some(last) if rows.len() == PAGE => after = last.seq,
            _ => return Ok(()),
        }
    }
}

/// `hold`: the stop authority holds an approved pathway before it is dispatched.
pub(crate) fn hold(args: &ReasonStep) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.step.open()?;
    let StoredPathway::Approved(p) = stored else {
        return wrong_state(&rt, &stored, "hold");
    };
    let p = p.hold(&rt, &actor, args.reason_or("held by the stop authority"))?;
    say!("pathway {} is HELD by {actor}", p.id());
    let hint = hint(None, &args.step.db);
    hint.next("release", p.id(), " --as NAME");
    hint.next("escalate", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// `release`: the stop authority releases a held pathway: approved again.
pub(crate) fn release(args: &Step) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.open()?;
    let StoredPathway::Held(p) = stored else {
        return wrong_state(&rt, &stored, "release");
    };
    let p = p.release(&rt, &actor)?;
    say!("pathway {} is APPROVED again (released by {actor})", p.id());
    hint(None, &args.db).next("resume", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// `escalate`: the stop authority sends a held or awaiting pathway to a Human Gate.
pub(crate) fn escalate(args: &Step) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.open()?;
    let id = match stored {
        StoredPathway::Held(p) => p.escalate(&rt, &actor)?.id().to_owned(),
        StoredPathway::AwaitingApproval(p) => p.escalate(&rt, &actor)?.id().to_owned(),
        other => return wrong_state(&rt, &other, "escalate"),
    };
    say!("pathway {id} is at a HUMAN_GATE (escalated by {actor})");
    hint(None, &args.db).next("approve", &id, " --as NAME");
    Ok(Exit::Done)
}

/// `stop`: the stop authority stops a pathway whose success reply was not yet confirmed.
pub(crate) fn stop(args: &ReasonStep) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.step.open()?;
    let StoredPathway::Returned(p) = stored else {
        return wrong_state(&rt, &stored, "stop");
    };
    let p = p.stop(&rt, &actor, args.reason_or("stopped by the stop authority"))?;
    say!("pathway {} is STOPPED by {actor}", p.id());
    hint(None, &args.step.db).next("require-repair", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// `abort`: the residual owner ends a pathway for good, recording what is left behind.
pub(crate) fn abort(args: &AbortArgs) -> Result<Exit, Failure> {
    fn go<S: Abortable + 'static>(
        rt: &Runtime,
        p: Pathway<S>,
        actor: &Actor,
        residuals: &Value,
    ) -> Result<String, Failure> {
        Ok(p.abort(rt, actor, residuals)?.id().to_owned())
    }
    let (rt, stored, actor) = args.step.open()?;
    let residuals = json!({"text": args.residuals});
    let id = match stored {
        StoredPathway::Approved(p) => go(&rt, p, &actor, &residuals)?,
        StoredPathway::Held(p) => go(&rt, p, &actor, &residuals)?,
        StoredPathway::HumanGate(p) => go(&rt, p, &actor, &residuals)?,
        StoredPathway::Stopped(p) => go(&rt, p, &actor, &residuals)?,
        StoredPathway::RepairRequired(p) => go(&rt, p, &actor, &residuals)?,
        StoredPathway::RepairUnsettled(p) => go(&rt, p, &actor, &residuals)?,
        StoredPathway::ReadyToResume(p) => go(&rt, p, &actor, &residuals)?,
        other => return wrong_state(&rt, &other, "abort"),
    };
    say!("pathway {id} is ABORTED by {actor} (final)");
    Ok(Exit::Done)
}

// The verdict is attested by an actor, not read back, and the messages name who.
/// `attest`: the evidence owner or repair owner decides an unknown pathway by attestation.
pub(crate) fn attest(args: &AttestArgs) -> Result<Exit, Failure> {
    let verdict = match args.verdict {
        Verdict::Applied => Attestation::Applied,
        Verdict::NotApplied => Attestation::NotApplied,
        Verdict::Unresolved => Attestation::Unresolved,
    };
    let evidence = json!({"text": args.evidence});
    let (rt, stored, actor) = args.step.open()?;
    let hint = hint(None, &args.step.db);
    let p = match stored {
        StoredPathway::Unknown(p) => p,
        StoredPathway::RepairUnsettled(p) => {
            let id = p.id().to_owned();
            return match rt.attest(&p, &actor, verdict, &evidence)? {
                Reconciled::NotApplied(token) => {
                    say_risk(&token);
                    p.settle(&rt, token)?;
                    say!("{actor} attests not applied → pathway {id} is REPAIR_REQUIRED (settled)");
                    hint.next("repair", &id, " --as NAME --evidence TEXT");
                    Ok(Exit::Pending)
                }
                Reconciled::Unresolved(token) => {
                    p.keep_unsettled(&rt, token)?;
                    say!(
                        "{actor} attests unresolved → pathway {id} stays unsettled (nothing re-sent)"
                    );
                    Ok(Exit::Pending)
                }
                Reconciled::Applied(token) => {
                    p.record_applied(&rt, token)?;
                    say!(
                        "{actor} attests applied → recorded; the effect is there, so pathway {id} \
                         cannot be repaired and resumed (that would send it again): abort it, \
                         naming the residual"
                    );
                    hint.next("abort", &id, " --as NAME --residuals TEXT");
                    Ok(Exit::Pending)
                }
                other => Err(format!("unexpected reconciliation {other:?}").into()),
            };
        }
        other => return wrong_state(&rt, &other, "attest"),
    };
    let id = p.id().to_owned();
    match rt.attest(&p, &actor, verdict, &evidence)? {
        Reconciled::Applied(token) => {
            p.complete(&rt, token)?;
            say!("{actor} attests applied → pathway {id} is COMPLETED");
            Ok(Exit::Done)
        }
        Reconciled::NotApplied(token) => {
            say_risk(&token);
            p.require_repair(&rt, token)?;
            say!("{actor} attests not applied → pathway {id} is REPAIR_REQUIRED");
            hint.next("repair", &id, " --as NAME --evidence TEXT");
            Ok(Exit::Pending)
        }
        Reconciled::Unresolved(token) => {
            p.keep_unknown(&rt, token)?;
            say!(
                "{actor} attests unresolved → pathway {id} stays WRITE_STATUS_UNKNOWN (nothing re-sent)"
            );
            Ok(Exit::Pending)
        }
        other => Err(format!("unexpected reconciliation {other:?}").into()),
    }
}

/// `require-repair`: the repair owner sends a stopped or partially completed pathway to repair.
pub(crate) fn require_repair(args: &Step) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.open()?;
    let id = match stored {
        StoredPathway::Stopped(p) => p.require_repair(&rt, &actor)?.id().to_owned(),
        StoredPathway::PartiallyCompleted(p) => p.require_repair(&rt, &actor)?.id().to_owned(),
        other => return wrong_state(&rt, &other, "require-repair"),
    };
    say!(
        "pathway {id} is REPAIR_REQUIRED (sent to repair by {actor}); it replied before, so it may have taken \
         effect: reconcile it (readback) or attest it not applied before it can be repaired"
    );
    hint(None, &args.db).next("reconcile", &id, "");
    Ok(Exit::Done)
}

/// `resume`: binds and dispatches a new attempt of a repaired (or approved) pathway.
pub(crate) fn resume(args: &LiveStep) -> Result<Exit, Failure> {
    let (rt, stored, actor) = args.step.open()?;
    let hint = live_hint(&args.files, &args.step.db);
    match stored {
        StoredPathway::ReadyToResume(p) => {
            if let Some(why) = accepted_risk(&rt, p.id())? {
                say!("note: the not-applied verdict this resume rests on accepted a risk: {why}");
            }
            let p = restored(&args.restore, p)?;
            let live = live_for(&rt, &args.files, &p)?;
            flow::carry_out(&rt, &live, p, &actor, &hint)
        }
        StoredPathway::Approved(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&rt, &args.files, &p)?;
            flow::carry_out(&rt, &live, p, &actor, &hint)
        }
        other => wrong_state(&rt, &other, "resume"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::RiskOfRepair;

    fn risk(events: &[serde_json::Value]) -> Option<String> {
        let mut r = RiskOfRepair::default();
        for e in events {
            r.fold(e);
        }
        r.accepted()
    }

    fn verdict(attempt: &str, risk: Option<&str>) -> serde_json::Value {
        let mut evidence = json!({"attested": {"text": "checked"}});
        if let Some(why) = risk {
            evidence["accepted_risk"] = json!(why);
        }
        json!({"kind": "reconciled", "attempt": attempt,
               "data": {"verdict": "not_applied", "evidence": evidence}})
    }

    fn repaired(attempt: &str) -> serde_json::Value {
        json!({"kind": "repaired", "data": {"attempt": attempt}})
    }

    #[test]
    fn the_risk_named_is_the_one_the_repaired_attempts_verdict_accepted() {
        assert_eq!(
            risk(&[
                verdict("at_1", Some("the owner may send")),
                repaired("at_1")
            ]),
            Some("the owner may send".into())
        );
        // A later attempt, repaired on a verdict that accepted nothing: no risk named,
        // though an earlier attempt's verdict accepted one.
        assert_eq!(
            risk(&[
                verdict("at_1", Some("the owner may send")),
                repaired("at_1"),
                verdict("at_2", None),
                repaired("at_2"),
            ]),
            None
        );
        // A verdict given again for the same attempt replaces the earlier one.
        assert_eq!(
            risk(&[
                verdict("at_1", None),
                verdict("at_1", Some("a carrier on another host")),
                repaired("at_1"),
            ]),
            Some("a carrier on another host".into())
        );
        // Not repaired (yet): nothing to say.
        assert_eq!(risk(&[verdict("at_1", Some("x"))]), None);
    }
}
