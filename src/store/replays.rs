//! The replay a step leaves for the pathway's next step.
//!
//! Before a step writes, [`super::rules::check_pathway`] compares the pathway's rows with
//! what its ledger events establish (the replay). Without this cache every step re-read,
//! re-hashed and re-parsed every event of its pathway, so a call's later steps paid for its
//! earlier ones. A step now leaves the replay it ended with here, under the version and the
//! last event (`seq`, `hash`) it wrote; the next step of that pathway uses it only when the
//! stored row still has that version and the pathway's last stored event is still that one,
//! and otherwise replays in full. The rows (pathway, attempts, approvals) are read and
//! compared with the replay on every step, kept or not.
//!
//! What a kept replay does not see: an edit of the pathway's events between two steps of
//! this process that leaves the last event's `seq` and `hash` as they were (an earlier event
//! changed or deleted, the last one's text changed); the kept replay is what those events
//! said when this process read or wrote them. `verify` reports such an edit as a chain break, and
//! every read-side check (`load`, `rpr-mcp`) replays in full. Any other writer's step, in
//! this process or another, changes the version and the last event, so the next step here
//! replays in full.
//!
//! An entry is taken out when a step starts (a step that fails leaves none behind) and put
//! back when it has written. A step whose transaction later rolls back leaves an entry under
//! a version and last hash the database does not hold; it can match only a row and a last
//! event with that very hash, which chains the same bytes after the same head.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::check::Replay;

/// At most this many pathways' replays are kept; past it the cache starts again empty (a
/// pathway with none is replayed in full, so this bounds memory, never correctness).
const KEPT: usize = 4096;

/// A pathway's replay as its last step in this process left it.
#[derive(Debug)]
pub(crate) struct Kept {
    /// The pathway row's version after that step.
    pub(crate) version: i64,
    /// The pathway's last ledger event after that step: `seq`, `hash`.
    pub(crate) last: (i64, String),
    pub(crate) replay: Replay,
}

/// The replays steps left for their pathways' next steps, shared by a backend's writers.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    kept: Mutex<HashMap<String, Kept>>,
    /// Steps whose check used a kept replay.
    used: AtomicU64,
}

impl Replays {
    /// Takes the pathway's kept replay out, if there is one.
    pub(crate) fn take(&self, pathway: &str) -> Option<Kept> {
        self.kept.lock().remove(pathway)
    }

    /// Leaves `kept` for the pathway's next step.
    pub(crate) fn keep(&self, pathway: &str, kept: Kept) {
        let mut map = self.kept.lock();
        if map.len() >= KEPT && !map.contains_key(pathway) {
            map.clear();
        }
        map.insert(pathway.to_owned(), kept);
    }

    /// Counts a step whose check used a kept replay.
    pub(crate) fn used(&self) {
        self.used.fetch_add(1, Ordering::Relaxed);
    }

    /// Steps so far whose check used a kept replay.
    pub(crate) fn used_count(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}
