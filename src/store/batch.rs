//! Group commit: the steps of concurrent callers committed together, one durable commit for
//! the batch.
//!
//! A caller queues its step, then takes the runtime's connection. If a batch that ran while
//! it waited already carried its step, it returns that step's result. Otherwise it commits
//! everything queued so far (its own step included) in one `BEGIN IMMEDIATE` transaction,
//! each step in its own savepoint ([`super::sqlite::Unit`]), then `COMMIT`, then hands every
//! queued caller its result. So the batch is exactly the steps that queued while the previous
//! batch was syncing: no timer, no batch-size knob, no added latency for a caller that is
//! alone (a batch of one is the old single-step commit plus one savepoint).
//!
//! A caller gets `Ok` only after the `COMMIT` that made its step durable has returned: the
//! write-ahead rule is unchanged (a dispatch's attempt record is durable before any byte is
//! sent). One step's refusal (a compare-and-set conflict, say) is rolled back to its savepoint
//! and leaves the other steps of the batch in place. If the batch itself fails (the write
//! lock stays busy past the timeout, the disk is full, the commit fails), no step of it is
//! applied and every caller in it gets that failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, ReentrantMutex};

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
}

/// A queued step, type-erased: run it in the open batch, or fail it with the batch.
trait Pending: Send {
    fn run(&mut self, backend: &SqliteBackend);
    fn succeeded(&self) -> bool;
    /// The batch did not commit: the step's result is `error()`, unless it already failed.
    fn fail(&mut self, error: &dyn Fn() -> StoreError);
}

struct Slot<T, F> {
    op: Option<F>,
    result: Option<Result<T, StoreError>>,
}

impl<T, F> Pending for Slot<T, F>
where
    T: Send,
    F: FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send,
{
    fn run(&mut self, backend: &SqliteBackend) {
        if let Some(op) = self.op.take() {
            self.result = Some(op(backend));
        }
    }

    fn succeeded(&self) -> bool {
        matches!(self.result, Some(Ok(_)))
    }

    fn fail(&mut self, error: &dyn Fn() -> StoreError) {
        self.op = None;
        if !matches!(self.result, Some(Err(_))) {
            self.result = Some(Err(error()));
        }
    }
}

/// The same SQLite failure again, for each caller of a failed batch.
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

/// The queue of steps waiting for a batch, and the counts of what was committed.
#[derive(Default)]
pub(crate) struct Batcher {
    queue: Mutex<Vec<Queued>>,
    steps: AtomicU64,
    commits: AtomicU64,
    queued: AtomicU64,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
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
    /// Runs `op` (one step's writes) in a batch and returns once it is durable, or failed.
    pub(crate) fn write<T, F>(
        &self,
        connection: &ReentrantMutex<SqliteBackend>,
        op: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send + 'static,
    {
        let slot = Arc::new(Mutex::new(Slot {
            op: Some(op),
            result: None,
        }));
        self.queue.lock().push(Arc::clone(&slot) as Queued);
        self.queued.fetch_add(1, Ordering::Relaxed);
        let backend = connection.lock();
        if let Some(result) = slot.lock().result.take() {
            return result;
        }
        let batch = std::mem::take(&mut *self.queue.lock());
        self.commit(&backend, &batch);
        slot.lock().result.take().unwrap_or_else(|| {
            Err(StoreError::Corrupt(
                "internal: the batch that carried this step was abandoned".into(),
            ))
        })
    }

    fn commit(&self, backend: &SqliteBackend, batch: &[Queued]) {
        if let Err(e) = backend.begin_batch() {
            // The write lock stayed held past the busy timeout: name the holder once, while
            // it likely still holds it, and give every step of the batch that error.
            let error = match copy_error(&e) {
                StoreError::Busy { .. } => StoreError::Busy {
                    timeout: Some(backend.busy_timeout()),
                    holder: super::write_lock_holder(backend.path()),
                },
                other => other,
            };
            let again = || match &error {
                StoreError::Busy { timeout, holder } => StoreError::Busy {
                    timeout: *timeout,
                    holder: holder.clone(),
                },
                _ => copy_error(&e),
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
        if solo && !batch[0].lock().succeeded() {
            // Refused: whatever it wrote before the refusal is rolled back with the batch.
            return;
        }
        match backend.commit_batch() {
            Ok(()) => {
                abandon.armed = false;
                let done = batch.iter().filter(|p| p.lock().succeeded()).count();
                self.steps
                    .fetch_add(u64::try_from(done).unwrap_or(u64::MAX), Ordering::Relaxed);
                self.commits.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
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
        }
    }
}
