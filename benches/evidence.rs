//! What signed evidence costs (issue 28, `docs/evidence.md`, "Measured"): signing and
//! verifying one checkpoint, a witness's cosignature, appending a leaf to the Merkle log's
//! frontier, checking an inclusion proof, beside one bare durable SQLite commit
//! (`journal_mode=WAL`, `synchronous=FULL`, one small row) timed in the same run, so that the
//! signature's share of a commit is read off one machine at one moment.
//!
//! ```sh
//! cargo bench --bench evidence
//! ```
//!
//! Environment: `RPR_BENCH_SIGNS` (default 2,000) signatures and verifications timed one by
//! one (median and p99), `RPR_BENCH_LEAVES` (default 1,000,000) leaves appended,
//! `RPR_BENCH_COMMITS` (default 300) bare commits in a temporary directory.

use std::time::{Duration, Instant};

use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::merkle::{self, Frontier, Hash};
use rpr::evidence::note::SignerKey;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Median and p99 of `n` timings of `f`, in µs.
fn time(n: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut t: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(t[n / 2]), us(t[(n * 99 / 100).min(n - 1)]))
}

fn main() {
    let signs = env("RPR_BENCH_SIGNS", 2000).max(1);
    let leaves = env("RPR_BENCH_LEAVES", 1_000_000).max(1);
    let commits = env("RPR_BENCH_COMMITS", 300).max(1);

    let log = SignerKey::generate("bench.example/log").unwrap();
    let witness = SignerKey::generate("bench.example/witness").unwrap();
    let mut cp = Checkpoint {
        origin: "bench.example/log".into(),
        size: 1_234_567,
        root: merkle::leaf_hash(b"root"),
        extensions: vec![],
    };
    // Warm up.
    for _ in 0..100 {
        std::hint::black_box(cp.sign(&log).unwrap().to_text());
    }
    let (sign_p50, sign_p99) = time(signs, || {
        cp.size += 1;
        std::hint::black_box(cp.sign(&log).unwrap().to_text());
    });
    let signed = cp.sign(&log).unwrap();
    let text = signed.to_text();
    let (open_p50, open_p99) = time(signs, || {
        std::hint::black_box(Checkpoint::open(text.as_bytes(), &log.verifier(), &[]).unwrap());
    });
    let mut cosigned = signed.clone();
    cosigned.sign(&witness).unwrap();
    let both = cosigned.to_text();
    let (cosign_p50, _) = time(signs, || {
        let mut n = signed.clone();
        n.sign(&witness).unwrap();
        std::hint::black_box(n.to_text());
    });
    let (cosigned_open_p50, _) = time(signs, || {
        std::hint::black_box(
            Checkpoint::open(both.as_bytes(), &log.verifier(), &[witness.verifier()]).unwrap(),
        );
    });

    // Merkle: hash a 200-byte leaf and append it, then append precomputed hashes.
    let per_leaf = f64::from(u32::try_from(leaves).expect("at most 2^32 leaves"));
    let event = [b'x'; 200];
    let mut f = Frontier::new();
    let start = Instant::now();
    for i in 0..leaves {
        let mut e = event;
        e[..8].copy_from_slice(&(i as u64).to_le_bytes());
        f.append(merkle::leaf_hash(&e));
    }
    let with_hash_ns = start.elapsed().as_secs_f64() * 1e9 / per_leaf;
    let hashes: Vec<Hash> = (0..leaves as u64)
        .map(|i| merkle::leaf_hash(&i.to_le_bytes()))
        .collect();
    let mut g = Frontier::new();
    let start = Instant::now();
    for h in &hashes {
        g.append(*h);
    }
    let append_ns = start.elapsed().as_secs_f64() * 1e9 / per_leaf;
    let (root_p50, _) = time(1000, || {
        std::hint::black_box(g.root());
    });
    let n = hashes.len() as u64;
    let index = n / 3;
    let proof = merkle::inclusion_proof(&hashes, index).unwrap();
    let root = g.root();
    let (incl_p50, _) = time(1000, || {
        merkle::verify_inclusion(
            &hashes[usize::try_from(index).unwrap()],
            index,
            n,
            &proof,
            &root,
        )
        .unwrap();
    });

    // One bare durable commit, for scale.
    let dir = tempfile::tempdir().unwrap();
    let db = rusqlite::Connection::open(dir.path().join("bench.db")).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB);",
    )
    .unwrap();
    let mut i = 0i64;
    let (commit_p50, commit_p99) = time(commits, || {
        i += 1;
        db.execute(
            "INSERT INTO t (id, v) VALUES (?1, ?2)",
            rusqlite::params![i, &event[..]],
        )
        .unwrap();
    });

    println!("| what | median µs | p99 µs |");
    println!("|---|---:|---:|");
    println!("| sign one checkpoint (Ed25519, note text) | {sign_p50:.1} | {sign_p99:.1} |");
    println!(
        "| verify one checkpoint (parse, verify, read body) | {open_p50:.1} | {open_p99:.1} |"
    );
    println!("| a witness's cosignature on it | {cosign_p50:.1} | |");
    println!("| verify a cosigned checkpoint (log + witness) | {cosigned_open_p50:.1} | |");
    println!(
        "| Frontier::root at {leaves} leaves ({} hashes) | {root_p50:.2} | |",
        g.hashes().len()
    );
    println!(
        "| verify an inclusion proof at {leaves} leaves ({} hashes) | {incl_p50:.2} | |",
        proof.len()
    );
    println!(
        "| bare durable SQLite commit (WAL, synchronous=FULL) | {commit_p50:.1} | {commit_p99:.1} |"
    );
    println!();
    println!(
        "Merkle append, per leaf over {leaves} leaves: {with_hash_ns:.0} ns with the leaf hash of a 200-byte event, {append_ns:.0} ns for the append alone"
    );
    println!(
        "Signing one checkpoint is {:.1} % of a bare durable commit (medians).",
        100.0 * sign_p50 / commit_p50
    );
    assert_eq!(f.size(), leaves as u64);
}
