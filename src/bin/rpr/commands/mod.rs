//! The operator commands of `rpr` against the servers of an `mcpServers` configuration,
//! and their arguments: `call` (call.rs), the next steps of a pathway (steps.rs) and the
//! read commands (read.rs: `unresolved`, `status`, `verify`; view.rs: `show`, `list`, `log`);
//! the arguments and what they share are here.

mod call;
mod read;
mod steps;
mod view;

pub(crate) use call::call;
pub(crate) use read::{print_json, problem_line, status, unresolved, verify};
pub(crate) use steps::{
    abort, approve, attest, deny, escalate, hold, reconcile, release, repair, require_repair,
    resume, stop,
};
pub(crate) use view::{ListArgs, LogArgs, ShowArgs, list, log, show};

use clap::{Args, ValueEnum};
use rpr::inspect;
use rpr::{Runtime, State};
use serde_json::Value;

use crate::flow::Hint;
use crate::{Exit, Failure};

/// `--database`: the pathway database.
#[derive(Debug, Args)]
pub(crate) struct Database {
    /// The pathway database: a SQLite file, or a `postgres://user:password@host:port/db`
    /// URL (builds with the `postgres` feature). Only `call` and `gate` create one; the
    /// other commands need an existing one.
    #[arg(long, value_name = "DB", env = "RPR_DATABASE", hide_env_values = true)]
    database: String,
}

impl Database {
    /// The location as given.
    pub(crate) fn location(&self) -> &str {
        &self.database
    }

    /// The location as it may be shown (a URL's password hidden).
    pub(crate) fn shown(&self) -> String {
        rpr::store::shown_location(std::path::Path::new(&self.database))
    }
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
    #[command(flatten)]
    at: AtVersion,
}

/// `--at-version N`, for every command that takes a step on one pathway.
#[derive(Debug, Args)]
pub(crate) struct AtVersion {
    /// Take the step only if the pathway is still at this version (as `rpr show` and the
    /// console showed it): what was looked at is what is decided. Refused, nothing done, if
    /// it has moved since.
    #[arg(long = "at-version", value_name = "N")]
    pub(crate) at_version: Option<i64>,
}

/// `--args` for a stored request that was redacted.
#[derive(Debug, Args)]
pub(crate) struct Restore {
    /// The original arguments (JSON text, @FILE or -), needed when the stored request was
    /// redacted (an argument with a secret-looking name); they must have the same digest.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
}

/// The longest `--lease`: a year.
const MAX_LEASE_SECS: u64 = 365 * 24 * 3600;

/// `--lease`: for the commands that dispatch (`call`, `approve`, `resume`).
#[derive(Debug, Args)]
pub(crate) struct Lease {
    /// How long the lease of an attempt this command dispatches runs, in seconds (default
    /// 600). The command renews it every third of it while the call is in flight, so it need
    /// not exceed the call's duration. It decides how soon another process may take the
    /// attempt over when this one cannot be judged by its process (another host name, boot
    /// or PID namespace, or PostgreSQL): a stopped or cut-off host is taken over once it
    /// lapses, and a lapse never counts as proof that the call was not sent. At most a year
    /// (31536000): a lease past what the store can write as a time would leave the attempt
    /// unreadable.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=MAX_LEASE_SECS))]
    pub(crate) lease: Option<u64>,
}

impl Lease {
    /// Applies `--lease` to the runtimes this process opens.
    pub(crate) fn apply(&self) {
        if let Some(secs) = self.lease {
            crate::flow::set_lease(std::time::Duration::from_secs(secs));
        }
    }
}

/// The arguments of `call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    files: Files,
    #[command(flatten)]
    db: Database,
    #[command(flatten)]
    pub(crate) lease: Lease,
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
    /// nothing again (default: derived from the server, tool and arguments). An identical
    /// call still open is answered from its pathway, whatever the key.
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
    pub(crate) step: Step,
    #[command(flatten)]
    restore: Restore,
    #[command(flatten)]
    pub(crate) lease: Lease,
}

/// The arguments of `approve`.
#[derive(Debug, Args)]
pub(crate) struct ApproveArgs {
    #[command(flatten)]
    pub(crate) live: LiveStep,
    /// Approve alone, as one of the policy's `approval.break_glass` actors: recorded as
    /// break-glass, with REASON, whatever the quorum.
    #[arg(long = "break-glass", value_name = "REASON")]
    pub(crate) break_glass: Option<String>,
    /// Approve only the call bound to DIGEST: the binding digest you were shown (the
    /// tool's pinned digest for a call of `rpr gate`, as `rpr show` and the console show
    /// it; the live binding for one of `rpr call`, as `rpr approve` prints it). Refused,
    /// nothing recorded, when the call is bound to anything else now.
    #[arg(long = "binding", value_name = "DIGEST")]
    pub(crate) binding: Option<String>,
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
    #[command(flatten)]
    at: AtVersion,
}

/// The arguments of `deny`, `hold` and `stop`.
#[derive(Debug, Args)]
pub(crate) struct ReasonStep {
    #[command(flatten)]
    pub(crate) step: Step,
    /// Why, recorded in the ledger.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
}

/// The arguments of `repair`.
#[derive(Debug, Args)]
pub(crate) struct RepairArgs {
    #[command(flatten)]
    pub(crate) step: Step,
    /// What was found and done, recorded as the repair evidence.
    #[arg(long, value_name = "TEXT")]
    evidence: String,
}

/// The arguments of `abort`.
#[derive(Debug, Args)]
pub(crate) struct AbortArgs {
    #[command(flatten)]
    pub(crate) step: Step,
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
    pub(crate) step: Step,
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
    /// Also check the signed log with the log's verifier key (KEYFILE.pub): every event
    /// covered by a checkpoint the key signed, and (with --witness STATE) not behind or
    /// inconsistent with the checkpoint the witness last cosigned.
    #[arg(long, value_name = "PUB")]
    key: Option<std::path::PathBuf>,
}

fn hint(files: Option<&Files>, db: &Database) -> Hint {
    Hint::new(
        files.map_or("CONFIG", |f| f.config.as_str()),
        files.map_or("POLICY", |f| f.policy.as_str()),
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

/// Prints a pathway's state and who must act next; `Done` only when it is completed.
fn show_next(rt: &Runtime, id: &str) -> Result<Exit, Failure> {
    let detail = inspect::pathway(&rt.reader(), &find(rt, id)?)?;
    let n = &detail.next;
    say!(
        "pathway {}: {}; next: {} ({})",
        detail.pathway_id,
        detail.state,
        n.action,
        n.detail
    );
    Ok(if detail.state == State::Completed {
        Exit::Done
    } else {
        Exit::Pending
    })
}

/// The database and the pathway of a step command (`--json` reports the pathway after it).
pub(crate) struct Located<'a> {
    db: &'a Database,
    target: &'a Target,
}

impl Step {
    pub(crate) fn located(&self) -> Located<'_> {
        Located {
            db: &self.db,
            target: &self.target,
        }
    }
}

impl ReconcileArgs {
    pub(crate) fn located(&self) -> Located<'_> {
        Located {
            db: &self.db,
            target: &self.target,
        }
    }
}

/// `--json` of a step command: one document on stdout with how the command ended and the
/// pathway as it stands after it (its state, attempts and who acts next), or the error.
pub(crate) fn print_step_json(
    at: &Located<'_>,
    result: &Result<Exit, Failure>,
) -> Result<(), Failure> {
    let wanted = at.target.pathway.as_deref().or(at.target.key.as_deref());
    let doc = step_document(at.db, wanted, result)?;
    outln!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

/// `call --json`: the step document of the pathway the call worked on (found by the call
/// itself, else by its `--key`), and `result`, the server's reply as it came, when this
/// command sent the call and the server answered.
pub(crate) fn print_call_json(
    args: &CallArgs,
    result: &Result<Exit, Failure>,
) -> Result<(), Failure> {
    let called = crate::flow::called();
    let wanted = called.pathway.as_deref().or(args.key.as_deref());
    let mut doc = step_document(&args.db, wanted, result)?;
    if let Some(reply) = called.reply {
        doc["result"] = reply;
    }
    outln!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}

/// `exit` (as the exit status says), `error` when there was one, and `pathway`, the pathway
/// `wanted` (an id or a key) as it stands now, when there is one to show.
fn step_document(
    db: &Database,
    wanted: Option<&str>,
    result: &Result<Exit, Failure>,
) -> Result<serde_json::Value, Failure> {
    let exit = match result {
        Ok(Exit::Done) => "done",
        Ok(Exit::Pending) => "needs_step",
        Ok(Exit::Denied) => "denied",
        Ok(Exit::Interrupted) => "interrupted",
        Err(_) => "error",
    };
    let mut doc = serde_json::json!({ "exit": exit });
    if let Err(e) = result {
        doc["error"] = e.to_string().into();
    }
    let Some(wanted) = wanted else {
        return Ok(doc);
    };
    let found = crate::config::existing_database(&db.database)
        .and_then(|db| Ok(rpr::store::ReadStore::open_read_only(db)?))
        .and_then(|store| {
            let id = find_in(&store, wanted)?;
            Ok(inspect::pathway(&store, &id)?)
        });
    match found {
        Ok(detail) => doc["pathway"] = serde_json::to_value(detail)?,
        Err(e) if result.is_ok() => doc["pathway_error"] = e.to_string().into(),
        Err(_) => {}
    }
    Ok(doc)
}

/// The pathway id for `id_or_key` (a pathway id, or an idempotency key).
fn find(rt: &Runtime, id_or_key: &str) -> Result<String, Failure> {
    find_in(&rt.reader(), id_or_key)
}

/// [`find`] in a read store.
fn find_in(store: &rpr::store::ReadStore, id_or_key: &str) -> Result<String, Failure> {
    if store.pathway(id_or_key)?.is_some() {
        return Ok(id_or_key.to_owned());
    }
    let mut after: Option<String> = None;
    loop {
        let page = store.list_pathways(after.as_deref(), 1000, None)?;
        let Some(last) = page.last() else {
            return Err(format!("no pathway with id or key {id_or_key:?}").into());
        };
        if let Some(r) = page.iter().find(|r| r.idempotency_key == id_or_key) {
            return Ok(r.id.clone());
        }
        after = Some(last.id.clone());
    }
}
