//! The stage types of a pathway. Each is a distinct type; a [`Pathway`](super::Pathway)
//! in one stage has exactly the methods that stage allows.
//!
//! No stage has a public constructor, `Clone`, `Default`, `From` or `Deserialize`:
//! the only ways to get one are [`Runtime::propose`](crate::Runtime::propose), a
//! transition, [`Runtime::load`](crate::Runtime::load) or
//! [`Runtime::recover`](crate::Runtime::recover).

use serde_json::Value;

use crate::executor::Binding;
use crate::state::State;

pub(crate) mod sealed {
    pub trait Sealed {}
    /// What binding needs from a bindable stage.
    pub trait BindFrom {
        fn previous_attempt(&self) -> Option<String>;
    }
    /// The attempt a repairable stage repairs.
    pub trait RepairFrom {
        fn attempt(&self) -> Option<String>;
    }
    /// The attempt a reconcilable stage is about.
    pub trait AttemptOf {
        fn attempt(&self) -> &str;
    }
}

/// A pathway stage. Sealed: only rpr defines stages.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a pathway stage",
    label = "not one of rpr's stages",
    note = "stages are defined by rpr only (rpr::stage::*); they cannot be implemented outside the crate"
)]
pub trait Stage: sealed::Sealed {
    /// The stored state of a pathway in this stage.
    const STATE: State;
}

macro_rules! stage {
    ($(#[$m:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? } => $state:expr) => {
        $(#[$m])*
        #[derive(Debug)]
        pub struct $name {
            $(pub(crate) $field: $ty,)*
            pub(crate) _private: (),
        }
        impl sealed::Sealed for $name {}
        impl Stage for $name {
            const STATE: State = $state;
        }
    };
}

stage!(
    /// Proposed by an actor; admission decides what happens next.
    Proposed {} => State::Proposed
);
stage!(
    /// Admission asked for an approval by the approval authority.
    AwaitingApproval {} => State::AwaitingApproval
);
stage!(
    /// A Human Gate: the approval authority must decide.
    HumanGate {} => State::HumanGate
);
stage!(
    /// Held by the stop authority.
    Held {} => State::Held
);
stage!(
    /// Admitted; may be bound to a target.
    Approved {} => State::Approved
);
stage!(
    /// Bound to one exact target; the only stage with `dispatch`. Never re-hydrated.
    Bound { binding: Binding, from: State, previous_attempt: Option<String> } => State::Approved
);
stage!(
    /// A mutating call that returned success and awaits independent readback.
    Returned { attempt: String, reply: Value } => State::Running
);
stage!(
    /// The effect may or may not have happened. No dispatch, no retry: only reconciliation.
    Unknown { attempt: String } => State::WriteStatusUnknown
);
stage!(
    /// Stopped by the stop authority after the target answered.
    Stopped { attempt: String } => State::Stopped
);
stage!(
    /// Only part of the effect happened.
    PartiallyCompleted { attempt: String } => State::PartiallyCompleted
);
stage!(
    /// The attempt failed or did not apply; the repair owner must act.
    RepairRequired { attempt: Option<String> } => State::RepairRequired
);
stage!(
    /// Sent to repair after an attempt that may have taken effect (it returned success,
    /// partially completed, or was stopped after replying). No new attempt, no repair:
    /// only a not-applied verdict (readback or attestation) settles it, or abort.
    RepairUnsettled { attempt: String } => State::RepairRequired
);
stage!(
    /// Repaired; a new attempt may be bound and dispatched.
    ReadyToResume { previous_attempt: Option<String> } => State::ReadyToResume
);
stage!(
    /// Done. Terminal.
    Completed {} => State::Completed
);
stage!(
    /// Refused. Terminal.
    Denied {} => State::Denied
);
stage!(
    /// Abandoned, residuals recorded. Terminal.
    Aborted {} => State::Aborted
);
stage!(
    /// A read-only call that errored, timed out or was cut off; the attempt's outcome
    /// records why. Terminal: a read changes nothing, so nothing is left to repair or
    /// reconcile.
    Failed { attempt: String } => State::Failed
);

/// Stages that re-hydration ([`Runtime::load`](crate::Runtime::load),
/// [`Runtime::recover`](crate::Runtime::recover)) may hand out: every stage but [`Bound`].
/// Every variant of [`StoredPathway`](crate::StoredPathway) carries a loadable stage; an
/// exhaustive match in the crate proves it for every variant, so a new variant carrying a
/// bound pathway does not compile.
#[diagnostic::on_unimplemented(
    message = "a pathway in stage `{Self}` is never loaded from the store",
    note = "re-hydration never yields a bound pathway: bind a loaded pathway again, which re-checks the live target"
)]
pub trait Loadable: Stage {}
impl Loadable for Proposed {}
impl Loadable for AwaitingApproval {}
impl Loadable for HumanGate {}
impl Loadable for Held {}
impl Loadable for Approved {}
impl Loadable for Returned {}
impl Loadable for Unknown {}
impl Loadable for Stopped {}
impl Loadable for PartiallyCompleted {}
impl Loadable for RepairRequired {}
impl Loadable for RepairUnsettled {}
impl Loadable for ReadyToResume {}
impl Loadable for Completed {}
impl Loadable for Denied {}
impl Loadable for Aborted {}
impl Loadable for Failed {}

/// Stages from which the residual owner may abort.
#[diagnostic::on_unimplemented(
    message = "a pathway in stage `{Self}` cannot be aborted",
    note = "abort is an edge only from approved, held, human_gate, stopped, repair_required and ready_to_resume"
)]
pub trait Abortable: Stage {}
impl Abortable for Approved {}
impl Abortable for Held {}
impl Abortable for HumanGate {}
impl Abortable for Stopped {}
impl Abortable for RepairRequired {}
impl Abortable for RepairUnsettled {}
impl Abortable for ReadyToResume {}

/// Stages that may be repaired: the last attempt certainly did not take effect.
#[diagnostic::on_unimplemented(
    message = "a pathway in stage `{Self}` cannot be repaired: its last attempt may have taken effect",
    note = "only RepairRequired can be repaired; settle a RepairUnsettled pathway with a Reconciliation<NotApplied> first (Runtime::reconcile, then settle), or abort it"
)]
pub trait Repairable: Stage + sealed::RepairFrom {}
impl Repairable for RepairRequired {}
impl sealed::RepairFrom for RepairRequired {
    fn attempt(&self) -> Option<String> {
        self.attempt.clone()
    }
}

/// Stages whose last attempt may have taken effect and can be reconciled: an unknown
/// outcome, or a repair after a reply.
#[diagnostic::on_unimplemented(
    message = "a pathway in stage `{Self}` has no attempt to reconcile",
    note = "reconcile exists for Unknown and RepairUnsettled pathways"
)]
pub trait Reconcilable: Stage + sealed::AttemptOf {}
impl Reconcilable for Unknown {}
impl Reconcilable for RepairUnsettled {}
impl sealed::AttemptOf for Unknown {
    fn attempt(&self) -> &str {
        &self.attempt
    }
}
impl sealed::AttemptOf for RepairUnsettled {
    fn attempt(&self) -> &str {
        &self.attempt
    }
}

/// Stages in which the approval authority decides (approve with an [`Approval`](crate::token::Approval), or deny).
#[diagnostic::on_unimplemented(
    message = "a pathway in stage `{Self}` is not waiting for an approval",
    note = "approve and deny exist only on AwaitingApproval and HumanGate"
)]
pub trait Gated: Stage {}
impl Gated for AwaitingApproval {}
impl Gated for HumanGate {}

/// Stages that may be bound to a target: admitted, or repaired and ready to resume.
#[diagnostic::on_unimplemented(
    message = "a pathway in stage `{Self}` cannot be bound to a target",
    note = "only Approved and ReadyToResume pathways can be bound; admit it, or repair it first"
)]
pub trait Bindable: Stage + sealed::BindFrom {}
impl Bindable for Approved {}
impl Bindable for ReadyToResume {}
impl sealed::BindFrom for Approved {
    fn previous_attempt(&self) -> Option<String> {
        None
    }
}
impl sealed::BindFrom for ReadyToResume {
    fn previous_attempt(&self) -> Option<String> {
        self.previous_attempt.clone()
    }
}
