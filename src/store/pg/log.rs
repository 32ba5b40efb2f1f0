//! The signed log on PostgreSQL: [`LogRows`] on a step's transaction, the check when a
//! batch takes the ledger head, and the seal before its `COMMIT` (`store::log`).

use std::sync::Arc;

use super::{PgBackend, PgError, Tx};
use crate::store::StoreError;
use crate::store::log::{self, LogError, LogRows, Sealer};

fn err(e: postgres::Error) -> StoreError {
    PgError::from(e).into()
}

/// The log's rows in a transaction.
pub(super) struct PgLog<'t, 'a>(pub(super) &'t mut Tx<'a>);

impl LogRows for PgLog<'_, '_> {
    fn checkpoint_and_bounds(&mut self) -> Result<(Option<String>, i64, i64), StoreError> {
        let row = self
            .0
            .query_one(
                "SELECT (SELECT value FROM meta WHERE key = 'log_checkpoint'),
                        (SELECT COALESCE(min(seq), 1)::bigint FROM ledger),
                        (SELECT COALESCE(max(seq), 0)::bigint FROM ledger)",
                &[],
            )
            .map_err(err)?;
        Ok((row.get(0), row.get(1), row.get(2)))
    }

    fn each_event(
        &mut self,
        after: i64,
        upto: i64,
        f: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<(), StoreError> {
        let rows = self
            .0
            .query(
                "SELECT seq, event FROM ledger WHERE seq > $1 AND seq <= $2 ORDER BY seq",
                &[&after, &upto],
            )
            .map_err(err)?;
        for row in rows {
            let text: &str = row.get(1);
            f(row.get(0), text.as_bytes());
        }
        Ok(())
    }

    fn put_checkpoint(&mut self, text: &str) -> Result<(), StoreError> {
        self.0
            .execute(
                "INSERT INTO meta (key, value) VALUES ('log_checkpoint', $1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&text],
            )
            .map_err(err)?;
        Ok(())
    }
}

impl PgBackend {
    /// Signs the log with `sealer` from now on; without one, refuses a database whose log
    /// is signed.
    pub(crate) fn set_sealer(&mut self, sealer: Option<Arc<Sealer>>) -> Result<(), StoreError> {
        if sealer.is_none() {
            let stored = self
                .read(|tx| {
                    Ok(tx
                        .query_opt("SELECT value FROM meta WHERE key = 'log_checkpoint'", &[])?
                        .map(|r| r.get::<_, String>(0)))
                })
                .map_err(StoreError::from)?;
            if let Some(text) = stored {
                return Err(LogError::SigningKeyNeeded {
                    size: log::stored_size(&text),
                }
                .into());
            }
        }
        self.sealer = sealer;
        Ok(())
    }

    /// The runtime's sealer, for the batch's transactions.
    pub(super) fn sealer(&self) -> Option<&Sealer> {
        self.sealer.as_deref()
    }
}

/// Just after `tx` took the ledger head: the check of the log (with a signing key).
pub(super) fn on_head(tx: &mut Tx<'_>) -> Result<(), StoreError> {
    if let Some(sealer) = tx.sealer {
        let covered = sealer.check(&mut PgLog(tx))?;
        tx.covered = Some(covered);
    }
    Ok(())
}
