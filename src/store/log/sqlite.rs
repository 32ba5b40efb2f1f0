//! [`LogRows`] on SQLite: the batch's connection, inside its `BEGIN IMMEDIATE` transaction.

use rusqlite::{Connection, params};

use super::{LogRows, META_KEY};
use crate::store::StoreError;

/// The log's rows on a SQLite connection.
pub(crate) struct SqliteLog<'c>(pub(crate) &'c Connection);

impl LogRows for SqliteLog<'_> {
    fn checkpoint_and_bounds(&mut self) -> Result<(Option<String>, i64, i64), StoreError> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT (SELECT value FROM meta WHERE key = ?1),
                        (SELECT COALESCE(min(seq), 1) FROM ledger),
                        (SELECT COALESCE(max(seq), 0) FROM ledger)",
            )?
            .query_row(params![META_KEY], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?)
    }

    fn each_event(
        &mut self,
        after: i64,
        upto: i64,
        f: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<(), StoreError> {
        let mut stmt = self.0.prepare_cached(
            "SELECT seq, event FROM ledger WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
        )?;
        let mut rows = stmt.query(params![after, upto])?;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            // The stored bytes, whatever their type: the leaf is what is stored.
            let text = row.get_ref(1)?;
            let bytes = match text {
                rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => b,
                _ => &[],
            };
            f(seq, bytes);
        }
        Ok(())
    }

    fn put_checkpoint(&mut self, text: &str) -> Result<(), StoreError> {
        self.0
            .prepare_cached(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![META_KEY, text])?;
        Ok(())
    }
}
