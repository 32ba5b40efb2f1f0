//! The demo: how a host runs consequential MCP tool calls through rpr, told on real processes.
//!
//! Each step of a pathway is a small function below, in the order a host takes them:
//! [`open`] (the runtime), [`put`] (propose, admit, Human Gate, bind, dispatch),
//! [`readback`] (an independent check of the effect), [`recover`] (after a restart) and
//! [`reconcile`] (an unknown outcome settled by readback). [`run`] tells the story with
//! them: a call that completes by readback; a call whose server dies after the effect,
//! so its outcome is unknown and it is never sent again; a restart; a reconciliation; the
//! ledger verified.
//!
//! The MCP server is rpr's fault-injecting test server (`rpr-fault-server`): its tool
//! `put {key, value}` stores a value and appends one line per effect to an effects file,
//! so the demo can count how many times each call really happened; its read-only tool
//! `get {key}` reads the value back.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rpr::executor::Request;
use rpr::mcp::{
    McpClient, McpExecutor, McpReadback, ReadbackVerdict, ServerCommand, SessionConfig,
};
use rpr::stage::Unknown;
use rpr::token::Reconciled;
use rpr::{
    ActionClass, Actor, Admission, Authority, Confirmed, Decision, Definition, Outcome, Pathway,
    Proposal, Role, Runtime, StepPoint, StoredPathway,
};
use serde_json::{Value, json};

/// An error of the demo.
pub(crate) type Failure = Box<dyn std::error::Error>;

/// Runs the story against the database `database` (a file that must not exist yet; `None`:
/// a new one in the temp dir, kept afterwards). `server` starts `rpr-fault-server`; the demo
/// adds its options (state and effects files, the fault to inject).
pub(crate) fn run(database: Option<&Path>, server: &ServerCommand) -> Result<(), Failure> {
    if let Some(path) = database.filter(|p| p.exists()) {
        let path = path.display();
        return Err(format!("{path} already exists; the demo needs a fresh database path").into());
    }
    let db = match database {
        Some(path) => path.to_owned(),
        None => tempfile::Builder::new()
            .prefix("rpr-demo-")
            .tempdir()?
            .keep()
            .join("rpr.db"),
    };
    let ledger = Ledger::new(server)?;
    println!("rpr demo — database {}\n", db.display());

    println!("1. A consequential call: put invoice-42 = paid");
    let rt = open(&db)?;
    let client = ledger.start("none")?;
    let Outcome::Returned(returned) = put(&rt, &client, "invoice-42")? else {
        return Err("the first call did not return success".into());
    };
    // A success reply is not proof: the call completes only when readback sees the effect.
    println!("  the server replied success — not proof yet; reading back with `get`…");
    let host = Actor::new("host");
    match returned.confirm(&rt, &host, &mut readback(&client))? {
        Confirmed::Completed(done) => println!(
            "  pathway {} is COMPLETED — readback verified the effect",
            done.id()
        ),
        other => return Err(format!("readback did not verify the first call: {other:?}").into()),
    }
    println!("  effects on the server so far: {}\n", ledger.effects());

    println!(
        "2. A call whose reply is lost: put invoice-43 = paid (the server dies after the effect)"
    );
    let client = ledger.start("crash-after-effect")?;
    let Outcome::Unknown(unknown) = put(&rt, &client, "invoice-43")? else {
        return Err("the second call should have an unknown outcome".into());
    };
    println!(
        "  pathway {} is WRITE_STATUS_UNKNOWN — the request was written but its outcome is unknown; \
         nothing will be re-sent",
        unknown.id()
    );
    println!("  (no retry method exists on an unknown pathway: retrying it would not compile)");
    let unknown_id = unknown.id().to_owned();
    // The host goes away: the pathway, the server and the runtime.
    drop((unknown, client, rt));

    println!("\n3. Restart: a new runtime opens the same database");
    let rt = open(&db)?;
    let unknown = recover(&rt, &unknown_id)?;
    println!("  recover() returns {unknown_id} as unknown — nothing was re-sent");
    println!(
        "  effects on the server: {} (invoice-42 once, invoice-43 once)",
        ledger.effects()
    );

    println!("\n4. Reconciliation by independent readback (a fresh server session, tool `get`)");
    reconcile(&rt, unknown, &ledger.start("none")?)?;

    let report = rt.verify(None)?;
    println!(
        "\n5. Evidence ledger: {} events, chain and states verified: {}",
        report.events,
        report.is_ok()
    );
    println!("   head {}", report.head.as_deref().unwrap_or("-"));
    if !report.is_ok() {
        return Err(format!("ledger problems: {:?}", report.problems).into());
    }
    let effects = ledger.effects();
    if effects != 2 {
        return Err(format!("the server performed {effects} effects for 2 calls").into());
    }
    println!("   effects on the server: {effects} — each call happened exactly once");
    println!("\nInspect it read-only from any MCP client:");
    println!("  cargo run --bin rpr-mcp -- --database {}", db.display());
    Ok(())
}

/// Opens the database. The step hook shows the write-ahead rule as it happens.
fn open(db: &Path) -> Result<Runtime, Failure> {
    let rt = Runtime::builder(db)
        .step_hook(|point| match point {
            StepPoint::AfterAttemptCommit => {
                println!("    attempt record committed durably — before any byte is sent");
            }
            StepPoint::AfterReply => println!("    the server answered (or its pipe broke)"),
            _ => {}
        })
        .open()?;
    Ok(rt)
}

/// Who holds which role in the demo's pathways; `host` holds the roles not named.
fn authority() -> Authority {
    Authority::single(&Actor::new("host"))
        .with(Role::DecisionOwner, &Actor::new("policy"))
        .with(Role::ApprovalAuthority, &Actor::new("alice"))
        .with(Role::EvidenceOwner, &Actor::new("auditor"))
        .with(Role::RepairOwner, &Actor::new("bob"))
}

/// `put KEY = paid` through the pathway up to its dispatch: propose, admit, pass the Human
/// Gate, bind, dispatch. Returns how the dispatch ended.
fn put(rt: &Runtime, client: &Arc<McpClient>, key: &str) -> Result<Outcome, Failure> {
    // Propose: the exact request, its class, an idempotency key, and the authority.
    let agent = Actor::new("agent:billing-assistant");
    let request = Request::new("put", json!({"key": key, "value": "paid"}));
    let definition = Definition::new(
        request,
        ActionClass::Mutating,
        format!("{key}-paid"),
        authority(),
    );
    let Proposal::New(proposed) = rt.propose(&agent, definition)? else {
        return Err(format!("{key}-paid exists already: this database has seen the demo").into());
    };
    let id = proposed.id().to_owned();
    let digest = proposed.request_digest()[..16].to_owned();
    println!("  proposed by {agent} (pathway {id}, request digest {digest}…)");

    // Admit: the decision owner applies the policy. Here every `put` needs a person.
    let policy = |_: &Definition| Decision::HumanGate;
    let Admission::HumanGate(gated) = proposed.admit(rt, &Actor::new("policy"), &policy)? else {
        return Err("the policy should have asked for a Human Gate".into());
    };
    println!("  admission by policy: Human Gate");

    // The Human Gate: the approval authority approves this exact request (a real host would
    // show it to a person and ask). The approval is recorded and usable once.
    let alice = Actor::new("alice");
    let approval = rt.grant_approval(&gated, &alice)?;
    let approved = gated.approve(rt, approval.quorum(rt).expect("quorum"))?;
    println!("  Human Gate: approved by {alice} (approval authority) for request digest {digest}…");

    // Bind: the one exact target (server identity, capabilities, the tool's definition).
    let mut executor = McpExecutor::new(Arc::clone(client), "put");
    let bound = approved.bind(&mut executor)?;
    let binding = bound.binding();
    println!(
        "  bound to {} (binding digest {}…)",
        binding.target,
        &binding.digest[..16]
    );

    // Dispatch: the binding is checked again, the attempt record is committed, then the
    // request is sent. The outcome says how far it got, never more.
    println!("  dispatch by host:");
    Ok(bound.dispatch(rt, &Actor::new("host"), &mut executor))
}

/// The independent check of a `put`: a fresh `get` of the key must show the value.
fn readback(client: &Arc<McpClient>) -> McpReadback {
    McpReadback::new(
        Arc::clone(client),
        "get",
        |request: &Request| json!({"key": request.arguments["key"]}),
        |request: &Request, result: &Value| match result.pointer("/structuredContent/value") {
            Some(value) if *value == request.arguments["value"] => ReadbackVerdict::Applied,
            None | Some(Value::Null) => ReadbackVerdict::NotApplied,
            Some(_) => ReadbackVerdict::Inconclusive,
        },
    )
}

/// After a restart: the unresolved pathways come back in stages that are safe to re-enter.
/// An attempt that was in flight comes back unknown, never as something to send again.
fn recover(rt: &Runtime, id: &str) -> Result<Pathway<Unknown>, Failure> {
    let mut found = None;
    for stored in rt.recover()? {
        match stored {
            StoredPathway::Unknown(unknown) if unknown.id() == id => found = Some(unknown),
            other => println!("  also unresolved: {} ({})", other.id(), other.state()),
        }
    }
    found.ok_or_else(|| format!("pathway {id} was not recovered as unknown").into())
}

/// Settles an unknown outcome by readback. Every verdict is recorded; only *applied*
/// completes the pathway.
fn reconcile(
    rt: &Runtime,
    unknown: Pathway<Unknown>,
    client: &Arc<McpClient>,
) -> Result<(), Failure> {
    let id = unknown.id().to_owned();
    match rt.reconcile(&unknown, &mut readback(client)) {
        Reconciled::Applied(token) => {
            unknown.complete(rt, token)?;
            println!("  readback found the effect → verdict applied → pathway {id} is COMPLETED");
            Ok(())
        }
        Reconciled::NotApplied(token) => {
            unknown.require_repair(rt, token)?;
            Err(format!("readback found no effect: pathway {id} is REPAIR_REQUIRED").into())
        }
        Reconciled::Unresolved(token) => {
            unknown.keep_unknown(rt, token)?;
            Err(format!("readback was inconclusive: pathway {id} stays unknown").into())
        }
        other => Err(format!("unexpected reconciliation {other:?}").into()),
    }
}

/// The demo's MCP server: how to start it, and its state and effects files in a temporary
/// directory (removed when the demo ends).
struct Ledger {
    command: ServerCommand,
    files: tempfile::TempDir,
}

impl Ledger {
    fn new(command: &ServerCommand) -> Result<Self, Failure> {
        let files = tempfile::Builder::new()
            .prefix("rpr-demo-server-")
            .tempdir()?;
        Ok(Self {
            command: command.clone(),
            files,
        })
    }

    /// Starts a server session that injects `fault` (`none`: a well-behaved server).
    fn start(&self, fault: &str) -> Result<Arc<McpClient>, Failure> {
        let command = self
            .command
            .clone()
            .args(["--server-name", "demo-ledger", "--server-version", "1.0.0"])
            .arg("--state")
            .arg(self.files.path().join("state.json"))
            .arg("--effects")
            .arg(self.effects_file())
            .args(["--fault", fault]);
        Ok(Arc::new(McpClient::connect(
            &command,
            &SessionConfig::default(),
        )?))
    }

    fn effects_file(&self) -> PathBuf {
        self.files.path().join("effects.log")
    }

    /// How many times `put` really changed the server's state.
    fn effects(&self) -> usize {
        std::fs::read_to_string(self.effects_file()).map_or(0, |s| s.lines().count())
    }
}
