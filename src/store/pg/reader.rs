//! [`crate::store::ReadStore`] on PostgreSQL: the same reads, on a connection that can
//! only read.
//!
//! The connection is opened with `default_transaction_read_only = on` and no migration
//! ([`PgBackend::open_read_only`]); inspection connects through a role without write
//! privileges as well (`.ci/postgres` makes `rpr_reader`), because a session may turn the
//! setting off and no session can grant itself a privilege.
//!
//! A snapshot is a `REPEATABLE READ READ ONLY` transaction on the session; reads made
//! while one is open see it, and each read outside one opens its own.

use std::cell::Cell;

use postgres::Row;

use super::read::{
    attempts_tx, events_tx, ledger_head_tx, ledger_tx, limit, pathway_select, pathway_tx, pathways,
    recorded_head_tx, unresolved_tx,
};
use super::verify::verify_tx;
use super::{PgBackend, PgError, Tx, db_now_ms};
use crate::ledger::Report;
use crate::state::State;
use crate::store::read::{Ended, Source};
use crate::store::{AttemptRecord, LedgerRow, PathwayRecord, PinRecord, Status, StoreError};

/// The PostgreSQL side of a `ReadStore`.
pub(crate) struct PgReader {
    backend: PgBackend,
    /// How many snapshots are open, nested; the outermost one owns the transaction.
    depth: Cell<u32>,
    /// A probe (`would_refuse`) ended the transaction of the snapshot open
    /// around it: until that snapshot ends, its reads fail instead of reading outside it.
    lost: Cell<bool>,
    /// The connection the outermost snapshot began on: if it breaks and the pool opens
    /// another, the snapshot's later reads fail instead of reading outside it.
    snapshot_on: Cell<u64>,
}

/// One level of [`PgReader::within`]: leaving it (even by a panic) closes the level, and
/// the outermost level's transaction with it if it is still open.
struct Level<'a> {
    reader: &'a PgReader,
    outermost: bool,
    ended: bool,
}

impl Drop for Level<'_> {
    fn drop(&mut self) {
        self.reader.depth.set(self.reader.depth.get() - 1);
        if self.outermost {
            self.reader.lost.set(false);
        }
        if self.outermost && !self.ended {
            // Only read; nothing to undo, and the error that got here is the caller's.
            let _ = self
                .reader
                .backend
                .end_snapshot(self.reader.snapshot_on.get(), false);
        }
    }
}

impl PgReader {
    pub(crate) fn open(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        Ok(Self {
            backend: PgBackend::open_read_only(url, schema)?,
            depth: Cell::new(0),
            lost: Cell::new(false),
            snapshot_on: Cell::new(0),
        })
    }

    /// Runs `f` with one snapshot open (the enclosing one when nested).
    pub(crate) fn within<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let outermost = self.depth.get() == 0;
        if self.lost.get() {
            return Err(E::from(StoreError::Unsupported(
                "a statement run by ReadStore::would_refuse ended this read snapshot; end it and read in a new one".into(),
            )));
        }
        if outermost {
            let on = self
                .backend
                .begin_snapshot()
                .map_err(|e| E::from(e.into()))?;
            self.snapshot_on.set(on);
        }
        self.depth.set(self.depth.get() + 1);
        let mut level = Level {
            reader: self,
            outermost,
            ended: false,
        };
        let out = f();
        if outermost {
            level.ended = true;
            let end = self
                .backend
                .end_snapshot(self.snapshot_on.get(), out.is_ok());
            if let (Ok(_), Err(e)) = (&out, end) {
                return Err(E::from(e.into()));
            }
        }
        out
    }

    /// Runs the statements of `f` in one snapshot.
    fn read<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, PgError>) -> Result<T, StoreError> {
        self.within(|| {
            self.backend
                .session(self.snapshot_on.get(), f)
                .map_err(StoreError::from)
        })
    }
}

/// The names of the states that are not terminal, for `state = ANY($n)`.
fn open_states() -> Vec<&'static str> {
    State::ALL
        .iter()
        .filter(|s| !s.is_terminal())
        .map(|s| s.as_str())
        .collect()
}

impl Source for PgReader {
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.read(|tx| {
            Ok(tx
                .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])?
                .map(|r| r.get(0)))
        })
    }

    fn status(&self) -> Result<Status, StoreError> {
        self.read(|tx| {
            let per_state = tx
                .query("SELECT state, count(*) FROM pathways GROUP BY state", &[])?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect::<Vec<_>>();
            let version: String = tx
                .query_one("SELECT value FROM meta WHERE key = 'schema_version'", &[])?
                .get(0);
            let version = version
                .parse()
                .map_err(|_| StoreError::Corrupt("meta.schema_version is not an integer".into()))?;
            Ok(Status::new(version, per_state, ledger_head_tx(tx)?))
        })
    }

    fn ledger_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        self.read(ledger_head_tx)
    }

    fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        self.read(recorded_head_tx)
    }

    fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        if unstorable(id) {
            return Ok(None);
        }
        self.read(|tx| pathway_tx(tx, id))
    }

    fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        if unstorable(pathway) {
            return Ok(Vec::new());
        }
        self.read(|tx| attempts_tx(tx, pathway))
    }

    fn list_unresolved(
        &self,
        after: Option<&str>,
        n: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        let after = after.map(comparable);
        self.read(|tx| unresolved_tx(tx, after, n))
    }

    fn list_pathways(
        &self,
        after: Option<&str>,
        n: usize,
        state: Option<State>,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        let after = comparable(after.unwrap_or(""));
        self.read(|tx| {
            let rows = match state {
                Some(state) => tx.query(
                    pathway_select!("WHERE state = $1 AND id > $2 ORDER BY id LIMIT $3"),
                    &[&state.as_str(), &after, &limit(n)],
                )?,
                None => tx.query(
                    pathway_select!("WHERE id > $1 ORDER BY id LIMIT $2"),
                    &[&after, &limit(n)],
                )?,
            };
            pathways(&rows)
        })
    }

    fn open_with_request(&self, request_digest: &str) -> Result<Vec<PathwayRecord>, StoreError> {
        if unstorable(request_digest) {
            return Ok(Vec::new());
        }
        // Each open state by equality (`= ANY`), as on SQLite: the index
        // `pathways_by_request (request_digest, state)` seeks them.
        let open = open_states();
        self.read(|tx| {
            let rows = tx.query(
                pathway_select!("WHERE request_digest = $1 AND state = ANY($2) ORDER BY id"),
                &[&request_digest, &open],
            )?;
            pathways(&rows)
        })
    }

    fn open_and_count_with_request(
        &self,
        request_digest: &str,
    ) -> Result<(Vec<PathwayRecord>, u64), StoreError> {
        if unstorable(request_digest) {
            return Ok((Vec::new(), 0));
        }
        let open = open_states();
        self.read(|tx| {
            // As on SQLite: one row when none is open (the pathway's columns NULL), else one
            // per open pathway; the count on each.
            let rows = tx.query(
                "SELECT p.id, p.idempotency_key, p.definition, p.request_digest, p.state, \
                 p.version, p.proposer, p.created_at, p.updated_at, n.n \
                 FROM (SELECT count(*) AS n FROM pathways WHERE request_digest = $1) AS n \
                 LEFT JOIN pathways AS p ON p.request_digest = $1 AND p.state = ANY($2) \
                 ORDER BY p.id",
                &[&request_digest, &open],
            )?;
            let count: i64 = rows.first().map_or(0, |r| r.get(9));
            let open: Vec<_> = rows
                .into_iter()
                .filter(|r| r.get::<_, Option<&str>>(0).is_some())
                .collect();
            Ok((pathways(&open)?, u64::try_from(count).unwrap_or(0)))
        })
    }

    fn count_with_request(&self, request_digest: &str) -> Result<u64, StoreError> {
        if unstorable(request_digest) {
            return Ok(0);
        }
        self.read(|tx| {
            let n: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pathways WHERE request_digest = $1",
                    &[&request_digest],
                )?
                .get(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn events(&self, pathway: &str, after: i64, n: usize) -> Result<Vec<LedgerRow>, StoreError> {
        if unstorable(pathway) {
            return Ok(Vec::new());
        }
        self.read(|tx| events_tx(tx, pathway, after, n))
    }

    fn ledger(&self, after: i64, n: usize) -> Result<Vec<LedgerRow>, StoreError> {
        self.read(|tx| ledger_tx(tx, after, n))
    }

    fn ledger_first(&self) -> Result<Option<i64>, StoreError> {
        self.read(|tx| Ok(tx.query_one("SELECT min(seq) FROM ledger", &[])?.get(0)))
    }

    fn definition_digest(&self, id: &str) -> Result<String, StoreError> {
        if unstorable(id) {
            return Err(StoreError::NoSuchPathway(id.to_owned()));
        }
        self.read(|tx| {
            tx.query_opt(
                "SELECT definition_digest FROM pathways WHERE id = $1",
                &[&id],
            )?
            .map(|r| r.get(0))
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()).into())
        })
    }

    fn pins(&self) -> Result<Vec<PinRecord>, StoreError> {
        self.read(|tx| {
            tx.query(PIN_SELECT_ALL, &[])?
                .iter()
                .map(|r| Ok(crate::store::pins::record(super::check::raw_pin(r))?))
                .collect()
        })
    }

    fn pin(&self, server: &str, tool: &str) -> Result<Option<PinRecord>, StoreError> {
        if unstorable(server) || unstorable(tool) {
            return Ok(None);
        }
        self.read(|tx| {
            let row: Option<Row> = tx.query_opt(PIN_SELECT_ONE, &[&server, &tool])?;
            Ok(row
                .as_ref()
                .map(|r| crate::store::pins::record(super::check::raw_pin(r)))
                .transpose()?)
        })
    }

    fn approval_now(&self) -> Result<i64, StoreError> {
        self.read(|tx| Ok(tx.query_one(concat!("SELECT ", db_now_ms!()), &[])?.get(0)))
    }

    fn pin_digest(&self, server: &str, tool: &str) -> Result<Option<String>, StoreError> {
        if unstorable(server) || unstorable(tool) {
            return Ok(None);
        }
        self.read(|tx| {
            let row: Option<Row> = tx.query_opt(
                "SELECT digest FROM pins WHERE server = $1 AND tool = $2",
                &[&server, &tool],
            )?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    /// Each table as `TABLE name (column type, …)` and each index's definition, in the
    /// store's schema, sorted.
    fn schema(&self) -> Result<Vec<String>, StoreError> {
        self.read(|tx| {
            Ok(tx
                .query(SCHEMA_OBJECTS, &[])?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
    }

    /// Whether `sql` fails on this connection. It is run inside a savepoint of a read-only
    /// transaction, which is then rolled back: a write fails there before it changes
    /// anything (and the role's missing privileges would stop it even if it did not).
    ///
    /// It is run as one statement (the extended protocol; a string of several is refused,
    /// as SQLite's `prepare` refuses one): run as a batch, `COMMIT; BEGIN READ WRITE;
    /// INSERT …` ended the read-only transaction and wrote with a role that may write.
    ///
    /// A statement that ends the transaction (`COMMIT`, `ROLLBACK`, `RELEASE SAVEPOINT
    /// rpr_probe`…) is refused; it ended the caller's snapshot too, if one was open, whose
    /// later reads then fail (`lost`) instead of reading outside it.
    fn would_refuse(&self, sql: &str) -> bool {
        let in_callers_snapshot = self.depth.get() > 0;
        self.read(|tx| {
            tx.inner.batch_execute("SAVEPOINT rpr_probe")?;
            let ran = tx.inner.execute(sql, &[]);
            let back = tx
                .inner
                .batch_execute("ROLLBACK TO SAVEPOINT rpr_probe; RELEASE SAVEPOINT rpr_probe");
            if back.is_err() {
                self.lost.set(in_callers_snapshot);
                return Ok(true);
            }
            Ok(ran.is_err())
        })
        .unwrap_or(true)
    }

    /// `store::verify` on this connection, in one snapshot.
    fn verify(&self, known_head: Option<&str>) -> Result<Report, StoreError> {
        self.read(|tx| verify_tx(tx, known_head))
    }

    fn snapshot(&self, f: &mut dyn FnMut() -> bool) -> Result<(), StoreError> {
        Ended::settle(self.within(|| Ended::ask(f)))
    }
}

/// Whether `key` holds a NUL byte, which no PostgreSQL text value holds: no row has it, so
/// a lookup by it finds nothing (as on SQLite) instead of failing with 22021.
fn unstorable(key: &str) -> bool {
    key.contains('\0')
}

/// `after` for `id > after`, up to its first NUL byte: no stored id holds one, and an id
/// (NUL-free) sorts after `p\0…` exactly when it sorts after `p`, as SQLite compares them.
fn comparable(after: &str) -> &str {
    after.split('\0').next().unwrap_or_default()
}

const PIN_SELECT_ALL: &str = "SELECT server, tool, digest, binding, definition, pinned_by, pinned_at, \
     seen_digest, seen_binding, seen_definition, seen_at FROM pins ORDER BY server, tool";

const PIN_SELECT_ONE: &str = "SELECT server, tool, digest, binding, definition, pinned_by, pinned_at, \
     seen_digest, seen_binding, seen_definition, seen_at FROM pins WHERE server = $1 AND tool = $2";

const SCHEMA_OBJECTS: &str = "SELECT 'TABLE ' || c.relname || ' (' || string_agg(a.attname || ' ' \
     || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, \
     ', ' ORDER BY a.attnum) || ')' AS sql \
     FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid \
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' \
       AND a.attnum > 0 AND NOT a.attisdropped GROUP BY c.relname \
     UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() \
     ORDER BY 1";
