//! `call`: propose → admit → Human Gate → bind → dispatch → readback.

use std::path::Path;

use rpr::executor::Request;
use rpr::mcp::ArgumentValidator;
use rpr::{Actor, Admission, Definition, Proposal, StoredPathway};
use serde_json::json;

use super::{CallArgs, hint, json_object, show_next};
use crate::config::{Config, Policy};
use crate::flow::{self, Gate, Live};
use crate::{Exit, Failure};

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
            say!(
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
            say!(
                "idempotency key {key:?} is pathway {}, left proposed (never admitted): admitting it now",
                p.id()
            );
            p
        }
        Proposal::Existing(stored) => {
            let id = stored.id().to_owned();
            drop(stored);
            say!("idempotency key {key:?} is pathway {id}: replayed, nothing sent again");
            return show_next(&rt, &id);
        }
        other => return Err(format!("unexpected proposal {other:?}").into()),
    };
    let decision_owner = p.definition().authority.decision_owner.clone();
    let executor = p.definition().authority.execution_actor.clone();
    match p.admit(&rt, &decision_owner, &|_| live.plan.decision())? {
        Admission::Approved(p) => {
            say!(
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
            say!("pathway {} is DENIED by policy", p.id());
            Ok(Exit::Denied)
        }
        Admission::AwaitingApproval(p) => {
            say!(
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
