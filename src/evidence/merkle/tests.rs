//! The RFC 6962 test tree (the 8 leaves Certificate Transparency and transparency-dev's
//! `merkle` tests use, with their roots and proofs), round trips on every size up to 70, and
//! the rejection of every corrupted proof.

use super::*;
use proptest::prelude::*;

fn h(s: &str) -> Hash {
    assert_eq!(s.len(), 64);
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// The leaves of the RFC 6962 test tree.
const LEAVES: [&[u8]; 8] = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    b"\x50\x51\x52\x53\x54\x55\x56\x57",
    b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
];

/// The roots of the trees of its first 1..=8 leaves.
const ROOTS: [&str; 8] = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];

/// (leaf index, tree size, proof).
fn inclusion_vectors() -> Vec<(u64, u64, Vec<Hash>)> {
    vec![
        (0, 1, vec![]),
        (
            0,
            8,
            vec![
                h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
                h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
            ],
        ),
        (
            5,
            8,
            vec![
                h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
                h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
            ],
        ),
        (
            2,
            3,
            vec![h(
                "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            )],
        ),
        (
            1,
            5,
            vec![
                h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
                h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            ],
        ),
    ]
}

/// (old size, new size, proof).
fn consistency_vectors() -> Vec<(u64, u64, Vec<Hash>)> {
    vec![
        (1, 1, vec![]),
        (
            1,
            8,
            vec![
                h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
                h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
            ],
        ),
        (
            6,
            8,
            vec![
                h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
                h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
                h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
            ],
        ),
        (
            2,
            5,
            vec![
                h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
                h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            ],
        ),
        (
            6,
            7,
            vec![
                h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
                h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
                h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
            ],
        ),
    ]
}

fn test_leaves() -> Vec<Hash> {
    LEAVES.iter().map(|d| leaf_hash(d)).collect()
}

fn root_of(size: u64) -> Hash {
    h(ROOTS[usize::try_from(size).unwrap() - 1])
}

#[test]
fn empty_tree_hash_is_sha256_of_nothing() {
    assert_eq!(EMPTY_ROOT, <[u8; 32]>::from(Sha256::digest(b"")));
    assert_eq!(root(&[]), EMPTY_ROOT);
    assert_eq!(Frontier::new().root(), EMPTY_ROOT);
}

#[test]
fn rfc6962_roots_of_every_prefix() {
    let leaves = test_leaves();
    let mut frontier = Frontier::new();
    for n in 1..=8 {
        assert_eq!(hex(&root(&leaves[..n])), ROOTS[n - 1], "MTH of {n} leaves");
        frontier.append(leaves[n - 1]);
        assert_eq!(frontier.root(), root(&leaves[..n]), "frontier at {n}");
        assert_eq!(frontier.hashes().len(), (n as u64).count_ones() as usize);
    }
}

#[test]
fn rfc6962_inclusion_vectors_generate_and_verify() {
    let leaves = test_leaves();
    for (index, size, proof) in inclusion_vectors() {
        let n = usize::try_from(size).unwrap();
        let made = inclusion_proof(&leaves[..n], index).unwrap();
        assert_eq!(made, proof, "proof of {index} in {size}");
        let leaf = leaves[usize::try_from(index).unwrap()];
        verify_inclusion(&leaf, index, size, &proof, &root_of(size)).unwrap();
    }
}

#[test]
fn rfc6962_consistency_vectors_generate_and_verify() {
    let leaves = test_leaves();
    for (old, new, proof) in consistency_vectors() {
        let n = usize::try_from(new).unwrap();
        let made = consistency_proof(&leaves[..n], old).unwrap();
        assert_eq!(made, proof, "proof from {old} to {new}");
        verify_consistency(old, new, &root_of(old), &root_of(new), &proof).unwrap();
    }
}

/// Every corruption transparency-dev's verifier tests try, each refused.
#[test]
fn every_corrupted_inclusion_proof_is_refused() {
    let leaves = test_leaves();
    let some = h("abacaba000000000000000000000000000000000000000000060061e00123456");
    for (index, size, proof) in inclusion_vectors() {
        let root = root_of(size);
        let leaf = leaves[usize::try_from(index).unwrap()];
        let mut probes: Vec<(String, u64, u64, Hash, Vec<Hash>, Hash)> = vec![
            (
                "index + 1".into(),
                index + 1,
                size,
                leaf,
                proof.clone(),
                root,
            ),
            (
                "index ^ 2".into(),
                index ^ 2,
                size,
                leaf,
                proof.clone(),
                root,
            ),
            (
                "size * 2".into(),
                index,
                size * 2,
                leaf,
                proof.clone(),
                root,
            ),
            (
                "size / 2".into(),
                index,
                size / 2,
                leaf,
                proof.clone(),
                root,
            ),
            (
                "wrong leaf".into(),
                index,
                size,
                leaf_hash(b"WrongLeaf"),
                proof.clone(),
                root,
            ),
            (
                "empty root".into(),
                index,
                size,
                leaf,
                proof.clone(),
                EMPTY_ROOT,
            ),
            ("random root".into(), index, size, leaf, proof.clone(), some),
        ];
        if index > 0 {
            probes.push((
                "index - 1".into(),
                index - 1,
                size,
                leaf,
                proof.clone(),
                root,
            ));
        }
        let mut trailing = proof.clone();
        trailing.push(root);
        probes.push(("trailing root".into(), index, size, leaf, trailing, root));
        let mut preceding = vec![root];
        preceding.extend_from_slice(&proof);
        probes.push(("preceding root".into(), index, size, leaf, preceding, root));
        for i in 0..proof.len() {
            for byte in [0, 17, 31] {
                let mut p = proof.clone();
                p[i][byte] ^= 8;
                probes.push((
                    format!("proof[{i}] byte {byte}"),
                    index,
                    size,
                    leaf,
                    p,
                    root,
                ));
            }
        }
        if !proof.is_empty() {
            let p = proof[..proof.len() - 1].to_vec();
            probes.push(("removed hash".into(), index, size, leaf, p, root));
        }
        if proof.len() > 1 {
            let mut p = vec![proof[0], some];
            p.extend_from_slice(&proof[1..]);
            probes.push(("inserted hash".into(), index, size, leaf, p, root));
        }
        for (desc, i, s, l, p, r) in probes {
            assert!(
                verify_inclusion(&l, i, s, &p, &r).is_err(),
                "{desc}: the proof of {index} in {size} verified"
            );
        }
    }
}

#[test]
fn every_corrupted_consistency_proof_is_refused() {
    for (old, new, proof) in consistency_vectors() {
        if proof.is_empty() {
            continue;
        }
        let (r1, r2) = (root_of(old), root_of(new));
        let mut probes: Vec<(String, u64, u64, Hash, Hash, Vec<Hash>)> = vec![
            ("old - 1".into(), old - 1, new, r1, r2, proof.clone()),
            ("old + 1".into(), old + 1, new, r1, r2, proof.clone()),
            ("old ^ 2".into(), old ^ 2, new, r1, r2, proof.clone()),
            ("new * 2".into(), old, new * 2, r1, r2, proof.clone()),
            ("new / 2".into(), old, new / 2, r1, r2, proof.clone()),
            (
                "wrong old root".into(),
                old,
                new,
                EMPTY_ROOT,
                r2,
                proof.clone(),
            ),
            (
                "wrong new root".into(),
                old,
                new,
                r1,
                EMPTY_ROOT,
                proof.clone(),
            ),
            ("swapped roots".into(), old, new, r2, r1, proof.clone()),
            ("empty proof".into(), old, new, r1, r2, vec![]),
        ];
        for extra in [r1, r2, proof[0]] {
            let mut t = proof.clone();
            t.push(extra);
            probes.push(("trailing hash".into(), old, new, r1, r2, t));
            let mut p = vec![extra];
            p.extend_from_slice(&proof);
            probes.push(("preceding hash".into(), old, new, r1, r2, p));
        }
        probes.push((
            "truncated".into(),
            old,
            new,
            r1,
            r2,
            proof[..proof.len() - 1].to_vec(),
        ));
        for i in 0..proof.len() {
            for byte in [0, 17, 31] {
                let mut p = proof.clone();
                p[i][byte] ^= 16;
                probes.push((format!("proof[{i}] byte {byte}"), old, new, r1, r2, p));
            }
        }
        for (desc, o, n, a, b, p) in probes {
            assert!(
                verify_consistency(o, n, &a, &b, &p).is_err(),
                "{desc}: the proof from {old} to {new} verified"
            );
        }
    }
}

#[test]
fn trivial_consistency_cases() {
    let r = root_of(3);
    verify_consistency(0, 0, &EMPTY_ROOT, &EMPTY_ROOT, &[]).unwrap();
    verify_consistency(0, 3, &EMPTY_ROOT, &r, &[]).unwrap();
    verify_consistency(3, 3, &r, &r, &[]).unwrap();
    // An empty old tree has the empty root; anything else is refused.
    assert!(matches!(
        verify_consistency(0, 3, &r, &r, &[]),
        Err(ProofError::OldRootMismatch { .. })
    ));
    assert!(matches!(
        verify_consistency(3, 3, &r, &root_of(4), &[]),
        Err(ProofError::SameSizeDifferentRoots { size: 3, .. })
    ));
    assert!(matches!(
        verify_consistency(3, 3, &r, &r, &[r]),
        Err(ProofError::WrongLength { got: 1, want: 0 })
    ));
    assert!(matches!(
        verify_consistency(4, 3, &r, &r, &[]),
        Err(ProofError::SizesOutOfOrder { old: 4, new: 3 })
    ));
    assert!(matches!(
        consistency_proof(&test_leaves()[..3], 4),
        Err(ProofError::SizesOutOfOrder { old: 4, new: 3 })
    ));
    assert!(matches!(
        inclusion_proof(&test_leaves()[..3], 3),
        Err(ProofError::IndexOutOfRange { index: 3, size: 3 })
    ));
    assert!(verify_inclusion(&r, 0, 0, &[], &EMPTY_ROOT).is_err());
}

/// Huge sizes and proofs of every length never panic (no overflow, no out-of-bounds).
#[test]
fn extreme_sizes_are_refused_without_panic() {
    let x = [7u8; 32];
    for len in [0, 1, 63, 64, 65, 200] {
        let p = vec![x; len];
        let _ = verify_inclusion(&x, u64::MAX - 1, u64::MAX, &p, &x);
        let _ = verify_inclusion(&x, 0, u64::MAX, &p, &x);
        let _ = verify_consistency(1, u64::MAX, &x, &x, &p);
        let _ = verify_consistency(u64::MAX - 1, u64::MAX, &x, &x, &p);
        let _ = verify_consistency(1 << 63, u64::MAX, &x, &x, &p);
    }
}

#[test]
fn frontier_from_parts_checks_the_count() {
    let f = Frontier::from_leaves(&test_leaves()[..7]);
    let g = Frontier::from_parts(7, f.hashes().to_vec()).unwrap();
    assert_eq!(g.root(), root_of(7));
    assert_eq!(
        Frontier::from_parts(8, f.hashes().to_vec()),
        Err(FrontierError {
            size: 8,
            want: 1,
            got: 3
        })
    );
}

fn numbered(n: usize) -> Vec<Hash> {
    (0..n)
        .map(|i| leaf_hash(format!("leaf {i}").as_bytes()))
        .collect()
}

/// Every proof for every index and pair of sizes up to 70 verifies, and is refused for a
/// neighbouring index or size.
#[test]
fn round_trip_every_size_up_to_70() {
    let all = numbered(70);
    let roots: Vec<Hash> = (0..=70).map(|n| root(&all[..n])).collect();
    let mut frontier = Frontier::new();
    for n in 1..=70usize {
        frontier.append(all[n - 1]);
        assert_eq!(frontier.root(), roots[n]);
        let size = n as u64;
        for i in 0..size {
            let p = inclusion_proof(&all[..n], i).unwrap();
            let leaf = all[usize::try_from(i).unwrap()];
            verify_inclusion(&leaf, i, size, &p, &roots[n]).unwrap();
            if i + 1 < size {
                assert!(verify_inclusion(&leaf, i + 1, size, &p, &roots[n]).is_err());
            }
            assert!(verify_inclusion(&leaf, i, size, &p, &roots[n - 1]).is_err());
        }
        for m in 0..=n {
            let p = consistency_proof(&all[..n], m as u64).unwrap();
            verify_consistency(m as u64, size, &roots[m], &roots[n], &p).unwrap();
            if m > 0 && m < n {
                assert!(verify_consistency(m as u64, size, &roots[m - 1], &roots[n], &p).is_err());
                assert!(verify_consistency(m as u64, size, &roots[m], &roots[n - 1], &p).is_err());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For random sizes and indices up to 2000: the proofs verify, the frontier agrees with
    /// MTH, and a flipped bit anywhere in the proof is refused.
    #[test]
    fn random_trees(n in 1usize..2000, i in any::<prop::sample::Index>(),
                    m in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(),
                    bit in 0u8..8) {
        let leaves = numbered(n);
        let r = root(&leaves);
        prop_assert_eq!(Frontier::from_leaves(&leaves).root(), r);
        let idx = i.index(n);
        let p = inclusion_proof(&leaves, idx as u64).unwrap();
        prop_assert!(verify_inclusion(&leaves[idx], idx as u64, n as u64, &p, &r).is_ok());
        if !p.is_empty() {
            let mut bad = p.clone();
            let k = flip.index(p.len() * 32);
            bad[k / 32][k % 32] ^= 1 << bit;
            prop_assert!(verify_inclusion(&leaves[idx], idx as u64, n as u64, &bad, &r).is_err());
        }
        let old = m.index(n + 1);
        let c = consistency_proof(&leaves, old as u64).unwrap();
        let old_root = root(&leaves[..old]);
        prop_assert!(verify_consistency(old as u64, n as u64, &old_root, &r, &c).is_ok());
        if !c.is_empty() {
            let mut bad = c.clone();
            let k = flip.index(c.len() * 32);
            bad[k / 32][k % 32] ^= 1 << bit;
            prop_assert!(verify_consistency(old as u64, n as u64, &old_root, &r, &bad).is_err());
        }
    }
}
