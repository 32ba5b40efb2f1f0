//! What transitions with more than one possible result hand back.

use super::stage::Loadable;
use super::stage::{
    Aborted, Approved, AwaitingApproval, Bound, Completed, Denied, Failed, Held, HumanGate,
    PartiallyCompleted, Proposed, ReadyToResume, RepairRequired, RepairUnsettled, Returned,
    Stopped, Unknown,
};
use std::fmt;

use super::{Pathway, PathwayError};
use crate::state::State;
use crate::store::{AttemptRecord, PathwayRecord};

/// The result of admission.
#[derive(Debug)]
#[must_use = "admission hands the pathway on in its next stage"]
#[non_exhaustive]
pub enum Admission {
    /// Admitted by policy.
    Approved(Pathway<Approved>),
    /// Waiting for an approval.
    AwaitingApproval(Pathway<AwaitingApproval>),
    /// In front of a Human Gate.
    HumanGate(Pathway<HumanGate>),
    /// Refused by policy. Terminal.
    Denied(Pathway<Denied>),
}

/// Dispatch refused before any attempt was recorded or any byte was sent.
/// The bound pathway comes back and may be dispatched again.
#[derive(Debug)]
#[must_use = "the bound pathway comes back inside NotSent"]
pub struct NotSent {
    pub(crate) pathway: Pathway<Bound>,
    pub(crate) error: PathwayError,
}

impl NotSent {
    /// Why nothing was sent.
    #[must_use]
    pub fn error(&self) -> &PathwayError {
        &self.error
    }
    /// The bound pathway, unchanged.
    #[must_use]
    pub fn into_pathway(self) -> Pathway<Bound> {
        self.pathway
    }
}

/// The outcome was observed but could not be recorded (storage failed after the call).
///
/// The attempt stays `in_flight` in the database; [`Runtime::recover`](crate::Runtime::recover)
/// returns it as unknown. Nothing about it may be retried.
#[derive(Debug)]
#[must_use = "an unrecorded outcome must be recovered"]
pub struct Unrecorded {
    /// The pathway.
    pub pathway: String,
    /// The attempt whose outcome was lost.
    pub attempt: String,
    /// Why the outcome could not be stored.
    pub error: PathwayError,
}

/// A read dispatched with one commit ([`crate::BoundRead::dispatch`]) was sent and
/// answered, but its record (the attempt and its outcome, committed together) could not be
/// stored: **nothing** of it is recorded. A read changes nothing, so there is nothing to
/// recover or reconcile; its answer must not be handed on as a recorded one. Reading again
/// is a new read.
#[derive(Debug)]
#[must_use = "a read whose record failed has no answer to hand on"]
pub struct ReadUnrecorded {
    /// The pathway (not stored by this dispatch).
    pub pathway: String,
    /// The attempt that was sent, and not recorded.
    pub attempt: String,
    /// Why the record could not be stored ([`PathwayError::KeyTaken`]: an identical call
    /// took the pathway's idempotency key first).
    pub error: PathwayError,
}

/// The honest outcome of a dispatch, classified by what is actually known.
#[derive(Debug)]
#[must_use = "an outcome must be handled: an Unknown must be reconciled, a Returned read back"]
#[non_exhaustive]
pub enum Outcome {
    /// Refused before anything was sent; the bound pathway comes back.
    NotSent(NotSent),
    /// A read-only action succeeded, or (through [`Pathway::dispatch_and_confirm`]) a
    /// mutating one whose effect the readback verified. Terminal.
    Completed(Pathway<Completed>),
    /// A mutating action returned success; it completes only after readback (never
    /// returned by [`Pathway::dispatch_and_confirm`], which reads back at once).
    Returned(Pathway<Returned>),
    /// The tool failed, a rejection the policy calls not applied, or nothing was written
    /// after the attempt was recorded: the repair owner must act. (A read-only call that
    /// fails ends [`Outcome::ReadFailed`] instead.)
    Failed(Pathway<RepairRequired>),
    /// A read-only call errored, was rejected, timed out or was cut off: the pathway is
    /// `failed`, with the reason in its attempt's outcome. Terminal: a read changes
    /// nothing, so there is nothing to repair or reconcile. Only a pathway whose definition
    /// *and* binding are read-only ends here; a call that may change something never does.
    ReadFailed(Pathway<Failed>),
    /// Part of the effect happened.
    Partial(Pathway<PartiallyCompleted>),
    /// The effect may or may not have happened.
    Unknown(Pathway<Unknown>),
    /// The outcome could not be stored; `recover()` will report the attempt as unknown.
    Unrecorded(Unrecorded),
    /// A read dispatched with one commit ([`crate::BoundRead::dispatch`]) was answered,
    /// but neither its attempt nor its outcome could be recorded: nothing is stored.
    ReadUnrecorded(ReadUnrecorded),
}

/// The result of reading back a returned call.
#[derive(Debug)]
#[must_use = "confirmation hands the pathway on"]
#[non_exhaustive]
pub enum Confirmed {
    /// Readback verified the effect. Terminal.
    Completed(Pathway<Completed>),
    /// Readback did not verify it: the pathway is unknown and must be reconciled.
    Unknown(Pathway<Unknown>),
}

/// A pathway loaded from the store, in the stage its stored state allows.
///
/// Only stages that are safe to re-enter exist here: an attempt that was in flight
/// comes back as [`StoredPathway::Unknown`], never as a bound pathway.
#[derive(Debug)]
#[must_use = "a recovered pathway needs handling"]
#[non_exhaustive]
pub enum StoredPathway {
    /// Proposed.
    Proposed(Pathway<Proposed>),
    /// Awaiting approval.
    AwaitingApproval(Pathway<AwaitingApproval>),
    /// Human Gate.
    HumanGate(Pathway<HumanGate>),
    /// Held.
    Held(Pathway<Held>),
    /// Approved (must be bound again).
    Approved(Pathway<Approved>),
    /// Returned success, readback pending.
    Returned(Pathway<Returned>),
    /// Unknown: must be reconciled.
    Unknown(Pathway<Unknown>),
    /// Stopped.
    Stopped(Pathway<Stopped>),
    /// Partially completed.
    PartiallyCompleted(Pathway<PartiallyCompleted>),
    /// Repair required; the last attempt certainly did not take effect.
    RepairRequired(Pathway<RepairRequired>),
    /// Repair required after an attempt that may have taken effect: settle it first.
    RepairUnsettled(Pathway<RepairUnsettled>),
    /// Ready to resume.
    ReadyToResume(Pathway<ReadyToResume>),
    /// Completed (terminal; only from `load`).
    Completed(Pathway<Completed>),
    /// Denied (terminal; only from `load`).
    Denied(Pathway<Denied>),
    /// Aborted (terminal; only from `load`).
    Aborted(Pathway<Aborted>),
    /// A failed read (terminal; only from `load`).
    Failed(Pathway<Failed>),
    /// An attempt is in flight in another live process: not ours to touch.
    InFlightElsewhere {
        /// The pathway row.
        pathway: Box<PathwayRecord>,
        /// The in-flight attempt.
        attempt: Box<AttemptRecord>,
    },
}

impl Admission {
    /// The approved pathway, or the admission itself when the policy decided otherwise.
    ///
    /// ```
    /// # use rpr::executor::{Request, file::WRITE_FILE};
    /// # use rpr::{ActionClass, Actor, Authority, Definition, Runtime, ALLOW_ALL};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("rpr-doc-approved-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let rt = Runtime::open(dir.join("rpr.db"))?;
    /// # let alice = Actor::new("alice");
    /// # let request = Request::new(WRITE_FILE, serde_json::json!({"path": "a.txt", "content": "a"}));
    /// # let definition = Definition::new(request, ActionClass::Mutating, "doc-1", Authority::single(&alice));
    /// let proposed = rt.propose(&alice, definition)?.into_new()?;
    /// let approved = proposed.admit(&rt, &alice, ALLOW_ALL)?.into_approved()?;
    /// # let _ = approved;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_approved(self) -> Result<Pathway<Approved>, Admission> {
        match self {
            Admission::Approved(p) => Ok(p),
            other => Err(other),
        }
    }

    /// The pathway's id.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Admission::Approved(p) => p.id(),
            Admission::AwaitingApproval(p) => p.id(),
            Admission::HumanGate(p) => p.id(),
            Admission::Denied(p) => p.id(),
        }
    }

    /// The state admission moved the pathway to.
    #[must_use]
    pub fn state(&self) -> State {
        match self {
            Admission::Approved(p) => p.state(),
            Admission::AwaitingApproval(p) => p.state(),
            Admission::HumanGate(p) => p.state(),
            Admission::Denied(p) => p.state(),
        }
    }
}

impl Outcome {
    /// The completed pathway, or the outcome itself when the dispatch ended otherwise.
    #[expect(
        clippy::result_large_err,
        reason = "the error is the outcome itself, which dispatch returns by value too"
    )]
    pub fn into_completed(self) -> Result<Pathway<Completed>, Outcome> {
        match self {
            Outcome::Completed(p) => Ok(p),
            other => Err(other),
        }
    }
}

impl Confirmed {
    /// The completed pathway, or the confirmation itself when readback left it unknown.
    pub fn into_completed(self) -> Result<Pathway<Completed>, Confirmed> {
        match self {
            Confirmed::Completed(p) => Ok(p),
            other @ Confirmed::Unknown(_) => Err(other),
        }
    }
}

// Each result displays what happened, so that a helper's `Err` (the result that was not
// the one asked for) can travel with `?` as an error.

/// `pathway <id>: <how> <state>`.
fn describe(f: &mut fmt::Formatter<'_>, id: &str, how: &str, state: State) -> fmt::Result {
    write!(f, "pathway {id}: {how} {state}")
}

impl fmt::Display for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, self.id(), "admission moved it to", self.state())
    }
}

impl std::error::Error for Admission {}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (id, state) = match self {
            Outcome::NotSent(n) => {
                return write!(f, "pathway {}: not sent: {}", n.pathway.id(), n.error);
            }
            Outcome::Unrecorded(u) => {
                return write!(
                    f,
                    "pathway {}: the outcome of attempt {} could not be recorded (recovery reports it unknown): {}",
                    u.pathway, u.attempt, u.error
                );
            }
            Outcome::ReadUnrecorded(u) => {
                return write!(
                    f,
                    "pathway {}: the read (attempt {}) was answered but nothing of it could be recorded: {}",
                    u.pathway, u.attempt, u.error
                );
            }
            Outcome::Completed(p) => (p.id(), p.state()),
            Outcome::Returned(p) => (p.id(), p.state()),
            Outcome::Failed(p) => (p.id(), p.state()),
            Outcome::ReadFailed(p) => (p.id(), p.state()),
            Outcome::Partial(p) => (p.id(), p.state()),
            Outcome::Unknown(p) => (p.id(), p.state()),
        };
        describe(f, id, "dispatch left it", state)
    }
}

impl std::error::Error for Outcome {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Outcome::NotSent(n) => Some(&n.error),
            Outcome::Unrecorded(u) => Some(&u.error),
            Outcome::ReadUnrecorded(u) => Some(&u.error),
            _ => None,
        }
    }
}

impl fmt::Display for Confirmed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (id, state) = match self {
            Confirmed::Completed(p) => (p.id(), p.state()),
            Confirmed::Unknown(p) => (p.id(), p.state()),
        };
        describe(f, id, "readback left it", state)
    }
}

impl std::error::Error for Confirmed {}

impl fmt::Display for StoredPathway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, self.id(), "stored in state", self.state())
    }
}

impl std::error::Error for StoredPathway {}

/// Compile-time proof that every variant of [`StoredPathway`] carries a [`Loadable`] stage:
/// the match is exhaustive, so a new variant must be added here, and a `Pathway<Bound>` in
/// it does not compile (`Bound` is not `Loadable`).
const _: fn(&StoredPathway) = |stored| {
    fn loadable<S: Loadable>(_: &Pathway<S>) {}
    match stored {
        StoredPathway::Proposed(p) => loadable(p),
        StoredPathway::AwaitingApproval(p) => loadable(p),
        StoredPathway::HumanGate(p) => loadable(p),
        StoredPathway::Held(p) => loadable(p),
        StoredPathway::Approved(p) => loadable(p),
        StoredPathway::Returned(p) => loadable(p),
        StoredPathway::Unknown(p) => loadable(p),
        StoredPathway::Stopped(p) => loadable(p),
        StoredPathway::PartiallyCompleted(p) => loadable(p),
        StoredPathway::RepairRequired(p) => loadable(p),
        StoredPathway::RepairUnsettled(p) => loadable(p),
        StoredPathway::ReadyToResume(p) => loadable(p),
        StoredPathway::Completed(p) => loadable(p),
        StoredPathway::Denied(p) => loadable(p),
        StoredPathway::Aborted(p) => loadable(p),
        StoredPathway::Failed(p) => loadable(p),
        StoredPathway::InFlightElsewhere { .. } => {}
    }
};

impl StoredPathway {
    /// The id, the compare-and-set version and the request digest, from whichever stage
    /// (or row) holds them.
    fn parts(&self) -> (&str, i64, &str) {
        match self {
            Self::Proposed(p) => p.core.as_parts(),
            Self::AwaitingApproval(p) => p.core.as_parts(),
            Self::HumanGate(p) => p.core.as_parts(),
            Self::Held(p) => p.core.as_parts(),
            Self::Approved(p) => p.core.as_parts(),
            Self::Returned(p) => p.core.as_parts(),
            Self::Unknown(p) => p.core.as_parts(),
            Self::Stopped(p) => p.core.as_parts(),
            Self::PartiallyCompleted(p) => p.core.as_parts(),
            Self::RepairRequired(p) => p.core.as_parts(),
            Self::RepairUnsettled(p) => p.core.as_parts(),
            Self::ReadyToResume(p) => p.core.as_parts(),
            Self::Completed(p) => p.core.as_parts(),
            Self::Denied(p) => p.core.as_parts(),
            Self::Aborted(p) => p.core.as_parts(),
            Self::Failed(p) => p.core.as_parts(),
            Self::InFlightElsewhere { pathway, .. } => {
                (&pathway.id, pathway.version, &pathway.request_digest)
            }
        }
    }

    /// The pathway id.
    #[must_use]
    pub fn id(&self) -> &str {
        self.parts().0
    }

    /// The pathway's compare-and-set version as loaded: 1 when proposed, one more per
    /// recorded step. A caller that showed a person the pathway at one version can refuse
    /// to act on it at another.
    #[must_use]
    pub fn version(&self) -> i64 {
        self.parts().1
    }

    /// The pathway's state (an attempt in flight elsewhere: `running`).
    #[must_use]
    pub fn state(&self) -> crate::state::State {
        match self {
            Self::Proposed(p) => p.state(),
            Self::AwaitingApproval(p) => p.state(),
            Self::HumanGate(p) => p.state(),
            Self::Held(p) => p.state(),
            Self::Approved(p) => p.state(),
            Self::Returned(p) => p.state(),
            Self::Unknown(p) => p.state(),
            Self::Stopped(p) => p.state(),
            Self::PartiallyCompleted(p) => p.state(),
            Self::RepairRequired(p) => p.state(),
            Self::RepairUnsettled(p) => p.state(),
            Self::ReadyToResume(p) => p.state(),
            Self::Completed(p) => p.state(),
            Self::Denied(p) => p.state(),
            Self::Aborted(p) => p.state(),
            Self::Failed(p) => p.state(),
            Self::InFlightElsewhere { pathway, .. } => pathway.state,
        }
    }

    /// The digest of the pathway's unredacted request.
    #[must_use]
    pub fn request_digest(&self) -> &str {
        self.parts().2
    }
}
