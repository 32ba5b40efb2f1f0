//! Shared test support: temporary databases and scripted executors.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test binary uses a different part of the support module"
)]

use std::path::PathBuf;
use std::sync::atomic::AtomicI64;

use rpr::executor::{
    Binding, Delivery, Executor, Observation, Readback, Refusal, RejectionClass, Request,
};
use rpr::{ActionClass, Actor, Authority, Clock, Definition, Runtime, SequentialIds};
use serde_json::{Value, json};

/// A fresh directory (the `tempfile` crate's), removed on drop, and the database a test
/// uses: a SQLite file in it, or, when `RPR_TEST_BACKEND=postgres`, a fresh schema of the
/// PostgreSQL database at `RPR_PG_URL` (see [`pg`]).
pub struct TempDir {
    dir: tempfile::TempDir,
    tag: String,
    schema: std::sync::OnceLock<String>,
}

impl TempDir {
    /// Under the system temp dir.
    pub fn new(tag: &str) -> Self {
        Self::new_in(&std::env::temp_dir(), tag).expect("a temp dir")
    }
    /// Under `parent` (for example `/dev/shm`).
    pub fn new_in(parent: &std::path::Path, tag: &str) -> std::io::Result<Self> {
        tempfile::Builder::new()
            .prefix(&format!("rpr-test-{tag}-"))
            .tempdir_in(parent)
            .map(|dir| Self {
                dir,
                tag: tag.to_owned(),
                schema: std::sync::OnceLock::new(),
            })
    }
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
    /// The test's database location: the backend under test (`RPR_TEST_BACKEND`).
    pub fn db(&self) -> PathBuf {
        if pg::on() {
            PathBuf::from(pg::location(
                self.schema.get_or_init(|| pg::schema(&self.tag)),
            ))
        } else {
            self.sqlite_db()
        }
    }
    /// A SQLite file, whatever the backend under test: for tests of the file itself.
    pub fn sqlite_db(&self) -> PathBuf {
        self.dir.path().join("rpr.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(schema) = self.schema.get() {
            pg::drop_schema(schema);
        }
    }
}

/// The PostgreSQL side of the suites that run on both stores: `RPR_TEST_BACKEND=postgres`
/// (with the `postgres` feature and `RPR_PG_URL`, from `eval "$(bash .ci/postgres)"`) runs
/// them on a real server, each database a schema of its own, dropped when its test passed
/// and kept for a look when it failed.
pub mod pg {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Whether the suites run on PostgreSQL.
    pub fn on() -> bool {
        match std::env::var("RPR_TEST_BACKEND").as_deref() {
            Ok("postgres") => true,
            Ok("sqlite") | Err(_) => false,
            Ok(other) => panic!("RPR_TEST_BACKEND={other}: expected sqlite or postgres"),
        }
    }

    fn url() -> String {
        std::env::var("RPR_PG_URL").unwrap_or_else(|_| {
            panic!(
                "RPR_TEST_BACKEND=postgres needs RPR_PG_URL: start a server with `eval \"$(bash .ci/postgres)\"`"
            )
        })
    }

    /// The location of the store in `schema`: the server's URL with `search_path` set to it.
    pub fn location(schema: &str) -> String {
        in_schema(&url(), schema)
    }

    /// As [`location`], through the read-only role (`RPR_PG_READER_URL`).
    pub fn reader_location(schema: &str) -> String {
        let url = std::env::var("RPR_PG_READER_URL").unwrap_or_else(|_| {
            panic!(
                "RPR_PG_READER_URL is not set: start a server with `eval \"$(bash .ci/postgres)\"`"
            )
        });
        in_schema(&url, schema)
    }

    fn in_schema(url: &str, schema: &str) -> String {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-csearch_path%3D{schema}")
    }

    /// A new, migrated schema for one test database.
    #[cfg(feature = "postgres")]
    pub fn schema(tag: &str) -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        let clean: String = tag
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(30)
            .collect();
        let name = format!(
            "t_{}_{}_{clean}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        rpr::store::pg::prepare_schema(&url(), &name)
            .unwrap_or_else(|e| panic!("creating schema {name}: {e}"));
        name
    }

    #[cfg(not(feature = "postgres"))]
    pub fn schema(_: &str) -> String {
        let _ = (AtomicU64::new(0), Ordering::Relaxed);
        panic!(
            "RPR_TEST_BACKEND=postgres needs the `postgres` feature: cargo test --features postgres"
        )
    }

    /// `db_dump` through an open connection.
    #[cfg(feature = "postgres")]
    pub fn dump_client(c: &mut postgres::Client) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for table in ["meta", "pathways", "attempts", "approvals", "ledger"] {
            writeln!(out, "== {table}").unwrap();
            for row in c
                .query(&format!("SELECT t::text FROM {table} t ORDER BY 1"), &[])
                .unwrap()
            {
                writeln!(out, "{}", row.get::<_, String>(0)).unwrap();
            }
        }
        out
    }

    /// Drops a test's schema, unless the test is failing (kept for a look).
    #[cfg(feature = "postgres")]
    pub fn drop_schema(schema: &str) {
        if std::thread::panicking() {
            eprintln!("kept PostgreSQL schema {schema} of a failing test");
        } else if let Ok(mut c) = postgres::Client::connect(&url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }

    /// Without the feature no schema was made (`schema` refuses).
    #[cfg(not(feature = "postgres"))]
    pub fn drop_schema(_: &str) {}
}

/// A clock that ticks one millisecond per reading, from a fixed start.
#[derive(Clone)]
pub struct TickClock(pub std::sync::Arc<AtomicI64>);

impl TickClock {
    pub fn at(start: i64) -> Self {
        Self(std::sync::Arc::new(AtomicI64::new(start)))
    }
}

impl Clock for TickClock {
    fn now_ms(&self) -> i64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// A deterministic runtime (sequential ids, ticking clock) on `path`. Approvals tick the
/// same clock (on PostgreSQL they would follow the database's), so that what it records is
/// the same on both stores.
pub fn runtime(path: &std::path::Path) -> Runtime {
    let clock = TickClock::at(1_700_000_000_000);
    Runtime::builder(path)
        .clock(clock.clone())
        .approval_clock(clock)
        .ids(SequentialIds::default())
        .open()
        .unwrap()
}

pub fn actor(name: &str) -> Actor {
    Actor::new(name)
}

/// A definition where each role has its own actor named after the role.
pub fn definition(key: &str, class: ActionClass) -> Definition {
    use rpr::Role::*;
    let auth = Authority::single(&actor("decision_owner"))
        .with(ApprovalAuthority, &actor("approval_authority"))
        .with(ExecutionActor, &actor("execution_actor"))
        .with(StopAuthority, &actor("stop_authority"))
        .with(EvidenceOwner, &actor("evidence_owner"))
        .with(RepairOwner, &actor("repair_owner"))
        .with(ResumeAuthority, &actor("resume_authority"))
        .with(ResidualOwner, &actor("residual_owner"));
    Definition::new(
        Request::new("put", json!({"key": key, "value": "v"})),
        class,
        key,
        auth,
    )
}

/// An executor that answers with a scripted delivery and counts its calls.
pub struct Scripted {
    pub deliveries: Vec<Delivery>,
    pub executed: usize,
    pub refuse_prepare: Option<Refusal>,
}

impl Scripted {
    pub fn new(deliveries: Vec<Delivery>) -> Self {
        Self {
            deliveries,
            executed: 0,
            refuse_prepare: None,
        }
    }
    pub fn ok() -> Self {
        Self::new(vec![Delivery::Succeeded {
            reply: json!({"ok": true}),
        }])
    }
}

impl Executor for Scripted {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        // It claims a read-only target, so definitions of either class may bind it
        // (a definition may be stricter than its executor, never laxer).
        Ok(Binding::new("scripted", json!({"executor": "scripted"}))
            .unwrap()
            .read_only())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        match self.refuse_prepare.clone() {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        let d = if self.deliveries.len() > 1 {
            self.deliveries.remove(0)
        } else {
            self.deliveries[0].clone()
        };
        self.executed += 1;
        d
    }
}

/// A readback that reports a fixed observation.
pub struct Sees(pub &'static str);

impl Readback for Sees {
    fn observe(&mut self, _request: &Request) -> Observation {
        let evidence = json!({"seen": self.0});
        match self.0 {
            "applied" => Observation::Applied { evidence },
            "not_applied" => Observation::NotApplied { evidence },
            _ => Observation::Inconclusive { evidence },
        }
    }
}

/// The event kinds of pathway `id`, in ledger order, on either store.
pub fn event_kinds(rt: &Runtime, id: &str) -> Vec<String> {
    rt.pathway_events(id)
        .unwrap()
        .iter()
        .map(|row| {
            let e: Value = serde_json::from_str(&row.event).unwrap();
            e["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// All `(from, to)` transitions recorded in the ledger.
pub fn ledger_edges(rt: &Runtime) -> Vec<(String, String)> {
    rt.ledger_rows(0, usize::MAX)
        .unwrap()
        .into_iter()
        .filter_map(|row| {
            let e: Value = serde_json::from_str(&row.event).unwrap();
            let from = e["from"].as_str()?.to_owned();
            let to = e["to"].as_str()?.to_owned();
            (from != to).then_some((from, to))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Database fingerprints (for "nothing was written" checks).

/// Every row of every rpr table, as text, in a stable order. Read through a
/// separate read-only connection, so it sees exactly what is committed.
pub fn db_dump(path: &std::path::Path) -> String {
    Sql::open_read_only(path).dump()
}

/// `db_dump` of a SQLite database through an open connection.
fn sqlite_dump(conn: &rusqlite::Connection) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for table in ["meta", "pathways", "attempts", "approvals", "ledger"] {
        writeln!(out, "== {table}").unwrap();
        let mut stmt = conn
            .prepare_cached(&format!("SELECT * FROM {table} ORDER BY rowid"))
            .unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let cells: Vec<String> = (0..n)
                .map(|i| format!("{:?}", row.get::<_, rusqlite::types::Value>(i).unwrap()))
                .collect();
            writeln!(out, "{}", cells.join(" | ")).unwrap();
        }
    }
    out
}

/// The one integer column of `sql`'s rows (NULL as `None`), on either store, read by a
/// connection of its own.
pub fn ints(location: &std::path::Path, sql: &str) -> Vec<Option<i64>> {
    Sql::open_read_only(location).ints(sql)
}

/// The one text column of `sql`'s rows, on either store, read by a connection of its own.
pub fn texts(location: &std::path::Path, sql: &str) -> Vec<String> {
    Sql::open_read_only(location).texts(sql)
}

/// The ids of every stored pathway, in order.
pub fn pathway_ids(location: &std::path::Path) -> Vec<String> {
    texts(location, "SELECT id FROM pathways ORDER BY id")
}

/// A hand edit behind rpr's back (SQL both stores accept), by a connection of its own.
pub fn hand_edit(location: &std::path::Path, sql: &str) {
    Sql::open(location).batch(sql);
}

/// The number of rows in `table`.
pub fn row_count(path: &std::path::Path, table: &str) -> i64 {
    ints(path, &format!("SELECT count(*) FROM {table}"))[0].expect("a count")
}

/// A parameter of a [`Sql`] statement.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Int(i64),
    Text(&'a str),
}

/// A connection of its own to a test database, on either store, kept open for many hand
/// edits and queries (a tamper test's thousands of edits): a SQLite path through
/// `rusqlite`, a `postgres://` location through a `postgres::Client` (in the test's schema).
/// Parameters are written `$1`, `$2`… (SQLite reads them as `?1`, `?2`…); statements are
/// prepared once per connection.
pub struct Sql(SqlConn);

enum SqlConn {
    Sqlite(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Pg(Box<PgConn>),
}

/// A PostgreSQL connection with the statements it prepared.
#[cfg(feature = "postgres")]
type PgConn = std::cell::RefCell<(
    postgres::Client,
    std::collections::HashMap<String, postgres::Statement>,
)>;

impl Sql {
    pub fn open(location: &std::path::Path) -> Self {
        match location.to_str().filter(|l| l.starts_with("postgres://")) {
            None => Self(SqlConn::Sqlite(
                rusqlite::Connection::open(location).unwrap(),
            )),
            #[cfg(feature = "postgres")]
            Some(url) => Self(SqlConn::Pg(Box::new(std::cell::RefCell::new((
                postgres::Client::connect(url, postgres::NoTls).unwrap(),
                std::collections::HashMap::new(),
            ))))),
            #[cfg(not(feature = "postgres"))]
            Some(_) => panic!("a PostgreSQL location needs the `postgres` feature"),
        }
    }

    /// As [`Sql::open`], read-only (SQLite's flag; PostgreSQL's `default_transaction_read_only`).
    pub fn open_read_only(location: &std::path::Path) -> Self {
        let sql = match location.to_str().filter(|l| l.starts_with("postgres://")) {
            None => {
                return Self(SqlConn::Sqlite(
                    rusqlite::Connection::open_with_flags(
                        location,
                        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                    )
                    .unwrap(),
                ));
            }
            Some(_) => Self::open(location),
        };
        sql.batch("SET default_transaction_read_only = on");
        sql
    }

    /// [`db_dump`] through this connection.
    pub fn dump(&self) -> String {
        match &self.0 {
            SqlConn::Sqlite(c) => sqlite_dump(c),
            #[cfg(feature = "postgres")]
            SqlConn::Pg(c) => pg::dump_client(&mut c.borrow_mut().0),
        }
    }

    /// SQLite's `PRAGMA data_version` (it changes whenever another connection commits);
    /// `None` on PostgreSQL, which has no such counter (compare dumps instead).
    #[cfg_attr(
        not(feature = "postgres"),
        allow(
            clippy::unnecessary_wraps,
            reason = "`None` is PostgreSQL's, built with the feature"
        )
    )]
    pub fn data_version(&self) -> Option<i64> {
        match &self.0 {
            SqlConn::Sqlite(c) => Some(
                c.query_row("PRAGMA data_version", [], |r| r.get(0))
                    .unwrap(),
            ),
            #[cfg(feature = "postgres")]
            SqlConn::Pg(_) => None,
        }
    }

    /// The one text column of `sql`'s rows (no parameters).
    pub fn texts(&self, sql: &str) -> Vec<String> {
        match &self.0 {
            SqlConn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql).unwrap();
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            #[cfg(feature = "postgres")]
            SqlConn::Pg(c) => c
                .borrow_mut()
                .0
                .query(sql, &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }

    /// The one integer column of `sql`'s rows, NULL as `None` (no parameters).
    pub fn ints(&self, sql: &str) -> Vec<Option<i64>> {
        match &self.0 {
            SqlConn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql).unwrap();
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            #[cfg(feature = "postgres")]
            SqlConn::Pg(c) => c
                .borrow_mut()
                .0
                .query(sql, &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }

    /// Whether this is a PostgreSQL connection.
    pub fn is_postgres(&self) -> bool {
        !matches!(self.0, SqlConn::Sqlite(_))
    }

    /// Runs `sql` (several statements, no parameters); panics on an error.
    pub fn batch(&self, sql: &str) {
        match &self.0 {
            SqlConn::Sqlite(c) => c.execute_batch(sql).unwrap(),
            #[cfg(feature = "postgres")]
            SqlConn::Pg(c) => c.borrow_mut().0.batch_execute(sql).unwrap(),
        }
    }

    /// Runs one statement; the number of rows it changed, or the store's error as text.
    pub fn try_execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, String> {
        match &self.0 {
            SqlConn::Sqlite(c) => {
                let mut stmt = c
                    .prepare_cached(&sql.replace('$', "?"))
                    .map_err(|e| e.to_string())?;
                let params: Vec<&dyn rusqlite::ToSql> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Int(i) => i as &dyn rusqlite::ToSql,
                        Arg::Text(t) => t as &dyn rusqlite::ToSql,
                    })
                    .collect();
                stmt.execute(params.as_slice())
                    .map(|n| u64::try_from(n).unwrap())
                    .map_err(|e| e.to_string())
            }
            #[cfg(feature = "postgres")]
            SqlConn::Pg(c) => {
                let mut c = c.borrow_mut();
                let (client, cache) = &mut *c;
                let stmt = if let Some(s) = cache.get(sql) {
                    s.clone()
                } else {
                    let s = client.prepare(sql).map_err(|e| e.to_string())?;
                    cache.insert(sql.to_owned(), s.clone());
                    s
                };
                let params: Vec<&(dyn postgres::types::ToSql + Sync)> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Int(i) => i as &(dyn postgres::types::ToSql + Sync),
                        Arg::Text(t) => t as &(dyn postgres::types::ToSql + Sync),
                    })
                    .collect();
                client
                    .execute(&stmt, params.as_slice())
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Runs one statement; the number of rows it changed (panics on an error).
    pub fn execute(&self, sql: &str, args: &[Arg<'_>]) -> u64 {
        self.try_execute(sql, args)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The rows of `sql` (no parameters) whose two columns are texts.
    pub fn text_pairs(&self, sql: &str) -> Vec<(String, String)> {
        match &self.0 {
            SqlConn::Sqlite(c) => {
                let mut stmt = c.prepare(sql).unwrap();
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            #[cfg(feature = "postgres")]
            SqlConn::Pg(c) => c
                .borrow_mut()
                .0
                .query(sql, &[])
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect(),
        }
    }
}

// ---------------------------------------------------------------------------
// A file-writing pathway whose effects are counted.

/// A mutating `write_file` definition with one actor per role (as [`definition`]).
pub fn file_definition(key: &str, path: &str, content: &str) -> Definition {
    let mut d = definition(key, ActionClass::Mutating);
    d.request = Request::new(
        rpr::executor::file::WRITE_FILE,
        json!({"path": path, "content": content}),
    );
    d
}

/// A directory with a `root/` for file writes and a database holding one admitted
/// `write_file` pathway (idempotency key `key`); returns the directory and the pathway id.
pub fn admitted_file_pathway(tag: &str, key: &str, path: &str, content: &str) -> (TempDir, String) {
    let dir = TempDir::new(tag);
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let rt = Runtime::open(dir.db()).unwrap();
    let p = allowed(&rt, file_definition(key, path, content));
    (dir, p.id().to_owned())
}

/// A new pathway for `definition`, proposed by `proposer` and admitted by `decision_owner`
/// under [`rpr::ALLOW_ALL`].
pub fn allowed(rt: &Runtime, definition: Definition) -> rpr::Pathway<rpr::stage::Approved> {
    rt.propose(&actor("proposer"), definition)
        .unwrap()
        .into_new()
        .expect("a new idempotency key")
        .admit(rt, &actor("decision_owner"), rpr::ALLOW_ALL)
        .unwrap()
        .into_approved()
        .expect("ALLOW_ALL approves")
}

/// How many effects `log` records (one line per real write).
pub fn effects(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |s| s.lines().count())
}

/// What a [`CountingFile`] reports after (or instead of) the real write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// Whatever the file executor reports.
    Honest,
    /// Writes the file, then reports `PossiblyWritten` (a lost reply).
    WriteThenPossiblyWritten,
    /// Writes nothing and reports `PossiblyWritten` (the request was lost on the way).
    DropThenPossiblyWritten,
}

/// The local [`rpr::executor::file::FileExecutor`], wrapped so that every real write appends
/// one line to an effects log (fsynced), with optional hooks just before and just
/// after the write.
pub struct CountingFile {
    pub inner: rpr::executor::file::FileExecutor,
    pub log: PathBuf,
    pub report: Report,
    pub before_write: Option<fn()>,
    pub after_write: Option<fn()>,
}

impl CountingFile {
    pub fn new(root: &std::path::Path, log: &std::path::Path) -> Self {
        Self {
            inner: rpr::executor::file::FileExecutor::new(root).unwrap(),
            log: log.to_owned(),
            report: Report::Honest,
            before_write: None,
            after_write: None,
        }
    }
    pub fn readback(&self) -> rpr::executor::file::FileReadback {
        rpr::executor::file::FileReadback::new(&self.inner)
    }
}

impl Executor for CountingFile {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.inner.bind(request)
    }
    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.inner.prepare(request, binding)
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        use std::io::Write;
        if let Some(f) = self.before_write {
            f();
        }
        if self.report == Report::DropThenPossiblyWritten {
            return Delivery::PossiblyWritten {
                reason: "request lost on the way (test)".into(),
            };
        }
        let delivery = self.inner.execute(request);
        if matches!(
            delivery,
            Delivery::Succeeded { .. } | Delivery::PossiblyWritten { .. }
        ) {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .unwrap();
            // One write(2) per line: with O_APPEND, threads and processes appending at
            // once cannot interleave inside a line (`writeln!` may split it).
            let line = format!(
                "write {} by pid {}\n",
                request.arguments,
                std::process::id()
            );
            f.write_all(line.as_bytes()).unwrap();
            f.sync_all().unwrap();
        }
        if let Some(f) = self.after_write {
            f();
        }
        match self.report {
            Report::Honest => delivery,
            _ => Delivery::PossiblyWritten {
                reason: "reply lost (test)".into(),
            },
        }
    }
}

// ---------------------------------------------------------------------------
// Child processes: the test binary re-executes itself to run one `#[test]` entry.

/// A child process running `entry` of this test binary, killed and reaped on drop.
pub struct ChildProc {
    pub child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    seen: Vec<String>,
}

/// The marker a child prints (on its own line) when it reaches a blocking point.
pub const READY: &str = "RPR-READY";

impl ChildProc {
    /// Starts this test binary with `--exact entry` and the given environment.
    pub fn spawn(entry: &str, envs: &[(&str, String)]) -> Self {
        Self::spawn_via(&[], entry, envs)
    }

    /// Like [`ChildProc::spawn`], through a launcher that ends by exec'ing its arguments
    /// (`ip netns exec NS unshare --uts --`), so the child's pid is still the test
    /// binary's.
    pub fn spawn_via(launcher: &[&str], entry: &str, envs: &[(&str, String)]) -> Self {
        use std::io::{BufRead, Read};
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match launcher {
            [] => Command::new(&exe),
            [program, args @ ..] => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(&exe);
                cmd
            }
        };
        cmd.args(["--exact", entry, "--nocapture", "--test-threads=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = String::new();
            let _ = err.read_to_string(&mut buf);
            sink.lock().unwrap().push_str(&buf);
        });
        Self {
            child,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (up to 60 s) for a stdout line containing `prefix`; returns the rest of it.
    pub fn expect(&mut self, prefix: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // The harness prints `test child_entry ... ` without a newline first.
                    if let Some(at) = line.find(prefix) {
                        return line[at + prefix.len()..].trim().to_owned();
                    }
                    self.seen.push(line);
                }
                Err(e) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    panic!(
                        "child {} never printed {prefix:?} ({e:?});\nstdout:\n{}\nstderr:\n{}",
                        self.child.id(),
                        self.seen.join("\n"),
                        self.stderr.lock().unwrap()
                    );
                }
            }
        }
    }

    /// A stdout line containing `prefix` if one has arrived (without waiting); the rest of it.
    pub fn poll(&mut self, prefix: &str) -> Option<String> {
        while let Ok(line) = self.lines.try_recv() {
            if let Some(at) = line.find(prefix) {
                return Some(line[at + prefix.len()..].trim().to_owned());
            }
            self.seen.push(line);
        }
        None
    }

    /// What the child printed so far (for failure messages).
    pub fn diagnostics(&mut self) -> String {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        format!(
            "child {}:\nstdout:\n{}\nstderr:\n{}",
            self.child.id(),
            self.seen.join("\n"),
            self.stderr.lock().unwrap()
        )
    }

    /// SIGKILLs the child (std's `Child::kill` sends SIGKILL on unix) and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert!(!status.success(), "the child exited on its own: {status:?}");
    }

    /// Waits for the child to exit on its own and asserts it succeeded.
    pub fn finish(mut self) {
        let status = self.child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(
            status.success(),
            "child failed: {status:?}\nstderr:\n{}",
            self.stderr.lock().unwrap()
        );
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// In a child: prints [`READY`] with the given tag, flushes, and blocks until killed.
pub fn block_until_killed(tag: &str) -> ! {
    use std::io::Write;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "\n{READY} {tag}").unwrap();
        out.flush().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_secs(30));
    eprintln!(
        "child {} was not killed within 30 s at {tag}",
        std::process::id()
    );
    std::process::exit(86);
}

/// In a child: prints one `prefix rest` line and flushes.
pub fn say(prefix: &str, rest: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "\n{prefix} {rest}").unwrap();
    out.flush().unwrap();
}

/// Fills `rt` with one pathway in each reachable state (deterministic with [`runtime`]):
/// keys `s01`… in this order: `proposed`, `awaiting_approval`, `human_gate`, `approved`,
/// `running` (returned), `write_status_unknown`, `repair_required`, `ready_to_resume`, `stopped`,
/// `partially_completed`, `held`, `completed`, `denied`, `aborted`. The first carries metadata
/// with a secret-named key, to show redaction.
pub fn scripted_states(rt: &Runtime) {
    use rpr::token::Reconciled;
    use rpr::{Admission, Decision, Outcome, Pathway, Proposal};

    let propose = |key: &str, class: ActionClass, meta: Value| -> Pathway<rpr::stage::Proposed> {
        match rt
            .propose(
                &actor("proposer"),
                definition(key, class).with_metadata(meta),
            )
            .unwrap()
        {
            Proposal::New(p) => p,
            other => panic!("expected a new pathway, got {other:?}"),
        }
    };
    let admit = |key: &str, class: ActionClass, d: Decision| -> Admission {
        propose(key, class, Value::Null)
            .admit(rt, &actor("decision_owner"), &move |_| d.clone())
            .unwrap()
    };
    let approved = |key: &str, class: ActionClass| match admit(key, class, Decision::Allow) {
        Admission::Approved(p) => p,
        other => panic!("{other:?}"),
    };
    let dispatch = |p: Pathway<rpr::stage::Approved>, d: Delivery| -> Outcome {
        let mut ex = Scripted::new(vec![d]);
        p.bind(&mut ex)
            .unwrap()
            .dispatch(rt, &actor("execution_actor"), &mut ex)
    };
    let m = ActionClass::Mutating;

    let _ = propose("s01", m, json!({"ticket": "T-1", "api_key": "sk-live-123"}));
    let Admission::AwaitingApproval(_) = admit("s02", m, Decision::Hold) else {
        panic!()
    };
    let Admission::HumanGate(_) = admit("s03", m, Decision::HumanGate) else {
        panic!()
    };
    let _ = approved("s04", m);
    let Outcome::Returned(_) = dispatch(
        approved("s05", m),
        Delivery::Succeeded {
            reply: json!({"ok": true}),
        },
    ) else {
        panic!()
    };
    let Outcome::Unknown(_) = dispatch(
        approved("s06", m),
        Delivery::PossiblyWritten {
            reason: "timeout".into(),
        },
    ) else {
        panic!()
    };
    let Outcome::Failed(_) = dispatch(
        approved("s07", m),
        Delivery::Rejected {
            error: json!({"code": -32000, "message": "no"}),
            class: RejectionClass::NotApplied,
        },
    ) else {
        panic!()
    };
    let Outcome::Unknown(p) = dispatch(
        approved("s08", m),
        Delivery::PossiblyWritten {
            reason: "eof".into(),
        },
    ) else {
        panic!()
    };
    let Reconciled::NotApplied(t) = rt.reconcile(&p, &mut Sees("not_applied")) else {
        panic!()
    };
    let _ = p
        .require_repair(rt, t)
        .unwrap()
        .repair(rt, &actor("repair_owner"), &json!({"fixed": true}), None)
        .unwrap();
    let Outcome::Returned(p) =
        dispatch(approved("s09", m), Delivery::Succeeded { reply: json!({}) })
    else {
        panic!()
    };
    let _ = p.stop(rt, &actor("stop_authority"), "halt").unwrap();
    let Outcome::Partial(_) = dispatch(
        approved("s10", m),
        Delivery::Partial {
            reply: json!({"done": 1}),
        },
    ) else {
        panic!()
    };
    let _ = approved("s11", m)
        .hold(rt, &actor("stop_authority"), "wait")
        .unwrap();
    dispatch(
        approved("s12", ActionClass::ReadOnly),
        Delivery::Succeeded {
            reply: json!({"v": 1}),
        },
    )
    .into_completed()
    .unwrap();
    let Admission::Denied(_) = admit("s13", m, Decision::Deny("no".into())) else {
        panic!()
    };
    let _ = approved("s14", m)
        .abort(rt, &actor("residual_owner"), &json!({"left": "nothing"}))
        .unwrap();
}

/// A database made through the public API, in `dir`'s SQLite file whatever the backend under
/// test: [`scripted_states`] (a pathway in each reachable state), two Human Gate pathways
/// with a granted approval (`gated-used` approved with it, `gated-waiting` not yet) and a
/// tool pin (`a`/`write`). Returns the runtime, still open. Deterministic ([`runtime`]).
pub fn filled(dir: &TempDir) -> Runtime {
    use rpr::{Admission, Proposal};
    let rt = runtime(&dir.sqlite_db());
    scripted_states(&rt);
    // Approvals: one granted and used, one granted and waiting.
    for (key, used) in [("gated-used", true), ("gated-waiting", false)] {
        let Proposal::New(p) = rt
            .propose(&actor("proposer"), definition(key, ActionClass::Mutating))
            .unwrap()
        else {
            panic!()
        };
        let Admission::HumanGate(p) = p
            .admit(&rt, &actor("decision_owner"), &|_| rpr::Decision::HumanGate)
            .unwrap()
        else {
            panic!()
        };
        let approval = rt.grant_approval(&p, &actor("approval_authority")).unwrap();
        if used {
            p.approve(&rt, approval.quorum(&rt).expect("quorum"))
                .unwrap();
        }
    }
    let binding = Binding::new("server-a", json!({"server": "a", "tool": "write"})).unwrap();
    rt.check_pin(
        "a",
        "write",
        &binding,
        &json!({"name": "write"}),
        &actor("gate"),
    )
    .unwrap();
    rt
}
