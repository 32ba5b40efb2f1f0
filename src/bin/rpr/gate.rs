//! `rpr gate` (a thin shell over [`rpr::gate::serve_until`]) and the operator steps on its
//! pathways and pins: `rpr pin`, and an approval that only approves (the next identical call
//! through the gate sends it).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use rpr::mcp::ServerCommand;
use rpr::policy::Policy;
use rpr::stage::Gated;
use rpr::{Actor, Pathway, Runtime};
use serde_json::json;

use crate::config::existing_database;
use crate::shown;
use crate::{Exit, Failure};
use rpr::shown::shell_word;

/// `rpr gate --database DB --policy POLICY --name NAME [--actor NAME] -- COMMAND [ARGS...]`
#[derive(Debug, clap::Args)]
pub(crate) struct GateArgs {
    /// The pathway database (created when missing).
    #[arg(long, value_name = "DB", env = "RPR_DATABASE", hide_env_values = true)]
    pub(crate) database: PathBuf,
    /// The policy file (JSON; see docs/gate.md).
    #[arg(long, value_name = "POLICY")]
    pub(crate) policy: PathBuf,
    /// The actor that proposes every call (the agent behind the MCP client).
    #[arg(long, value_name = "NAME", default_value = "agent")]
    pub(crate) actor: String,
    /// The name the policy and the pins know the server by: its key in the host's MCP
    /// configuration. Required: the name a server reports (`serverInfo.name`) is its own
    /// claim and may change; a new one is a binding change, refused until `rpr pin`.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: String,
    /// Seconds a governed `tools/call` (and a request passed through) may take before
    /// its outcome is recorded as unknown.
    #[arg(long, value_name = "SECONDS", default_value_t = rpr::gate::DEFAULT_CALL_TIMEOUT.as_secs())]
    pub(crate) call_timeout: u64,
    /// Seconds the person at the client has to answer a Human Gate elicitation.
    #[arg(long, value_name = "SECONDS", default_value_t = rpr::gate::DEFAULT_APPROVAL_WAIT.as_secs())]
    pub(crate) approval_timeout: u64,
    /// Seconds a call at the Human Gate that nobody can approve at the client (it cannot
    /// elicit, or more approvers are needed) waits for `rpr approve` or `rpr deny` out of
    /// band before it is answered; approved meanwhile, it is sent and answered with its
    /// result. 0: answered at once, with how to approve. Keep it under the client's own
    /// request timeout.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub(crate) approval_wait: u64,
    /// How the records of read-only calls are committed: `process-crash-safe` (without a
    /// sync of their own: they survive a crash of the gate, and a crash of the machine can
    /// lose the last of them) or `synced` (each step synced, as for every call that
    /// changes something, which is always synced).
    #[arg(long, value_name = "HOW", value_enum, default_value_t = ReadRecords::ProcessCrashSafe)]
    pub(crate) read_records: ReadRecords,
    /// Only warnings on stderr: not the line per call's end, server start and pin.
    #[arg(short, long, conflicts_with = "verbose")]
    pub(crate) quiet: bool,
    /// Also the protocol's small events on stderr (cancellations of requests not being
    /// served, answers to requests the gate did not ask).
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// How stderr's lines are written: `text` for people, or `json`, one object per line
    /// (`time`, `level`, `message`).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// The MCP server to govern, started as the gate's child with the gate's environment.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<OsString>,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// For people.
    Text,
    /// One JSON object per line.
    Json,
}

/// `--read-records`: how the steps of read-only calls are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReadRecords {
    /// Each step synced.
    Synced,
    /// Committed without a sync of their own (a crash of the gate loses none of them).
    ProcessCrashSafe,
}

fn utf8(path: &std::path::Path, what: &str) -> Result<String, Failure> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("the {what} path is not valid UTF-8 ({})", path.display()).into())
}

/// Runs the gate until the client closes its stdin.
pub(crate) fn run(args: &GateArgs) -> Result<Exit, Failure> {
    rpr::gate::set_logging(rpr::gate::Logging {
        level: if args.quiet {
            rpr::gate::LogLevel::Warn
        } else if args.verbose {
            rpr::gate::LogLevel::Debug
        } else {
            rpr::gate::LogLevel::Info
        },
        format: match args.log_format {
            LogFormat::Text => rpr::gate::LogFormat::Text,
            LogFormat::Json => rpr::gate::LogFormat::Json,
        },
    });
    let policy_path = utf8(&args.policy, "policy")?;
    let database = utf8(&args.database, "database")?;
    let policy = Policy::load(&policy_path)?;
    policy
        .check_governs(&args.name)
        .map_err(|e| format!("policy {policy_path}: {e}"))?;
    let rt = crate::log::builder(&args.database)
        .bounds(policy.bounds())
        .read_durability(match args.read_records {
            ReadRecords::Synced => rpr::store::ReadDurability::Synced,
            ReadRecords::ProcessCrashSafe => rpr::store::ReadDurability::ProcessCrashSafe,
        })
        .open()
        .map_err(|e| format!("cannot open database {database}: {e}"))?;
    let (program, rest) = args
        .command
        .split_first()
        .ok_or("no server command given after `--`")?;
    let command = ServerCommand::new(program).args(rest).inherit_env(true);
    let mut options =
        rpr::gate::Options::new(&args.name, Actor::new(&args.actor), database, policy_path);
    options.call_timeout = Duration::from_secs(args.call_timeout);
    options.approval_timeout = Duration::from_secs(args.approval_timeout);
    options.approval_wait = Duration::from_secs(args.approval_wait);
    rpr::gate::serve_until(
        rt,
        policy,
        &command,
        options,
        std::io::BufReader::new(std::io::stdin()),
        std::io::stdout(),
        crate::interrupt::flag(),
    )?;
    Ok(if crate::interrupt::interrupted() {
        Exit::Interrupted
    } else {
        Exit::Done
    })
}

/// `rpr pin --database DB [--server NAME --tool T --digest D --as NAME]`
#[derive(Debug, clap::Args)]
pub(crate) struct PinArgs {
    /// The gate's database.
    #[arg(long, value_name = "DB", env = "RPR_DATABASE", hide_env_values = true)]
    database: String,
    /// The server (as the gate names it): of the tool to pin, of the changes to review or
    /// accept.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// Show every changed tool (of --server, else of every server) with what changed in its
    /// binding and a diff of its definition, and the command that accepts them all.
    #[arg(long, conflicts_with_all = ["tool", "digest", "accept", "actor"])]
    review: bool,
    /// Pin TOOL's changed binding if it is still DIGEST, the one reviewed (repeat for each
    /// tool; `--review` prints them). Nothing is pinned when one does not match.
    #[arg(long, value_name = "TOOL=DIGEST", requires_all = ["server", "actor"], conflicts_with_all = ["tool", "digest"])]
    accept: Vec<String>,
    /// The tool to pin.
    #[arg(long, value_name = "T", requires_all = ["server", "digest", "actor"])]
    tool: Option<String>,
    /// The binding digest you reviewed (the gate's refusal names it): only that binding is pinned.
    #[arg(long, value_name = "D", requires = "tool")]
    digest: Option<String>,
    /// Who pins it (recorded).
    #[arg(long = "as", id = "actor", value_name = "NAME", requires = "server")]
    actor: Option<String>,
}

/// `rpr pin`: lists the pins (and the changed bindings waiting), or pins one.
pub(crate) fn pin(args: &PinArgs, json_out: bool) -> Result<Exit, Failure> {
    let db = existing_database(&args.database)?;
    if args.review {
        let store = rpr::store::ReadStore::open_read_only(db)?;
        // Shown as every command shows it: a URL's password is never printed.
        let shown_db = rpr::store::shown_location(db);
        crate::pin_review::review(&shown_db, &store.pins()?, args.server.as_deref(), json_out);
        return Ok(Exit::Done);
    }
    if let (false, Some(server), Some(actor)) = (args.accept.is_empty(), &args.server, &args.actor)
    {
        let pins = rpr::store::ReadStore::open_read_only(db)?.pins()?;
        let rt = crate::log::builder(db)
            .open()
            .map_err(|e| format!("cannot open database {}: {e}", args.database))?;
        return crate::pin_review::accept(
            &rt,
            &pins,
            server,
            &args.accept,
            &Actor::new(actor),
            json_out,
        );
    }
    if let (Some(server), Some(tool), Some(digest), Some(actor)) =
        (&args.server, &args.tool, &args.digest, &args.actor)
    {
        let rt = crate::log::builder(db)
            .open()
            .map_err(|e| format!("cannot open database {}: {e}", args.database))?;
        let actor = Actor::new(actor);
        let pin = rt.accept_pin(server, tool, digest, &actor)?;
        crate::pin_review::announce(&pin, &actor, json_out)?;
        return Ok(Exit::Done);
    }
    let store = rpr::store::ReadStore::open_read_only(db)?;
    let pins = store.pins()?;
    if json_out {
        outln!("{}", json!({ "pins": pins }));
        return Ok(Exit::Done);
    }
    let shown_db = {
        let location = rpr::store::shown_location(db);
        shell_word(&location).unwrap_or_else(|| shown::name(&location))
    };
    for p in &pins {
        say!(
            "{}/{}  pinned {} by {}",
            shown::name(&p.server),
            shown::name(&p.tool),
            p.digest,
            shown::name(&p.pinned_by)
        );
        if let Some(seen) = &p.seen {
            let changed = rpr::mcp::changed_fields(&p.binding, &seen.binding).join(", ");
            say!(
                "    CHANGED (calls refused): now {} (changed: {changed}); to review: rpr pin --database {} \
                 --review --server {}",
                seen.digest,
                shown_db,
                shell_word(&p.server).unwrap_or_else(|| shown::name(&p.server)),
            );
        }
    }
    let waiting = pins.iter().filter(|p| p.seen.is_some()).count();
    say!(
        "{} pin(s), {waiting} changed and refused until pinned",
        pins.len()
    );
    Ok(Exit::Done)
}

/// Approves a gate pathway at the Human Gate without sending it: the gate sends it, once,
/// when the same call comes again. Exit 3: the pathway needs that call.
pub(crate) fn approve_only<S: Gated + 'static>(
    rt: &Runtime,
    p: Pathway<S>,
    approver: &Actor,
    break_glass: Option<&str>,
    expected: Option<&str>,
    hint: &crate::flow::Hint,
) -> Result<Exit, Failure> {
    let id = p.id().to_owned();
    // What the approval is of: the call of the tool as pinned (the console shows that
    // digest). Recorded with the approval; a send to another binding is refused.
    let definition = p.definition();
    let pinned = match definition.metadata["server"].as_str() {
        Some(server) => rt.reader().pin_digest(server, &definition.request.action)?,
        None => None,
    };
    if let Some(digest) = &pinned {
        say!("  the call of the pinned tool: binding digest {digest}");
    } else {
        say!("  no pin is recorded for this tool: the approval names no binding");
    }
    let now = pinned.as_deref().unwrap_or("nothing (no pin is recorded)");
    crate::flow::as_shown(&id, now, expected, "the tool's pin")?;
    if let Err(exit) = crate::flow::grant(rt, p, approver, break_glass, pinned.as_deref(), hint)? {
        return Ok(exit);
    }
    say!(
        "pathway {id}: nothing was sent. \
         The gate sends it, once, when the client makes the same call again"
    );
    // Approved, not done: the call is still to be made (exit 3, as for every pathway that
    // needs another step).
    Ok(Exit::Pending)
}
