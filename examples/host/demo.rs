//! The demo: the whole story on real processes, through the same steps as real mode
//! (config, policy, Human Gate, bind → dispatch → readback, reconciliation).

use std::path::{Path, PathBuf};

use rpr::executor::Request;
use rpr::{Actor, Admission, Definition, Proposal, Runtime, StoredPathway};
use serde_json::json;

use crate::config::{Config, Policy};
use crate::flow::{self, Gate, Hint, Live};
use crate::{Exit, Failure};

/// The demo's policy, in the same format as a real-mode policy file.
const POLICY: &str = r#"{
  "authority": {"decision_owner": "policy", "approval_authority": "alice",
                "evidence_owner": "auditor", "repair_owner": "bob"},
  "servers": {"demo-ledger": {"put": {
    "human_gate": true,
    "readback": {"tool": "get", "arguments": {"key": "$key"},
                 "expect": {"/structuredContent/value": "$value"}}
  }}}
}"#;

/// The demo MCP server: this program in `serve-demo` mode, with a state file for readback
/// and an effects file that counts how many times `put` really happened.
fn config(work: &Path, fault: &str) -> Result<Config, Failure> {
    Config::from_json(json!({"mcpServers": {"demo-ledger": {
        "command": std::env::current_exe()?,
        "args": ["serve-demo", "--server-name", "demo-ledger", "--server-version", "1.0.0",
                 "--state", work.join("state.json"), "--effects", work.join("effects.log"),
                 "--fault", fault],
    }}}))
}

fn effects(work: &Path) -> usize {
    std::fs::read_to_string(work.join("effects.log")).map_or(0, |s| s.lines().count())
}

/// Proposes `put KEY = paid`, passes the Human Gate (alice approves) and carries it out.
fn put(rt: &Runtime, live: &Live, policy: &Policy, key: &str) -> Result<(String, Exit), Failure> {
    let agent = Actor::new("agent:billing-assistant");
    let request = Request::new("put", json!({"key": key, "value": "paid"}));
    let definition = Definition::new(
        request,
        live.plan.class,
        format!("{key}-paid"),
        policy.authority(),
    )
    .with_metadata(json!({"server": live.server}));
    let Proposal::New(p) = rt.propose(&agent, definition)? else {
        return Err("replayed".into());
    };
    let id = p.id().to_owned();
    println!(
        "  proposed by {agent} (pathway {id}, request digest {}…)",
        &p.request_digest()[..16]
    );
    let Admission::HumanGate(p) = p.admit(rt, &Actor::new("policy"), &|_: &Definition| {
        live.plan.decision()
    })?
    else {
        return Err("expected a Human Gate".into());
    };
    println!("  admission by policy: Human Gate");
    let shown = flow::show_gate(&p, live)?;
    let approval = Gate::Approve(Actor::new("alice"));
    let Ok(p) = flow::decide(rt, p, approval, &Hint::none())? else {
        return Err("the approval was refused".into());
    };
    let exit = flow::carry_out(
        rt,
        live,
        p,
        &Actor::new("host"),
        Some(&shown),
        &Hint::none(),
    )?;
    Ok((id, exit))
}

pub(crate) fn run(database: Option<&str>) -> Result<(), Failure> {
    if let Some(path) = database.filter(|p| Path::new(p).exists()) {
        return Err(format!("{path} already exists; the demo needs a fresh database path").into());
    }
    let work = std::env::temp_dir().join(format!("rpr-demo-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let db = database.map_or_else(|| work.join("rpr.db"), PathBuf::from);
    println!("rpr demo — database {}\n", db.display());
    let policy = Policy::parse(POLICY)?;

    // 1. A governed call that completes.
    println!("1. A consequential call: put invoice-42 = paid");
    let rt = flow::runtime(&db)?;
    let live = Live::open(&config(&work, "none")?, &policy, "demo-ledger", "put")?;
    if put(&rt, &live, &policy, "invoice-42")?.1 != Exit::Done {
        return Err("the first call did not complete".into());
    }
    println!("  effects on the server so far: {}\n", effects(&work));
    drop(live);

    // 2. A call whose reply is lost.
    println!(
        "2. A call whose reply is lost: put invoice-43 = paid (the server dies after the effect)"
    );
    let crashing = Live::open(
        &config(&work, "crash-after-effect")?,
        &policy,
        "demo-ledger",
        "put",
    )?;
    let (unknown_id, exit) = put(&rt, &crashing, &policy, "invoice-43")?;
    if exit != Exit::Pending {
        return Err("the second call should have an unknown outcome".into());
    }
    println!("  (no retry method exists on an unknown pathway: retrying it would not compile)");
    drop(crashing);
    drop(rt);

    // 3. Restart.
    println!("\n3. Restart: a new runtime opens the same database");
    let rt = flow::runtime(&db)?;
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
    let reader = Live::open(&config(&work, "none")?, &policy, "demo-ledger", "put")?;
    if flow::reconcile(&rt, &reader, unknown, &Hint::none())? != Exit::Done {
        return Err("readback did not find the effect".into());
    }
    drop(reader);

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
    let _ = std::fs::remove_dir(&work); // only when empty: it may hold the demo database
    Ok(())
}
