//! The ledger checker on mutated databases: a small valid pathway database (built once
//! per process, `rpr_fuzz::stories`), changed by the input, then checked with
//! `rpr::store::verify`, the check `rpr verify` runs.
//!
//! The input is a list of changes: cell edits through SQL (a cell set to NULL, to an
//! integer, to given text bytes, one byte of its text replaced, its text cut short, the
//! value of another cell copied in, a small number added, a row deleted) and byte flips of the file itself,
//! applied after the edits.
//!
//! The database's log is signed (`rpr_fuzz::stories::log_key`), and every case is also
//! checked with `rpr::store::log::verify_log` and that key, what `rpr verify --key` adds.
//!
//! What must hold: no panic; with no change the database verifies, chain and signed log;
//! whenever the signed log is called clean, every ledger event (its seq and its stored text,
//! the tree's leaves) reads as in the original; and whenever the check
//! calls the database clean, every chain-covered cell reads as in the original. Chain-covered
//! cells are the ones `verify` re-derives from the events (`COVERED` below); the multiset of
//! their rows is compared, read straight from each table (`NOT INDEXED`), with the recorded
//! head (`meta.ledger_head`) compared as the seq and hash `ReadStore::recorded_head` reads
//! (by key, through the index). A byte flip that leaves all of them as they were (a flip
//! in free space, an index, a header field) may leave the database clean; one that changes any of them may not, and neither may one that
//! leaves them unreadable.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};

/// The chain-covered columns of each table (see `src/store/check/replay.rs`,
/// `check_views`, and `src/store/check/walk`).
const COVERED: &[(&str, &str)] = &[
    (
        "pathways",
        "id, idempotency_key, definition, definition_digest, request_digest, state, proposer, created_at",
    ),
    (
        "attempts",
        "id, pathway_id, seq, previous_attempt, request, request_digest, binding, binding_digest, status, owner, outcome, carrier, created_at",
    ),
    (
        "approvals",
        "id, pathway_id, request_digest, approver, granted_at, used_at, revoked_at",
    ),
    ("ledger", "seq, pathway_id, event, prev_hash, hash"),
];

/// Every column of the tables the fuzzer edits (covered or not).
const EDITABLE: &[(&str, &[&str])] = &[
    (
        "pathways",
        &[
            "id",
            "idempotency_key",
            "definition",
            "definition_digest",
            "request_digest",
            "state",
            "version",
            "proposer",
            "created_at",
            "updated_at",
        ],
    ),
    (
        "attempts",
        &[
            "id",
            "pathway_id",
            "seq",
            "previous_attempt",
            "request",
            "request_digest",
            "binding",
            "binding_digest",
            "status",
            "owner",
            "lease_until",
            "outcome",
            "carrier",
            "created_at",
            "updated_at",
        ],
    ),
    (
        "approvals",
        &[
            "id",
            "pathway_id",
            "request_digest",
            "approver",
            "granted_at",
            "used_at",
            "revoked_at",
        ],
    ),
    (
        "ledger",
        &["seq", "pathway_id", "event", "prev_hash", "hash"],
    ),
    ("meta", &["key", "value"]),
];

/// One stored value, comparable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    Null,
    Integer(i64),
    Real(u64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl From<ValueRef<'_>> for Cell {
    fn from(v: ValueRef<'_>) -> Self {
        match v {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(i) => Self::Integer(i),
            ValueRef::Real(f) => Self::Real(f.to_bits()),
            ValueRef::Text(t) => Self::Text(t.to_vec()),
            ValueRef::Blob(b) => Self::Blob(b.to_vec()),
        }
    }
}

/// The chain-covered content: each table's covered rows, sorted, and the recorded head.
type Covered = (Vec<Vec<Vec<Cell>>>, Option<(i64, String)>);

fn covered(conn: &Connection) -> rusqlite::Result<Covered> {
    let mut tables = Vec::new();
    for (table, columns) in COVERED {
        let width = columns.split(',').count();
        let mut stmt = conn.prepare(&format!("SELECT {columns} FROM {table} NOT INDEXED"))?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(
                (0..width)
                    .map(|i| row.get_ref(i).map(Cell::from))
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        out.sort();
        tables.push(out);
    }
    // As `ReadStore::recorded_head` reads it: by its key, through the key's index. A
    // byte flip can leave the table and the index disagreeing (SQLite's integrity check
    // reports it); the head is then the row the index finds, as the check reads it.
    let head: Option<Vec<u8>> = conn
        .prepare("SELECT CAST(value AS BLOB) FROM meta WHERE key = 'ledger_head'")?
        .query([])?
        .next()?
        .map(|r| r.get(0))
        .transpose()?;
    let head = head.and_then(|v| {
        let v = String::from_utf8(v).ok()?;
        let (seq, hash) = v.split_once(':')?;
        Some((seq.parse().ok()?, hash.to_owned()))
    });
    Ok((tables, head))
}

/// Every ledger event's seq and stored bytes, in order of seq, read straight from the table.
fn leaves(conn: &Connection) -> rusqlite::Result<Vec<(i64, Vec<u8>)>> {
    let mut stmt = conn.prepare("SELECT seq, CAST(event AS BLOB) FROM ledger NOT INDEXED")?;
    let mut rows: Vec<(i64, Vec<u8>)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
            ))
        })?
        .collect::<Result<_, _>>()?;
    rows.sort();
    Ok(rows)
}

struct Original {
    bytes: Vec<u8>,
    covered: Covered,
    /// Every ledger event's seq and stored text, in order: the signed tree's leaves.
    leaves: Vec<(i64, Vec<u8>)>,
    head: String,
    /// Every editable cell: table, column, rowid.
    cells: Vec<(&'static str, &'static str, i64)>,
    dir: PathBuf,
}

fn original() -> &'static Original {
    static ORIGINAL: OnceLock<Original> = OnceLock::new();
    ORIGINAL.get_or_init(|| {
        let bytes = rpr_fuzz::stories::database_bytes();
        let dir = rpr_fuzz::stories::scratch("ledger");
        let path = dir.join("case.db");
        std::fs::write(&path, &bytes).expect("write");
        let conn = Connection::open(&path).expect("open");
        let covered = covered(&conn).expect("the original's covered cells");
        let leaves = leaves(&conn).expect("the original's events");
        let mut cells = Vec::new();
        for (table, columns) in EDITABLE {
            let rowids: Vec<i64> = conn
                .prepare(&format!("SELECT rowid FROM {table} ORDER BY rowid"))
                .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
                .expect("rowids");
            for rowid in rowids {
                cells.extend(columns.iter().map(|c| (*table, *c, rowid)));
            }
        }
        let head = covered.1.clone().expect("a recorded head").1;
        Original {
            bytes,
            covered,
            leaves,
            head,
            cells,
            dir,
        }
    })
}

/// Reads the input a byte at a time.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<usize> {
        Some(usize::from(self.byte()?) << 8 | usize::from(self.byte()?))
    }
    /// A position in a text, 0 to 255.
    fn position(&mut self) -> Option<i64> {
        self.byte().map(i64::from)
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        taken
    }
}

/// One change the input asks for.
enum Change<'a> {
    Null(usize),
    Integer(usize, i64),
    Text(usize, &'a [u8]),
    ReplaceByte(usize, i64, u8),
    Cut(usize, i64),
    Copy(usize, usize),
    Delete(usize),
    Add(usize, i8),
    Flip(usize, u8),
}

fn changes(input: &[u8]) -> Vec<Change<'_>> {
    let mut input = Input(input);
    let mut out = Vec::new();
    while let Some(change) = change(&mut input) {
        out.push(change);
    }
    out
}

fn change<'a>(input: &mut Input<'a>) -> Option<Change<'a>> {
    Some(match input.byte()? % 9 {
        0 => Change::Null(input.u16()?),
        1 => {
            let cell = input.u16()?;
            let v = input.bytes(8);
            let mut n = [0u8; 8];
            n[..v.len()].copy_from_slice(v);
            Change::Integer(cell, i64::from_le_bytes(n))
        }
        2 => {
            let cell = input.u16()?;
            let len = usize::from(input.byte()?);
            Change::Text(cell, input.bytes(len))
        }
        3 => Change::ReplaceByte(input.u16()?, input.position()?, input.byte()?),
        4 => Change::Cut(input.u16()?, input.position()?),
        5 => Change::Copy(input.u16()?, input.u16()?),
        6 => Change::Delete(input.u16()?),
        7 => Change::Add(input.u16()?, i8::from_le_bytes([input.byte()?])),
        _ => Change::Flip(
            input.u16()? << 8 | usize::from(input.byte()?),
            input.byte()?,
        ),
    })
}

/// Applies one SQL edit; an edit SQLite refuses (a constraint, a type) changes nothing.
fn edit(conn: &Connection, o: &Original, change: &Change<'_>) {
    let cell = |i: usize| o.cells[i % o.cells.len()];
    let set = |i: usize, expr: &str, value: &dyn rusqlite::ToSql| {
        let (table, column, rowid) = cell(i);
        let sql = format!("UPDATE {table} SET {column} = {expr} WHERE rowid = ?2");
        let _ = conn.execute(&sql, params![value, rowid]);
    };
    match *change {
        Change::Null(i) => set(i, "?1", &rusqlite::types::Null),
        Change::Integer(i, n) => set(i, "?1", &n),
        Change::Text(i, bytes) => set(i, "CAST(?1 AS TEXT)", &bytes),
        Change::ReplaceByte(i, at, b) => {
            let (table, column, rowid) = cell(i);
            let sql = format!(
                "UPDATE {table} SET {column} = CAST(substr(CAST({column} AS BLOB), 1, ?1) || ?3 || substr(CAST({column} AS BLOB), ?1 + 2) AS TEXT) WHERE rowid = ?2 AND length(CAST({column} AS BLOB)) > 0"
            );
            let _ = conn.execute(&sql, params![at, rowid, vec![b]]);
        }
        Change::Cut(i, at) => set(
            i,
            "CAST(substr(CAST({c} AS BLOB), 1, ?1) AS TEXT)"
                .replace("{c}", cell(i).1)
                .as_str(),
            &at,
        ),
        Change::Copy(i, from) => {
            let (ft, fc, frow) = cell(from);
            let (table, column, rowid) = cell(i);
            let sql = format!(
                "UPDATE {table} SET {column} = (SELECT {fc} FROM {ft} WHERE rowid = ?1) WHERE rowid = ?2"
            );
            let _ = conn.execute(&sql, params![frow, rowid]);
        }
        Change::Add(i, d) => set(i, &format!("{} + ?1", cell(i).1), &d),
        Change::Delete(i) => {
            let (table, _, rowid) = cell(i);
            let _ = conn.execute(
                &format!("DELETE FROM {table} WHERE rowid = ?1"),
                params![rowid],
            );
        }
        Change::Flip(..) => {}
    }
}

/// The connection the SQL edits are made on: in memory, kept for the whole process. Each
/// case with edits loads the original's bytes into it afresh (`sqlite3_deserialize`, which
/// replaces the whole database and its parsed schema) and takes the edited bytes back out
/// (`sqlite3_serialize`): the bytes SQLite would leave in the file, without a file, a
/// journal on disk, or a connection opened per case.
fn editor() -> &'static std::sync::Mutex<Connection> {
    static EDITOR: OnceLock<std::sync::Mutex<Connection>> = OnceLock::new();
    EDITOR.get_or_init(|| {
        let conn = Connection::open_in_memory().expect("an in-memory connection");
        conn.execute_batch("PRAGMA foreign_keys = OFF")
            .expect("pragmas");
        std::sync::Mutex::new(conn)
    })
}

/// The original's bytes with the SQL edits applied, as SQLite writes them: the database
/// loaded into the in-memory editor, the edits made there (no durability needed: the
/// journal in memory, no syncs), the result taken back out.
fn edited(o: &Original, changes: &[Change<'_>]) -> Vec<u8> {
    let mut conn = editor()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    conn.deserialize_read_exact(rusqlite::MAIN_DB, o.bytes.as_slice(), o.bytes.len(), false)
        .expect("load the original into memory");
    conn.execute_batch("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF")
        .expect("pragmas");
    for change in changes {
        edit(&conn, o, change);
    }
    let bytes = conn
        .serialize(rusqlite::MAIN_DB)
        .expect("the edited database");
    bytes.to_vec()
}

/// The case's bytes: the original, edited through SQL when the input asks for edits,
/// then its bytes flipped; written to the case's file (in `/dev/shm`, memory) for the
/// check, which opens a database by its path.
fn prepare(o: &Original, changes: &[Change<'_>]) -> PathBuf {
    let mut bytes = if changes.iter().any(|c| !matches!(c, Change::Flip(..))) {
        edited(o, changes)
    } else {
        o.bytes.clone()
    };
    for change in changes {
        if let Change::Flip(at, x) = *change {
            let len = bytes.len();
            bytes[at % len] ^= x.max(1);
        }
    }
    let path = o.dir.join("case.db");
    std::fs::write(&path, bytes).expect("write the case");
    path
}

/// The covered content of the case, read without the read-only guard's help (a plain
/// read-only connection).
fn covered_of(path: &Path) -> rusqlite::Result<Covered> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    covered(&conn)
}

fn key() -> &'static rpr::evidence::note::SignerKey {
    static KEY: OnceLock<rpr::evidence::note::SignerKey> = OnceLock::new();
    KEY.get_or_init(rpr_fuzz::stories::log_key)
}

fuzz_target!(|input: &[u8]| {
    let o = original();
    let Some((&flags, rest)) = input.split_first() else {
        return;
    };
    let changes = changes(rest);
    let path = prepare(o, &changes);
    let known = (flags & 1 == 1).then_some(o.head.as_str());
    let (clean, signed_clean) = match rpr::store::ReadStore::open_read_only(&path) {
        Ok(store) => (
            rpr::store::verify(&store, known).is_ok_and(|report| report.is_ok()),
            rpr::store::log::verify_log(&store, &key().verifier(), None)
                .is_ok_and(|report| report.is_ok()),
        ),
        Err(_) => (false, false),
    };
    if changes.is_empty() {
        assert!(clean, "the unchanged database does not verify");
        assert!(
            signed_clean,
            "the unchanged database's signed log does not verify"
        );
    }
    if signed_clean {
        let now = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| leaves(&c));
        match now {
            Ok(now) => assert!(
                now == o.leaves,
                "the signed log verified after a change to an event"
            ),
            Err(e) => panic!("the signed log verified, but its events cannot be read: {e}"),
        }
    }
    if clean {
        match covered_of(&path) {
            Ok(now) => assert!(
                now == o.covered,
                "verified clean after a change to a chain-covered cell"
            ),
            Err(e) => panic!("verified clean, but its chain-covered cells cannot be read: {e}"),
        }
    }
});
