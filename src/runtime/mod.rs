//! The runtime: one database, a clock, an id source and this process's identity.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use parking_lot::{MappedReentrantMutexGuard, ReentrantMutexGuard};
use serde_json::{Value, json};

use crate::evidence::{self, Bounds};
use crate::executor::Carrier;
use crate::ledger::Report;
use crate::pathway::{Actor, Core, PathwayError};
use crate::store::{
    AttemptRecord, Backend, LedgerRow, PathwayRecord, ReadStore, StoreError, WriteStats,
};

mod approvals;
pub(crate) use approvals::Approvals;
pub use approvals::ApprovedBinding;
mod builder;
mod owner;
mod propose;
mod recovery;
mod senders;
mod store;
mod tokens;

use builder::Hook;
pub use builder::{
    Clock, DEFAULT_BUSY_TIMEOUT, IdSource, RandomIds, RuntimeBuilder, SequentialIds, StepPoint,
    SystemClock,
};

pub(crate) use owner::{CarrierRecord, Tracked};
use owner::{Heartbeat, IN_FLIGHT, Owner};
pub(crate) use propose::Key;
pub use propose::{Decided, Proposal, Ready};
#[cfg(feature = "postgres")]
pub(crate) use recovery::READ_ENDS_FAILED;
pub(crate) use store::Store;
/// How often `load` reads a pathway again when what it read went stale before its
/// recovery step could be recorded (the step is refused by compare-and-set, never misapplied).
pub(crate) const RELOADS: usize = 8;

/// The pathway runtime: the store plus what a step needs (clock, ids, owner identity).
///
/// A `Runtime` is `Send + Sync`: share one (`Arc<Runtime>`, or `&Runtime` in scoped
/// threads) among every thread of a host. It holds one SQLite connection; the steps that
/// threads submit while a commit is syncing share the next durable commit (group commit,
/// docs/storage.md), and each returns once its own step is durable. No step holds the
/// connection while an executor or a readback runs, so tool calls proceed side by side. An
/// attempt one thread is dispatching is in flight *here* for every thread
/// ([`Runtime::load`] and [`Runtime::recover`] return it as
/// [`StoredPathway::InFlightElsewhere`](crate::StoredPathway::InFlightElsewhere), never as
/// unknown). Several processes may share one database too: steps are serialized by SQLite
/// and fenced by compare-and-set, and in-flight attempts carry an owner and a lease.
///
/// Every pathway handle, approval and reconciliation is tied to the database it came
/// from (its identity is created with the schema): used with a runtime on another
/// database it is refused with [`PathwayError::ForeignPathway`] and nothing is written.
pub struct Runtime {
    /// The step connection and how steps reach it: for SQLite, reentrant, so that a thread
    /// holding [`Runtime::reader`] can still step, with steps of concurrent callers
    /// committed together (`store::batch`); for PostgreSQL, one transaction per step. No
    /// step holds it while an executor or readback runs.
    store: Store,
    /// How the steps of read-only pathways are committed.
    read_durability: crate::store::ReadDurability,
    database: Arc<str>,
    path: PathBuf,
    clock: Box<dyn Clock>,
    /// See `RuntimeBuilder::approval_clock` (test tooling); `None`: the default.
    approval_clock: Option<Box<dyn Clock>>,
    ids: Box<dyn IdSource>,
    owner: Owner,
    /// While set, the heartbeat renews nothing (test tooling only: `simulated_owner`).
    frozen: Option<Arc<std::sync::atomic::AtomicBool>>,
    lease_ms: i64,
    hook: Option<Hook>,
    bounds: Bounds,
    in_flight: Mutex<HashSet<String>>,
    heartbeat: Mutex<Option<Heartbeat>>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // A runtime dropped mid-dispatch (a panic unwinding through rpr's own steps, not
        // through an executor: see `Tracked`) no longer holds its attempts: recovery may
        // judge them.
        let mut set = IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = self
            .in_flight
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for attempt in mine.iter() {
            set.remove(&(
                self.database.to_string(),
                attempt.clone(),
                self.owner.nonce.clone(),
            ));
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("owner", &self.owner.encode())
            .finish_non_exhaustive()
    }
}

/// Read access to a runtime's database: derefs to [`ReadStore`]. See [`Runtime::reader`].
pub struct Reader<'a>(MappedReentrantMutexGuard<'a, ReadStore>);

impl std::ops::Deref for Reader<'_> {
    type Target = ReadStore;
    fn deref(&self) -> &ReadStore {
        &self.0
    }
}

impl fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Opens (or creates) the database at `path` with defaults.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::builder(path).open()
    }

    /// A builder for the database at `path`.
    pub fn builder(path: impl AsRef<Path>) -> RuntimeBuilder {
        RuntimeBuilder::new(path.as_ref())
    }

    /// Read access to the same database.
    ///
    /// On SQLite it reads through the runtime's connection: while the returned guard
    /// lives, other threads' steps on this runtime wait (this thread's do not), so keep it
    /// for a read, not across a tool call. On PostgreSQL it reads through a connection of
    /// its own, opened with the runtime, that can only read; other threads' reads wait.
    #[must_use]
    pub fn reader(&self) -> Reader<'_> {
        match &self.store {
            Store::Sqlite { backend, .. } => {
                Reader(ReentrantMutexGuard::map(backend.lock(), |b| b.reader()))
            }
            #[cfg(feature = "postgres")]
            Store::Pg { reader, .. } => Reader(ReentrantMutexGuard::map(reader.lock(), |r| r)),
        }
    }

    /// Whether this runtime's database is PostgreSQL (opened from a `postgres://` location).
    #[must_use]
    pub fn is_postgres(&self) -> bool {
        !matches!(self.store, Store::Sqlite { .. })
    }

    /// One pathway's stored row, on either store (`None` if there is no such pathway).
    pub fn pathway_record(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        self.store.pathway(id)
    }

    /// One pathway's attempts, oldest first, on either store.
    pub fn attempt_records(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        self.store.attempts(id)
    }

    /// A page of the whole ledger with `seq > after`, in order, on either store.
    pub fn ledger_rows(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        self.store.ledger(after, limit)
    }

    /// One pathway's ledger events, oldest first, on either store.
    pub fn pathway_events(&self, id: &str) -> Result<Vec<LedgerRow>, StoreError> {
        self.store.events(id)
    }

    /// Verifies the ledger and the stored state; see [`crate::store::verify`].
    pub fn verify(&self, known_head: Option<&str>) -> Result<Report, StoreError> {
        self.store.verify(known_head)
    }

    /// Runs `f` on the step connection (reads; writes go through [`Runtime::write`]).
    pub(crate) fn with_backend<T>(&self, f: impl FnOnce(&dyn Backend) -> T) -> T {
        self.store.with(f)
    }

    /// The store, for reads that both backends answer.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Runs one step's writes (through the group commit on SQLite); returns once they are
    /// durable (or refused, or failed with their batch).
    pub(crate) fn write<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Backend) -> Result<T, StoreError> + Send + 'static,
    {
        self.same_process()?;
        self.store.write(true, op)
    }

    /// [`Runtime::write`] for a step of a pathway of `class`: a read-only pathway's step is
    /// committed without its own sync under [`crate::store::ReadDurability::ProcessCrashSafe`].
    pub(crate) fn write_for<T, F>(&self, class: crate::ActionClass, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Backend) -> Result<T, StoreError> + Send + 'static,
    {
        self.same_process()?;
        let synced = class != crate::ActionClass::ReadOnly
            || self.read_durability == crate::store::ReadDurability::Synced;
        self.store.write(synced, op)
    }

    /// Checks the binding of `tool` on the server a governing proxy calls `server` against
    /// its pin (see [`crate::store::PinCheck`]): pins it on first sight (recorded as pinned by
    /// `by`), and remembers a differing binding as seen, for [`Runtime::accept_pin`].
    pub fn check_pin(
        &self,
        server: &str,
        tool: &str,
        binding: &crate::executor::Binding,
        definition: &serde_json::Value,
        by: &Actor,
    ) -> Result<crate::store::PinCheck, StoreError> {
        let canonical = |v: &serde_json::Value| {
            crate::canonical::to_string(v).map_err(|e| StoreError::Corrupt(format!("pin: {e}")))
        };
        let candidate = crate::store::pins::Candidate {
            server: server.to_owned(),
            tool: tool.to_owned(),
            digest: binding.digest.clone(),
            binding: canonical(&binding.details)?,
            definition: canonical(definition)?,
        };
        let (by, at) = (by.as_str().to_owned(), self.now());
        self.write(move |b| b.check_pin(&candidate, &by, at))
    }

    /// Pins the changed binding `digest` last seen for `tool` of `server`: the operator
    /// names the digest they reviewed, so a binding that changed again is not pinned unseen.
    pub fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &Actor,
    ) -> Result<crate::store::PinRecord, StoreError> {
        let (server, tool, digest) = (server.to_owned(), tool.to_owned(), digest.to_owned());
        let (by, at) = (by.as_str().to_owned(), self.now());
        self.write(move |b| b.accept_pin(&server, &tool, &digest, &by, at))
    }

    /// How many steps this runtime made durable, and in how many durable commits: with
    /// several threads stepping at once, one commit carries the steps that queued while the
    /// previous one was syncing (docs/storage.md, "Group commit").
    #[must_use]
    pub fn write_stats(&self) -> WriteStats {
        self.store.stats()
    }
    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ms()
    }
    /// Now for approvals: when one is granted, and whether one still counts. On PostgreSQL
    /// the database's clock, as for leases: runtimes on several hosts grant and judge the
    /// same approvals, and a skew between their clocks must not move an expiry. On SQLite,
    /// whose database lives on this one host, the runtime's clock (the host's, unless the
    /// builder was given another). `RuntimeBuilder::approval_clock` (test tooling) replaces
    /// either.
    pub(crate) fn approval_now(&self) -> Result<i64, StoreError> {
        if let Some(clock) = &self.approval_clock {
            Ok(clock.now_ms())
        } else if self.is_postgres() {
            self.with_backend(|b| b.now_ms())
        } else {
            Ok(self.now())
        }
    }
    pub(crate) fn new_id(&self, prefix: &str) -> String {
        self.ids.next_id(prefix)
    }
    pub(crate) fn point(&self, p: StepPoint) {
        if let Some(h) = &self.hook {
            h(p);
        }
    }
    pub(crate) fn owner_id(&self) -> String {
        self.owner.encode()
    }
    pub(crate) fn lease_ms(&self) -> i64 {
        self.lease_ms
    }
    /// This database's identity.
    #[must_use]
    pub fn database_id(&self) -> &str {
        &self.database
    }

    /// Signs the database's log now, with the key given to
    /// [`RuntimeBuilder::signing`](crate::RuntimeBuilder::signing), in a commit of its own
    /// that appends nothing, and returns the stored checkpoint note. Steps sign as they
    /// commit, so this is needed only to begin signing a log that has no checkpoint yet
    /// ([`crate::store::log::Signing::begin_log`]). Without a signing key, returns the
    /// stored checkpoint, if any, unchanged.
    pub fn sign_log(&self) -> Result<Option<String>, StoreError> {
        self.store.write(true, |b| b.sign_log())?;
        crate::store::log::latest(&self.reader())
    }
    /// Refuses a process other than the one that opened the runtime (a child made by
    /// `fork`): checked by every step, every write, `load` and `recover`.
    pub(crate) fn same_process(&self) -> Result<(), StoreError> {
        let now = std::process::id();
        if now == self.owner.pid {
            Ok(())
        } else {
            Err(StoreError::ForkedProcess {
                opened_in: self.owner.pid,
                now,
            })
        }
    }
    /// Refuses a handle that belongs to another database, and every step in a process
    /// other than the one that opened the runtime.
    pub(crate) fn own(&self, core: &Core) -> Result<(), PathwayError> {
        self.same_process()?;
        if core.database == self.database {
            Ok(())
        } else {
            Err(PathwayError::ForeignPathway {
                pathway: core.id.clone(),
                handle_database: core.database.to_string(),
                runtime_database: self.database.to_string(),
            })
        }
    }
    /// The carrier as recorded with an attempt: on this host.
    pub(crate) fn carrier_record(&self, c: &Carrier) -> Value {
        json!(CarrierRecord {
            host: self.owner.host.clone(),
            pid: c.pid,
            pgid: c.pgid,
            start: c.start.clone(),
            boot: self.owner.boot.clone(),
            pidns: self.owner.pidns.clone(),
            cgroup: c.cgroup.clone(),
        })
    }
    /// Redacts and bounds a value recorded before dispatch: refuses what is too large.
    pub(crate) fn check(&self, value: &Value) -> Result<Value, evidence::EvidenceError> {
        evidence::check(value, &self.bounds)
    }
    /// Redacts and bounds evidence recorded after dispatch: never fails.
    pub(crate) fn fit(&self, value: &Value) -> Value {
        evidence::fit(value, &self.bounds)
    }
    /// [`Runtime::fit`], also redacting the secrets of `request` where `value` repeats them.
    pub(crate) fn fit_beside(&self, value: &Value, request: &Value) -> Value {
        evidence::fit_beside(value, request, &self.bounds)
    }
}
