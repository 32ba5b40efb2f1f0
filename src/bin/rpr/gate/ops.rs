//! Operator steps on the pathways and pins of `rpr gate`: `rpr pin`, an approval that only
//! approves (the next identical call through the gate sends it), and the live server of a
//! gate pathway, started again from the command line the gate recorded with it.

use std::path::Path;

use rpr::mcp::{ServerCommand, ToolBinding};
use rpr::stage::{Gated, Stage};
use rpr::store::PinCheck;
use rpr::{Actor, Pathway, Runtime};
use serde_json::json;

use crate::config::{Policy, existing_database};
use crate::flow::Live;
use crate::{Exit, Failure};

/// `rpr pin --database DB [--server NAME --tool T --digest D --as NAME]`
#[derive(Debug, clap::Args)]
pub(crate) struct PinArgs {
    /// The gate's database.
    #[arg(long, value_name = "DB")]
    database: String,
    /// The server (as the gate names it) of the tool to pin.
    #[arg(long, value_name = "NAME", requires_all = ["tool", "digest", "actor"])]
    server: Option<String>,
    /// The tool to pin.
    #[arg(long, value_name = "T", requires = "server")]
    tool: Option<String>,
    /// The binding digest you reviewed (the gate's refusal names it): only that binding is pinned.
    #[arg(long, value_name = "D", requires = "server")]
    digest: Option<String>,
    /// Who pins it (recorded).
    #[arg(long = "as", id = "actor", value_name = "NAME", requires = "server")]
    actor: Option<String>,
}

/// `rpr pin`: lists the pins (and the changed bindings waiting), or pins one.
pub(crate) fn pin(args: &PinArgs, json_out: bool) -> Result<Exit, Failure> {
    let db = existing_database(&args.database)?;
    if let (Some(server), Some(tool), Some(digest), Some(actor)) =
        (&args.server, &args.tool, &args.digest, &args.actor)
    {
        let rt = Runtime::open(db)
            .map_err(|e| format!("cannot open database {}: {e}", args.database))?;
        let pin = rt.accept_pin(server, tool, digest, &Actor::new(actor))?;
        if json_out {
            outln!("{}", serde_json::to_string(&pin)?);
        } else {
            say!(
                "pinned `{tool}` of `{server}`: binding {} (by {actor}); the gate accepts calls to it again",
                pin.digest
            );
        }
        return Ok(Exit::Done);
    }
    let store = rpr::store::ReadStore::open_read_only(db)?;
    let pins = store.pins()?;
    if json_out {
        outln!("{}", json!({ "pins": pins }));
        return Ok(Exit::Done);
    }
    for p in &pins {
        say!(
            "{}/{}  pinned {} by {}",
            p.server,
            p.tool,
            p.digest,
            p.pinned_by
        );
        if let Some(seen) = &p.seen {
            let changed = rpr::mcp::changed_fields(&p.binding, &seen.binding).join(", ");
            say!(
                "    CHANGED (calls refused): now {} (changed: {changed}); to accept it: rpr pin --database {} \
                 --server {} --tool {} --digest {} --as NAME",
                seen.digest,
                args.database,
                p.server,
                p.tool,
                seen.digest
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

/// Whether the gate proposed this pathway (it recorded its server command).
pub(crate) fn is_gate_pathway<S: Stage>(p: &Pathway<S>) -> bool {
    p.definition().metadata["gate"]["command"].is_array()
}

/// Approves a gate pathway at the Human Gate without sending it: the gate sends it, once,
/// when the same call comes again.
pub(crate) fn approve_only<S: Gated + 'static>(
    rt: &Runtime,
    p: Pathway<S>,
    approver: &Actor,
) -> Result<Exit, Failure> {
    let id = p.id().to_owned();
    let approval = rt
        .grant_approval(&p, approver)
        .map_err(|e| format!("{e}; pathway {id} stays at the Human Gate"))?;
    p.approve(rt, approval)?;
    say!(
        "pathway {id} is APPROVED by {approver} for this exact request; nothing was sent. \
         The gate sends it, once, when the client makes the same call again"
    );
    Ok(Exit::Done)
}

/// The live server and tool of a gate pathway: the recorded command, started again with
/// this process's environment, planned by `policy`, its readback tool checked against its
/// pin in `rt`'s database.
pub(crate) fn live<S: Stage>(rt: &Runtime, policy: &str, p: &Pathway<S>) -> Result<Live, Failure> {
    let metadata = &p.definition().metadata;
    let argv: Vec<&str> = metadata["gate"]["command"]
        .as_array()
        .ok_or("the pathway was not proposed by `rpr gate` (no recorded server command)")?
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let (program, rest) = argv
        .split_first()
        .ok_or("the recorded server command is empty")?;
    let server = metadata["server"]
        .as_str()
        .ok_or("the pathway does not name its server")?
        .to_owned();
    let policy = Policy::load(policy)?;
    let command = ServerCommand::new(Path::new(program))
        .args(rest)
        .inherit_env(true);
    let name = &p.definition().request.action;
    let live = Live::start(
        &command,
        &format!("cannot start the recorded server `{program}` of `{server}`"),
        &policy,
        &server,
        name,
        |_, _| format!("server `{server}` no longer lists tool `{name}`"),
    )?;
    reader_pinned(rt, &live)?;
    Ok(live)
}

/// A readback of a gate pathway goes only through a readback tool that matches its pin (as
/// in the gate, it is pinned on first sight): one that changed since proves nothing, so the
/// step is refused before anything is read back, and the change waits for `rpr pin`.
fn reader_pinned(rt: &Runtime, live: &Live) -> Result<(), Failure> {
    let Some(rule) = &live.plan.readback else {
        return Ok(());
    };
    let (server, tool) = (&live.server, &rule.tool);
    let list = live
        .client
        .list_tools()
        .map_err(|e| format!("server `{server}`: tools/list failed: {e}"))?;
    let reader = list
        .get(tool)
        .ok_or_else(|| format!("server `{server}` no longer lists the readback tool `{tool}`"))?;
    let binding = ToolBinding::new(live.client.server(), reader)?.to_binding()?;
    match rt.check_pin(server, tool, &binding, &reader.definition, &Actor::new("rpr"))? {
        PinCheck::FirstSight(_) | PinCheck::Matches(_) => Ok(()),
        PinCheck::Changed(pin) => Err(format!(
            "the readback tool `{tool}` of server `{server}` is not the one pinned (changed: {}; now {}): \
             a readback through it proves nothing, so this step did nothing (nothing read back or sent). Review the change and pin it \
             with: rpr pin --database DB --server {server} --tool {tool} --digest {} --as NAME, then run \
             this step again",
            rpr::mcp::changed_fields(&pin.binding, &binding.details).join(", "),
            binding.target,
            binding.digest
        )
        .into()),
    }
}
