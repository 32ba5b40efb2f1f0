//! A model-based test of the at-most-once rule (brief §11) and of database identity.
//!
//! `proptest` generates random sequences of 1 to [`MAX_STEPS`] steps and shrinks a
//! failing one to a minimal sequence. A step is one of: propose a request (4 keys, one
//! whose request holds a secret and so is stored redacted) through a runtime; act on a
//! handle from the pool (every public transition of its stage, plus `grant_approval`,
//! `reconcile`, `attest`, `bind`, `dispatch` and `restore_request`, through a runtime chosen
//! at random); `load` a random id; `recover`; restart a runtime.
//!
//! Three runtimes: R1 and R2 on database A, R3 on database B, all with [`SequentialIds`],
//! so pathway, attempt and approval ids collide across the databases. R1 and R2 share one
//! counter in three cases of four and one each in the fourth (so their attempt ids collide
//! too: that found the library bug pinned by the regression test at the end of this file). Handles (one enum over every stage type) and tokens (approvals,
//! reconciliations) go into one pool, whatever runtime made them; a step takes a handle
//! (usually the newest, so that one pathway is followed through its life) and a runtime
//! (usually one on the handle's database, often any of the three), so handles are used
//! with a runtime of the other database, or after another runtime moved their pathway on.
//!
//! Executors are in-process and count what they do in a shared log keyed by the request
//! (database tag + idempotency key): one applies and replies success; one replies success
//! without applying; one writes nothing and says so (`NothingWritten`); one reports a tool
//! failure (nothing applied); one applies and reports partial; one applies and loses the
//! reply (`PossiblyWritten`); one loses the request before applying (`PossiblyWritten`);
//! two reject without applying (classified not applied, or unknown); one lies about its
//! binding (binds, then refuses `binding_changed` at prepare). Any of them may hang (some
//! past the lease): inside `execute`, the other runtime on the same database (R3 itself on
//! B) loads and recovers the pathway, which must come back as `InFlightElsewhere`,
//! dispatches every stale handle of it, which must be refused as a conflict, and loads it
//! again. Readbacks and attestations tell the truth (they read the log) or cannot decide.
//!
//! After every public call the test checks:
//!
//! 1. at most once: each request was executed exactly as often as its database's ledger
//!    shows attempts; a new attempt started only after the previous one ended `not_sent`,
//!    `failed` or `not_applied` (the last by a reconciled not-applied verdict); its effect
//!    happened at most once (every verdict in the model is true) and never more often than
//!    attempts started;
//! 2. database identity: a call through a runtime of the other database (the handle's or
//!    the token's) failed and left both databases byte-identical; no call changed the
//!    database it was not made on (nor any database, for `bind` and `restore_request`);
//!    a refused call wrote nothing (but the `dispatch_refused` record of an executor's
//!    refusal);
//! 3. the stored state of every pathway is the one its events end in and the one the model
//!    expects from the calls' results; `load` and `recover` return exactly that (and
//!    `recover` every unresolved pathway); `verify(None)` passes on both databases.
//!
//! CI runs [`CI_CASES`] cases on SQLite ([`CI_CASES_PG`] on PostgreSQL), in two tests of
//! half each so that they use both cores.
//! The long run: `RPR_MODEL_CASES=100000 cargo test --release --test model -- --nocapture`
//! (`--nocapture` prints what the cases reached). A failure prints the shrunk sequence with
//! the trace of its calls; proptest records its seed in `tests/model.proptest-regressions`
//! and replays it first on the next run. The databases live in `/dev/shm` where it exists:
//! this test is about the steps, not about fsync.
//!
//! On either store (`RPR_TEST_BACKEND`): on PostgreSQL the two databases are two schemas,
//! and a change is found by comparing dumps after every call (there is no `data_version`).

mod common;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};

use std::time::{Duration, Instant};

use common::{Sql, TempDir, actor, allowed, db_dump, definition};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};
use rpr::executor::{
    Binding, Delivery, Executor, Observation, Readback, Refusal, RejectionClass, Request,
};
use rpr::stage::{
    Approved, AwaitingApproval, Bound, Gated, Held, HumanGate, PartiallyCompleted, Proposed,
    ReadyToResume, Reconcilable, RepairRequired, RepairUnsettled, Returned, Stage, Stopped,
    Unknown,
};
use rpr::store::StoreError;
use rpr::token::{
    Applied, Approval, Attestation, NotApplied, Reconciled, Reconciliation, Unresolved,
};
use rpr::{
    ActionClass, Actor, Admission, Confirmed, Decided, Decision, Definition, IdSource, Outcome,
    Pathway, PathwayError, Proposal, Ready, Refused, Runtime, SequentialIds, State, StoredPathway,
};
use serde_json::{Value, json};

/// Cases in CI: on SQLite; on PostgreSQL (about 2 s a case here: two schemas made per
/// case, every database dumped after every call, leases of 300 ms) [`CI_CASES_PG`].
const CI_CASES: u32 = 2000;
const CI_CASES_PG: u32 = 200;
/// The longest generated sequence.
const MAX_STEPS: usize = 40;
/// The lease of every runtime: shorter than a slow executor's hang. On PostgreSQL, where
/// the lease alone keeps a live owner's attempt (no process is judged), it must outlast the
/// heartbeat's start (a connection of its own) and a renewal's round trip: 20 ms does not.
fn lease() -> Duration {
    if common::pg::on() {
        Duration::from_millis(300)
    } else {
        Duration::from_millis(20)
    }
}
/// How long a slow executor sleeps inside `execute`: more than twice the lease.
fn slow() -> Duration {
    lease() * 9 / 4
}
/// Attempt statuses after which the request certainly did not take effect.
const SETTLED: &[&str] = &["not_sent", "failed", "not_applied"];
/// Bounds on the pools, so that recover-heavy sequences stay fast.
const MAX_HANDLES: usize = 40;
const MAX_TOKENS: usize = 24;

// ---------------------------------------------------------------------------
// The generated steps.

/// What an executor does with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exec {
    /// Applies the effect and replies success.
    Apply,
    /// Writes nothing and says so (`NothingWritten`).
    NothingWritten,
    /// Writes nothing; the tool reports failure (`ToolFailed`).
    ToolFailed,
    /// Replies success, but the effect did not happen (readback will say so).
    SucceedWithoutEffect,
    /// Applies the effect and reports partial.
    Partial,
    /// Applies the effect, then the reply is lost (`PossiblyWritten`).
    LoseReply,
    /// The request is lost before it is applied (`PossiblyWritten`).
    LoseRequest,
    /// Writes nothing; a protocol rejection the policy calls not applied.
    RejectNotApplied,
    /// Writes nothing; a protocol rejection classified unknown.
    RejectUnknown,
    /// Binds like the others, then refuses at prepare with `binding_changed`.
    LieAboutBinding,
}

/// Whether the executor hangs inside `execute` (and lets the other runtime try the pathway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hang {
    No,
    Yes,
    /// Hangs longer than the lease.
    Slow,
}

/// Which runtime a step on a handle goes through.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// A runtime on the handle's database (R1 or R2 for A, R3 for B).
    Own(u8),
    /// Any of the three.
    Any(u8),
}

/// A step on a handle of the pool.
#[derive(Debug, Clone)]
struct Act {
    handle: u8,
    via: Via,
    /// Which of the stage's actions.
    action: u8,
    /// A second choice (decision, verdict, readback, actor role).
    arg: u8,
    /// Which token of the pool.
    token: u8,
    exec: Exec,
    hang: Hang,
    /// Whether the acting actor holds the role (else an intruder acts).
    honest: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Propose {
        rt: u8,
        key: u8,
        /// The declared class.
        mutating: bool,
        /// A `get` (a target the executors call read-only) instead of a `put`.
        reads: bool,
        other_content: bool,
        /// Admitted in the same commit (`propose_and_admit`), with this decision selector.
        admit: Option<u8>,
    },
    Act(Act),
    Load {
        rt: u8,
        id: u8,
    },
    Recover {
        rt: u8,
    },
    /// Drops a runtime and opens it again (same database, id counter and clock).
    Restart {
        rt: u8,
    },
}

fn exec_strategy() -> impl Strategy<Value = Exec> {
    prop_oneof![
        4 => Just(Exec::Apply),
        2 => Just(Exec::SucceedWithoutEffect),
        1 => Just(Exec::NothingWritten),
        1 => Just(Exec::ToolFailed),
        1 => Just(Exec::Partial),
        2 => Just(Exec::LoseReply),
        2 => Just(Exec::LoseRequest),
        1 => Just(Exec::RejectNotApplied),
        1 => Just(Exec::RejectUnknown),
        1 => Just(Exec::LieAboutBinding),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let via = prop_oneof![7 => any::<u8>().prop_map(Via::Own), 3 => any::<u8>().prop_map(Via::Any)];
    let hang = prop_oneof![12 => Just(Hang::No), 6 => Just(Hang::Yes), 1 => Just(Hang::Slow)];
    let act = (
        any::<u8>(),
        via,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        exec_strategy(),
        hang,
        prop::bool::weighted(0.92),
    )
        .prop_map(
            |(handle, via, action, arg, token, exec, hang, honest)| Act {
                handle,
                via,
                action,
                arg,
                token,
                exec,
                hang,
                honest,
            },
        );
    prop_oneof![
        3 => (
            0..3_u8,
            0..4_u8,
            prop::bool::weighted(0.75),
            prop::bool::weighted(0.4),
            prop::bool::weighted(0.1),
            prop::option::weighted(0.3, any::<u8>()),
        )
            .prop_map(|(rt, key, mutating, reads, other_content, admit)| Op::Propose {
                rt,
                key,
                mutating,
                reads,
                other_content,
                admit,
            }),
        14 => act.prop_map(Op::Act),
        2 => (0..3_u8, any::<u8>()).prop_map(|(rt, id)| Op::Load { rt, id }),
        1 => (0..3_u8).prop_map(|rt| Op::Recover { rt }),
        1 => (0..3_u8).prop_map(|rt| Op::Restart { rt }),
    ]
}

/// One case: whether R1 and R2 share their id counter, and the steps.
fn case_strategy() -> impl Strategy<Value = (bool, Vec<Op>)> {
    let separate = 0.25;
    (
        prop::bool::weighted(separate),
        prop::collection::vec(op_strategy(), 1..=MAX_STEPS),
    )
}

/// The admission decision a selector picks.
fn decision_of(arg: u8) -> Decision {
    match arg % 6 {
        0..=2 => Decision::Allow,
        3 => Decision::Hold,
        4 => Decision::HumanGate,
        _ => Decision::Deny("model".into()),
    }
}

// ---------------------------------------------------------------------------
// Handles and tokens.

/// A live handle, in any non-terminal stage.
#[derive(Debug)]
enum H {
    Proposed(Pathway<Proposed>),
    AwaitingApproval(Pathway<AwaitingApproval>),
    HumanGate(Pathway<HumanGate>),
    Held(Pathway<Held>),
    Approved(Pathway<Approved>),
    /// Bound; `true` when bound from `ReadyToResume`.
    Bound(Pathway<Bound>, bool),
    Returned(Pathway<Returned>),
    Unknown(Pathway<Unknown>),
    Stopped(Pathway<Stopped>),
    Partial(Pathway<PartiallyCompleted>),
    RepairUnsettled(Pathway<RepairUnsettled>),
    RepairRequired(Pathway<RepairRequired>),
    ReadyToResume(Pathway<ReadyToResume>),
}

/// Applies `$e` to the pathway inside any variant of `H` (rebuilding the same variant
/// with `$wrap`).
macro_rules! each_h {
    ($h:expr, $p:ident => $e:expr) => {
        match $h {
            H::Proposed($p) => $e,
            H::AwaitingApproval($p) => $e,
            H::HumanGate($p) => $e,
            H::Held($p) => $e,
            H::Approved($p) => $e,
            H::Bound($p, _) => $e,
            H::Returned($p) => $e,
            H::Unknown($p) => $e,
            H::Stopped($p) => $e,
            H::Partial($p) => $e,
            H::RepairUnsettled($p) => $e,
            H::RepairRequired($p) => $e,
            H::ReadyToResume($p) => $e,
        }
    };
}

/// `restore_request` on one variant: the same variant back, and the error if refused.
macro_rules! restore_h {
    ($h:expr, $req:expr; $($variant:ident),*; bound) => {
        match $h {
            $(H::$variant(p) => match p.restore_request($req) {
                Ok(p) => (H::$variant(p), None),
                Err(r) => {
                    let (p, e) = r.into_parts();
                    (H::$variant(p), Some(e))
                }
            },)*
            H::Bound(p, resumed) => match p.restore_request($req) {
                Ok(p) => (H::Bound(p, resumed), None),
                Err(r) => {
                    let (p, e) = r.into_parts();
                    (H::Bound(p, resumed), Some(e))
                }
            },
        }
    };
}

impl H {
    fn id(&self) -> &str {
        each_h!(self, p => p.id())
    }

    fn is_redacted(&self) -> bool {
        each_h!(self, p => p.is_redacted())
    }

    /// Supplies the full request again (`Pathway::restore_request`).
    fn restore(self, request: Request) -> (H, Option<PathwayError>) {
        restore_h!(self, request;
            Proposed, AwaitingApproval, HumanGate, Held, Approved, Returned, Unknown,
            Stopped, Partial, RepairUnsettled, RepairRequired, ReadyToResume; bound)
    }
}

/// A pathway value that may go back into the pool (terminal stages do not).
trait Keep: Sized {
    fn into_h(self) -> Option<H>;
}

macro_rules! keep {
    ($($stage:ident => $variant:ident),* $(,)?) => {$(
        impl Keep for Pathway<$stage> {
            fn into_h(self) -> Option<H> {
                Some(H::$variant(self))
            }
        }
    )*};
}
keep!(
    Proposed => Proposed,
    AwaitingApproval => AwaitingApproval,
    HumanGate => HumanGate,
    Held => Held,
    Approved => Approved,
    Returned => Returned,
    Unknown => Unknown,
    Stopped => Stopped,
    PartiallyCompleted => Partial,
    RepairUnsettled => RepairUnsettled,
    RepairRequired => RepairRequired,
    ReadyToResume => ReadyToResume,
);
macro_rules! terminal {
    ($($stage:ident),*) => {$(
        impl Keep for Pathway<rpr::stage::$stage> {
            fn into_h(self) -> Option<H> {
                None
            }
        }
    )*};
}
terminal!(Completed, Denied, Aborted);

/// A handle and the database (0 = A, 1 = B) it came from.
#[derive(Debug)]
struct Entry {
    db: usize,
    h: H,
}

#[derive(Debug)]
enum T {
    Approval(Approval),
    Applied(Reconciliation<Applied>),
    NotApplied(Reconciliation<NotApplied>),
    Unresolved(Reconciliation<Unresolved>),
}

impl T {
    fn from_reconciled(r: Reconciled) -> Option<Self> {
        match r {
            Reconciled::Applied(t) => Some(T::Applied(t)),
            Reconciled::NotApplied(t) => Some(T::NotApplied(t)),
            Reconciled::Unresolved(t) => Some(T::Unresolved(t)),
            _ => None,
        }
    }
    fn name(&self) -> &'static str {
        match self {
            T::Approval(_) => "approval",
            T::Applied(_) => "applied",
            T::NotApplied(_) => "not_applied",
            T::Unresolved(_) => "unresolved",
        }
    }
}

/// A token and the database of the pathway it was made for.
#[derive(Debug)]
struct Tok {
    db: usize,
    t: T,
}

// ---------------------------------------------------------------------------
// The world of one case.

const DB_NAMES: [&str; 2] = ["A", "B"];
const RT_NAMES: [&str; 3] = ["R1", "R2", "R3"];

fn db_of(rt: usize) -> usize {
    usize::from(rt == 2)
}

/// A fresh directory for a case's two databases: in memory (`/dev/shm`) where there is
/// one, since this test is about the steps' logic and not about fsync, else the temp dir.
fn scratch_dir() -> TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = TempDir::new_in(shm, "model")
    {
        return dir;
    }
    TempDir::new("model")
}

/// A read-only connection for watching a database.
fn watch(path: &std::path::Path) -> Sql {
    Sql::open_read_only(path)
}

/// The runtimes' clocks start here.
const T0: i64 = 1_700_000_000_000;

/// A clock that ticks one millisecond per reading and survives its runtime's restart.
struct SharedClock(Arc<AtomicI64>);

impl rpr::Clock for SharedClock {
    fn now_ms(&self) -> i64 {
        self.0.fetch_add(1, AtomicOrdering::Relaxed)
    }
}

/// Opens a runtime on `path` with a shared id counter and clock.
fn open_runtime(
    path: &std::path::Path,
    ids: &Arc<SequentialIds>,
    clock: &Arc<AtomicI64>,
) -> Runtime {
    Runtime::builder(path)
        .ids(SharedIds(Arc::clone(ids)))
        .clock(SharedClock(Arc::clone(clock)))
        .lease(lease())
        .open()
        .unwrap()
}

/// A runtime drawing ids from a counter it may share (R1 and R2) or keep across restarts.
struct SharedIds(Arc<SequentialIds>);

impl IdSource for SharedIds {
    fn next_id(&self, prefix: &str) -> String {
        self.0.next_id(prefix)
    }
}

/// How one public call ended, for the checks.
enum CallEnd {
    Ok,
    Refused(String),
    /// Refused, but a record of the refusal may have been written (`dispatch_refused`).
    RefusedRecorded(String),
}

struct World {
    /// R1, R2 (database A) and R3 (database B); replaced by a restart.
    rts: [RefCell<Runtime>; 3],
    paths: [PathBuf; 2],
    /// Each runtime's id counter and clock, kept across its restarts.
    ids: [Arc<SequentialIds>; 3],
    clocks: [Arc<AtomicI64>; 3],
    separate_ids: bool,
    handles: RefCell<Vec<Entry>>,
    tokens: RefCell<Vec<Tok>>,
    /// `(database, key)` → effects applied by executors.
    effects: RefCell<BTreeMap<(usize, String), u32>>,
    /// `(database, key)` → `execute` calls.
    executes: RefCell<BTreeMap<(usize, String), u32>>,
    /// Per database: key → attempts its ledger shows (refreshed when the database changes).
    attempts: RefCell<[BTreeMap<String, u32>; 2]>,
    /// `(database, pathway, key)` → the full definition of the pathway proposed with it. Keyed
    /// by pathway too: two unstored `propose_and_bind` handles may share a key with different
    /// content, and only the one dispatched first is stored under it.
    definitions: RefCell<BTreeMap<(usize, String, String), Definition>>,
    /// `(database, pathway)` → the state the calls' results say it is in.
    expected: RefCell<BTreeMap<(usize, String), State>>,
    /// A read-only connection to each database, and the last `PRAGMA data_version` and
    /// dump seen through it (on SQLite a dump is taken only after a commit; PostgreSQL has
    /// no such counter, `None`, and is dumped after every call).
    watch: [Sql; 2],
    versions: Cell<[Option<i64>; 2]>,
    dumps: RefCell<[String; 2]>,
    trace: RefCell<Vec<String>>,
    failures: RefCell<Vec<String>>,
    calls: Cell<usize>,
    coverage: RefCell<BTreeMap<String, u64>>,
    /// Attempts already counted in `coverage`.
    counted: RefCell<BTreeSet<(usize, String)>>,
    /// Last, so that they are removed after the runtimes and connections are closed.
    _dirs: [TempDir; 2],
}

impl World {
    fn new(separate_ids: bool) -> Self {
        let dirs = [scratch_dir(), scratch_dir()];
        let paths = [dirs[0].db(), dirs[1].db()];
        let shared = Arc::new(SequentialIds::default());
        let ids = [
            Arc::clone(&shared),
            if separate_ids {
                Arc::new(SequentialIds::default())
            } else {
                shared
            },
            Arc::new(SequentialIds::default()),
        ];
        let clocks = [(); 3].map(|()| Arc::new(AtomicI64::new(T0)));
        let world_rt = |i: usize| open_runtime(&paths[db_of(i)], &ids[i], &clocks[i]);
        let rts = [world_rt(0), world_rt(1), world_rt(2)];
        assert_eq!(rts[0].database_id(), rts[1].database_id());
        assert_ne!(rts[0].database_id(), rts[2].database_id());
        let rts = rts.map(RefCell::new);
        let watch = [watch(&paths[0]), watch(&paths[1])];
        let versions = Cell::new([watch[0].data_version(), watch[1].data_version()]);
        let dumps = [watch[0].dump(), watch[1].dump()];
        assert_eq!(dumps[0], db_dump(&paths[0]));
        Self {
            rts,
            paths,
            ids,
            clocks,
            separate_ids,
            handles: RefCell::new(Vec::new()),
            tokens: RefCell::new(Vec::new()),
            effects: RefCell::new(BTreeMap::new()),
            executes: RefCell::new(BTreeMap::new()),
            attempts: RefCell::new([BTreeMap::new(), BTreeMap::new()]),
            definitions: RefCell::new(BTreeMap::new()),
            expected: RefCell::new(BTreeMap::new()),
            watch,
            versions,
            dumps: RefCell::new(dumps),
            trace: RefCell::new(Vec::new()),
            failures: RefCell::new(Vec::new()),
            calls: Cell::new(0),
            coverage: RefCell::new(BTreeMap::new()),
            counted: RefCell::new(BTreeSet::new()),
            _dirs: dirs,
        }
    }

    /// Runtime `i` (R1, R2, R3).
    fn rt(&self, i: usize) -> std::cell::Ref<'_, Runtime> {
        self.rts[i].borrow()
    }

    fn cover(&self, what: &str) {
        *self
            .coverage
            .borrow_mut()
            .entry(what.to_owned())
            .or_default() += 1;
    }

    fn fail(&self, what: String) {
        self.failures.borrow_mut().push(what);
    }

    fn keep<P: Keep>(&self, db: usize, p: P) {
        if let Some(h) = p.into_h() {
            let mut handles = self.handles.borrow_mut();
            handles.push(Entry { db, h });
            if handles.len() > MAX_HANDLES {
                handles.remove(0);
            }
        }
    }

    fn keep_token(&self, db: usize, t: T) {
        let mut tokens = self.tokens.borrow_mut();
        tokens.push(Tok { db, t });
        if tokens.len() > MAX_TOKENS {
            tokens.remove(0);
        }
    }

    fn expect(&self, db: usize, id: &str, state: State) {
        self.expected
            .borrow_mut()
            .insert((db, id.to_owned()), state);
    }

    /// The runtime a step on a handle of database `db` goes through.
    fn via(db: usize, via: Via) -> usize {
        match via {
            Via::Own(r) if db == 0 => usize::from(r % 2),
            Via::Own(_) => 2,
            Via::Any(r) => usize::from(r % 3),
        }
    }

    // -----------------------------------------------------------------------
    // The checks, after every public call.

    /// Checks the invariants after one public call made through runtime `rt` (`None`
    /// for `bind`, which takes no runtime); `foreign` when the handle or token belongs
    /// to the other database.
    fn after(&self, what: &str, rt: Option<usize>, foreign: bool, result: &CallEnd) {
        let n = self.calls.get() + 1;
        self.calls.set(n);
        let shown = match result {
            CallEnd::Ok => "ok".to_owned(),
            CallEnd::Refused(e) => format!("refused: {e}"),
            CallEnd::RefusedRecorded(e) => format!("refused (recorded): {e}"),
        };
        match result {
            CallEnd::Refused(e) | CallEnd::RefusedRecorded(e) => {
                let kind = e.split(['(', ':']).next().unwrap_or_default();
                self.cover(&format!("refused: {kind}"));
            }
            CallEnd::Ok => {}
        }
        let via = rt.map_or("--", |r| RT_NAMES[r]);
        self.trace
            .borrow_mut()
            .push(format!("{n:3} {via} {what} -> {shown}"));
        if foreign {
            self.cover("foreign call refused");
        }
        let changed = self.changed();
        // Invariant 2: database identity.
        match rt {
            Some(rt) => {
                let own = db_of(rt);
                if foreign {
                    if matches!(result, CallEnd::Ok) {
                        self.fail(format!(
                            "call {n}: {what} through {} (database {}) succeeded on a handle or token of the other database",
                            RT_NAMES[rt], DB_NAMES[own]
                        ));
                    }
                    if changed[0] || changed[1] {
                        self.fail(format!(
                            "call {n}: {what} through {} with a foreign handle or token changed database(s) {}{}",
                            RT_NAMES[rt],
                            if changed[0] { "A " } else { "" },
                            if changed[1] { "B" } else { "" }
                        ));
                    }
                }
                if changed[1 - own] {
                    self.fail(format!(
                        "call {n}: {what} through {} changed database {}, which it is not on",
                        RT_NAMES[rt],
                        DB_NAMES[1 - own]
                    ));
                }
                if matches!(result, CallEnd::Refused(_)) && changed[own] {
                    self.fail(format!(
                        "call {n}: {what} was refused but changed database {}",
                        DB_NAMES[own]
                    ));
                }
            }
            None => {
                if changed[0] || changed[1] {
                    self.fail(format!(
                        "call {n}: {what} takes no runtime but changed a database"
                    ));
                }
            }
        }
        for (db, c) in changed.into_iter().enumerate() {
            if c {
                self.check_database(n, db);
            }
        }
        self.check_effects(n);
    }

    /// Which databases are no longer byte-identical to the last look (a full dump is
    /// compared only when a commit happened since).
    fn changed(&self) -> [bool; 2] {
        let mut versions = self.versions.get();
        let mut changed = [false; 2];
        for db in 0..2 {
            let v = self.watch[db].data_version();
            if v.is_none() || v != versions[db] {
                versions[db] = v;
                let now = self.watch[db].dump();
                let mut dumps = self.dumps.borrow_mut();
                changed[db] = now != dumps[db];
                dumps[db] = now;
            }
        }
        self.versions.set(versions);
        changed
    }

    /// Invariants 1 and 3 over one database's rows and ledger.
    fn check_database(&self, n: usize, db: usize) {
        let rt = self.rt(if db == 0 { 0 } else { 2 });
        let name = DB_NAMES[db];
        match rt.verify(None) {
            Ok(report) if report.is_ok() => {}
            Ok(report) => self.fail(format!(
                "call {n}: verify(None) on database {name} reports {:#?}",
                report.problems
            )),
            Err(e) => self.fail(format!("call {n}: verify(None) on {name} failed: {e}")),
        }
        let rows: Vec<rpr::store::PathwayRecord> = self.watch[db]
            .texts("SELECT id FROM pathways ORDER BY id")
            .iter()
            .map(|id| rt.pathway_record(id).unwrap().unwrap())
            .collect();
        let expected = self.expected.borrow();
        let mut by_key: BTreeMap<String, u32> = BTreeMap::new();
        for row in &rows {
            match expected.get(&(db, row.id.clone())) {
                Some(s) if *s == row.state => {}
                other => self.fail(format!(
                    "call {n}: pathway {} on {name} is stored {}, but the calls' results say {other:?}",
                    row.id, row.state
                )),
            }
            let events = rt.pathway_events(&row.id).unwrap();
            let mut last_to: Option<String> = None;
            // (attempt, its status as the events record it so far)
            let mut attempts: Vec<(String, String)> = Vec::new();
            for e in &events {
                let e: Value = serde_json::from_str(&e.event).unwrap();
                let kind = e["kind"].as_str().unwrap_or_default();
                let attempt = e["attempt"].as_str();
                let status = e["attempt_status"].as_str();
                if kind == "attempt_started" {
                    let id = attempt.unwrap_or_default().to_owned();
                    if let Some((prev, prev_status)) = attempts.last() {
                        if SETTLED.contains(&prev_status.as_str()) {
                            if self.counted.borrow_mut().insert((db, id.clone())) {
                                self.cover(&format!("new attempt after {prev_status}"));
                            }
                        } else {
                            self.fail(format!(
                                "call {n}: pathway {} on {name}: attempt {id} started while attempt {prev} had ended {prev_status}, with no not-applied verdict between them",
                                row.id
                            ));
                        }
                    }
                    attempts.push((id, status.unwrap_or_default().to_owned()));
                } else if let (Some(a), Some(s)) = (attempt, status) {
                    match attempts.iter_mut().find(|(id, _)| id == a) {
                        Some(entry) => s.clone_into(&mut entry.1),
                        None => self.fail(format!(
                            "call {n}: pathway {} on {name}: event {kind} names attempt {a}, never started",
                            row.id
                        )),
                    }
                }
                last_to = e["to"].as_str().map(str::to_owned);
            }
            if last_to.as_deref() != Some(row.state.as_str()) {
                self.fail(format!(
                    "call {n}: pathway {} on {name} is stored {}, its events end in {last_to:?}",
                    row.id, row.state
                ));
            }
            let started = u32::try_from(attempts.len()).unwrap();
            *by_key.entry(row.idempotency_key.clone()).or_default() += started;
        }
        let stored: BTreeSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        for (edb, id) in expected.keys() {
            if *edb == db && !stored.contains(id.as_str()) {
                self.fail(format!(
                    "call {n}: pathway {id} was created on {name} but is not stored"
                ));
            }
        }
        self.attempts.borrow_mut()[db] = by_key;
    }

    /// Invariant 1 over the effect log: each request executed exactly as often as its
    /// ledger shows attempts, and applied at most once.
    fn check_effects(&self, n: usize) {
        let executes = self.executes.borrow();
        let effects = self.effects.borrow();
        let attempts = self.attempts.borrow();
        let mut keys: BTreeSet<(usize, String)> = executes.keys().cloned().collect();
        keys.extend(effects.keys().cloned());
        for (db, by_key) in attempts.iter().enumerate() {
            keys.extend(by_key.keys().map(|k| (db, k.clone())));
        }
        for k in keys {
            let ex = executes.get(&k).copied().unwrap_or(0);
            let ef = effects.get(&k).copied().unwrap_or(0);
            let at = attempts[k.0].get(&k.1).copied().unwrap_or(0);
            let name = format!("request {}/{}", DB_NAMES[k.0], k.1);
            if ex != at {
                self.fail(format!(
                    "call {n}: {name} was executed {ex} times, its database's ledger shows {at} attempts"
                ));
            }
            if ef > at {
                self.fail(format!(
                    "call {n}: {name} took effect {ef} times, but only {at} attempts started"
                ));
            }
            if ef > 1 {
                self.fail(format!(
                    "call {n}: {name} took effect {ef} times (every verdict in this model is true)"
                ));
            }
        }
    }

    // -----------------------------------------------------------------------
    // Steps.

    fn run(&self, op: &Op) {
        match op {
            Op::Propose {
                rt,
                key,
                mutating,
                reads,
                other_content,
                admit,
            } => self.propose(
                usize::from(*rt),
                *key,
                *mutating,
                *reads,
                *other_content,
                *admit,
            ),
            Op::Act(a) => self.act(a),
            Op::Load { rt, id } => self.load(usize::from(*rt), *id),
            Op::Recover { rt } => self.recover(usize::from(*rt)),
            Op::Restart { rt } => self.restart(usize::from(*rt)),
        }
    }

    /// Drops runtime `i` and opens it again: its handles stay valid (they belong to the
    /// database, not to the runtime).
    fn restart(&self, i: usize) {
        let new = open_runtime(&self.paths[db_of(i)], &self.ids[i], &self.clocks[i]);
        drop(self.rts[i].replace(new));
        self.cover("restart");
        self.after(
            &format!("restart {}", RT_NAMES[i]),
            Some(i),
            false,
            &CallEnd::Ok,
        );
    }

    fn propose(
        &self,
        rt: usize,
        key: u8,
        mutating: bool,
        reads: bool,
        other_content: bool,
        admit: Option<u8>,
    ) {
        let db = db_of(rt);
        let key = format!("k{key}");
        let class = if mutating {
            ActionClass::Mutating
        } else {
            ActionClass::ReadOnly
        };
        let mut d = definition(&key, class);
        let mut arguments =
            json!({"db": DB_NAMES[db], "key": key, "value": if other_content { "w" } else { "v" }});
        if key == "k3" {
            // Stored redacted: a loaded handle must have its request restored before binding.
            arguments["token"] = json!("s3cret");
        }
        d.request = Request::new(if reads { "get" } else { "put" }, arguments);
        let full = d.clone();
        let what = format!(
            "propose {key} ({class:?} {}{})",
            d.request.action,
            if other_content { ", other content" } else { "" }
        );
        if let Some(arg) = admit {
            if arg % 3 == 2 {
                self.propose_and_bind(rt, db, &key, d, full, &what, arg);
            } else {
                self.propose_and_admit(rt, db, &key, d, full, &what, arg);
            }
            return;
        }
        match self.rt(rt).propose(&actor("proposer"), d) {
            Ok(Proposal::New(p)) => {
                self.expect(db, p.id(), State::Proposed);
                self.definitions
                    .borrow_mut()
                    .insert((db, p.id().to_owned(), key.clone()), full);
                self.after(
                    &format!("{what} = {}", p.id()),
                    Some(rt),
                    false,
                    &CallEnd::Ok,
                );
                self.keep(db, p);
            }
            Ok(Proposal::Existing(s)) => {
                self.cover("proposal replayed");
                let got = self.adopt(db, rt, s, &what, None);
                self.after(&format!("{what} -> {got}"), Some(rt), false, &CallEnd::Ok);
            }
            Ok(_) => self.fail(format!("{what}: an unknown proposal variant")),
            Err(e) => self.proposal_refused(rt, &what, &e),
        }
    }

    /// `Runtime::propose_and_admit`: the proposal and its admission in one commit.
    #[expect(
        clippy::too_many_arguments,
        reason = "the propose step's context, passed on"
    )]
    fn propose_and_admit(
        &self,
        rt: usize,
        db: usize,
        key: &str,
        d: Definition,
        full: Definition,
        what: &str,
        arg: u8,
    ) {
        let decision = decision_of(arg);
        let what = format!("{what}, admitted at once ({decision:?})");
        let policy = move |_: &Definition| decision.clone();
        match self.rt(rt).propose_and_admit(
            &actor("proposer"),
            &actor("decision_owner"),
            d,
            &policy,
        ) {
            Ok(Decided::New(admission)) => {
                let id = match &admission {
                    Admission::Approved(p) => p.id(),
                    Admission::AwaitingApproval(p) => p.id(),
                    Admission::HumanGate(p) => p.id(),
                    Admission::Denied(p) => p.id(),
                    other => {
                        self.fail(format!("{what}: unknown admission {other:?}"));
                        return;
                    }
                };
                self.definitions
                    .borrow_mut()
                    .insert((db, id.to_owned(), key.to_owned()), full);
                let call = |id: &str| Call {
                    name: "propose_and_admit",
                    id: id.to_owned(),
                    db,
                    rt,
                    foreign: false,
                };
                match admission {
                    Admission::Approved(p) => self.ok(&call(p.id()), p),
                    Admission::AwaitingApproval(p) => self.ok(&call(p.id()), p),
                    Admission::HumanGate(p) => self.ok(&call(p.id()), p),
                    Admission::Denied(p) => self.ok(&call(p.id()), p),
                    other => self.fail(format!("{what}: unknown admission {other:?}")),
                }
            }
            Ok(Decided::Existing(s)) => {
                self.proposal_replayed("propose_and_admit", db, rt, s, &what);
            }
            Ok(_) => self.fail(format!("{what}: an unknown variant")),
            Err(e) => self.proposal_refused(rt, &what, &e),
        }
    }

    /// `Runtime::propose_and_bind`: admitted and, when the policy allows it, bound without a
    /// commit; the dispatch stores it with its attempt record.
    #[expect(
        clippy::too_many_arguments,
        reason = "the propose step's context, passed on"
    )]
    fn propose_and_bind(
        &self,
        rt: usize,
        db: usize,
        key: &str,
        d: Definition,
        full: Definition,
        what: &str,
        arg: u8,
    ) {
        let decision = decision_of(arg / 3);
        let what = format!("{what}, bound at once ({decision:?})");
        let policy = move |_: &Definition| decision.clone();
        let mut ex = ModelExec {
            world: self,
            kind: Exec::Apply,
            hang: None,
        };
        let ready = self.rt(rt).propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            d,
            &policy,
            &mut ex,
        );
        let call = |id: &str| Call {
            name: "propose_and_bind",
            id: id.to_owned(),
            db,
            rt,
            foreign: false,
        };
        let new = |id: &str| {
            self.definitions
                .borrow_mut()
                .insert((db, id.to_owned(), key.to_owned()), full.clone());
        };
        match ready {
            Ok(Ready::Bound(p)) => {
                new(p.id());
                self.cover("propose_and_bind -> bound, not stored");
                if self.changed()[db] {
                    self.fail(format!(
                        "{what}: stored something before the pathway's dispatch"
                    ));
                }
                if p.is_stored() {
                    self.fail(format!("{what}: a bound pathway says it is stored"));
                }
                self.after(
                    &format!("{what} = {} (not stored)", p.id()),
                    Some(rt),
                    false,
                    &CallEnd::Ok,
                );
                let mut handles = self.handles.borrow_mut();
                handles.push(Entry {
                    db,
                    h: H::Bound(p, false),
                });
                if handles.len() > MAX_HANDLES {
                    handles.remove(0);
                }
            }
            Ok(Ready::NotBound(refused)) => {
                let (p, e) = refused.into_parts();
                new(p.id());
                self.cover("propose_and_bind -> not bound, stored approved");
                self.expect(db, p.id(), State::Approved);
                self.after(
                    &call(p.id()).what("not bound"),
                    Some(rt),
                    false,
                    &CallEnd::RefusedRecorded(describe(&e)),
                );
                self.keep(db, p);
            }
            Ok(Ready::Admitted(admission)) => match admission {
                Admission::AwaitingApproval(p) => {
                    new(p.id());
                    self.ok(&call(p.id()), p);
                }
                Admission::HumanGate(p) => {
                    new(p.id());
                    self.ok(&call(p.id()), p);
                }
                Admission::Denied(p) => {
                    new(p.id());
                    self.ok(&call(p.id()), p);
                }
                other => self.fail(format!("{what}: admitted as {other:?}")),
            },
            Ok(Ready::Existing(s)) => self.proposal_replayed("propose_and_bind", db, rt, s, &what),
            Ok(_) => self.fail(format!("{what}: an unknown variant")),
            Err(e) => self.proposal_refused(rt, &what, &e),
        }
    }

    /// A proposal refused: only a key used with other content, or (with separate id counters)
    /// an id another runtime already stored, may refuse one.
    fn proposal_refused(&self, rt: usize, what: &str, e: &PathwayError) {
        let expected = matches!(e, PathwayError::IdempotencyConflict { .. })
            || (self.separate_ids && store_refused(e));
        if !expected {
            self.fail(format!("{what} through {}: {e}", RT_NAMES[rt]));
        }
        self.after(what, Some(rt), false, &CallEnd::Refused(describe(e)));
    }

    /// A known key with the same content: the stored pathway, replayed by `how`.
    fn proposal_replayed(&self, how: &str, db: usize, rt: usize, s: StoredPathway, what: &str) {
        self.cover(&format!("proposal replayed by {how}"));
        let got = self.adopt(db, rt, s, what, None);
        self.after(&format!("{what} -> {got}"), Some(rt), false, &CallEnd::Ok);
    }

    /// Every pathway id either database has (so `load` hits collisions), and one that
    /// neither has.
    fn known_ids(&self) -> Vec<String> {
        let mut ids: BTreeSet<String> = self
            .expected
            .borrow()
            .keys()
            .map(|(_, id)| id.clone())
            .collect();
        ids.insert("pw_999999".into());
        ids.into_iter().collect()
    }

    fn load(&self, rt: usize, id: u8) {
        let ids = self.known_ids();
        let id = &ids[usize::from(id) % ids.len()];
        let db = db_of(rt);
        let what = format!("load {id}");
        match self.rt(rt).load(id) {
            Ok(s) => {
                let got = self.adopt(db, rt, s, &what, None);
                self.after(&format!("{what} -> {got}"), Some(rt), false, &CallEnd::Ok);
            }
            Err(PathwayError::Store(StoreError::NoSuchPathway(_)))
                if !self.expected.borrow().contains_key(&(db, id.clone())) =>
            {
                self.cover("load of an id the database lacks");
                self.after(
                    &what,
                    Some(rt),
                    false,
                    &CallEnd::Refused("no such pathway".into()),
                );
            }
            Err(e) => {
                self.fail(format!("{what} through {}: {e}", RT_NAMES[rt]));
                self.after(&what, Some(rt), false, &CallEnd::Refused(describe(&e)));
            }
        }
    }

    fn recover(&self, rt: usize) {
        let db = db_of(rt);
        match self.rt(rt).recover() {
            Ok(all) => {
                let got: BTreeSet<String> = all.iter().map(|s| s.id().to_owned()).collect();
                let want: BTreeSet<String> = self
                    .expected
                    .borrow()
                    .iter()
                    .filter(|((d, _), s)| *d == db && !s.is_terminal())
                    .map(|((_, id), _)| id.clone())
                    .collect();
                if got != want {
                    self.fail(format!(
                        "recover through {} returned {got:?}, the unresolved pathways are {want:?}",
                        RT_NAMES[rt]
                    ));
                }
                self.cover("recover");
                self.after(
                    &format!("recover ({} pathways)", all.len()),
                    Some(rt),
                    false,
                    &CallEnd::Ok,
                );
                for s in all {
                    let _ = self.adopt(db, rt, s, "recovered", None);
                }
            }
            Err(e) => {
                self.fail(format!("recover through {}: {e}", RT_NAMES[rt]));
                self.after("recover", Some(rt), false, &CallEnd::Refused(describe(&e)));
            }
        }
    }

    /// Takes a loaded pathway into the pool after checking its stage against the model.
    /// `in_flight` is the pathway a hanging executor is carrying right now (if any): it, and
    /// only it, must come back as `InFlightElsewhere`.
    fn adopt(
        &self,
        db: usize,
        rt: usize,
        s: StoredPathway,
        what: &str,
        in_flight: Option<&str>,
    ) -> String {
        let id = s.id().to_owned();
        let (state, h): (Option<State>, Option<H>) = match s {
            StoredPathway::Proposed(p) => (Some(p.state()), Some(H::Proposed(p))),
            StoredPathway::AwaitingApproval(p) => (Some(p.state()), Some(H::AwaitingApproval(p))),
            StoredPathway::HumanGate(p) => (Some(p.state()), Some(H::HumanGate(p))),
            StoredPathway::Held(p) => (Some(p.state()), Some(H::Held(p))),
            StoredPathway::Approved(p) => (Some(p.state()), Some(H::Approved(p))),
            StoredPathway::Returned(p) => (Some(p.state()), Some(H::Returned(p))),
            StoredPathway::Unknown(p) => (Some(p.state()), Some(H::Unknown(p))),
            StoredPathway::Stopped(p) => (Some(p.state()), Some(H::Stopped(p))),
            StoredPathway::PartiallyCompleted(p) => (Some(p.state()), Some(H::Partial(p))),
            StoredPathway::RepairRequired(p) => (Some(p.state()), Some(H::RepairRequired(p))),
            StoredPathway::RepairUnsettled(p) => (Some(p.state()), Some(H::RepairUnsettled(p))),
            StoredPathway::ReadyToResume(p) => (Some(p.state()), Some(H::ReadyToResume(p))),
            StoredPathway::Completed(p) => (Some(p.state()), None),
            StoredPathway::Denied(p) => (Some(p.state()), None),
            StoredPathway::Aborted(p) => (Some(p.state()), None),
            StoredPathway::InFlightElsewhere { attempt, .. } => {
                if in_flight == Some(id.as_str()) && attempt.status == rpr::AttemptStatus::InFlight
                {
                    self.cover("in flight elsewhere, seen from inside execute");
                } else {
                    self.fail(format!(
                        "{what} through {}: {id} is InFlightElsewhere (attempt {} {}), but no executor is carrying it",
                        RT_NAMES[rt], attempt.id, attempt.status
                    ));
                }
                (None, None)
            }
            other => {
                self.fail(format!("{what}: unknown stored variant {other:?}"));
                (None, None)
            }
        };
        if let Some(state) = state {
            if in_flight == Some(id.as_str()) {
                self.fail(format!(
                    "{what} through {}: {id} is in flight in a live runtime, but came back as {state}",
                    RT_NAMES[rt]
                ));
            }
            let model = self.expected.borrow().get(&(db, id.clone())).copied();
            if model != Some(state) {
                self.fail(format!(
                    "{what} through {}: {id} came back as {state}, the calls' results say {model:?}",
                    RT_NAMES[rt]
                ));
            }
        }
        if let Some(h) = h {
            let mut handles = self.handles.borrow_mut();
            handles.push(Entry { db, h });
            if handles.len() > MAX_HANDLES {
                handles.remove(0);
            }
        }
        format!(
            "{id} {}",
            state.map_or_else(|| "in_flight_elsewhere".to_owned(), |s| s.to_string())
        )
    }

    /// A step's call ended with a new stage or a refusal.
    fn done<S: Stage, N: Stage>(&self, c: &Call, result: Result<Pathway<N>, Refused<S>>)
    where
        Pathway<S>: Keep,
        Pathway<N>: Keep,
    {
        match result {
            Ok(p) => self.ok(c, p),
            Err(r) => self.refused(c, r),
        }
    }

    /// A step's call moved the pathway on to `p`.
    fn ok<N: Stage>(&self, c: &Call, p: Pathway<N>)
    where
        Pathway<N>: Keep,
    {
        self.expect(c.db, p.id(), p.state());
        self.cover(&format!("{} -> {}", c.name, p.state()));
        self.after(
            &c.what(&p.state().to_string()),
            Some(c.rt),
            c.foreign,
            &CallEnd::Ok,
        );
        self.keep(c.db, p);
    }

    /// A step's call was refused; the pathway comes back.
    fn refused<S: Stage>(&self, c: &Call, r: Refused<S>)
    where
        Pathway<S>: Keep,
    {
        let (p, e) = r.into_parts();
        self.after(
            &c.what("refused"),
            Some(c.rt),
            c.foreign,
            &CallEnd::Refused(describe(&e)),
        );
        self.keep(c.db, p);
    }

    /// The newest handle for a selector below 176 (so that a sequence often follows one
    /// pathway through its life), else any.
    fn take_handle(&self, sel: u8) -> Option<Entry> {
        let mut handles = self.handles.borrow_mut();
        if handles.is_empty() {
            return None;
        }
        let i = if sel < 176 {
            handles.len() - 1
        } else {
            usize::from(sel) % handles.len()
        };
        Some(handles.remove(i))
    }

    fn take_token(&self, sel: u8, fits: impl Fn(&T) -> bool) -> Option<Tok> {
        let mut tokens = self.tokens.borrow_mut();
        let fitting: Vec<usize> = (0..tokens.len()).filter(|&i| fits(&tokens[i].t)).collect();
        if fitting.is_empty() {
            return None;
        }
        let i = fitting[usize::from(sel) % fitting.len()];
        Some(tokens.remove(i))
    }

    fn act(&self, a: &Act) {
        let Some(Entry { db, h }) = self.take_handle(a.handle) else {
            return;
        };
        if h.is_redacted() && !a.arg.is_multiple_of(4) {
            self.restore(db, h, a.arg % 4 == 3);
            return;
        }
        let rt = Self::via(db, a.via);
        let who = |role: &str| {
            if a.honest {
                actor(role)
            } else {
                actor("intruder")
            }
        };
        let call_on = |name: &'static str, id: &str| Call {
            name,
            id: id.to_owned(),
            db,
            rt,
            foreign: db_of(rt) != db,
        };
        match h {
            H::Proposed(p) => {
                let d = decision_of(a.arg);
                let call = call_on("admit", p.id());
                let policy = move |_: &Definition| d.clone();
                match p.admit(&self.rt(rt), &who("decision_owner"), &policy) {
                    Ok(Admission::Approved(p)) => self.ok(&call, p),
                    Ok(Admission::AwaitingApproval(p)) => self.ok(&call, p),
                    Ok(Admission::HumanGate(p)) => self.ok(&call, p),
                    Ok(Admission::Denied(p)) => self.ok(&call, p),
                    Ok(other) => self.fail(format!("admit: unknown admission {other:?}")),
                    Err(r) => self.refused(&call, r),
                }
            }
            H::AwaitingApproval(p) => match a.action % 8 {
                0 => self.grant(
                    &call_on("grant_approval", p.id()),
                    p,
                    &who("approval_authority"),
                    false,
                ),
                1 => self.approve(&call_on("approve", p.id()), p, a.token),
                2 => {
                    let call = call_on("deny", p.id());
                    let r = p.deny(&self.rt(rt), &who("approval_authority"), "model");
                    self.done(&call, r);
                }
                3 => {
                    let call = call_on("escalate", p.id());
                    let r = p.escalate(&self.rt(rt), &who("stop_authority"));
                    self.done(&call, r);
                }
                _ => self.grant(
                    &call_on("grant_approval", p.id()),
                    p,
                    &who("approval_authority"),
                    true,
                ),
            },
            H::HumanGate(p) => match a.action % 8 {
                0 => self.grant(
                    &call_on("grant_approval", p.id()),
                    p,
                    &who("approval_authority"),
                    false,
                ),
                1 => self.approve(&call_on("approve", p.id()), p, a.token),
                2 => {
                    let call = call_on("deny", p.id());
                    let r = p.deny(&self.rt(rt), &who("approval_authority"), "model");
                    self.done(&call, r);
                }
                3 => {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                }
                _ => self.grant(
                    &call_on("grant_approval", p.id()),
                    p,
                    &who("approval_authority"),
                    true,
                ),
            },
            H::Held(p) => match a.action % 3 {
                0 => {
                    let call = call_on("escalate", p.id());
                    let r = p.escalate(&self.rt(rt), &who("stop_authority"));
                    self.done(&call, r);
                }
                1 => {
                    let call = call_on("release", p.id());
                    let r = p.release(&self.rt(rt), &who("stop_authority"));
                    self.done(&call, r);
                }
                _ => {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                }
            },
            H::Approved(p) => match a.action % 8 {
                0 => self.bind(db, p, a, false, None),
                1 => {
                    let call = call_on("hold", p.id());
                    let r = p.hold(&self.rt(rt), &who("stop_authority"), "model");
                    self.done(&call, r);
                }
                2 => {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                }
                _ => self.bind(db, p, a, false, Some(rt)),
            },
            H::ReadyToResume(p) => match a.action % 6 {
                0 => self.bind(db, p, a, true, None),
                1 => {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                }
                _ => self.bind(db, p, a, true, Some(rt)),
            },
            H::Bound(p, resumed) => self.dispatch(db, rt, p, resumed, a),
            H::Returned(p) => {
                if a.action % 3 == 2 {
                    let call = call_on("stop", p.id());
                    let r = p.stop(&self.rt(rt), &who("stop_authority"), "model");
                    self.done(&call, r);
                } else {
                    let call = call_on("confirm", p.id());
                    let by = who(if a.arg.is_multiple_of(2) {
                        "execution_actor"
                    } else {
                        "evidence_owner"
                    });
                    let mut readback = self.readback(a.arg);
                    match p.confirm(&self.rt(rt), &by, &mut readback) {
                        Ok(Confirmed::Completed(p)) => self.ok(&call, p),
                        Ok(Confirmed::Unknown(p)) => self.ok(&call, p),
                        Ok(other) => self.fail(format!("confirm: unknown variant {other:?}")),
                        Err(r) => self.refused(&call, r),
                    }
                }
            }
            H::Unknown(p) => match a.action % 8 {
                0 => self.reconcile(db, rt, p, a, false),
                1 => self.attest(db, rt, p, a, false),
                2 => {
                    let Some(tok) = self.take_token(a.token, |t| !matches!(t, T::Approval(_)))
                    else {
                        self.keep(db, p);
                        return;
                    };
                    self.use_on_unknown(db, rt, p, tok);
                }
                3..=5 => self.reconcile(db, rt, p, a, true),
                _ => self.attest(db, rt, p, a, true),
            },
            H::RepairUnsettled(p) => match a.action % 9 {
                0 => self.reconcile(db, rt, p, a, false),
                1 => self.attest(db, rt, p, a, false),
                2 => {
                    let Some(tok) = self.take_token(a.token, |t| {
                        matches!(t, T::NotApplied(_) | T::Unresolved(_))
                    }) else {
                        self.keep(db, p);
                        return;
                    };
                    self.use_on_unsettled(db, rt, p, tok);
                }
                3..=5 => self.reconcile(db, rt, p, a, true),
                6 | 7 => self.attest(db, rt, p, a, true),
                _ => {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                }
            },
            H::Stopped(p) => {
                if a.action % 4 == 3 {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                } else {
                    let call = call_on("require_repair", p.id());
                    let r = p.require_repair(&self.rt(rt), &who("repair_owner"));
                    self.done(&call, r);
                }
            }
            H::Partial(p) => {
                let call = call_on("require_repair", p.id());
                let r = p.require_repair(&self.rt(rt), &who("repair_owner"));
                self.done(&call, r);
            }
            H::RepairRequired(p) => {
                if a.action % 6 == 5 {
                    let call = call_on("abort", p.id());
                    let r = p.abort(&self.rt(rt), &who("residual_owner"), &json!({}));
                    self.done(&call, r);
                } else {
                    let call = call_on("repair", p.id());
                    let r = p.repair(
                        &self.rt(rt),
                        &who("repair_owner"),
                        &json!({"fixed": true}),
                        None,
                    );
                    self.done(&call, r);
                }
            }
        }
    }

    /// `restore_request` on a re-hydrated handle whose stored request is redacted: the
    /// full request is accepted, any other refused; nothing is written either way.
    fn restore(&self, db: usize, h: H, wrong: bool) {
        let key = each_h!(&h, p => p.definition().idempotency_key.clone());
        let id = h.id().to_owned();
        let full = self
            .definitions
            .borrow()
            .get(&(db, id.clone(), key))
            .cloned();
        let Some(Definition { mut request, .. }) = full else {
            self.fail(format!(
                "{id}: a redacted handle of a request never proposed"
            ));
            return;
        };
        if wrong {
            request.arguments["token"] = json!("a guess");
        }
        let (h, error) = h.restore(request);
        let what = format!(
            "restore_request {id}@{} with {} request",
            DB_NAMES[db],
            if wrong { "another" } else { "the full" }
        );
        match (&error, wrong) {
            (None, false) => self.cover("restore_request -> restored"),
            (Some(PathwayError::RequestMismatch { .. }), true) => {
                self.cover("restore_request -> mismatch refused");
            }
            _ => self.fail(format!("{what}: {error:?}")),
        }
        if h.is_redacted() == error.is_none() {
            self.fail(format!("{what}: still redacted after {error:?}"));
        }
        let result = error.map_or(CallEnd::Ok, |e| CallEnd::Refused(describe(&e)));
        self.after(&what, None, false, &result);
        self.handles.borrow_mut().push(Entry { db, h });
    }

    fn grant<S: Gated>(&self, c: &Call, p: Pathway<S>, by: &Actor, then_approve: bool)
    where
        Pathway<S>: Keep,
    {
        match self.rt(c.rt).grant_approval(&p, by) {
            Ok(approval) => {
                self.cover("grant_approval");
                self.after(&c.what("approval"), Some(c.rt), c.foreign, &CallEnd::Ok);
                if then_approve {
                    let call = Call {
                        name: "approve",
                        ..c.clone()
                    };
                    let r = p.approve(&self.rt(c.rt), approval);
                    self.done::<S, Approved>(&call, r);
                } else {
                    self.keep_token(c.db, T::Approval(approval));
                    self.keep(c.db, p);
                }
            }
            Err(e) => {
                self.after(
                    &c.what("refused"),
                    Some(c.rt),
                    c.foreign,
                    &CallEnd::Refused(describe(&e)),
                );
                self.keep(c.db, p);
            }
        }
    }

    fn approve<S: Gated>(&self, c: &Call, p: Pathway<S>, sel: u8)
    where
        Pathway<S>: Keep,
    {
        let Some(Tok {
            db,
            t: T::Approval(approval),
        }) = self.take_token(sel, |t| matches!(t, T::Approval(_)))
        else {
            self.keep(c.db, p);
            return;
        };
        let call = Call {
            foreign: c.foreign || db != db_of(c.rt),
            ..c.clone()
        };
        let r = p.approve(&self.rt(c.rt), approval);
        self.done::<S, Approved>(&call, r);
    }

    fn readback(&self, arg: u8) -> Truth<'_> {
        Truth {
            world: self,
            inconclusive: arg % 8 == 7,
        }
    }

    fn bind<S: rpr::stage::Bindable>(
        &self,
        db: usize,
        p: Pathway<S>,
        a: &Act,
        resumed: bool,
        then_dispatch: Option<usize>,
    ) where
        Pathway<S>: Keep,
    {
        let mut ex = ModelExec {
            world: self,
            kind: a.exec,
            hang: None,
        };
        let id = p.id().to_owned();
        match p.bind(&mut ex) {
            Ok(bound) => {
                if bound.definition().class == ActionClass::ReadOnly
                    && bound.binding().class != ActionClass::ReadOnly
                {
                    self.fail(format!(
                        "bind {id}: a read-only definition was bound to a mutating target"
                    ));
                }
                self.after(
                    &format!("bind {id}@{}", DB_NAMES[db]),
                    None,
                    false,
                    &CallEnd::Ok,
                );
                if let Some(rt) = then_dispatch {
                    self.dispatch(db, rt, bound, resumed, a);
                } else {
                    self.handles.borrow_mut().push(Entry {
                        db,
                        h: H::Bound(bound, resumed),
                    });
                }
            }
            Err(r) => {
                let (p, e) = r.into_parts();
                let laxer = p.definition().class == ActionClass::ReadOnly
                    && p.definition().request.action != "get";
                if matches!(e, PathwayError::RequestRedacted(_)) && p.is_redacted() {
                    self.cover("bind of a redacted request refused");
                } else if matches!(e, PathwayError::ClassLaxerThanTarget { .. }) && laxer {
                    self.cover("bind of a read-only definition to a mutating target refused");
                } else {
                    self.fail(format!("bind {id}: {e}"));
                }
                let what = format!("bind {id}@{}", DB_NAMES[db]);
                self.after(&what, None, false, &CallEnd::Refused(describe(&e)));
                self.keep(db, p);
            }
        }
    }

    fn dispatch(&self, db: usize, rt: usize, bound: Pathway<Bound>, resumed: bool, a: &Act) {
        let id = bound.id().to_owned();
        let was_stored = bound.is_stored();
        let by = if !a.honest {
            actor("intruder")
        } else if resumed && a.arg % 2 == 1 {
            actor("resume_authority")
        } else {
            actor("execution_actor")
        };
        // Half the dispatches read a returned call back at once (`dispatch_and_confirm`).
        let merged = a.token % 2 == 1;
        let name = if merged {
            "dispatch_and_confirm"
        } else {
            "dispatch"
        };
        let call = Call {
            name,
            id: id.clone(),
            db,
            rt,
            foreign: db_of(rt) != db,
        };
        let hang = (a.hang != Hang::No).then(|| HangCtx {
            pathway: id.clone(),
            key: bound.definition().idempotency_key.clone(),
            db,
            rt,
            slow: a.hang == Hang::Slow,
        });
        let mut ex = ModelExec {
            world: self,
            kind: a.exec,
            hang,
        };
        let label = format!(
            "{:?}{}",
            a.exec,
            match a.hang {
                Hang::No => "",
                Hang::Yes => ", hanging",
                Hang::Slow => ", hanging past the lease",
            }
        );
        let outcome = if merged {
            self.cover("dispatch_and_confirm");
            let mut readback = self.readback(a.arg);
            bound.dispatch_and_confirm(&self.rt(rt), &by, &mut ex, &mut readback)
        } else {
            bound.dispatch(&self.rt(rt), &by, &mut ex)
        };
        let what = |r: &str| format!("{name} {id}@{} with {label} as {by} = {r}", DB_NAMES[db]);
        match outcome {
            Outcome::NotSent(not_sent) => {
                let recorded = matches!(not_sent.error(), PathwayError::Executor(_));
                let e = describe(not_sent.error());
                if a.exec == Exec::LieAboutBinding && recorded {
                    self.cover("binding lie refused at prepare");
                }
                let r = if recorded {
                    CallEnd::RefusedRecorded(e)
                } else {
                    CallEnd::Refused(e)
                };
                if matches!(not_sent.error(), PathwayError::KeyTaken { .. }) {
                    self.cover("unstored pathway's key taken first: nothing sent");
                }
                let p = not_sent.into_pathway();
                if !was_stored && p.is_stored() {
                    // The refusal was recorded, and the pathway with it.
                    self.cover("unstored pathway stored with its dispatch refusal");
                    self.expect(db, &id, State::Approved);
                }
                self.after(&what("not sent"), Some(rt), call.foreign, &r);
                let mut handles = self.handles.borrow_mut();
                handles.push(Entry {
                    db,
                    h: H::Bound(p, resumed),
                });
            }
            Outcome::Completed(p) => self.ok(&call, p),
            Outcome::Returned(p) => self.ok(&call, p),
            Outcome::Failed(p) => self.ok(&call, p),
            Outcome::Partial(p) => self.ok(&call, p),
            Outcome::Unknown(p) => self.ok(&call, p),
            Outcome::Unrecorded(unrecorded) => {
                self.fail(format!(
                    "dispatch {id}: the outcome could not be recorded: {}",
                    unrecorded.error
                ));
                self.after(&what("unrecorded"), Some(rt), call.foreign, &CallEnd::Ok);
            }
            other => self.fail(format!("dispatch {id}: unknown outcome {other:?}")),
        }
    }

    fn reconcile<S: Reconcilable>(
        &self,
        db: usize,
        rt: usize,
        p: Pathway<S>,
        a: &Act,
        then_use: bool,
    ) where
        Pathway<S>: Keep + Reconcile,
    {
        let foreign = db_of(rt) != db;
        let mut readback = self.readback(a.arg);
        let r = self.rt(rt).reconcile(&p, &mut readback);
        let what = format!("reconcile {}@{} by readback", p.id(), DB_NAMES[db]);
        let Some(t) = T::from_reconciled(r) else {
            self.fail(format!("{what}: unknown verdict variant"));
            return;
        };
        self.cover(&format!("reconcile -> {}", t.name()));
        // `reconcile` writes nothing; a foreign one must not reach a verdict.
        let result = if matches!(t, T::Unresolved(_)) {
            CallEnd::Refused("unresolved".into())
        } else {
            CallEnd::Ok
        };
        self.after(
            &format!("{what} = {}", t.name()),
            Some(rt),
            foreign,
            &result,
        );
        if then_use {
            Reconcile::use_token(self, db, rt, p, Tok { db, t });
        } else {
            self.keep_token(db, t);
            self.keep(db, p);
        }
    }

    fn attest<S: Reconcilable>(&self, db: usize, rt: usize, p: Pathway<S>, a: &Act, then_use: bool)
    where
        Pathway<S>: Keep + Reconcile,
    {
        let foreign = db_of(rt) != db;
        // Attestations tell the truth too (or decline to decide).
        let verdict = if a.arg % 4 == 3 {
            Attestation::Unresolved
        } else if self.applied(&p.definition().request) {
            Attestation::Applied
        } else {
            Attestation::NotApplied
        };
        let by = if !a.honest {
            actor("intruder")
        } else if a.arg.is_multiple_of(2) {
            actor("evidence_owner")
        } else {
            actor("repair_owner")
        };
        let what = format!("attest {verdict:?} on {}@{} as {by}", p.id(), DB_NAMES[db]);
        match self
            .rt(rt)
            .attest(&p, &by, verdict, &json!({"looked": "effect log"}))
        {
            Ok(r) => {
                let Some(t) = T::from_reconciled(r) else {
                    self.fail(format!("{what}: unknown verdict variant"));
                    return;
                };
                self.cover(&format!("attest -> {}", t.name()));
                self.after(&what, Some(rt), foreign, &CallEnd::Ok);
                if then_use {
                    Reconcile::use_token(self, db, rt, p, Tok { db, t });
                } else {
                    self.keep_token(db, t);
                    self.keep(db, p);
                }
            }
            Err(e) => {
                self.after(&what, Some(rt), foreign, &CallEnd::Refused(describe(&e)));
                self.keep(db, p);
            }
        }
    }

    fn use_on_unknown(&self, db: usize, rt: usize, p: Pathway<Unknown>, tok: Tok) {
        let foreign = db_of(rt) != db || tok.db != db_of(rt);
        let call = |name| Call {
            name,
            id: p.id().to_owned(),
            db,
            rt,
            foreign,
        };
        let r = &self.rt(rt);
        match tok.t {
            T::Applied(t) => {
                let c = call("complete");
                self.done(&c, p.complete(r, t));
            }
            T::NotApplied(t) => {
                let c = call("require_repair (not applied)");
                self.done(&c, p.require_repair(r, t));
            }
            T::Unresolved(t) => {
                let c = call("keep_unknown");
                self.done(&c, p.keep_unknown(r, t));
            }
            T::Approval(a) => {
                self.keep_token(tok.db, T::Approval(a));
                self.keep(db, p);
            }
        }
    }

    fn use_on_unsettled(&self, db: usize, rt: usize, p: Pathway<RepairUnsettled>, tok: Tok) {
        let foreign = db_of(rt) != db || tok.db != db_of(rt);
        let call = |name| Call {
            name,
            id: p.id().to_owned(),
            db,
            rt,
            foreign,
        };
        let r = &self.rt(rt);
        match tok.t {
            T::NotApplied(t) => {
                let c = call("settle");
                self.done(&c, p.settle(r, t));
            }
            T::Unresolved(t) => {
                let c = call("keep_unsettled");
                self.done(&c, p.keep_unsettled(r, t));
            }
            t => {
                // No method takes it: an applied verdict leaves the pathway unsettled.
                self.keep_token(tok.db, t);
                self.keep(db, p);
            }
        }
    }

    /// Whether `request`'s effect is in the log.
    fn applied(&self, request: &Request) -> bool {
        self.effects
            .borrow()
            .get(&request_key(request))
            .is_some_and(|n| *n > 0)
    }

    /// Inside a hanging `execute`: the other runtime on the same database (R3 itself on
    /// B) loads and recovers the pathway, and every stale handle of it is dispatched.
    fn hang(&self, ctx: &HangCtx) {
        if ctx.slow {
            std::thread::sleep(slow());
            self.cover("slow executor past its lease");
        }
        let other = match ctx.rt {
            0 => 1,
            1 => 0,
            _ => 2,
        };
        let peek = |rt: usize| {
            // The same definition proposed again replays the stored pathway: in flight.
            let what = format!(
                "[inside execute] propose {}'s definition again",
                ctx.pathway
            );
            let again = self
                .definitions
                .borrow()
                .get(&(ctx.db, ctx.pathway.clone(), ctx.key.clone()))
                .cloned();
            match again.map(|d| self.rt(rt).propose(&actor("proposer"), d)) {
                Some(Ok(Proposal::Existing(s))) => {
                    let _ = self.adopt(ctx.db, rt, s, &what, Some(&ctx.pathway));
                }
                other => self.fail(format!("{what} through {}: {other:?}", RT_NAMES[rt])),
            }
            let what = format!("[inside execute] load {}", ctx.pathway);
            match self.rt(rt).load(&ctx.pathway) {
                Ok(s) => {
                    let _ = self.adopt(ctx.db, rt, s, &what, Some(&ctx.pathway));
                }
                Err(e) => self.fail(format!("{what} through {}: {e}", RT_NAMES[rt])),
            }
            let what = "[inside execute] recover";
            match self.rt(rt).recover() {
                Ok(all) => {
                    if !all.iter().any(|s| s.id() == ctx.pathway) {
                        self.fail(format!(
                            "{what} through {}: the in-flight pathway {} is missing",
                            RT_NAMES[rt], ctx.pathway
                        ));
                    }
                    for s in all {
                        let _ = self.adopt(ctx.db, rt, s, what, Some(&ctx.pathway));
                    }
                }
                Err(e) => self.fail(format!("{what} through {}: {e}", RT_NAMES[rt])),
            }
        };
        peek(other);
        // Stale handles of the same pathway: none may start a second attempt.
        let stale: Vec<Entry> = {
            let mut handles = self.handles.borrow_mut();
            let (mine, rest): (Vec<Entry>, Vec<Entry>) = handles.drain(..).partition(|e| {
                e.db == ctx.db
                    && e.h.id() == ctx.pathway
                    && matches!(e.h, H::Approved(_) | H::ReadyToResume(_) | H::Bound(..))
            });
            *handles = rest;
            mine
        };
        for (i, e) in stale.into_iter().enumerate() {
            let rt = if i % 2 == 0 { other } else { ctx.rt };
            let mut ex = ModelExec {
                world: self,
                kind: Exec::Apply,
                hang: None,
            };
            // A re-hydrated handle gets its full request back first.
            let h = if e.h.is_redacted() {
                let key = each_h!(&e.h, p => p.definition().idempotency_key.clone());
                let full = self
                    .definitions
                    .borrow()
                    .get(&(e.db, e.h.id().to_owned(), key))
                    .cloned();
                match full {
                    Some(d) => e.h.restore(d.request).0,
                    None => e.h,
                }
            } else {
                e.h
            };
            let (bound, resumed) = match h {
                H::Approved(p) => (p.bind(&mut ex).map_err(|r| r.into_parts().1), false),
                H::ReadyToResume(p) => (p.bind(&mut ex).map_err(|r| r.into_parts().1), true),
                H::Bound(p, resumed) => (Ok(p), resumed),
                _ => unreachable!(),
            };
            let bound = match bound {
                Ok(b) => b,
                Err(err) => {
                    self.fail(format!("[inside execute] bind a stale handle: {err}"));
                    continue;
                }
            };
            let by = actor(if resumed {
                "resume_authority"
            } else {
                "execution_actor"
            });
            // A handle `propose_and_bind` made and never stored: its dispatch would store it,
            // and finds the key stored by the other proposal first.
            let unstored = !bound.is_stored();
            match bound.dispatch(&self.rt(rt), &by, &mut ex) {
                Outcome::NotSent(n) => {
                    if matches!(
                        n.error(),
                        PathwayError::Store(StoreError::Conflict { .. })
                    ) {
                        self.cover("stale dispatch refused while in flight");
                    } else if unstored && matches!(n.error(), PathwayError::KeyTaken { .. }) {
                        self.cover("stale unstored handle's key taken while in flight");
                    } else {
                        self.fail(format!(
                            "[inside execute] a stale dispatch of {} through {} was refused, but not as a conflict: {}",
                            ctx.pathway,
                            RT_NAMES[rt],
                            n.error()
                        ));
                    }
                    self.handles.borrow_mut().push(Entry {
                        db: ctx.db,
                        h: H::Bound(n.into_pathway(), resumed),
                    });
                }
                other => self.fail(format!(
                    "[inside execute] a stale handle of {} dispatched through {} while its attempt is in flight: {other:?}",
                    ctx.pathway, RT_NAMES[rt]
                )),
            }
        }
        // After the stale attempts, the in-flight attempt is still not ours to take.
        peek(other);
    }
}

/// The store's own refusal of a write (with separate id counters, a pathway id drawn twice
/// meets the primary key): SQLite's error, or PostgreSQL's.
fn store_refused(e: &PathwayError) -> bool {
    match e {
        PathwayError::Store(StoreError::Sqlite(_)) => true,
        #[cfg(feature = "postgres")]
        PathwayError::Store(StoreError::Postgres(_)) => true,
        _ => false,
    }
}

/// A short form of an error, for the trace.
fn describe(e: &PathwayError) -> String {
    match e {
        PathwayError::ForeignPathway { .. } => "ForeignPathway".into(),
        PathwayError::NotAuthorized { actor, .. } => format!("NotAuthorized({actor})"),
        PathwayError::TokenMismatch(_) => "TokenMismatch".into(),
        PathwayError::Store(StoreError::Conflict { .. }) => "Conflict".into(),
        PathwayError::Executor(r) => format!("Executor({})", r.code),
        PathwayError::IdempotencyConflict { .. } => "IdempotencyConflict".into(),
        PathwayError::RequestMismatch { .. } => "RequestMismatch".into(),
        PathwayError::RequestRedacted(_) => "RequestRedacted".into(),
        PathwayError::ClassLaxerThanTarget { .. } => "ClassLaxerThanTarget".into(),
        PathwayError::Store(StoreError::Sqlite(e)) => format!("Sqlite({e})"),
        PathwayError::Store(StoreError::ApprovalUnusable(_)) => "ApprovalUnusable".into(),
        other => other.to_string(),
    }
}

#[derive(Clone)]
struct Call {
    name: &'static str,
    id: String,
    db: usize,
    rt: usize,
    foreign: bool,
}

impl Call {
    fn what(&self, result: &str) -> String {
        format!(
            "{} {}@{}{} = {result}",
            self.name,
            self.id,
            DB_NAMES[self.db],
            if self.foreign { " (foreign)" } else { "" }
        )
    }
}

/// What a reconcilable stage does with a token (dispatches to the stage's methods).
trait Reconcile: Sized {
    fn use_token(w: &World, db: usize, rt: usize, p: Self, tok: Tok);
}

impl Reconcile for Pathway<Unknown> {
    fn use_token(w: &World, db: usize, rt: usize, p: Self, tok: Tok) {
        w.use_on_unknown(db, rt, p, tok);
    }
}

impl Reconcile for Pathway<RepairUnsettled> {
    fn use_token(w: &World, db: usize, rt: usize, p: Self, tok: Tok) {
        w.use_on_unsettled(db, rt, p, tok);
    }
}

// ---------------------------------------------------------------------------
// Executors and readbacks.

/// The request's identity in the effect log: its database tag and key.
fn request_key(request: &Request) -> (usize, String) {
    let db = usize::from(request.arguments["db"] == "B");
    let key = request.arguments["key"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (db, key)
}

/// What the model's executors bind for `request`: its tool, read-only for `get`.
fn binding(request: &Request) -> Binding {
    let class = if request.action == "get" {
        ActionClass::ReadOnly
    } else {
        ActionClass::Mutating
    };
    Binding::new(
        format!("model/{}", request.action),
        json!({"executor": "model", "version": 1, "tool": request.action}),
    )
    .unwrap()
    .with_class(class)
}

struct HangCtx {
    pathway: String,
    /// The pathway's idempotency key.
    key: String,
    db: usize,
    rt: usize,
    slow: bool,
}

struct ModelExec<'w> {
    world: &'w World,
    kind: Exec,
    hang: Option<HangCtx>,
}

impl ModelExec<'_> {
    fn apply(&self, key: &(usize, String)) {
        *self
            .world
            .effects
            .borrow_mut()
            .entry(key.clone())
            .or_default() += 1;
    }
}

impl Executor for ModelExec<'_> {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        Ok(binding(request))
    }

    fn prepare(&mut self, request: &Request, bound: &Binding) -> Result<(), Refusal> {
        if self.kind == Exec::LieAboutBinding || *bound != binding(request) {
            return Err(Refusal::new(
                "binding_changed",
                "the target is not the one bound",
            ));
        }
        Ok(())
    }

    fn execute(&mut self, request: &Request) -> Delivery {
        let key = request_key(request);
        let again = {
            let mut executes = self.world.executes.borrow_mut();
            let n = executes.entry(key.clone()).or_default();
            *n += 1;
            *n > 1
        };
        if again {
            self.world
                .cover("a request executed again (after a not-applied verdict)");
        }
        if let Some(ctx) = self.hang.take() {
            self.world.hang(&ctx);
        }
        let reason = |r: &str| r.to_owned();
        match self.kind {
            Exec::Apply => {
                self.apply(&key);
                Delivery::Succeeded {
                    reply: json!({"ok": true}),
                }
            }
            Exec::SucceedWithoutEffect => Delivery::Succeeded {
                reply: json!({"ok": true}),
            },
            Exec::NothingWritten => Delivery::NothingWritten {
                reason: reason("refused to connect"),
            },
            Exec::ToolFailed => Delivery::ToolFailed {
                reply: json!({"isError": true}),
            },
            Exec::Partial => {
                self.apply(&key);
                Delivery::Partial {
                    reply: json!({"done": "some"}),
                }
            }
            Exec::LoseReply => {
                self.apply(&key);
                Delivery::PossiblyWritten {
                    reason: reason("reply lost"),
                }
            }
            Exec::LoseRequest => Delivery::PossiblyWritten {
                reason: reason("request lost"),
            },
            Exec::RejectNotApplied => Delivery::Rejected {
                error: json!({"code": -32602}),
                class: RejectionClass::NotApplied,
            },
            Exec::RejectUnknown => Delivery::Rejected {
                error: json!({"code": -32603}),
                class: RejectionClass::Unknown,
            },
            Exec::LieAboutBinding => {
                self.world
                    .fail("an executor that refused at prepare was executed".into());
                Delivery::NothingWritten {
                    reason: reason("refused"),
                }
            }
        }
    }
}

/// A readback that tells the truth (it reads the effect log), or cannot decide.
struct Truth<'w> {
    world: &'w World,
    inconclusive: bool,
}

impl Readback for Truth<'_> {
    fn observe(&mut self, request: &Request) -> Observation {
        let evidence = json!({"looked": "effect log"});
        if self.inconclusive {
            Observation::Inconclusive { evidence }
        } else if self.world.applied(request) {
            Observation::Applied { evidence }
        } else {
            Observation::NotApplied { evidence }
        }
    }
}

// ---------------------------------------------------------------------------
// The runner.

fn run_case(
    separate_ids: bool,
    ops: &[Op],
    coverage: &Mutex<BTreeMap<String, u64>>,
) -> Result<(), TestCaseError> {
    let world = World::new(separate_ids);
    for (i, op) in ops.iter().enumerate() {
        world
            .trace
            .borrow_mut()
            .push(format!("-- step {i}: {op:?}"));
        world.run(op);
        let failures = std::mem::take(&mut *world.failures.borrow_mut());
        if !failures.is_empty() {
            return Err(TestCaseError::fail(format!(
                "{}\n\ntrace (R1, R2 on database A; R3 on B; R1 and R2 {} ids):\n{}",
                failures.join("\n"),
                if separate_ids {
                    "with separate"
                } else {
                    "sharing"
                },
                world.trace.borrow().join("\n")
            )));
        }
    }
    let mut all = coverage.lock().unwrap();
    for (k, v) in world.coverage.borrow().iter() {
        *all.entry(k.clone()).or_default() += v;
    }
    Ok(())
}

/// Runs this shard's half of the cases (two shards, so that `cargo test` runs them on
/// two cores at once).
fn run_shard(shard: u32) {
    let ci = if common::pg::on() {
        CI_CASES_PG
    } else {
        CI_CASES
    };
    let total = std::env::var("RPR_MODEL_CASES")
        .ok()
        .map_or(ci, |v| v.parse().expect("RPR_MODEL_CASES is a number"));
    let cases = total / 2 + if shard == 0 { total % 2 } else { 0 };
    let config = Config {
        cases,
        source_file: Some(file!()),
        // tests/model.proptest-regressions, beside this file.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    };
    let coverage = Mutex::new(BTreeMap::new());
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case_strategy(), |(separate_ids, ops)| {
        run_case(separate_ids, &ops, &coverage)
    });
    let mut report = format!(
        "model shard {shard}: {cases} cases in {:.1} s; reached:\n",
        started.elapsed().as_secs_f64()
    );
    for (k, v) in coverage.lock().unwrap().iter() {
        writeln!(report, "  {v:8}  {k}").unwrap();
    }
    eprint!("{report}");
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, (separate_ids, ops))) => {
            panic!("{reason}\n\nminimal failing case (separate_ids = {separate_ids}):\n{ops:#?}")
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn model_shard_0() {
    run_shard(0);
}

#[test]
fn model_shard_1() {
    run_shard(1);
}

// ---------------------------------------------------------------------------
// Regression test for the library bug this model found with separate id counters (R1 and
// R2 with one `SequentialIds` each): the shrunk sequence, written out. It failed (two
// effects, `verify` passing) until the in-flight registry was keyed by runtime too.

/// Counts its effects (unless it rejects); runs `during` inside `execute`, first.
struct CountingExec<'a> {
    effects: &'a Cell<u32>,
    reject: bool,
    during: Option<Box<dyn FnOnce() + 'a>>,
}

impl<'a> CountingExec<'a> {
    fn new(effects: &'a Cell<u32>) -> Self {
        Self {
            effects,
            reject: false,
            during: None,
        }
    }
}

impl Executor for CountingExec<'_> {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        Ok(binding(request))
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        if let Some(during) = self.during.take() {
            during();
        }
        if self.reject {
            return Delivery::Rejected {
                error: json!({"code": -32602}),
                class: RejectionClass::NotApplied,
            };
        }
        self.effects.set(self.effects.get() + 1);
        Delivery::Succeeded { reply: json!({}) }
    }
}

/// Reads the effect count back.
struct CountingReadback<'a>(&'a Cell<u32>);

impl Readback for CountingReadback<'_> {
    fn observe(&mut self, _request: &Request) -> Observation {
        let evidence = json!({"effects": self.0.get()});
        if self.0.get() > 0 {
            Observation::Applied { evidence }
        } else {
            Observation::NotApplied { evidence }
        }
    }
}

/// R1 and R2 on one database, each with its own `SequentialIds`, so their attempt ids
/// collide. R1 resumes P and is inside `execute` with attempt `at_000002`. R2 dispatches
/// a stale handle of P: refused (compare-and-set conflict, nothing written), but its
/// attempt id, drawn before the refusal, is `at_000002` too, and the refused dispatch's
/// clean-up (`Runtime::track(at_000002, false)`) removes the process-wide in-flight
/// marker `(database, at_000002)` that R1's live attempt put there. R2's `load` of P then
/// judges R1's attempt abandoned (`owner_gone`: same process, attempt not in `IN_FLIGHT`)
/// and records `recovered_unknown`; a readback honestly finds nothing yet; repair and a
/// new dispatch send P's request a second time while the first send is still running.
/// Two effects, R1's outcome `Unrecorded`, and `verify` passes.
///
/// Expected, and so since the fix (the registry is keyed by `(database, attempt, runtime
/// nonce)`): `load` returns `InFlightElsewhere`; one effect.
#[test]
fn a_refused_dispatch_with_a_colliding_attempt_id_does_not_unmark_a_live_attempt() {
    let dir = scratch_dir();
    let db = dir.db();
    let open = || {
        Runtime::builder(&db)
            .ids(SequentialIds::default())
            .open()
            .unwrap()
    };
    let (r1, r2) = (open(), open());
    let effects = Cell::new(0);
    // 1-2. R1 proposes and admits P (pw_000001); 3. R1 loads it again: a stale twin.
    let twin = allowed(&r1, definition("k0", ActionClass::Mutating));
    let id = twin.id().to_owned();
    let StoredPathway::Approved(p) = r1.load(&id).unwrap() else {
        panic!("not approved")
    };
    // 4. R2 dispatches it (attempt at_000001, R2's first id): rejected, not applied.
    let mut rejects = CountingExec::new(&effects);
    rejects.reject = true;
    let Outcome::Failed(p) =
        p.bind(&mut rejects)
            .unwrap()
            .dispatch(&r2, &actor("execution_actor"), &mut rejects)
    else {
        panic!("not failed")
    };
    // 5. R1 repairs it.
    let p = p
        .repair(&r1, &actor("repair_owner"), &json!({}), None)
        .unwrap();
    // 6. R1 resumes it (attempt at_000002, R1's second id) and, while it is in flight:
    let loaded_as = RefCell::new(String::new());
    let during = || {
        // R2 dispatches the stale twin: refused, having drawn at_000002.
        let mut ex = CountingExec::new(&effects);
        let stale = twin.bind(&mut ex).unwrap();
        let Outcome::NotSent(_) = stale.dispatch(&r2, &actor("execution_actor"), &mut ex) else {
            panic!("a stale handle was dispatched")
        };
        match r2.load(&id).unwrap() {
            StoredPathway::InFlightElsewhere { .. } => {
                "in_flight_elsewhere".clone_into(&mut loaded_as.borrow_mut());
            }
            StoredPathway::Unknown(u) => {
                "unknown".clone_into(&mut loaded_as.borrow_mut());
                let Reconciled::NotApplied(t) = r2.reconcile(&u, &mut CountingReadback(&effects))
                else {
                    panic!("the first send has not written yet")
                };
                let ready = u
                    .require_repair(&r2, t)
                    .unwrap()
                    .repair(&r2, &actor("repair_owner"), &json!({}), None)
                    .unwrap();
                let mut ex = CountingExec::new(&effects);
                let again = ready.bind(&mut ex).unwrap();
                let _ = again.dispatch(&r2, &actor("execution_actor"), &mut ex);
            }
            other => panic!("{other:?}"),
        }
    };
    let mut ex = CountingExec::new(&effects);
    ex.during = Some(Box::new(during));
    let p = p.bind(&mut ex).unwrap();
    let _ = p.dispatch(&r1, &actor("execution_actor"), &mut ex);
    let (loaded_as, effects) = (loaded_as.borrow().clone(), effects.get());
    assert!(
        loaded_as == "in_flight_elsewhere" && effects == 1,
        "R1's live attempt on P was loaded by R2 as {loaded_as}, and P's request took effect {effects} times (verify: {:?})",
        r1.verify(None).map(|r| r.problems)
    );
}
