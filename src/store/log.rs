//! The signed log of the ledger: every ledger event is a leaf of an RFC 6962 Merkle tree
//! (leaf `i` is the stored text of the event at `seq = i + 1`, byte for byte), and a runtime
//! given a signing key ([`Signing`], [`crate::RuntimeBuilder::signing`]) signs a checkpoint
//! of that tree (C2SP tlog-checkpoint in a signed note; origin `rpr/` + the database
//! identity) inside the transaction of every commit that appends events. So an attempt
//! record is covered by a signed checkpoint before its request is sent, with no extra
//! commit and no extra sync.
//!
//! What the signature adds to the hash chain (docs/evidence.md, "Threat model"): a writer of
//! the database who does not hold the key can no longer rewrite, append or cut events
//! without [`verify_log`] saying so, and a runtime with the key refuses to take a step on
//! such a database. A witness ([`witness`]) adds what a key holder alone cannot prove: that
//! the log was never rolled back or forked (a restored backup, two histories shown to two
//! auditors).
//!
//! The store keeps only the newest checkpoint (`meta.log_checkpoint`): every older one is a
//! prefix of it, which the witness's consistency check proves.

mod seal;
mod sqlite;

use std::fmt;

pub(crate) use seal::{Covered, LogRows, Sealed, Sealer};
pub(crate) use sqlite::SqliteLog;

use crate::evidence::checkpoint::{Checkpoint, CheckpointError};
use crate::evidence::merkle::{self, Hash};
use crate::evidence::note::ahead::AheadSigner;
use crate::evidence::note::{Note, SignerKey, VerifierKey};
use crate::evidence::proof::{self, ProofFile, ProofFileError};
use crate::store::event::{Event, Reading};
use crate::store::{ReadStore, StoreError};

/// The `meta` key of the newest signed checkpoint.
pub(crate) const META_KEY: &str = "log_checkpoint";

/// Events read per page while a log is walked.
const PAGE: usize = 2048;

/// The checkpoint origin of the database with identity `database_id`.
#[must_use]
pub fn origin(database_id: &str) -> String {
    format!("rpr/{database_id}")
}

/// What signs the checkpoints: a key in this process, or a command that holds it.
#[derive(Clone)]
pub(crate) enum Signer {
    /// The key itself; an Ed25519 log key signs with nonces made ahead (`ahead`,
    /// `evidence::note::ahead`), so the commit does not wait for a scalar multiplication.
    Key {
        key: SignerKey,
        ahead: Option<std::sync::Arc<AheadSigner>>,
    },
    /// A program run once per signed checkpoint: the checkpoint's text on its stdin, one
    /// signature line (`— NAME BASE64`) on its stdout, checked with `verifier`.
    Command {
        argv: Vec<String>,
        verifier: VerifierKey,
    },
}

/// How long a signer command may take before the step is refused.
const SIGNER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The most bytes read from a signer command's stdout.
const MAX_SIGNER_OUTPUT: u64 = 4096;

impl Signer {
    fn verifier(&self) -> VerifierKey {
        match self {
            Self::Key { key, .. } => key.verifier(),
            Self::Command { verifier, .. } => verifier.clone(),
        }
    }

    /// The signed note of `checkpoint`, whose signature verifies with [`Signer::verifier`].
    pub(crate) fn sign(&self, checkpoint: &Checkpoint) -> Result<String, String> {
        match self {
            Self::Key {
                ahead: Some(ahead), ..
            } => checkpoint
                .sign_ahead(ahead)
                .map(|n| n.to_text())
                .map_err(|e| e.to_string()),
            Self::Key { key, ahead: None } => checkpoint
                .sign(key)
                .map(|n| n.to_text())
                .map_err(|e| e.to_string()),
            Self::Command { argv, verifier } => {
                let body = checkpoint.to_text().map_err(|e| e.to_string())?;
                let line = run_signer(argv, &body)?;
                let text = format!("{body}\n{}\n", line.trim_end_matches('\n'));
                let note = Note::parse(text.as_bytes()).map_err(|e| {
                    format!("the signer command's output is not a signature line: {e}")
                })?;
                note.verify_all(std::slice::from_ref(verifier)).map_err(|e| {
                    format!("the signer command's signature does not verify with the log key {}: {e}", verifier.name())
                })?;
                Ok(note.to_text())
            }
        }
    }
}

/// Runs a signer command with `body` on its stdin; its stdout, bounded, within the timeout.
fn run_signer(argv: &[String], body: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| "the signer command is empty".to_owned())?;
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("the signer command {program} does not start: {e}"))?;
    let written = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(body.as_bytes()));
    let reader = child.stdout.take().map(|stdout| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let r = stdout.take(MAX_SIGNER_OUTPUT).read_to_string(&mut s);
            r.map(|_| s)
        })
    });
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < SIGNER_TIMEOUT => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the signer command {program} did not answer within {} s",
                    SIGNER_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for the signer command {program}: {e}")),
        }
    };
    if let Some(Err(e)) = written {
        return Err(format!(
            "the signer command {program} did not read the checkpoint: {e}"
        ));
    }
    let mut out = String::new();
    if let Some(reader) = reader {
        out = reader
            .join()
            .map_err(|_| "the signer command's reader panicked".to_owned())?
            .map_err(|e| format!("the signer command's output: {e}"))?;
    }
    if !status.success() {
        return Err(format!("the signer command {program} failed ({status})"));
    }
    Ok(out)
}

/// How a runtime signs the log of its database.
#[derive(Clone)]
pub struct Signing {
    pub(crate) signer: Signer,
    pub(crate) trusted: Vec<VerifierKey>,
    pub(crate) witnessed: Option<Checkpoint>,
    pub(crate) begin: bool,
}

impl fmt::Debug for Signing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signing")
            .field("verifier", &self.signer.verifier())
            .field("trusted", &self.trusted)
            .field("witnessed", &self.witnessed)
            .field("begin", &self.begin)
            .finish()
    }
}

impl Signing {
    /// Signs with `key`. Checkpoints already stored must be signed by `key` (or a key
    /// added with [`Signing::trust`]).
    #[must_use]
    pub fn new(key: SignerKey) -> Self {
        let ahead = AheadSigner::new(key.clone()).map(std::sync::Arc::new);
        Self::with(Signer::Key { key, ahead })
    }

    /// Signs by running `argv` once per checkpoint, so that the key can live where this
    /// process cannot read it (another account, a hardware token): the checkpoint's text
    /// on its stdin, one signed-note signature line (`— NAME BASE64`) on its stdout within
    /// 10 s, which must verify with `verifier` (the log's public key). `rpr sign --key
    /// KEYFILE` is such a command. The command runs inside the commit's transaction, so its
    /// start-up time is added to every commit that appends events.
    #[must_use]
    pub fn command(argv: Vec<String>, verifier: VerifierKey) -> Self {
        Self::with(Signer::Command { argv, verifier })
    }

    fn with(signer: Signer) -> Self {
        let own = signer.verifier();
        Self {
            signer,
            trusted: vec![own],
            witnessed: None,
            begin: false,
        }
    }

    /// Also adopts checkpoints signed by `key`: another writer of the same database (a
    /// host sharing a PostgreSQL store) with a key of its own.
    #[must_use]
    pub fn trust(mut self, key: VerifierKey) -> Self {
        self.trusted.push(key);
        self
    }

    /// The checkpoint a witness last cosigned (its state): the runtime refuses to take a
    /// step on a database whose log is smaller than it (a restored backup, a cut tail) or
    /// does not extend it (a rewritten history).
    #[must_use]
    pub fn witnessed(mut self, checkpoint: Checkpoint) -> Self {
        self.witnessed = Some(checkpoint);
        self
    }

    /// Signs a history that has no checkpoint yet, as it stands: the first signed
    /// checkpoint vouches for every event before it. Without this, a runtime refuses to
    /// step on a database that has events and no checkpoint (someone may have deleted the
    /// checkpoint to get forged events signed). Check the database with `rpr verify` first.
    #[must_use]
    pub fn begin_log(mut self) -> Self {
        self.begin = true;
        self
    }

    /// The public key that verifies this runtime's checkpoints.
    #[must_use]
    pub fn verifier(&self) -> VerifierKey {
        self.signer.verifier()
    }
}

/// Why a runtime with a signing key refused to take a step (nothing of it was written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The database has events and no signed checkpoint.
    #[error(
        "the database's log has {events} events and no signed checkpoint: nothing proves they were written by a key holder. Check it with `rpr verify`, then sign it as it stands with `rpr checkpoint --begin --signing-key KEYFILE`"
    )]
    Unsigned {
        /// Ledger events stored.
        events: u64,
    },
    /// The database's log is signed, and this runtime has no signing key.
    #[error(
        "the database's log is signed (checkpoint of {size} events): a step without the signing key would leave events no checkpoint covers. Give --signing-key KEYFILE"
    )]
    SigningKeyNeeded {
        /// The stored checkpoint's tree size.
        size: u64,
    },
    /// The stored checkpoint is unreadable, for another database, or not signed by a
    /// trusted key.
    #[error("the stored checkpoint is refused: {0}")]
    BadCheckpoint(String),
    /// The stored checkpoint is gone, though this runtime signed one.
    #[error(
        "the stored checkpoint was removed after this runtime signed one of {signed} events; the log cannot be trusted until it is checked with `rpr verify --key`"
    )]
    Removed {
        /// The size this runtime signed.
        signed: u64,
    },
    /// The log is smaller than a checkpoint this runtime or its witness has seen.
    #[error(
        "the database's log ({stored} events signed) is behind the checkpoint of {seen} events {by}: a restored backup or a cut tail. Restore the newer database, or ask the operator who keeps the {by_short}"
    )]
    Behind {
        /// The stored checkpoint's size.
        stored: u64,
        /// The size seen.
        seen: u64,
        /// Who saw it ("this runtime signed", "the witness cosigned").
        by: &'static str,
        /// Short form ("runtime's log", "witness state").
        by_short: &'static str,
    },
    /// The events do not hash to a checkpoint's root.
    #[error(
        "the database's first {size} events do not hash to the root {by}: the history was rewritten. Run `rpr verify --key` to see where"
    )]
    Inconsistent {
        /// The tree size checked.
        size: u64,
        /// Whose root ("of the stored checkpoint", "the witness cosigned", "this runtime signed").
        by: &'static str,
    },
    /// Events after the stored checkpoint that no key holder signed.
    #[error(
        "events {from} to {to} follow the signed checkpoint of {size} events and no checkpoint covers them: they were appended without the signing key. Run `rpr verify --key`; this runtime will not sign them into its log"
    )]
    Uncovered {
        /// The checkpoint's size.
        size: u64,
        /// The first uncovered seq.
        from: u64,
        /// The last uncovered seq.
        to: u64,
    },
    /// The ledger's seqs are not 1, 2, 3, …
    #[error("the ledger has no event at seq {0}: the log has a gap")]
    Gap(u64),
    /// The ledger has an event numbered below 1, where no log has one: a row written
    /// behind the runtime's back, which no checkpoint covers.
    #[error(
        "the ledger has an event at seq {0}, before the log's first (1): no checkpoint covers it; it was written without the runtime. Run `rpr verify --key`; this runtime will not sign past it"
    )]
    BeforeFirst(i64),
    /// The checkpoint could not be signed (a signer command that failed, timed out or
    /// answered with a signature that does not verify).
    #[error("the checkpoint could not be signed, so the step was not committed: {0}")]
    Signer(String),
}

/// One problem [`verify_log`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogProblem {
    /// Events and no checkpoint.
    NoCheckpoint {
        /// Events stored.
        events: u64,
    },
    /// The checkpoint is unreadable, for another database, or not signed by the key.
    BadCheckpoint(String),
    /// The checkpoint covers more events than the database has: the tail was cut.
    CheckpointBeyondLog {
        /// The checkpoint's size.
        size: u64,
        /// Events stored.
        events: u64,
    },
    /// The first `size` events do not hash to the checkpoint's root: rewritten.
    RootMismatch {
        /// The checkpoint's size.
        size: u64,
    },
    /// Events after the checkpoint: appended without the key.
    Uncovered {
        /// First uncovered seq.
        from: u64,
        /// Last uncovered seq.
        to: u64,
    },
    /// The ledger's seqs have a gap.
    Gap(u64),
    /// An event numbered below 1 (the lowest such seq): no log has one, and no checkpoint
    /// covers it.
    BeforeFirst(i64),
    /// The log is smaller than the witness's checkpoint: a restored backup or a cut tail.
    BehindWitness {
        /// The witness's size.
        witness: u64,
        /// Events stored.
        events: u64,
    },
    /// The first events do not hash to the witness's root: a rewritten or forked history.
    WitnessMismatch {
        /// The witness's size.
        size: u64,
    },
}

impl fmt::Display for LogProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoCheckpoint { events } => write!(
                f,
                "no signed checkpoint: the log's {events} events are not covered by a signature"
            ),
            Self::BadCheckpoint(why) => write!(f, "the stored checkpoint is refused: {why}"),
            Self::CheckpointBeyondLog { size, events } => write!(
                f,
                "the signed checkpoint covers {size} events, the database has {events}: the tail was cut"
            ),
            Self::RootMismatch { size } => write!(
                f,
                "the first {size} events do not hash to the signed root: the history was rewritten"
            ),
            Self::Uncovered { from, to } => write!(
                f,
                "events {from} to {to} are not covered by a signed checkpoint: appended without the signing key"
            ),
            Self::Gap(seq) => write!(f, "the ledger has no event at seq {seq}"),
            Self::BeforeFirst(seq) => write!(
                f,
                "the ledger has an event at seq {seq}, before the log's first (1): no checkpoint covers it"
            ),
            Self::BehindWitness { witness, events } => write!(
                f,
                "the witness cosigned {witness} events, the database has {events}: a restored backup or a cut tail"
            ),
            Self::WitnessMismatch { size } => write!(
                f,
                "the first {size} events do not hash to the root the witness cosigned: a rewritten or forked history"
            ),
        }
    }
}

/// What [`verify_log`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogReport {
    /// Ledger events stored.
    pub events: u64,
    /// The stored checkpoint, when it verified with the key.
    pub checkpoint: Option<Checkpoint>,
    /// What is wrong; empty when every event is covered by a checkpoint signed by the key.
    pub problems: Vec<LogProblem>,
}

impl LogReport {
    /// Whether nothing is wrong.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The newest signed checkpoint stored, as note text.
pub fn latest(store: &ReadStore) -> Result<Option<String>, StoreError> {
    store.meta(META_KEY)
}

/// What [`leaves`] read.
struct Leaves {
    /// The stored checkpoint note.
    stored: Option<String>,
    /// Every event's leaf hash, in order of seq.
    hashes: Vec<Hash>,
    /// The first seq missing, if the seqs have a gap.
    gap: Option<u64>,
    /// The lowest seq, if it is below 1 (such events are not leaves).
    before_first: Option<i64>,
}

/// The leaf hashes of every event, in one snapshot with the stored checkpoint.
fn leaves(store: &ReadStore) -> Result<Leaves, StoreError> {
    store.snapshot(|s| {
        let stored = s.meta(META_KEY)?;
        // The leaves are the events from seq 1 on; one below it is reported on its own.
        let before_first = s.ledger_first()?.filter(|&seq| seq < 1);
        let mut hashes = Vec::new();
        let mut gap = None;
        let mut after = 0_i64;
        loop {
            let page = s.ledger(after, PAGE)?;
            for row in &page {
                if gap.is_none() && row.seq != after + 1 {
                    gap = Some(u64::try_from(after + 1).unwrap_or(0));
                }
                hashes.push(merkle::leaf_hash(row.event.as_bytes()));
                after = row.seq;
            }
            if page.len() < PAGE {
                break;
            }
        }
        Ok(Leaves {
            stored,
            hashes,
            gap,
            before_first,
        })
    })
}

/// Verifies the log with the signing key's public half: the stored checkpoint is signed
/// by `key` for this database, the events hash to its root, and no event follows it. With
/// `witness` (the checkpoint a witness last cosigned), also that the log is not behind it
/// and extends it. Reads one snapshot.
pub fn verify_log(
    store: &ReadStore,
    key: &VerifierKey,
    witness: Option<&Checkpoint>,
) -> Result<LogReport, StoreError> {
    let database_id = store.database_id()?;
    let Leaves {
        stored,
        hashes,
        gap,
        before_first,
    } = leaves(store)?;
    let events = hashes.len() as u64;
    let mut problems = Vec::new();
    if let Some(seq) = before_first {
        problems.push(LogProblem::BeforeFirst(seq));
    }
    if let Some(seq) = gap {
        problems.push(LogProblem::Gap(seq));
    }
    let mut checkpoint = None;
    match stored {
        None if events > 0 => problems.push(LogProblem::NoCheckpoint { events }),
        None => {}
        Some(text) => match open_checkpoint(&text, &database_id, std::slice::from_ref(key)) {
            Err(why) => problems.push(LogProblem::BadCheckpoint(why)),
            Ok(cp) => {
                if cp.size > events {
                    problems.push(LogProblem::CheckpointBeyondLog {
                        size: cp.size,
                        events,
                    });
                } else {
                    if root_of(&hashes, cp.size) != cp.root {
                        problems.push(LogProblem::RootMismatch { size: cp.size });
                    }
                    if events > cp.size {
                        problems.push(LogProblem::Uncovered {
                            from: cp.size + 1,
                            to: events,
                        });
                    }
                }
                checkpoint = Some(cp);
            }
        },
    }
    if let Some(w) = witness {
        if w.size > events {
            problems.push(LogProblem::BehindWitness {
                witness: w.size,
                events,
            });
        } else if root_of(&hashes, w.size) != w.root {
            problems.push(LogProblem::WitnessMismatch { size: w.size });
        }
    }
    Ok(LogReport {
        events,
        checkpoint,
        problems,
    })
}

fn root_of(hashes: &[Hash], size: u64) -> Hash {
    merkle::root(
        &hashes[..usize::try_from(size)
            .unwrap_or(usize::MAX)
            .min(hashes.len())],
    )
}

/// The tree size a stored checkpoint note names (0 when it cannot be read).
pub(crate) fn stored_size(text: &str) -> u64 {
    Note::parse(text.as_bytes())
        .ok()
        .and_then(|n| Checkpoint::parse(n.text()).ok())
        .map_or(0, |c| c.size)
}

/// Reads a stored checkpoint note: signed by one of `keys`, with this database's origin.
pub(crate) fn open_checkpoint(
    text: &str,
    database_id: &str,
    keys: &[VerifierKey],
) -> Result<Checkpoint, String> {
    let note = Note::parse(text.as_bytes()).map_err(|e| e.to_string())?;
    note.verify(keys).map_err(|e| e.to_string())?;
    let cp = Checkpoint::parse(note.text()).map_err(|e| e.to_string())?;
    let want = origin(database_id);
    if cp.origin != want {
        return Err(format!(
            "its origin is {:?}, this database's is {want:?}",
            cp.origin
        ));
    }
    Ok(cp)
}

/// Why a proof could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProveError {
    /// Reading the store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// No such pathway, or it has no events in the checkpoint's tree.
    #[error("pathway {0} has no events covered by the checkpoint")]
    NoEvents(String),
    /// The database has no signed checkpoint.
    #[error("the database has no signed checkpoint to prove against (sign with --signing-key)")]
    NoCheckpoint,
    /// The checkpoint does not describe the stored events, or another failure.
    #[error("{0}")]
    Proof(#[from] ProofFileError),
    /// The checkpoint given is unreadable.
    #[error("the checkpoint is refused: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// A ledger row's `pathway_id` column does not name the pathway its event's text names
    /// (or the text names none): the row was edited, and which events are the pathway's
    /// cannot be told from the column. `rpr verify` reports the edit.
    #[error(
        "ledger event {seq}: its pathway_id column says {column:?} but its text names {text}; the ledger was edited outside rpr (`rpr verify` reports it), so no proof is written"
    )]
    PathwayDisagrees {
        /// The row's sequence number.
        seq: i64,
        /// The row's `pathway_id` column.
        column: String,
        /// What the event's text names (quoted), or why it names nothing.
        text: String,
    },
}

/// The pathway an event's text names, or why it names none.
fn pathway_of(text: &str) -> Result<String, String> {
    let named = match Event::read(text) {
        Reading::Canonical(e) | Reading::NotCanonical(e) => {
            e.pathway.map(std::borrow::Cow::into_owned)
        }
        Reading::NotJson(_) => return Err("nothing (it is not JSON)".into()),
    };
    named.ok_or_else(|| "no pathway".into())
}

/// A proof file for every event of `pathway`, against `against` (a signed checkpoint note:
/// the stored one when `None`, or one a witness cosigned), checkable offline with
/// `rpr verify-proof`.
///
/// An event is the pathway's when its text (the leaf's bytes, covered by the checkpoint)
/// names the pathway; the row's `pathway_id` column, which nothing signs, only has to agree.
/// A row where the two differ refuses the proof ([`ProveError::PathwayDisagrees`]): a
/// proof file shows that its events are in the log, not that they are all of the
/// pathway's, so a proof must not be chosen by what a writer without the key can edit.
pub fn prove(
    store: &ReadStore,
    pathway: &str,
    against: Option<&str>,
) -> Result<ProofFile, ProveError> {
    let (stored, rows) = store.snapshot(|s| -> Result<_, StoreError> {
        let stored = s.meta(META_KEY)?;
        let mut rows = Vec::new();
        let mut after = 0_i64;
        loop {
            let page = s.ledger(after, PAGE)?;
            let n = page.len();
            if let Some(last) = page.last() {
                after = last.seq;
            }
            rows.extend(page.into_iter().map(|r| (r.seq, r.pathway_id, r.event)));
            if n < PAGE {
                break;
            }
        }
        Ok((stored, rows))
    })?;
    let text = match against {
        Some(t) => t.to_owned(),
        None => stored.ok_or(ProveError::NoCheckpoint)?,
    };
    let note = Note::parse(text.as_bytes()).map_err(CheckpointError::from)?;
    let cp = Checkpoint::parse(note.text())?;
    let size = usize::try_from(cp.size).unwrap_or(usize::MAX);
    if size > rows.len() {
        return Err(ProofFileError::CheckpointMismatch {
            size: cp.size,
            leaves: rows.len(),
        }
        .into());
    }
    let covered = &rows[..size];
    let mut indices = Vec::new();
    for (i, (seq, column, event)) in covered.iter().enumerate() {
        let named = pathway_of(event);
        if named.as_deref() != Ok(column.as_str()) {
            return Err(ProveError::PathwayDisagrees {
                seq: *seq,
                column: column.clone(),
                text: named.map_or_else(|why| why, |p| format!("{p:?}")),
            });
        }
        if column == pathway {
            indices.push(i as u64);
        }
    }
    if indices.is_empty() {
        return Err(ProveError::NoEvents(pathway.to_owned()));
    }
    let leaves: Vec<&[u8]> = covered.iter().map(|(_, _, e)| e.as_bytes()).collect();
    Ok(proof::build(&leaves, &note, &indices, None)?)
}

/// Why a witness did not cosign.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessError {
    /// Reading the store failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The database has no signed checkpoint.
    #[error("the database has no signed checkpoint to cosign")]
    NoCheckpoint,
    /// The database's checkpoint does not verify with the log's key.
    #[error("the database's checkpoint is refused: {0}")]
    BadCheckpoint(String),
    /// The witness's state is unreadable or not signed by the log's key.
    #[error("the witness state is refused: {0}")]
    BadState(String),
    /// The state is for another log.
    #[error("the witness state is for the log {state:?}, the database's is {log:?}")]
    OtherLog {
        /// The state's origin.
        state: String,
        /// The database's origin.
        log: String,
    },
    /// The log is smaller than the cosigned one.
    #[error(
        "the database's checkpoint has {log} events, the witness cosigned {cosigned}: the log went back (a restored backup or a cut tail). Not cosigned"
    )]
    Behind {
        /// The database's size.
        log: u64,
        /// The cosigned size.
        cosigned: u64,
    },
    /// The log does not extend the cosigned one.
    #[error(
        "the database's checkpoint of {log} events does not extend the one of {cosigned} events the witness cosigned (no consistency proof holds): a rewritten or forked history. Not cosigned"
    )]
    Inconsistent {
        /// The database's size.
        log: u64,
        /// The cosigned size.
        cosigned: u64,
    },
    /// The stored events do not hash to the checkpoint's root.
    #[error(
        "the database's events do not hash to its signed checkpoint of {0} events: it was changed behind the log. Not cosigned"
    )]
    NotItsEvents(u64),
    /// Signing failed.
    #[error("cosigning failed: {0}")]
    Sign(String),
}

/// What [`witness`] did.
#[derive(Debug, Clone)]
pub struct Cosigned {
    /// The checkpoint, with the log's signature and the witness's.
    pub note: Note,
    /// Its body.
    pub checkpoint: Checkpoint,
    /// The size the witness had cosigned before (`None` on its first cosignature).
    pub previous: Option<u64>,
}

/// A witness's step: cosigns the database's newest checkpoint (verified with `log_key`)
/// with `witness_key` if it is a consistent extension of `state` (the checkpoint note the
/// witness last cosigned, `None` on its first use), proven with a consistency proof built
/// from the stored events and checked against both roots. The caller keeps the returned
/// note as the new state (outside the database).
pub fn witness(
    store: &ReadStore,
    log_key: &VerifierKey,
    witness_key: &SignerKey,
    state: Option<&str>,
) -> Result<Cosigned, WitnessError> {
    let database_id = store.database_id()?;
    let Leaves { stored, hashes, .. } = leaves(store)?;
    let text = stored.ok_or(WitnessError::NoCheckpoint)?;
    let cp = open_checkpoint(&text, &database_id, std::slice::from_ref(log_key))
        .map_err(WitnessError::BadCheckpoint)?;
    let size = usize::try_from(cp.size).unwrap_or(usize::MAX);
    if size > hashes.len() || merkle::root(&hashes[..size]) != cp.root {
        return Err(WitnessError::NotItsEvents(cp.size));
    }
    let mut previous = None;
    if let Some(state) = state {
        let old_note = Note::parse(state.as_bytes())
            .and_then(|n| n.verify(std::slice::from_ref(log_key)).map(|_| n))
            .map_err(|e| WitnessError::BadState(e.to_string()))?;
        let old = Checkpoint::parse(old_note.text())
            .map_err(|e| WitnessError::BadState(e.to_string()))?;
        if old.origin != cp.origin {
            return Err(WitnessError::OtherLog {
                state: old.origin,
                log: cp.origin,
            });
        }
        if cp.size < old.size {
            return Err(WitnessError::Behind {
                log: cp.size,
                cosigned: old.size,
            });
        }
        let consistent = merkle::consistency_proof(&hashes[..size], old.size)
            .ok()
            .is_some_and(|p| {
                merkle::verify_consistency(old.size, cp.size, &old.root, &cp.root, &p).is_ok()
            });
        if !consistent {
            return Err(WitnessError::Inconsistent {
                log: cp.size,
                cosigned: old.size,
            });
        }
        previous = Some(old.size);
    }
    let mut note = Note::parse(text.as_bytes()).map_err(|e| WitnessError::Sign(e.to_string()))?;
    // A cosignature by this key from an earlier run is replaced, not repeated.
    note.sign(witness_key)
        .map_err(|e| WitnessError::Sign(e.to_string()))?;
    Ok(Cosigned {
        note,
        checkpoint: cp,
        previous,
    })
}
