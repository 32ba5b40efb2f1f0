//! `rpr-mcp` is read-only for real: every write is refused by the guard, and a
//! session leaves the database files byte-identical.
//!
//! What SQLite does with the `-shm` file (the WAL index, shared memory between
//! connections) decides what "byte-identical" can mean; `docs/inspection.md`,
//! "Byte invariance of the files", has the table. `ReadStore::open_read_only`
//! opens with `SQLITE_OPEN_READ_ONLY` and, when a `-shm` exists, `readonly_shm=1`:
//!
//! * the db file and the content of the `-wal` are never written, in every case;
//! * on a database that a live writer left in WAL mode (idle after a read or after
//!   a commit) or that a writer left without a checkpoint when it exited, the db,
//!   `-wal` and `-shm` are all unchanged (the `shm_*` tests);
//! * a database rpr closed cleanly keeps an empty `-wal` and its `-shm` (rpr's
//!   writers set `SQLITE_FCNTL_PERSIST_WAL`), and a session leaves all three unchanged;
//! * a database last closed by a program that deletes them (no `-wal`, no `-shm`)
//!   gains an empty `-wal` and a `-shm`: SQLite needs them to read a WAL-mode file,
//!   `readonly_shm` cannot open without an existing `-shm`, and a read-only
//!   connection cannot remove them.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;
use rpr::inspect;
use rpr::store::ReadStore;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rpr-mcp")
}

/// sha256 and length of the db, `-wal` and `-shm` files (`absent` when missing).
///
/// Never call this in the writer's process: closing any descriptor of a file
/// drops every POSIX lock the process holds on it, SQLite's included.
fn hashes(db: &Path) -> [String; 3] {
    ["", "-wal", "-shm"].map(|suffix| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::read(PathBuf::from(p)) {
            Ok(bytes) => format!("{:x} ({} bytes)", Sha256::digest(&bytes), bytes.len()),
            Err(_) => "absent".to_owned(),
        }
    })
}

fn file_len(db: &Path, suffix: &str) -> u64 {
    let mut p = db.as_os_str().to_owned();
    p.push(suffix);
    std::fs::metadata(PathBuf::from(p)).map_or(0, |m| m.len())
}

fn req(id: impl Into<Value>, method: &str, params: Value) -> String {
    format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
    )
}

fn call(id: impl Into<Value>, tool: &str, args: Value) -> String {
    req(id, "tools/call", json!({"name": tool, "arguments": args}))
}

/// Every tool many times, with malformed and abusive input in between.
fn abusive_session_input() -> Vec<u8> {
    let mut s = String::new();
    s += &req(0, "ping", json!({}));
    s += &call(1, "rpr.get_status", json!({}));
    s += &req(
        2,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    s += "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    for i in 0..40 {
        s += &call(format!("a{i}"), "rpr.get_status", json!({}));
        s += &call(
            format!("b{i}"),
            "rpr.list_pathways",
            json!({"limit": (i % 5) + 1}),
        );
        s += &call(
            format!("c{i}"),
            "rpr.list_pathways",
            json!({"state": "held"}),
        );
        s += &call(format!("d{i}"), "rpr.list_unresolved", json!({"limit": 2}));
        s += &call(
            format!("e{i}"),
            "rpr.get_pathway",
            json!({"pathway_id": format!("pw_{:06}", i % 22)}),
        );
        s += &call(
            format!("f{i}"),
            "rpr.get_evidence",
            json!({"pathway_id": format!("pw_{:06}", i % 22), "limit": 2}),
        );
        s += &call(
            format!("g{i}"),
            "rpr.get_pathway",
            json!({"pathway_id": "'; DROP TABLE pathways; --"}),
        );
        s += &call(
            format!("h{i}"),
            "rpr.list_pathways",
            json!({"cursor": "rpr1.41"}),
        );
        s += "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"rpr.exec\",\"arguments\":{\"sql\":\"DELETE FROM ledger\"}}}\n";
        s += "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\nnot json\n{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n";
        s += &req(format!("z{i}"), "server/discover", json!({}));
    }
    let mut bytes = s.into_bytes();
    bytes.extend_from_slice(b"\xff\xfe\xfd\n");
    bytes.extend(std::iter::repeat_n(b'[', 5 << 20));
    bytes.push(b'\n');
    bytes.extend_from_slice(req("last", "ping", json!({})).as_bytes());
    bytes
}

/// Runs a session to its end; returns the parsed stdout lines.
fn session(db: &Path, input: &[u8]) -> Vec<Value> {
    let mut child = Command::new(bin())
        .arg("--database")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut raw = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut raw)
        .unwrap();
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
    raw.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn assert_session_answered(lines: &[Value]) {
    assert!(lines.len() > 400, "{}", lines.len());
    assert_eq!(lines.last().unwrap()["id"], "last");
    let ok = lines
        .iter()
        .filter(|l| l["result"]["isError"] == false)
        .count();
    assert!(ok >= 200, "tool calls succeeded: {ok}");
}

// ---------------------------------------------------------------------------
// The guard
// ---------------------------------------------------------------------------

#[test]
fn every_write_is_refused_and_reads_still_work() {
    let dir = TempDir::new("rpr-mcp-guard");
    let db = dir.db();
    let rt = runtime(&db);
    scripted_states(&rt);
    drop(rt);
    let before = hashes(&db);
    let store = ReadStore::open_read_only(&db).unwrap();
    let writes = [
        "INSERT INTO meta (key, value) VALUES ('x', 'y')",
        "INSERT INTO ledger SELECT * FROM ledger",
        "UPDATE pathways SET state = 'completed'",
        "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
        "DELETE FROM ledger",
        "REPLACE INTO meta (key, value) VALUES ('schema_version', '1')",
        "CREATE TABLE t (x)",
        "CREATE TEMP TABLE t (x)",
        "CREATE INDEX i ON ledger (hash)",
        "CREATE VIEW v AS SELECT 1",
        "CREATE TRIGGER tr AFTER INSERT ON meta BEGIN SELECT 1; END",
        "DROP TABLE ledger",
        "DROP INDEX ledger_by_pathway",
        "ALTER TABLE meta ADD COLUMN c",
        "ATTACH DATABASE 'other.db' AS other",
        "DETACH DATABASE main",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA query_only = 0",
        "PRAGMA user_version = 7",
        "PRAGMA writable_schema = 1",
        "PRAGMA wal_checkpoint(TRUNCATE)",
        "REINDEX",
        "ANALYZE",
        "SELECT load_extension('libevil')",
        "WITH x AS (SELECT 1) DELETE FROM meta",
    ];
    let allowed: Vec<&str> = writes
        .iter()
        .copied()
        .filter(|sql| !store.would_refuse(sql))
        .collect();
    assert!(
        allowed.is_empty(),
        "the read-only guard lets these through: {allowed:?}"
    );

    // The statements the server runs (through the read API) still work.
    let reads = [
        "SELECT count(*) FROM pathways",
        "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
        "SELECT * FROM attempts WHERE pathway_id = 'x' ORDER BY seq",
        "SELECT value FROM meta WHERE key = 'ledger_head'",
    ];
    for sql in reads {
        assert!(!store.would_refuse(sql), "{sql}");
    }
    let status = inspect::status(&store).unwrap();
    assert_eq!(status.counts.values().sum::<i64>(), 14);
    let page = inspect::list_pathways(&store, None, inspect::MAX_LIMIT, None).unwrap();
    for p in &page.pathways {
        inspect::pathway(&store, &p.pathway_id).unwrap();
        assert!(
            inspect::evidence(&store, &p.pathway_id, 500, None)
                .unwrap()
                .chain_verified
        );
    }
    assert_eq!(
        inspect::list_unresolved(&store, 500, None)
            .unwrap()
            .pathways
            .len(),
        11
    );
    assert!(rpr::store::verify(&store, None).unwrap().is_ok());
    drop(store);
    let after = hashes(&db);
    assert_eq!(after[0], before[0], "the db file is byte-identical");
    assert!(!dir.path().join("other.db").exists());
}

/// The probe cannot try `VACUUM` (it does not run inside a transaction), so it refuses it
/// rather than run it for real: both forms are refused and the file stays byte-identical.
/// (The server runs neither.)
#[test]
fn vacuum_is_refused() {
    let dir = TempDir::new("rpr-mcp-vacuum");
    let db = dir.db();
    drop(runtime(&db));
    let before = hashes(&db);
    let store = ReadStore::open_read_only(&db).unwrap();
    assert!(store.would_refuse("VACUUM"));
    assert!(store.would_refuse("VACUUM INTO 'copy.db'"));
    drop(store);
    assert_eq!(hashes(&db)[0], before[0], "the db file is byte-identical");
    assert!(!dir.path().join("copy.db").exists());
}

// ---------------------------------------------------------------------------
// Byte invariance
// ---------------------------------------------------------------------------

/// Child-process writer: fills the database and exits without closing it, so
/// no checkpoint runs and the -wal and -shm files stay behind. With
/// `RPR_MCP_WRITER_READ` its last statement is a read (it verifies its ledger);
/// with `RPR_MCP_WRITER_STAY` it prints `ready` and stays alive, idle, until its
/// stdin closes (two minutes at most). Does nothing unless started with
/// `RPR_MCP_WRITER_DB` set.
///
/// The writer must be another process than the one that hashes the files:
/// reading the -shm (or db) file in the writer's process and closing it drops
/// every POSIX lock that process holds on it, the writer's SQLite locks included
/// (a reader then believes it is alone and rebuilds the -shm).
/// Returns at once unless a test started it as a child (`RPR_MCP_WRITER_DB` set).
#[test]
fn writer_child() {
    let Some(db) = std::env::var_os("RPR_MCP_WRITER_DB") else {
        return;
    };
    let rt = runtime(Path::new(&db));
    scripted_states(&rt);
    if std::env::var_os("RPR_MCP_WRITER_READ").is_some() {
        assert!(rt.verify(None).unwrap().is_ok());
    }
    if std::env::var_os("RPR_MCP_WRITER_STAY").is_some() {
        // Straight to fd 1: the test harness captures `println!` even with --nocapture.
        std::io::stdout().write_all(b"ready\n").unwrap();
        std::io::stdout().flush().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(std::time::Duration::from_mins(2));
    }
    std::process::exit(0);
}

/// Starts [`writer_child`] on a fresh database in `dir`.
fn start_writer(dir: &TempDir, read_last: bool, stay: bool) -> (PathBuf, std::process::Child) {
    let db = dir.db();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "rpr_mcp_readonly::writer_child",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RPR_MCP_WRITER_DB", &db)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    if read_last {
        cmd.env("RPR_MCP_WRITER_READ", "1");
    }
    if stay {
        cmd.env("RPR_MCP_WRITER_STAY", "1");
    }
    let mut child = cmd.spawn().unwrap();
    if stay {
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // libtest prints "test writer_child ... " first, on the same line.
        while !line.trim_end().ends_with("ready") {
            line.clear();
            assert!(
                std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
                "the writer died"
            );
        }
    } else {
        assert!(child.wait().unwrap().success());
    }
    assert!(file_len(&db, "-wal") > 0, "the writer left a non-empty WAL");
    assert!(file_len(&db, "-shm") > 0, "the writer left its -shm");
    (db, child)
}

fn stop_writer(mut child: std::process::Child) {
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

/// The acceptance case: a host wrote the database and is still running, idle,
/// its connection open, every write in the (non-empty) WAL, its -shm live; its
/// last statement was a read (it verified its ledger). Sessions that call every
/// tool many times, with malformed and abusive input, leave the db, -wal and
/// -shm byte-identical.
#[test]
fn byte_invariant_on_a_database_a_live_writer_left_in_wal_mode() {
    let dir = TempDir::new("rpr-mcp-live");
    let (db, writer) = start_writer(&dir, true, true);
    let before = hashes(&db);
    for _ in 0..3 {
        let lines = session(&db, &abusive_session_input());
        assert_session_answered(&lines);
        assert_eq!(
            hashes(&db),
            before,
            "db, -wal and -shm must be byte-identical after a session"
        );
    }
    stop_writer(writer);
}

/// The writer exited without a checkpoint: the db and -wal files are never
/// written by a session. (The -shm is rebuilt by the first reader; see
/// `shm_byte_invariant_after_the_writer_exited`.)
#[test]
fn db_and_wal_byte_invariant_after_the_writer_exited() {
    let dir = TempDir::new("rpr-mcp-gone");
    let (db, _) = start_writer(&dir, true, false);
    let before = hashes(&db);
    for _ in 0..3 {
        let lines = session(&db, &abusive_session_input());
        assert_session_answered(&lines);
        let after = hashes(&db);
        assert_eq!(
            after[..2],
            before[..2],
            "db and -wal must be byte-identical after a session"
        );
    }
    // Everything the writer committed is visible through the WAL.
    let store = ReadStore::open_read_only(&db).unwrap();
    assert_eq!(
        inspect::status(&store)
            .unwrap()
            .counts
            .values()
            .sum::<i64>(),
        14
    );
}

/// Strict -shm invariance after the writer exited. Without `readonly_shm=1` the
/// first reader would find no other connection, truncate the -shm and rebuild
/// the WAL index in it; with it (as `ReadStore::open_read_only` opens), the
/// reader builds the index in heap memory and never writes the file.
#[test]
fn shm_byte_invariant_after_the_writer_exited() {
    let dir = TempDir::new("rpr-mcp-gone-shm");
    let (db, _) = start_writer(&dir, false, false);
    let before = hashes(&db);
    session(&db, &abusive_session_input());
    assert_eq!(hashes(&db), before);
}

/// Strict -shm invariance while the live writer's last statement was a commit.
/// Without `readonly_shm=1` no read mark covers the whole WAL, so a reader would
/// claim a read-mark slot in the -shm (4 bytes at offset 104); with it, the
/// reader uses a mark the writer left.
#[test]
fn shm_byte_invariant_when_the_live_writer_last_committed() {
    let dir = TempDir::new("rpr-mcp-live-commit");
    let (db, writer) = start_writer(&dir, false, true);
    let before = hashes(&db);
    session(&db, &abusive_session_input());
    assert_eq!(hashes(&db), before);
    stop_writer(writer);
}

/// A database whose rpr writer closed cleanly: rpr keeps the -wal (checkpointed and
/// truncated to 0 bytes) and the -shm (`SQLITE_FCNTL_PERSIST_WAL`), so sessions leave
/// all three files byte-identical, and the next writer works as usual.
#[test]
fn cleanly_closed_database_stays_byte_identical() {
    let dir = TempDir::new("rpr-mcp-clean");
    let db = dir.db();
    let rt = runtime(&db);
    scripted_states(&rt);
    drop(rt);
    let before = hashes(&db);
    assert_eq!(file_len(&db, "-wal"), 0, "the kept -wal is empty");
    assert!(file_len(&db, "-shm") > 0, "the -shm is kept");
    for _ in 0..2 {
        let lines = session(&db, &abusive_session_input());
        assert_session_answered(&lines);
        assert_eq!(hashes(&db), before, "db, -wal and -shm are byte-identical");
    }
    let rt = runtime(&db);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A database last closed by a program that does not keep the WAL files (here a
/// plain SQLite connection; the `sqlite3` shell does the same): a session leaves
/// the db file byte-identical, but SQLite creates an empty -wal and a -shm beside
/// it to read a WAL-mode file, and a read-only connection cannot remove them.
/// They hold no data and the next writer uses them as usual.
#[test]
fn database_closed_by_another_program_gains_only_an_empty_wal_and_a_shm() {
    let dir = TempDir::new("rpr-mcp-foreign-close");
    let db = dir.db();
    let rt = runtime(&db);
    scripted_states(&rt);
    drop(rt);
    let other = rusqlite::Connection::open(&db).unwrap();
    let _: i64 = other
        .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
        .unwrap();
    drop(other);
    let before = hashes(&db);
    assert_eq!(before[1..], ["absent", "absent"]);
    let lines = session(&db, &abusive_session_input());
    assert_session_answered(&lines);
    let after = hashes(&db);
    assert_eq!(after[0], before[0], "the db file is byte-identical");
    assert_eq!(file_len(&db, "-wal"), 0, "the -wal holds nothing");
    // A second session changes nothing at all.
    session(&db, &abusive_session_input());
    assert_eq!(hashes(&db), after);
    // The next writer works as usual.
    let rt = runtime(&db);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A live writer keeps committing while a session reads: every call answers
/// (no busy errors), and what it sees only grows.
#[test]
fn reads_while_a_writer_is_committing() {
    let dir = TempDir::new("rpr-mcp-concurrent");
    let db = dir.db();
    let rt = runtime(&db);
    scripted_states(&rt);
    let db2 = db.clone();
    let reader = std::thread::spawn(move || {
        let mut input = req(0, "initialize", json!({"protocolVersion": "2025-11-25"}));
        for i in 0..300 {
            input += &call(i, "rpr.get_status", json!({}));
            input += &call(
                format!("u{i}"),
                "rpr.list_unresolved",
                json!({"limit": 500}),
            );
        }
        session(&db2, input.as_bytes())
    });
    for i in 0..200 {
        let _ = rt
            .propose(
                &actor("proposer"),
                definition(&format!("w{i}"), rpr::ActionClass::Mutating),
            )
            .unwrap();
    }
    let lines = reader.join().unwrap();
    assert_eq!(lines.len(), 601);
    let mut last = 0;
    for l in &lines[1..] {
        assert_eq!(l["result"]["isError"], false, "{l}");
        if let Some(n) = l["result"]["structuredContent"]["ledger_length"].as_i64() {
            assert!(n >= last, "the ledger seen by successive calls only grows");
            last = n;
        }
    }
    assert!(rt.verify(None).unwrap().is_ok());
}
