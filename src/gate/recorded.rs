//! The live server of a gate pathway, for an operator step (approve, resume, reconcile):
//! started again from the command line the gate recorded with the pathway.

use crate::mcp::{ServerCommand, ToolBinding};
use crate::policy::{Live, Policy, Started};
use crate::stage::Stage;
use crate::store::PinCheck;
use crate::{Actor, Pathway, Runtime};

use super::GateError;

/// Whether the gate proposed this pathway (it recorded its server command, or the name of
/// a server that ran inside the gate's process: [`crate::gate::serve_in_process`]).
pub fn is_gate_pathway<S: Stage>(p: &Pathway<S>) -> bool {
    is_gate_metadata(&p.definition().metadata)
}

/// [`is_gate_pathway`] of a definition's `metadata` as stored (for views that read the
/// stored definition, not a loaded pathway).
#[must_use]
pub fn is_gate_metadata(metadata: &serde_json::Value) -> bool {
    let gate = &metadata["gate"];
    gate["command"].is_array() || gate["in_process"].is_string()
}

/// The live server and tool of a gate pathway: the recorded command, started again with
/// this process's environment, planned by `policy`, its readback tool checked against its
/// pin in `rt`'s database (pinned on first sight, as in the gate).
///
/// # Errors
///
/// The pathway was not proposed by a gate, its server does not start or no longer lists
/// the tool, the policy refuses the tool, or its readback tool changed since it was pinned
/// (a readback through it proves nothing); nothing was read back or sent.
pub fn recorded_live<S: Stage>(
    rt: &Runtime,
    policy: &Policy,
    p: &Pathway<S>,
) -> Result<Started, GateError> {
    let refused = |m: String| GateError::Refused(m);
    let metadata = &p.definition().metadata;
    if let Some(name) = metadata["gate"]["in_process"].as_str() {
        return Err(refused(format!(
            "the pathway's server `{name}` ran inside the process of the gate that proposed              it, so no other process can start it: answer it through that gate, or end it              with `rpr abort`"
        )));
    }
    let argv: Vec<&str> = metadata["gate"]["command"]
        .as_array()
        .ok_or_else(|| {
            refused(
                "the pathway was not proposed by `rpr gate` (no recorded server command)".into(),
            )
        })?
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| refused("the recorded server command is empty".into()))?;
    let server = metadata["server"]
        .as_str()
        .ok_or_else(|| refused("the pathway does not name its server".into()))?;
    let mut command = ServerCommand::new(program).args(rest).inherit_env(true);
    let mut notes = Vec::new();
    match metadata["gate"]["cwd"].as_str() {
        Some(cwd) if std::path::Path::new(cwd).is_dir() => command = command.current_dir(cwd),
        Some(cwd) => {
            return Err(refused(format!(
                "the server ran in {cwd}, which is no longer a directory here: a readback \
                 started anywhere else may read another place and prove nothing. Settle the \
                 pathway by attestation (`rpr attest`): its evidence or repair owner decides"
            )));
        }
        None => notes.push(
            "the gate that proposed this pathway did not record the directory its server ran \
             in (an older rpr): the server runs in this one, and a readback that finds nothing \
             here proves nothing of a server that keeps its data at a relative path"
                .to_owned(),
        ),
    }
    let name = &p.definition().request.action;
    let mut started = Live::start(&command, policy, server, name).map_err(|e| {
        refused(format!(
            "the recorded server `{program}` of `{server}`: {e}"
        ))
    })?;
    reader_pinned(rt, &started.live)?;
    started.notes.extend(notes);
    Ok(started)
}

/// A readback of a gate pathway goes only through a readback tool that matches its pin:
/// one that changed since proves nothing, so the step is refused before anything is read
/// back, and the change waits for `rpr pin`.
fn reader_pinned(rt: &Runtime, live: &Live) -> Result<(), GateError> {
    let Some(rule) = &live.plan.readback else {
        return Ok(());
    };
    pinned(
        rt,
        live,
        &rule.tool,
        "the readback tool",
        "a readback through it proves nothing, so this step did nothing (nothing read back or \
         sent). Review the change and pin it with: {pin}, then run this step again",
    )
    .map(drop)
}

/// A gate pathway is sent by an operator's step (`rpr resume` of one approved) only to a
/// tool that matches its pin, as the gate itself sends only such a call: the Human Gate
/// approved the call of the pinned tool, and a tool that changed since was seen by nobody.
/// Refused before anything is sent; the change waits for `rpr pin`.
///
/// Returns the pinned digest the tool matches: what an approval of the call, given in the
/// gate's form or by `rpr approve`, records it was of.
///
/// # Errors
///
/// The server no longer lists the tool, its binding cannot be made or checked, or it is
/// not the one pinned.
pub fn sender_pinned(rt: &Runtime, live: &Live) -> Result<String, GateError> {
    pinned(
        rt,
        live,
        &live.tool.name,
        "the tool",
        "nobody approved sending to it, so nothing was sent. Review the change (`rpr pin \
         --review`), pin it ({pin}), and put the pathway back before the Human Gate (`rpr hold`, then \
         `rpr escalate`) to approve the call of the tool as it is now; or abort it",
    )
}

/// `then`: what the refusal says after what changed; `{pin}` in it is replaced by the
/// command that pins the tool as it is now. Returns the digest, which is the pinned one.
fn pinned(
    rt: &Runtime,
    live: &Live,
    tool: &str,
    what: &str,
    then: &str,
) -> Result<String, GateError> {
    let server = &live.server;
    let refused = |m: String| GateError::Refused(m);
    let listed = live
        .list
        .get(tool)
        .ok_or_else(|| refused(format!("server `{server}` no longer lists {what} `{tool}`")))?;
    let binding = ToolBinding::new(live.client.server(), listed)
        .and_then(|b| b.to_binding())
        .map_err(|e| refused(format!("{what} `{tool}` cannot be bound: {e}")))?;
    let checked = rt
        .check_pin(
            server,
            tool,
            &binding,
            &listed.definition,
            &Actor::new("rpr"),
        )
        .map_err(|e| refused(format!("the pin of `{tool}` cannot be checked: {e}")))?;
    match checked {
        PinCheck::FirstSight(_) | PinCheck::Matches(_) => Ok(binding.digest),
        PinCheck::Changed(pin) => Err(refused(format!(
            "{what} `{tool}` of server `{server}` is not the one pinned (changed: {}; now {}): {}",
            crate::mcp::changed_fields(&pin.binding, &binding.details).join(", "),
            binding.target,
            then.replace(
                "{pin}",
                &super::pin_command(None, server, tool, &binding.digest)
            )
        ))),
    }
}
