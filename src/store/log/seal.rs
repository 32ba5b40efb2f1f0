//! Signing the log inside a commit. A batch that will append events first checks, holding
//! the ledger head (SQLite: from its `BEGIN IMMEDIATE`; PostgreSQL: from the moment it locks
//! the head), that every stored event is covered by a trusted checkpoint ([`Sealer::check`]);
//! then, just before its `COMMIT`, it appends its own events to that tree, signs the
//! checkpoint and stores it in the same transaction ([`Sealer::seal`]). Events it finds
//! beyond the stored checkpoint when it takes the head were appended by someone without a
//! key, since every writer with one signs in the commit that appends: the batch refuses.
//!
//! The events a batch appends while it holds the head are its own: no other writer can
//! append before its commit. On PostgreSQL a step rolled back to its savepoint may give the
//! head back; the next step that takes it checks again (`Tx::covered` is put back with the
//! head).

use std::sync::Mutex;

use super::{LogError, open_checkpoint};
use crate::evidence::checkpoint::Checkpoint;
use crate::evidence::merkle::{self, Frontier};
use crate::evidence::note::VerifierKey;
use crate::store::StoreError;

/// The reads and the write of the seal, inside the batch's transaction.
pub(crate) trait LogRows {
    /// The stored checkpoint note (`meta.log_checkpoint`), the oldest event's seq (1 for an
    /// empty ledger) and the newest's (0 for an empty ledger), in one statement.
    fn checkpoint_and_bounds(&mut self) -> Result<(Option<String>, i64, i64), StoreError>;
    /// The stored text of every event with `after < seq <= upto`, in order of seq.
    fn each_event(
        &mut self,
        after: i64,
        upto: i64,
        f: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<(), StoreError>;
    /// Stores `text` as the checkpoint.
    fn put_checkpoint(&mut self, text: &str) -> Result<(), StoreError>;
}

/// What a batch found when it took the ledger head: the tree of every stored event, all
/// covered by the stored checkpoint (or none yet).
#[derive(Debug, Clone)]
pub(crate) struct Covered {
    frontier: Frontier,
    /// Whether a checkpoint is stored (a log with none is signed by the first seal).
    stored: bool,
}

/// A checkpoint signed into a batch, to be adopted once the batch has committed.
#[derive(Debug)]
pub(crate) struct Sealed {
    frontier: Frontier,
    text: String,
}

/// What this writer knows of its log.
#[derive(Debug, Default)]
struct Known {
    /// The tree of the newest checkpoint checked or signed here.
    frontier: Frontier,
    /// That checkpoint's note text: the same text stored again needs no new check.
    text: Option<String>,
    /// Whether the witness's checkpoint was found inside the log.
    witness_checked: bool,
}

/// One runtime's signing of its database's log.
pub(crate) struct Sealer {
    origin: String,
    database_id: String,
    signer: super::Signer,
    trusted: Vec<VerifierKey>,
    witnessed: Option<Checkpoint>,
    begin: bool,
    known: Mutex<Known>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("origin", &self.origin)
            .field("trusted", &self.trusted)
            .finish_non_exhaustive()
    }
}

/// Appends the stored events after `frontier`'s size, up to seq `upto`, refusing a gap in
/// the seqs; the root at size `at`, if the tree has that size on the way (or already).
fn extend(
    rows: &mut dyn LogRows,
    frontier: &mut Frontier,
    upto: u64,
    at: Option<u64>,
) -> Result<Option<merkle::Hash>, StoreError> {
    let mut root_at = (at == Some(frontier.size())).then(|| frontier.root());
    let mut expected = i64::try_from(frontier.size()).unwrap_or(i64::MAX) + 1;
    let mut gap = None;
    rows.each_event(
        expected - 1,
        i64::try_from(upto).unwrap_or(i64::MAX),
        &mut |seq, text| {
            if seq != expected && gap.is_none() {
                gap = Some(expected);
            }
            // A stored seq can be any integer, i64::MAX too (no row can follow that one).
            expected = seq.saturating_add(1);
            frontier.append(merkle::leaf_hash(text));
            if at == Some(frontier.size()) {
                root_at = Some(frontier.root());
            }
        },
    )?;
    match gap {
        Some(seq) => Err(LogError::Gap(u64::try_from(seq).unwrap_or(0)).into()),
        None => Ok(root_at),
    }
}

impl Sealer {
    pub(crate) fn new(signing: super::Signing, database_id: &str) -> Self {
        Self {
            origin: super::origin(database_id),
            database_id: database_id.to_owned(),
            signer: signing.signer,
            trusted: signing.trusted,
            witnessed: signing.witnessed,
            begin: signing.begin,
            known: Mutex::new(Known::default()),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holding the ledger head: every stored event is covered by the stored checkpoint, which
    /// a trusted key signed for this database and which extends what this writer knows (and
    /// the witness's checkpoint). Returns the tree the batch appends to.
    pub(crate) fn check(&self, rows: &mut dyn LogRows) -> Result<Covered, StoreError> {
        let (stored, first, last) = rows.checkpoint_and_bounds()?;
        if first < 1 {
            // No log has such an event, and the tree (from seq 1 on) would never cover it.
            return Err(LogError::BeforeFirst(first).into());
        }
        let last = u64::try_from(last).unwrap_or(0);
        let mut known = self.known();
        let Some(text) = stored else {
            if known.text.is_some() {
                return Err(LogError::Removed {
                    signed: known.frontier.size(),
                }
                .into());
            }
            if last > 0 && !self.begin {
                return Err(LogError::Unsigned { events: last }.into());
            }
            // Nothing signed yet: the first seal signs every event as it stands.
            let mut frontier = Frontier::new();
            extend(rows, &mut frontier, last, None)?;
            if let Some(w) = self.witnessed.as_ref().filter(|w| w.size > 0) {
                // The witness cosigned a signed log of this database; it has none now.
                return Err(LogError::Behind {
                    stored: 0,
                    seen: w.size,
                    by: "the witness cosigned",
                    by_short: "witness state",
                }
                .into());
            }
            return Ok(Covered {
                frontier,
                stored: false,
            });
        };
        if known.text.as_deref() != Some(text.as_str()) {
            let cp = open_checkpoint(&text, &self.database_id, &self.trusted)
                .map_err(LogError::BadCheckpoint)?;
            let have = known.frontier.size();
            if cp.size < have {
                return Err(LogError::Behind {
                    stored: cp.size,
                    seen: have,
                    by: "this runtime signed",
                    by_short: "runtime's log",
                }
                .into());
            }
            // Adopt it: the events between what is known and its size, hashed here.
            let mut frontier = known.frontier.clone();
            let witness_at = extend(
                rows,
                &mut frontier,
                cp.size,
                self.witnessed.as_ref().map(|w| w.size),
            )?;
            if frontier.size() != cp.size {
                return Err(LogError::Behind {
                    stored: frontier.size(),
                    seen: cp.size,
                    by: "the stored checkpoint signed",
                    by_short: "stored checkpoint",
                }
                .into());
            }
            if frontier.root() != cp.root {
                return Err(LogError::Inconsistent {
                    size: cp.size,
                    by: if have == 0 {
                        "of the stored checkpoint"
                    } else {
                        "this runtime and the stored checkpoint signed"
                    },
                }
                .into());
            }
            if let (Some(w), false) = (&self.witnessed, known.witness_checked) {
                if w.size > cp.size {
                    return Err(LogError::Behind {
                        stored: cp.size,
                        seen: w.size,
                        by: "the witness cosigned",
                        by_short: "witness state",
                    }
                    .into());
                }
                if witness_at.is_some_and(|r| r != w.root) {
                    return Err(LogError::Inconsistent {
                        size: w.size,
                        by: "the witness cosigned",
                    }
                    .into());
                }
                known.witness_checked = witness_at.is_some();
            }
            known.frontier = frontier;
            known.text = Some(text);
        }
        let size = known.frontier.size();
        if last > size {
            return Err(LogError::Uncovered {
                size,
                from: size + 1,
                to: last,
            }
            .into());
        }
        if last < size {
            return Err(LogError::Behind {
                stored: last,
                seen: size,
                by: "of the stored checkpoint",
                by_short: "stored checkpoint",
            }
            .into());
        }
        Ok(Covered {
            frontier: known.frontier.clone(),
            stored: true,
        })
    }

    /// What a check would find on a database that holds exactly what this writer knows
    /// (the caller proved that no one else wrote since its last full check): `None` while
    /// nothing was checked or signed here, or no checkpoint is stored yet.
    pub(crate) fn unchanged(&self) -> Option<Covered> {
        let known = self.known();
        known.text.as_ref().map(|_| Covered {
            frontier: known.frontier.clone(),
            stored: true,
        })
    }

    /// Just before the batch's `COMMIT`: appends the events it wrote after `covered`, up to
    /// seq `head` (the last event the batch appended, or `i64::MAX` where no other writer
    /// can have appended since the check), and stores the signed checkpoint of the tree.
    /// `None` when there is nothing to sign.
    ///
    /// The bound matters on PostgreSQL: a batch runs in `READ COMMITTED`, so its statements
    /// see rows other sessions committed after its check, and the head's row lock binds only
    /// writers that take it. A row another session inserted past the batch's own events is
    /// not the batch's, and is never signed here (the next step's check finds it uncovered).
    /// The seqs from the covered tree to `head` are the batch's own: any other insert of one
    /// of them conflicts with the batch's.
    pub(crate) fn seal(
        &self,
        rows: &mut dyn LogRows,
        covered: &Covered,
        head: i64,
    ) -> Result<Option<Sealed>, StoreError> {
        let mut frontier = covered.frontier.clone();
        extend(rows, &mut frontier, u64::try_from(head).unwrap_or(0), None)?;
        if head != i64::MAX && i64::try_from(frontier.size()).ok() != Some(head) {
            return Err(LogError::Gap(frontier.size().saturating_add(1)).into());
        }
        if frontier.size() == covered.frontier.size() && covered.stored {
            return Ok(None);
        }
        let checkpoint = Checkpoint {
            origin: self.origin.clone(),
            size: frontier.size(),
            root: frontier.root(),
            extensions: Vec::new(),
        };
        let text = self.signer.sign(&checkpoint).map_err(LogError::Signer)?;
        rows.put_checkpoint(&text)?;
        Ok(Some(Sealed { frontier, text }))
    }

    /// The batch that sealed `sealed` committed: it is what this writer knows now (unless it
    /// already knows a larger tree, adopted meanwhile from another batch's commit).
    pub(crate) fn committed(&self, sealed: Sealed) {
        let mut known = self.known();
        if sealed.frontier.size() >= known.frontier.size() {
            known.frontier = sealed.frontier;
            known.text = Some(sealed.text);
        }
    }
}
