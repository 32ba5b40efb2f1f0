//! The reconciliation tokens the runtime grants: the verdict on an unknown attempt (by
//! readback, or attested by a person), after the carrier that may still hold its request is
//! known to be gone. Human Gate approvals are granted in `approvals.rs`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::evidence;
use crate::executor::{Observation, Readback};
use crate::pathway::stage::Reconcilable;
use crate::pathway::token::{
    Applied, Attestation, NotApplied, Reconciled, Reconciliation, Unresolved, VerdictKind,
};
use crate::pathway::{Act, Actor, Pathway, PathwayError};
use crate::process;
use crate::store::StoreError;

use super::{CarrierRecord, Runtime, StepPoint};

impl Runtime {
    /// Reconciles an attempt that may have taken effect (an [`Unknown`](crate::stage::Unknown) pathway, or a
    /// [`RepairUnsettled`](crate::stage::RepairUnsettled) one) by independent readback. Writes nothing: the returned
    /// token is recorded when the pathway consumes it.
    ///
    /// A pathway re-hydrated with a redacted request (see [`Pathway::is_redacted`]) is not
    /// read back: the verdict is unresolved until the full request is restored with
    /// [`Pathway::restore_request`].
    ///
    /// When the attempt ended without a reply, the process that carried it (the MCP
    /// server, recorded with the attempt) or any process it started may still hold the
    /// request. Before reading back, whatever is left of that tree on this host is killed
    /// and waited for (the cgroup recorded for it). Where the tree cannot be shown gone
    /// (the carrier ran on another host, no cgroup was recorded for it so only its process
    /// group is known, or a process of it survived `SIGKILL`), a *not applied*
    /// observation is not accepted: the verdict stays unresolved, its evidence says why
    /// (`not_accepted_because`), and only an accountable [`Runtime::attest`] settles it.
    pub fn reconcile<S: Reconcilable>(
        &self,
        pathway: &Pathway<S>,
        readback: &mut dyn Readback,
    ) -> Reconciled {
        let attempt = crate::pathway::stage::sealed::AttemptOf::attempt(&pathway.stage).to_owned();
        let id = pathway.core.id.clone();
        let token = |verdict: VerdictKind, evidence: Value| {
            make_token(
                verdict,
                Fields {
                    database: Arc::clone(&pathway.core.database),
                    pathway: id.clone(),
                    version: pathway.core.version,
                    attempt: attempt.clone(),
                    source: "readback",
                    actor: "readback".to_owned(),
                    evidence: self.fit(&evidence),
                },
            )
        };
        if let Err(e) = self.own(&pathway.core) {
            return token(VerdictKind::Unresolved, json!({"error": e.to_string()}));
        }
        // A readback of the redacted copy would compare "[redacted]" with the target and
        // could wrongly find the effect absent, opening the way to a new attempt.
        if pathway.core.redacted {
            return token(
                VerdictKind::Unresolved,
                json!({
                    "error": "the stored request is redacted; pass the full request to restore_request() and reconcile again"
                }),
            );
        }
        let carrier = match self.settle_senders(&pathway.core.id, &attempt) {
            Ok(c) => c,
            Err(e) => return token(VerdictKind::Unresolved, json!({"error": e.to_string()})),
        };
        let observation = readback.observe(&pathway.core.definition.request);
        self.point(StepPoint::AfterReadback);
        match (observation, carrier) {
            (Observation::Applied { evidence }, _) => token(VerdictKind::Applied, evidence),
            (Observation::NotApplied { evidence }, CarrierFate::Settled) => {
                token(VerdictKind::NotApplied, evidence)
            }
            (
                Observation::NotApplied { evidence },
                CarrierFate::MayBeAlive(why)
                | CarrierFate::Running(why)
                | CarrierFate::Applied(why),
            ) => token(
                VerdictKind::Unresolved,
                json!({"observed": "not_applied", "evidence": evidence, "not_accepted_because": why}),
            ),
            (Observation::Inconclusive { evidence }, _) => token(VerdictKind::Unresolved, evidence),
        }
    }

    /// Makes sure every process that may still carry `attempt`'s request is gone: the
    /// whole tree the carrier's command started (see [`process::settle_carrier`]).
    pub(super) fn settle_carrier(
        &self,
        pathway: &str,
        attempt: &str,
    ) -> Result<CarrierFate, PathwayError> {
        let replay = self.store().check_pathway(pathway)?;
        let Some(text) = replay.unanswered_carrier(attempt) else {
            // Answered, or carried in-process by an owner that is gone or is us.
            return Ok(CarrierFate::Settled);
        };
        let carrier: CarrierRecord = serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("attempt {attempt}: carrier: {e}")))?;
        if !carrier.checkable_from(&self.owner) {
            let tree = if carrier.cgroup.is_none() {
                "; nor was its process tree tracked (no cgroup recorded), so a descendant that left its process group may still hold the request"
            } else {
                ""
            };
            return Ok(CarrierFate::MayBeAlive(format!(
                "the server process that carried the request (pid {} on host {}) cannot be shown gone from here \
                 (another host, boot or PID namespace, or a record without them){tree}",
                carrier.pid, carrier.host
            )));
        }
        Ok(
            match process::settle_carrier(
                carrier.pgid,
                &carrier.start,
                carrier.cgroup.as_ref(),
                CARRIER_KILL_WAIT,
            ) {
                Ok(()) => CarrierFate::Settled,
                Err(why) => CarrierFate::MayBeAlive(why),
            },
        )
    }

    /// Reconciles an attempt that may have taken effect by an attested decision of the
    /// evidence owner or repair owner (an accountable verdict: recorded with its actor).
    ///
    /// A *not applied* attestation while someone may still send the request (an owner
    /// taken over after its lease lapsed and not proven gone, a carrier that cannot be
    /// shown gone) accepts that risk: only the repair owner may give it, and the risk is
    /// recorded with it, in so many words (`accepted_risk` beside the attested evidence).
    /// While the owner is proven running on this host it is refused
    /// ([`PathwayError::SenderRunning`]): that sender is known to hold the request.
    pub fn attest<S: Reconcilable>(
        &self,
        pathway: &Pathway<S>,
        actor: &Actor,
        verdict: Attestation,
        evidence: &Value,
    ) -> Result<Reconciled, PathwayError> {
        self.own(&pathway.core)?;
        pathway.core.authorize(actor, Act::Attest)?;
        let mut evidence = evidence::check(evidence, &self.bounds)?;
        let attempt = crate::pathway::stage::sealed::AttemptOf::attempt(&pathway.stage).to_owned();
        let verdict = match verdict {
            Attestation::Applied => VerdictKind::Applied,
            Attestation::NotApplied => VerdictKind::NotApplied,
            Attestation::Unresolved => VerdictKind::Unresolved,
        };
        if verdict == VerdictKind::NotApplied {
            match self.settle_senders(&pathway.core.id, &attempt)? {
                CarrierFate::Settled => {}
                // Proven running here: no risk can be accepted for a sender that is known
                // to hold the request.
                CarrierFate::Running(reason) => {
                    return Err(PathwayError::SenderRunning {
                        pathway: pathway.core.id.clone(),
                        reason,
                    });
                }
                CarrierFate::MayBeAlive(why) => {
                    pathway.core.authorize(actor, Act::Repair)?;
                    evidence = self.fit(&json!({"attested": evidence, "accepted_risk": why}));
                }
                // The owner verified the effect: "not applied" would be false.
                CarrierFate::Applied(_) => {
                    return Err(PathwayError::FoundApplied {
                        pathway: pathway.core.id.clone(),
                        attempt,
                    });
                }
            }
        }
        Ok(make_token(
            verdict,
            Fields {
                database: Arc::clone(&pathway.core.database),
                pathway: pathway.core.id.clone(),
                version: pathway.core.version,
                attempt,
                source: "attested",
                actor: actor.as_str().to_owned(),
                evidence,
            },
        ))
    }
}

/// How long reconciliation waits for a killed carrier's process group to disappear.
const CARRIER_KILL_WAIT: Duration = Duration::from_secs(5);

/// Whether the process that may still carry a request is known to be gone.
pub(super) enum CarrierFate {
    Settled,
    /// A sender may still be alive and cannot be shown gone (why).
    MayBeAlive(String),
    /// The attempt's owner is proven running on this host and holds the request (why).
    Running(String),
    /// The attempt's owner reported it applied, late (why): no not-applied verdict holds.
    Applied(String),
}

/// What a reconciliation token records; the verdict only picks its type.
struct Fields {
    database: Arc<str>,
    pathway: String,
    /// The pathway's version the verdict saw: evidence recorded after it voids it.
    version: i64,
    attempt: String,
    source: &'static str,
    actor: String,
    evidence: Value,
}

fn make_token(verdict: VerdictKind, f: Fields) -> Reconciled {
    fn token<V: crate::pathway::token::Verdict>(f: Fields) -> Reconciliation<V> {
        Reconciliation {
            database: f.database,
            pathway: f.pathway,
            version: f.version,
            attempt: f.attempt,
            source: f.source,
            actor: f.actor,
            evidence: f.evidence,
            _verdict: std::marker::PhantomData,
        }
    }
    match verdict {
        VerdictKind::Applied => Reconciled::Applied(token::<Applied>(f)),
        VerdictKind::NotApplied => Reconciled::NotApplied(token::<NotApplied>(f)),
        VerdictKind::Unresolved => Reconciled::Unresolved(token::<Unresolved>(f)),
    }
}
