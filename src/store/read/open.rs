//! Opening a database for reading only (the guard that refuses every write), checking
//! that it is an rpr database of a schema this build reads, and read snapshots.

use std::path::Path;

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, OpenFlags};

#[cfg(feature = "postgres")]
use super::Backing;
use super::ReadStore;
use super::sqlite::is_transient;
use crate::store::{OLDEST_READABLE_SCHEMA, StoreError};

fn deny_writes(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Function { function_name }
            if function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Authorization::Deny
        }
        // Reading a pragma (no value) is allowed; setting one is not.
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Pragma {
            pragma_value: None, ..
        }
        | AuthAction::Transaction { .. }
        | AuthAction::Savepoint { .. } => Authorization::Allow,
        _ => Authorization::Deny,
    }
}

/// The files (device and inode) this process holds open through a connection that maps
/// the WAL index read-only (`readonly_shm=1`), once per such connection. SQLite shares one
/// mapping of a file's `-shm` among all the connections of a process; when such a
/// connection made it, every later connection of the process gets it read-only too, and
/// cannot write ([`StoreError::ReadOnlyIndex`]).
static READ_ONLY_INDEXES: std::sync::Mutex<Vec<(u64, u64)>> = std::sync::Mutex::new(Vec::new());

fn file_key(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// One entry of [`READ_ONLY_INDEXES`], removed when dropped.
#[derive(Debug)]
pub(crate) struct ReadOnlyIndex((u64, u64));

impl ReadOnlyIndex {
    fn register(path: &Path) -> Option<Self> {
        let key = file_key(path)?;
        READ_ONLY_INDEXES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(key);
        Some(Self(key))
    }
}

impl Drop for ReadOnlyIndex {
    fn drop(&mut self) {
        let mut open = READ_ONLY_INDEXES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(i) = open.iter().position(|k| *k == self.0) {
            open.swap_remove(i);
        }
    }
}

/// Whether this process holds `path` open through a read-only opening that maps its WAL
/// index read-only.
pub(crate) fn read_only_index_open(path: &Path) -> bool {
    file_key(path).is_some_and(|key| {
        READ_ONLY_INDEXES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&key)
    })
}

impl ReadStore {
    /// How many times [`ReadStore::open_read_only`] tries to open a database.
    pub const OPEN_ATTEMPTS: u32 = 6;

    /// Opens `path` for reading only, guarded so that no statement can write.
    ///
    /// Fails with [`StoreError::Missing`], [`StoreError::NotRprDatabase`] or
    /// [`StoreError::SchemaTooNew`] before anything else happens.
    ///
    /// An open that fails with `SQLITE_CANTOPEN` ("unable to open database file") or
    /// `SQLITE_READONLY_RECOVERY` is tried again, at most [`Self::OPEN_ATTEMPTS`] times in
    /// all with a doubling pause from 2 ms (62 ms of pauses at most). The first is what a
    /// reader sees when the last writer connection of a program that does not keep the WAL
    /// files closes and deletes the `-wal` and `-shm` at the moment of the open (rpr's own
    /// writers keep them); the second, when a writer that has just opened has not yet
    /// rebuilt the WAL index. See `docs/storage.md`, "The -wal and -shm files".
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        if crate::store::is_postgres_location(path) {
            return Self::open_postgres(path);
        }
        let mut pause = std::time::Duration::from_millis(2);
        let mut attempt = 1;
        loop {
            match Self::open_read_only_once(path, false) {
                Err(e) if attempt < Self::OPEN_ATTEMPTS && is_transient(&e) => {
                    std::thread::sleep(pause);
                    pause *= 2;
                    attempt += 1;
                }
                Err(e) if is_transient(&e) && on_read_only_media_without_wal(path) => {
                    return Self::open_read_only_once(path, true);
                }
                other => return other,
            }
        }
    }

    #[cfg(feature = "postgres")]
    fn open_postgres(location: &Path) -> Result<Self, StoreError> {
        let url = location.to_str().ok_or_else(|| {
            StoreError::Unsupported("a PostgreSQL location that is not UTF-8".into())
        })?;
        Self::postgres_in(url, None)
    }

    /// A read-only store on the PostgreSQL database at `url`, in `schema` when given.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres_in(url: &str, schema: Option<&str>) -> Result<Self, StoreError> {
        Ok(Self {
            backing: Backing::Pg(Box::new(crate::store::pg::PgReader::open(url, schema)?)),
        })
    }

    #[cfg(not(feature = "postgres"))]
    fn open_postgres(location: &Path) -> Result<Self, StoreError> {
        Err(crate::store::postgres_unsupported(location))
    }

    /// One opening; `immutable`: as a file nothing can change (SQLite's `immutable=1`: no
    /// locks, no WAL index), for a database on read-only media that has no `-wal`
    /// ([`on_read_only_media_without_wal`]).
    fn open_read_only_once(path: &Path, immutable: bool) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing(path.display().to_string()));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        // With an existing WAL index, `readonly_shm=1` keeps SQLite from writing even the
        // read-mark slots of the -shm file, so every file stays byte-identical. Without one
        // (a database closed by a program that does not keep the WAL files) SQLite cannot
        // open that way, and a plain read-only open is used.
        let (mut conn, index) = if immutable {
            (
                Connection::open_with_flags(
                    sqlite_uri(path, "mode=ro&immutable=1"),
                    flags | OpenFlags::SQLITE_OPEN_URI,
                )?,
                None,
            )
        } else if Path::new(&shm).is_file() {
            match Connection::open_with_flags(
                sqlite_uri(path, "mode=ro&readonly_shm=1"),
                flags | OpenFlags::SQLITE_OPEN_URI,
            ) {
                Ok(conn) => (conn, ReadOnlyIndex::register(path)),
                Err(_) => (Connection::open_with_flags(path, flags)?, None),
            }
        } else {
            (Connection::open_with_flags(path, flags)?, None)
        };
        conn.pragma_update(None, "query_only", true)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.authorizer(Some(deny_writes))?;
        let store = Self {
            backing: super::Backing::Sqlite(super::sqlite::SqliteReads {
                conn,
                _index: index,
            }),
        };
        let name = path.display().to_string();
        let version = store
            .snapshot(|s| s.sqlite().check_schema(&name))
            .map_err(|e| match e {
                StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::NotADatabase =>
                {
                    StoreError::NotRprDatabase(name.clone())
                }
                other => other,
            })?;
        // Schemas 1 and 2 lack columns and tables every read of attempts or pins asks for:
        // said once, here, instead of a "no such column" from whichever read comes first.
        // A read-only opening never migrates.
        if version < OLDEST_READABLE_SCHEMA {
            return Err(StoreError::SchemaTooOld {
                database: name,
                found: version,
                oldest: OLDEST_READABLE_SCHEMA,
            });
        }
        Ok(store)
    }

    /// Runs `f` so that every read it makes sees one snapshot of the database.
    ///
    /// Opens a read transaction (`SAVEPOINT`, which outside a transaction starts a
    /// deferred one) and takes the snapshot at once (a first read, tried again like
    /// [`ReadStore::open_read_only`] while SQLite answers `SQLITE_READONLY_RECOVERY`),
    /// runs `f`, and ends the
    /// transaction: released when `f` returns `Ok`, rolled back when it returns `Err`
    /// or panics. Writers that commit meanwhile are not seen by `f` (WAL readers do not
    /// block writers, and writers do not block readers).
    ///
    /// Works on the guarded read-only connection (the guard allows transactions and
    /// savepoints). Nesting is supported: a `snapshot` inside another (or inside any
    /// open transaction on this connection) is a savepoint of the enclosing
    /// transaction, and sees the enclosing snapshot.
    pub fn snapshot<T, E>(&self, f: impl FnOnce(&Self) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut f = Some(f);
        let mut out = None;
        let ended = self.source().snapshot(&mut || {
            let result = f.take().map(|f| f(self));
            let kept = matches!(result, Some(Ok(_)));
            out = result;
            kept
        });
        match (out, ended) {
            (Some(Err(e)), _) => Err(e),
            (_, Err(e)) => Err(E::from(e)),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (None, Ok(())) => Err(E::from(StoreError::Unsupported(
                "a read snapshot ended without running its reads".into(),
            ))),
        }
    }

    /// Whether `sql` would be refused by the read-only guard.
    ///
    /// On SQLite it is run inside a savepoint that is then rolled back: refused when the
    /// guard (the authorizer, `query_only`, the read-only opening) stops it from being
    /// prepared or run; a statement that cannot run inside a transaction (`VACUUM`, a change
    /// of journal mode) is refused there too, as it cannot be tried without its effect.
    /// Call it outside [`ReadStore::snapshot`]. On PostgreSQL it is run, as one
    /// statement (a string of several is refused), inside a savepoint of the session's
    /// read-only transaction that is then rolled back: refused when it fails there (a write
    /// fails before it changes anything; through a role without write privileges it fails
    /// on those too). A statement that writes nothing passes even if it takes a lock
    /// (`LOCK TABLE … IN EXCLUSIVE MODE` on a role that may take it), which the rollback
    /// gives back at once. One that ends the transaction (`COMMIT`, `ROLLBACK`) is refused,
    /// and ends the [`ReadStore::snapshot`] it was called in, if any: that snapshot's later
    /// reads fail (`StoreError::Unsupported`) instead of reading outside it.
    #[must_use]
    pub fn would_refuse(&self, sql: &str) -> bool {
        self.source().would_refuse(sql)
    }
}

/// Whether `path` is a database on media this process cannot write (its directory is on a
/// read-only mount, say) that has no write-ahead log with anything in it. SQLite cannot
/// read a WAL-mode database there without a `-shm`, which it cannot create; but with no
/// `-wal` (or an empty one, as rpr's writers leave it) every committed transaction is in
/// the database file itself, and nothing on this path can write it, so reading it as
/// immutable reads all of it. (A writer reaching the same file through another, writable
/// mount would make a `-wal` there too; this is checked once, at the opening.)
fn on_read_only_media_without_wal(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_empty = std::fs::metadata(&wal).map_or(true, |m| m.len() == 0);
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir_read_only = matches!(
        nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK),
        Err(nix::errno::Errno::EROFS | nix::errno::Errno::EACCES | nix::errno::Errno::EPERM)
    );
    wal_empty && !Path::new(&shm).exists() && dir_read_only
}

/// A `file:` URI for `path` with `query`, percent-encoding everything but unreserved characters and `/`.
fn sqlite_uri(path: &Path, query: &str) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}
