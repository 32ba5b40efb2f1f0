//! A read-only opening and a runtime on one database file in one process. SQLite shares
//! one mapping of the WAL index (`-shm`) among a process's connections to a file; a
//! `ReadStore::open_read_only` opened first maps it read-only (`readonly_shm`, which keeps
//! every file byte-identical), so a runtime opened after it cannot write. That is said by
//! a specific error that names what to do, and the order that works, works.

use crate::common;

use common::*;
use rpr::Runtime;
use rpr::store::{ReadStore, StoreError};

fn with_one_pathway(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    let rt = Runtime::builder(dir.db()).open().unwrap();
    let _ = allowed(&rt, definition("k", rpr::ActionClass::Mutating));
    dir
}

#[test]
fn a_runtime_opened_after_a_read_only_store_of_its_file_says_why_it_cannot_write() {
    let dir = with_one_pathway("open-order-refused");
    let reader = ReadStore::open_read_only(&dir.db()).unwrap();
    let err = Runtime::builder(dir.db()).open().unwrap_err();
    assert!(
        matches!(&err, StoreError::ReadOnlyIndex(path) if *path == dir.db().display().to_string()),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains("ReadStore::open_read_only") && shown.contains("open the runtime first"),
        "{shown}"
    );
    // Nothing was written: the reader still reads the one pathway, and once it is dropped
    // a runtime opens and steps.
    assert_eq!(reader.list_pathways(None, 10, None).unwrap().len(), 1);
    drop(reader);
    let rt = Runtime::builder(dir.db()).open().unwrap();
    let _ = allowed(&rt, definition("k2", rpr::ActionClass::Mutating));
}

#[test]
fn a_read_only_store_opened_while_a_runtime_holds_the_file_leaves_it_writable() {
    let dir = with_one_pathway("open-order-works");
    let rt = Runtime::builder(dir.db()).open().unwrap();
    let reader = ReadStore::open_read_only(&dir.db()).unwrap();
    let _ = allowed(&rt, definition("k2", rpr::ActionClass::Mutating));
    // A second runtime, opened while both are open, writes too.
    let second = Runtime::builder(dir.db()).open().unwrap();
    let _ = allowed(&second, definition("k3", rpr::ActionClass::Mutating));
    assert_eq!(reader.list_pathways(None, 10, None).unwrap().len(), 3);
}
