//! Who holds an in-flight attempt, and whether it is still alive: the owner identity a
//! runtime records on its attempts, the process-wide set of attempts in flight here, the
//! lease heartbeat, and the liveness rule recovery applies.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::process::{self};
use crate::store::{AttemptRecord, StoreError};

/// A source of time, in milliseconds since the Unix epoch. Inject one for deterministic tests.
///
use super::{DEFAULT_BUSY_TIMEOUT, Runtime};

/// The identity of the process (and runtime instance) that holds in-flight attempts.
///
/// A pid names one process only within one boot of one machine and one PID namespace, so
/// both are recorded with it (empty where they cannot be read, and in records written
/// before they were): without them, nothing about the process can be proven from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    pub(super) host: String,
    pub(super) pid: u32,
    pub(super) start: String,
    pub(super) nonce: String,
    pub(super) boot: String,
    pub(super) pidns: String,
}

/// What can be known, from this process, about the owner of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OwnerFate {
    /// Proven running: a process of this boot and PID namespace with the recorded pid and
    /// start time; or this process, with one of its runtimes dispatching the attempt (or
    /// an executor that panicked while dispatching it, whose write may live on).
    Alive,
    /// Proven gone: of this boot and PID namespace, and no process with its pid and start
    /// time runs; or this process, and none of its runtimes holds the attempt.
    Gone,
    /// Nothing about it can be proven from here: another host, boot or PID namespace, a
    /// platform without process start times, or a record without them. Only its lease
    /// speaks, and a lapsed lease is not death: it may still send.
    Unverifiable,
}

static NONCE: AtomicU64 = AtomicU64::new(0);

/// Every attempt this process is dispatching right now, by `(database, attempt, runtime)`
/// (the runtime's nonce, as recorded in the attempt's owner): an attempt owned by a runtime
/// of this process is in flight exactly while that runtime has it in this set. The runtime
/// is part of the key so that another runtime that drew the same attempt id (two separate
/// id sources on one database) cannot clear it.
pub(super) static IN_FLIGHT: Mutex<BTreeSet<(String, String, String)>> =
    Mutex::new(BTreeSet::new());

pub(super) fn in_flight_here(database: &str, attempt: &str, runtime: &str) -> bool {
    IN_FLIGHT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&(database.to_owned(), attempt.to_owned(), runtime.to_owned()))
}

/// The lease renewer: one thread per runtime (started at its first dispatch; on SQLite with
/// its own connection, on PostgreSQL on the runtime's pool, ahead of waiting steps), renewing the leases of this runtime's in-flight attempts every third of
/// the lease, by the database's clock, independent of any executor timeout.
#[derive(Debug)]
pub(super) struct Heartbeat {
    shared: Arc<HeartbeatShared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct HeartbeatShared {
    attempts: Mutex<BTreeSet<String>>,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Heartbeat {
    fn start(
        renewal: Renewal,
        owner: String,
        lease_ms: i64,
        frozen: Option<Arc<AtomicBool>>,
    ) -> Option<Self> {
        let shared = Arc::new(HeartbeatShared::default());
        let theirs = Arc::clone(&shared);
        let every =
            Duration::from_millis(u64::try_from(lease_ms / 3).unwrap_or(1).clamp(1, 60_000));
        let thread = std::thread::Builder::new()
            .name("rpr-lease".into())
            .spawn(move || {
                let mut conn: Option<Renewer> = None;
                let mut stop = theirs.stop.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    // Asked to stop before this thread first took the lock (a runtime
                    // dropped right after its first dispatch): waiting first would hold
                    // the drop for a whole period.
                    if *stop {
                        return;
                    }
                    let (guard, _) = theirs
                        .wake
                        .wait_timeout(stop, every)
                        .unwrap_or_else(PoisonError::into_inner);
                    stop = guard;
                    if *stop {
                        return;
                    }
                    if frozen.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
                        continue;
                    }
                    let attempts: Vec<String> = theirs
                        .attempts
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .iter()
                        .cloned()
                        .collect();
                    if attempts.is_empty() {
                        continue;
                    }
                    if conn.is_none() {
                        conn = renewal.connect();
                    }
                    if let Some(c) = &conn
                        && c.renew(&owner, &attempts, lease_ms).is_err()
                    {
                        // Reopen next time; the lease runs on meanwhile.
                        conn = None;
                    }
                }
            })
            .ok()?;
        Some(Self {
            shared,
            thread: Some(thread),
        })
    }

    fn set(&self, attempt: &str, on: bool) {
        let mut set = self
            .shared
            .attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if on {
            set.insert(attempt.to_owned());
        } else {
            set.remove(attempt);
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        *self
            .shared
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where the heartbeat renews leases: its own connection to the runtime's database.
#[derive(Debug)]
pub(super) enum Renewal {
    Sqlite(PathBuf),
    /// The runtime's own connections, shared: each renewal takes the next free one of the
    /// pool ahead of any waiting step (`PgBackend::renew_leases`).
    #[cfg(feature = "postgres")]
    Pg(Arc<crate::store::pg::PgBackend>),
}

/// The heartbeat's connection.
enum Renewer {
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Pg(Arc<crate::store::pg::PgBackend>),
}

impl Renewal {
    fn connect(&self) -> Option<Renewer> {
        match self {
            Self::Sqlite(path) => crate::store::open_side_connection(path, DEFAULT_BUSY_TIMEOUT)
                .ok()
                .map(Renewer::Sqlite),
            #[cfg(feature = "postgres")]
            Self::Pg(backend) => Some(Renewer::Pg(Arc::clone(backend))),
        }
    }
}

impl Renewer {
    /// Renews the leases `owner` still holds. On PostgreSQL, an attempt it no longer holds
    /// (taken over after a lapse) is simply not renewed: its late outcome is fenced.
    fn renew(&self, owner: &str, attempts: &[String], lease_ms: i64) -> Result<(), StoreError> {
        match self {
            Self::Sqlite(c) => crate::store::renew_leases(c, owner, attempts, lease_ms),
            #[cfg(feature = "postgres")]
            Self::Pg(b) => b
                .renew_leases(owner, attempts, lease_ms)
                .map(drop)
                .map_err(Into::into),
        }
    }
}

/// The recorded carrier of an attempt: the process (on `host`, in the boot and PID
/// namespace recorded beside it; empty in records written before they were) that may hold
/// its request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CarrierRecord {
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) pgid: u32,
    pub(crate) start: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) boot: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) pidns: String,
    /// The cgroup holding the carrier's whole process tree; absent in records stored
    /// without one, which then name only the process group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cgroup: Option<crate::executor::CarrierCgroup>,
}

impl CarrierRecord {
    /// Whether the carrier can be checked (and signalled) from `here`. Its cgroup, where
    /// one is recorded, is found by path and ids on the same host in the same boot, from
    /// any PID namespace, whether or not the server process's start time was read. Its
    /// pids otherwise: see [`Owner`].
    pub(super) fn checkable_from(&self, here: &Owner) -> bool {
        if self.cgroup.is_some() {
            return !self.boot.is_empty() && self.host == here.host && self.boot == here.boot;
        }
        Owner {
            host: self.host.clone(),
            pid: self.pid,
            start: self.start.clone(),
            nonce: String::new(),
            boot: self.boot.clone(),
            pidns: self.pidns.clone(),
        }
        .checkable_from(here)
    }
}

impl Owner {
    pub(super) fn current() -> Self {
        let pid = std::process::id();
        Self {
            host: process::hostname(),
            pid,
            start: process::process_start(pid).unwrap_or_default(),
            nonce: NONCE.fetch_add(1, Ordering::Relaxed).to_string(),
            boot: process::boot_id().unwrap_or_default(),
            pidns: process::pid_namespace().unwrap_or_default(),
        }
    }

    /// `host/pid/start/nonce/boot/pidns`; records written before the boot and namespace
    /// were recorded end at the nonce.
    pub(super) fn encode(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/{}",
            self.host, self.pid, self.start, self.nonce, self.boot, self.pidns
        )
    }

    pub(super) fn decode(s: &str) -> Option<Self> {
        Self::decode_placed(s).or_else(|| Self::decode_unplaced(s))
    }

    fn decode_placed(s: &str) -> Option<Self> {
        let mut it = s.rsplitn(6, '/');
        let pidns = it.next()?;
        let boot = it.next()?;
        let nonce = it.next()?;
        let start = it.next()?;
        let pid = it.next()?.parse().ok()?;
        let host = it.next()?;
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        let boot_like = boot.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
        (digits(pidns) && digits(nonce) && digits(start) && boot_like).then(|| Self {
            host: host.to_owned(),
            pid,
            start: start.to_owned(),
            nonce: nonce.to_owned(),
            boot: boot.to_owned(),
            pidns: pidns.to_owned(),
        })
    }

    fn decode_unplaced(s: &str) -> Option<Self> {
        let mut it = s.rsplitn(4, '/');
        let nonce = it.next()?.to_owned();
        let start = it.next()?.to_owned();
        let pid = it.next()?.parse().ok()?;
        let host = it.next()?.to_owned();
        Some(Self {
            host,
            pid,
            start,
            nonce,
            boot: String::new(),
            pidns: String::new(),
        })
    }

    /// Whether `self`'s pid and start time can be checked from the process `here`: the
    /// same host, boot and PID namespace, all known, on a platform that reads start times.
    fn checkable_from(&self, here: &Owner) -> bool {
        process::START_TIME_READABLE
            && !self.start.is_empty()
            && !self.boot.is_empty()
            && !self.pidns.is_empty()
            && self.host == here.host
            && self.boot == here.boot
            && self.pidns == here.pidns
            // Read again now: `/proc` may have been remounted for another namespace.
            && process::pid_namespace().as_deref() == Some(here.pidns.as_str())
    }
}

/// An attempt this runtime is dispatching: in flight here until dropped.
///
/// A panic that unwinds while the executor holds the request ([`Tracked::executing`]) is
/// not a crash: the process lives on, and so may a write the executor handed to another
/// thread. The attempt then stays in flight in this process (its lease renewed while the
/// runtime lives) until the process ends; only then can it be judged. A panic anywhere
/// else (rpr's own steps, before or after the executor) releases it like a crash would.
pub(crate) struct Tracked<'a> {
    rt: &'a Runtime,
    attempt: &'a str,
    in_executor: bool,
}

impl<'a> Tracked<'a> {
    pub(crate) fn new(rt: &'a Runtime, attempt: &'a str) -> Self {
        rt.track(attempt, true);
        Self {
            rt,
            attempt,
            in_executor: false,
        }
    }

    /// Runs `execute`, the executor holding the request meanwhile.
    pub(crate) fn executing<T>(&mut self, execute: impl FnOnce() -> T) -> T {
        self.in_executor = true;
        let out = execute();
        self.in_executor = false;
        out
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        if self.in_executor && std::thread::panicking() {
            self.rt.abandon(self.attempt);
        } else {
            self.rt.track(self.attempt, false);
        }
    }
}

impl Runtime {
    fn track(&self, attempt: &str, on: bool) {
        let key = (
            self.database.to_string(),
            attempt.to_owned(),
            self.owner.nonce.clone(),
        );
        {
            let mut global = IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
            if on {
                global.insert(key);
            } else {
                global.remove(&key);
            }
        }
        // The runtime's own set, locked on its own (the heartbeat thread keeps another).
        {
            let mut set = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if on {
                set.insert(attempt.to_owned());
            } else {
                set.remove(attempt);
            }
        }
        let mut heartbeat = self
            .heartbeat
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if heartbeat.is_none() && on && self.path.as_os_str() != ":memory:" {
            *heartbeat = Heartbeat::start(
                self.renewal(),
                self.owner_id(),
                self.lease_ms,
                self.frozen.clone(),
            );
        }
        if let Some(h) = heartbeat.as_ref() {
            h.set(attempt, on);
        }
    }

    /// An attempt whose executor panicked: no longer this runtime's to release when it is
    /// dropped, but still in flight in this process (and its lease still renewed while the
    /// runtime lives).
    fn abandon(&self, attempt: &str) {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(attempt);
    }

    fn renewal(&self) -> Renewal {
        self.store().renewal(&self.path)
    }

    /// Whether a thread of this very runtime is dispatching `attempt` now.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "used by the PostgreSQL takeover")
    )]
    pub(super) fn carries_here(&self, attempt: &AttemptRecord) -> bool {
        attempt.owner.as_deref() == Some(self.owner_id().as_str())
            && in_flight_here(&self.database, &attempt.id, &self.owner.nonce)
    }

    /// The liveness rule for an in-flight attempt's owner (docs/storage.md): what can be
    /// proven about it from this process, see [`OwnerFate`].
    pub(super) fn judge_owner(&self, owner: &str, attempt: &str) -> OwnerFate {
        let Some(owner) = Owner::decode(owner) else {
            return OwnerFate::Unverifiable;
        };
        if !owner.checkable_from(&self.owner) {
            return OwnerFate::Unverifiable;
        }
        if owner.pid == self.owner.pid && owner.start == self.owner.start {
            return if in_flight_here(&self.database, attempt, &owner.nonce) {
                OwnerFate::Alive
            } else {
                OwnerFate::Gone
            };
        }
        match process::recorded_process_alive(owner.pid, &owner.start) {
            Some(true) => OwnerFate::Alive,
            Some(false) => OwnerFate::Gone,
            // `/proc` hides or refuses it: only the lease speaks.
            None => OwnerFate::Unverifiable,
        }
    }

    /// Whether the owner of the in-flight `attempt` may be taken over, and how that is
    /// known: `Some(true)` proven gone, `Some(false)` not proven but its lease lapsed by the
    /// database's clock, `None` not to be taken over (alive, or its lease runs).
    pub(super) fn takeover(&self, attempt: &AttemptRecord) -> Result<Option<bool>, StoreError> {
        let Some(owner) = attempt.owner.as_deref() else {
            // Rows are checked against the chain first: an in-flight attempt always has its owner.
            return Err(StoreError::Corrupt(format!(
                "in-flight attempt {} has no readable owner",
                attempt.id
            )));
        };
        match self.judge_owner(owner, &attempt.id) {
            OwnerFate::Gone => Ok(Some(true)),
            OwnerFate::Alive => Ok(None),
            OwnerFate::Unverifiable => {
                // An in-flight attempt always has a lease: one without is a damaged row,
                // and proves no lapse (the takeover's own unit says the same).
                let lease_until = attempt.lease_until.ok_or_else(|| {
                    StoreError::Corrupt(format!("in-flight attempt {} has no lease", attempt.id))
                })?;
                let now = self.with_backend(|b| b.now_ms())?;
                Ok((lease_until < now).then_some(false))
            }
        }
    }
}
