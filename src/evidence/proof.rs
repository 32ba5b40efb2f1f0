//! Proof files: a self-contained, offline-checkable bundle of a signed checkpoint, some of
//! the log's leaves with their inclusion proofs, and optionally an older signed checkpoint
//! with the consistency proof from it. `rpr proof` builds them from the store's leaves
//! ([`crate::store::log::prove`]) and `rpr verify-proof` checks them; these functions read no
//! database.
//!
//! The file is JSON (`format` is [`PROOF_FORMAT`]); bytes are standard base64:
//!
//! ```json
//! {
//!   "format": "rpr-proof/v0",
//!   "checkpoint": "example.com/log\n5\nBASE64ROOT\n\n— example.com/log BASE64SIG\n",
//!   "leaves": [ { "index": 3, "data": "BASE64 LEAF BYTES", "proof": ["BASE64 HASH", "…"] } ],
//!   "consistency": { "old_checkpoint": "…signed note…", "proof": ["BASE64 HASH", "…"] }
//! }
//! ```
//!
//! [`verify`] checks, with the log's verifier key (and any witnesses' keys, each required):
//! the checkpoint's signatures; each leaf's inclusion proof against the checkpoint's size and
//! root (the leaf hash is computed from the data, never taken from the file); and, if present,
//! the old checkpoint's signature by the same log key, its origin, and the consistency proof
//! from it to the new one. Anything else in the file is refused (`deny_unknown_fields`).

use serde::{Deserialize, Serialize};

use super::base64;
use super::checkpoint::{Checkpoint, CheckpointError};
use super::merkle::{self, Hash, ProofError};
use super::note::{Note, VerifierKey};

/// The `format` of a proof file.
pub const PROOF_FORMAT: &str = "rpr-proof/v0";

/// The largest proof file [`verify`] reads, in bytes.
pub const MAX_PROOF_FILE_BYTES: usize = 16 * 1024 * 1024;

/// The most leaves one proof file may carry.
pub const MAX_PROOF_LEAVES: usize = 10_000;

/// A proof file, as written and read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofFile {
    /// Always [`PROOF_FORMAT`].
    pub format: String,
    /// The signed checkpoint note the leaves are proven against.
    pub checkpoint: String,
    /// The leaves, each with its inclusion proof.
    pub leaves: Vec<ProvenLeaf>,
    /// An older checkpoint and the consistency proof from it, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency: Option<ConsistencyEvidence>,
}

/// One leaf and its inclusion proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenLeaf {
    /// The leaf's index in the log.
    pub index: u64,
    /// The leaf's bytes (base64).
    pub data: String,
    /// The inclusion proof: hashes from the leaf up (base64).
    pub proof: Vec<String>,
}

/// An older signed checkpoint and the consistency proof from it to the file's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsistencyEvidence {
    /// The older signed checkpoint note.
    pub old_checkpoint: String,
    /// The consistency proof (base64 hashes).
    pub proof: Vec<String>,
}

/// What a proof file proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The checkpoint, signed by the log (and the witnesses given).
    pub checkpoint: Checkpoint,
    /// The leaves proven to be in it: index and bytes.
    pub leaves: Vec<(u64, Vec<u8>)>,
    /// The older checkpoint proven to be a prefix of it, if the file had one.
    pub old_checkpoint: Option<Checkpoint>,
    /// For each witness key given, in order, the time its `cosignature/v1` states (seconds
    /// since the Epoch): when the witness saw this checkpoint as the largest consistent one.
    /// `None` for a witness key of type Ed25519, whose cosignature carries no time.
    pub cosigned_at: Vec<Option<u64>>,
}

/// Why a proof file was refused, or could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofFileError {
    /// The file is larger than [`MAX_PROOF_FILE_BYTES`].
    #[error("the proof file has {0} bytes; at most {MAX_PROOF_FILE_BYTES} are read")]
    TooLarge(usize),
    /// Not JSON of the proof file's shape.
    #[error("the proof file is not a proof file: {0}")]
    Json(String),
    /// Another format.
    #[error("the proof file's format is {0:?}; this rpr reads {PROOF_FORMAT:?}")]
    Format(String),
    /// More than [`MAX_PROOF_LEAVES`] leaves.
    #[error("the proof file has {0} leaves; at most {MAX_PROOF_LEAVES}")]
    TooManyLeaves(usize),
    /// The checkpoint was refused (form or signatures).
    #[error("the checkpoint: {0}")]
    Checkpoint(CheckpointError),
    /// A leaf's data or a hash is not standard base64, or a hash is not 32 bytes.
    #[error("{what} is not standard base64 of the right length")]
    Encoding {
        /// Which field.
        what: String,
    },
    /// A leaf's inclusion proof does not hold.
    #[error("leaf {index} is not proven to be in the checkpoint's tree: {error}")]
    Inclusion {
        /// The leaf's index.
        index: u64,
        /// Why.
        error: ProofError,
    },
    /// The old checkpoint was refused (form or signatures).
    #[error("the old checkpoint: {0}")]
    OldCheckpoint(CheckpointError),
    /// The old checkpoint names another log.
    #[error("the old checkpoint is of log {old:?}, the checkpoint of {new:?}")]
    OriginMismatch {
        /// The old origin.
        old: String,
        /// The new origin.
        new: String,
    },
    /// The consistency proof does not hold: the log was rewritten, or the proof is wrong.
    #[error(
        "the checkpoint of {new_size} leaves does not extend the old one of {old_size}: {error}"
    )]
    Consistency {
        /// The old size.
        old_size: u64,
        /// The new size.
        new_size: u64,
        /// Why.
        error: ProofError,
    },
    /// (making a file) The checkpoint's size or root is not that of the leaves given.
    #[error("the checkpoint ({size} leaves) is not the tree of the {leaves} leaves given")]
    CheckpointMismatch {
        /// The checkpoint's size.
        size: u64,
        /// How many leaves were given.
        leaves: usize,
    },
    /// (making a file) An index or an old size outside the tree.
    #[error("{0}")]
    Build(ProofError),
}

fn hashes_to_b64(hashes: &[Hash]) -> Vec<String> {
    hashes.iter().map(|h| base64::encode(h)).collect()
}

fn b64_to_hashes(list: &[String], what: &str) -> Result<Vec<Hash>, ProofFileError> {
    if list.len() > merkle::MAX_PROOF_HASHES {
        return Err(ProofFileError::Encoding {
            what: format!("{what} ({} hashes, at most 64)", list.len()),
        });
    }
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            base64::decode(s)
                .and_then(|raw| Hash::try_from(raw.as_slice()).ok())
                .ok_or_else(|| ProofFileError::Encoding {
                    what: format!("{what} hash {i}"),
                })
        })
        .collect()
}

/// Makes a proof file for the leaves at `indices` of the log whose leaves (bytes, in order)
/// are `all_leaves`, against `checkpoint` (a signed note whose checkpoint is the tree of
/// exactly those leaves), with the consistency proof from `old_checkpoint` if given.
pub fn build(
    all_leaves: &[&[u8]],
    checkpoint: &Note,
    indices: &[u64],
    old_checkpoint: Option<&Note>,
) -> Result<ProofFile, ProofFileError> {
    let hashes: Vec<Hash> = all_leaves.iter().map(|d| merkle::leaf_hash(d)).collect();
    let cp = Checkpoint::parse(checkpoint.text()).map_err(ProofFileError::Checkpoint)?;
    if cp.size != hashes.len() as u64 || cp.root != merkle::root(&hashes) {
        return Err(ProofFileError::CheckpointMismatch {
            size: cp.size,
            leaves: hashes.len(),
        });
    }
    let mut leaves = Vec::with_capacity(indices.len());
    for &index in indices {
        let proof = merkle::inclusion_proof(&hashes, index).map_err(ProofFileError::Build)?;
        let data = all_leaves[usize::try_from(index).expect("an index below the leaf count")];
        leaves.push(ProvenLeaf {
            index,
            data: base64::encode(data),
            proof: hashes_to_b64(&proof),
        });
    }
    let consistency = match old_checkpoint {
        None => None,
        Some(old) => {
            let old_cp = Checkpoint::parse(old.text()).map_err(ProofFileError::OldCheckpoint)?;
            let proof =
                merkle::consistency_proof(&hashes, old_cp.size).map_err(ProofFileError::Build)?;
            Some(ConsistencyEvidence {
                old_checkpoint: old.to_text(),
                proof: hashes_to_b64(&proof),
            })
        }
    };
    Ok(ProofFile {
        format: PROOF_FORMAT.to_owned(),
        checkpoint: checkpoint.to_text(),
        leaves,
        consistency,
    })
}

/// Verifies a proof file (its JSON bytes) with the log's verifier key and every witness key
/// in `witnesses` (each signature required on the checkpoint). See the module documentation
/// for what is checked.
pub fn verify(
    bytes: &[u8],
    log: &VerifierKey,
    witnesses: &[VerifierKey],
) -> Result<Verified, ProofFileError> {
    if bytes.len() > MAX_PROOF_FILE_BYTES {
        return Err(ProofFileError::TooLarge(bytes.len()));
    }
    let file: ProofFile =
        serde_json::from_slice(bytes).map_err(|e| ProofFileError::Json(e.to_string()))?;
    if file.format != PROOF_FORMAT {
        return Err(ProofFileError::Format(file.format));
    }
    if file.leaves.len() > MAX_PROOF_LEAVES {
        return Err(ProofFileError::TooManyLeaves(file.leaves.len()));
    }
    let (cp, note) = Checkpoint::open(file.checkpoint.as_bytes(), log, witnesses)
        .map_err(ProofFileError::Checkpoint)?;
    let cosigned_at = witnesses.iter().map(|w| note.cosigned_at(w)).collect();
    let mut leaves = Vec::with_capacity(file.leaves.len());
    for leaf in &file.leaves {
        let data = base64::decode(&leaf.data).ok_or_else(|| ProofFileError::Encoding {
            what: format!("leaf {} data", leaf.index),
        })?;
        let proof = b64_to_hashes(&leaf.proof, &format!("leaf {} proof", leaf.index))?;
        merkle::verify_inclusion(
            &merkle::leaf_hash(&data),
            leaf.index,
            cp.size,
            &proof,
            &cp.root,
        )
        .map_err(|error| ProofFileError::Inclusion {
            index: leaf.index,
            error,
        })?;
        leaves.push((leaf.index, data));
    }
    let old_checkpoint = match &file.consistency {
        None => None,
        Some(c) => {
            let (old, _) = Checkpoint::open(c.old_checkpoint.as_bytes(), log, &[])
                .map_err(ProofFileError::OldCheckpoint)?;
            if old.origin != cp.origin {
                return Err(ProofFileError::OriginMismatch {
                    old: old.origin,
                    new: cp.origin,
                });
            }
            let proof = b64_to_hashes(&c.proof, "consistency proof")?;
            merkle::verify_consistency(old.size, cp.size, &old.root, &cp.root, &proof).map_err(
                |error| ProofFileError::Consistency {
                    old_size: old.size,
                    new_size: cp.size,
                    error,
                },
            )?;
            Some(old)
        }
    };
    Ok(Verified {
        checkpoint: cp,
        leaves,
        old_checkpoint,
        cosigned_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::note::SignerKey;

    fn log_of(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("event {i}").into_bytes()).collect()
    }

    fn signed(key: &SignerKey, leaves: &[Vec<u8>]) -> Note {
        let hashes: Vec<Hash> = leaves.iter().map(|d| merkle::leaf_hash(d)).collect();
        Checkpoint {
            origin: "example.com/log".into(),
            size: leaves.len() as u64,
            root: merkle::root(&hashes),
            extensions: vec![],
        }
        .sign(key)
        .unwrap()
    }

    #[test]
    fn a_proof_file_round_trips_and_every_tampering_is_refused() {
        let key = SignerKey::generate("example.com/log").unwrap();
        let all = log_of(11);
        let refs: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
        let old = signed(&key, &all[..6]);
        let new = signed(&key, &all);
        let file = build(&refs, &new, &[0, 5, 10], Some(&old)).unwrap();
        let json = serde_json::to_vec(&file).unwrap();
        let v = verify(&json, &key.verifier(), &[]).unwrap();
        assert_eq!(v.checkpoint.size, 11);
        assert_eq!(v.old_checkpoint.unwrap().size, 6);
        assert_eq!(v.leaves[1], (5, b"event 5".to_vec()));

        // A leaf's data changed (the approver's name, say).
        let mut t = file.clone();
        t.leaves[1].data = base64::encode(b"event 5 by mallory");
        assert!(matches!(
            verify(&serde_json::to_vec(&t).unwrap(), &key.verifier(), &[]),
            Err(ProofFileError::Inclusion { index: 5, .. })
        ));
        // A leaf moved to another index.
        let mut t = file.clone();
        t.leaves[1].index = 4;
        assert!(matches!(
            verify(&serde_json::to_vec(&t).unwrap(), &key.verifier(), &[]),
            Err(ProofFileError::Inclusion { index: 4, .. })
        ));
        // The checkpoint signed by another key.
        let other = SignerKey::generate("example.com/log").unwrap();
        assert!(matches!(
            verify(&json, &other.verifier(), &[]),
            Err(ProofFileError::Checkpoint(_))
        ));
        // A rewritten history: the old checkpoint of another log of the same key.
        let mut rewritten = all.clone();
        rewritten[2] = b"event 2, rewritten".to_vec();
        let mut t = file.clone();
        t.consistency.as_mut().unwrap().old_checkpoint = signed(&key, &rewritten[..6]).to_text();
        assert!(matches!(
            verify(&serde_json::to_vec(&t).unwrap(), &key.verifier(), &[]),
            Err(ProofFileError::Consistency {
                old_size: 6,
                new_size: 11,
                ..
            })
        ));
        // A field the format does not have, and another format.
        let mut value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        value["extra"] = serde_json::json!(1);
        assert!(matches!(
            verify(&serde_json::to_vec(&value).unwrap(), &key.verifier(), &[]),
            Err(ProofFileError::Json(_))
        ));
        let mut t = file.clone();
        t.format = "rpr-proof/v9".into();
        assert!(matches!(
            verify(&serde_json::to_vec(&t).unwrap(), &key.verifier(), &[]),
            Err(ProofFileError::Format(_))
        ));
        // Building against a checkpoint of other leaves is refused.
        assert!(matches!(
            build(&refs[..10], &new, &[0], None),
            Err(ProofFileError::CheckpointMismatch { .. })
        ));
        assert!(matches!(
            build(&refs, &new, &[11], None),
            Err(ProofFileError::Build(ProofError::IndexOutOfRange { .. }))
        ));
    }
}
