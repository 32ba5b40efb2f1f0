//! The operator commands of `rpr` against the servers of an `mcpServers` configuration,
//! and their arguments.

use std::path::Path;

use clap::{Args, ValueEnum};
use rpr::executor::Request;
use rpr::inspect::{self, MAX_LIMIT};
use rpr::mcp::ArgumentValidator;
use rpr::stage::{Abortable, Stage};
use rpr::store::ReadStore;
use rpr::token::{Attestation, Reconciled};
use rpr::{
    Actor, Admission, Decision, Definition, Pathway, Proposal, Runtime, State, StoredPathway,
};
use serde_json::{Value, json};

use crate::config::{Config, Policy, existing_database};
use crate::flow::{self, Gate, Hint, Live};
use crate::gate;
use crate::{Exit, Failure, Usage};

/// `--database`: the pathway database.
#[derive(Debug, Args)]
pub(crate) struct Database {
    /// The pathway database (SQLite). Only `call` creates one; the other commands need an
    /// existing one.
    #[arg(long, value_name = "DB")]
    database: String,
}

/// `--config` and `--policy`: for the commands that start a server.
#[derive(Debug, Args)]
pub(crate) struct Files {
    /// The MCP client configuration (`mcpServers` JSON) that names the servers.
    #[arg(long, value_name = "F")]
    config: String,
    /// The policy (JSON): who holds which role; Human Gate, class and readback per tool.
    #[arg(long, value_name = "P")]
    policy: String,
}

/// The files of a step that starts the pathway's server again. A pathway proposed by
/// `rpr gate` needs no `--config` (the gate recorded the server's command), and `approve`
/// of one needs neither (the gate sends it when the call comes again).
#[derive(Debug, Args)]
pub(crate) struct LiveFiles {
    /// The MCP client configuration (`mcpServers` JSON) that names the servers.
    #[arg(long, value_name = "F")]
    config: Option<String>,
    /// The policy (JSON): who holds which role; Human Gate, class and readback per tool.
    #[arg(long, value_name = "P")]
    policy: Option<String>,
}

/// `--pathway ID` or `--key KEY`: which pathway (exactly one of the two).
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct Target {
    /// The pathway's id.
    #[arg(long, value_name = "ID")]
    pathway: Option<String>,
    /// The pathway's idempotency key.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
}

/// A step on one pathway of an existing database, taken by `--as NAME`.
#[derive(Debug, Args)]
pub(crate) struct Step {
    #[command(flatten)]
    db: Database,
    #[command(flatten)]
    target: Target,
    /// Who takes the step: checked against the authority stored with the pathway.
    #[arg(long = "as", value_name = "NAME")]
    actor: String,
}

/// `--args` for a stored request that was redacted.
#[derive(Debug, Args)]
pub(crate) struct Restore {
    /// The original arguments (JSON text, @FILE or -), needed when the stored request was
    /// redacted (an argument with a secret-looking name); they must have the same digest.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
}

/// The arguments of `call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    files: Files,
    #[command(flatten)]
    db: Database,
    /// The server, by its name in the configuration.
    #[arg(long, value_name = "NAME")]
    server: String,
    /// The tool to call.
    #[arg(long, value_name = "T")]
    tool: String,
    /// The tool's arguments: JSON text, @FILE (read from a file), or - (stdin).
    #[arg(long, value_name = "JSON")]
    args: String,
    /// The idempotency key: a call with a key already used replays that pathway and sends
    /// nothing again (default: a new key).
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Who proposes the call.
    #[arg(long, value_name = "A", default_value = "agent")]
    actor: String,
    /// Approve at the Human Gate as NAME, without asking.
    #[arg(long, value_name = "NAME", conflicts_with = "deny_as")]
    approve_as: Option<String>,
    /// Deny at the Human Gate as NAME, without asking.
    #[arg(long, value_name = "NAME")]
    deny_as: Option<String>,
}

/// The arguments of `approve` and `resume`: a step that starts the server.
#[derive(Debug, Args)]
pub(crate) struct LiveStep {
    #[command(flatten)]
    files: LiveFiles,
    #[command(flatten)]
    step: Step,
    #[command(flatten)]
    restore: Restore,
}

/// The arguments of `reconcile`.
#[derive(Debug, Args)]
pub(crate) struct ReconcileArgs {
    #[command(flatten)]
    files: LiveFiles,
    #[command(flatten)]
    db: Database,
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    restore: Restore,
}

/// The arguments of `deny`, `hold` and `stop`.
#[derive(Debug, Args)]
pub(crate) struct ReasonStep {
    #[command(flatten)]
    step: Step,
    /// Why, recorded in the ledger.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// The arguments of `repair`.
#[derive(Debug, Args)]
pub(crate) struct RepairArgs {
    #[command(flatten)]
    step: Step,
    /// What was found and done, recorded as the repair evidence.
    #[arg(long, value_name = "TEXT")]
    evidence: String,
}

/// The arguments of `abort`.
#[derive(Debug, Args)]
pub(crate) struct AbortArgs {
    #[command(flatten)]
    step: Step,
    /// What is left behind, recorded with the abort.
    #[arg(long, value_name = "TEXT")]
    residuals: String,
}

/// An attested verdict on an unknown effect.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Verdict {
    /// The effect is there.
    Applied,
    /// The effect is not there.
    NotApplied,
    /// It cannot be told.
    Unresolved,
}

/// The arguments of `attest`.
#[derive(Debug, Args)]
pub(crate) struct AttestArgs {
    #[command(flatten)]
    step: Step,
    /// The verdict.
    #[arg(long, value_name = "VERDICT")]
    verdict: Verdict,
    /// What the verdict rests on, recorded as evidence.
    #[arg(long, value_name = "TEXT")]
    evidence: String,
}

/// The arguments of `verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    db: Database,
    /// A ledger head recorded earlier: the chain must still reach it.
    #[arg(long, value_name = "HASH")]
    head: Option<String>,
}

fn hint(files: Option<&Files>, db: &Database) -> Hint {
    Hint::new(
        files.map_or("CONFIG", |f| f.config.as_str()),
        files.map_or("POLICY", |f| f.policy.as_str()),
        &db.database,
    )
}

fn live_hint(files: &LiveFiles, db: &Database) -> Hint {
    Hint::new(
        files.config.as_deref().unwrap_or("CONFIG"),
        files.policy.as_deref().unwrap_or("POLICY"),
        &db.database,
    )
}

/// `--args`: JSON text, `@FILE` (read from a file: arguments too large for a command
/// line), or `-` (read from stdin).
fn json_object(text: &str) -> Result<Value, Failure> {
    let read;
    let (text, source) = if text == "-" {
        let mut buf = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf)
            .map_err(|e| format!("--args -: cannot read stdin as UTF-8 text: {e}"))?;
        read = buf;
        (read.as_str(), "stdin".to_owned())
    } else if let Some(path) = text.strip_prefix('@') {
        read = std::fs::read_to_string(path)
            .map_err(|e| format!("--args @{path}: cannot read the file as UTF-8 text: {e}"))?;
        (read.as_str(), path.to_owned())
    } else {
        (text, "the command line".to_owned())
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("--args is not valid JSON (from {source}): {e}"))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err("--args must be a JSON object (the tool's arguments)".into())
    }
}

/// `call`: propose → admit → Human Gate → bind → dispatch → readback.
pub(crate) fn call(args: &CallArgs) -> Result<Exit, Failure> {
    let (server, tool) = (args.server.as_str(), args.tool.as_str());
    let arguments = json_object(&args.args)?;
    // clap refuses both at once.
    let gate = match (&args.approve_as, &args.deny_as) {
        (Some(name), _) => Some(Gate::Approve(Actor::new(name))),
        (None, Some(name)) => Some(Gate::Deny(Actor::new(name))),
        (None, None) => None,
    };
    let config = Config::load(&args.files.config)?;
    let policy = Policy::load(&args.files.policy)?;
    let db = &args.db.database;
    let live = Live::open(&config, &policy, server, tool)?;
    let validator = ArgumentValidator::new(&live.tool)?;
    validator.check(&arguments).map_err(|problems| {
        format!(
            "the arguments do not match the input schema of `{tool}`: {}; nothing was recorded or sent",
            problems.join("; ")
        )
    })?;
    let rt = flow::runtime_with(Path::new(db), policy.bounds())?;
    let key = args
        .key
        .clone()
        .unwrap_or_else(|| format!("call-{}-{}", std::process::id(), now_ms()));
    let definition = Definition::new(
        Request::new(tool, arguments),
        live.plan.class,
        &key,
        policy.authority(),
    )
    .with_metadata(json!({"server": server}));
    let proposer = Actor::new(&args.actor);
    let hint = hint(Some(&args.files), &args.db);
    let p = match rt.propose(&proposer, definition)? {
        Proposal::New(p) => {
            println!(
                "proposed by {proposer}: pathway {} ({} on {}, key {key:?})",
                p.id(),
                tool,
                live.server
            );
            p
        }
        // Left proposed by a host that stopped between propose and admit (a crash, a full
        // disk): nothing was ever sent, so the repeated call finishes the admission.
        Proposal::Existing(StoredPathway::Proposed(p)) => {
            println!(
                "idempotency key {key:?} is pathway {}, left proposed (never admitted): admitting it now",
                p.id()
            );
            p
        }
        Proposal::Existing(stored) => {
            let id = stored.id().to_owned();
            drop(stored);
            println!("idempotency key {key:?} is pathway {id}: replayed, nothing sent again");
            return show_next(&rt, &id);
        }
        other => return Err(format!("unexpected proposal {other:?}").into()),
    };
    let decision_owner = p.definition().authority.decision_owner.clone();
    let executor = p.definition().authority.execution_actor.clone();
    match p.admit(&rt, &decision_owner, &|_| live.plan.decision())? {
        Admission::Approved(p) => {
            println!(
                "admitted by {decision_owner}: no Human Gate, because {}",
                live.plan.why
            );
            flow::carry_out(&rt, &live, p, &executor, None, &hint)
        }
        Admission::HumanGate(p) => {
            let shown = flow::show_gate(&p, &live)?;
            let gate = match gate {
                Some(g) => g,
                None => flow::ask()?,
            };
            match flow::decide(&rt, p, gate, &hint)? {
                Ok(p) => flow::carry_out(&rt, &live, p, &executor, Some(&shown), &hint),
                Err(exit) => Ok(exit),
            }
        }
        Admission::Denied(p) => {
            println!("pathway {} is DENIED by policy", p.id());
            Ok(Exit::Denied)
        }
        Admission::AwaitingApproval(p) => {
            println!(
                "pathway {} is AWAITING_APPROVAL: the policy holds it for the approval authority ({}); nothing was sent",
                p.id(),
                p.definition().authority.approval_authority
            );
            hint.next("approve", p.id(), " --as NAME");
            Ok(Exit::Pending)
        }
        other => Err(format!("unexpected admission {other:?}").into()),
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Prints a pathway's state and who must act next; `Done` only when it is completed.
fn show_next(rt: &Runtime, id: &str) -> Result<Exit, Failure> {
    let detail = inspect::pathway(&rt.reader(), &find(rt, id)?)?;
    let n = &detail.next;
    println!(
        "pathway {}: {}; next: {} ({})",
        detail.pathway_id, detail.state, n.action, n.detail
    );
    Ok(if detail.state == State::Completed {
        Exit::Done
    } else {
        Exit::Pending
    })
}

/// The pathway id for `id_or_key` (a pathway id, or an idempotency key).
fn find(rt: &Runtime, id_or_key: &str) -> Result<String, Failure> {
    if rt.reader().pathway(id_or_key)?.is_some() {
        return Ok(id_or_key.to_owned());
    }
    let mut after: Option<String> = None;
    loop {
        let page = rt.reader().list_pathways(after.as_deref(), 1000, None)?;
        let Some(last) = page.last() else {
            return Err(format!("no pathway with id or key {id_or_key:?}").into());
        };
        if let Some(r) = page.iter().find(|r| r.idempotency_key == id_or_key) {
            return Ok(r.id.clone());
        }
        after = Some(last.id.clone());
    }
}

/// Opens an existing database and loads the pathway named by `--pathway` or `--key`.
fn load(db: &Database, target: &Target) -> Result<(Runtime, StoredPathway), Failure> {
    let rt = flow::runtime(existing_database(&db.database)?)?;
    // clap requires exactly one of the two.
    let wanted = target
        .pathway
        .as_deref()
        .or(target.key.as_deref())
        .ok_or("give --pathway ID or --key KEY")?;
    let id = find(&rt, wanted)?;
    let stored = rt.load(&id)?;
    Ok((rt, stored))
}

/// The live server and tool a stored pathway was proposed for.
fn live_for<S: Stage>(files: &LiveFiles, p: &Pathway<S>) -> Result<Live, Failure> {
    let policy_path = files.policy.as_deref().ok_or_else(|| {
        Usage("`--policy` is required: the readback and the tool's plan come from it".into())
    })?;
    if gate::is_gate_pathway(p) {
        return gate::live(policy_path, p);
    }
    let config_path = files.config.as_deref().ok_or_else(|| {
        Usage("`--config` is required (only a pathway proposed by `rpr gate` needs none)".into())
    })?;
    let config = Config::load(config_path)?;
    let policy = Policy::load(policy_path)?;
    let server = p.definition().metadata["server"]
        .as_str()
        .ok_or("the pathway does not name its server (not proposed by this host)")?;
    Live::open(&config, &policy, server, &p.definition().request.action)
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
    println!("`{command}` does not apply to pathway {id} in its state");
    show_next(rt, &id)?;
    let state = rt.reader().pathway(&id)?.map_or_else(
        || "unknown to the store".to_owned(),
        |r| r.state.as_str().to_owned(),
    );
    Err(format!("nothing done to pathway {id}: `{command}` does not apply in state {state}").into())
}

/// `approve`: approves a pathway left at the gate, then carries the call out.
pub(crate) fn approve(args: &LiveStep) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let approver = Actor::new(&args.step.actor);
    let hint = live_hint(&args.files, &args.step.db);
    macro_rules! approve_and_go {
        ($p:expr) => {{
            let p = restored(&args.restore, $p)?;
            if gate::is_gate_pathway(&p) {
                return gate::approve_only(&rt, p, &approver);
            }
            let live = live_for(&args.files, &p)?;
            let shown = flow::show_gate(&p, &live)?;
            let executor = p.definition().authority.execution_actor.clone();
            match flow::decide(&rt, p, Gate::Approve(approver), &hint)? {
                Ok(p) => flow::carry_out(&rt, &live, p, &executor, Some(&shown), &hint),
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
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
    let reason = args.reason.as_deref().unwrap_or("denied at the Human Gate");
    let id = stored.id().to_owned();
    match stored {
        StoredPathway::Proposed(p) => {
            let reason = args.reason.as_deref().unwrap_or("denied at admission");
            match p.admit(&rt, &actor, &|_| Decision::Deny(reason.to_owned()))? {
                Admission::Denied(_) => {}
                other => return Err(format!("unexpected admission {other:?}").into()),
            }
        }
        StoredPathway::HumanGate(p) => drop(p.deny(&rt, &actor, reason)?),
        StoredPathway::AwaitingApproval(p) => drop(p.deny(&rt, &actor, reason)?),
        other => return wrong_state(&rt, &other, "deny"),
    }
    println!("pathway {id} is DENIED by {actor}");
    Ok(Exit::Done)
}

/// `unresolved`: the recovery scan, then every non-terminal pathway and who must act.
pub(crate) fn unresolved(args: &Database, as_json: bool) -> Result<Exit, Failure> {
    let rt = flow::runtime(existing_database(&args.database)?)?;
    // Recovery: an in-flight attempt whose process is gone becomes unknown (recorded).
    let mut running: Vec<String> = Vec::new();
    loop {
        let after = running.last().map(String::as_str);
        let page = rt
            .reader()
            .list_pathways(after, 1000, Some(State::Running))?;
        if page.is_empty() {
            break;
        }
        running.extend(page.into_iter().map(|r| r.id));
    }
    let mut recovered = Vec::new();
    for stored in rt.recover()? {
        if matches!(stored, StoredPathway::Unknown(_)) && running.iter().any(|id| id == stored.id())
        {
            if !as_json {
                println!(
                    "recovered: pathway {} was in flight in a process that is gone: now write_status_unknown",
                    stored.id()
                );
            }
            recovered.push(stored.id().to_owned());
        }
    }
    let mut cursor: Option<String> = None;
    let mut listed = Vec::new();
    let mut count = 0;
    loop {
        let page = inspect::list_unresolved(&rt.reader(), MAX_LIMIT, cursor.as_deref())?;
        for s in &page.pathways {
            count += 1;
            let key = rt
                .reader()
                .pathway(&s.pathway_id)?
                .map(|r| r.idempotency_key)
                .unwrap_or_default();
            if as_json {
                let mut entry = serde_json::to_value(s)?;
                entry["idempotency_key"] = Value::String(key);
                listed.push(entry);
            } else {
                show_unresolved(s, &key, &args.database);
            }
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    if as_json {
        print_json(&json!({"recovered": recovered, "unresolved": listed, "count": count}))?;
    } else {
        println!("{count} unresolved pathway(s)");
    }
    Ok(Exit::Done)
}

/// One unresolved pathway for people: what it is, and who must act next.
fn show_unresolved(s: &inspect::PathwaySummary, key: &str, database: &str) {
    let roles: Vec<&str> = s.next.roles.iter().map(|r| r.as_str()).collect();
    println!(
        "{}  {}  {}  key {key:?}",
        s.pathway_id,
        s.state,
        s.action.as_deref().unwrap_or("?")
    );
    println!(
        "    next: {} by {} ({}) — {}",
        s.next.action,
        if roles.is_empty() {
            "nobody".into()
        } else {
            roles.join(" or ")
        },
        s.next.actors.join(", "),
        s.next.detail
    );
    if s.state == State::Proposed {
        // Stopped between propose and admit: nothing was sent; `abort` is no edge
        // from `proposed`, so the way out is the admission, allowing or denying.
        let decision_owner = s.next.actors.first().map_or("NAME", String::as_str);
        println!(
            "    to admit it: repeat the same `rpr call` (same --key {key:?}, same --args); \
             to refuse it: rpr deny --database {database} --pathway {} --as {decision_owner}",
            s.pathway_id
        );
    }
}

/// Prints one JSON document on stdout.
fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// `reconcile`: readback per policy for an unknown (or returned) pathway.
pub(crate) fn reconcile(args: &ReconcileArgs) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.db, &args.target)?;
    let hint = live_hint(&args.files, &args.db);
    match stored {
        StoredPathway::Unknown(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&args.files, &p)?;
            println!(
                "reconciling pathway {} by readback (`{}` on a fresh session of `{}`)",
                p.id(),
                live.plan.readback.as_ref().map_or("?", |r| r.tool.as_str()),
                live.server
            );
            flow::reconcile(&rt, &live, p, &hint)
        }
        StoredPathway::Returned(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&args.files, &p)?;
            flow::confirm(&rt, &live, p, &hint)
        }
        StoredPathway::RepairUnsettled(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&args.files, &p)?;
            flow::settle(&rt, &live, p, &hint)
        }
        other => wrong_state(&rt, &other, "reconcile"),
    }
}

/// `repair`: the repair owner records repair evidence; the pathway may then resume.
pub(crate) fn repair(args: &RepairArgs) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
    let evidence = json!({"text": args.evidence});
    let StoredPathway::RepairRequired(p) = stored else {
        return wrong_state(&rt, &stored, "repair");
    };
    let p = p.repair(&rt, &actor, &evidence, None)?;
    println!(
        "pathway {} is READY_TO_RESUME (repaired by {actor})",
        p.id()
    );
    hint(None, &args.step.db).next("resume", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// `hold`: the stop authority holds an approved pathway before it is dispatched.
pub(crate) fn hold(args: &ReasonStep) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
    let reason = args
        .reason
        .as_deref()
        .unwrap_or("held by the stop authority");
    let StoredPathway::Approved(p) = stored else {
        return wrong_state(&rt, &stored, "hold");
    };
    let p = p.hold(&rt, &actor, reason)?;
    println!("pathway {} is HELD by {actor}", p.id());
    let hint = hint(None, &args.step.db);
    hint.next("release", p.id(), " --as NAME");
    hint.next("escalate", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// `release`: the stop authority releases a held pathway: approved again.
pub(crate) fn release(args: &Step) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.db, &args.target)?;
    let actor = Actor::new(&args.actor);
    let StoredPathway::Held(p) = stored else {
        return wrong_state(&rt, &stored, "release");
    };
    let p = p.release(&rt, &actor)?;
    println!("pathway {} is APPROVED again (released by {actor})", p.id());
    hint(None, &args.db).next("resume", p.id(), " --as NAME");
    Ok(Exit::Done)
}

/// `escalate`: the stop authority sends a held or awaiting pathway to a Human Gate.
pub(crate) fn escalate(args: &Step) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.db, &args.target)?;
    let actor = Actor::new(&args.actor);
    let id = match stored {
        StoredPathway::Held(p) => p.escalate(&rt, &actor)?.id().to_owned(),
        StoredPathway::AwaitingApproval(p) => p.escalate(&rt, &actor)?.id().to_owned(),
        other => return wrong_state(&rt, &other, "escalate"),
    };
    println!("pathway {id} is at a HUMAN_GATE (escalated by {actor})");
    hint(None, &args.db).next("approve", &id, " --as NAME");
    Ok(Exit::Done)
}

/// `stop`: the stop authority stops a pathway whose success reply was not yet confirmed.
pub(crate) fn stop(args: &ReasonStep) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
    let reason = args
        .reason
        .as_deref()
        .unwrap_or("stopped by the stop authority");
    let StoredPathway::Returned(p) = stored else {
        return wrong_state(&rt, &stored, "stop");
    };
    let p = p.stop(&rt, &actor, reason)?;
    println!("pathway {} is STOPPED by {actor}", p.id());
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
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
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
    println!("pathway {id} is ABORTED by {actor} (final)");
    Ok(Exit::Done)
}

/// `attest`: the evidence owner or repair owner decides an unknown pathway by attestation.
pub(crate) fn attest(args: &AttestArgs) -> Result<Exit, Failure> {
    let verdict = match args.verdict {
        Verdict::Applied => Attestation::Applied,
        Verdict::NotApplied => Attestation::NotApplied,
        Verdict::Unresolved => Attestation::Unresolved,
    };
    let evidence = json!({"text": args.evidence});
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
    let hint = hint(None, &args.step.db);
    let p = match stored {
        StoredPathway::Unknown(p) => p,
        StoredPathway::RepairUnsettled(p) => {
            let id = p.id().to_owned();
            return match rt.attest(&p, &actor, verdict, &evidence)? {
                Reconciled::NotApplied(token) => {
                    p.settle(&rt, token)?;
                    println!(
                        "{actor} attests not applied → pathway {id} is REPAIR_REQUIRED (settled)"
                    );
                    hint.next("repair", &id, " --as NAME --evidence TEXT");
                    Ok(Exit::Pending)
                }
                Reconciled::Unresolved(token) => {
                    p.keep_unsettled(&rt, token)?;
                    println!(
                        "{actor} attests unresolved → pathway {id} stays unsettled (nothing re-sent)"
                    );
                    Ok(Exit::Pending)
                }
                _ => {
                    println!(
                        "{actor} attests applied → the effect is there; pathway {id} cannot be resumed: abort it with residuals"
                    );
                    Ok(Exit::Pending)
                }
            };
        }
        other => return wrong_state(&rt, &other, "attest"),
    };
    let id = p.id().to_owned();
    match rt.attest(&p, &actor, verdict, &evidence)? {
        Reconciled::Applied(token) => {
            p.complete(&rt, token)?;
            println!("{actor} attests applied → pathway {id} is COMPLETED");
            Ok(Exit::Done)
        }
        Reconciled::NotApplied(token) => {
            p.require_repair(&rt, token)?;
            println!("{actor} attests not applied → pathway {id} is REPAIR_REQUIRED");
            hint.next("repair", &id, " --as NAME --evidence TEXT");
            Ok(Exit::Pending)
        }
        Reconciled::Unresolved(token) => {
            p.keep_unknown(&rt, token)?;
            println!(
                "{actor} attests unresolved → pathway {id} stays WRITE_STATUS_UNKNOWN (nothing re-sent)"
            );
            Ok(Exit::Pending)
        }
        other => Err(format!("unexpected reconciliation {other:?}").into()),
    }
}

/// `require-repair`: the repair owner sends a stopped or partially completed pathway to repair.
pub(crate) fn require_repair(args: &Step) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.db, &args.target)?;
    let actor = Actor::new(&args.actor);
    let id = match stored {
        StoredPathway::Stopped(p) => p.require_repair(&rt, &actor)?.id().to_owned(),
        StoredPathway::PartiallyCompleted(p) => p.require_repair(&rt, &actor)?.id().to_owned(),
        other => return wrong_state(&rt, &other, "require-repair"),
    };
    println!(
        "pathway {id} is REPAIR_REQUIRED (sent to repair by {actor}); it replied before, so it may have taken \
         effect: reconcile it (readback) or attest it not applied before it can be repaired"
    );
    hint(None, &args.db).next("reconcile", &id, "");
    Ok(Exit::Done)
}

/// `resume`: binds and dispatches a new attempt of a repaired (or approved) pathway.
pub(crate) fn resume(args: &LiveStep) -> Result<Exit, Failure> {
    let (rt, stored) = load(&args.step.db, &args.step.target)?;
    let actor = Actor::new(&args.step.actor);
    let hint = live_hint(&args.files, &args.step.db);
    match stored {
        StoredPathway::ReadyToResume(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&args.files, &p)?;
            flow::carry_out(&rt, &live, p, &actor, None, &hint)
        }
        StoredPathway::Approved(p) => {
            let p = restored(&args.restore, p)?;
            let live = live_for(&args.files, &p)?;
            flow::carry_out(&rt, &live, p, &actor, None, &hint)
        }
        other => wrong_state(&rt, &other, "resume"),
    }
}

/// `status`: the database's figures, read-only.
pub(crate) fn status(args: &Database, as_json: bool) -> Result<Exit, Failure> {
    let store = ReadStore::open_read_only(existing_database(&args.database)?)?;
    let status = inspect::status(&store)?;
    if as_json {
        print_json(&status)?;
        return Ok(Exit::Done);
    }
    println!("schema version {}", status.schema_version);
    let counts: Vec<String> = status
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(state, n)| format!("{state} {n}"))
        .collect();
    println!(
        "pathways: {} ({})",
        status.counts.values().sum::<i64>(),
        if counts.is_empty() {
            "none".to_owned()
        } else {
            counts.join(", ")
        }
    );
    println!("{} unresolved pathway(s)", status.unresolved_count);
    println!(
        "ledger: {} events, head {}",
        status.ledger_length,
        status.ledger_head.as_deref().unwrap_or("-")
    );
    Ok(Exit::Done)
}

/// `verify`: checks the hash chain and the stored states, read-only.
pub(crate) fn verify(args: &VerifyArgs, as_json: bool) -> Result<Exit, Failure> {
    let store = ReadStore::open_read_only(existing_database(&args.db.database)?)?;
    let report = rpr::ledger::verify(&store, args.head.as_deref())?;
    if as_json {
        print_json(&json!({
            "verified": report.is_ok(),
            "events": report.events,
            "head": report.head,
            "problems": report.problems,
        }))?;
    } else {
        println!(
            "ledger: {} events, head {}",
            report.events,
            report.head.as_deref().unwrap_or("-")
        );
        for p in &report.problems {
            println!(
                "  problem {:?} at seq {:?} pathway {:?}: {}",
                p.kind, p.seq, p.pathway, p.detail
            );
        }
    }
    if report.is_ok() {
        if !as_json {
            println!("chain and states verified: true");
        }
        Ok(Exit::Done)
    } else {
        Err(format!(
            "the ledger does not verify: {} problem(s)",
            report.problems.len()
        )
        .into())
    }
}
