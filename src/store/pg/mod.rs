//! The PostgreSQL store (cargo feature `postgres`): the SQLite
//! store's schema concepts, steps and ledger on PostgreSQL, for hosts on several machines
//! sharing one database.
//!
//! `PgBackend` (crate-private) implements the crate's `Backend` (insert a pathway, apply a step, grant an
//! approval, the database identity, tool pins) by running the rules of `store::rules` over
//! its rows (`rows.rs`), plus what several machines need: the takeover of an in-flight
//! attempt whose lease lapsed by the **database's** clock (it becomes unknown, in the
//! ledger) and the fence that refuses, and records, the late outcome of an attempt that was
//! taken over. A [`crate::Runtime`] opened on a `postgres://` location writes through it;
//! nothing public writes a step or reaches the backend (its tests are unit tests, `tests.rs`).
//! What is public here: [`copy_from_sqlite`] and its reports, [`prepare_schema`] and
//! [`DEFAULT_CONNECTIONS`].
//!
//! **Connection.** A `postgres://user:password@host:port/database` URL (or libpq's
//! `key=value` form), without TLS: the tests and CI run on loopback and between network
//! namespaces of one machine. A server on another machine needs a TLS connector
//! (`postgres-native-tls` or `postgres-openssl`), not added in this slice. A host that may
//! be cut off from the server should bound how long its connection waits for a vanished
//! peer with the client's URL parameters `keepalives_idle`, `keepalives_interval`,
//! `keepalives_retries` and `tcp_user_timeout` (all in seconds here); docs/storage.md has
//! the cases.
//!
//! **Transactions.** Every step is a savepoint in a group commit's transaction at `READ
//! COMMITTED` (a step alone in its batch is the whole transaction), and first locks its
//! pathway's row (`SELECT … FOR UPDATE`): steps on one pathway, from any machine, run one
//! after the other, and each sees the rows the previous one committed. Then, as on SQLite:
//! the pathway's rows are checked against its own ledger events, the compare-and-set on
//! state, version and digests, the attempt or approval row, and the ledger events.
//!
//! **Ledger.** One global chain, exactly as on SQLite (same event texts, same hashes, same
//! `seq`): the append locks the head (`meta.ledger_head`) `FOR UPDATE` as the last thing a
//! step does, so unrelated pathways wait for each other only for the event inserts and the
//! commit (docs/storage.md, "One global chain, measured").
//!
//! **Leases.** `lease_until` is written as `now()` of the database plus the lease, renewed
//! the same way, and judged against `now()` in the transaction that takes over: a caller's
//! clock never enters a lease.

use std::fmt;

use postgres::IsolationLevel;

use super::StoreError;

mod backend;
mod batch;
mod check;
mod copy;
mod error;
mod lease;
mod ledger;
mod log;
mod migrate;
mod pins;
mod pool;
mod read;
mod reader;
mod rows;
mod step;
#[cfg(test)]
mod tests;
mod tx;
mod verify;

use tx::{Inner, Tx};

pub use copy::{
    CopyError, CopyOutcome, CopyReport, InFlight, Progress, RowCounts, copy_from_sqlite,
};
pub use error::{PgError, error_text};
pub use pool::DEFAULT_CONNECTIONS;
pub(crate) use reader::PgReader;

/// Now by the database's clock, in ms since the Unix epoch, as an SQL expression (a macro,
/// so that `concat!` builds statements with it): `now()`, the start of the transaction. A
/// takeover judges a lease by it, which is never later than the moment it reads the lease.
macro_rules! db_now_ms {
    () => {
        "floor(extract(epoch FROM now()) * 1000)::bigint"
    };
}
use db_now_ms;

/// The database's clock at the moment the statement runs (`clock_timestamp()`), in ms since
/// the Unix epoch: a lease is granted and renewed from the moment its row is written, not
/// from the start of a transaction that may have waited for a lock.
macro_rules! db_clock_ms {
    () => {
        "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}
use db_clock_ms;

/// The PostgreSQL store: a small pool of connections; the steps of concurrent callers
/// share transactions and commits (a group commit, `batch.rs`).
///
/// A `PgBackend` is `Send + Sync`: steps from several threads are written in batches, up to
/// two at once, each on a connection of its pool (at most [`DEFAULT_CONNECTIONS`] unless
/// [`PgBackend::connections`] says otherwise; opened as needed), while reads, takeovers,
/// lease renewals and pins take connections of their own; steps on one pathway still run
/// one after the other (they lock its row). See `pool.rs` and `batch.rs` for the rules.
pub(crate) struct PgBackend {
    pool: pool::Pool,
    batcher: batch::Batcher,
    /// The replays steps leave for their pathways' next steps (`store::replays`).
    replays: std::sync::Arc<crate::store::replays::Replays>,
    /// Signs the log in every batch's commit, when the runtime has a signing key.
    sealer: Option<std::sync::Arc<crate::store::log::Sealer>>,
    database_id: String,
    schema: Option<String>,
}

// The connection has no `Debug`; the rest is shown.
impl fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBackend")
            .field("database_id", &self.database_id)
            .field("schema", &self.schema)
            .field("connections", &self.pool.size())
            .finish_non_exhaustive()
    }
}

/// A schema name safe to write into SQL unquoted and quoted alike.
fn checked_schema(schema: &str) -> Result<&str, PgError> {
    let mut bytes = schema.bytes();
    let ok = schema.len() <= 63
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(schema)
    } else {
        Err(PgError::SchemaName(schema.to_owned()))
    }
}

/// Creates `schema` in the PostgreSQL database at `url` if it is missing and migrates it to
/// [`crate::store::SCHEMA_VERSION`], as opening a store there does; for setting a store up
/// before anything opens it (a test's fresh store, provisioning). It takes no step. One
/// database can hold several independent rpr stores, one per schema; a store's location
/// is the URL with `options=-csearch_path%3D` and the schema's name.
pub fn prepare_schema(url: &str, schema: &str) -> Result<(), PgError> {
    PgBackend::open_in_schema(url, schema).map(drop)
}

impl PgBackend {
    /// Connects to `url`, migrates the database (in the connection's default schema,
    /// normally `public`) to [`crate::store::SCHEMA_VERSION`], and reads its identity.
    pub(crate) fn open(url: &str) -> Result<Self, PgError> {
        Self::connect(url, None, false)
    }

    /// Like [`PgBackend::open`], in `schema` (created if missing; `search_path` is set to
    /// it alone): one database can hold several independent rpr stores, one per schema.
    pub(crate) fn open_in_schema(url: &str, schema: &str) -> Result<Self, PgError> {
        Self::connect(url, Some(checked_schema(schema)?), false)
    }

    /// Connects for reading only: `SET default_transaction_read_only = on`, no migration;
    /// the schema must already be at [`crate::store::SCHEMA_VERSION`]. Inspection connects
    /// so, through a role that also has no write privilege (`.ci/postgres` makes
    /// `rpr_reader`): the setting alone could be turned off by the session, the privileges
    /// cannot. One connection (a reader's snapshot spans several calls on its session), not
    /// the pool of [`DEFAULT_CONNECTIONS`].
    pub(crate) fn open_read_only(url: &str, schema: Option<&str>) -> Result<Self, PgError> {
        let schema = schema.map(checked_schema).transpose()?;
        Ok(Self::connect(url, schema, true)?.connections(1))
    }

    fn connect(url: &str, schema: Option<&str>, read_only: bool) -> Result<Self, PgError> {
        let mut client = error::connect(url)?;
        if read_only {
            client.batch_execute("SET default_transaction_read_only = on")?;
        }
        if let Some(schema) = schema {
            if !read_only {
                client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))?;
            }
            client.batch_execute(&format!("SET search_path TO \"{schema}\""))?;
        }
        let database_id = if read_only {
            migrate::check_version(&mut client)?
        } else {
            migrate::migrate(&mut client)?
        };
        Ok(Self {
            pool: pool::Pool::new(client, url, schema, read_only, database_id.clone()),
            batcher: batch::Batcher::default(),
            replays: std::sync::Arc::default(),
            sealer: None,
            database_id,
            schema: schema.map(str::to_owned),
        })
    }

    /// At most `n` connections (at least 1; default [`DEFAULT_CONNECTIONS`]). Only the first
    /// is opened at open; the others when steps overlap. With 1, steps from several threads
    /// take turns on one connection.
    #[must_use]
    pub(crate) fn connections(mut self, n: usize) -> Self {
        self.pool.set_size(n);
        self
    }

    /// How many connections are open now (at most [`PgBackend::connections`]).
    #[cfg(test)]
    pub(crate) fn open_connections(&self) -> usize {
        self.pool.open_count()
    }

    /// This database's identity (`meta.database_id`, made by the first migration): every
    /// pathway handle is tied to it.
    #[must_use]
    pub(crate) fn database_id(&self) -> &str {
        &self.database_id
    }

    /// Now by the database's clock, ms since the Unix epoch.
    pub(crate) fn now_ms(&self) -> Result<i64, PgError> {
        self.read(|tx| Ok(tx.query_one(concat!("SELECT ", db_now_ms!()), &[])?.get(0)))
    }

    /// How long a statement waits for a lock another connection holds (a pathway's row,
    /// the ledger head; another connection of this same pool included) before the step
    /// fails: `SET lock_timeout` on every connection of the pool, those opened later too,
    /// for every step that starts after this returns. The step then rolls back whole and
    /// fails as [`StoreError::Busy`] (retryable: it wrote nothing). Without it a step waits
    /// as long as the holder holds.
    pub(crate) fn set_lock_timeout(&self, wait: std::time::Duration) -> Result<(), PgError> {
        self.pool
            .set_lock_timeout(wait.as_millis().clamp(1, i32::MAX as u128));
        // Applied now on one connection (and on each other when it is next taken).
        drop(self.pool.take(false)?);
        Ok(())
    }

    /// How long the server lets each connection's session sit idle inside a transaction
    /// before it ends the session and rolls the transaction back:
    /// `SET idle_in_transaction_session_timeout`. A step never waits on its client in the
    /// middle of its transaction, so only a host cut off from the server (or stopped)
    /// mid-step reaches it; without it such a session holds its pathway's row and, late in a
    /// step, the ledger head that every step takes, for as long as the server takes to
    /// notice the dead peer (TCP's retransmissions: about 15 minutes on Linux).
    pub(crate) fn set_idle_in_transaction_timeout(
        &self,
        wait: std::time::Duration,
    ) -> Result<(), PgError> {
        self.pool
            .set_idle_in_transaction_timeout(wait.as_millis().clamp(1, i32::MAX as u128));
        // Applied now on one connection (and on each other when it is next taken).
        drop(self.pool.take(false)?);
        Ok(())
    }

    /// The schema version recorded in `meta`, and the migrations applied, oldest first
    /// (`version`, what it did).
    #[cfg(test)]
    pub(crate) fn migrations(&self) -> Result<(i64, Vec<(i64, String)>), PgError> {
        migrate::recorded(&mut self.pool.take(false)?.client)
    }

    /// Runs `f` in one read-write transaction (a step) on a connection of the pool and
    /// commits it; an error rolls it back.
    fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, PgError>) -> Result<T, PgError> {
        self.transaction(false, false, f)
    }

    /// Like [`PgBackend::write`], ahead of every waiting step: the lease renewal.
    fn write_urgent<T>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        self.transaction(true, false, f)
    }

    /// Runs `f` in one read-only `REPEATABLE READ` transaction: every read sees one snapshot.
    fn read<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, PgError>) -> Result<T, PgError> {
        self.transaction(false, true, f)
    }

    fn transaction<T>(
        &self,
        urgent: bool,
        read: bool,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        let mut conn = self.pool.take(urgent)?;
        let pool::Conn {
            client, statements, ..
        } = &mut *conn;
        let run = || {
            let inner = if read {
                client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?
            } else {
                client.transaction()?
            };
            let mut tx = Tx {
                inner: Inner::Own(inner),
                statements,
                nowait: false,
                head: None,
                sealer: None,
                covered: None,
            };
            let out = f(&mut tx)?;
            tx.inner.commit()?;
            Ok(out)
        };
        let out = run();
        if let Err(e) = &out {
            conn.saw(e);
        }
        out
    }
}

impl PgBackend {
    /// Runs `f` on the connection's session, outside any transaction of its own: its
    /// statements run in the snapshot the session has open ([`PgBackend::begin_snapshot`]),
    /// or each in its own when none is open. Only on a backend of one connection (a
    /// read-only one, [`PgBackend::open_read_only`]): the snapshot is that connection's.
    fn session<T>(
        &self,
        snapshot: u64,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T, PgError>,
    ) -> Result<T, PgError> {
        let mut conn = self.on_snapshot(snapshot)?;
        let pool::Conn {
            client, statements, ..
        } = &mut *conn;
        let mut tx = Tx {
            inner: Inner::Session(client),
            statements,
            nowait: false,
            head: None,
            sealer: None,
            covered: None,
        };
        let out = f(&mut tx);
        drop(tx);
        if let Err(e) = &out {
            conn.saw(e);
        }
        out
    }

    /// Opens a read-only `REPEATABLE READ` transaction on the session, for
    /// [`PgBackend::session`] reads that must see one snapshot; ended by
    /// [`PgBackend::end_snapshot`]. Returns which connection holds it.
    fn begin_snapshot(&self) -> Result<u64, PgError> {
        let mut conn = self.single()?;
        let began = conn
            .client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        if let Err(e) = began {
            let e = PgError::from(e);
            conn.saw(&e);
            return Err(e);
        }
        Ok(conn.serial())
    }

    /// Ends the session's snapshot: `COMMIT` after reads that succeeded, `ROLLBACK` after
    /// an error (which may have aborted the transaction).
    fn end_snapshot(&self, snapshot: u64, ok: bool) -> Result<(), PgError> {
        let mut conn = self.on_snapshot(snapshot)?;
        let ended = conn
            .client
            .batch_execute(if ok { "COMMIT" } else { "ROLLBACK" });
        if let Err(e) = ended {
            let e = PgError::from(e);
            conn.saw(&e);
            return Err(e);
        }
        Ok(())
    }

    /// The connection `snapshot` began on; an error when it broke and another took its
    /// place (the snapshot ended with it: reading on would read outside it).
    fn on_snapshot(&self, snapshot: u64) -> Result<pool::Taken<'_>, PgError> {
        let conn = self.single()?;
        if conn.serial() == snapshot {
            Ok(conn)
        } else {
            Err(StoreError::Unsupported(
                "the connection holding this read snapshot was lost; end it and read in a new one"
                    .into(),
            )
            .into())
        }
    }

    /// The one connection of a one-connection backend: a session's snapshot spans several
    /// calls, so they must all reach the same connection.
    fn single(&self) -> Result<pool::Taken<'_>, PgError> {
        if self.pool.size() != 1 {
            return Err(StoreError::Unsupported(
                "a session snapshot needs a PostgreSQL store of one connection".into(),
            )
            .into());
        }
        self.pool.take(false)
    }
}
