//! The whole-store check behind [`crate::store::verify`], as a pipeline of two parts.
//!
//! The *reader* is the only code that touches the database: on the caller's connection,
//! inside the caller's read snapshot, it steps through the ledger in `seq` order (with the
//! `attempts` and `approvals` tables interleaved at its pace) and then through the
//! `pathways` table, copying each row's values into [`Rows`] (a few large buffers a batch,
//! reused), and hands the batches on in that order ([`Part`]). The *checker* does
//! everything else, in the order the rows came: the links, the
//! chain hashes, each event's canonical form and fields, the replay of every pathway, and
//! the comparison of every stored row with what its pathway's events establish.
//!
//! With two or more cores the checker runs on a second thread while the reader reads on
//! the caller's: one connection, one snapshot, and the two halves of the work overlap.
//! The chain hash of a row is the one piece of the checker's work that needs nothing but
//! the row, so the reader computes it for a batch whenever the checker is behind (at least
//! [`HASH_WHEN_BEHIND`] batches waiting), and the checker for the others: whichever side
//! would otherwise wait does it. With one core both parts run on the caller's thread, one
//! batch at a time. Every way gives the same report (the tests run each).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use rusqlite::Connection;

use super::raw::{
    APPROVAL_COLUMNS, APPROVAL_WIDTH, ATTEMPT_COLUMNS, ATTEMPT_WIDTH, PATHWAY_COLUMNS,
    PATHWAY_WIDTH, Rows,
};

mod checker;

use crate::ledger::Report;
use crate::store::StoreError;
use checker::Checker;

/// The ledger's columns as the checker reads them.
const LEDGER_SELECT: &str =
    "SELECT seq, pathway_id, prev_hash, hash, event FROM ledger ORDER BY seq";
const LEDGER_WIDTH: usize = 5;
/// A batch is handed on when it holds this many rows…
const BATCH_ROWS: usize = 1024;
/// …or this many bytes of values.
const BATCH_BYTES: usize = 256 * 1024;
/// Batches on their way to the checker thread, at most; the reader waits beyond that.
const QUEUE: usize = 8;
/// The reader hashes a ledger batch itself when at least this many are waiting.
pub(crate) const HASH_WHEN_BEHIND: usize = 2;

/// Who computes the chain hashes of the ledger rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hashing {
    /// The checker, always.
    Checker,
    /// The reader, always.
    Reader,
    /// The reader when the checker is behind, else the checker.
    WhenBehind,
}

/// How the check runs: on the caller's thread only, or with the checker on a second one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) threads: bool,
    pub(crate) hashing: Hashing,
    /// Rows a batch holds at most.
    pub(crate) batch_rows: usize,
}

impl Plan {
    /// Two threads when the machine has two cores, the hashes where they cost least.
    pub(crate) fn for_this_machine() -> Self {
        let threads = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        Self {
            threads,
            hashing: if threads {
                Hashing::WhenBehind
            } else {
                Hashing::Checker
            },
            batch_rows: BATCH_ROWS,
        }
    }
}

/// Rows handed from the reader to the checker.
#[derive(Debug, Default)]
struct Batch {
    rows: Rows,
    /// For a ledger batch the reader hashed: whether each row's stored hash is its chain
    /// hash. Empty when the checker is to hash them.
    hashed: Vec<bool>,
}

impl Batch {
    fn reset(&mut self, columns: usize) {
        self.rows.reset(columns);
        self.hashed.clear();
    }

    fn full(&self, rows: usize) -> bool {
        self.rows.len() >= rows || self.rows.bytes_len() >= BATCH_BYTES
    }

    /// Computes every row's chain hash (reader side). Leaves `hashed` empty if a row's
    /// values are not all text, for the checker to report.
    fn hash(&mut self) {
        self.hashed.clear();
        for index in 0..self.rows.len() {
            let row = self.rows.row(index);
            let (Ok(prev), Ok(hash), Ok(text)) = (row.bytes(2), row.bytes(3), row.bytes(4)) else {
                self.hashed.clear();
                return;
            };
            self.hashed
                .push(crate::ledger::chain_hash_hex(prev, text) == hash);
        }
    }
}

/// What the reader hands the checker: ledger batches in `seq` order, then the head, then
/// the pathway batches, then the end; attempt and approval batches anywhere before the
/// first pathway batch (the checker only files them by pathway).
#[derive(Debug)]
enum Part {
    /// Ledger rows in `seq` order ([`LEDGER_SELECT`]).
    Ledger(Batch),
    /// The head recorded in `meta`, read after the last ledger row.
    Head(Option<(i64, String)>),
    /// Attempt rows ([`ATTEMPT_COLUMNS`]), in storage order.
    Attempts(Batch),
    /// Approval rows ([`APPROVAL_COLUMNS`]).
    Approvals(Batch),
    /// Pathway rows ([`PATHWAY_COLUMNS`]).
    Pathways(Batch),
    /// Nothing more.
    End,
}

/// Where the reader's parts go.
trait Sink {
    /// Hands a part on; `false` when the checker has stopped (it has an error to give).
    fn send(&mut self, part: Part) -> bool;
    /// A batch the checker is done with, to fill again.
    fn spent(&mut self) -> Option<Batch>;
    /// Whether the reader hashes the ledger batch it is about to hand on.
    fn reader_hashes(&self) -> bool;
}

/// Runs the whole check over the database on `conn` (already inside its snapshot), whose
/// recorded head (`meta.ledger_head`, read in that snapshot) is `recorded_head`.
pub(crate) fn run(
    conn: &Connection,
    recorded_head: Option<(i64, String)>,
    known_head: Option<&str>,
    plan: Plan,
) -> Result<Report, StoreError> {
    // Sized once: growing a map of every pathway rehashes large tables.
    let stored_pathways: i64 = conn.query_row("SELECT count(*) FROM pathways", [], |r| r.get(0))?;
    let checker = Checker::new(known_head, usize::try_from(stored_pathways).unwrap_or(0));
    if !plan.threads {
        let mut sink = Inline {
            checker,
            spent: None,
            error: None,
            hashing: plan.hashing,
        };
        read(conn, recorded_head, &mut sink, plan.batch_rows)?;
        if let Some(error) = sink.error {
            return Err(error);
        }
        return sink.checker.finish();
    }
    let behind = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let (parts, received) = mpsc::sync_channel::<Part>(QUEUE);
        // Bounded, so its slots are allocated once: an unbounded channel allocates a
        // block of them now and then on the checker's thread, and freeing the reader's
        // batches there made those allocations the costliest in the check.
        let (spent, returned) = mpsc::sync_channel::<Batch>(QUEUE + 2);
        let behind = &behind;
        let checking = scope.spawn(move || {
            let mut checker = checker;
            for part in received {
                let ledger = matches!(part, Part::Ledger(_));
                let done = checker.part(part)?;
                if ledger {
                    behind.fetch_sub(1, Ordering::Relaxed);
                }
                if let Some(batch) = done {
                    // The reader may have finished; then nobody needs it back. (It is
                    // never full: there are no more batches than its slots.)
                    let _ = spent.try_send(batch);
                }
            }
            checker.finish()
        });
        let mut sink = Threads {
            parts,
            returned,
            behind,
            hashing: plan.hashing,
        };
        let read = read(conn, recorded_head, &mut sink, plan.batch_rows);
        // Closes the channel: the checker ends after the parts it has.
        drop(sink);
        let report = checking
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        read?;
        report
    })
}

/// The checker on the caller's thread.
struct Inline<'k> {
    checker: Checker<'k>,
    spent: Option<Batch>,
    error: Option<StoreError>,
    hashing: Hashing,
}

impl Sink for Inline<'_> {
    fn send(&mut self, part: Part) -> bool {
        match self.checker.part(part) {
            Ok(spent) => {
                self.spent = spent;
                true
            }
            Err(error) => {
                self.error = Some(error);
                false
            }
        }
    }

    fn spent(&mut self) -> Option<Batch> {
        self.spent.take()
    }

    fn reader_hashes(&self) -> bool {
        self.hashing == Hashing::Reader
    }
}

/// The checker on a second thread, behind a bounded channel.
struct Threads<'a> {
    parts: mpsc::SyncSender<Part>,
    returned: mpsc::Receiver<Batch>,
    /// Ledger batches sent and not yet checked.
    behind: &'a AtomicUsize,
    hashing: Hashing,
}

impl Sink for Threads<'_> {
    fn send(&mut self, part: Part) -> bool {
        if matches!(part, Part::Ledger(_)) {
            self.behind.fetch_add(1, Ordering::Relaxed);
        }
        self.parts.send(part).is_ok()
    }

    fn spent(&mut self) -> Option<Batch> {
        self.returned.try_recv().ok()
    }

    fn reader_hashes(&self) -> bool {
        match self.hashing {
            Hashing::Checker => false,
            Hashing::Reader => true,
            Hashing::WhenBehind => self.behind.load(Ordering::Relaxed) >= HASH_WHEN_BEHIND,
        }
    }
}

/// The reader: every row the check needs, copied in batches, in an order the checker can
/// take them in: the ledger in `seq` order, with the `attempts` and `approvals` rows (which
/// the checker only files by pathway) interleaved at the ledger's pace, then the head, then
/// the `pathways` rows (each compared as it comes, so after the whole chain). Interleaving
/// keeps the checker busy while the reader copies those tables: read after the ledger, they
/// were a stretch where the reader worked alone. Returns early (`Ok`) when the checker stops.
fn read(
    conn: &Connection,
    recorded_head: Option<(i64, String)>,
    sink: &mut dyn Sink,
    batch_rows: usize,
) -> Result<(), StoreError> {
    let attempts = format!("SELECT {ATTEMPT_COLUMNS} FROM attempts");
    let approvals = format!("SELECT {APPROVAL_COLUMNS} FROM approvals");
    let pathways = format!("SELECT {PATHWAY_COLUMNS} FROM pathways");
    // Only a pace: a wrong count (a gap in `seq`, say) changes when rows are read, not what.
    let count = |sql: &str| -> Result<u64, StoreError> {
        let n: i64 = conn.query_row(sql, [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let ledger_total = count("SELECT coalesce(max(seq), 0) FROM ledger")?;
    let side_total =
        count("SELECT (SELECT count(*) FROM attempts) + (SELECT count(*) FROM approvals)")?;
    let mut attempts_stmt = conn.prepare(&attempts)?;
    let mut approvals_stmt = conn.prepare(&approvals)?;
    let mut side = Side {
        tables: [
            Copier::new(attempts_stmt.query([])?, ATTEMPT_WIDTH, Part::Attempts),
            Copier::new(approvals_stmt.query([])?, APPROVAL_WIDTH, Part::Approvals),
        ],
        at: 0,
        copied: 0,
    };
    {
        let mut stmt = conn.prepare(LEDGER_SELECT)?;
        let mut rows = stmt.query([])?;
        let mut batch = fresh(sink, LEDGER_WIDTH);
        let mut read: u64 = 0;
        while let Some(row) = rows.next()? {
            batch.rows.push(row)?;
            read += 1;
            if batch.full(batch_rows) {
                if sink.reader_hashes() {
                    batch.hash();
                }
                if !sink.send(Part::Ledger(batch)) {
                    return Ok(());
                }
                let due = side_total.saturating_mul(read) / ledger_total.max(1);
                if !side.copy_until(due, sink, batch_rows)? {
                    return Ok(());
                }
                batch = fresh(sink, LEDGER_WIDTH);
            }
        }
        if batch.rows.len() > 0 {
            if sink.reader_hashes() {
                batch.hash();
            }
            if !sink.send(Part::Ledger(batch)) {
                return Ok(());
            }
        }
    }
    if !sink.send(Part::Head(recorded_head)) {
        return Ok(());
    }
    if !side.copy_until(u64::MAX, sink, batch_rows)? {
        return Ok(());
    }
    drop(side);
    let mut stmt = conn.prepare(&pathways)?;
    let mut last = Copier::new(stmt.query([])?, PATHWAY_WIDTH, Part::Pathways);
    while last.copy_row(sink, batch_rows)? == Copy::Copied {}
    if last.stopped {
        return Ok(());
    }
    sink.send(Part::End);
    Ok(())
}

/// The `attempts` and `approvals` copiers, read in turn, and how many of their rows are
/// copied.
struct Side<'s> {
    tables: [Copier<'s>; 2],
    /// The table being read.
    at: usize,
    copied: u64,
}

impl Side<'_> {
    /// Copies rows until `due` are copied or none are left. `Ok(false)` when the checker
    /// stopped.
    fn copy_until(
        &mut self,
        due: u64,
        sink: &mut dyn Sink,
        batch_rows: usize,
    ) -> Result<bool, StoreError> {
        while self.copied < due {
            let Some(table) = self.tables.get_mut(self.at) else {
                return Ok(true);
            };
            match table.copy_row(sink, batch_rows)? {
                Copy::Copied => self.copied += 1,
                Copy::Done if table.stopped => return Ok(false),
                Copy::Done => self.at += 1,
            }
        }
        Ok(true)
    }
}

/// What [`Copier::copy_row`] did.
#[derive(Debug, PartialEq, Eq)]
enum Copy {
    Copied,
    /// No rows left (the last batch handed on), or the checker stopped.
    Done,
}

/// Copies the rows of one table's `SELECT` to the sink in batches.
struct Copier<'s> {
    rows: rusqlite::Rows<'s>,
    /// Values a row has.
    columns: usize,
    part: fn(Batch) -> Part,
    batch: Option<Batch>,
    /// Whether the checker stopped taking parts.
    stopped: bool,
}

impl<'s> Copier<'s> {
    fn new(rows: rusqlite::Rows<'s>, columns: usize, part: fn(Batch) -> Part) -> Self {
        Self {
            rows,
            columns,
            part,
            batch: None,
            stopped: false,
        }
    }

    /// Copies the next row, handing the batch on when it is full or the rows end.
    fn copy_row(&mut self, sink: &mut dyn Sink, batch_rows: usize) -> Result<Copy, StoreError> {
        if self.stopped {
            return Ok(Copy::Done);
        }
        let Some(row) = self.rows.next()? else {
            if let Some(batch) = self.batch.take().filter(|b| b.rows.len() > 0) {
                self.stopped = !sink.send((self.part)(batch));
            }
            return Ok(Copy::Done);
        };
        let columns = self.columns;
        let batch = self.batch.get_or_insert_with(|| fresh(sink, columns));
        batch.rows.push(row)?;
        if batch.full(batch_rows) {
            let batch = self.batch.take().expect("just filled");
            if !sink.send((self.part)(batch)) {
                self.stopped = true;
                return Ok(Copy::Done);
            }
        }
        Ok(Copy::Copied)
    }
}

/// An empty batch for rows of `columns` values: one the checker is done with, if any.
fn fresh(sink: &mut dyn Sink, columns: usize) -> Batch {
    let mut batch = sink.spent().unwrap_or_default();
    batch.reset(columns);
    batch
}

#[cfg(test)]
mod tests {
    //! Every way of running the check gives the same report, on a clean store and on
    //! stores changed behind the runtime's back (the detections themselves are tested in
    //! `tests/core/ledger.rs` through the public API).

    use std::path::{Path, PathBuf};

    use rusqlite::Connection;
    use serde_json::json;

    use super::{BATCH_ROWS, Hashing, Plan, run};
    use crate::executor::scripted::AnswersOk;
    use crate::executor::{Observation, Readback, Request};
    use crate::ledger::Report;
    use crate::store::ReadStore;
    use crate::{
        ActionClass, Actor, Admission, Authority, Confirmed, Decision, Definition, Outcome,
        Proposal, Role, Runtime,
    };

    struct Applied;

    impl Readback for Applied {
        fn observe(&mut self, _: &Request) -> Observation {
            Observation::Applied {
                evidence: json!({"seen": "applied"}),
            }
        }
    }

    /// A store of twelve pathways (allowed and completed, held for an approval, in front
    /// of a Human Gate, denied), checkpointed into one file.
    fn written(dir: &Path) -> PathBuf {
        let path = dir.join("walk.db");
        {
            let rt = Runtime::open(&path).unwrap();
            let (proposer, decision, approval, execution, evidence) = (
                Actor::new("agent:p"),
                Actor::new("policy:d"),
                Actor::new("human:a"),
                Actor::new("agent:x"),
                Actor::new("service:e"),
            );
            let authority = Authority::single(&decision)
                .with(Role::ApprovalAuthority, &approval)
                .with(Role::ExecutionActor, &execution)
                .with(Role::EvidenceOwner, &evidence);
            for i in 0..12 {
                let definition = Definition::new(
                    Request::new(
                        "write_file",
                        json!({"path": format!("/tmp/{i}"), "x": "\u{e9}"}),
                    ),
                    ActionClass::Mutating,
                    format!("walk-{i}"),
                    authority.clone(),
                );
                let Proposal::New(p) = rt.propose(&proposer, definition).unwrap() else {
                    panic!("proposed twice");
                };
                let decide = move |_: &Definition| match i % 4 {
                    1 => Decision::Hold,
                    2 => Decision::HumanGate,
                    3 => Decision::Deny("no".into()),
                    _ => Decision::Allow,
                };
                let approved = match p.admit(&rt, &decision, &decide).unwrap() {
                    Admission::Approved(p) => p,
                    Admission::AwaitingApproval(p) => {
                        let granted = rt.grant_approval(&p, &approval).unwrap();
                        p.approve(&rt, granted.quorum(&rt).unwrap()).unwrap()
                    }
                    Admission::HumanGate(_) | Admission::Denied(_) => continue,
                };
                let bound = approved.bind(&mut AnswersOk::default()).unwrap();
                let Outcome::Returned(returned) =
                    bound.dispatch(&rt, &execution, &mut AnswersOk::default())
                else {
                    panic!("not returned");
                };
                if i % 8 != 4 {
                    let Confirmed::Completed(_) =
                        returned.confirm(&rt, &evidence, &mut Applied).unwrap()
                    else {
                        panic!("not confirmed");
                    };
                }
            }
        }
        let copy = dir.join("walk-clean.db");
        Connection::open(&path)
            .unwrap()
            .execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
            .unwrap();
        copy
    }

    fn plans() -> Vec<Plan> {
        let mut plans = Vec::new();
        for threads in [false, true] {
            for hashing in [Hashing::Checker, Hashing::Reader, Hashing::WhenBehind] {
                for batch_rows in [1, 3, BATCH_ROWS] {
                    plans.push(Plan {
                        threads,
                        hashing,
                        batch_rows,
                    });
                }
            }
        }
        plans
    }

    fn reports(path: &Path, known_head: Option<&str>) -> Vec<(Plan, Report)> {
        let store = ReadStore::open_read_only(path).unwrap();
        plans()
            .into_iter()
            .map(|plan| {
                let report = store
                    .snapshot(|s| run(s.conn(), s.recorded_head()?, known_head, plan))
                    .unwrap();
                (plan, report)
            })
            .collect()
    }

    #[test]
    fn every_plan_gives_the_same_report_on_clean_and_changed_stores() {
        let dir = tempfile::tempdir().unwrap();
        let clean = written(dir.path());
        let (_, first) = reports(&clean, None).remove(0);
        assert!(first.is_ok(), "{:#?}", first.problems);
        assert!(first.events > 40, "{} events", first.events);
        let head = first.head.clone().unwrap();
        let bogus = "f".repeat(64);
        let changes: &[(&str, Option<&str>)] = &[
            ("", Some(&head)),
            ("", Some(&bogus)),
            ("UPDATE ledger SET hash = ?1 WHERE seq = 5", None),
            ("UPDATE ledger SET event = ' ' || event WHERE seq = 2", None),
            ("UPDATE ledger SET event = 'not json' WHERE seq = 4", None),
            (
                "UPDATE ledger SET event = CAST(X'FF22' AS TEXT) WHERE seq = 6",
                None,
            ),
            (
                "UPDATE ledger SET event = replace(event, '\"seq\":9', '\"seq\":90') WHERE seq = 9",
                None,
            ),
            (
                "UPDATE ledger SET pathway_id = 'pw_nowhere' WHERE seq = 11",
                None,
            ),
            ("DELETE FROM ledger WHERE seq = 7", None),
            (
                "DELETE FROM ledger WHERE seq = (SELECT max(seq) FROM ledger)",
                None,
            ),
            (
                "UPDATE meta SET value = '1:x' WHERE key = 'ledger_head'",
                None,
            ),
            (
                "UPDATE pathways SET state = 'aborted' WHERE rowid = 2",
                None,
            ),
            (
                "UPDATE pathways SET definition = definition || ' ' WHERE rowid = 3",
                None,
            ),
            (
                "UPDATE attempts SET status = 'failed' WHERE rowid = 1",
                None,
            ),
            (
                "UPDATE attempts SET binding = binding || ' ' WHERE rowid = 2",
                None,
            ),
            ("UPDATE attempts SET outcome = NULL WHERE rowid = 3", None),
            (
                "UPDATE attempts SET request = request || ' ' WHERE rowid = 1",
                None,
            ),
            ("DELETE FROM attempts WHERE rowid = 2", None),
            (
                "UPDATE attempts SET pathway_id = 'pw_gone' WHERE rowid = 4",
                None,
            ),
            (
                "UPDATE approvals SET approver = 'human:b' WHERE rowid = 1",
                None,
            ),
            (
                "UPDATE approvals SET pathway_id = 'pw_gone' WHERE rowid = 1",
                None,
            ),
            ("DELETE FROM approvals", None),
            ("DELETE FROM pathways WHERE rowid = 5", None),
            (
                "INSERT INTO pathways (id, idempotency_key, definition, definition_digest, request_digest, state, version, proposer, created_at, updated_at) VALUES ('pw_forged', 'k', '{}', 'd', 'r', 'proposed', 1, 'p', 0, 0)",
                None,
            ),
        ];
        for (i, (change, known)) in changes.iter().enumerate() {
            let path = dir.path().join(format!("changed-{i}.db"));
            std::fs::copy(&clean, &path).unwrap();
            if !change.is_empty() {
                let conn = Connection::open(&path).unwrap();
                conn.pragma_update(None, "foreign_keys", false).unwrap();
                let mut stmt = conn.prepare(change).unwrap();
                if stmt.parameter_count() == 1 {
                    stmt.execute([&bogus]).unwrap();
                } else {
                    stmt.execute([]).unwrap();
                }
            }
            let all = reports(&path, *known);
            let (_, expected) = &all[0];
            assert_eq!(
                expected.is_ok(),
                i == 0,
                "change {change:?}: {:#?}",
                expected.problems
            );
            for (plan, report) in &all {
                assert_eq!(report, expected, "change {change:?}, {plan:?}");
            }
        }
    }
}
