//! Contention with another process (issue 9, item 5): a step that waits out another
//! connection's write lock fails with a specific, retryable error that names the holder,
//! and writes nothing.

use crate::common;

use std::time::Duration;

use common::*;
use rpr::store::StoreError;
use rpr::{Decided, Decision, Definition, PathwayError, Runtime};

fn allow(_: &Definition) -> Decision {
    Decision::Allow
}

#[test]
fn a_step_that_waits_out_another_process_write_lock_is_busy_names_the_holder_and_writes_nothing() {
    let dir = TempDir::new("busy");
    let wait = Duration::from_millis(300);
    let rt = Runtime::builder(dir.db())
        .busy_timeout(wait)
        .open()
        .unwrap();
    let before = db_dump(&dir.db());
    let mut holder = ChildProc::spawn(
        "busy::lock_holder_entry",
        &[("RPR_BUSY_DB", dir.db().display().to_string())],
    );
    holder.expect("RPR-LOCKED");

    let def = file_definition("k1", "a.txt", "hello");
    let err = rt
        .propose_and_admit(
            &actor("proposer"),
            &actor("decision_owner"),
            def.clone(),
            &allow,
        )
        .expect_err("the write lock is held by the other process");
    let PathwayError::Store(store) = &err else {
        panic!("not a store error: {err:?}")
    };
    assert!(store.is_retryable(), "{store}");
    let StoreError::Busy {
        timeout,
        holder: named,
    } = store
    else {
        panic!("not Busy: {store:?}")
    };
    assert_eq!(*timeout, Some(wait));
    if cfg!(target_os = "linux") {
        // Seen once in CI (2026-12-07, ci7 on 5ea79b6, not reproduced in 30 runs here): no
        // holder named. What `/proc/locks` then held for the `-shm` file is in the message.
        let named = named.as_ref().unwrap_or_else(|| {
            panic!(
                "Linux names the holder (pid {}); /proc/locks on the -shm file: {}",
                holder.pid(),
                shm_locks(&dir.db())
            )
        });
        assert_eq!(u32::try_from(named.pid).unwrap(), holder.pid());
        assert!(
            named.command.contains("lock_holder_entry"),
            "{}",
            named.command
        );
        let text = err.to_string();
        assert!(text.contains(&format!("pid {}", holder.pid())), "{text}");
        assert!(text.contains("this step wrote nothing"), "{text}");
    }
    assert_eq!(
        db_dump(&dir.db()),
        before,
        "a busy step leaves the database as it was"
    );

    // The holder goes; the same step, taken again, succeeds once.
    holder.kill();
    let Decided::New(_) = rt
        .propose_and_admit(&actor("proposer"), &actor("decision_owner"), def, &allow)
        .unwrap()
    else {
        panic!("the retried step found an earlier pathway: the busy one wrote")
    };
    assert_eq!(row_count(&dir.db(), "pathways"), 1);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A dispatch whose attempt record waits out another process's write lock sends nothing:
/// the bound pathway comes back in `NotSent` with the busy error, and dispatching it again
/// once the lock is free writes exactly once.
#[test]
fn a_dispatch_refused_as_busy_sends_nothing_and_its_retry_sends_once() {
    let dir = TempDir::new("busy-dispatch");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let log = dir.path().join("effects.log");
    let rt = Runtime::builder(dir.db())
        .busy_timeout(Duration::from_millis(300))
        .open()
        .unwrap();
    let mut files = CountingFile::new(&root, &log);
    let def = file_definition("k2", "b.txt", "hello");
    let approved = rt
        .propose_and_admit(&actor("proposer"), &actor("decision_owner"), def, &allow)
        .unwrap()
        .into_new()
        .expect("not admitted")
        .into_approved()
        .expect("not admitted");
    let bound = approved.bind(&mut files).unwrap();

    let mut holder = ChildProc::spawn(
        "busy::lock_holder_entry",
        &[("RPR_BUSY_DB", dir.db().display().to_string())],
    );
    holder.expect("RPR-LOCKED");
    let rpr::Outcome::NotSent(refused) = bound.dispatch(&rt, &actor("execution_actor"), &mut files)
    else {
        panic!("the attempt record could not be written, so nothing may be sent")
    };
    let PathwayError::Store(store) = refused.error() else {
        panic!("{:?}", refused.error())
    };
    assert!(store.is_retryable(), "{store}");
    assert_eq!(effects(&log), 0, "nothing was sent");
    holder.kill();

    let bound = refused.into_pathway();
    match bound.dispatch(&rt, &actor("execution_actor"), &mut files) {
        rpr::Outcome::Returned(_) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(effects(&log), 1, "sent exactly once");
    assert_eq!(row_count(&dir.db(), "attempts"), 1);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// The lines of `/proc/locks` on the `-shm` file of `db` (by inode), for a failure's message.
fn shm_locks(db: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    let Ok(meta) = std::fs::metadata(&shm) else {
        return format!("{} cannot be read", shm.to_string_lossy());
    };
    let suffix = format!(":{} ", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let lines: Vec<&str> = locks.lines().filter(|l| l.contains(&suffix)).collect();
    format!("inode {}: {lines:?}", meta.ino())
}

/// The other process of the tests above: takes the write lock and keeps it until killed.
#[test]
fn lock_holder_entry() {
    let Ok(db) = std::env::var("RPR_BUSY_DB") else {
        return;
    };
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    say("RPR-LOCKED", "");
    block_until_killed("lock held");
}
