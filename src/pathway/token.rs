//! Proofs that only the library can make: approvals and reconciliation verdicts.

use std::marker::PhantomData;

use serde_json::Value;

use super::Actor;

/// A Human Gate approval, granted by the approval authority for one exact request.
///
/// Made by [`Runtime::grant_approval`](crate::Runtime::grant_approval), bound to the
/// pathway and its request digest, and consumed by `approve`: it cannot be cloned,
/// and the database refuses a second use.
#[derive(Debug)]
#[must_use = "an approval does nothing until it is passed to approve()"]
pub struct Approval {
    pub(crate) database: std::sync::Arc<str>,
    pub(crate) id: String,
    pub(crate) pathway: String,
    pub(crate) request_digest: String,
    pub(crate) approver: Actor,
}

impl Approval {
    /// Who granted it.
    #[must_use]
    pub fn approver(&self) -> &Actor {
        &self.approver
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A reconciliation verdict, as a type. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a reconciliation verdict",
    note = "verdicts are rpr::token::Applied, NotApplied and Unresolved"
)]
pub trait Verdict: sealed::Sealed {
    /// The verdict's name in the ledger.
    const NAME: &'static str;
}

/// Verdict: the effect happened.
#[derive(Debug)]
pub struct Applied(());
/// Verdict: the effect did not happen. Only this verdict opens the way to a new attempt.
#[derive(Debug)]
pub struct NotApplied(());
/// Verdict: still undecided; the pathway stays unknown.
#[derive(Debug)]
pub struct Unresolved(());

impl sealed::Sealed for Applied {}
impl sealed::Sealed for NotApplied {}
impl sealed::Sealed for Unresolved {}
impl Verdict for Applied {
    const NAME: &'static str = VerdictKind::Applied.as_str();
}
impl Verdict for NotApplied {
    const NAME: &'static str = VerdictKind::NotApplied.as_str();
}
impl Verdict for Unresolved {
    const NAME: &'static str = VerdictKind::Unresolved.as_str();
}

/// A verdict as a value (the [`Verdict`] types carry it in the type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VerdictKind {
    Applied,
    NotApplied,
    Unresolved,
}

impl VerdictKind {
    /// The verdict's name in the ledger.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Applied => "applied",
            VerdictKind::NotApplied => "not_applied",
            VerdictKind::Unresolved => "unresolved",
        }
    }
}

/// A reconciliation of one unknown attempt, with its verdict in the type.
///
/// Made only by [`Runtime::reconcile`](crate::Runtime::reconcile) (from a readback
/// observation) or [`Runtime::attest`](crate::Runtime::attest) (a decision by the
/// evidence owner or repair owner). It names the pathway and attempt it is for;
/// using it on another is refused at run time.
#[derive(Debug)]
#[must_use = "a reconciliation does nothing until the unknown pathway consumes it"]
pub struct Reconciliation<V: Verdict> {
    pub(crate) database: std::sync::Arc<str>,
    pub(crate) pathway: String,
    /// The pathway's version when the verdict was made: a step or evidence recorded on the
    /// pathway since (an owner's late outcome, another observation) voids it.
    pub(crate) version: i64,
    pub(crate) attempt: String,
    pub(crate) source: &'static str,
    pub(crate) actor: String,
    pub(crate) evidence: Value,
    pub(crate) _verdict: PhantomData<fn() -> V>,
}

impl<V: Verdict> Reconciliation<V> {
    /// `readback` or `attested`.
    #[must_use]
    pub fn source(&self) -> &str {
        self.source
    }
    /// The evidence behind the verdict.
    #[must_use]
    pub fn evidence(&self) -> &Value {
        &self.evidence
    }
}

/// The result of a reconciliation: one token, whose type carries the verdict.
#[derive(Debug)]
#[must_use = "a reconciliation must be applied to its unknown pathway"]
#[non_exhaustive]
pub enum Reconciled {
    /// The effect happened: `complete` the pathway with it.
    Applied(Reconciliation<Applied>),
    /// The effect did not happen: send the pathway to repair with it.
    NotApplied(Reconciliation<NotApplied>),
    /// Undecided: record it with `keep_unknown`.
    Unresolved(Reconciliation<Unresolved>),
}

/// An attested verdict, given by the evidence owner or repair owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Attestation {
    /// The actor attests the effect happened.
    Applied,
    /// The actor attests the effect did not happen.
    NotApplied,
    /// The actor cannot decide.
    Unresolved,
}
