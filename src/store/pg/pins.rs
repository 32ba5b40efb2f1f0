//! Tool pins (`rpr gate`), as in `store::pins`: pinned on first sight, a differing binding
//! remembered as seen and refused until an operator pins its digest. Outside the ledger.
//!
//! Several gates on several machines may see a tool first at the same moment: the insert is
//! `ON CONFLICT DO NOTHING`, and the one that did not insert compares with the pin that won.

use postgres::Row;
use serde_json::Value;

use super::{PgBackend, PgError, Tx};
use crate::store::pins::Candidate as PinCandidate;
use crate::store::{PinCheck, PinRecord, SeenBinding, StoreError};

const SELECT_PIN: &str = "SELECT server, tool, digest, binding, definition, pinned_by, pinned_at, \
     seen_digest, seen_binding, seen_definition, seen_at FROM pins WHERE server = $1 AND tool = $2 FOR UPDATE";

fn json(text: &str, what: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("pins.{what}: {e}")))
}

// Same shape as `store::pins::record`: the same record, from a PostgreSQL row.
pub(super) fn pin_record(r: &Row) -> Result<PinRecord, StoreError> {
    let seen = match (
        r.get::<_, Option<String>>(7),
        r.get::<_, Option<&str>>(8),
        r.get::<_, Option<&str>>(9),
        r.get::<_, Option<i64>>(10),
    ) {
        (Some(digest), Some(binding), Some(definition), Some(at)) => Some(SeenBinding {
            digest,
            binding: json(binding, "seen_binding")?,
            definition: json(definition, "seen_definition")?,
            at,
        }),
        (None, None, None, None) => None,
        _ => {
            return Err(StoreError::Corrupt(
                "pins: a seen binding is half stored".into(),
            ));
        }
    };
    Ok(PinRecord {
        server: r.get(0),
        tool: r.get(1),
        digest: r.get(2),
        binding: json(r.get(3), "binding")?,
        definition: json(r.get(4), "definition")?,
        pinned_by: r.get(5),
        pinned_at: r.get(6),
        seen,
    })
}

fn locked_pin(tx: &mut Tx<'_>, server: &str, tool: &str) -> Result<Option<PinRecord>, PgError> {
    let row = tx.query_opt(SELECT_PIN, &[&server, &tool])?;
    Ok(row.as_ref().map(pin_record).transpose()?)
}

impl PgBackend {
    /// Checks a binding against its tool pin, in one transaction: pins it on first sight,
    /// remembers a differing binding as seen ([`PinCheck::Changed`]: refuse the call).
    pub(crate) fn check_pin(
        &self,
        c: &PinCandidate,
        by: &str,
        at: i64,
    ) -> Result<PinCheck, PgError> {
        self.write(|tx| {
            if locked_pin(tx, &c.server, &c.tool)?.is_none() {
                let inserted = tx.execute(
                    "INSERT INTO pins (server, tool, digest, binding, definition, pinned_by, pinned_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (server, tool) DO NOTHING",
                    &[&c.server, &c.tool, &c.digest, &c.binding, &c.definition, &by, &at],
                )?;
                if inserted == 1 {
                    let pin = locked_pin(tx, &c.server, &c.tool)?
                        .ok_or_else(|| StoreError::Corrupt("pins: the new pin is not there".into()))?;
                    return Ok(PinCheck::FirstSight(pin));
                }
            }
            let pin = locked_pin(tx, &c.server, &c.tool)?
                .ok_or_else(|| StoreError::Corrupt("pins: the pin vanished".into()))?;
            if pin.digest == c.digest {
                return Ok(PinCheck::Matches(pin));
            }
            tx.execute(
                "UPDATE pins SET seen_digest = $3, seen_binding = $4, seen_definition = $5, seen_at = $6
                 WHERE server = $1 AND tool = $2",
                &[&c.server, &c.tool, &c.digest, &c.binding, &c.definition, &at],
            )?;
            let pin = locked_pin(tx, &c.server, &c.tool)?
                .ok_or_else(|| StoreError::Corrupt("pins: the pin vanished".into()))?;
            Ok(PinCheck::Changed(pin))
        })
    }

    // Same shape as `SqliteBackend::accept_pin`: the same operation on this store.
    /// Makes the seen binding with `digest` the pin of `server`/`tool`
    /// ([`StoreError::NoSuchPin`] when no such binding was seen).
    pub(crate) fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<PinRecord, PgError> {
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE pins SET digest = seen_digest, binding = seen_binding, definition = seen_definition,
                        pinned_by = $4, pinned_at = $5, seen_digest = NULL, seen_binding = NULL,
                        seen_definition = NULL, seen_at = NULL
                 WHERE server = $1 AND tool = $2 AND seen_digest = $3",
                &[&server, &tool, &digest, &by, &at],
            )?;
            if changed != 1 {
                return Err(StoreError::NoSuchPin {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    digest: digest.to_owned(),
                }
                .into());
            }
            locked_pin(tx, server, tool)?
                .ok_or_else(|| StoreError::Corrupt("pins: the pin vanished".into()).into())
        })
    }
}
