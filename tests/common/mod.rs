//! Shared test support: temporary databases and scripted executors.
#![allow(dead_code, unreachable_pub, reason = "each test binary uses a different part of the support module")]

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use rpr::{ActionClass, Actor, Authority, Clock, Definition, Runtime, SequentialIds};
use serde_json::{Value, json};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "rpr-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
    pub fn db(&self) -> PathBuf {
        self.0.join("rpr.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A clock that ticks one millisecond per reading, from a fixed start.
pub struct TickClock(pub Cell<i64>);

impl Clock for TickClock {
    fn now_ms(&self) -> i64 {
        let t = self.0.get();
        self.0.set(t + 1);
        t
    }
}

/// A deterministic runtime (sequential ids, ticking clock) on `path`.
pub fn runtime(path: &std::path::Path) -> Runtime {
    Runtime::builder(path)
        .clock(TickClock(Cell::new(1_700_000_000_000)))
        .ids(SequentialIds::default())
        .open()
        .unwrap()
}

pub fn actor(name: &str) -> Actor {
    Actor::new(name)
}

/// A definition where each role has its own actor named after the role.
pub fn definition(key: &str, class: ActionClass) -> Definition {
    use rpr::Role::*;
    let auth = Authority::single(&actor("decision_owner"))
        .with(ApprovalAuthority, &actor("approval_authority"))
        .with(ExecutionActor, &actor("execution_actor"))
        .with(StopAuthority, &actor("stop_authority"))
        .with(EvidenceOwner, &actor("evidence_owner"))
        .with(RepairOwner, &actor("repair_owner"))
        .with(ResumeAuthority, &actor("resume_authority"))
        .with(ResidualOwner, &actor("residual_owner"));
    Definition::new(Request::new("put", json!({"key": key, "value": "v"})), class, key, auth)
}

/// An executor that answers with a scripted delivery and counts its calls.
pub struct Scripted {
    pub deliveries: Vec<Delivery>,
    pub executed: usize,
    pub refuse_prepare: Option<Refusal>,
}

impl Scripted {
    pub fn new(deliveries: Vec<Delivery>) -> Self {
        Self { deliveries, executed: 0, refuse_prepare: None }
    }
    pub fn ok() -> Self {
        Self::new(vec![Delivery::Succeeded { reply: json!({"ok": true}) }])
    }
}

impl Executor for Scripted {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("scripted", json!({"executor": "scripted"})).unwrap())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        match self.refuse_prepare.clone() {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        let d = if self.deliveries.len() > 1 { self.deliveries.remove(0) } else { self.deliveries[0].clone() };
        self.executed += 1;
        d
    }
}

/// A readback that reports a fixed observation.
pub struct Sees(pub &'static str);

impl Readback for Sees {
    fn observe(&mut self, _request: &Request) -> Observation {
        let evidence = json!({"seen": self.0});
        match self.0 {
            "applied" => Observation::Applied { evidence },
            "not_applied" => Observation::NotApplied { evidence },
            _ => Observation::Inconclusive { evidence },
        }
    }
}

/// All `(from, to)` transitions recorded in the ledger.
pub fn ledger_edges(rt: &Runtime) -> Vec<(String, String)> {
    rt.reader()
        .ledger(0, usize::MAX)
        .unwrap()
        .into_iter()
        .filter_map(|row| {
            let e: Value = serde_json::from_str(&row.event).unwrap();
            let from = e["from"].as_str()?.to_owned();
            let to = e["to"].as_str()?.to_owned();
            (from != to).then_some((from, to))
        })
        .collect()
}
