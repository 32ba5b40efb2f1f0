//! RFC 6962 / RFC 9162 Merkle trees: leaf and node hashes, the tree hash of any number of
//! leaves, inclusion and consistency proofs, and an appender ([`Frontier`]) that keeps the
//! root of a growing log in O(log n) memory.
//!
//! The hashing is the one Certificate Transparency, the Go checksum database
//! (`golang.org/x/mod/sumdb/tlog`) and the C2SP transparency logs use, so a root or a proof
//! made here is checked by their tools unchanged:
//!
//! * a leaf's hash is `SHA-256(0x00 || data)` ([`leaf_hash`]);
//! * an inner node's hash is `SHA-256(0x01 || left || right)` ([`node_hash`]);
//! * the tree hash of `n` leaves ([`root`], RFC 9162 §2.1.1 `MTH`) splits them at `k`, the
//!   largest power of two below `n`, and hashes the two parts' tree hashes; the tree of no
//!   leaves has `SHA-256("")` ([`EMPTY_ROOT`]).
//!
//! Proofs are generated from the list of leaf hashes ([`inclusion_proof`],
//! [`consistency_proof`]; O(n) time) and verified from sizes, hashes and the proof alone
//! ([`verify_inclusion`], [`verify_consistency`]; O(log n), RFC 9162 §2.1.3.2 and §2.1.4.2).
//! A verification never panics and fails with a [`ProofError`] that says what did not hold.

use sha2::{Digest, Sha256};

/// A SHA-256 hash: a leaf's, a node's or a tree's.
pub type Hash = [u8; 32];

/// The tree hash of the empty tree: `SHA-256("")` (RFC 9162 §2.1.1).
pub const EMPTY_ROOT: Hash = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// The most hashes a proof can have: one per level of a tree of 2^64 leaves. A longer proof
/// is refused before any hashing.
pub const MAX_PROOF_HASHES: usize = 64;

/// Why a proof was refused, or could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The leaf index is not below the tree size.
    #[error("leaf index {index} is not in a tree of {size} leaves")]
    IndexOutOfRange {
        /// The index asked for.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// A consistency proof from a larger tree to a smaller one.
    #[error("a tree of {old} leaves cannot be a prefix of a tree of {new} leaves")]
    SizesOutOfOrder {
        /// The older (claimed smaller) size.
        old: u64,
        /// The newer size.
        new: u64,
    },
    /// The proof has more or fewer hashes than the sizes call for.
    #[error("the proof has {got} hashes; a proof for these sizes has {want}")]
    WrongLength {
        /// How many hashes the proof has.
        got: usize,
        /// How many the sizes call for.
        want: usize,
    },
    /// The proof leads to another root than the one given (for a consistency proof: the
    /// newer tree's root).
    #[error("the proof leads to root {computed}, not to the given root {expected}")]
    RootMismatch {
        /// The root the proof leads to (hex).
        computed: String,
        /// The root given (hex).
        expected: String,
    },
    /// A consistency proof that does not lead to the older tree's root.
    #[error("the proof leads to old root {computed}, not to the given old root {expected}")]
    OldRootMismatch {
        /// The old root the proof leads to (hex).
        computed: String,
        /// The old root given (hex).
        expected: String,
    },
    /// Two trees of the same size with different roots: not the same log.
    #[error("two trees of {size} leaves with different roots ({old} and {new})")]
    SameSizeDifferentRoots {
        /// The size of both.
        size: u64,
        /// One root (hex).
        old: String,
        /// The other (hex).
        new: String,
    },
}

/// The hash of a leaf: `SHA-256(0x00 || data)`.
#[must_use]
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(data);
    h.finalize().into()
}

/// The hash of an inner node: `SHA-256(0x01 || left || right)`.
#[must_use]
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Lower-case hex of a hash, for messages.
#[must_use]
pub fn hex(hash: &Hash) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(64);
    for b in hash {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The largest power of two strictly below `n` (`n >= 2`).
fn split(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// The tree hash (RFC 9162 `MTH`) of the leaves whose hashes are `leaves`, for any number of
/// them; [`EMPTY_ROOT`] for none. O(n) time, O(log n) stack.
#[must_use]
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => EMPTY_ROOT,
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

fn to_index(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The inclusion proof (RFC 9162 §2.1.3.1 `PATH`) of leaf `index` in the tree of the leaves
/// whose hashes are `leaves`: the sibling hashes from the leaf up to the root.
pub fn inclusion_proof(leaves: &[Hash], index: u64) -> Result<Vec<Hash>, ProofError> {
    let size = leaves.len() as u64;
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let mut proof = Vec::new();
    path(to_index(index), leaves, &mut proof);
    Ok(proof)
}

fn path(m: usize, leaves: &[Hash], out: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if m < k {
        path(m, &leaves[..k], out);
        out.push(root(&leaves[k..]));
    } else {
        path(m - k, &leaves[k..], out);
        out.push(root(&leaves[..k]));
    }
}

/// The consistency proof (RFC 9162 §2.1.4.1 `PROOF`) that the tree of the first `old_size`
/// leaves is a prefix of the tree of all of `leaves`. Empty when `old_size` is 0 or the whole
/// list.
pub fn consistency_proof(leaves: &[Hash], old_size: u64) -> Result<Vec<Hash>, ProofError> {
    let new = leaves.len() as u64;
    if old_size > new {
        return Err(ProofError::SizesOutOfOrder { old: old_size, new });
    }
    let mut proof = Vec::new();
    if old_size > 0 && old_size < new {
        subproof(to_index(old_size), leaves, true, &mut proof);
    }
    Ok(proof)
}

fn subproof(m: usize, leaves: &[Hash], whole: bool, out: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !whole {
            out.push(root(leaves));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &leaves[..k], whole, out);
        out.push(root(&leaves[k..]));
    } else {
        subproof(m - k, &leaves[k..], false, out);
        out.push(root(&leaves[..k]));
    }
}

/// The root the inclusion proof of `leaf` at `index` in a tree of `size` leaves leads to
/// (RFC 9162 §2.1.3.2). Checks the index and the proof's length, not the root.
pub fn root_from_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
) -> Result<Hash, ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let want = inclusion_len(index, size);
    if proof.len() != want {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want,
        });
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    // The length check above makes `s` reach 0 exactly here; checked all the same.
    if s != 0 {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want,
        });
    }
    Ok(r)
}

/// How many hashes the inclusion proof of `index` in a tree of `size` has (`index < size`).
fn inclusion_len(index: u64, size: u64) -> usize {
    // The levels below the point where the paths to `index` and to the last leaf part,
    // plus one per level above it where the right edge has a left sibling.
    let inner = 64 - (index ^ (size - 1)).leading_zeros();
    let border = index.checked_shr(inner).unwrap_or(0).count_ones();
    (inner + border) as usize
}

/// Checks that `leaf` (a leaf hash) is leaf `index` of the tree of `size` leaves whose root
/// is `root`, by its inclusion proof.
///
/// The proof binds the size through the root: the same path can be valid for a neighbouring
/// size (leaf 1 of 5 and of 6 take the same hashes), so the size and the root must come
/// together from one signed checkpoint.
pub fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    let computed = root_from_inclusion(leaf, index, size, proof)?;
    if computed == *root {
        Ok(())
    } else {
        Err(ProofError::RootMismatch {
            computed: hex(&computed),
            expected: hex(root),
        })
    }
}

/// Checks that the tree of `old_size` leaves with root `old_root` is a prefix of the tree of
/// `new_size` leaves with root `new_root`, by a consistency proof (RFC 9162 §2.1.4.2).
///
/// Equal sizes need an empty proof and equal roots; an empty old tree needs an empty proof
/// and the empty tree's root ([`EMPTY_ROOT`]).
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if old_size > new_size {
        return Err(ProofError::SizesOutOfOrder {
            old: old_size,
            new: new_size,
        });
    }
    if proof.len() > MAX_PROOF_HASHES {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want: MAX_PROOF_HASHES,
        });
    }
    if old_size == 0 || old_size == new_size {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength {
                got: proof.len(),
                want: 0,
            });
        }
        if old_size == 0 {
            if *old_root != EMPTY_ROOT {
                return Err(ProofError::OldRootMismatch {
                    computed: hex(&EMPTY_ROOT),
                    expected: hex(old_root),
                });
            }
            return Ok(());
        }
        if old_root != new_root {
            return Err(ProofError::SameSizeDifferentRoots {
                size: old_size,
                old: hex(old_root),
                new: hex(new_root),
            });
        }
        return Ok(());
    }
    // 0 < old_size < new_size from here.
    let want = consistency_len(old_size, new_size);
    if proof.len() != want {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want,
        });
    }
    // Step 2: when the old tree is a perfect subtree, its root starts the path.
    let mut path = Vec::with_capacity(proof.len() + 1);
    if old_size.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let (mut f, mut s) = (old_size - 1, new_size - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let mut fr = path[0];
    let mut sr = path[0];
    for c in &path[1..] {
        if s == 0 {
            // Unreachable after the length check; kept so that no input can mislead.
            return Err(ProofError::WrongLength {
                got: proof.len(),
                want,
            });
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    if fr != *old_root {
        return Err(ProofError::OldRootMismatch {
            computed: hex(&fr),
            expected: hex(old_root),
        });
    }
    if sr != *new_root {
        return Err(ProofError::RootMismatch {
            computed: hex(&sr),
            expected: hex(new_root),
        });
    }
    Ok(())
}

/// How many hashes the consistency proof from `old` to `new` leaves has (`0 < old < new`).
fn consistency_len(old: u64, new: u64) -> usize {
    // The inclusion proof of leaf `old - 1` in the new tree, less the levels the old tree's
    // perfect right part shares with it, plus the hash of that part unless the old tree is
    // that part whole.
    let shift = old.trailing_zeros();
    let (f, s) = ((old - 1) >> shift, (new - 1) >> shift);
    let inner = 64 - (f ^ s).leading_zeros();
    let border = f.checked_shr(inner).unwrap_or(0).count_ones();
    (inner + border) as usize + usize::from(!old.is_power_of_two())
}

/// The right edge of a growing tree: the roots of its perfect subtrees, one per set bit of
/// its size, so that an appender keeps the root of `n` leaves in O(log n) memory and adds a
/// leaf in O(log n) hashes (amortized O(1)). A compact range over `[0, n)` in the sense of
/// transparency-dev's `compact` package.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    /// The perfect subtrees' roots, largest (leftmost) first.
    hashes: Vec<Hash>,
}

/// Why a [`Frontier`] could not be restored from stored parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a frontier of {size} leaves has {want} hashes, not {got}")]
pub struct FrontierError {
    /// The size given.
    pub size: u64,
    /// How many hashes it needs (one per set bit of the size).
    pub want: usize,
    /// How many were given.
    pub got: usize,
}

impl Frontier {
    /// The frontier of the empty tree.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A frontier restored from its size and its hashes (as [`Frontier::hashes`] gave them).
    pub fn from_parts(size: u64, hashes: Vec<Hash>) -> Result<Self, FrontierError> {
        let want = size.count_ones() as usize;
        if hashes.len() == want {
            Ok(Self { size, hashes })
        } else {
            Err(FrontierError {
                size,
                want,
                got: hashes.len(),
            })
        }
    }

    /// The frontier of the tree of these leaf hashes.
    #[must_use]
    pub fn from_leaves(leaves: &[Hash]) -> Self {
        let mut f = Self::new();
        for leaf in leaves {
            f.append(*leaf);
        }
        f
    }

    /// How many leaves the tree has.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The perfect subtrees' roots, largest (leftmost) first: one per set bit of the size.
    #[must_use]
    pub fn hashes(&self) -> &[Hash] {
        &self.hashes
    }

    /// Adds a leaf (its hash, [`leaf_hash`] of its data) at index [`Frontier::size`].
    pub fn append(&mut self, leaf: Hash) {
        let mut h = leaf;
        let mut s = self.size;
        while s & 1 == 1 {
            let left = self.hashes.pop().expect("one hash per set bit of the size");
            h = node_hash(&left, &h);
            s >>= 1;
        }
        self.hashes.push(h);
        self.size += 1;
    }

    /// The tree hash of the leaves so far ([`EMPTY_ROOT`] for none).
    #[must_use]
    pub fn root(&self) -> Hash {
        let mut it = self.hashes.iter().rev();
        let Some(last) = it.next() else {
            return EMPTY_ROOT;
        };
        it.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

#[cfg(test)]
mod tests;
