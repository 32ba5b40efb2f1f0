//! [`Rows`] for SQLite: the statements, nothing else (the rules are `store::rules`).
//! Every statement is prepared once per connection (`prepare_cached`).

use rusqlite::{Connection, OptionalExtension, params};

use super::DB_NOW_MS;
use crate::ledger::GENESIS;
use crate::store::check::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, LEDGER_OF_PATHWAY, PATHWAY_COLUMNS, RawApproval, RawAttempt,
    raw_approval, raw_attempt, raw_pathway,
};
use crate::store::pins::{self, Candidate, RawPin};
use crate::store::rows::{EventRow, Finished, Held, Move, NewAttempt, Rows, Stored};
use crate::store::{NewPathway, StoreError};

/// One unit of work on a SQLite connection: a step's savepoint, or a read transaction.
pub(crate) struct SqliteRows<'c>(pub(crate) &'c Connection);

impl Rows for SqliteRows<'_> {
    fn pathway(&mut self, id: &str, _lock: bool) -> Result<Option<Stored>, StoreError> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {PATHWAY_COLUMNS}, version FROM pathways WHERE id = ?1"
            ))?
            .query_row(params![id], |r| {
                Ok(Stored {
                    row: raw_pathway(r)?,
                    version: r.get(8)?,
                })
            })
            .optional()?)
    }

    fn open_with_request(
        &mut self,
        request_digest: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        // Each open state sought in `pathways_by_request (request_digest, state)`.
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT id, definition FROM pathways WHERE request_digest = CAST(?1 AS TEXT) \
                 AND state IN ({}) ORDER BY id",
                crate::store::rules::OPEN_STATES.as_str()
            ))?
            .query_map(params![request_digest], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?)
    }

    fn events(&mut self, pathway: &str) -> Result<Vec<EventRow>, StoreError> {
        Ok(self
            .0
            .prepare_cached(LEDGER_OF_PATHWAY)?
            .query_map(params![pathway], |r| {
                Ok(EventRow {
                    seq: r.get(0)?,
                    text: r.get(1)?,
                    prev_hash: r.get(2)?,
                    hash: r.get(3)?,
                })
            })?
            .collect::<Result<_, _>>()?)
    }

    fn last_event(&mut self, pathway: &str) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT seq, hash FROM ledger WHERE pathway_id = ?1 ORDER BY seq DESC LIMIT 1",
            )?
            .query_row(params![pathway], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    fn attempts(&mut self, pathway: &str) -> Result<Vec<RawAttempt>, StoreError> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq"
            ))?
            .query_map(params![pathway], raw_attempt)?
            .collect::<Result<_, _>>()?)
    }

    fn lease(&mut self, pathway: &str, id: &str) -> Result<Option<Held>, StoreError> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT status, owner, lease_until, {DB_NOW_MS} FROM attempts
                 WHERE id = ?1 AND pathway_id = ?2"
            ))?
            .query_row(params![id, pathway], |r| {
                Ok(Held {
                    status: r.get(0)?,
                    owner: r.get(1)?,
                    lease_until: r.get(2)?,
                    now: r.get(3)?,
                })
            })
            .optional()?)
    }

    fn approvals(&mut self, pathway: &str) -> Result<Vec<RawApproval>, StoreError> {
        Ok(self
            .0
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE pathway_id = ?1"
            ))?
            .query_map(params![pathway], raw_approval)?
            .collect::<Result<_, _>>()?)
    }

    fn insert_pathway(&mut self, new: &NewPathway, updated_at: i64) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO pathways (id, idempotency_key, definition, definition_digest, request_digest, state, version,
                                       proposer, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                new.id,
                new.idempotency_key,
                new.definition,
                new.definition_digest,
                new.request_digest,
                new.state.as_str(),
                new.version,
                new.proposer,
                new.at,
                updated_at
            ])?;
        Ok(())
    }

    fn move_pathway(&mut self, change: &Move<'_>) -> Result<bool, StoreError> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE pathways SET state = ?1, version = version + 1, updated_at = ?2
                 WHERE id = ?3 AND state = ?4 AND version = ?5 AND definition_digest = ?6 AND request_digest = ?7",
            )?
            .execute(params![
                change.to.as_str(),
                change.at,
                change.pathway,
                change.from.as_str(),
                change.version,
                change.definition_digest,
                change.request_digest,
            ])?;
        Ok(changed == 1)
    }

    fn bump_version(&mut self, pathway: &str, at: i64) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "UPDATE pathways SET version = version + 1, updated_at = ?1 WHERE id = ?2",
            )?
            .execute(params![at, pathway])?;
        Ok(())
    }

    fn insert_attempt(&mut self, a: &NewAttempt<'_>) -> Result<(), StoreError> {
        self.0
            .prepare_cached(&format!(
                "INSERT INTO attempts (id, pathway_id, seq, previous_attempt, request, request_digest, binding,
                                       binding_digest, status, owner, lease_until, carrier, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'in_flight', ?9, {DB_NOW_MS} + ?10, ?11, ?12, ?12)"
            ))?
            .execute(params![
                a.id,
                a.pathway,
                a.seq,
                a.previous,
                a.request,
                a.request_digest,
                a.binding,
                a.binding_digest,
                a.owner,
                a.lease_ms,
                a.carrier,
                a.at
            ])?;
        Ok(())
    }

    fn insert_finished_attempt(
        &mut self,
        a: &NewAttempt<'_>,
        finish: &Finished<'_>,
    ) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO attempts (id, pathway_id, seq, previous_attempt, request, request_digest, binding,
                                       binding_digest, status, owner, lease_until, outcome, carrier, created_at,
                                       updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL, NULL, ?10, ?11, ?12, ?13)",
            )?
            .execute(params![
                a.id,
                a.pathway,
                a.seq,
                a.previous,
                a.request,
                a.request_digest,
                a.binding,
                a.binding_digest,
                finish.status,
                finish.outcome,
                a.carrier,
                a.at,
                finish.at
            ])?;
        Ok(())
    }

    fn finish_attempt(
        &mut self,
        pathway: &str,
        id: &str,
        status: &str,
        outcome: Option<&str>,
        at: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .0
            .prepare_cached(
                "UPDATE attempts SET status = ?1, owner = NULL, lease_until = NULL,
                        outcome = coalesce(?2, outcome), updated_at = ?3
                 WHERE id = ?4 AND pathway_id = ?5",
            )?
            .execute(params![status, outcome, at, id, pathway])?;
        Ok(n == 1)
    }

    fn insert_approval(
        &mut self,
        pathway: &str,
        id: &str,
        request_digest: &str,
        approver: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO approvals (id, pathway_id, request_digest, approver, granted_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![id, pathway, request_digest, approver, at])?;
        Ok(())
    }

    fn use_approval(
        &mut self,
        pathway: &str,
        id: &str,
        request_digest: &str,
        not_before: i64,
        at: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .0
            .prepare_cached(
                "UPDATE approvals SET used_at = ?1
                 WHERE id = ?2 AND pathway_id = ?3 AND request_digest = ?4
                   AND used_at IS NULL AND revoked_at IS NULL AND granted_at >= ?5",
            )?
            .execute(params![at, id, pathway, request_digest, not_before])?;
        Ok(n == 1)
    }

    fn revoke_approvals(&mut self, pathway: &str, at: i64) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "UPDATE approvals SET revoked_at = ?1
                 WHERE pathway_id = ?2 AND used_at IS NULL AND revoked_at IS NULL",
            )?
            .execute(params![at, pathway])?;
        Ok(())
    }

    /// The last ledger row: the unit holds the database's write lock, so nothing else can
    /// append until it ends.
    fn head(&mut self) -> Result<(i64, String), StoreError> {
        let head: Option<(i64, String)> = self
            .0
            .prepare_cached("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(head.unwrap_or_else(|| (0, GENESIS.to_owned())))
    }

    fn append_events(&mut self, pathway: &str, rows: &[EventRow]) -> Result<(), StoreError> {
        let Some(last) = rows.last() else {
            return Ok(());
        };
        let mut insert = self.0.prepare_cached(
            "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for row in rows {
            insert.execute(params![row.seq, pathway, row.text, row.prev_hash, row.hash])?;
        }
        self.0
            .prepare_cached(
                "INSERT INTO meta (key, value) VALUES ('ledger_head', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![format!("{}:{}", last.seq, last.hash)])?;
        Ok(())
    }

    fn pin(&mut self, server: &str, tool: &str) -> Result<Option<RawPin>, StoreError> {
        pins::one_raw(self.0, server, tool)
    }

    fn insert_pin(&mut self, c: &Candidate, by: &str, at: i64) -> Result<bool, StoreError> {
        let n = self
            .0
            .prepare_cached(
                "INSERT INTO pins (server, tool, digest, binding, definition, pinned_by, pinned_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (server, tool) DO NOTHING",
            )?
            .execute(params![
                c.server,
                c.tool,
                c.digest,
                c.binding,
                c.definition,
                by,
                at
            ])?;
        Ok(n == 1)
    }

    fn see_pin(&mut self, c: &Candidate, at: i64) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "UPDATE pins SET seen_digest = ?3, seen_binding = ?4, seen_definition = ?5, seen_at = ?6
                 WHERE server = ?1 AND tool = ?2",
            )?
            .execute(params![c.server, c.tool, c.digest, c.binding, c.definition, at])?;
        Ok(())
    }

    fn accept_seen_pin(
        &mut self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .0
            .prepare_cached(
                "UPDATE pins SET digest = seen_digest, binding = seen_binding, definition = seen_definition,
                        pinned_by = ?4, pinned_at = ?5, seen_digest = NULL, seen_binding = NULL,
                        seen_definition = NULL, seen_at = NULL
                 WHERE server = ?1 AND tool = ?2 AND seen_digest = ?3",
            )?
            .execute(params![server, tool, digest, by, at])?;
        Ok(n == 1)
    }
}
