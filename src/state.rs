//! The fourteen pathway states and the edges between them, as data.
//!
//! This is the run-time view of the state machine in `src/state_machine.json`. The
//! typed transitions in [`crate::pathway`] each name one edge of [`EDGES`]; the store
//! refuses to write any state change that is not in [`EDGES`]. The test
//! `tests/state_machine.rs` proves that this table, the JSON file and the typed
//! methods agree.

use std::fmt;
use std::str::FromStr;

/// One of the fourteen pathway states.
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
}

impl State {
    /// Every state, in the order of the spec file.
    pub const ALL: [State; 14] = [
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
        }
    }

    /// Whether no edge leaves this state.
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Denied | State::Aborted)
    }

    /// Whether `self -> to` is an edge of the state machine.
    #[must_use]
    pub fn allows(self, to: State) -> bool {
        EDGES.iter().any(|&(f, t)| f == self && t == to)
    }
}

impl serde::Serialize for State {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of the fourteen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a pathway state; expected one of the fourteen snake_case names in src/state_machine.json"
)]
pub struct UnknownState(pub String);

impl FromStr for State {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

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
