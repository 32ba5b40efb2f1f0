//! `call`: propose → admit → Human Gate → bind → dispatch → readback.

use std::path::Path;

use rpr::executor::Request;
use rpr::mcp::ArgumentValidator;
use rpr::{Actor, Admission, Definition, Proposal, Runtime, StoredPathway};
use serde_json::{Value, json};

use super::{CallArgs, hint, json_object, show_next};
use rpr::policy::Policy;

use crate::config::Config;
use crate::flow::{self, Gate};
use crate::launch::{Change, Launch};
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
    let dir = config.directory(server)?;
    let dir_text = dir.to_str().ok_or_else(|| {
        format!(
            "the server's directory {} is not UTF-8, so it cannot be recorded for the steps \
             after this call; nothing was recorded or sent",
            dir.display()
        )
    })?;
    let launch = config.launch(server, &dir)?;
    let live = flow::open_live(&config, &policy, server, tool, &dir, Some(&launch))?;
    let validator = ArgumentValidator::new(&live.tool)?;
    validator.check(&arguments).map_err(|problems| {
        format!(
            "the arguments do not match the input schema of `{tool}`: {}; nothing was recorded or sent",
            problems.join("; ")
        )
    })?;
    live.plan
        .check_arguments(tool, &arguments)
        .map_err(|e| format!("{e}; nothing was recorded or sent"))?;
    let rt = flow::runtime_with(Path::new(db), policy.bounds())?;
    let request = Request::new(tool, arguments);
    let digest = request.digest().map_err(|e| {
        format!("the arguments cannot be recorded: {e}; nothing was recorded or sent")
    })?;
    let hint = hint(Some(&args.files), &args.db);
    let proposer = Actor::new(&args.actor);
    let p = match open_identical(&rt, server, &digest, args.key.as_deref())? {
        // Left proposed (never admitted, so never sent) by a host that stopped between
        // propose and admit: this call finishes its admission.
        Identical::Open(StoredPathway::Proposed(p)) => {
            let id = p.id().to_owned();
            if let Some(other) = started_otherwise(&p, &config, server)? {
                return Err(format!(
                    "an identical call ({tool} on {server}, the same arguments) is pathway {id}, left \
                     proposed by a call whose server was started otherwise ({other}): run this call \
                     with that configuration, or end that pathway with `rpr abort`; nothing was sent"
                )
                .into());
            }
            if let Some(recorded) = flow::recorded_directory(&p)?
                && recorded != dir
            {
                return Err(format!(
                    "an identical call ({tool} on {server}, the same arguments) is pathway {id}, left \
                     proposed by a call whose server ran in {}; this one runs it in {}: run this call \
                     there, or end that pathway with `rpr abort`; nothing was sent",
                    recorded.display(),
                    dir.display()
                )
                .into());
            }
            say!(
                "an identical call ({tool} on {server}, the same arguments) is pathway {id}, left proposed \
                 (never admitted): admitting it now"
            );
            if p.is_redacted() {
                p.restore_request(request)
                    .map_err(|e| format!("pathway {id}: {}; nothing was sent", e.error()))?
            } else {
                p
            }
        }
        Identical::Open(stored) => {
            let id = stored.id().to_owned();
            flow::note_pathway(&id);
            let state = stored.state().as_str();
            say!(
                "an identical call ({tool} on {server}, the same arguments) is pathway {id}, still open \
                 ({state}): answered from it, nothing sent (a new key does not make it another call)"
            );
            drop(stored);
            return show_next(&rt, &id);
        }
        Identical::None { seen } => {
            let key = args
                .key
                .clone()
                .unwrap_or_else(|| format!("call/{server}/{digest}/{}", seen + 1));
            let definition = Definition::new(request, live.plan.class, &key, policy.authority())
                .with_metadata(
                    json!({"server": server, "cwd": dir_text, "launch": launch.to_json()}),
                );
            let same = serde_json::to_value(&definition)?;
            // The store redacts every copy of a secret-named argument's value: one that
            // appears in the server's command line, directory or variable digests would
            // leave a record that starts another server, or none.
            if rpr::evidence::check(&same, &policy.bounds())?["metadata"] != same["metadata"] {
                return Err(
                    "a word of how this call's server is started (its command line, \
                     its directory or a variable's digest) holds what the record redacts: the \
                     value of a secret-named argument of this call, or a JSON text with a \
                     secret-named member. It cannot be recorded without the secret, and a step \
                     after this call could not start the server as this call does. Nothing was \
                     recorded or sent. Keep secrets out of the server's `command`, `args` and \
                     `cwd` (its `env` is recorded only as digests)"
                        .into(),
                );
            }
            // The store refuses it while an identical call is open, though none was open
            // when this looked: another process stored one in between.
            let proposal = match rt.propose_one_open(&proposer, definition) {
                Err(rpr::PathwayError::IdempotencyConflict { key, existing })
                    if same_call(&rt, &existing, &same, &digest)? =>
                {
                    Proposal::Existing(started_otherwise_by_key(
                        &rt,
                        &key,
                        &existing,
                        (&config, server, &dir),
                    )?)
                }
                Err(rpr::PathwayError::Store(rpr::store::StoreError::IdenticalOpen {
                    open,
                    ..
                })) => {
                    flow::note_pathway(&open);
                    say!(
                        "an identical call ({tool} on {server}, the same arguments) was stored by another \
                         process meanwhile: pathway {open}, still open: answered from it, nothing sent"
                    );
                    return show_next(&rt, &open);
                }
                other => other?,
            };
            match proposal {
                Proposal::New(p) => {
                    say!(
                        "proposed by {proposer}: pathway {} ({tool} on {}, key {key:?})",
                        p.id(),
                        live.server
                    );
                    p
                }
                // Left proposed by a host that stopped between propose and admit (a crash, a
                // full disk): nothing was ever sent, so the repeated call finishes the admission.
                Proposal::Existing(StoredPathway::Proposed(p)) => {
                    say!(
                        "idempotency key {key:?} is pathway {}, left proposed (never admitted): admitting it now",
                        p.id()
                    );
                    p
                }
                Proposal::Existing(stored) => {
                    let id = stored.id().to_owned();
                    flow::note_pathway(&id);
                    drop(stored);
                    say!("idempotency key {key:?} is pathway {id}: replayed, nothing sent again");
                    return show_next(&rt, &id);
                }
                other => return Err(format!("unexpected proposal {other:?}").into()),
            }
        }
    };
    flow::note_pathway(p.id());
    let decision_owner = p.definition().authority.decision_owner.clone();
    let executor = p.definition().authority.execution_actor.clone();
    match p.admit(&rt, &decision_owner, &|_| live.plan.decision())? {
        Admission::Approved(p) => {
            say!(
                "admitted by {decision_owner}: no Human Gate, because {}",
                live.plan.why
            );
            flow::carry_out(&rt, &live, p, &executor, &hint)
        }
        Admission::HumanGate(p) => {
            let shown = flow::show_gate(&p, &live)?;
            let gate = match gate {
                Some(g) => g,
                None => flow::ask()?,
            };
            match flow::decide(&rt, p, gate, &shown, &hint)? {
                Ok(p) => flow::carry_out(&rt, &live, p, &executor, &hint),
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

/// How `p`'s server was started, when the call recorded it and it differs from how
/// `config` starts `server` today: what differs, for a message.
fn started_otherwise<S: rpr::stage::Stage>(
    p: &rpr::Pathway<S>,
    config: &Config,
    server: &str,
) -> Result<Option<String>, Failure> {
    let Some(recorded) = flow::recorded_launch(p)? else {
        return Ok(None);
    };
    let change = Change::of(&recorded, config, server)?;
    Ok((!change.is_empty()).then(|| change.to_string()))
}

/// Whether stored pathway `id` is the call `definition` (its JSON) is, but for where and
/// how its server was started: the same server, request, class and authority.
fn same_call(rt: &Runtime, id: &str, definition: &Value, digest: &str) -> Result<bool, Failure> {
    let Some(record) = rt.reader().pathway(id)? else {
        return Ok(false);
    };
    let without = |d: &Value| {
        let mut d = d.clone();
        for member in ["metadata", "request"] {
            if let Some(m) = d.get_mut(member) {
                *m = Value::Null;
            }
        }
        d
    };
    Ok(record.request_digest == digest
        && record.definition["metadata"]["server"] == definition["metadata"]["server"]
        && without(&record.definition) == without(definition))
}

/// The pathway `id` of key `key`, the same call as this one but for its metadata (where
/// and how its server was started): answered from it like any pathway of the key, with
/// what differs said here. One left proposed (never admitted) is admitted only when
/// nothing shows its server was started otherwise (an older rpr recorded neither how nor,
/// or the same, directory); else it is refused: it would be carried out by a server it was
/// not proposed for.
fn started_otherwise_by_key(
    rt: &Runtime,
    key: &str,
    id: &str,
    (config, server, dir): (&Config, &str, &std::path::Path),
) -> Result<StoredPathway, Failure> {
    let stored = rt.load(id)?;
    let record = rt
        .reader()
        .pathway(id)?
        .ok_or_else(|| format!("pathway {id} is gone"))?;
    let metadata = &record.definition["metadata"];
    let mut other = Vec::new();
    if rpr::gate::is_gate_metadata(metadata) {
        other.push("it was proposed by `rpr gate`".to_owned());
    }
    match metadata.get("launch").map(Launch::from_json) {
        Some(Ok(recorded)) => {
            let change = Change::of(&recorded, config, server)?;
            if !change.is_empty() {
                other.push(change.to_string());
            }
        }
        Some(Err(e)) => other.push(format!("its recorded server command is not readable: {e}")),
        None => {}
    }
    if let Some(recorded) = metadata["cwd"].as_str()
        && std::path::Path::new(recorded) != dir
    {
        other.push(format!("its server ran in {recorded}"));
    }
    if let StoredPathway::Proposed(_) = &stored {
        if !other.is_empty() {
            return Err(format!(
                "idempotency key {key:?} is pathway {id}, left proposed (never admitted) by a \
                 call whose server was started otherwise ({}): run this call as that one was, \
                 or end that pathway with `rpr abort`; nothing was sent",
                other.join("; ")
            )
            .into());
        }
    } else {
        if metadata.get("launch").is_none() && other.is_empty() {
            other.push(
                "it was recorded by an older rpr, which did not record how its server was \
                 started"
                    .to_owned(),
            );
        }
        say!(
            "idempotency key {key:?} is pathway {id}, the same call recorded otherwise ({})",
            other.join("; ")
        );
    }
    Ok(stored)
}

/// What the store holds of an identical call (same server, tool and canonical arguments).
enum Identical {
    /// Open (not completed, denied, aborted or failed) under another key than this call's.
    Open(StoredPathway),
    /// None open; `seen` pathways ever had these tool and arguments (on any server).
    None { seen: u64 },
}

/// An identical call open on `server` under another key than `key`. One under `key`
/// itself is left to the key (`propose` answers it as the same call).
fn open_identical(
    rt: &Runtime,
    server: &str,
    digest: &str,
    key: Option<&str>,
) -> Result<Identical, Failure> {
    let reader = rt.reader();
    let open = reader.open_with_request(digest)?;
    if let Some(record) = open.iter().find(|r| {
        r.definition["metadata"]["server"] == server && Some(r.idempotency_key.as_str()) != key
    }) {
        return Ok(Identical::Open(rt.load(&record.id)?));
    }
    Ok(Identical::None {
        seen: reader.count_with_request(digest)?,
    })
}
