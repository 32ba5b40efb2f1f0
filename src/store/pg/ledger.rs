//! The recorded ledger head on PostgreSQL (`meta.ledger_head`, `seq:hash`, empty before the
//! first event). The append itself is `store::rules::append`; the head is locked
//! `FOR UPDATE` by it ([`super::rows::PgRows`]).

use crate::ledger::GENESIS;
use crate::store::StoreError;

/// `seq:hash` of the recorded head; `(0, GENESIS)` for the empty ledger.
pub(super) fn parse_head(head: &str) -> Result<(i64, String), StoreError> {
    if head.is_empty() {
        return Ok((0, GENESIS.to_owned()));
    }
    head.split_once(':')
        .and_then(|(s, h)| Some((s.parse().ok()?, h.to_owned())))
        .ok_or_else(|| StoreError::Corrupt(format!("meta.ledger_head is {head:?}")))
}
