//! Checkpoints off the path of the steps. SQLite's own automatic checkpoint runs inside the
//! commit that takes the write-ahead log past 1000 pages: that step's caller waits while
//! every page of the log is copied into the database and both files are synced (on a real
//! disk, several milliseconds every dozen calls or so). Here the commit only wakes a
//! thread of the store's own, which checkpoints over its own connection (`PASSIVE`: it
//! never holds up a writer) while the steps go on.
//!
//! Nothing about a step's durability changes: a step is durable when its commit returns, as
//! before; a checkpoint only moves committed pages from the log into the database file. If
//! the thread cannot be started, or the log keeps growing (readers holding old snapshots, a
//! stalled thread), the commit checkpoints itself, as SQLite would have.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::wal::CheckpointMode;

/// Log pages (32 MiB) after which a checkpoint is asked for. SQLite's default is 1000; a
/// step rewrites the same few dozen pages of the tables' and indexes' right edges in every
/// commit, and a checkpoint copies each distinct page once, so a longer log copies and syncs
/// less per step: a profile of `rpr gate` serving reads had the checkpoint thread at 20% of
/// its CPU with 1000 (docs/storage.md, "Checkpoints off the steps' path").
pub(crate) const PAGES: i32 = 8000;

/// Log pages after which the committing step checkpoints itself: the thread is not keeping up.
const INLINE_PAGES: i32 = 2 * PAGES;

/// Log pages a commit must add, past the size at which the thread was last woken, before
/// it is woken again (while the log stays past [`PAGES`]). Each checkpoint syncs the log
/// and the database; woken by every commit, the thread checkpointed (and synced twice)
/// about once a commit, since a checkpoint that ends while a step is being written cannot
/// let the log start over, and that is most of them (docs/storage.md).
const STEP: i32 = 512;

/// The store's checkpoint thread, started on the first checkpoint asked for.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    path: PathBuf,
    busy_timeout: Duration,
    running: Mutex<Running>,
    /// The log's size (pages) when the thread was last woken; 0 once the log is below
    /// [`PAGES`] again (it started over).
    woken_at: AtomicI32,
}

#[derive(Debug, Default)]
enum Running {
    #[default]
    NotStarted,
    Started {
        wake: SyncSender<()>,
        thread: JoinHandle<()>,
    },
    /// The thread could not be started or its connection opened, or the store is closing:
    /// commits checkpoint themselves.
    Off,
}

impl Checkpointer {
    pub(crate) fn new(path: &Path, busy_timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            path: path.to_owned(),
            busy_timeout,
            running: Mutex::new(Running::NotStarted),
            woken_at: AtomicI32::new(0),
        })
    }

    /// After a commit that left `pages` pages in the log: whether the committing connection
    /// must checkpoint itself (the thread was woken otherwise, if a checkpoint is due: the
    /// log just passed [`PAGES`], or grew by [`STEP`] since the thread was last woken).
    pub(crate) fn after_commit(&self, pages: i32) -> bool {
        if pages < PAGES {
            self.woken_at.store(0, Ordering::Relaxed);
            return false;
        }
        if pages >= INLINE_PAGES {
            return true;
        }
        let woken_at = self.woken_at.load(Ordering::Relaxed);
        if woken_at != 0 && pages < woken_at.saturating_add(STEP) && self.is_running() {
            return false;
        }
        self.woken_at.store(pages, Ordering::Relaxed);
        !self.wake()
    }

    /// Whether the thread is running (a commit without one checkpoints itself).
    fn is_running(&self) -> bool {
        matches!(
            *self.running.lock().unwrap_or_else(PoisonError::into_inner),
            Running::Started { .. }
        )
    }

    /// Wakes the thread (starting it the first time); false when there is none to wake.
    fn wake(&self) -> bool {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*running, Running::NotStarted) {
            *running = self.start().unwrap_or(Running::Off);
        }
        match &*running {
            Running::Started { wake, .. } => match wake.try_send(()) {
                // Full: a wake-up is pending already; the thread will see this commit too.
                Ok(()) | Err(TrySendError::Full(())) => true,
                Err(TrySendError::Disconnected(())) => false,
            },
            Running::NotStarted | Running::Off => false,
        }
    }

    fn start(&self) -> Option<Running> {
        let conn = super::open_side_connection(&self.path, self.busy_timeout).ok()?;
        // The checkpoint syncs the log before it copies, and the database after.
        conn.pragma_update(None, "synchronous", "FULL").ok()?;
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("rpr-checkpoint".into())
            .spawn(move || run(&conn, &woken))
            .ok()?;
        Some(Running::Started { wake, thread })
    }

    /// Stops the thread and waits for a checkpoint it is in: called before the store's
    /// own connection closes, so that connection closes last, as it did before.
    pub(crate) fn stop(&self) {
        let running = std::mem::replace(
            &mut *self.running.lock().unwrap_or_else(PoisonError::into_inner),
            Running::Off,
        );
        if let Running::Started { wake, thread } = running {
            drop(wake);
            let _ = thread.join();
        }
    }
}

fn run(conn: &Connection, woken: &mpsc::Receiver<()>) {
    while woken.recv().is_ok() {
        // A checkpoint that cannot finish now (a reader on an old snapshot) is taken up again
        // at the next wake-up; its error changes nothing that was committed.
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    }
}

/// Hands the checkpoints of `conn` (the store's step connection) to `checkpointer`.
pub(crate) fn install(
    conn: &mut Connection,
    checkpointer: &Arc<Checkpointer>,
) -> Result<(), rusqlite::Error> {
    let checkpointer = Arc::clone(checkpointer);
    conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
        if checkpointer.after_commit(pages) {
            // What SQLite's automatic checkpoint does; its error would fail the statement
            // whose commit already happened, so it is not returned.
            let _ = wal.checkpoint_v2(CheckpointMode::PASSIVE);
        }
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threads_named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task").map_or(0, |tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|comm| comm.trim() == name)
                })
                .count()
        })
    }

    fn pages_in_database(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len() / 4096)
    }

    /// A log past [`PAGES`] pages is checkpointed by the store's thread, not inside the
    /// commit that took it there: the commit only wakes the thread, and the pages reach the
    /// database file once the thread has run. Past [`INLINE_PAGES`], or with no thread, the
    /// commit checkpoints itself.
    #[test]
    fn a_full_log_is_checkpointed_by_the_thread_not_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut conn = Connection::open(&path).unwrap();
        let _: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        let checkpointer = Checkpointer::new(&path, Duration::from_secs(5));
        install(&mut conn, &checkpointer).unwrap();
        conn.execute_batch("CREATE TABLE t (b BLOB)").unwrap();
        assert!(!checkpointer.after_commit(PAGES - 1), "not due yet");
        assert_eq!(threads_named("rpr-checkpoint"), 0, "started when due");

        // Commits of about 40 pages each until the log passes PAGES.
        for _ in 0..PAGES / 40 + 5 {
            conn.execute_batch("BEGIN").unwrap();
            for _ in 0..40 {
                conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])
                    .unwrap();
            }
            conn.execute_batch("COMMIT").unwrap();
        }
        // The thread names itself once it runs, which a loaded machine may delay.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while threads_named("rpr-checkpoint") == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(threads_named("rpr-checkpoint"), 1, "the thread runs");
        // The thread was woken by the commit that took the log past PAGES frames, and
        // copies at least that much of it. The database has fewer distinct pages than the
        // log has frames: each commit also rewrites the table's root, its right-most
        // interior page and the header page (about 3 frames per 40 rows), so the log's
        // first PAGES frames hold at least PAGES * 40 / 43 rows, one page each. On a
        // machine where the thread runs late it copies more; how much more is timing.
        let due = u64::try_from(PAGES * 40 / 43).unwrap();
        while pages_in_database(&path) < due && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            pages_in_database(&path) >= due,
            "the thread copied the log into the database ({} pages)",
            pages_in_database(&path)
        );
        assert!(
            checkpointer.after_commit(INLINE_PAGES),
            "a log the thread cannot keep down"
        );

        checkpointer.stop();
        assert_eq!(threads_named("rpr-checkpoint"), 0, "stopped and joined");
        assert!(
            checkpointer.after_commit(PAGES),
            "no thread: the commit checkpoints"
        );
    }

    /// A log that starts over once every frame is in the database writes into the file it
    /// has: the store's `journal_size_limit` keeps the log's working size, so the file is
    /// not cut to a few MiB and grown back a page at a time at every start over.
    #[test]
    fn a_log_that_starts_over_keeps_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let wal = dir.path().join("t.db-wal");
        let conn = super::super::open_side_connection(&path, Duration::from_secs(5)).unwrap();
        let _: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (b BLOB)")
            .unwrap();
        for _ in 0..PAGES / 40 {
            conn.execute_batch("BEGIN").unwrap();
            for _ in 0..40 {
                conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])
                    .unwrap();
            }
            conn.execute_batch("COMMIT").unwrap();
        }
        let full = std::fs::metadata(&wal).unwrap().len();
        assert!(
            full > 32 << 20,
            "the log reached its working size ({full} bytes)"
        );
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(busy, 0, "every frame copied");
        // The next write starts the log over, at its beginning.
        conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])
            .unwrap();
        let after = std::fs::metadata(&wal).unwrap().len();
        assert_eq!(
            after, full,
            "the log started over in the file it had ({after} of {full} bytes kept)"
        );
    }

    /// Past [`PAGES`], the thread is woken when the log passes it and then once per
    /// [`STEP`] pages more, not by every commit; a log that started over starts the count
    /// again; with the thread stopped, every commit past [`PAGES`] checkpoints itself.
    #[test]
    fn past_the_threshold_the_thread_is_woken_once_per_step_not_by_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        let _: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .unwrap();
        let checkpointer = Checkpointer::new(&path, Duration::from_secs(5));
        let woken_at = || checkpointer.woken_at.load(Ordering::Relaxed);
        assert!(!checkpointer.after_commit(PAGES));
        assert!(checkpointer.is_running(), "started when due");
        assert_eq!(woken_at(), PAGES, "woken");
        assert!(!checkpointer.after_commit(PAGES + 16));
        assert!(!checkpointer.after_commit(PAGES + STEP - 1));
        assert_eq!(woken_at(), PAGES, "not woken within a step");
        assert!(!checkpointer.after_commit(PAGES + STEP));
        assert_eq!(woken_at(), PAGES + STEP, "woken a step later");
        assert!(!checkpointer.after_commit(40));
        assert_eq!(woken_at(), 0, "the log started over");
        assert!(!checkpointer.after_commit(PAGES + 3));
        assert_eq!(woken_at(), PAGES + 3, "woken again as soon as it is due");
        checkpointer.stop();
        assert!(
            checkpointer.after_commit(PAGES + 4),
            "no thread: the commit checkpoints, within a step too"
        );
    }
}
