//! Who may still send an attempt's request: its owner, then its carrier.
//!
//! A *not applied* verdict opens the way to a second send, so it may rest on a readback only
//! when nobody can still send the first. The owner (the runtime that dispatched) can not
//! when it recorded the attempt's outcome itself, when its late outcome was recorded after a
//! takeover, or when it is proven gone now (see [`OwnerFate`]). A late outcome that says
//! *applied* (the owner's own readback verified the effect) settles the other way: the
//! effect took place, and no readback made after it says otherwise. A takeover after a lapsed
//! lease proves none of these: the owner may be stopped, cut off or slow, and send later.
//! The carrier (the server process that may hold the request) is checked after the owner
//! ([`Runtime::settle_carrier`]).

use crate::ledger::EventKind;
use crate::pathway::PathwayError;
use crate::store::event::{Event, Reading};

use super::Runtime;
use super::owner::OwnerFate;
use super::tokens::CarrierFate;

impl Runtime {
    /// Whether the owner of `attempt` (of `pathway`) can no longer send its request.
    pub(super) fn settle_owner(
        &self,
        pathway: &str,
        attempt: &str,
    ) -> Result<CarrierFate, PathwayError> {
        let mut owner: Option<String> = None;
        let mut taken_over = false;
        let mut answered_late = false;
        let mut late_applied = false;
        for row in self.pathway_events(pathway)? {
            let event = match Event::read(&row.event) {
                Reading::Canonical(e) | Reading::NotCanonical(e) => e,
                Reading::NotJson(_) => continue,
            };
            if event.attempt.as_deref() != Some(attempt) {
                continue;
            }
            // The pathway's rows were checked against these events: every kind parses.
            match event.kind.as_deref().and_then(|k| k.parse().ok()) {
                Some(EventKind::AttemptStarted) => {
                    owner = event.data.owner.map(std::borrow::Cow::into_owned);
                }
                Some(EventKind::RecoveredUnknown) => taken_over = true,
                Some(EventKind::LateOutcomeRefused) => {
                    answered_late = true;
                    // What the owner reported (the event is rare: its text is parsed whole).
                    let late: serde_json::Value =
                        serde_json::from_str(&row.event).unwrap_or_default();
                    late_applied |= late["data"]["late_status"] == "applied";
                }
                // Nothing else says who may still send.
                _ => {}
            }
        }
        // The owner's late outcome verified the effect by its own readback: the effect took
        // place, whatever a later readback finds (the target changed since, or is behind).
        if late_applied {
            return Ok(CarrierFate::Applied(
                "the attempt's owner reported it applied after it was taken over (its own \
                 readback verified the effect; event late_outcome_refused): the effect took \
                 place, so no later readback makes it not applied"
                    .to_owned(),
            ));
        }
        // The owner recorded the outcome itself: its executor returned, it sends no more.
        if !taken_over || answered_late {
            return Ok(CarrierFate::Settled);
        }
        let owner = owner.unwrap_or_default();
        Ok(match self.judge_owner(&owner, attempt) {
            OwnerFate::Gone => CarrierFate::Settled,
            OwnerFate::Alive => CarrierFate::Running(format!(
                "the attempt's owner ({owner}) is still running and holds the request; wait for it to end"
            )),
            OwnerFate::Unverifiable => CarrierFate::MayBeAlive(format!(
                "the attempt was taken over after its owner's lease lapsed, and the owner ({owner}) cannot be \
                 shown gone from here: a lapsed lease is not death, and the owner may still send its request. \
                 A readback cannot settle this. Wait for the owner's own outcome, reconcile again on its machine \
                 once it has ended, or have the repair owner attest not_applied, accepting this risk"
            )),
        })
    }

    /// Whether anyone (the owner, then the carrier) may still send `attempt`'s request; the
    /// carrier, if the owner no longer can, is killed and waited for.
    pub(super) fn settle_senders(
        &self,
        pathway: &str,
        attempt: &str,
    ) -> Result<CarrierFate, PathwayError> {
        match self.settle_owner(pathway, attempt)? {
            CarrierFate::Settled => self.settle_carrier(pathway, attempt),
            unsettled @ (CarrierFate::MayBeAlive(_)
            | CarrierFate::Running(_)
            | CarrierFate::Applied(_)) => Ok(unsettled),
        }
    }
}
