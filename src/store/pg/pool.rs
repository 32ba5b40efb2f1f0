//! The connections of one [`super::PgBackend`]: a small pool, so that one runtime's steps on
//! different pathways run in the database at the same time.
//!
//! - **Size.** At most `size` connections (see [`DEFAULT_CONNECTIONS`]). The first is
//!   opened by `PgBackend`'s open, which migrates (or checks) the schema and reads the
//!   database identity there: a wrong URL, password or schema fails at open. The others are
//!   opened **lazily**, by a step that finds every open connection busy: a runtime driven
//!   by one thread (a CLI command, most tests) holds one connection, and only a runtime
//!   with steps in flight together grows towards the cap (the server's `max_connections`,
//!   100 by default, is shared by every host). Each new connection sets the same
//!   `search_path` and read-only setting, and must reach the same database identity
//!   ([`PgError::OtherDatabase`] otherwise: the location now leads elsewhere).
//! - **Per connection.** Its own prepared-statement cache; its
//!   `lock_timeout` is brought up to date each time it is taken (a generation number), so
//!   `set_lock_timeout` applies to every connection, present and future.
//! - **Taking and giving back.** A batch of steps (`batch.rs`), a read, a takeover or a
//!   renewal takes a connection for one transaction and gives it back at once (never across
//!   an executor call). When all are busy it waits, in arrival
//!   order (no barging: a step that arrives while others wait queues behind them), on a
//!   condition variable. A lease renewal queues ahead of every step (`urgent`): it gets the
//!   next connection given back, so steps in flight cannot starve the heartbeat; it waits at
//!   most for the shortest transaction under way, and a transaction waits for a lock at most
//!   `lock_timeout` per statement (docs/storage.md: keep the lease well above the busy
//!   timeout).
//! - **Broken connections.** A connection that is closed, or whose last error was at the
//!   connection level (no server error, a `08…` connection exception, a `57P…` shutdown, a
//!   `FATAL`), is dropped instead of given back; the next step that needs one opens a new one.

use std::collections::{HashMap, VecDeque};
use std::ops::{Deref, DerefMut};

use parking_lot::{Condvar, Mutex};
use postgres::{Client, Statement};

use super::{PgError, migrate};

/// How many connections a `PgBackend` (and so a PostgreSQL runtime) may open by default: 4.
/// Measured (docs/storage.md): a step is a handful of round trips and one commit, and the
/// global ledger head is locked from a step's append to its commit, so beyond a few
/// connections the steps mostly wait for each other on the head.
pub const DEFAULT_CONNECTIONS: usize = 4;

/// A connection, its prepared statements (prepared once, on first use, by their text) and
/// the `lock_timeout` generation it has applied.
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) statements: HashMap<&'static str, Statement>,
    /// The `lock_timeout` generation set on this connection.
    generation: u64,
    /// Its last error was at the connection level: drop it instead of giving it back.
    broken: bool,
    /// Which connection this is, unique in the process: a session snapshot that spans
    /// several takes checks it is still on the connection it began on.
    serial: u64,
}

/// The next [`Conn::serial`].
fn next_serial() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// What every connection of the pool is opened with.
struct Settings {
    url: String,
    schema: Option<String>,
    read_only: bool,
}

struct State {
    idle: Vec<Conn>,
    /// Connections that exist or are being opened: idle, taken, or opening.
    open: usize,
    /// `lock_timeout` and `idle_in_transaction_session_timeout` in ms (`None`: the
    /// server's default), and their generation.
    lock_timeout: Option<u128>,
    idle_in_transaction: Option<u128>,
    generation: u64,
    /// Tickets waiting for a connection, in arrival order; renewals before steps.
    urgent: VecDeque<u64>,
    queue: VecDeque<u64>,
    next_ticket: u64,
}

pub(super) struct Pool {
    settings: Settings,
    size: usize,
    /// The identity every connection must reach.
    database_id: String,
    state: Mutex<State>,
    freed: Condvar,
}

impl Conn {
    /// Opens one connection with the pool's session settings (no migration, no check).
    fn open(url: &str, schema: Option<&str>, read_only: bool) -> Result<Self, PgError> {
        let mut client = super::error::connect(url)?;
        if read_only {
            client.batch_execute("SET default_transaction_read_only = on")?;
        }
        if let Some(schema) = schema {
            client.batch_execute(&format!("SET search_path TO \"{schema}\""))?;
        }
        Ok(Self {
            client,
            statements: HashMap::new(),
            generation: 0,
            broken: false,
            serial: next_serial(),
        })
    }

    /// Notes `error`: a connection-level one breaks the connection.
    /// Which connection this is ([`Conn`]'s `serial`).
    pub(super) fn serial(&self) -> u64 {
        self.serial
    }

    pub(super) fn saw(&mut self, error: &PgError) {
        if let PgError::Postgres(e) = error {
            self.broken |= e.is_closed()
                || e.as_db_error().is_none_or(|d| {
                    let code = d.code().code();
                    code.starts_with("08")
                        || code.starts_with("57P")
                        || matches!(d.severity(), "FATAL" | "PANIC")
                });
        }
    }
}

impl Pool {
    /// The pool around the first connection, opened, migrated or checked by the caller
    /// (with `schema` created if it writes).
    pub(super) fn new(
        first: Client,
        url: &str,
        schema: Option<&str>,
        read_only: bool,
        database_id: String,
    ) -> Self {
        let first = Conn {
            client: first,
            statements: HashMap::new(),
            generation: 0,
            broken: false,
            serial: next_serial(),
        };
        Self {
            settings: Settings {
                url: url.to_owned(),
                schema: schema.map(str::to_owned),
                read_only,
            },
            size: DEFAULT_CONNECTIONS,
            database_id,
            state: Mutex::new(State {
                idle: vec![first],
                open: 1,
                lock_timeout: None,
                idle_in_transaction: None,
                generation: 0,
                urgent: VecDeque::new(),
                queue: VecDeque::new(),
                next_ticket: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// At most `size` connections (at least 1). Connections above it are closed as they are
    /// given back.
    pub(super) fn set_size(&mut self, size: usize) {
        self.size = size.max(1);
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// How many connections exist now (idle, taken or opening).
    #[cfg(test)]
    pub(super) fn open_count(&self) -> usize {
        self.state.lock().open
    }

    /// Sets `lock_timeout` (ms) for every connection: each applies it the next time it is
    /// taken.
    pub(super) fn set_lock_timeout(&self, ms: u128) {
        let mut state = self.state.lock();
        state.lock_timeout = Some(ms);
        state.generation += 1;
    }

    /// Sets `idle_in_transaction_session_timeout` (ms) for every connection, as
    /// [`Pool::set_lock_timeout`] does.
    pub(super) fn set_idle_in_transaction_timeout(&self, ms: u128) {
        let mut state = self.state.lock();
        state.idle_in_transaction = Some(ms);
        state.generation += 1;
    }

    /// A connection for one transaction: an idle one, else a new one while fewer than
    /// `size` exist, else the next one given back (waiting in arrival order; `urgent`
    /// waiters first).
    pub(super) fn take(&self, urgent: bool) -> Result<Taken<'_>, PgError> {
        let mut state = self.state.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        if urgent {
            state.urgent.push_back(ticket);
        } else {
            state.queue.push_back(ticket);
        }
        loop {
            let first = state.urgent.front().or(state.queue.front()).copied();
            if first == Some(ticket) && (!state.idle.is_empty() || state.open < self.size) {
                break;
            }
            self.freed.wait(&mut state);
        }
        if urgent {
            state.urgent.pop_front();
        } else {
            state.queue.pop_front();
        }
        // An idle connection the server closed meanwhile is not handed out.
        let before = state.idle.len();
        state.idle.retain(|c| !c.client.is_closed());
        state.open -= before - state.idle.len();
        let idle = state.idle.pop();
        if idle.is_none() {
            state.open += 1;
        }
        let (lock_timeout, idle_in_transaction, generation) = (
            state.lock_timeout,
            state.idle_in_transaction,
            state.generation,
        );
        drop(state);
        // The next in line may find another connection free.
        self.freed.notify_all();
        let conn = match idle {
            Some(conn) => conn,
            None => match self.open_one() {
                Ok(conn) => conn,
                Err(e) => {
                    self.state.lock().open -= 1;
                    self.freed.notify_all();
                    return Err(e);
                }
            },
        };
        let mut taken = Taken {
            pool: self,
            conn: Some(conn),
        };
        if taken.generation != generation {
            let sets: String = [
                lock_timeout.map(|ms| format!("SET lock_timeout = {ms};")),
                idle_in_transaction
                    .map(|ms| format!("SET idle_in_transaction_session_timeout = {ms};")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !sets.is_empty() {
                let set = taken.client.batch_execute(&sets).map_err(PgError::from);
                if let Err(e) = set {
                    taken.saw(&e);
                    return Err(e);
                }
            }
            taken.generation = generation;
        }
        Ok(taken)
    }

    /// A new connection of this pool: the settings, then the identity check.
    fn open_one(&self) -> Result<Conn, PgError> {
        let s = &self.settings;
        let mut conn = Conn::open(&s.url, s.schema.as_deref(), s.read_only)?;
        let found = migrate::check_version(&mut conn.client)?;
        if found != self.database_id {
            return Err(PgError::OtherDatabase {
                expected: self.database_id.clone(),
                found,
            });
        }
        Ok(conn)
    }

    fn give_back(&self, conn: Conn) {
        let mut state = self.state.lock();
        if conn.broken || conn.client.is_closed() || state.open > self.size {
            state.open -= 1;
            drop(state);
            drop(conn);
        } else {
            state.idle.push(conn);
            drop(state);
        }
        self.freed.notify_all();
    }
}

/// A connection taken from the pool; given back (or dropped, when broken) on drop.
pub(super) struct Taken<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl Deref for Taken<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn.as_ref().expect("taken until dropped")
    }
}

impl DerefMut for Taken<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("taken until dropped")
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn);
        }
    }
}
