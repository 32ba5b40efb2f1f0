//! Building a [`Runtime`]: its clock, ids, lease, busy wait, step hook and evidence bounds.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::owner::Owner;
use super::{Runtime, Store};
use crate::evidence::Bounds;
use crate::store::{SqliteBackend, StoreError};

/// A source of time, in milliseconds since the Unix epoch. Inject one for deterministic tests.
///
/// `Send + Sync`: one [`Runtime`] is shared by every thread that steps through it.
pub trait Clock: Send + Sync {
    /// Now.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A source of ids. Inject one for deterministic tests.
///
/// `Send + Sync`: one [`Runtime`] is shared by every thread that steps through it.
pub trait IdSource: Send + Sync {
    /// A new id starting with `prefix` (`pw`, `at`, `ap`).
    fn next_id(&self, prefix: &str) -> String;
}

/// Time-ordered ids: `{prefix}_` then the creation time in ms since the Unix epoch (12 hex
/// digits, so that text order is time order) and 12 hex digits of sha256 of a secret the
/// process drew once from the system's random source, the time in ns and a counter (so two
/// processes, even with the same pid in different PID namespaces, draw independently). Ids stay opaque text; they sort by creation time, then at random
/// within a millisecond, so a new row's id lands on the rightmost page of each id index
/// instead of a random one (docs/storage.md, "Ids").
#[derive(Debug, Default)]
pub struct RandomIds {
    counter: AtomicU64,
}

impl IdSource for RandomIds {
    fn next_id(&self, prefix: &str) -> String {
        static SECRET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let ms = since.as_millis() & 0xffff_ffff_ffff;
        let secret = SECRET.get_or_init(crate::store::random_hex);
        let seed = format!("{secret}:{}:{n}", since.as_nanos());
        let hex = crate::canonical::sha256_hex_bytes(seed.as_bytes());
        format!("{prefix}_{ms:012x}{}", &hex[..12])
    }
}

/// Sequential ids `pw_000001`, … (for tests and snapshots).
#[derive(Debug, Default)]
pub struct SequentialIds {
    counter: AtomicU64,
}

impl IdSource for SequentialIds {
    fn next_id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{prefix}_{n:06}")
    }
}

/// A boundary inside a step, reported to the step hook (for tracing and fault-injection tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepPoint {
    /// Dispatch is about to commit the write-ahead attempt record (for a one-commit read,
    /// [`crate::BoundRead::dispatch`]: its attempt record is ready, to be committed with
    /// its outcome; the executor's last word comes next).
    BeforeAttemptCommit,
    /// The attempt record is durable; the executor has not been called.
    AfterAttemptCommit,
    /// The executor returned; its outcome is not yet recorded.
    AfterReply,
    /// The outcome is durable.
    AfterOutcomeCommit,
    /// A readback observed; the reconciliation or confirmation is not yet recorded.
    AfterReadback,
}

pub(crate) type Hook = Box<dyn Fn(StepPoint) + Send + Sync>;

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    path: PathBuf,
    clock: Box<dyn Clock>,
    approval_clock: Option<Box<dyn Clock>>,
    ids: Box<dyn IdSource>,
    lease: Duration,
    busy_timeout: Duration,
    hook: Option<Hook>,
    bounds: Bounds,
    read_durability: crate::store::ReadDurability,
    signing: Option<crate::store::log::Signing>,
    schema: Option<String>,
    pg_connections: Option<usize>,
    /// See `RuntimeBuilder::simulated_owner` (test tooling): `None` outside rpr's own tests.
    simulated: Option<(bool, Arc<AtomicBool>)>,
}

/// How long a step waits for another connection's write lock by default (10 s): see
/// [`RuntimeBuilder::busy_timeout`].
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("location", &crate::store::shown_location(&self.path))
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// The defaults: the system clock, random ids, a 10-minute lease, the default busy
    /// wait, no hook, the default evidence bounds.
    pub(super) fn new(path: &std::path::Path) -> Self {
        Self {
            path: path.to_owned(),
            clock: Box::new(SystemClock),
            approval_clock: None,
            ids: Box::new(RandomIds::default()),
            lease: Duration::from_mins(10),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            hook: None,
            bounds: Bounds::DEFAULT,
            read_durability: crate::store::ReadDurability::Synced,
            signing: None,
            schema: None,
            pg_connections: None,
            simulated: None,
        }
    }

    /// Test tooling (feature `test-hooks`, which only rpr's own tests enable; not part of
    /// the API): lets one process hold owners that behave like a host stopped elsewhere.
    ///
    /// With `unverifiable`, this runtime's owner record carries no boot id and no PID
    /// namespace, so no process can judge it by its pid (nor can it judge others): only its
    /// lease speaks, as for an owner on another machine. While `frozen` is set, its
    /// heartbeat renews no lease, as a stopped (SIGSTOP) process's would not. Without these,
    /// every runtime of one process is judged by that process, which is alive: a lapsed
    /// lease could never be tested in a single process.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    #[must_use]
    pub fn simulated_owner(mut self, unverifiable: bool, frozen: Arc<AtomicBool>) -> Self {
        self.simulated = Some((unverifiable, frozen));
        self
    }

    /// For a `postgres://` location: keep this runtime's tables in `schema` (created if
    /// missing), so that one PostgreSQL database can hold several independent rpr stores.
    /// A plain lowercase identifier (`[a-z_][a-z0-9_]*`). Ignored for a SQLite file.
    #[must_use]
    pub fn schema(mut self, schema: &str) -> Self {
        self.schema = Some(schema.to_owned());
        self
    }

    /// For a `postgres://` location: at most `n` connections to the database (at least 1;
    /// default 4, `rpr::store::pg::DEFAULT_CONNECTIONS`), so that steps of this runtime on different
    /// pathways (from different threads) run in the database at the same time; steps on one
    /// pathway still run one after the other. The first connection is opened by
    /// [`RuntimeBuilder::open`] (a wrong location fails there); the others only when steps
    /// overlap, so a runtime driven by one thread holds one. With `1`, the runtime's steps
    /// take turns on one connection. The lease heartbeat renews on a connection of the same
    /// pool, ahead of waiting steps. Ignored for a SQLite file (its steps share a group
    /// commit on one connection).
    #[must_use]
    pub fn pg_connections(mut self, n: usize) -> Self {
        self.pg_connections = Some(n.max(1));
        self
    }

    #[cfg(feature = "postgres")]
    fn postgres(&self) -> Result<Store, StoreError> {
        let url = self.path.to_str().unwrap_or_default();
        Store::postgres(
            url,
            self.schema.as_deref(),
            self.busy_timeout,
            self.pg_connections,
            self.signing.clone(),
        )
    }

    #[cfg(not(feature = "postgres"))]
    fn postgres(&self) -> Result<Store, StoreError> {
        Err(crate::store::postgres_unsupported(&self.path))
    }

    /// Uses `clock` instead of the system clock.
    #[must_use]
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }
    /// Stamps and judges approvals (when one is granted, whether it still counts) by
    /// `clock`. By default they follow the database's clock on PostgreSQL, so that hosts
    /// sharing it agree on an approval's expiry whatever their own clocks say, and the
    /// runtime's [`clock`](Self::clock) on SQLite, whose database lives on one host. Give
    /// one to move time in a test (test tooling, behind the `test-hooks` feature): runtimes
    /// sharing a database must not be given different ones.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    #[must_use]
    pub fn approval_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.approval_clock = Some(Box::new(clock));
        self
    }
    /// Uses `ids` instead of random ids.
    #[must_use]
    pub fn ids(mut self, ids: impl IdSource + 'static) -> Self {
        self.ids = Box::new(ids);
        self
    }
    /// How long an in-flight attempt's lease runs. The owner renews it while the call is
    /// in flight (a heartbeat thread, every third of the lease), so it need not exceed the
    /// executor's timeout. Default 10 minutes.
    ///
    /// The lease matters only where the owner's liveness cannot be checked directly: an
    /// owner on another host, or on a platform where a process's start time cannot be
    /// read. On the same host a live owner is never taken over whatever its lease says,
    /// and a dead one is detected at once. Lease times are taken from the database's
    /// clock, never from the runtime's [`Clock`].
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// How long a step waits for the write lock while another connection (another process,
    /// or a second runtime on the same file) holds it; default [`DEFAULT_BUSY_TIMEOUT`]. On
    /// PostgreSQL, how long a statement waits for a row or the ledger head another
    /// connection holds (`lock_timeout`), and how long the server lets this runtime's
    /// session sit idle inside a transaction (`idle_in_transaction_session_timeout`, at
    /// least 5 s) before it ends the session: only a host cut off (or stopped) mid-step
    /// does, and its locks go with the session.
    /// Threads sharing this runtime never wait on each other this way: their steps share a
    /// batch. When the wait runs out the step fails with [`StoreError::Busy`], naming the
    /// holder where the platform can (Linux); it wrote and sent nothing and can be retried.
    #[must_use]
    pub fn busy_timeout(mut self, wait: Duration) -> Self {
        self.busy_timeout = wait;
        self
    }
    /// Calls `hook` at each [`StepPoint`].
    #[must_use]
    pub fn step_hook(mut self, hook: impl Fn(StepPoint) + Send + Sync + 'static) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }
    /// Bounds for evidence JSON.
    #[must_use]
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }
    /// How the steps of read-only pathways are committed (default
    /// [`ReadDurability::Synced`](crate::store::ReadDurability::Synced)). With
    /// [`ReadDurability::ProcessCrashSafe`](crate::store::ReadDurability::ProcessCrashSafe)
    /// they skip their own sync; the steps of mutating pathways are synced either way, so
    /// the write-ahead rule for calls that change the world is unchanged.
    #[must_use]
    pub fn read_durability(mut self, durability: crate::store::ReadDurability) -> Self {
        self.read_durability = durability;
        self
    }

    /// Signs the database's log in every commit that appends events (docs/evidence.md):
    /// a checkpoint of the Merkle tree of every ledger event, signed with the key in
    /// `signing` and stored in the same transaction, so a step returns only once its events
    /// are covered by a signed checkpoint. The runtime refuses to take a step on a database
    /// whose stored events are not all covered by a checkpoint a trusted key signed, or
    /// that is behind or inconsistent with `signing`'s witness checkpoint
    /// ([`crate::store::log::LogError`]).
    ///
    /// Without this, a runtime refuses a database whose log is signed.
    #[must_use]
    pub fn signing(mut self, signing: crate::store::log::Signing) -> Self {
        self.signing = Some(signing);
        self
    }

    /// Opens the database and builds the runtime.
    pub fn open(self) -> Result<Runtime, StoreError> {
        let store = if crate::store::is_postgres_location(&self.path) {
            self.postgres()?
        } else {
            let mut backend = SqliteBackend::open(&self.path, self.busy_timeout)?;
            let sealer = self.signing.clone().map(|s| {
                Arc::new(crate::store::log::Sealer::new(
                    s,
                    crate::store::Backend::database_id(&backend),
                ))
            });
            backend.set_sealer(sealer)?;
            Store::sqlite(backend)
        };
        let database: Arc<str> = Arc::from(store.with(|b| b.database_id().to_owned()));
        let mut owner = Owner::current();
        let frozen = self.simulated.map(|(unverifiable, frozen)| {
            if unverifiable {
                owner.boot.clear();
                owner.pidns.clear();
            }
            frozen
        });
        Ok(Runtime {
            store,
            read_durability: self.read_durability,
            database,
            path: self.path,
            clock: self.clock,
            approval_clock: self.approval_clock,
            ids: self.ids,
            owner,
            frozen,
            lease_ms: i64::try_from(self.lease.as_millis())
                .unwrap_or(i64::MAX)
                .max(1),
            hook: self.hook,
            bounds: self.bounds,
            in_flight: Mutex::new(HashSet::new()),
            heartbeat: Mutex::new(None),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{IdSource, RandomIds};

    #[test]
    fn ids_sort_by_creation_time_and_keep_their_prefix() {
        let ids = RandomIds::default();
        let first = ids.next_id("pw");
        std::thread::sleep(std::time::Duration::from_millis(3));
        let later: Vec<String> = (0..100).map(|_| ids.next_id("pw")).collect();
        let shape = |id: &str| {
            id.strip_prefix("pw_")
                .is_some_and(|rest| rest.len() == 24 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
        };
        assert!(shape(&first), "{first}");
        for id in &later {
            assert!(shape(id), "{id}");
            assert!(*id > first, "{id} sorts before the earlier {first}");
        }
        let mut unique = later.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), later.len(), "ids repeat");
        let at = ids.next_id("at");
        assert!(at.starts_with("at_"), "{at}");
        // The time prefix is the clock's ms.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let prefix = u128::from_str_radix(&at[3..15], 16).unwrap();
        assert!(
            prefix <= now_ms && now_ms - prefix < 60_000,
            "{at} vs {now_ms}"
        );
    }
}
