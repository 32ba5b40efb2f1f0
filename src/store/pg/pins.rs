//! Tool pins on PostgreSQL: the rule is `store::pins` (over [`super::rows::PgRows`]); here,
//! a pin row read into its raw form, and the two writes as transactions of their own.

use postgres::Row;

use super::rows::PgRows;
use super::{PgBackend, PgError};
use crate::store::pins::{self, Candidate, RawPin};
use crate::store::{PinCheck, PinRecord};

/// A pin row of [`pins::PIN_COLUMNS`].
pub(super) fn raw_pin(r: &Row) -> RawPin {
    (
        r.get(0),
        r.get(1),
        r.get(2),
        r.get(3),
        r.get(4),
        r.get(5),
        r.get(6),
        r.get(7),
        r.get(8),
        r.get(9),
        r.get(10),
    )
}

impl PgBackend {
    /// Checks a binding against its tool pin, in one transaction (`store::pins::check`).
    pub(crate) fn check_pin(&self, c: &Candidate, by: &str, at: i64) -> Result<PinCheck, PgError> {
        self.write(|tx| Ok(pins::check(&mut PgRows(tx), c, by, at)?))
    }

    /// Makes the seen binding with `digest` the pin of `server`/`tool`, in one transaction
    /// (`store::pins::accept`).
    pub(crate) fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<PinRecord, PgError> {
        self.write(|tx| Ok(pins::accept(&mut PgRows(tx), server, tool, digest, by, at)?))
    }
}
