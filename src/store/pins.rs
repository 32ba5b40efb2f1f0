//! Tool pins: the binding a governing proxy (`rpr gate`) accepted for each tool of a
//! server, so that a tool whose definition changes, or a server whose identity changes,
//! is refused until an operator pins it again.
//!
//! A pin is taken on first sight. A later binding with another digest leaves the pin
//! as it is and is remembered as *seen*; [`crate::Runtime::accept_pin`] makes the seen
//! binding the pin, only when the operator names its digest (what they reviewed).

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::StoreError;
use super::rows::Rows;

/// A binding that differs from the pin, remembered until it is pinned or replaced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SeenBinding {
    /// Its binding digest.
    pub digest: String,
    /// Its binding details.
    pub binding: Value,
    /// The tool definition seen.
    pub definition: Value,
    /// When it was last seen, ms since the epoch.
    pub at: i64,
}

/// One pin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PinRecord {
    /// The server's name (as the gate's policy names it).
    pub server: String,
    /// The tool's name.
    pub tool: String,
    /// The pinned binding digest.
    pub digest: String,
    /// The pinned binding details (server identity, capabilities digest, tool digests).
    pub binding: Value,
    /// The pinned tool definition.
    pub definition: Value,
    /// Who pinned it (the gate's actor on first sight, or an operator).
    pub pinned_by: String,
    /// When, ms since the epoch.
    pub pinned_at: i64,
    /// A differing binding seen since, refused until pinned.
    pub seen: Option<SeenBinding>,
}

/// What [`crate::Runtime::check_pin`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum PinCheck {
    /// No pin existed: this binding is now pinned.
    FirstSight(PinRecord),
    /// The binding matches the pin.
    Matches(PinRecord),
    /// The binding differs from the pin (now remembered as seen): refuse the call.
    Changed(PinRecord),
}

/// The columns of a pin row, in [`RawPin`]'s order.
pub(crate) const PIN_COLUMNS: &str = "server, tool, digest, binding, definition, pinned_by, pinned_at, \
     seen_digest, seen_binding, seen_definition, seen_at";

fn json(text: &str, what: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("pins.{what}: {e}")))
}

/// A pin row exactly as stored: `server`, `tool`, `digest`, `binding`, `definition`,
/// `pinned_by`, `pinned_at`, then the seen binding's `digest`, `binding`, `definition`, `at`.
pub(crate) type RawPin = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawPin> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
    ))
}

/// The record of a stored pin row (its JSON parsed; a half-stored seen binding refused).
pub(crate) fn record(r: RawPin) -> Result<PinRecord, StoreError> {
    let (server, tool, digest, binding, definition, pinned_by, pinned_at, sd, sb, sdef, sat) = r;
    let seen = match (sd, sb, sdef, sat) {
        (Some(digest), Some(binding), Some(definition), Some(at)) => Some(SeenBinding {
            digest,
            binding: json(&binding, "seen_binding")?,
            definition: json(&definition, "seen_definition")?,
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
        binding: json(&binding, "binding")?,
        definition: json(&definition, "definition")?,
        server,
        tool,
        digest,
        pinned_by,
        pinned_at,
        seen,
    })
}

/// Every pin, ordered by server and tool (SQLite).
pub(crate) fn all(conn: &Connection) -> Result<Vec<PinRecord>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {PIN_COLUMNS} FROM pins ORDER BY server, tool"
    ))?;
    let rows: Vec<RawPin> = stmt.query_map([], row)?.collect::<Result<_, _>>()?;
    rows.into_iter().map(record).collect()
}

/// The pin row of one tool (SQLite).
pub(crate) fn one_raw(
    conn: &Connection,
    server: &str,
    tool: &str,
) -> Result<Option<RawPin>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {PIN_COLUMNS} FROM pins WHERE server = ?1 AND tool = ?2"
    ))?;
    Ok(stmt.query_row(params![server, tool], row).optional()?)
}

/// The pin of one tool (SQLite).
pub(crate) fn one(
    conn: &Connection,
    server: &str,
    tool: &str,
) -> Result<Option<PinRecord>, StoreError> {
    one_raw(conn, server, tool)?.map(record).transpose()
}

/// A binding to check or pin: its digest, canonical details and canonical definition.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) digest: String,
    pub(crate) binding: String,
    pub(crate) definition: String,
}

fn reread(
    rows: &mut impl Rows,
    server: &str,
    tool: &str,
    what: &str,
) -> Result<PinRecord, StoreError> {
    rows.pin(server, tool)?
        .map(record)
        .transpose()?
        .ok_or_else(|| StoreError::Corrupt(format!("pins: {what}")))
}

/// Checks `c` against the pin inside the caller's unit: pins on first sight, remembers a
/// differing binding as seen. Several gates may see a tool first at the same moment: the
/// insert does nothing when a pin is already there, and the one that did not insert
/// compares with the pin that won.
pub(crate) fn check(
    rows: &mut impl Rows,
    c: &Candidate,
    by: &str,
    at: i64,
) -> Result<PinCheck, StoreError> {
    let pin = match rows.pin(&c.server, &c.tool)? {
        Some(pin) => record(pin)?,
        None if rows.insert_pin(c, by, at)? => {
            return Ok(PinCheck::FirstSight(reread(
                rows,
                &c.server,
                &c.tool,
                "the new pin is not there",
            )?));
        }
        None => reread(rows, &c.server, &c.tool, "the pin vanished")?,
    };
    if pin.digest == c.digest {
        return Ok(PinCheck::Matches(pin));
    }
    rows.see_pin(c, at)?;
    Ok(PinCheck::Changed(reread(
        rows,
        &c.server,
        &c.tool,
        "the pin vanished",
    )?))
}

/// Makes the seen binding with `digest` the pin of `server`/`tool`.
pub(crate) fn accept(
    rows: &mut impl Rows,
    server: &str,
    tool: &str,
    digest: &str,
    by: &str,
    at: i64,
) -> Result<PinRecord, StoreError> {
    if !rows.accept_seen_pin(server, tool, digest, by, at)? {
        return Err(StoreError::NoSuchPin {
            server: server.to_owned(),
            tool: tool.to_owned(),
            digest: digest.to_owned(),
        });
    }
    reread(rows, server, tool, "the pin vanished")
}
