//! Where a runtime keeps its pathways: a SQLite file (steps of concurrent callers committed
//! together) or, with the `postgres` feature, a PostgreSQL database (steps committed
//! together too, hosts on many machines).

use std::path::Path;
#[cfg(feature = "postgres")]
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::ReentrantMutex;

#[cfg(feature = "postgres")]
use crate::store::ReadStore;
use crate::store::batch::Batcher;
#[cfg(feature = "postgres")]
use crate::store::pg::PgBackend;
use crate::store::{
    AttemptRecord, Backend, Checked, LedgerRow, PathwayRecord, SqliteBackend, StoreError,
    WriteStats,
};

/// The least time the server lets a PostgreSQL runtime's session sit idle inside a
/// transaction (`idle_in_transaction_session_timeout`; otherwise the busy timeout).
#[cfg(feature = "postgres")]
const MIN_IDLE_IN_TRANSACTION: std::time::Duration = std::time::Duration::from_secs(5);

/// The store of one runtime.
pub(crate) enum Store {
    /// One SQLite connection; steps go through the group commit.
    Sqlite {
        backend: Box<ReentrantMutex<SqliteBackend>>,
        batcher: Batcher,
        /// A connection of its own for the idempotency-key read of `propose`, opened on
        /// first use: it never waits for the step connection while a batch is being
        /// written and synced.
        key_reads: parking_lot::Mutex<Option<rusqlite::Connection>>,
        /// The backend's kept replays, whose use `stats` counts without the step lock.
        replays: std::sync::Arc<crate::store::replays::Replays>,
    },
    /// A pool of PostgreSQL connections; steps go through its group commit (`store::pg`).
    #[cfg(feature = "postgres")]
    Pg {
        /// Shared with the lease heartbeat, which renews on a connection of the same pool,
        /// ahead of waiting steps (a connection of its own would cost its own start, and
        /// the first renewal with it).
        backend: std::sync::Arc<PgBackend>,
        /// [`crate::Runtime::reader`]'s store: a connection of its own that can only read.
        reader: Box<ReentrantMutex<ReadStore>>,
        /// How long a step waits for a lock (`lock_timeout`), named in its `Busy` error.
        busy_timeout: std::time::Duration,
        submitted: AtomicU64,
    },
}

impl Store {
    pub(crate) fn sqlite(backend: SqliteBackend) -> Self {
        Self::Sqlite {
            replays: backend.replays(),
            backend: Box::new(ReentrantMutex::new(backend)),
            batcher: Batcher::default(),
            key_reads: parking_lot::Mutex::new(None),
        }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(
        url: &str,
        schema: Option<&str>,
        busy_timeout: std::time::Duration,
        connections: Option<usize>,
    ) -> Result<Self, StoreError> {
        let backend = match schema {
            Some(s) => PgBackend::open_in_schema(url, s)?,
            None => PgBackend::open(url)?,
        }
        .connections(connections.unwrap_or(crate::store::pg::DEFAULT_CONNECTIONS));
        backend.set_lock_timeout(busy_timeout)?;
        // A session idle inside a transaction is a host cut off mid-step: the server ends
        // it, releasing what it locked, after the busy timeout, but never sooner than
        // MIN_IDLE_IN_TRANSACTION: ending a live host's session (a long stall of its
        // machine) rolls back the step it was in the middle of.
        backend.set_idle_in_transaction_timeout(busy_timeout.max(MIN_IDLE_IN_TRANSACTION))?;
        let reader = ReadStore::postgres_in(url, schema)?;
        Ok(Self::Pg {
            reader: Box::new(ReentrantMutex::new(reader)),
            busy_timeout,
            backend: std::sync::Arc::new(backend),
            submitted: AtomicU64::new(0),
        })
    }

    /// Runs `f` on the backend (for SQLite, holding its connection).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&dyn Backend) -> T) -> T {
        match self {
            Self::Sqlite { backend, .. } => f(&*backend.lock()),
            #[cfg(feature = "postgres")]
            Self::Pg { backend, .. } => f(&**backend),
        }
    }

    /// One step's writes, durable when this returns `Ok` (synced unless `synced` is false
    /// and the SQLite batch carries only such steps; PostgreSQL always commits durably).
    pub(crate) fn write<T, F>(&self, synced: bool, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Backend) -> Result<T, StoreError> + Send + 'static,
    {
        match self {
            Self::Sqlite {
                backend, batcher, ..
            } => batcher.write(backend, synced, move |b: &SqliteBackend| op(b)),
            #[cfg(feature = "postgres")]
            Self::Pg {
                backend,
                busy_timeout,
                submitted,
                ..
            } => {
                let _ = synced;
                submitted.fetch_add(1, Ordering::Relaxed);
                op(&**backend).map_err(|e| match e {
                    StoreError::Busy {
                        timeout: None,
                        holder,
                    } => StoreError::Busy {
                        timeout: Some(*busy_timeout),
                        holder,
                    },
                    other => other,
                })
            }
        }
    }

    pub(crate) fn stats(&self) -> WriteStats {
        match self {
            Self::Sqlite {
                batcher, replays, ..
            } => WriteStats {
                reused_replays: replays.used_count(),
                ..batcher.stats()
            },
            #[cfg(feature = "postgres")]
            Self::Pg {
                backend, submitted, ..
            } => {
                let (steps, commits, reused_replays) = backend.batch_stats();
                WriteStats {
                    submitted: submitted.load(Ordering::Relaxed),
                    steps,
                    commits,
                    unsynced_commits: 0,
                    reused_replays,
                }
            }
        }
    }

    /// Where the lease heartbeat connects.
    pub(super) fn renewal(&self, path: &Path) -> super::owner::Renewal {
        match self {
            Self::Sqlite { .. } => super::owner::Renewal::Sqlite(path.to_owned()),
            #[cfg(feature = "postgres")]
            Self::Pg { backend, .. } => super::owner::Renewal::Pg(std::sync::Arc::clone(backend)),
        }
    }

    /// One pathway's row.
    pub(crate) fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        self.with(|b| b.pathway_record(id))
    }

    /// One pathway's attempts, oldest first.
    pub(crate) fn attempts(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        self.with(|b| b.attempt_records(id))
    }

    /// A page of the global ledger with `seq > after`, in order.
    pub(crate) fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        self.with(|b| b.ledger_page(after, limit))
    }

    /// One pathway's ledger events, oldest first.
    pub(crate) fn events(&self, id: &str) -> Result<Vec<LedgerRow>, StoreError> {
        self.with(|b| b.pathway_events(id))
    }

    /// A page of unresolved pathways after `after`, by id.
    pub(crate) fn unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        self.with(|b| b.unresolved(after, limit))
    }

    /// The pathway stored under an idempotency key: its id and definition digest. On
    /// SQLite, read on a connection of its own (a committed pathway is seen there as on the
    /// step connection, and a batch's uncommitted rows are seen on neither).
    pub(crate) fn with_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        match self {
            Self::Sqlite {
                backend, key_reads, ..
            } => {
                let mut conn = key_reads.lock();
                if conn.is_none() {
                    let (path, busy) = {
                        let b = backend.lock();
                        (b.path().to_owned(), b.busy_timeout())
                    };
                    *conn = Some(crate::store::open_side_connection(&path, busy)?);
                }
                let conn = conn.as_ref().expect("opened above");
                crate::store::key_lookup(conn, key)
            }
            #[cfg(feature = "postgres")]
            Self::Pg { backend, .. } => Ok(backend.with_key(key)?),
        }
    }

    /// One pathway's row, definition digest and attempts, checked against its own ledger
    /// events, in one read snapshot. [`StoreError::NoSuchPathway`] if there is none.
    pub(crate) fn read_checked(&self, id: &str) -> Result<Checked, StoreError> {
        self.with(|b| b.read_checked(id))?
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    /// The whole ledger checked (see [`crate::store::verify`]).
    pub(crate) fn verify(
        &self,
        known_head: Option<&str>,
    ) -> Result<crate::ledger::Report, StoreError> {
        self.with(|b| b.verify_all(known_head))
    }
}
