//! Proofs that only the library can make: approvals and reconciliation verdicts.

use std::marker::PhantomData;

use serde_json::Value;

use super::Actor;

/// One approver's Human Gate approval of one exact request, recorded.
///
/// Made by [`Runtime::grant_approval`](crate::Runtime::grant_approval), bound to the
/// pathway and its request digest. It approves nothing by itself: `approve` takes a
/// [`Quorum`], which [`Approval::quorum`] or [`Runtime::quorum`](crate::Runtime::quorum)
/// make once enough distinct approvers have approved.
#[derive(Debug)]
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

    /// The approval's id, as recorded.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// Enough approvals of one exact request to approve its pathway: the rule's quorum of
/// distinct approvers, each approval unused, unrevoked and not expired when it was read,
/// or one break-glass approval. The only thing
/// [`Pathway::approve`](crate::Pathway::approve) takes.
///
/// No public constructor, not `Clone`: made by [`Approval::quorum`],
/// [`Runtime::quorum`](crate::Runtime::quorum) or
/// [`Runtime::break_glass`](crate::Runtime::break_glass) from what the store holds, and
/// consumed by `approve`, whose step uses every approval in it or none (the database
/// refuses one used, revoked or expired since).
#[derive(Debug)]
#[must_use = "a quorum does nothing until it is passed to approve()"]
pub struct Quorum {
    pub(crate) database: std::sync::Arc<str>,
    pub(crate) pathway: String,
    pub(crate) request_digest: String,
    /// The approvals it uses: (id, approver, granted at), oldest first.
    pub(crate) approvals: Vec<(String, Actor, i64)>,
    /// Whether it is one break-glass approval.
    pub(crate) break_glass: bool,
    /// When the oldest of its approvals expires (ms since the epoch).
    pub(crate) expires_at: Option<i64>,
}

impl Quorum {
    /// Who approved, oldest approval first.
    pub fn approvers(&self) -> impl Iterator<Item = &Actor> {
        self.approvals.iter().map(|(_, a, _)| a)
    }

    /// Whether this is one break-glass approval rather than a quorum.
    #[must_use]
    pub fn is_break_glass(&self) -> bool {
        self.break_glass
    }

    /// When the oldest approval in it expires (ms since the Unix epoch), if ever.
    #[must_use]
    pub fn expires_at(&self) -> Option<i64> {
        self.expires_at
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
