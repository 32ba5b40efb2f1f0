//! [`PgError`]: what can go wrong in the PostgreSQL store, and the server's words for it.

use postgres::error::SqlState;

use super::StoreError;

/// Opens a client to `url`, naming where when it fails ([`PgError::Connect`]).
pub(super) fn connect(url: &str) -> Result<postgres::Client, PgError> {
    postgres::Client::connect(url, postgres::NoTls).map_err(|source| PgError::Connect {
        target: crate::store::shown_location(std::path::Path::new(url)),
        source,
    })
}

/// What can go wrong in the PostgreSQL store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// A refusal with the same meaning as on SQLite (conflict, illegal edge, unsettled
    /// attempt, unexplained rows, …).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server or the connection reported an error. Where it ended a step's `COMMIT`,
    /// whether the step was committed is unknown: a dispatch whose attempt record failed so
    /// must not send (if the record did commit, its lease lapses and the attempt is taken
    /// over as unknown, never resent).
    #[error("postgres: {}", error_text(.0))]
    Postgres(#[from] postgres::Error),
    /// No connection could be made to the server at `target` (the location, its password
    /// hidden): nothing was read or written.
    #[error(
        "cannot connect to PostgreSQL at {target}: {}",
        error_text(.source)
    )]
    Connect {
        /// Where (the location with its password replaced by `***`).
        target: String,
        /// The client's error.
        source: postgres::Error,
    },
    /// The attempt's lease has not lapsed by the database's clock: it is not taken over.
    #[error(
        "pathway {pathway}: attempt {attempt} is leased until {lease_until} ms and the database's clock says {database_now} ms; it is not taken over"
    )]
    LeaseHeld {
        /// The pathway.
        pathway: String,
        /// The attempt.
        attempt: String,
        /// Its lease, ms since the epoch by the database's clock.
        lease_until: i64,
        /// The database's `now()` when the takeover was refused.
        database_now: i64,
    },
    /// The attempt to take over is not the pathway's in-flight attempt.
    #[error(
        "pathway {pathway} in {state}: attempt {attempt} is not in flight ({status}); nothing to take over"
    )]
    NotInFlight {
        /// The pathway.
        pathway: String,
        /// Its stored state.
        state: String,
        /// The attempt.
        attempt: String,
        /// Its stored status (`none` when it does not exist).
        status: String,
    },
    /// A new connection of the pool reached a database with another identity than the one
    /// the store was opened on (the location now leads elsewhere: a failover to another
    /// database, a changed DNS name): it is not used.
    #[error(
        "a new connection reached database {found}, not {expected} that this store was opened on; it is not used"
    )]
    OtherDatabase {
        /// The identity read at open.
        expected: String,
        /// The identity the new connection found.
        found: String,
    },
    /// A schema name that is not a plain lowercase identifier.
    #[error("schema name {0:?} is not a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes)")]
    SchemaName(String),
}

impl PgError {
    /// Whether the server refused a duplicate key (two hosts proposing one idempotency key:
    /// the loser replays the winner, as on SQLite).
    #[must_use]
    pub fn is_unique_violation(&self) -> bool {
        self.sql_state() == Some(&SqlState::UNIQUE_VIOLATION)
    }

    /// The server's SQLSTATE, when the error is the server's.
    #[must_use]
    pub fn sql_state(&self) -> Option<&SqlState> {
        match self {
            Self::Postgres(e) => e.code(),
            _ => None,
        }
    }
}

/// `e` with the server's own words when the server refused something (the `postgres`
/// crate's `Display` says only "db error" then): severity, SQLSTATE, message and detail.
#[must_use]
pub fn error_text(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
        if let Some(detail) = db.detail() {
            text.push_str(" (");
            text.push_str(detail);
            text.push(')');
        }
        return text;
    }
    // The client's own words ("error connecting to server") and their causes
    // ("Connection refused (os error 111)").
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
