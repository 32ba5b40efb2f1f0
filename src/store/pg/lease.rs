//! Leases by the database's clock: the takeover of an attempt whose lease lapsed, and the
//! owner's renewal. Each is one transaction.

use serde_json::json;

use super::rows::PgRows;
use super::{PgBackend, PgError, db_clock_ms, db_now_ms};
use crate::ledger::EventKind;
use crate::state::{AttemptStatus, State};
use crate::store::{EventDraft, StoreError, rules};

impl PgBackend {
    /// Takes over the in-flight `attempt` of `pathway` once its lease has lapsed by the
    /// database's clock: the attempt becomes `unknown` and the pathway
    /// `write_status_unknown` (only a reconciliation moves it on: nothing is resent; a read,
    /// `read`, ends `failed`), with
    /// a `recovered_unknown` event naming the old owner, the lease, the database's time and
    /// `by`. `at` is the caller's time for the event; it decides nothing. Returns the new
    /// version. [`PgError::LeaseHeld`] while the lease runs; [`PgError::NotInFlight`] when
    /// there is nothing to take over. The owner's late outcome is then refused
    /// ([`StoreError::Fenced`]), and its lease renewal finds the attempt lost.
    pub(crate) fn take_over(
        &self,
        pathway: &str,
        attempt: &str,
        by: &str,
        at: i64,
        read: bool,
    ) -> Result<i64, PgError> {
        // A read changes nothing: it ends failed (`Runtime::recover` decides which it is).
        let to = if read {
            State::Failed
        } else {
            State::WriteStatusUnknown
        };
        self.write(|tx| {
            let found = rules::check_pathway(&mut PgRows(tx), pathway, true, None)?
                .ok_or_else(|| StoreError::NoSuchPathway(pathway.to_owned()))?;
            let (state, version) = (found.stored.row.state, found.stored.version);
            let row = tx.query_opt(
                concat!(
                    "SELECT status, owner, lease_until, ",
                    db_now_ms!(),
                    " FROM attempts WHERE id = $1 AND pathway_id = $2 FOR UPDATE"
                ),
                &[&attempt, &pathway],
            )?;
            let (status, owner, lease_until, database_now): (String, Option<String>, Option<i64>, i64) =
                match &row {
                    Some(r) => (r.get(0), r.get(1), r.get(2), r.get(3)),
                    None => ("none".into(), None, None, 0),
                };
            if state != State::Running.as_str() || status != AttemptStatus::InFlight.as_str() {
                return Err(PgError::NotInFlight {
                    pathway: pathway.to_owned(),
                    state,
                    attempt: attempt.to_owned(),
                    status,
                });
            }
            let lease_until = lease_until.ok_or_else(|| {
                StoreError::Corrupt(format!("in-flight attempt {attempt} has no lease"))
            })?;
            if lease_until >= database_now {
                return Err(PgError::LeaseHeld {
                    pathway: pathway.to_owned(),
                    attempt: attempt.to_owned(),
                    lease_until,
                    database_now,
                });
            }
            tx.execute(
                "UPDATE attempts SET status = $1, owner = NULL, lease_until = NULL, updated_at = $2 WHERE id = $3",
                &[&AttemptStatus::Unknown.as_str(), &at, &attempt],
            )?;
            tx.execute(
                "UPDATE pathways SET state = $1, version = version + 1, updated_at = $2 WHERE id = $3",
                &[&to.as_str(), &at, &pathway],
            )?;
            let event = EventDraft {
                kind: EventKind::RecoveredUnknown,
                actor: "rpr-recovery".into(),
                from: Some(State::Running),
                to,
                attempt: Some(attempt.to_owned()),
                attempt_status: Some(AttemptStatus::Unknown.as_str()),
                data: {
                    let mut data = json!({
                        "owner": owner,
                        "owner_fate": "lapsed",
                        "reason": "in-flight attempt whose lease lapsed by the database's clock; the owner was not proven gone and may still send",
                        "lease_until": lease_until,
                        "database_now": database_now,
                        "taken_over_by": by,
                    });
                    if read {
                        data["read"] = json!(crate::runtime::READ_ENDS_FAILED);
                    }
                    data
                },
            };
            rules::append(&mut PgRows(tx), pathway, at, vec![event])?;
            Ok(version + 1)
        })
    }

    /// Renews, by the database's clock, the leases of `attempts` that `owner` still holds
    /// in flight. Returns the attempts it no longer holds (finished, or taken over after a
    /// lapse): their owner must not record a dispatch outcome for them as if it still did
    /// (it would be refused with [`StoreError::Fenced`](crate::store::StoreError::Fenced)).
    ///
    /// It takes the next free connection of the pool ahead of any waiting step, so steps in
    /// flight delay it by at most one transaction, never starve it.
    pub(crate) fn renew_leases(
        &self,
        owner: &str,
        attempts: &[String],
        lease_ms: i64,
    ) -> Result<Vec<String>, PgError> {
        self.write_urgent(|tx| {
            let mut lost = Vec::new();
            for a in attempts {
                let n = tx.execute(
                    concat!(
                        "UPDATE attempts SET lease_until = ",
                        db_clock_ms!(),
                        " + $1 WHERE id = $2 AND owner = $3 AND status = 'in_flight'"
                    ),
                    &[&lease_ms, a, &owner],
                )?;
                if n != 1 {
                    lost.push(a.clone());
                }
            }
            Ok(lost)
        })
    }
}
