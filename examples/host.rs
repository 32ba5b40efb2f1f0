//! The example MCP host: runs consequential MCP tool calls through rpr's pathway.
//!
//! `cargo run --example host -- demo [--database PATH]` tells the whole story on real
//! processes: a governed call that completes with readback, then a call whose reply is
//! lost, a restart that does not re-send it, and a reconciliation by readback.
//!
//! The demo's MCP server is this same program started as `host serve-demo …`, which
//! runs rpr's fault-injecting test server ([`rpr::mcp::fault_server`]), so the demo
//! needs nothing but cargo.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use rpr::executor::Request;
use rpr::mcp::{
    McpClient, McpExecutor, McpReadback, ReadbackVerdict, ServerCommand, SessionConfig,
};
use rpr::token::Reconciled;
use rpr::{
    ActionClass, Actor, Admission, Authority, Confirmed, Decision, Definition, Outcome, Proposal,
    Role, Runtime, StepPoint, StoredPathway,
};
use serde_json::{Value, json};

type Failure = Box<dyn std::error::Error>;

const USAGE: &str = "\
usage: host demo [--database PATH]   run the whole story on a fresh database
       host serve-demo ARGS…         (internal) the demo MCP server";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve-demo") => rpr::mcp::fault_server::run(args.into_iter().skip(1)),
        Some("demo") => match parse_demo(&args[1..]).and_then(|db| demo(db.as_deref())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("host: {e}");
                ExitCode::FAILURE
            }
        },
        Some("--help" | "-h") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn parse_demo(args: &[String]) -> Result<Option<PathBuf>, Failure> {
    match args {
        [] => Ok(None),
        [flag, path] if flag == "--database" => {
            let path = PathBuf::from(path);
            if path.exists() {
                return Err(format!(
                    "{} already exists; the demo needs a fresh database path",
                    path.display()
                )
                .into());
            }
            Ok(Some(path))
        }
        _ => Err(format!("unexpected arguments {args:?}\n{USAGE}").into()),
    }
}

/// The demo MCP server: this program in `serve-demo` mode, with a state file for readback
/// and an effects file that counts how many times `put` really happened.
fn demo_server(work: &Path, fault: &str) -> Result<ServerCommand, Failure> {
    Ok(ServerCommand::new(std::env::current_exe()?).args([
        "serve-demo".to_owned(),
        "--server-name".into(),
        "demo-ledger".into(),
        "--server-version".into(),
        "1.0.0".into(),
        "--state".into(),
        work.join("state.json").display().to_string(),
        "--effects".into(),
        work.join("effects.log").display().to_string(),
        "--fault".into(),
        fault.into(),
    ]))
}

fn effects(work: &Path) -> usize {
    std::fs::read_to_string(work.join("effects.log")).map_or(0, |s| s.lines().count())
}

fn readback(client: Arc<McpClient>) -> McpReadback {
    McpReadback::new(
        client,
        "get",
        |req: &Request| json!({"key": req.arguments["key"]}),
        |req: &Request, result: &Value| {
            let seen = &result["structuredContent"]["value"];
            if seen == &req.arguments["value"] {
                ReadbackVerdict::Applied
            } else if seen.is_null() {
                ReadbackVerdict::NotApplied
            } else {
                ReadbackVerdict::Inconclusive
            }
        },
    )
}

fn runtime(db: &Path) -> Result<Runtime, Failure> {
    Ok(Runtime::builder(db)
        .step_hook(|point| match point {
            StepPoint::AfterAttemptCommit => {
                println!("    attempt record committed durably (status in_flight) — before any byte is sent");
            }
            StepPoint::AfterReply => println!("    the server answered (or the pipe broke); recording the outcome"),
            _ => {}
        })
        .open()?)
}

fn authority() -> Authority {
    Authority::single(&Actor::new("host"))
        .with(Role::DecisionOwner, &Actor::new("policy"))
        .with(Role::ApprovalAuthority, &Actor::new("alice"))
        .with(Role::EvidenceOwner, &Actor::new("auditor"))
        .with(Role::RepairOwner, &Actor::new("bob"))
}

/// Destructive tools need a Human Gate.
fn policy(_: &Definition) -> Decision {
    Decision::HumanGate
}

fn demo(database: Option<&Path>) -> Result<(), Failure> {
    let work = std::env::temp_dir().join(format!("rpr-demo-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let db = database.map_or_else(|| work.join("rpr.db"), Path::to_owned);
    println!("rpr demo — database {}\n", db.display());
    let host = Actor::new("host");
    let agent = Actor::new("agent:billing-assistant");

    // 1. A governed call that completes.
    println!("1. A consequential call: put invoice-42 = paid");
    let rt = runtime(&db)?;
    let client = Arc::new(McpClient::connect(
        &demo_server(&work, "none")?,
        &SessionConfig::default(),
    )?);
    let request = Request::new("put", json!({"key": "invoice-42", "value": "paid"}));
    let definition = Definition::new(
        request,
        ActionClass::Mutating,
        "invoice-42-paid",
        authority(),
    );
    let Proposal::New(p) = rt.propose(&agent, definition)? else {
        return Err("replayed".into());
    };
    println!(
        "  proposed by {agent} (pathway {}, request digest {}…)",
        p.id(),
        &p.request_digest()[..16]
    );
    let Admission::HumanGate(p) = p.admit(&rt, &Actor::new("policy"), &policy)? else {
        return Err("expected a Human Gate".into());
    };
    println!("  admission by policy: Human Gate (the tool changes state)");
    let alice = Actor::new("alice");
    let approval = rt.grant_approval(&p, &alice)?;
    let p = p.approve(&rt, approval)?;
    println!("  Human Gate: approved by {alice} (approval authority), bound to this exact request");
    let mut executor = McpExecutor::new(Arc::clone(&client), "put");
    let bound = p.bind(&mut executor)?;
    let b = bound.binding();
    println!("  bound to {}", b.target);
    println!(
        "    protocol {}, server {}@{}, capabilities digest {}…, tool digest {}…",
        b.details["protocol_version"],
        b.details["server_name"].as_str().unwrap_or("?"),
        b.details["server_version"].as_str().unwrap_or("?"),
        short(&b.details["capabilities_digest"]),
        short(&b.details["tool_digest"]),
    );
    println!("  dispatch by {host} (execution actor):");
    let returned = match bound.dispatch(&rt, &host, &mut executor) {
        Outcome::Returned(r) => r,
        other => return Err(format!("unexpected outcome {other:?}").into()),
    };
    println!("  the server replied success — not proof yet; reading back with `get`…");
    let Confirmed::Completed(done) = returned.confirm(
        &rt,
        &Actor::new("auditor"),
        &mut readback(Arc::clone(&client)),
    )?
    else {
        return Err("readback did not verify".into());
    };
    println!(
        "  readback verified invoice-42 = paid → {} is COMPLETED",
        done.id()
    );
    println!("  effects on the server so far: {}\n", effects(&work));
    client.shutdown();

    // 2. A call whose reply is lost.
    println!(
        "2. A call whose reply is lost: put invoice-43 = paid (the server dies after the effect)"
    );
    let crashing = Arc::new(McpClient::connect(
        &demo_server(&work, "crash-after-effect")?,
        &SessionConfig::default(),
    )?);
    let request = Request::new("put", json!({"key": "invoice-43", "value": "paid"}));
    let definition = Definition::new(
        request,
        ActionClass::Mutating,
        "invoice-43-paid",
        authority(),
    );
    let Proposal::New(p) = rt.propose(&agent, definition)? else {
        return Err("replayed".into());
    };
    let Admission::HumanGate(p) = p.admit(&rt, &Actor::new("policy"), &policy)? else {
        return Err("expected a Human Gate".into());
    };
    let approval = rt.grant_approval(&p, &alice)?;
    let p = p.approve(&rt, approval)?;
    println!("  proposed, gated and approved by {alice} as before");
    let mut executor = McpExecutor::new(Arc::clone(&crashing), "put");
    let bound = p.bind(&mut executor)?;
    let unknown = match bound.dispatch(&rt, &host, &mut executor) {
        Outcome::Unknown(u) => u,
        other => return Err(format!("unexpected outcome {other:?}").into()),
    };
    println!(
        "  the pipe broke after the request was written → {} is WRITE_STATUS_UNKNOWN",
        unknown.id()
    );
    println!("  (no retry method exists on an unknown pathway: retrying it would not compile)");
    let unknown_id = unknown.id().to_owned();
    drop(unknown);
    drop(crashing);
    drop(rt);

    // 3. Restart.
    println!("\n3. Restart: a new runtime opens the same database");
    let rt = runtime(&db)?;
    let mut recovered = None;
    for stored in rt.recover()? {
        match stored {
            StoredPathway::Unknown(u) if u.id() == unknown_id => recovered = Some(u),
            other => println!("  also unresolved: {}", other.id()),
        }
    }
    let unknown = recovered.ok_or("the unknown pathway was not recovered")?;
    println!(
        "  recover() returns {} as unknown — nothing was re-sent",
        unknown.id()
    );
    println!(
        "  effects on the server: {} (invoice-42 once, invoice-43 once)",
        effects(&work)
    );

    // 4. Reconciliation.
    println!("\n4. Reconciliation by independent readback (a fresh server session, tool `get`)");
    let reader = Arc::new(McpClient::connect(
        &demo_server(&work, "none")?,
        &SessionConfig::default(),
    )?);
    let Reconciled::Applied(token) = rt.reconcile(&unknown, &mut readback(Arc::clone(&reader)))
    else {
        return Err("readback did not find the effect".into());
    };
    let done = unknown.complete(&rt, token)?;
    println!(
        "  readback found invoice-43 = paid → verdict applied → {} is COMPLETED",
        done.id()
    );
    reader.shutdown();

    // 5. The ledger.
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
    println!(
        "   effects on the server: {} — each call happened exactly once",
        effects(&work)
    );
    println!("\nInspect it read-only from any MCP client:");
    println!("  cargo run --bin rpr-mcp -- --database {}", db.display());
    drop(rt);
    if database.is_none() {
        println!("(the demo database is temporary; pass --database PATH to keep it)");
    }
    let _ = std::fs::remove_file(work.join("state.json"));
    let _ = std::fs::remove_file(work.join("effects.log"));
    Ok(())
}

fn short(v: &Value) -> String {
    v.as_str()
        .map_or_else(|| "?".into(), |s| s.chars().take(12).collect())
}
