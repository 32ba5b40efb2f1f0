//! The SQLite backend: pragmas, migrations and the atomic step (a savepoint in a group commit).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::read::ReadStore;
use super::{
    MIGRATION_2_SQL, MIGRATION_3_SQL, MIGRATION_4_SQL, SCHEMA_SQL, SCHEMA_VERSION, StoreError,
};

mod checkpoint;
pub(crate) mod rows;
mod steps;

/// `journal_size_limit`: the most of its file a log keeps when it starts over (64 MiB, the
/// size at which a commit checkpoints itself, `checkpoint::INLINE_PAGES` pages of 4 KiB
/// with their frame headers). Above the log's working size (about 8000 to 8500 pages,
/// 33 to 35 MiB), so a log that starts over writes into the file it has, instead of
/// being cut to the limit and growing back a page at a time: with 4 MiB, a gate serving
/// reads spent 9% more CPU a read (docs/storage.md, "The log's file is reused"). Closing
/// the last connection still truncates the log to 0 bytes.
const WAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    SCHEMA_SQL,
    MIGRATION_2_SQL,
    MIGRATION_3_SQL,
    MIGRATION_4_SQL,
];

/// The database's clock, in ms since the Unix epoch: leases are judged by it, never by a
/// caller's (injected) clock.
pub(crate) const DB_NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// The SQLite implementation of [`Backend`](super::Backend) (the steps: `sqlite/steps.rs`,
/// the rules of `store::rules` over `sqlite/rows.rs`).
#[derive(Debug)]
pub(crate) struct SqliteBackend {
    /// Takes the log's checkpoints off the steps' path; stopped before `read` closes.
    checkpointer: std::sync::Arc<checkpoint::Checkpointer>,
    read: ReadStore,
    path: std::path::PathBuf,
    busy_timeout: Duration,
    database_id: String,
    /// Set by the group commit while a batch of one step runs (see [`Unit`]).
    solo: std::cell::Cell<bool>,
    /// Whether `synchronous` is `FULL` now (see [`SqliteBackend::set_synced`]).
    synced: std::cell::Cell<bool>,
    /// The replays steps leave for their pathways' next steps (`store::replays`).
    pub(super) replays: std::sync::Arc<super::replays::Replays>,
    /// Signs the log in every batch's commit, when the runtime has a signing key.
    sealer: Option<std::sync::Arc<super::log::Sealer>>,
    /// `PRAGMA data_version` at this connection's last full check of the log, while what
    /// that check proved still holds: the value changes whenever another connection commits,
    /// and this connection's own commits keep the sealer's knowledge in step with the
    /// database. `None` once a commit of this connection failed.
    log_checked_at: std::cell::Cell<Option<i64>>,
}

/// A new database identity: 16 bytes from the system's random source, in hex.
fn new_database_id() -> String {
    format!("db_{}", random_hex())
}

/// 16 bytes from the system's random source, as 32 hex digits (without a random device:
/// sha256 of the time, the process and the address of a stack value).
pub(crate) fn random_hex() -> String {
    use std::io::Read;
    let mut bytes = [0_u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        // No random device: the time, the process and the address of a stack value.
        let seed = format!(
            "{:?}:{}:{:p}",
            std::time::SystemTime::now(),
            std::process::id(),
            &bytes
        );
        return crate::canonical::sha256_hex_bytes(seed.as_bytes())[..32].to_owned();
    }
    let mut s = String::with_capacity(32);
    for b in bytes {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// One step's writes inside its batch's transaction (`BEGIN IMMEDIATE`, opened by the
/// group commit in `store::batch`): a savepoint, released by [`Unit::commit`] and rolled
/// back otherwise, so that one step's refusal leaves its neighbours in the batch intact.
pub(crate) struct Unit<'c> {
    conn: &'c Connection,
    released: bool,
}

impl<'c> Unit<'c> {
    fn begin(backend: &'c SqliteBackend) -> Result<Self, StoreError> {
        let conn = backend.conn();
        if conn.is_autocommit() {
            // A savepoint outside a transaction would begin a deferred one and commit it on
            // release: a write without the batch's `BEGIN IMMEDIATE`. Never do that.
            return Err(StoreError::Corrupt(
                "internal: a step ran outside its batch's transaction".into(),
            ));
        }
        // Inside the batch's transaction: a database moved to another store takes no step
        // (one primary-key read of `meta`, a page every step writes anyway).
        refuse_if_moved(conn)?;
        if backend.solo.get() {
            // Alone in its batch: the batch's transaction is the step's, and a refused step
            // makes the batch roll back instead of commit. No savepoint to pay for.
            return Ok(Self {
                conn,
                released: true,
            });
        }
        conn.prepare_cached("SAVEPOINT rpr_step")?.execute([])?;
        Ok(Self {
            conn,
            released: false,
        })
    }

    fn commit(mut self) -> Result<(), StoreError> {
        if !self.released {
            self.conn.prepare_cached("RELEASE rpr_step")?.execute([])?;
            self.released = true;
        }
        Ok(())
    }
}

impl std::ops::Deref for Unit<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Unit<'_> {
    fn drop(&mut self) {
        if !self.released {
            // Fails only if the whole transaction is already gone, which the batch notices.
            let _ = self
                .conn
                .execute_batch("ROLLBACK TO rpr_step; RELEASE rpr_step");
        }
    }
}

/// Refuses a database that holds something and is not rpr's, before anything is written to
/// it: switching it to WAL (or migrating it) would change a file the command then refuses.
/// Only reads; an empty file or a new one passes (it becomes an rpr database), and an rpr
/// database is checked in full by the migration.
fn refuse_foreign(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let objects: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| not_rpr(path, e))?;
    if objects == 0 {
        return Ok(());
    }
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| not_rpr(path, e))?;
    match version {
        Some(_) => Ok(()),
        None => Err(StoreError::NotRprDatabase(path.display().to_string())),
    }
}

/// A read that fails on a file another program wrote: not a database (`NotADatabase`), or
/// no rpr `meta` table (`no such table`, a plain SQL error); any other failure (busy, I/O)
/// is reported as itself.
fn not_rpr(path: &Path, e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::Unknown
            ) =>
        {
            StoreError::NotRprDatabase(path.display().to_string())
        }
        _ => StoreError::from(e),
    }
}

/// How many prepared statements the step connection keeps.
const STATEMENT_CACHE: usize = 64;

impl SqliteBackend {
    /// Opens (creating if needed) the database at `path`, with WAL and `synchronous=FULL`,
    /// keeping the `-wal` and `-shm` files when it closes ([`keep_wal_files`]), and migrates
    /// it to [`SCHEMA_VERSION`]. A database that holds anything but rpr's tables is refused
    /// ([`StoreError::NotRprDatabase`]) before anything is written to it.
    /// The replays this backend's steps leave (`store::replays`), to count their use.
    pub(crate) fn replays(&self) -> std::sync::Arc<super::replays::Replays> {
        std::sync::Arc::clone(&self.replays)
    }

    pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        Self::open_writable(path, busy_timeout).map_err(|e| match e {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::ReadOnly
                    && super::read::open::read_only_index_open(path) =>
            {
                StoreError::ReadOnlyIndex(path.display().to_string())
            }
            other => other,
        })
    }

    fn open_writable(path: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(busy_timeout)?;
        // Every statement of a step and of its row check stays prepared (rusqlite's
        // default keeps 16; a whole call uses about 20 distinct statements).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        if path.as_os_str() != ":memory:" {
            refuse_foreign(&conn, path)?;
        }
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") && path.as_os_str() != ":memory:" {
            return Err(StoreError::Corrupt(format!(
                "could not enable WAL (journal_mode is {mode})"
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        // A step's savepoint journal (and any sort or temporary index) in memory: with the
        // default, the journal of a step inside a group commit spilled to a temporary file,
        // about half of a call's write syscalls (docs/storage.md, "What one step writes").
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        if path.as_os_str() != ":memory:" {
            keep_wal_files(&conn)?;
            // With the WAL kept, this makes the last close truncate it to 0 bytes (instead of
            // leaving it at its largest size), and bounds what it keeps after a checkpoint.
            conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
        }
        let checkpointer = checkpoint::Checkpointer::new(path, busy_timeout);
        if path.as_os_str() != ":memory:" {
            checkpoint::install(&mut conn, &checkpointer)?;
        }
        let mut backend = Self {
            checkpointer,
            read: ReadStore::from_sqlite(conn),
            path: path.to_owned(),
            busy_timeout,
            database_id: String::new(),
            solo: std::cell::Cell::new(false),
            synced: std::cell::Cell::new(true),
            replays: std::sync::Arc::default(),
            sealer: None,
            log_checked_at: std::cell::Cell::new(None),
        };
        backend.migrate(&path.display().to_string())?;
        backend.database_id = backend
            .conn()
            .query_row(
                "SELECT value FROM meta WHERE key = 'database_id'",
                [],
                |r| r.get(0),
            )
            .optional()?
            .ok_or_else(|| StoreError::Corrupt("meta has no database_id".into()))?;
        // A moved database is not opened for steps (reading it is `ReadStore`'s).
        refuse_if_moved(backend.conn())?;
        Ok(backend)
    }

    fn conn(&self) -> &Connection {
        self.read.conn()
    }

    /// Signs the log with `sealer` from now on; without one, refuses a database whose log
    /// is signed (its steps would leave events no checkpoint covers).
    pub(crate) fn set_sealer(
        &mut self,
        sealer: Option<std::sync::Arc<super::log::Sealer>>,
    ) -> Result<(), StoreError> {
        use super::log::LogRows;
        if sealer.is_none()
            && let (Some(text), _, _) =
                super::log::SqliteLog(self.conn()).checkpoint_and_bounds()?
        {
            let size = super::log::stored_size(&text);
            return Err(super::log::LogError::SigningKeyNeeded { size }.into());
        }
        self.sealer = sealer;
        Ok(())
    }

    /// In a batch, holding the write lock: the log is covered (`None` without a signing key).
    ///
    /// The full check is one statement; it is skipped when `PRAGMA data_version` proves that
    /// no other connection committed since this connection's last full check: the database
    /// then holds what that check found, extended by this connection's own commits, which the
    /// sealer adopted as they committed.
    pub(crate) fn log_check(&self) -> Result<Option<super::log::Covered>, StoreError> {
        let Some(sealer) = &self.sealer else {
            return Ok(None);
        };
        let version: i64 = self
            .conn()
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        if self.log_checked_at.get() == Some(version)
            && let Some(covered) = sealer.unchanged()
        {
            return Ok(Some(covered));
        }
        self.log_checked_at.set(None);
        let covered = sealer.check(&mut super::log::SqliteLog(self.conn()))?;
        self.log_checked_at.set(Some(version));
        Ok(Some(covered))
    }

    /// A commit of this connection failed: whether anything of it is in the database is not
    /// known, so the next batch checks the log in full.
    pub(crate) fn log_commit_failed(&self) {
        self.log_checked_at.set(None);
    }

    /// Just before the batch's `COMMIT`: the checkpoint of its events, signed and stored.
    pub(crate) fn log_seal(
        &self,
        covered: &super::log::Covered,
    ) -> Result<Option<super::log::Sealed>, StoreError> {
        match &self.sealer {
            // The batch holds the database's write lock from its check to its `COMMIT`: no
            // other writer can have appended, so every event past the covered tree is its.
            Some(s) => s.seal(&mut super::log::SqliteLog(self.conn()), covered, i64::MAX),
            None => Ok(None),
        }
    }

    /// The batch that sealed `sealed` committed.
    pub(crate) fn log_committed(&self, sealed: super::log::Sealed) {
        if let Some(s) = &self.sealer {
            s.committed(sealed);
        }
    }

    /// The read side, on this connection.
    pub(crate) fn reader(&self) -> &ReadStore {
        &self.read
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// How long a step waits for another connection's write lock.
    pub(crate) fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// Opens a batch's transaction: the write lock, waiting for other processes up to the
    /// busy timeout.
    /// Sets `synchronous` for the next batch: `FULL` (each commit syncs the write-ahead
    /// log), or `NORMAL` (it does not; see [`super::ReadDurability::ProcessCrashSafe`]).
    /// Set between transactions only.
    pub(crate) fn set_synced(&self, synced: bool) -> Result<(), rusqlite::Error> {
        if self.synced.get() != synced {
            let level = if synced { "FULL" } else { "NORMAL" };
            self.conn().pragma_update(None, "synchronous", level)?;
            self.synced.set(synced);
        }
        Ok(())
    }

    pub(crate) fn begin_batch(&self) -> Result<(), rusqlite::Error> {
        // Prepared once per connection, as every statement of a step (`execute_batch`
        // parses its text again on every call).
        self.conn()
            .prepare_cached("BEGIN IMMEDIATE")?
            .execute([])
            .map(drop)
    }

    /// Commits the batch durably (one sync under `synchronous=FULL`).
    pub(crate) fn commit_batch(&self) -> Result<(), rusqlite::Error> {
        self.conn().prepare_cached("COMMIT")?.execute([]).map(drop)
    }

    /// Whether the batch's transaction is still open (SQLite rolls a transaction back by
    /// itself after some errors, such as a full disk).
    pub(crate) fn in_batch(&self) -> bool {
        !self.conn().is_autocommit()
    }

    /// Whether the next steps run alone in their batch (no savepoints; see [`Unit`]).
    pub(crate) fn set_solo(&self, solo: bool) {
        self.solo.set(solo);
    }

    /// Rolls back whatever is left of a batch.
    pub(crate) fn abandon_batch(&self) {
        if self.in_batch() {
            let _ = self.conn().execute_batch("ROLLBACK");
        }
    }

    /// Brings the database to [`SCHEMA_VERSION`] in one `BEGIN IMMEDIATE` transaction. A new
    /// (empty) database gets every migration. An older one is first checked: its tables
    /// must be its recorded version's ([`StoreError::SchemaMismatch`] otherwise), and its
    /// ledger must verify ([`StoreError::MigrationRefused`] otherwise; nothing is written).
    /// Migrations 2 and 3 only add a column and a table (no row changes), and today's
    /// verifier reads that column, so the ledger is verified after them and before the
    /// ledger is rebuilt (migration 4), then again after it: the same events, the same head,
    /// no problem. Any failure rolls the whole transaction back.
    fn migrate(&self, name: &str) -> Result<(), StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(self.conn(), TransactionBehavior::Immediate)?;
        let objects: i64 = tx.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        if objects == 0 {
            Self::apply_migrations(&tx, 0, SCHEMA_VERSION)?;
            tx.commit()?;
            return Ok(());
        }
        drop(tx);
        let _ = self.read.sqlite().check_schema(name)?;
        let tx = rusqlite::Transaction::new_unchecked(self.conn(), TransactionBehavior::Immediate)?;
        let version: i64 = tx
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get::<_, String>(0),
            )?
            .parse()
            .map_err(|_| StoreError::NotRprDatabase(name.to_owned()))?;
        check_shape(&tx, name, version)?;
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        // The additive migrations, then the ledger as stored is verified.
        Self::apply_migrations(&tx, version, SCHEMA_VERSION - 1)?;
        let before = crate::store::verify(&self.read, None)?;
        if let Some(first) = before.problems.first() {
            return Err(StoreError::MigrationRefused {
                database: name.to_owned(),
                from: version,
                to: SCHEMA_VERSION,
                problems: before.problems.len(),
                first: crate::store::problem_text(first),
            });
        }
        Self::apply_migrations(&tx, SCHEMA_VERSION - 1, SCHEMA_VERSION)?;
        check_shape(&tx, name, SCHEMA_VERSION)?;
        let after = crate::store::verify(&self.read, None)?;
        if let Some(first) = after.problems.first() {
            return Err(StoreError::Corrupt(format!(
                "migration {version} -> {SCHEMA_VERSION} of {name} rolled back: the ledger verified before it and not after ({})",
                crate::store::problem_text(first)
            )));
        }
        if (after.events, &after.head) != (before.events, &before.head) {
            return Err(StoreError::Corrupt(format!(
                "migration {version} -> {SCHEMA_VERSION} of {name} rolled back: the ledger had {} events (head {:?}) before it and {} (head {:?}) after",
                before.events, before.head, after.events, after.head
            )));
        }
        tx.commit()?;
        Ok(())
    }

    /// Applies the migrations after `from` up to `to`, recording the version reached.
    fn apply_migrations(tx: &Connection, from: i64, to: i64) -> Result<(), StoreError> {
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            let target = i64::try_from(i).unwrap_or(i64::MAX) + 1;
            if target <= from || target > to {
                continue;
            }
            tx.execute_batch(sql)?;
            if target == 2 {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('database_id', ?1) ON CONFLICT (key) DO NOTHING",
                    params![new_database_id()],
                )?;
            }
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![target.to_string()],
            )?;
        }
        Ok(())
    }
}

/// Checks that the tables are those of schema `version` (by what each migration added or
/// removed: `attempts.carrier` from 2, `pins` from 3, no UNIQUE index on the ledger's
/// hashes from 4), so that a database whose recorded version and tables disagree is
/// refused with [`StoreError::SchemaMismatch`] before anything runs on it.
fn check_shape(conn: &Connection, name: &str, version: i64) -> Result<(), StoreError> {
    let has = |sql: &str| -> Result<bool, StoreError> {
        Ok(conn.query_row(sql, [], |r| r.get::<_, i64>(0))? > 0)
    };
    let ledger =
        has("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ledger'")?;
    let carrier = has("SELECT count(*) FROM pragma_table_info('attempts') WHERE name = 'carrier'")?;
    let pins = has("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'pins'")?;
    let unique = conn.query_row(
        "SELECT count(*) FROM pragma_index_list('ledger') WHERE \"unique\" = 1 AND origin = 'u'",
        [],
        |r| r.get::<_, i64>(0),
    )?;
    let stray = has("SELECT count(*) FROM sqlite_master WHERE name = 'ledger_new'")?;
    let mut wrong = Vec::new();
    if !ledger {
        wrong.push("no ledger table".to_owned());
    }
    if stray {
        wrong.push("a table ledger_new (a migration 4 stopped half-way)".to_owned());
    }
    if carrier != (version >= 2) {
        wrong.push(format!(
            "attempts {} a carrier column",
            if carrier { "has" } else { "has no" }
        ));
    }
    if pins != (version >= 3) {
        wrong.push(format!("{} pins table", if pins { "a" } else { "no" }));
    }
    let want_unique = if version >= 4 { 0 } else { 2 };
    if ledger && unique != want_unique {
        wrong.push(format!(
            "the ledger has {unique} UNIQUE column constraints (schema {version}: {want_unique})"
        ));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(StoreError::SchemaMismatch {
            database: name.to_owned(),
            recorded: version,
            detail: wrong.join("; "),
        })
    }
}

/// Refuses with [`StoreError::Moved`] when the database was moved: `meta.moved_to`, written
/// by `store::pg::copy_from_sqlite` (JSON with `to`, where, without a password; `at`, ms;
/// `finished`, whether the target's copy is known to be committed). Read inside the caller's
/// transaction, so a step and the mark cannot pass each other.
pub(crate) fn refuse_if_moved(conn: &Connection) -> Result<(), StoreError> {
    let moved: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'moved_to'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    moved.map_or(Ok(()), |value| Err(moved_error(&value)))
}

/// [`StoreError::Moved`] for the value of the `meta.moved_to` row.
pub(crate) fn moved_error(value: &str) -> StoreError {
    let marker = serde_json::from_str::<serde_json::Value>(value).ok();
    let to = marker
        .as_ref()
        .and_then(|m| m.get("to")?.as_str())
        .unwrap_or(value);
    let unfinished = marker.as_ref().and_then(|m| m.get("finished")?.as_bool()) == Some(false);
    StoreError::Moved {
        to: if unfinished {
            format!(
                "{to} (the copy is unfinished: run the same rpr copy-to-postgres again to finish it)"
            )
        } else {
            to.to_owned()
        },
    }
}

/// A second connection to the database at `path` for the runtime's own helpers (the lease
/// thread): the same busy timeout, and it keeps the WAL files like the main connection, so
/// that whichever closes last leaves them in place.
pub(crate) fn open_side_connection(
    path: &Path,
    busy_timeout: Duration,
) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(busy_timeout)?;
    // It writes (leases, the moved mark, checkpoints): no temporary file for its journals.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    keep_wal_files(&conn)?;
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
    Ok(conn)
}

/// A connection for reads only (`PRAGMA query_only`), with the step connection's busy
/// timeout and WAL settings: the runtime's callers' reads (`runtime/store.rs`).
pub(crate) fn open_read_connection(
    path: &Path,
    busy_timeout: Duration,
) -> Result<Connection, StoreError> {
    let conn = open_side_connection(path, busy_timeout)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// Renews the leases of `attempts` while `owner` holds them in flight, by the database's
/// clock (used by the runtime's lease thread over its own connection).
pub(crate) fn renew_leases(
    conn: &Connection,
    owner: &str,
    attempts: &[String],
    lease_ms: i64,
) -> Result<(), StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    {
        let mut stmt = tx.prepare_cached(&format!(
            "UPDATE attempts SET lease_until = {DB_NOW_MS} + ?1
             WHERE id = ?2 AND owner = ?3 AND status = 'in_flight'"
        ))?;
        for a in attempts {
            stmt.execute(params![lease_ms, a, owner])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Sets `SQLITE_FCNTL_PERSIST_WAL` on `conn`'s main database: when this connection is the
/// last one to close, SQLite still checkpoints, but leaves the `-wal` and `-shm` files in
/// place instead of deleting them. A reader opening at that moment then never finds them
/// half gone ("unable to open database file"), and a database closed by rpr can be
/// inspected without any file changing (`docs/storage.md`, "The -wal and -shm files").
#[expect(
    unsafe_code,
    reason = "rusqlite has no safe wrapper for sqlite3_file_control; this is the one call"
)]
fn keep_wal_files(conn: &Connection) -> Result<(), StoreError> {
    let mut on: std::ffi::c_int = 1;
    // SAFETY: `conn.handle()` is the live `sqlite3*` owned by `conn`, which outlives this
    // call and is not used concurrently (a `Connection` is not `Sync`); the database name
    // is a NUL-terminated static string; for SQLITE_FCNTL_PERSIST_WAL SQLite reads and
    // writes exactly one `int` through the pointer, which points to `on`, alive and
    // exclusively borrowed for the duration of the call.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_PERSIST_WAL,
            (&raw mut on).cast(),
        )
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rc),
            Some("could not keep the WAL files (SQLITE_FCNTL_PERSIST_WAL)".into()),
        )))
    }
}

impl Drop for SqliteBackend {
    /// The checkpoint thread ends first, so the step connection closes last and leaves the
    /// write-ahead log as it always did.
    fn drop(&mut self) {
        self.checkpointer.stop();
    }
}
