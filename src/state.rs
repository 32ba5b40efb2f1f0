//! The fifteen pathway states and the edges between them, as data.
//!
//! This is the run-time view of the state machine in `src/state_machine.json`. The
//! typed transitions in [`crate::pathway`] each name one edge of [`EDGES`]; the store
//! refuses to write any state change that is not in [`EDGES`]. The test
//! `tests/core/state_machine.rs` proves that this table, the JSON file and the typed
//! methods agree.

/// One of the fifteen pathway states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[expect(
    clippy::exhaustive_enums,
    reason = "the state machine is fixed by the brief; a new state is a breaking change"
)]
pub enum State {
    /// Proposed by an actor, not yet admitted.
    Proposed,
    /// Admission asked for an approval.
    AwaitingApproval,
    /// Admitted (by policy or approval); may be bound and dispatched.
    Approved,
    /// An attempt is recorded and may have reached the target.
    Running,
    /// Held by the stop authority.
    Held,
    /// Waiting for a human decision by the approval authority.
    HumanGate,
    /// Stopped by the stop authority after the target answered.
    Stopped,
    /// The target reported that only part of the effect happened.
    PartiallyCompleted,
    /// The effect may or may not have happened; only reconciliation leaves this state.
    WriteStatusUnknown,
    /// The attempt failed or did not apply; the repair owner must act.
    RepairRequired,
    /// Repaired; the execution actor or resume authority may start a new attempt.
    ReadyToResume,
    /// Done, with independent readback where the action mutates. Terminal.
    Completed,
    /// Refused by policy or the approval authority. Terminal.
    Denied,
    /// Abandoned with residuals recorded by the residual owner. Terminal.
    Aborted,
    /// A read-only call that errored, timed out or was cut off, its reason recorded.
    /// Terminal: a read changes nothing, so there is nothing to repair or reconcile (an
    /// identical read later is a new pathway).
    Failed,
}

impl State {
    /// Every state, in the order of the spec file.
    pub const ALL: [State; 15] = [
        State::Proposed,
        State::AwaitingApproval,
        State::Approved,
        State::Running,
        State::Held,
        State::HumanGate,
        State::Stopped,
        State::PartiallyCompleted,
        State::WriteStatusUnknown,
        State::RepairRequired,
        State::ReadyToResume,
        State::Completed,
        State::Denied,
        State::Aborted,
        State::Failed,
    ];

    /// The snake_case name used in the database, the ledger and the spec file.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Proposed => "proposed",
            State::AwaitingApproval => "awaiting_approval",
            State::Approved => "approved",
            State::Running => "running",
            State::Held => "held",
            State::HumanGate => "human_gate",
            State::Stopped => "stopped",
            State::PartiallyCompleted => "partially_completed",
            State::WriteStatusUnknown => "write_status_unknown",
            State::RepairRequired => "repair_required",
            State::ReadyToResume => "ready_to_resume",
            State::Completed => "completed",
            State::Denied => "denied",
            State::Aborted => "aborted",
            State::Failed => "failed",
        }
    }

    /// Whether no edge leaves this state.
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed | State::Denied | State::Aborted | State::Failed
        )
    }

    /// Whether `self -> to` is an edge of the state machine.
    #[must_use]
    pub fn allows(self, to: State) -> bool {
        EDGES.iter().any(|&(f, t)| f == self && t == to)
    }
}

/// `Display`, `FromStr` and serde for an enum with `ALL` and `as_str`: its snake_case names
/// are written once, in `as_str`, and everything else reads them from there.
macro_rules! named {
    ($t:ty, $err:expr) => {
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $t {
            type Err = $crate::state::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::state::UnknownName {
                        name: s.to_owned(),
                        expected: $err,
                    })
            }
        }

        impl ::serde::Serialize for $t {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $t {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                let name = <::std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                name.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use named;

named!(
    State,
    "one of the fifteen pathway states in src/state_machine.json"
);

/// A name that is not one of an enum's snake_case names (a [`State`], an
/// [`AttemptStatus`], a [`Role`](crate::Role)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not {expected}")]
#[non_exhaustive]
pub struct UnknownName {
    /// The name given.
    pub name: String,
    /// What was expected, in words.
    pub expected: &'static str,
}

/// The status of one attempt, as stored in its row and recorded in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[expect(
    clippy::exhaustive_enums,
    reason = "the statuses are stored in databases; a new one is a breaking change"
)]
pub enum AttemptStatus {
    /// Recorded before anything was sent; the outcome is not recorded yet.
    InFlight,
    /// Certainly not sent (nothing was written).
    NotSent,
    /// A mutating call returned success; readback pending.
    Returned,
    /// A read-only call succeeded.
    Succeeded,
    /// The tool reported failure.
    Failed,
    /// Part of the effect happened.
    Partial,
    /// The effect may or may not have happened.
    Unknown,
    /// Readback or reconciliation found the effect applied.
    Applied,
    /// The target rejected it as not applied, or reconciliation found it not applied.
    NotApplied,
}

impl AttemptStatus {
    /// Every status.
    pub const ALL: [AttemptStatus; 9] = [
        AttemptStatus::InFlight,
        AttemptStatus::NotSent,
        AttemptStatus::Returned,
        AttemptStatus::Succeeded,
        AttemptStatus::Failed,
        AttemptStatus::Partial,
        AttemptStatus::Unknown,
        AttemptStatus::Applied,
        AttemptStatus::NotApplied,
    ];

    /// The snake_case name used in the database and the ledger.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::InFlight => "in_flight",
            AttemptStatus::NotSent => "not_sent",
            AttemptStatus::Returned => "returned",
            AttemptStatus::Succeeded => "succeeded",
            AttemptStatus::Failed => "failed",
            AttemptStatus::Partial => "partial",
            AttemptStatus::Unknown => "unknown",
            AttemptStatus::Applied => "applied",
            AttemptStatus::NotApplied => "not_applied",
        }
    }

    /// Whether the request certainly did not take effect: only after such an attempt may
    /// a new one start (brief §11).
    #[must_use]
    pub const fn is_settled(self) -> bool {
        matches!(
            self,
            AttemptStatus::NotSent | AttemptStatus::Failed | AttemptStatus::NotApplied
        )
    }
}

named!(AttemptStatus, "an attempt status");

/// Every allowed edge `(from, to)`, the single run-time source of truth.
pub const EDGES: &[(State, State)] = &[
    (State::Proposed, State::AwaitingApproval),
    (State::Proposed, State::Approved),
    (State::Proposed, State::Denied),
    (State::AwaitingApproval, State::Approved),
    (State::AwaitingApproval, State::Denied),
    (State::AwaitingApproval, State::HumanGate),
    (State::Approved, State::Running),
    (State::Approved, State::Held),
    (State::Approved, State::Aborted),
    (State::Running, State::Completed),
    (State::Running, State::Stopped),
    (State::Running, State::PartiallyCompleted),
    (State::Running, State::WriteStatusUnknown),
    (State::Running, State::RepairRequired),
    (State::Running, State::Failed),
    (State::Held, State::HumanGate),
    (State::Held, State::Approved),
    (State::Held, State::Aborted),
    (State::HumanGate, State::Approved),
    (State::HumanGate, State::Denied),
    (State::HumanGate, State::Aborted),
    (State::Stopped, State::RepairRequired),
    (State::Stopped, State::Aborted),
    (State::PartiallyCompleted, State::RepairRequired),
    (State::WriteStatusUnknown, State::Completed),
    (State::WriteStatusUnknown, State::RepairRequired),
    (State::RepairRequired, State::ReadyToResume),
    (State::RepairRequired, State::Aborted),
    (State::ReadyToResume, State::Running),
    (State::ReadyToResume, State::Aborted),
];
