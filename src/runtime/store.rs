//! Where a runtime keeps its pathways: a SQLite file (steps of concurrent callers committed
//! together) or, with the `postgres` feature, a PostgreSQL database (steps committed
//! together too, hosts on many machines).

use std::path::Path;
#[cfg(feature = "postgres")]
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::ReentrantMutex;

use crate::store::batch::Batcher;
use crate::store::check::Replay;
#[cfg(feature = "postgres")]
use crate::store::pg::PgBackend;
use crate::store::{
    AttemptRecord, Backend, Checked, LedgerRow, PathwayRecord, ReadStore, Reads, SqliteBackend,
    StoreError, WriteStats,
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
        /// The callers' reads ([`Store::reads`]): a connection of their own, opened on
        /// first use.
        reads: parking_lot::Mutex<Option<ReadStore>>,
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
            reads: parking_lot::Mutex::new(None),
        }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(
        url: &str,
        schema: Option<&str>,
        busy_timeout: std::time::Duration,
        connections: Option<usize>,
        signing: Option<crate::store::log::Signing>,
    ) -> Result<Self, StoreError> {
        let mut backend = match schema {
            Some(s) => PgBackend::open_in_schema(url, s)?,
            None => PgBackend::open(url)?,
        }
        .connections(connections.unwrap_or(crate::store::pg::DEFAULT_CONNECTIONS));
        let sealer = signing.map(|s| {
            std::sync::Arc::new(crate::store::log::Sealer::new(
                s,
                crate::store::Backend::database_id(&backend),
            ))
        });
        backend.set_sealer(sealer)?;
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

    /// Runs `f` on the callers' reads. On SQLite they have a connection of their own,
    /// opened on first use, so a read never waits for the step connection while a batch is
    /// written and synced (a committed step is seen there as on the step connection, and a
    /// batch's uncommitted rows are seen on neither); a database in memory has only its
    /// step connection. On PostgreSQL they run on the pool.
    pub(crate) fn reads<T>(
        &self,
        f: impl FnOnce(&dyn Reads) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match self {
            Self::Sqlite { backend, reads, .. } => {
                let mut side = reads.lock();
                if side.is_none() {
                    let b = backend.lock();
                    if b.path().as_os_str() == ":memory:" {
                        return f(b.reader());
                    }
                    *side = Some(ReadStore::from_sqlite(crate::store::open_read_connection(
                        b.path(),
                        b.busy_timeout(),
                    )?));
                }
                f(side.as_ref().expect("opened above"))
            }
            #[cfg(feature = "postgres")]
            Self::Pg { backend, .. } => f(&**backend),
        }
    }

    /// One pathway's row.
    pub(crate) fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        self.reads(|r| r.pathway_record(id))
    }

    /// One pathway's attempts, oldest first.
    pub(crate) fn attempts(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        self.reads(|r| r.attempt_records(id))
    }

    /// A page of the global ledger with `seq > after`, in order.
    pub(crate) fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        self.reads(|r| r.ledger_page(after, limit))
    }

    /// One pathway's ledger events, oldest first.
    pub(crate) fn events(&self, id: &str) -> Result<Vec<LedgerRow>, StoreError> {
        self.reads(|r| r.pathway_events(id))
    }

    /// A page of unresolved pathways after `after`, by id.
    pub(crate) fn unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        self.reads(|r| r.unresolved(after, limit))
    }

    /// The pathway stored under an idempotency key: its id and definition digest.
    pub(crate) fn with_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        self.reads(|r| r.with_key(key))
    }

    /// One pathway's rows checked against its own ledger events, in one read snapshot:
    /// what its events establish.
    pub(crate) fn check_pathway(&self, id: &str) -> Result<Replay, StoreError> {
        self.reads(|r| r.check_pathway(id))
    }

    /// One pathway's row, definition digest and attempts, checked against its own ledger
    /// events, in one read snapshot. [`StoreError::NoSuchPathway`] if there is none.
    pub(crate) fn read_checked(&self, id: &str) -> Result<Checked, StoreError> {
        self.reads(|r| r.read_checked(id))?
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    /// The whole ledger checked (see [`crate::store::verify`]).
    pub(crate) fn verify(
        &self,
        known_head: Option<&str>,
    ) -> Result<crate::ledger::Report, StoreError> {
        self.reads(|r| r.verify_all(known_head))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::Store;
    use crate::store::{SqliteBackend, StoreError};

    /// The leader of a batch holds the step connection while it writes and syncs; a
    /// caller's read must not wait for it.
    #[test]
    fn a_callers_reads_do_not_wait_for_the_step_connection() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::sqlite(
            SqliteBackend::open(&dir.path().join("r.db"), Duration::from_secs(5)).unwrap(),
        );
        #[cfg_attr(
            not(feature = "postgres"),
            expect(irrefutable_let_patterns, reason = "one store without postgres")
        )]
        let Store::Sqlite { backend, .. } = &store else {
            unreachable!()
        };
        assert_eq!(store.pathway("pw_none").unwrap(), None, "opens the reads");
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(move || {
                let _step_connection = backend.lock();
                held_tx.send(()).unwrap();
                let _ = release_rx.recv_timeout(Duration::from_secs(30));
            });
            held_rx.recv().unwrap();
            let store = &store;
            s.spawn(move || {
                let reads = (
                    store.pathway("pw_none").map(|p| p.is_none()),
                    store.attempts("pw_none").map(|a| a.is_empty()),
                    store.events("pw_none").map(|e| e.is_empty()),
                    store.ledger(0, 10).map(|l| l.is_empty()),
                    store.unresolved(None, 10).map(|u| u.is_empty()),
                    store.with_key("k").map(|k| k.is_none()),
                    matches!(
                        store.read_checked("pw_none"),
                        Err(StoreError::NoSuchPathway(_))
                    ),
                    store.verify(None).map(|r| r.is_ok()),
                );
                done_tx.send(format!("{reads:?}")).unwrap();
            });
            let done = done_rx.recv_timeout(Duration::from_secs(10));
            release_tx.send(()).unwrap();
            assert_eq!(
                done.expect("the reads waited for the step connection"),
                "(Ok(true), Ok(true), Ok(true), Ok(true), Ok(true), Ok(true), true, Ok(true))"
            );
        });
    }
}
