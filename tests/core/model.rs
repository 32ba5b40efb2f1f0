//! A model-based test of the at-most-once rule (brief §11) and of database identity.
//!
//! `proptest` generates random sequences of 1 to [`MAX_STEPS`] steps and shrinks a
//! failing one to a minimal sequence. A step is one of: propose a request (4 keys, one
//! whose request holds a secret and so is stored redacted) through a runtime; act on a
//! handle from the pool (every public transition of its stage, plus `grant_approval`,
//! `reconcile`, `attest`, `bind`, `dispatch` and `restore_request`, through a runtime chosen
//! at random); `load` a random id; `recover`; restart a runtime; let a worker that holds a
//! panicked executor's write apply it.
//!
//! Three runtimes: R1 and R2 on database A, R3 on database B, all with [`SequentialIds`],
//! so pathway, attempt and approval ids collide across the databases. R1 and R2 share one
//! counter in three cases of four and one each in the fourth (so their attempt ids collide
//! too: that found the library bug pinned by the regression test at the end of this file).
//! Each runtime's owner is, in about two cases of five, one no process can judge
//! (`RuntimeBuilder::simulated_owner`, test tooling): only its lease speaks, as for an
//! owner on another machine. Handles (one enum over every stage type) and tokens (approvals,
//! reconciliations) go into one pool, whatever runtime made them; a step takes a handle
//! (usually the newest, so that one pathway is followed through its life) and a runtime
//! (usually one on the handle's database, often any of the three), so handles are used
//! with a runtime of the other database, or after another runtime moved their pathway on.
//! Reconciliations are often kept in the pool and used later (for an even selector, one
//! made for the handle's own pathway), after other steps and evidence on their pathway.
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
//! again. On database A any of them may *stop* instead: its runtime's heartbeat is frozen
//! (as SIGSTOP freezes a process) until its lease has lapsed by the database's clock; the
//! other runtime looks as above, then the next 1 to 6 steps of the case run (none through
//! the stopped runtime: they may reconcile, attest, repair, resume, restart the other
//! runtime); then the owner resumes and does what its kind does. Any of them may panic
//! inside `execute` (caught by the model): before writing, after writing, or after handing
//! the write to a worker that applies it at a later step (or never). Readbacks and
//! attestations tell the truth (they read the log: what it shows now, even while someone
//! may still send) or cannot decide.
//!
//! The model knows who may still send each attempt's request: its owner while `execute`
//! runs (hanging, stopped), a worker that holds a panicked executor's write. It knows which
//! in-flight attempts may be taken over ([`World::lapse`]): on SQLite, an owner and a judge
//! both judged by the process never (the process is alive, also after a panic); otherwise
//! only the lease speaks — never while the owner's heartbeat renews it (on SQLite's 20 ms
//! lease a late heartbeat may let it lapse), always once the owner is stopped past it.
//!
//! After every public call the test checks:
//!
//! 1. at most once: each request was executed exactly as often as its database's ledger
//!    shows attempts; a new attempt started only after the previous one ended `not_sent`,
//!    `failed` or `not_applied` (the last by the owner's own outcome, or by a reconciled
//!    not-applied verdict that was *valid when used*: made at the pathway's version, while
//!    nobody could still send); its effect happened at most once (every verdict the model
//!    uses is true) and never more often than attempts started. Around it: no readback
//!    verdict says not applied while someone may still send; a not-applied attestation then
//!    comes only from the repair owner and records `accepted_risk` (such a verdict the model
//!    uses only once its owner came back, and then it must be refused); a verdict used after
//!    its pathway's stored version moved is refused (as `StaleToken` when it names the
//!    pathway's attempt, or a conflict for a stale handle) and writes nothing; an attempt
//!    is taken over only where [`World::lapse`] allows and, where it must, is; the takeover
//!    records `owner_fate` `lapsed`; the owner's late outcome is refused and recorded
//!    (`StoreError::Fenced`); an attempt whose executor panicked stays in flight;
//! 2. database identity: a call through a runtime of the other database (the handle's or
//!    the token's) failed and left both databases byte-identical; no call changed the
//!    database it was not made on (nor any database, for `bind` and `restore_request`);
//!    a refused call wrote nothing (but the `dispatch_refused` record of an executor's
//!    refusal, and a refused late outcome's record); the lease expiries the heartbeat
//!    renews between calls (of attempts left in flight by a panic) are not compared;
//! 3. the stored state of every pathway is the one its events end in and the one the model
//!    expects from the calls' results; `load` and `recover` return exactly that (and
//!    `recover` every unresolved pathway); `verify(None)` passes on both databases.
//!
//! CI runs [`CI_CASES`] cases on SQLite ([`CI_CASES_PG`] on PostgreSQL), in two tests of
//! half each so that they use both cores.
//! The long run: `RPR_MODEL_CASES=20000 cargo test --release --locked --test core --
//! model:: --nocapture` (`--nocapture` prints what the cases reached). Its last run (SQLite, 2 shared
//! cores): 20,000 cases in 315 s, no failure; they reached 1,424 owners stopped past their
//! lease (902 attempts taken over after the lapse, 835 late outcomes refused and recorded),
//! 1,513 executor panics (1,019 loads finding the attempt still in flight, 249 workers
//! writing later), 582 readbacks left unresolved while someone could still send, 157
//! not-applied attestations refused to the evidence owner and 53 given by the repair owner
//! accepting the risk, 215 verdicts refused as stale (44 made while someone could still
//! send), and 1,144 new attempts after a `not_applied` one. A failure prints the shrunk
//! sequence with the trace of its calls; proptest records its seed in
//! `tests/core/model.proptest-regressions` and replays it first on the next run. The databases
//! live in `/dev/shm` where it exists: this test is about the steps, not about fsync.
//!
//! On either store (`RPR_TEST_BACKEND`): on PostgreSQL the two databases are two schemas,
//! and a change is found by comparing dumps after every call (there is no `data_version`).

use crate::common;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering as AtomicOrdering};

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
    Applied, Attestation, NotApplied, Quorum, Reconciled, Reconciliation, Unresolved,
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
    /// Its runtime stops (as SIGSTOP: its heartbeat frozen) past the lease; the next this
    /// many steps of the case run meanwhile on the other runtimes; then it resumes. On R3
    /// (alone on database B) or while another runtime is stopped, a slow hang.
    Stop(u8),
}

/// Whether the executor panics inside `execute` (the model catches it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Panic {
    No,
    /// Before it writes anything.
    Before,
    /// After it applied the effect.
    After,
    /// After handing the write to a worker, which applies it at a later step
    /// ([`Op::Release`]), or never.
    HandOff,
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
    panic: Panic,
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
    /// A worker that holds the write of a panicked executor applies it.
    Release {
        sel: u8,
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
    let hang = prop_oneof![
        12 => Just(Hang::No),
        6 => Just(Hang::Yes),
        1 => Just(Hang::Slow),
        3 => (1..=6_u8).prop_map(Hang::Stop),
    ];
    let panic = prop_oneof![
        40 => Just(Panic::No),
        1 => Just(Panic::Before),
        1 => Just(Panic::After),
        2 => Just(Panic::HandOff),
    ];
    let act = (
        any::<u8>(),
        via,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        exec_strategy(),
        hang,
        panic,
        prop::bool::weighted(0.92),
    )
        .prop_map(
            |(handle, via, action, arg, token, exec, hang, panic, honest)| Act {
                handle,
                via,
                action,
                arg,
                token,
                exec,
                hang,
                panic,
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
        1 => any::<u8>().prop_map(|sel| Op::Release { sel }),
    ]
}

/// One case: whether R1 and R2 share their id counter, which runtimes have an owner no
/// process can judge ([`RuntimeBuilder::simulated_owner`]), and the steps.
fn case_strategy() -> impl Strategy<Value = (bool, [bool; 3], Vec<Op>)> {
    let separate = 0.25;
    (
        prop::bool::weighted(separate),
        prop::array::uniform3(prop::bool::weighted(0.4)),
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
terminal!(Completed, Denied, Aborted, Failed);

/// A handle and the database (0 = A, 1 = B) it came from.
#[derive(Debug)]
struct Entry {
    db: usize,
    h: H,
}

#[derive(Debug)]
enum T {
    Approval(Quorum),
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

/// What the checks need of a token that is being used up.
struct TokInfo {
    db: usize,
    name: &'static str,
    pathway: String,
    attempt: String,
    minted_at: Option<i64>,
    taint: Option<Sender>,
}

fn split_token(tok: Tok) -> (TokInfo, T) {
    let info = TokInfo {
        db: tok.db,
        name: tok.t.name(),
        pathway: tok.pathway,
        attempt: tok.attempt,
        minted_at: tok.minted_at,
        taint: tok.taint,
    };
    (info, tok.t)
}

/// A token and the database of the pathway it was made for.
#[derive(Debug)]
struct Tok {
    db: usize,
    t: T,
    /// The pathway and attempt it names (reconciliations), and the pathway's stored version
    /// when it was made.
    pathway: String,
    attempt: String,
    minted_at: Option<i64>,
    /// Who could still send the attempt's request when it was made (the model's knowledge):
    /// such a not-applied verdict rests on an accepted risk, not on proof.
    taint: Option<Sender>,
}

impl Tok {
    fn approval(db: usize, pathway: &str, a: Quorum) -> Self {
        Tok {
            db,
            t: T::Approval(a),
            pathway: pathway.to_owned(),
            attempt: String::new(),
            minted_at: None,
            taint: None,
        }
    }
}

/// Who may still send an attempt's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    /// The owner: its executor is running (hanging, stopped).
    Owner,
    /// A worker its panicked executor handed the write to.
    Worker,
}

/// An attempt the model knows is in flight in the database (its status `in_flight`).
#[derive(Debug, Clone)]
struct Flight {
    attempt: String,
    /// The runtime that dispatched it, and that runtime's generation (restarts) then.
    owner: usize,
    generation: u32,
    /// Its owner is stopped and its lease has lapsed (waited for).
    stopped: bool,
    /// Its executor panicked: it stays in flight while the process lives.
    abandoned: bool,
    /// A read (read-only by its definition and its binding): taken over, it ends `failed`.
    read: bool,
}

/// Whether recovery may take an in-flight attempt over, as the model knows its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lapse {
    /// Its owner is judged alive, or its lease is renewed.
    Never,
    /// Its lease may have lapsed (a heartbeat late under load, a dropped owner).
    May,
    /// Its lease lapsed: its owner is stopped past it and cannot be judged.
    Must,
}

/// A write a panicked executor handed to a worker, not yet applied.
#[derive(Debug)]
struct Worker {
    db: usize,
    key: String,
    pathway: String,
    attempt: String,
}

/// The payload of the model's deliberate executor panics (kept off stderr).
struct ModelPanic;

/// Keeps the model's deliberate panics quiet; any other panic is reported as before.
fn quiet_model_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<ModelPanic>() {
                previous(info);
            }
        }));
    });
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

/// A database dump without the lease expiries of in-flight attempts: the only values taken
/// from the real clock (every step's time is the runtimes' model clock, near [`T0`]), and the
/// only ones written outside a step, by the heartbeat that renews the leases of attempts in
/// flight (an attempt whose executor panicked stays in flight, renewed, between the steps).
fn without_leases(dump: &str) -> String {
    const REAL_CLOCK: u64 = 1_750_000_000_000;
    let mut out = String::with_capacity(dump.len());
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        if digits.len() == 13 && digits.parse::<u64>().is_ok_and(|v| v >= REAL_CLOCK) {
            out.push_str("<lease>");
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    for c in dump.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
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

/// Opens a runtime on `path` with a shared id counter and clock; `remote`: with an owner no
/// process can judge (as on another machine); `frozen`: stops its lease renewals while set.
fn open_runtime(
    path: &std::path::Path,
    ids: &Arc<SequentialIds>,
    clock: &Arc<AtomicI64>,
    remote: bool,
    frozen: &Arc<AtomicBool>,
) -> Runtime {
    Runtime::builder(path)
        .ids(SharedIds(Arc::clone(ids)))
        .clock(SharedClock(Arc::clone(clock)))
        .lease(lease())
        .simulated_owner(remote, Arc::clone(frozen))
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
    /// Which runtimes' owners no process can judge (only their lease speaks).
    remote: [bool; 3],
    /// Each runtime's heartbeat stop (kept across restarts), and how often it was restarted.
    frozen: [Arc<AtomicBool>; 3],
    generation: [Cell<u32>; 3],
    /// The case's steps, and the next to run: a stopped executor runs some of them itself.
    ops: Vec<Op>,
    cursor: Cell<usize>,
    /// The runtime that is stopped now, if any: no step goes through it.
    stopped: Cell<Option<usize>>,
    /// `(database, pathway)` → its attempt in flight, as the calls' results show.
    flights: RefCell<BTreeMap<(usize, String), Flight>>,
    /// `(database, pathway, attempt)` → who may still send it (the model's knowledge).
    senders: RefCell<BTreeMap<(usize, String, String), Sender>>,
    /// Attempts whose executor returned (its outcome recorded, or refused and recorded).
    returned: RefCell<BTreeSet<(usize, String, String)>>,
    workers: RefCell<Vec<Worker>>,
    /// Attempts taken over after their lease lapsed.
    takeovers: RefCell<BTreeSet<(usize, String, String)>>,
    /// Attempts settled by a not-applied verdict that was valid when used: made at the
    /// pathway's version, while nobody could still send.
    valid_verdicts: RefCell<BTreeSet<(usize, String, String)>>,
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
    fn new(separate_ids: bool, remote: [bool; 3], ops: Vec<Op>) -> Self {
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
        let frozen = [(); 3].map(|()| Arc::new(AtomicBool::new(false)));
        let world_rt =
            |i: usize| open_runtime(&paths[db_of(i)], &ids[i], &clocks[i], remote[i], &frozen[i]);
        let rts = [world_rt(0), world_rt(1), world_rt(2)];
        assert_eq!(rts[0].database_id(), rts[1].database_id());
        assert_ne!(rts[0].database_id(), rts[2].database_id());
        let rts = rts.map(RefCell::new);
        let watch = [watch(&paths[0]), watch(&paths[1])];
        let versions = Cell::new([watch[0].data_version(), watch[1].data_version()]);
        let dumps = [watch[0].dump(), watch[1].dump()];
        assert_eq!(dumps[0], db_dump(&paths[0]));
        let dumps = dumps.map(|d| without_leases(&d));
        Self {
            rts,
            paths,
            ids,
            clocks,
            separate_ids,
            remote,
            frozen,
            generation: [(); 3].map(|()| Cell::new(0)),
            ops,
            cursor: Cell::new(0),
            stopped: Cell::new(None),
            flights: RefCell::new(BTreeMap::new()),
            senders: RefCell::new(BTreeMap::new()),
            returned: RefCell::new(BTreeSet::new()),
            workers: RefCell::new(Vec::new()),
            takeovers: RefCell::new(BTreeSet::new()),
            valid_verdicts: RefCell::new(BTreeSet::new()),
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

    fn keep_token(&self, tok: Tok) {
        let mut tokens = self.tokens.borrow_mut();
        tokens.push(tok);
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
    fn via(&self, db: usize, via: Via) -> usize {
        self.live(match via {
            Via::Own(r) if db == 0 => usize::from(r % 2),
            Via::Own(_) => 2,
            Via::Any(r) => usize::from(r % 3),
        })
    }

    /// `rt`, or while it is stopped the other runtime on its database: a stopped process
    /// takes no step.
    fn live(&self, rt: usize) -> usize {
        match self.stopped.get() {
            Some(s) if s == rt && rt < 2 => 1 - rt,
            _ => rt,
        }
    }

    /// The next step of the case, and its index.
    fn next_op(&self) -> Option<(usize, Op)> {
        let i = self.cursor.get();
        let op = self.ops.get(i)?.clone();
        self.cursor.set(i + 1);
        Some((i, op))
    }

    /// A pathway's stored version on database `db` (`None` if it is not stored there).
    fn stored_version(&self, db: usize, id: &str) -> Option<i64> {
        self.watch[db]
            .ints(&format!("SELECT version FROM pathways WHERE id = '{id}'"))
            .first()
            .copied()
            .flatten()
    }

    /// Who may still send `attempt` of pathway `id` on `db`, as the model knows.
    fn sender(&self, db: usize, id: &str, attempt: &str) -> Option<Sender> {
        self.senders
            .borrow()
            .get(&(db, id.to_owned(), attempt.to_owned()))
            .copied()
    }

    /// Whether runtime `judge` may take over the in-flight attempt `f`: on SQLite an owner
    /// and a judge that can both be judged by the process are judged alive (one process);
    /// otherwise only the lease speaks, renewed by the owner's heartbeat while its runtime
    /// lives and is not stopped. A heartbeat may come late, and then the lease lapses under
    /// a live owner: on SQLite's 20 ms lease at any time, and on PostgreSQL's 300 ms one on a
    /// loaded machine too (once seen within one executor's hang, at a load average of 12 on
    /// 2 cores). A lapse is never a licence to send again (the at-most-once invariant is
    /// checked apart from it), so the model allows it wherever only the lease speaks.
    fn lapse(&self, judge: usize, f: &Flight) -> Lapse {
        if !(common::pg::on() || self.remote[f.owner] || self.remote[judge]) {
            return Lapse::Never;
        }
        let alive = self.generation[f.owner].get() == f.generation;
        let stopped = alive && self.frozen[f.owner].load(AtomicOrdering::Relaxed) && f.stopped;
        if stopped { Lapse::Must } else { Lapse::May }
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
                let now = without_leases(&self.watch[db].dump());
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
            // (attempt, its status as the events record it so far, the event kind that set it)
            let mut attempts: Vec<(String, String, String)> = Vec::new();
            for e in &events {
                let e: Value = serde_json::from_str(&e.event).unwrap();
                let kind = e["kind"].as_str().unwrap_or_default();
                let attempt = e["attempt"].as_str();
                let status = e["attempt_status"].as_str();
                if kind == "attempt_started" {
                    let id = attempt.unwrap_or_default().to_owned();
                    if let Some((prev, prev_status, set_by)) = attempts.last() {
                        // A not-applied verdict separates two attempts only if it was valid
                        // when used: made at the pathway's version, while nobody could still
                        // send (the owner's own not-applied outcome is its own evidence).
                        if prev_status == "not_applied"
                            && set_by == "reconciled"
                            && !self.valid_verdicts.borrow().contains(&(
                                db,
                                row.id.clone(),
                                prev.clone(),
                            ))
                        {
                            self.fail(format!(
                                "call {n}: pathway {} on {name}: attempt {id} started after attempt {prev}'s not-applied verdict, which was not valid when used (made at another version, or while its request could still be sent)",
                                row.id
                            ));
                        }
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
                    attempts.push((id, status.unwrap_or_default().to_owned(), kind.to_owned()));
                } else if let (Some(a), Some(s)) = (attempt, status) {
                    match attempts.iter_mut().find(|(id, _, _)| id == a) {
                        Some(entry) => {
                            s.clone_into(&mut entry.1);
                            kind.clone_into(&mut entry.2);
                        }
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
                self.live(usize::from(*rt)),
                *key,
                *mutating,
                *reads,
                *other_content,
                *admit,
            ),
            Op::Act(a) => self.act(a),
            Op::Load { rt, id } => self.load(self.live(usize::from(*rt)), *id),
            Op::Recover { rt } => self.recover(self.live(usize::from(*rt))),
            Op::Restart { rt } => self.restart(self.live(usize::from(*rt))),
            Op::Release { sel } => self.release(*sel),
        }
    }

    /// A worker that holds a panicked executor's write applies it (rpr cannot see this).
    fn release(&self, sel: u8) {
        let w = {
            let mut workers = self.workers.borrow_mut();
            if workers.is_empty() {
                return;
            }
            let i = usize::from(sel) % workers.len();
            workers.remove(i)
        };
        *self
            .effects
            .borrow_mut()
            .entry((w.db, w.key.clone()))
            .or_default() += 1;
        self.senders
            .borrow_mut()
            .remove(&(w.db, w.pathway.clone(), w.attempt.clone()));
        self.cover("a worker wrote after its executor panicked");
        self.after(
            &format!(
                "the worker of {}@{} (attempt {}) writes {}",
                w.pathway, DB_NAMES[w.db], w.attempt, w.key
            ),
            None,
            false,
            &CallEnd::Ok,
        );
    }

    /// Drops runtime `i` and opens it again: its handles stay valid (they belong to the
    /// database, not to the runtime). Attempts whose executor panicked stay in flight in
    /// this process, but their lease is no longer renewed.
    fn restart(&self, i: usize) {
        let Ok(mut slot) = self.rts[i].try_borrow_mut() else {
            // A call through it is on the stack (its executor is running this step).
            return;
        };
        let new = open_runtime(
            &self.paths[db_of(i)],
            &self.ids[i],
            &self.clocks[i],
            self.remote[i],
            &self.frozen[i],
        );
        drop(std::mem::replace(&mut *slot, new));
        drop(slot);
        self.generation[i].set(self.generation[i].get() + 1);
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
        let mut ex = ModelExec::plain(self, Exec::Apply);
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
                // Adopted first: a takeover it made is a result the model takes in.
                let n = all.len();
                for s in all {
                    let _ = self.adopt(db, rt, s, "recovered", None);
                }
                self.after(
                    &format!("recover ({n} pathways)"),
                    Some(rt),
                    false,
                    &CallEnd::Ok,
                );
            }
            Err(e) => {
                self.fail(format!("recover through {}: {e}", RT_NAMES[rt]));
                self.after("recover", Some(rt), false, &CallEnd::Refused(describe(&e)));
            }
        }
    }

    /// Takes a loaded pathway into the pool after checking its stage against the model.
    /// A pathway whose attempt the model knows in flight must come back as
    /// `InFlightElsewhere`, or (where [`World::lapse`] allows, and must where it says so)
    /// taken over as unknown (a read: failed); any other pathway in its stored state. `in_flight` is the
    /// pathway whose executor is running this very call (if any).
    fn adopt(
        &self,
        db: usize,
        rt: usize,
        s: StoredPathway,
        what: &str,
        in_flight: Option<&str>,
    ) -> String {
        let id = s.id().to_owned();
        let flight = self.flights.borrow().get(&(db, id.clone())).cloned();
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
            StoredPathway::Failed(p) => (Some(p.state()), None),
            StoredPathway::InFlightElsewhere { attempt, .. } => {
                match &flight {
                    Some(f)
                        if f.attempt == attempt.id
                            && attempt.status == rpr::AttemptStatus::InFlight =>
                    {
                        if self.lapse(rt, f) == Lapse::Must {
                            self.fail(format!(
                                "{what} through {}: {id}'s owner {} cannot be judged and is stopped past its lease, but its attempt {} was not taken over",
                                RT_NAMES[rt], RT_NAMES[f.owner], f.attempt
                            ));
                        }
                        self.cover(if in_flight == Some(id.as_str()) {
                            "in flight elsewhere, seen from inside execute"
                        } else if f.abandoned {
                            "in flight elsewhere after its executor panicked"
                        } else if f.stopped {
                            "in flight elsewhere while its owner is stopped past its lease"
                        } else {
                            "in flight elsewhere"
                        });
                    }
                    _ => self.fail(format!(
                        "{what} through {}: {id} is InFlightElsewhere (attempt {} {}), but no executor is carrying it",
                        RT_NAMES[rt], attempt.id, attempt.status
                    )),
                }
                (None, None)
            }
            other => {
                self.fail(format!("{what}: unknown stored variant {other:?}"));
                (None, None)
            }
        };
        if let (Some(state), Some(f)) = (state, &flight) {
            let taken = if f.read {
                State::Failed
            } else {
                State::WriteStatusUnknown
            };
            if state == taken && self.lapse(rt, f) != Lapse::Never {
                self.taken_over(db, rt, &id, f);
            } else {
                self.fail(format!(
                    "{what} through {}: {id}'s attempt {} is in flight ({} dispatched it; its lease {:?} to lapse), but came back as {state}",
                    RT_NAMES[rt],
                    f.attempt,
                    RT_NAMES[f.owner],
                    self.lapse(rt, f)
                ));
            }
        }
        if let Some(state) = state {
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

    /// Runtime `rt` took `f`, the in-flight attempt of `id`, over as unknown after its lease
    /// lapsed: the ledger must say the owner was not proven gone (it may still send).
    fn taken_over(&self, db: usize, rt: usize, id: &str, f: &Flight) {
        self.flights.borrow_mut().remove(&(db, id.to_owned()));
        self.takeovers
            .borrow_mut()
            .insert((db, id.to_owned(), f.attempt.clone()));
        // A read changes nothing: taken over, it ends failed (its attempt unknown).
        let taken = if f.read {
            State::Failed
        } else {
            State::WriteStatusUnknown
        };
        self.expect(db, id, taken);
        if f.read {
            self.cover("a read taken over after a lapse ends failed");
        }
        let fate = self
            .rt(rt)
            .pathway_events(id)
            .unwrap()
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(&e.event).ok())
            .filter(|e| {
                e["kind"] == "recovered_unknown" && e["attempt"].as_str() == Some(&f.attempt)
            })
            .map(|e| e["data"]["owner_fate"].clone())
            .next_back();
        if fate != Some(json!("lapsed")) {
            self.fail(format!(
                "{id}: attempt {} of {} (who may still send) was taken over with owner_fate {fate:?}, not lapsed",
                f.attempt, RT_NAMES[f.owner]
            ));
        }
        self.cover(&format!(
            "taken over after a lapse ({})",
            if f.stopped {
                "owner stopped"
            } else if f.abandoned {
                "executor panicked"
            } else {
                "heartbeat late"
            }
        ));
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

    /// A token that `fits`; for an even selector, one made for pathway `mine` if there is
    /// one (so that verdicts are used on their pathway after later steps and evidence).
    fn take_token(
        &self,
        sel: u8,
        mine: Option<(usize, &str)>,
        fits: impl Fn(&T) -> bool,
    ) -> Option<Tok> {
        let mut tokens = self.tokens.borrow_mut();
        let fitting: Vec<usize> = (0..tokens.len()).filter(|&i| fits(&tokens[i].t)).collect();
        if fitting.is_empty() {
            return None;
        }
        let own: Vec<usize> = fitting
            .iter()
            .copied()
            .filter(|&i| mine.is_some_and(|(db, id)| tokens[i].db == db && tokens[i].pathway == id))
            .collect();
        let pool = if sel.is_multiple_of(2) && !own.is_empty() {
            own
        } else {
            fitting
        };
        let i = pool[usize::from(sel / 2) % pool.len()];
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
        let rt = self.via(db, a.via);
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
            // Verdicts are often kept and used later from the pool (made for this pathway,
            // for an even selector), after other steps and evidence on it.
            H::Unknown(p) => match a.action % 8 {
                0 | 7 => self.reconcile(db, rt, p, a, false),
                1 => self.attest(db, rt, p, a, false),
                2 | 3 => {
                    let Some(tok) = self.take_token(a.token, Some((db, p.id())), |t| {
                        !matches!(t, T::Approval(_))
                    }) else {
                        self.keep(db, p);
                        return;
                    };
                    self.use_on_unknown(db, rt, p, tok);
                }
                4 | 5 => self.reconcile(db, rt, p, a, true),
                _ => self.attest(db, rt, p, a, true),
            },
            H::RepairUnsettled(p) => match a.action % 9 {
                0 => self.reconcile(db, rt, p, a, false),
                1 => self.attest(db, rt, p, a, false),
                2 | 3 => {
                    let Some(tok) = self.take_token(a.token, Some((db, p.id())), |t| {
                        matches!(t, T::NotApplied(_) | T::Unresolved(_))
                    }) else {
                        self.keep(db, p);
                        return;
                    };
                    self.use_on_unsettled(db, rt, p, tok);
                }
                4 | 5 => self.reconcile(db, rt, p, a, true),
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
                    let quorum = approval.quorum(&self.rt(c.rt)).expect("quorum of one");
                    let r = p.approve(&self.rt(c.rt), quorum);
                    self.done::<S, Approved>(&call, r);
                } else {
                    // Kept as the quorum it makes now (one approver, no expiry), to be
                    // used later, maybe after it was used or revoked, or on another runtime.
                    let quorum = approval.quorum(&self.rt(c.rt)).expect("quorum of one");
                    self.keep_token(Tok::approval(c.db, p.id(), quorum));
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
            ..
        }) = self.take_token(sel, None, |t| matches!(t, T::Approval(_)))
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
        let mut ex = ModelExec::plain(self, a.exec);
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
            stop: match a.hang {
                Hang::Stop(n) => Some(n),
                _ => None,
            },
        });
        let mut ex = ModelExec {
            world: self,
            kind: a.exec,
            hang,
            panic: a.panic,
            flight: Some((db, id.clone(), rt)),
            attempt: None,
        };
        let label = format!(
            "{:?}{}{}",
            a.exec,
            match a.hang {
                Hang::No => String::new(),
                Hang::Yes => ", hanging".into(),
                Hang::Slow => ", hanging past the lease".into(),
                Hang::Stop(n) => format!(", stopping past the lease for {n} steps"),
            },
            match a.panic {
                Panic::No => "",
                Panic::Before => ", panicking before it writes",
                Panic::After => ", panicking after it wrote",
                Panic::HandOff => ", panicking after handing its write to a worker",
            }
        );
        let what = |r: &str| format!("{name} {id}@{} with {label} as {by} = {r}", DB_NAMES[db]);
        if merged {
            self.cover("dispatch_and_confirm");
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if merged {
                let mut readback = self.readback(a.arg);
                bound.dispatch_and_confirm(&self.rt(rt), &by, &mut ex, &mut readback)
            } else {
                bound.dispatch(&self.rt(rt), &by, &mut ex)
            }
        }));
        let outcome = match caught {
            Ok(outcome) => outcome,
            Err(payload) if payload.is::<ModelPanic>() => {
                // The attempt stays in flight in this process (its write may live on).
                self.cover("executor panicked");
                if self.flights.borrow().contains_key(&(db, id.clone())) {
                    self.expect(db, &id, State::Running);
                }
                self.after(
                    &what("panicked; in flight in this process"),
                    Some(rt),
                    call.foreign,
                    &CallEnd::Ok,
                );
                return;
            }
            Err(payload) => std::panic::resume_unwind(payload),
        };
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
            Outcome::ReadFailed(p) => self.ok(&call, p),
            Outcome::Unrecorded(unrecorded) => {
                let taken = ex.attempt.as_ref().is_some_and(|at| {
                    self.takeovers
                        .borrow()
                        .contains(&(db, id.clone(), at.clone()))
                });
                let fenced = matches!(
                    unrecorded.error,
                    PathwayError::Store(StoreError::Fenced { .. })
                );
                if taken && fenced {
                    // Refused, and recorded as `late_outcome_refused`: evidence after any
                    // verdict made while the owner was away.
                    self.cover("late outcome refused and recorded after a takeover");
                } else {
                    self.fail(format!(
                        "dispatch {id}: the outcome could not be recorded ({}): {}",
                        if taken {
                            "taken over, but not fenced"
                        } else {
                            "never taken over"
                        },
                        unrecorded.error
                    ));
                }
                self.after(
                    &what("unrecorded: late outcome refused"),
                    Some(rt),
                    call.foreign,
                    &CallEnd::RefusedRecorded(describe(&unrecorded.error)),
                );
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
        let attempt = p.attempt_id().to_owned();
        let taint = self.sender(db, p.id(), &attempt);
        if let Some(sender) = taint {
            self.cover(&format!(
                "reconcile while the {sender:?} may still send -> {}",
                t.name()
            ));
            if matches!(t, T::NotApplied(_)) {
                self.fail(format!(
                    "{what}: a readback found no effect and rpr said not applied, while the {sender:?} of attempt {attempt} may still send"
                ));
            }
        }
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
        let tok = self.token(db, p.id(), attempt, t, taint);
        if then_use {
            Reconcile::use_token(self, db, rt, p, tok);
        } else {
            self.keep_token(tok);
            self.keep(db, p);
        }
    }

    /// A reconciliation token for `attempt` of pathway `id` on `db`, with the pathway's
    /// stored version now.
    fn token(&self, db: usize, id: &str, attempt: String, t: T, taint: Option<Sender>) -> Tok {
        Tok {
            db,
            t,
            pathway: id.to_owned(),
            attempt,
            minted_at: self.stored_version(db, id),
            taint,
        }
    }

    fn attest<S: Reconcilable>(&self, db: usize, rt: usize, p: Pathway<S>, a: &Act, then_use: bool)
    where
        Pathway<S>: Keep + Reconcile,
    {
        let foreign = db_of(rt) != db;
        // Attestations tell the truth too (or decline to decide): what the effect log shows
        // now, even while someone may still send.
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
        let attempt = p.attempt_id().to_owned();
        let taint = self.sender(db, p.id(), &attempt);
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
                if let (Some(sender), T::NotApplied(token)) = (taint, &t) {
                    // Only the repair owner may accept the risk, and the token says so.
                    if by.as_str() != "repair_owner"
                        || token.evidence().get("accepted_risk").is_none()
                    {
                        self.fail(format!(
                            "{what}: a not-applied attestation was given while the {sender:?} of attempt {attempt} may still send, without the repair owner accepting the risk: {}",
                            token.evidence()
                        ));
                    }
                    self.cover(&format!(
                        "not applied attested by the repair owner, accepting the risk that the {sender:?} sends"
                    ));
                }
                self.after(&what, Some(rt), foreign, &CallEnd::Ok);
                let tok = self.token(db, p.id(), attempt, t, taint);
                if then_use {
                    Reconcile::use_token(self, db, rt, p, tok);
                } else {
                    self.keep_token(tok);
                    self.keep(db, p);
                }
            }
            Err(e) => {
                if taint.is_some()
                    && verdict == Attestation::NotApplied
                    && by.as_str() == "evidence_owner"
                    && matches!(e, PathwayError::NotAuthorized { .. })
                {
                    self.cover("not applied attested by the evidence owner while the owner may still send: refused");
                }
                self.after(&what, Some(rt), foreign, &CallEnd::Refused(describe(&e)));
                self.keep(db, p);
            }
        }
    }

    /// Whether the model uses `tok` on a pathway now at `now` (its stored version): a
    /// not-applied verdict made while someone could still send rests on an accepted risk.
    /// It is used only after its owner came back (whose outcome, recorded since, must void
    /// it); while anyone may still send, or after a worker wrote unseen, it waits.
    fn usable(&self, db: usize, id: &str, tok: &Tok, now: Option<i64>) -> bool {
        let (T::NotApplied(_), Some(sender)) = (&tok.t, tok.taint) else {
            return true;
        };
        let at = (db, id.to_owned(), tok.attempt.clone());
        let came_back = sender == Sender::Owner && self.returned.borrow().contains(&at);
        if !came_back || tok.db != db || tok.pathway != id {
            return false;
        }
        if tok.minted_at == now {
            self.fail(format!(
                "{id}: the owner of attempt {} came back after a risky not-applied verdict was made, but the pathway is still at the verdict's version {now:?}: its outcome is not on record",
                tok.attempt
            ));
        }
        true
    }

    /// Uses `tok` on `p` (its stage's method `name`, `result` its call): checks what a
    /// token may do. A token made before the pathway's stored version moved is refused (if
    /// it names this pathway's attempt, as stale); a not-applied verdict accepted is valid
    /// only while nobody could still send.
    fn token_used<S: Stage, N: Stage>(
        &self,
        c: &Call,
        tok: &TokInfo,
        attempt: &str,
        before: Option<i64>,
        result: Result<Pathway<N>, Refused<S>>,
    ) where
        Pathway<S>: Keep,
        Pathway<N>: Keep,
    {
        let moved = tok.db == c.db && tok.minted_at.is_some() && tok.minted_at != before;
        let same = !c.foreign && tok.db == c.db && tok.pathway == c.id && tok.attempt == attempt;
        match &result {
            Ok(_) => {
                if moved {
                    self.fail(format!(
                        "{}: a {} verdict made at version {:?} was used at version {before:?}",
                        c.what("ok"),
                        tok.name,
                        tok.minted_at
                    ));
                }
                if tok.name == "not_applied" {
                    let at = (c.db, c.id.clone(), attempt.to_owned());
                    match self.senders.borrow().get(&at) {
                        Some(sender) => self.fail(format!(
                            "{}: a not-applied verdict was accepted while the {sender:?} of attempt {attempt} may still send",
                            c.what("ok")
                        )),
                        None => {
                            self.valid_verdicts.borrow_mut().insert(at);
                        }
                    }
                    if tok.taint.is_some() {
                        self.cover("a risky not-applied verdict used once nobody could send");
                    }
                }
            }
            Err(r) => {
                let stale = matches!(r.error(), PathwayError::StaleToken { .. });
                if stale {
                    self.cover(&format!(
                        "{} verdict refused as stale{}",
                        tok.name,
                        if tok.taint.is_some() {
                            " (made while someone could still send)"
                        } else {
                            ""
                        }
                    ));
                }
                if moved
                    && same
                    && !stale
                    && !matches!(r.error(), PathwayError::Store(StoreError::Conflict { .. }))
                {
                    self.fail(format!(
                        "{}: a verdict made before the pathway moved on was refused, but not as stale: {}",
                        c.what("refused"),
                        r.error()
                    ));
                }
            }
        }
        self.done(c, result);
    }

    fn use_on_unknown(&self, db: usize, rt: usize, p: Pathway<Unknown>, tok: Tok) {
        let foreign = db_of(rt) != db || tok.db != db_of(rt);
        let before = self.stored_version(db, p.id());
        if !self.usable(db, p.id(), &tok, before) {
            self.keep_token(tok);
            self.keep(db, p);
            return;
        }
        let call = |name| Call {
            name,
            id: p.id().to_owned(),
            db,
            rt,
            foreign,
        };
        if matches!(tok.t, T::Approval(_)) {
            self.keep_token(tok);
            self.keep(db, p);
            return;
        }
        let attempt = p.attempt().to_owned();
        let r = &self.rt(rt);
        let (shown, t) = split_token(tok);
        match t {
            T::Applied(t) => {
                let c = call("complete");
                self.token_used(&c, &shown, &attempt, before, p.complete(r, t));
            }
            T::NotApplied(t) => {
                let c = call("require_repair (not applied)");
                self.token_used(&c, &shown, &attempt, before, p.require_repair(r, t));
            }
            T::Unresolved(t) => {
                let c = call("keep_unknown");
                self.token_used(&c, &shown, &attempt, before, p.keep_unknown(r, t));
            }
            T::Approval(_) => unreachable!(),
        }
    }

    fn use_on_unsettled(&self, db: usize, rt: usize, p: Pathway<RepairUnsettled>, tok: Tok) {
        let foreign = db_of(rt) != db || tok.db != db_of(rt);
        let before = self.stored_version(db, p.id());
        if !matches!(tok.t, T::NotApplied(_) | T::Unresolved(_))
            || !self.usable(db, p.id(), &tok, before)
        {
            // No method takes an applied verdict: it leaves the pathway unsettled.
            self.keep_token(tok);
            self.keep(db, p);
            return;
        }
        let call = |name| Call {
            name,
            id: p.id().to_owned(),
            db,
            rt,
            foreign,
        };
        let attempt = p.attempt().to_owned();
        let r = &self.rt(rt);
        let (shown, t) = split_token(tok);
        match t {
            T::NotApplied(t) => {
                let c = call("settle");
                self.token_used(&c, &shown, &attempt, before, p.settle(r, t));
            }
            T::Unresolved(t) => {
                let c = call("keep_unsettled");
                self.token_used(&c, &shown, &attempt, before, p.keep_unsettled(r, t));
            }
            _ => unreachable!(),
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
    /// B) loads and recovers the pathway, and every stale handle of it is dispatched. A
    /// stopping executor first stops its runtime's heartbeat and waits until its lease has
    /// lapsed by the database's clock; then, after the stale handles, the next steps of the
    /// case run (none through the stopped runtime); then it resumes.
    fn hang(&self, ctx: &HangCtx) {
        let stop = ctx
            .stop
            .filter(|_| ctx.rt < 2 && self.stopped.get().is_none());
        if ctx.slow || (ctx.stop.is_some() && stop.is_none()) {
            std::thread::sleep(slow());
            self.cover("slow executor past its lease");
        }
        let other = match ctx.rt {
            0 | 1 if self.stopped.get() == Some(1 - ctx.rt) => ctx.rt,
            0 => 1,
            1 => 0,
            _ => 2,
        };
        if stop.is_some() {
            self.frozen[ctx.rt].store(true, AtomicOrdering::Relaxed);
            self.stopped.set(Some(ctx.rt));
            self.wait_past_lease(ctx, other);
            self.cover(&format!(
                "owner stopped past its lease ({})",
                if self.remote[ctx.rt] {
                    "judged by its lease"
                } else {
                    "judged by its process"
                }
            ));
        }
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
                    // A read taken over just above ended failed: recovery lists only the
                    // unresolved.
                    let ended = self
                        .expected
                        .borrow()
                        .get(&(ctx.db, ctx.pathway.clone()))
                        .is_some_and(|s| s.is_terminal());
                    if !ended && !all.iter().any(|s| s.id() == ctx.pathway) {
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
            let rt = if i % 2 == 0 || stop.is_some() {
                other
            } else {
                ctx.rt
            };
            let mut ex = ModelExec::plain(self, Exec::Apply);
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
        if let Some(n) = stop {
            // The steps that run meanwhile start with the stopped pathway's newest handle
            // (its unknown stage, if it was taken over).
            {
                let mut handles = self.handles.borrow_mut();
                if let Some(i) = handles
                    .iter()
                    .rposition(|e| e.db == ctx.db && e.h.id() == ctx.pathway)
                {
                    let e = handles.remove(i);
                    handles.push(e);
                }
            }
            // What the dispatch and the looks inside it wrote so far, checked before the
            // steps that run meanwhile.
            self.after(
                &format!(
                    "[{} stopped inside execute of {}]",
                    RT_NAMES[ctx.rt], ctx.pathway
                ),
                Some(ctx.rt),
                false,
                &CallEnd::Ok,
            );
            for _ in 0..n {
                let Some((i, op)) = self.next_op() else {
                    break;
                };
                self.trace.borrow_mut().push(format!(
                    "-- step {i} (while {} is stopped): {op:?}",
                    RT_NAMES[ctx.rt]
                ));
                self.run(&op);
            }
        }
        // After the stale attempts, the in-flight attempt is still not ours to take.
        peek(other);
        if stop.is_some() {
            if let Some(f) = self
                .flights
                .borrow_mut()
                .get_mut(&(ctx.db, ctx.pathway.clone()))
            {
                f.stopped = false;
            }
            self.stopped.set(None);
            self.frozen[ctx.rt].store(false, AtomicOrdering::Relaxed);
        }
    }

    /// Waits, the owner's heartbeat stopped, until the in-flight attempt's lease has lapsed
    /// by the database's clock (the machine's: SQLite's `unixepoch`, a local PostgreSQL's
    /// `clock_timestamp`), and at least as long as a slow executor hangs.
    fn wait_past_lease(&self, ctx: &HangCtx, reader: usize) {
        let started = Instant::now();
        let attempt = self
            .flights
            .borrow()
            .get(&(ctx.db, ctx.pathway.clone()))
            .map(|f| f.attempt.clone());
        loop {
            std::thread::sleep(lease() / 4);
            let until = self
                .rt(reader)
                .attempt_records(&ctx.pathway)
                .unwrap()
                .into_iter()
                .find(|a| Some(&a.id) == attempt.as_ref())
                .and_then(|a| a.lease_until);
            let now = i64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis(),
            )
            .unwrap();
            if started.elapsed() >= slow() && until.is_none_or(|u| now > u + 5) {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                self.fail(format!(
                    "{}: the lease of a stopped owner never lapsed (lease_until {until:?}, now {now})",
                    ctx.pathway
                ));
                break;
            }
        }
        if let Some(f) = self
            .flights
            .borrow_mut()
            .get_mut(&(ctx.db, ctx.pathway.clone()))
        {
            f.stopped = true;
        }
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
        PathwayError::StaleToken { .. } => "StaleToken".into(),
        PathwayError::Store(StoreError::Conflict { .. }) => "Conflict".into(),
        PathwayError::Store(StoreError::Fenced { .. }) => "Fenced".into(),
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
    /// The attempt it reconciles.
    fn attempt_id(&self) -> &str;
}

impl Reconcile for Pathway<Unknown> {
    fn use_token(w: &World, db: usize, rt: usize, p: Self, tok: Tok) {
        w.use_on_unknown(db, rt, p, tok);
    }
    fn attempt_id(&self) -> &str {
        self.attempt()
    }
}

impl Reconcile for Pathway<RepairUnsettled> {
    fn use_token(w: &World, db: usize, rt: usize, p: Self, tok: Tok) {
        w.use_on_unsettled(db, rt, p, tok);
    }
    fn attempt_id(&self) -> &str {
        self.attempt()
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
    /// Stops its runtime past the lease while this many steps of the case run.
    stop: Option<u8>,
}

struct ModelExec<'w> {
    world: &'w World,
    kind: Exec,
    hang: Option<HangCtx>,
    panic: Panic,
    /// The pathway it is dispatched for (database, id, runtime), so that the model knows
    /// its attempt while `execute` runs; and that attempt, once known.
    flight: Option<(usize, String, usize)>,
    attempt: Option<String>,
}

impl<'w> ModelExec<'w> {
    /// An executor for binding only, or for a dispatch the model expects refused.
    fn plain(world: &'w World, kind: Exec) -> Self {
        Self {
            world,
            kind,
            hang: None,
            panic: Panic::No,
            flight: None,
            attempt: None,
        }
    }
}

impl ModelExec<'_> {
    /// The attempt `execute` was called for is in flight, and its owner may send it.
    fn start_flight(&mut self) {
        let Some((db, pathway, rt)) = self.flight.clone() else {
            return;
        };
        let records = self.world.rt(rt).attempt_records(&pathway).unwrap();
        let Some(last) = records.last() else {
            self.world
                .fail(format!("{pathway}: executed without an attempt record"));
            return;
        };
        let attempt = last.id.clone();
        let definition_read = self
            .world
            .rt(rt)
            .pathway_record(&pathway)
            .unwrap()
            .is_some_and(|r| r.definition["class"] == "read_only");
        let read = definition_read && last.binding["class"] == "read_only";
        self.world.flights.borrow_mut().insert(
            (db, pathway.clone()),
            Flight {
                attempt: attempt.clone(),
                owner: rt,
                generation: self.world.generation[rt].get(),
                stopped: false,
                abandoned: false,
                read,
            },
        );
        self.world.expect(db, &pathway, State::Running);
        self.world
            .senders
            .borrow_mut()
            .insert((db, pathway, attempt.clone()), Sender::Owner);
        self.attempt = Some(attempt);
    }

    /// `execute` ends: by returning (`returned`), or by a panic that leaves the write with
    /// a worker (`worker`) or with nobody.
    fn end_flight(&self, returned: bool, worker: Option<&(usize, String)>) {
        let (Some((db, pathway, _)), Some(attempt)) = (&self.flight, &self.attempt) else {
            return;
        };
        let at = (*db, pathway.clone(), attempt.clone());
        {
            let mut flights = self.world.flights.borrow_mut();
            if let Some(f) = flights.get_mut(&(*db, pathway.clone()))
                && f.attempt == *attempt
            {
                if returned {
                    flights.remove(&(*db, pathway.clone()));
                } else {
                    f.abandoned = true;
                    f.stopped = false;
                }
            }
        }
        let mut senders = self.world.senders.borrow_mut();
        match worker {
            Some((wdb, key)) => {
                senders.insert(at, Sender::Worker);
                self.world.workers.borrow_mut().push(Worker {
                    db: *wdb,
                    key: key.clone(),
                    pathway: pathway.clone(),
                    attempt: attempt.clone(),
                });
            }
            None => {
                senders.remove(&at);
            }
        }
        if returned {
            self.world
                .returned
                .borrow_mut()
                .insert((*db, pathway.clone(), attempt.clone()));
        }
    }

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
        self.start_flight();
        if let Some(ctx) = self.hang.take() {
            self.world.hang(&ctx);
        }
        match self.panic {
            Panic::No => {}
            Panic::Before | Panic::After => {
                if self.panic == Panic::After {
                    self.apply(&key);
                }
                self.end_flight(false, None);
                std::panic::panic_any(ModelPanic);
            }
            Panic::HandOff => {
                self.end_flight(false, Some(&key));
                std::panic::panic_any(ModelPanic);
            }
        }
        let delivery = self.deliver(&key);
        self.end_flight(true, None);
        delivery
    }
}

impl ModelExec<'_> {
    /// What the executor does with the request, and what it says.
    fn deliver(&mut self, key: &(usize, String)) -> Delivery {
        let key = key.clone();
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
    remote: [bool; 3],
    ops: &[Op],
    coverage: &Mutex<BTreeMap<String, u64>>,
) -> Result<(), TestCaseError> {
    let world = World::new(separate_ids, remote, ops.to_vec());
    while let Some((i, op)) = world.next_op() {
        world
            .trace
            .borrow_mut()
            .push(format!("-- step {i}: {op:?}"));
        world.run(&op);
        let failures = std::mem::take(&mut *world.failures.borrow_mut());
        if !failures.is_empty() {
            return Err(TestCaseError::fail(format!(
                "{}\n\ntrace (R1, R2 on database A; R3 on B; R1 and R2 {} ids; owners judged by their lease alone: {}):\n{}",
                failures.join("\n"),
                if separate_ids {
                    "with separate"
                } else {
                    "sharing"
                },
                (0..3)
                    .filter(|&i| remote[i])
                    .map(|i| RT_NAMES[i])
                    .collect::<Vec<_>>()
                    .join(", "),
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
        // tests/core/model.proptest-regressions, beside this file.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    };
    let coverage = Mutex::new(BTreeMap::new());
    let started = Instant::now();
    let mut runner = TestRunner::new(config);
    quiet_model_panics();
    let result = runner.run(&case_strategy(), |(separate_ids, remote, ops)| {
        run_case(separate_ids, remote, &ops, &coverage)
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
        Err(TestError::Fail(reason, (separate_ids, remote, ops))) => {
            panic!(
                "{reason}\n\nminimal failing case (separate_ids = {separate_ids}, remote = {remote:?}):\n{ops:#?}"
            )
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
