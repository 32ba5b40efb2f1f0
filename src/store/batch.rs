//! Group commit: the steps of concurrent callers committed together, one durable commit for
//! the batch.
//!
//! A caller queues its step and waits. One caller at a time is the *leader*: it takes the
//! runtime's connection, then everything queued so far (its own step included), and commits
//! it in one `BEGIN IMMEDIATE` transaction, each step in its own savepoint
//! ([`super::sqlite::Unit`]), then `COMMIT`; then it hands every step of the batch its result
//! and wakes the waiters. A waiter whose step was carried returns its result without touching
//! the connection; one whose step was not (it queued after the batch was taken) becomes the
//! next leader. So the batch is exactly the steps that queued while the previous batch was
//! being written and synced: no timer, no batch-size knob, no added latency for a caller that
//! is alone (a batch of one is the old single-step commit).
//!
//! The leader takes the queue only once it holds the connection. A thread that already holds
//! the connection (through [`crate::Runtime::reader`]) while another thread leads commits what
//! is queued itself, so the leader, blocked on the connection, cannot wait for it forever.
//!
//! A caller gets `Ok` only after the `COMMIT` that made its step durable has returned: the
//! write-ahead rule is unchanged (a dispatch's attempt record is durable before any byte is
//! sent). One step's refusal (a compare-and-set conflict, say) is rolled back to its savepoint
//! and leaves the other steps of the batch in place. If the batch itself fails (the write
//! lock stays busy past the timeout, the disk is full, the commit fails), no step of it is
//! applied and every caller in it gets that failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex, ReentrantMutex};

use super::StoreError;
use super::sqlite::SqliteBackend;

/// Durable commits a runtime made, and the steps they carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteStats {
    /// Steps handed to the group commit (durable, refused, failed or still waiting).
    pub submitted: u64,
    /// Steps made durable.
    pub steps: u64,
    /// Durable commits that made them so (each one sync of the write-ahead log).
    pub commits: u64,
    /// Commits without a sync of their own: batches made only of steps of read-only
    /// pathways under [`ReadDurability::ProcessCrashSafe`]. Their steps count in `steps`.
    pub unsynced_commits: u64,
    /// Steps whose pathway check used the replay the pathway's previous step in this runtime
    /// left, instead of reading and replaying its events (`store::replays`).
    pub reused_replays: u64,
}

/// How the steps of *read-only* pathways are committed ([`crate::RuntimeBuilder::read_durability`]).
/// Steps of every other pathway are always synced before their step returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadDurability {
    /// Synced like every other step (the default).
    #[default]
    Synced,
    /// Committed without a sync of their own (SQLite `synchronous=NORMAL` for a batch made
    /// only of such steps). A committed step survives a crash or kill of the process: its
    /// write-ahead-log frames are in the operating system's cache. It becomes durable
    /// against a crash of the machine (power loss, kernel panic) with the next synced
    /// commit or checkpoint; such a crash can lose the last read-only steps before it, as a
    /// tail of the log, never a step of a mutating pathway and never a step before a synced
    /// commit. A read changes nothing, so losing its record cannot lead to a second effect.
    ProcessCrashSafe,
}

/// A queued step, type-erased: run it in the open batch, or fail it with the batch.
trait Pending: Send {
    /// Whether the batch that carries this step must be synced.
    fn synced(&self) -> bool;
    fn run(&mut self, backend: &SqliteBackend);
    fn succeeded(&self) -> bool;
    /// Whether the step wrote something to commit: it succeeded, or it was refused and
    /// recorded its refusal ([`StoreError::Fenced`]).
    fn wrote(&self) -> bool;
    /// The batch did not commit: the step's result is `error()`, unless it already failed
    /// without writing.
    fn fail(&mut self, error: &dyn Fn() -> StoreError);
    /// The batch is over (committed or failed): its caller may now see the result.
    fn publish(&mut self);
    /// The batch was abandoned by a panic: a step left without a result gets an error.
    fn abandon(&mut self);
}

struct Slot<T, F> {
    synced: bool,
    op: Option<F>,
    /// The step's result while its batch is still open (not yet durable).
    staged: Option<Result<T, StoreError>>,
    /// The result its caller may take: set only once the batch is over.
    result: Option<Result<T, StoreError>>,
}

impl<T, F> Pending for Slot<T, F>
where
    T: Send,
    F: FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send,
{
    fn synced(&self) -> bool {
        self.synced
    }

    fn run(&mut self, backend: &SqliteBackend) {
        if let Some(op) = self.op.take() {
            self.staged = Some(op(backend));
        }
    }

    fn succeeded(&self) -> bool {
        matches!(self.staged, Some(Ok(_)))
    }

    fn wrote(&self) -> bool {
        matches!(self.staged, Some(Ok(_) | Err(StoreError::Fenced { .. })))
    }

    fn fail(&mut self, error: &dyn Fn() -> StoreError) {
        self.op = None;
        // A refusal that wrote nothing stays what it was; one that recorded itself
        // (`Fenced`) was not committed after all.
        if !matches!(self.staged, Some(Err(_))) || self.wrote() {
            self.staged = Some(Err(error()));
        }
    }

    fn publish(&mut self) {
        if self.result.is_none() {
            self.result = self.staged.take();
        }
    }

    fn abandon(&mut self) {
        self.op = None;
        if self.result.is_none() {
            self.result = Some(Err(StoreError::Corrupt(
                "internal: the batch that carried this step was abandoned by a panic; nothing of it was committed"
                    .into(),
            )));
        }
    }
}

/// The same SQLite failure again, for each caller of a failed batch.
/// `error` again, for each step of a batch that failed with it.
fn again(error: &StoreError) -> StoreError {
    match error {
        StoreError::Sqlite(e) => copy_error(e),
        StoreError::Log(e) => StoreError::Log(e.clone()),
        other => StoreError::Corrupt(other.to_string()),
    }
}

fn copy_error(error: &rusqlite::Error) -> StoreError {
    match error {
        rusqlite::Error::SqliteFailure(code, message) => {
            rusqlite::Error::SqliteFailure(*code, message.clone()).into()
        }
        other => StoreError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        )),
    }
}

type Queued = Arc<Mutex<dyn Pending>>;

/// The steps waiting for a batch, and whether a leader is writing one.
#[derive(Default)]
struct Queue {
    waiting: Vec<Queued>,
    leading: bool,
}

/// The queue of steps waiting for a batch, and the counts of what was committed.
#[derive(Default)]
pub(crate) struct Batcher {
    queue: Mutex<Queue>,
    /// Signalled (under `queue`) when a batch is done.
    done: Condvar,
    steps: AtomicU64,
    commits: AtomicU64,
    unsynced_commits: AtomicU64,
    queued: AtomicU64,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The steps of one batch: any still without a result when it is dropped (a step panicked
/// and unwound the batch) get an error, so their callers do not wait forever.
struct Carried(Vec<Queued>);

impl Drop for Carried {
    fn drop(&mut self) {
        for p in &self.0 {
            p.lock().abandon();
        }
    }
}

/// Leadership of one batch: when dropped (after the batch, or as a panic unwinds), the
/// next caller may lead, and the waiters look at their results.
struct Lead<'a>(&'a Batcher);

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.queue.lock();
        queue.leading = false;
        self.0.done.notify_all();
        drop(queue);
    }
}

/// Rolls back a batch that did not commit (a panic in a step included), so the connection
/// is usable again.
struct Abandon<'a> {
    backend: &'a SqliteBackend,
    armed: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.backend.abandon_batch();
        }
    }
}

impl Batcher {
    /// Runs `op` (one step's writes) in a batch and returns once it is committed (synced,
    /// unless `synced` is false and no step of the batch needs a sync), or failed.
    pub(crate) fn write<T, F>(
        &self,
        connection: &ReentrantMutex<SqliteBackend>,
        synced: bool,
        op: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send + 'static,
    {
        let slot = Arc::new(Mutex::new(Slot {
            synced,
            op: Some(op),
            staged: None,
            result: None,
        }));
        self.queued.fetch_add(1, Ordering::Relaxed);
        let mut queue = self.queue.lock();
        queue.waiting.push(Arc::clone(&slot) as Queued);
        loop {
            // A result is published only once its batch is over (durable, or failed as a
            // whole), before the leader takes `queue` to wake the waiters.
            if let Some(result) = slot.lock().result.take() {
                return result;
            }
            if !queue.leading {
                queue.leading = true;
                drop(queue);
                // Clears `leading` and wakes the waiters even if a step panics.
                let _lead = Lead(self);
                let backend = connection.lock();
                let batch = Carried(std::mem::take(&mut self.queue.lock().waiting));
                if !batch.0.is_empty() {
                    self.commit(&backend, &batch.0);
                }
            } else if connection.is_owned_by_current_thread() {
                // This thread holds the connection (a `Reader`), so the leader is, or will
                // be, waiting for it: commit what is queued here instead.
                let batch = Carried(std::mem::take(&mut queue.waiting));
                drop(queue);
                {
                    let backend = connection.lock();
                    self.commit(&backend, &batch.0);
                }
                drop(batch);
                // Under `queue`, so that no waiter can miss it between its check and its wait.
                let _queue = self.queue.lock();
                self.done.notify_all();
            } else {
                self.done.wait(&mut queue);
                continue;
            }
            queue = self.queue.lock();
        }
    }

    /// Writes and commits `batch`, then publishes every step's result.
    fn commit(&self, backend: &SqliteBackend, batch: &[Queued]) {
        self.write_batch(backend, batch);
        for p in batch {
            p.lock().publish();
        }
    }

    /// Writes `batch` in one transaction and commits it; each step's result is staged.
    fn write_batch(&self, backend: &SqliteBackend, batch: &[Queued]) {
        // One step that needs a sync makes the whole batch synced.
        let synced = batch.iter().any(|p| p.lock().synced());
        if let Err(e) = backend
            .set_synced(synced)
            .and_then(|()| backend.begin_batch())
        {
            // The write lock stayed held past the busy timeout: name the holder once, while
            // it likely still holds it, and give every step of the batch that error.
            let holder = super::write_lock_holder(backend.path());
            let again = || match copy_error(&e) {
                StoreError::Busy { .. } => StoreError::Busy {
                    timeout: Some(backend.busy_timeout()),
                    holder: holder.clone(),
                },
                other => other,
            };
            for p in batch {
                p.lock().fail(&again);
            }
            return;
        }
        let mut abandon = Abandon {
            backend,
            armed: true,
        };
        // With a signing key: every stored event is covered by a trusted checkpoint before
        // this batch appends any (it holds the write lock from `BEGIN IMMEDIATE`).
        let covered = match backend.log_check() {
            Ok(covered) => covered,
            Err(e) => {
                drop(abandon);
                for p in batch {
                    p.lock().fail(&|| again(&e));
                }
                return;
            }
        };
        // A step alone in its batch runs without a savepoint; if it is refused, the batch
        // (its own transaction) rolls back instead of committing.
        let solo = batch.len() == 1;
        backend.set_solo(solo);
        for (i, p) in batch.iter().enumerate() {
            p.lock().run(backend);
            if !backend.in_batch() {
                // SQLite rolled the whole transaction back (a full disk, an I/O error):
                // the steps before this one are gone too, and the rest cannot run.
                let gone = rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                    Some(format!(
                        "the batch's transaction was rolled back by a failure in step {} of {}",
                        i + 1,
                        batch.len()
                    )),
                );
                for q in batch {
                    q.lock().fail(&|| copy_error(&gone));
                }
                return;
            }
        }
        if solo && !batch[0].lock().wrote() {
            // Refused: whatever it wrote before the refusal is rolled back with the batch.
            return;
        }
        // The batch's events signed into the log, in the same transaction.
        let sealed = match covered.as_ref().map(|c| backend.log_seal(c)).transpose() {
            Ok(sealed) => sealed.flatten(),
            Err(e) => {
                drop(abandon);
                for p in batch {
                    p.lock().fail(&|| again(&e));
                }
                return;
            }
        };
        match backend.commit_batch() {
            Ok(()) => {
                abandon.armed = false;
                if let Some(sealed) = sealed {
                    backend.log_committed(sealed);
                }
                let done = batch.iter().filter(|p| p.lock().succeeded()).count();
                self.steps
                    .fetch_add(u64::try_from(done).unwrap_or(u64::MAX), Ordering::Relaxed);
                if synced {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.unsynced_commits.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                backend.log_commit_failed();
                drop(abandon);
                for p in batch {
                    p.lock().fail(&|| copy_error(&e));
                }
            }
        }
    }

    /// What was committed so far.
    pub(crate) fn stats(&self) -> WriteStats {
        WriteStats {
            submitted: self.queued.load(Ordering::Relaxed),
            steps: self.steps.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            unsynced_commits: self.unsynced_commits.load(Ordering::Relaxed),
            reused_replays: 0,
        }
    }
}
