//! The executor boundary: what dispatch calls, and how an effect is read back.
//!
//! The core knows nothing about MCP, files or HTTP. An [`Executor`] carries one
//! request to one target and reports **how far the request got**, never more than
//! it knows. A [`Readback`] independently observes whether an effect happened.

pub mod file;
mod keeping;
#[cfg(test)]
pub(crate) mod scripted;

pub use keeping::Keeping;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The request a pathway carries to its target: an action name and its arguments.
///
/// This is plain data; holding a `Request` grants nothing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Request {
    /// The action (for MCP: the tool name).
    pub action: String,
    /// The arguments (for MCP: the `arguments` object).
    pub arguments: Value,
}

impl Request {
    /// A request for `action` with `arguments`.
    #[must_use]
    pub fn new(action: impl Into<String>, arguments: Value) -> Self {
        Self {
            action: action.into(),
            arguments,
        }
    }

    /// The request digest a pathway records for this request (sha256 hex of the canonical
    /// `{"action", "arguments"}`): the same for every identical request.
    pub fn digest(&self) -> Result<String, crate::canonical::CanonicalError> {
        crate::canonical::sha256_hex(&request_json(self))
    }
}

/// What a pathway is bound to: one exact target, described by the executor.
///
/// `target` is a short human-readable identity (for MCP `name@version` and tool);
/// `details` is the full description; `digest` is the sha256 (hex) of the RFC 8785
/// canonical form of `details`, computed by the executor. Dispatch re-checks the live
/// binding against this one before anything is sent.
///
/// `class` is the executor's view of what the bound target does: [`ActionClass::Mutating`]
/// unless the executor states otherwise ([`Binding::read_only`], [`Binding::with_class`]),
/// the fail-closed default. A pathway's definition may be stricter than this (declare
/// `Mutating` for a target the executor calls read-only), never laxer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Binding {
    /// Short identity of the target, for people.
    pub target: String,
    /// Everything that was bound, as JSON.
    pub details: Value,
    /// sha256 hex of the canonical JSON of `details`.
    pub digest: String,
    /// Whether the bound target only reads or may change something, as the executor
    /// sees it. Bound in `details` as `"class"` when set with [`Binding::with_class`].
    pub class: ActionClass,
}

impl Binding {
    /// Builds a binding of class [`ActionClass::Mutating`], computing the digest of
    /// `details`.
    pub fn new(
        target: impl Into<String>,
        details: Value,
    ) -> Result<Self, crate::canonical::CanonicalError> {
        let digest = crate::canonical::sha256_hex(&details)?;
        Ok(Self {
            target: target.into(),
            details,
            digest,
            class: ActionClass::Mutating,
        })
    }

    /// Sets the class. When `details` is a JSON object (as every executor's in this
    /// crate is) the class is also written into it as `"class"` (`"read_only"` or
    /// `"mutating"`) and the digest recomputed, so the class is part of what is bound
    /// and recorded; otherwise only this field carries it.
    #[must_use]
    pub fn with_class(mut self, class: ActionClass) -> Self {
        self.class = class;
        if let Some(details) = self.details.as_object_mut() {
            let name = match class {
                ActionClass::ReadOnly => "read_only",
                ActionClass::Mutating => "mutating",
            };
            details.insert("class".into(), Value::from(name));
            // `details` had a canonical form already (see `new`); one more string member
            // cannot take it away. Were it to, the stale digest would no longer match
            // the details, and the binding would be refused as changed: fail closed.
            if let Ok(digest) = crate::canonical::sha256_hex(&self.details) {
                self.digest = digest;
            }
        }
        self
    }

    /// Sets the class to [`ActionClass::ReadOnly`] (see [`Binding::with_class`]).
    #[must_use]
    pub fn read_only(self) -> Self {
        self.with_class(ActionClass::ReadOnly)
    }
}

/// A process other than the host that may still carry a request after it was handed
/// over: for an MCP server over stdio, the server process and every process it started.
///
/// The runtime records it with the attempt before the request is sent, so that
/// recovery can kill and reap whatever may still be writing before it concludes
/// anything (a *not applied* readback is worthless while the carrier can still act).
/// A process is identified by `pid` **and** `start`, so a recycled pid is never taken
/// for it.
///
/// A request written to the server may be held by any of its descendants, and a
/// descendant can leave the process group (`setsid`, a daemonizing fork). Only
/// [`Carrier::cgroup`] covers the whole tree: without it, the carrier can never be shown
/// gone, and a *not applied* readback of its attempt is not accepted (the verdict stays
/// unresolved until an attestation).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Carrier {
    /// The process id.
    pub pid: u32,
    /// Its process group id (a server spawned in its own group: equal to `pid`).
    pub pgid: u32,
    /// The start time of the group's leader (on Linux, clock ticks since boot, from
    /// `/proc/PID/stat`); empty where it cannot be read (other platforms, or the
    /// process already exited), which makes the group's liveness unverifiable.
    pub start: String,
    /// The cgroup that holds every process the carrier started, however they regroup
    /// (Linux, where a cgroup v2 could be created for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CarrierCgroup>,
}

impl Carrier {
    /// A carrier: process `process` in the process group `group`, whose leader started
    /// at `start`, with no cgroup.
    #[must_use]
    pub fn new(process: u32, group: u32, start: impl Into<String>) -> Self {
        Self {
            pid: process,
            pgid: group,
            start: start.into(),
            cgroup: None,
        }
    }

    /// The same carrier, whose whole process tree is held in `cgroup`.
    #[must_use]
    pub fn with_cgroup(mut self, cgroup: Option<CarrierCgroup>) -> Self {
        self.cgroup = cgroup;
        self
    }
}

/// The cgroup (v2, Linux) created for one carrier: membership passes to every process
/// it starts, so the cgroup is empty exactly when the whole tree is gone.
///
/// The ids tell a cgroup from a later one at the same path: a cgroup's id is the inode
/// number of its directory in the cgroup2 file system.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CarrierCgroup {
    /// Its directory, where the host mounts the cgroup2 file system.
    pub path: String,
    /// The id (inode number, in decimal) of that directory.
    pub id: String,
    /// The id of its parent directory: when the cgroup is gone, a parent with this id
    /// shows that the path was looked up in the same hierarchy.
    pub parent: String,
}

impl CarrierCgroup {
    /// A cgroup record: directory `path`, with inode numbers `id` and `parent`.
    #[must_use]
    pub fn new(path: impl Into<String>, id: u64, parent: u64) -> Self {
        Self {
            path: path.into(),
            id: id.to_string(),
            parent: parent.to_string(),
        }
    }
}

/// Why an executor refused a request before anything was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
#[non_exhaustive]
pub struct Refusal {
    /// A stable, machine-readable code (`binding_changed`, `invalid_arguments`, …).
    pub code: String,
    /// What went wrong and what to do.
    pub message: String,
}

impl Refusal {
    /// A refusal with a code and a message.
    #[must_use]
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// How a JSON-RPC-style rejection (an error reply, not a tool result) is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectionClass {
    /// The target may or may not have acted (the fail-closed default).
    Unknown,
    /// The caller's policy declares that this rejection means nothing was applied.
    NotApplied,
}

/// How far one request got, as the executor actually knows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Delivery {
    /// Not one byte of the request reached the target. Safe to treat as not applied.
    NothingWritten {
        /// Why nothing was written.
        reason: String,
    },
    /// Some or all of the request may have reached the target, and no reply was read
    /// (timeout, EOF, crash, garbage, lost reply). The effect may have happened.
    PossiblyWritten {
        /// What was observed.
        reason: String,
    },
    /// The target replied with success.
    Succeeded {
        /// The reply, retained as evidence.
        reply: Value,
    },
    /// The target ran the action and reported that it failed (MCP `isError: true`).
    ToolFailed {
        /// The reply, retained as evidence.
        reply: Value,
    },
    /// The target reported that only part of the effect happened.
    Partial {
        /// The reply, retained as evidence.
        reply: Value,
    },
    /// The target rejected the request at the protocol level (a JSON-RPC error reply).
    Rejected {
        /// The error object, retained as evidence.
        error: Value,
        /// How the caller's policy classifies this rejection.
        class: RejectionClass,
    },
}

/// Carries one request to one target.
///
/// The pathway calls [`Executor::bind`] when it is bound, [`Executor::prepare`] just
/// before the write-ahead attempt record is committed (a refusal there means nothing
/// was sent and the bound pathway comes back), then [`Executor::execute`] after the
/// record is durable.
pub trait Executor {
    /// Describes the exact target this request would go to now.
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal>;

    /// Re-checks the live target against `binding` and validates the request. Any
    /// difference must refuse before a byte is sent.
    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal>;

    /// Sends the request and reports how far it got.
    fn execute(&mut self, request: &Request) -> Delivery;

    /// Drops any preparation; called by dispatch when a prepared request will not be
    /// executed (the compare-and-set was lost, the attempt record failed, …).
    ///
    /// A preparation is for one request and one attempt: after `release`, `execute`
    /// must send nothing until the next successful `prepare`. The default does
    /// nothing, for executors that keep no preparation.
    fn release(&mut self) {}

    /// Asked after a successful `prepare`, right before the write-ahead attempt record is
    /// committed: a refusal records nothing and sends nothing (a stored pathway stays as it
    /// was; one not stored yet is not stored). For a request its caller withdrew meanwhile
    /// (a proxy's client cancelled it). A request withdrawn after this point must still
    /// not be sent by `execute`, which then reports [`Delivery::NothingWritten`]. The
    /// default never refuses.
    fn still_wanted(&self) -> Result<(), Refusal> {
        Ok(())
    }

    /// The process, other than the host, that carries a request this executor sends,
    /// if there is one (see [`Carrier`]). Asked before the request is sent.
    ///
    /// `None` (the default) means the host process carries the request itself (it
    /// writes in-process), so once the host is gone nothing can still act on it. An
    /// executor that hands requests to another process must say which, and name the
    /// cgroup that holds that process and everything it starts
    /// ([`Carrier::with_cgroup`]): a carrier without one can never be shown gone, so a
    /// *not applied* readback of its lost requests is not accepted.
    fn carrier(&self) -> Option<Carrier> {
        None
    }
}

/// What an independent observation found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Observation {
    /// The intended effect is present.
    Applied {
        /// What was observed, retained as evidence.
        evidence: Value,
    },
    /// The intended effect is absent.
    NotApplied {
        /// What was observed, retained as evidence.
        evidence: Value,
    },
    /// The observation could not decide.
    Inconclusive {
        /// What was observed, retained as evidence.
        evidence: Value,
    },
}

/// Independently observes whether the effect of `request` happened.
pub trait Readback {
    /// Looks at the target (never through the reply) and reports what it sees.
    fn observe(&mut self, request: &Request) -> Observation;
}

/// Whether the action changes the world. A mutating action completes only with readback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ActionClass {
    /// Reads only: a success reply completes it.
    ReadOnly,
    /// Changes something: a success reply is not enough; readback must verify it.
    Mutating,
}

/// A request as JSON: its action and arguments.
pub(crate) fn request_json(request: &Request) -> Value {
    serde_json::json!({ "action": request.action, "arguments": request.arguments })
}
