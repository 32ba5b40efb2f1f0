//! [`Rows`] for PostgreSQL: the statements, nothing else (the rules are `store::rules`).
//! Every statement is prepared once per connection (`Tx::statement`).

use std::sync::LazyLock;

use super::check::{LEDGER_OF_PATHWAY, raw_approval, raw_attempt, raw_pathway, raw_pin};
use super::{PgError, Tx, db_clock_ms, db_now_ms, ledger::parse_head};
use crate::store::check::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, PATHWAY_COLUMNS, RawApproval, RawAttempt,
};
use crate::store::pins::{Candidate, PIN_COLUMNS, RawPin};
use crate::store::rows::{EventRow, Finished, Held, Move, NewAttempt, Rows, Stored};
use crate::store::{NewPathway, StoreError};

static PATHWAY: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {PATHWAY_COLUMNS}, version FROM pathways WHERE id = $1"));
static PATHWAY_LOCKED: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {PATHWAY_COLUMNS}, version FROM pathways WHERE id = $1 FOR UPDATE")
});
static PATHWAY_LOCKED_NOWAIT: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {PATHWAY_COLUMNS}, version FROM pathways WHERE id = $1 FOR UPDATE NOWAIT")
});
static ATTEMPTS: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE pathway_id = $1 ORDER BY seq")
});
static PIN_LOCKED: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {PIN_COLUMNS} FROM pins WHERE server = $1 AND tool = $2 FOR UPDATE")
});
static APPROVALS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE pathway_id = $1"));

/// One transaction (or a reader's snapshot) on a PostgreSQL connection.
pub(super) struct PgRows<'t, 'a>(pub(super) &'t mut Tx<'a>);

fn err(e: postgres::Error) -> StoreError {
    PgError::from(e).into()
}

impl Rows for PgRows<'_, '_> {
    fn pathway(&mut self, id: &str, lock: bool) -> Result<Option<Stored>, StoreError> {
        let sql = if lock && self.0.nowait {
            PATHWAY_LOCKED_NOWAIT.as_str()
        } else if lock {
            PATHWAY_LOCKED.as_str()
        } else {
            PATHWAY.as_str()
        };
        Ok(self.0.query_opt(sql, &[&id]).map_err(err)?.map(|r| Stored {
            row: raw_pathway(&r),
            version: r.get(8),
        }))
    }

    fn open_with_request(
        &mut self,
        request_digest: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            format!(
                "SELECT id, definition FROM pathways WHERE request_digest = $1 \
                 AND state IN ({}) ORDER BY id",
                crate::store::rules::OPEN_STATES.as_str()
            )
        });
        let rows = self
            .0
            .query(SQL.as_str(), &[&request_digest])
            .map_err(err)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    fn events(&mut self, pathway: &str) -> Result<Vec<EventRow>, StoreError> {
        Ok(self
            .0
            .query(LEDGER_OF_PATHWAY, &[&pathway])
            .map_err(err)?
            .iter()
            .map(|r| EventRow {
                seq: r.get(0),
                text: r.get(1),
                prev_hash: r.get(2),
                hash: r.get(3),
            })
            .collect())
    }

    fn last_event(&mut self, pathway: &str) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self
            .0
            .query(
                "SELECT seq, hash FROM ledger WHERE pathway_id = $1 ORDER BY seq DESC LIMIT 1",
                &[&pathway],
            )
            .map_err(err)?
            .first()
            .map(|r| (r.get(0), r.get(1))))
    }

    fn lease(&mut self, pathway: &str, id: &str) -> Result<Option<Held>, StoreError> {
        let row = self
            .0
            .query_opt(
                concat!(
                    "SELECT status, owner, lease_until, ",
                    db_now_ms!(),
                    " FROM attempts WHERE id = $1 AND pathway_id = $2 FOR UPDATE"
                ),
                &[&id, &pathway],
            )
            .map_err(err)?;
        Ok(row.map(|r| Held {
            status: r.get(0),
            owner: r.get(1),
            lease_until: r.get(2),
            now: r.get(3),
        }))
    }

    fn attempts(&mut self, pathway: &str) -> Result<Vec<RawAttempt>, StoreError> {
        Ok(self
            .0
            .query(ATTEMPTS.as_str(), &[&pathway])
            .map_err(err)?
            .iter()
            .map(raw_attempt)
            .collect())
    }

    fn approvals(&mut self, pathway: &str) -> Result<Vec<RawApproval>, StoreError> {
        Ok(self
            .0
            .query(APPROVALS.as_str(), &[&pathway])
            .map_err(err)?
            .iter()
            .map(raw_approval)
            .collect())
    }

    fn insert_pathway(&mut self, new: &NewPathway, updated_at: i64) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO pathways (id, idempotency_key, definition, definition_digest, request_digest, state,
                                       version, proposer, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &new.id,
                    &new.idempotency_key,
                    &new.definition,
                    &new.definition_digest,
                    &new.request_digest,
                    &new.state.as_str(),
                    &new.version,
                    &new.proposer,
                    &new.at,
                    &updated_at,
                ],
            )
            .map_err(err)?;
        Ok(())
    }

    fn move_pathway(&mut self, change: &Move<'_>) -> Result<bool, StoreError> {
        let changed = self
            .0
            .execute(
                "UPDATE pathways SET state = $1, version = version + 1, updated_at = $2
                 WHERE id = $3 AND state = $4 AND version = $5 AND definition_digest = $6 AND request_digest = $7",
                &[
                    &change.to.as_str(),
                    &change.at,
                    &change.pathway,
                    &change.from.as_str(),
                    &change.version,
                    &change.definition_digest,
                    &change.request_digest,
                ],
            )
            .map_err(err)?;
        Ok(changed == 1)
    }

    fn bump_version(&mut self, pathway: &str, at: i64) -> Result<(), StoreError> {
        self.0
            .execute(
                "UPDATE pathways SET version = version + 1, updated_at = $1 WHERE id = $2",
                &[&at, &pathway],
            )
            .map_err(err)?;
        Ok(())
    }

    fn insert_attempt(&mut self, a: &NewAttempt<'_>) -> Result<(), StoreError> {
        self.0
            .execute(
                concat!(
                    "INSERT INTO attempts (id, pathway_id, seq, previous_attempt, request, request_digest, binding,
                                           binding_digest, status, owner, lease_until, carrier, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'in_flight', $9, ",
                    db_clock_ms!(),
                    " + $10, $11, $12, $12)"
                ),
                &[
                    &a.id,
                    &a.pathway,
                    &a.seq,
                    &a.previous,
                    &a.request,
                    &a.request_digest,
                    &a.binding,
                    &a.binding_digest,
                    &a.owner,
                    &a.lease_ms,
                    &a.carrier,
                    &a.at,
                ],
            )
            .map_err(err)?;
        Ok(())
    }

    fn insert_finished_attempt(
        &mut self,
        a: &NewAttempt<'_>,
        finish: &Finished<'_>,
    ) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO attempts (id, pathway_id, seq, previous_attempt, request, request_digest, binding,
                                       binding_digest, status, owner, lease_until, outcome, carrier, created_at,
                                       updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, NULL, $10, $11, $12, $13)",
                &[
                    &a.id,
                    &a.pathway,
                    &a.seq,
                    &a.previous,
                    &a.request,
                    &a.request_digest,
                    &a.binding,
                    &a.binding_digest,
                    &finish.status,
                    &finish.outcome,
                    &a.carrier,
                    &a.at,
                    &finish.at,
                ],
            )
            .map_err(err)?;
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
            .execute(
                "UPDATE attempts SET status = $1, owner = NULL, lease_until = NULL,
                        outcome = coalesce($2, outcome), updated_at = $3
                 WHERE id = $4 AND pathway_id = $5",
                &[&status, &outcome, &at, &id, &pathway],
            )
            .map_err(err)?;
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
            .execute(
                "INSERT INTO approvals (id, pathway_id, request_digest, approver, granted_at) VALUES ($1, $2, $3, $4, $5)",
                &[&id, &pathway, &request_digest, &approver, &at],
            )
            .map_err(err)?;
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
            .execute(
                "UPDATE approvals SET used_at = $1
                 WHERE id = $2 AND pathway_id = $3 AND request_digest = $4
                   AND used_at IS NULL AND revoked_at IS NULL AND granted_at >= $5",
                &[&at, &id, &pathway, &request_digest, &not_before],
            )
            .map_err(err)?;
        Ok(n == 1)
    }

    fn revoke_approvals(&mut self, pathway: &str, at: i64) -> Result<(), StoreError> {
        self.0
            .execute(
                "UPDATE approvals SET revoked_at = $1
                 WHERE pathway_id = $2 AND used_at IS NULL AND revoked_at IS NULL",
                &[&at, &pathway],
            )
            .map_err(err)?;
        Ok(())
    }

    /// The recorded head, locked `FOR UPDATE`: the last thing a step does before its
    /// `COMMIT`, so that two steps of unrelated pathways wait for each other only from this
    /// lock to the commit.
    fn head(&mut self) -> Result<(i64, String), StoreError> {
        // Once this transaction holds the head's row (read `FOR UPDATE`, or written), no
        // other can change it before the commit: the head it knows is the head.
        if let Some(head) = &self.0.head {
            return Ok(head.clone());
        }
        let head: String = self
            .0
            .query_one(
                "SELECT value FROM meta WHERE key = 'ledger_head' FOR UPDATE",
                &[],
            )
            .map_err(err)?
            .get(0);
        let head = parse_head(&head)?;
        // Holding the head: the log is covered before this batch appends to it.
        super::log::on_head(self.0)?;
        self.0.head = Some(head.clone());
        Ok(head)
    }

    fn append_events(&mut self, pathway: &str, rows: &[EventRow]) -> Result<(), StoreError> {
        let Some(last) = rows.last() else {
            return Ok(());
        };
        // Every row and the head in one statement (one round trip).
        let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
        let texts: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
        let prevs: Vec<&str> = rows.iter().map(|r| r.prev_hash.as_str()).collect();
        let hashes: Vec<&str> = rows.iter().map(|r| r.hash.as_str()).collect();
        let head = format!("{}:{}", last.seq, last.hash);
        self.0
            .execute(
                "WITH appended AS (
                     INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash)
                     SELECT seq, $2, event, prev_hash, hash
                     FROM unnest($1::bigint[], $3::text[], $4::text[], $5::text[]) AS e(seq, event, prev_hash, hash)
                 )
                 UPDATE meta SET value = $6 WHERE key = 'ledger_head'",
                &[&seqs, &pathway, &texts, &prevs, &hashes, &head],
            )
            .map_err(err)?;
        self.0.head = Some((last.seq, last.hash.clone()));
        Ok(())
    }

    fn pin(&mut self, server: &str, tool: &str) -> Result<Option<RawPin>, StoreError> {
        Ok(self
            .0
            .query_opt(PIN_LOCKED.as_str(), &[&server, &tool])
            .map_err(err)?
            .as_ref()
            .map(raw_pin))
    }

    fn insert_pin(&mut self, c: &Candidate, by: &str, at: i64) -> Result<bool, StoreError> {
        let n = self
            .0
            .execute(
                "INSERT INTO pins (server, tool, digest, binding, definition, pinned_by, pinned_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (server, tool) DO NOTHING",
                &[
                    &c.server,
                    &c.tool,
                    &c.digest,
                    &c.binding,
                    &c.definition,
                    &by,
                    &at,
                ],
            )
            .map_err(err)?;
        Ok(n == 1)
    }

    fn see_pin(&mut self, c: &Candidate, at: i64) -> Result<(), StoreError> {
        self.0
            .execute(
                "UPDATE pins SET seen_digest = $3, seen_binding = $4, seen_definition = $5, seen_at = $6
                 WHERE server = $1 AND tool = $2",
                &[&c.server, &c.tool, &c.digest, &c.binding, &c.definition, &at],
            )
            .map_err(err)?;
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
            .execute(
                "UPDATE pins SET digest = seen_digest, binding = seen_binding, definition = seen_definition,
                        pinned_by = $4, pinned_at = $5, seen_digest = NULL, seen_binding = NULL,
                        seen_definition = NULL, seen_at = NULL
                 WHERE server = $1 AND tool = $2 AND seen_digest = $3",
                &[&server, &tool, &digest, &by, &at],
            )
            .map_err(err)?;
        Ok(n == 1)
    }
}
