//! What a ledger event records: its `kind`, one name per step a pathway can take.

/// The kind of a ledger event (its `kind` member): what the step it records did. Stored
/// by its snake_case name ([`EventKind::as_str`]); a stored name that is none of these is a
/// finding of `verify`, never skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// The pathway was proposed (its first event).
    Proposed,
    /// The admission decided (allowed, or sent to approval).
    Admitted,
    /// The pathway entered a Human Gate.
    HumanGate,
    /// An approval was granted (not yet used).
    ApprovalGranted,
    /// A granted approval was used: the pathway is approved.
    Approved,
    /// Denied.
    Denied,
    /// Escalated to a Human Gate.
    Escalated,
    /// Held.
    Held,
    /// Released from a hold.
    Released,
    /// Aborted.
    Aborted,
    /// The dispatch was refused before anything was sent.
    DispatchRefused,
    /// The write-ahead attempt record, committed before the send.
    AttemptStarted,
    /// The attempt certainly sent nothing.
    AttemptNotSent,
    /// Whether the attempt took effect is unknown.
    AttemptUnknown,
    /// A write returned (its effect not yet read back).
    AttemptReturned,
    /// A read completed.
    AttemptCompleted,
    /// The attempt failed.
    AttemptFailed,
    /// The attempt took part of its effect.
    AttemptPartial,
    /// The server rejected the attempt.
    AttemptRejected,
    /// A readback's observation.
    Readback,
    /// Stopped.
    Stopped,
    /// Sent to repair.
    RepairRequired,
    /// A verdict on an unknown result (reconciliation).
    Reconciled,
    /// Repaired.
    Repaired,
    /// Recovery found an attempt in flight whose owner is gone or whose lease lapsed.
    RecoveredUnknown,
    /// The late outcome of an attempt no longer in flight was refused (and recorded).
    LateOutcomeRefused,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [Self; 26] = [
        Self::Proposed,
        Self::Admitted,
        Self::HumanGate,
        Self::ApprovalGranted,
        Self::Approved,
        Self::Denied,
        Self::Escalated,
        Self::Held,
        Self::Released,
        Self::Aborted,
        Self::DispatchRefused,
        Self::AttemptStarted,
        Self::AttemptNotSent,
        Self::AttemptUnknown,
        Self::AttemptReturned,
        Self::AttemptCompleted,
        Self::AttemptFailed,
        Self::AttemptPartial,
        Self::AttemptRejected,
        Self::Readback,
        Self::Stopped,
        Self::RepairRequired,
        Self::Reconciled,
        Self::Repaired,
        Self::RecoveredUnknown,
        Self::LateOutcomeRefused,
    ];

    /// The stored name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Proposed => "proposed",
            Self::Admitted => "admitted",
            Self::HumanGate => "human_gate",
            Self::ApprovalGranted => "approval_granted",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Escalated => "escalated",
            Self::Held => "held",
            Self::Released => "released",
            Self::Aborted => "aborted",
            Self::DispatchRefused => "dispatch_refused",
            Self::AttemptStarted => "attempt_started",
            Self::AttemptNotSent => "attempt_not_sent",
            Self::AttemptUnknown => "attempt_unknown",
            Self::AttemptReturned => "attempt_returned",
            Self::AttemptCompleted => "attempt_completed",
            Self::AttemptFailed => "attempt_failed",
            Self::AttemptPartial => "attempt_partial",
            Self::AttemptRejected => "attempt_rejected",
            Self::Readback => "readback",
            Self::Stopped => "stopped",
            Self::RepairRequired => "repair_required",
            Self::Reconciled => "reconciled",
            Self::Repaired => "repaired",
            Self::RecoveredUnknown => "recovered_unknown",
            Self::LateOutcomeRefused => "late_outcome_refused",
        }
    }

    /// Whether it records what a send of the attempt did (every `attempt_*` kind but the
    /// write-ahead record): such an event is legal only while the attempt is in flight.
    #[must_use]
    pub const fn is_dispatch_outcome(self) -> bool {
        matches!(
            self,
            Self::AttemptNotSent
                | Self::AttemptUnknown
                | Self::AttemptReturned
                | Self::AttemptCompleted
                | Self::AttemptFailed
                | Self::AttemptPartial
                | Self::AttemptRejected
        )
    }
}

crate::state::named!(
    EventKind,
    "one of the ledger's event kinds (docs/storage.md)"
);

#[cfg(test)]
mod tests {
    use super::EventKind;

    #[test]
    fn every_kind_round_trips_through_its_name_and_names_are_distinct() {
        let mut names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        for kind in EventKind::ALL {
            assert_eq!(kind.as_str().parse::<EventKind>(), Ok(kind));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EventKind::ALL.len());
        assert!("attempt_exploded".parse::<EventKind>().is_err());
    }
}
