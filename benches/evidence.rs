//! What signed evidence costs (issue 28, `docs/evidence.md`, "Measured"): signing and
//! verifying one checkpoint, a witness's cosignature, appending a leaf to the Merkle log's
//! frontier, checking an inclusion proof, beside one bare durable SQLite commit
//! (`journal_mode=WAL`, `synchronous=FULL`, one small row) timed in the same run, so that the
//! signature's share of a commit is read off one machine at one moment.
//!
//! Then the signed log in the store (`RuntimeBuilder::signing`): steps through a `Runtime`
//! (each `propose` of a new pathway is one durable commit) without a key, with one, with
//! one and a witness's state, and without a key again on a fourth database (the noise), in
//! alternating rounds on four databases, at 1 in flight
//! (median µs per step) and 16 in flight (steps per second, commits per step); and
//! `verify_log` of the whole log beside `sha256sum` of the database file.
//!
//! ```sh
//! cargo bench --bench evidence [-- --dir DIR]
//! ```
//!
//! Environment: `RPR_BENCH_SIGNS` (default 2,000) signatures and verifications timed one by
//! one (median and p99), `RPR_BENCH_LEAVES` (default 1,000,000) leaves appended,
//! `RPR_BENCH_COMMITS` (default 300) bare commits, `RPR_BENCH_ROUNDS` (default 6) rounds of
//! `RPR_BENCH_STEPS` (default 100) steps per database at each width, `RPR_BENCH_EVENTS`
//! (default 40,000) events in the database `verify_log` reads. `--dir` (default a temporary
//! directory) should be on a real disk: tmpfs ignores fsync.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::merkle::{self, Frontier, Hash};
use rpr::evidence::note::SignerKey;
use rpr::store::log::Signing;
use rpr::{ActionClass, Actor, Authority, Definition, Runtime};

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

/// A new mutating definition with idempotency key `key`.
fn definition(key: &str) -> Definition {
    Definition::new(
        rpr::executor::Request::new("put", serde_json::json!({"key": key, "value": "v"})),
        ActionClass::Mutating,
        key,
        Authority::single(&Actor::new("bench")),
    )
}

/// The three ways of committing that are compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unsigned,
    Signed,
    Witnessed,
    /// Another database without a key: what the two unsigned ones differ by is this
    /// machine's noise, in the same run.
    Control,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Unsigned, Mode::Signed, Mode::Witnessed, Mode::Control];

    fn name(self) -> &'static str {
        match self {
            Mode::Unsigned => "no key",
            Mode::Control => "no key, another database (the noise)",
            Mode::Signed => "signing key",
            Mode::Witnessed => "signing key and a witness's state",
        }
    }
}

/// A database for `mode` in `dir`, opened; the witness's state is the database's first
/// checkpoint (signed and cosigned before the clock runs).
fn open(dir: &Path, mode: Mode, key: &SignerKey, witness: &SignerKey) -> Runtime {
    let db = dir.join(format!("steps-{}.db", mode as u8));
    let signing = Signing::new(key.clone());
    match mode {
        Mode::Unsigned | Mode::Control => Runtime::open(&db).unwrap(),
        Mode::Signed => Runtime::builder(&db).signing(signing).open().unwrap(),
        Mode::Witnessed => {
            {
                let rt = Runtime::builder(&db)
                    .signing(signing.clone())
                    .open()
                    .unwrap();
                rt.sign_log().unwrap();
            }
            let cosigned = {
                // Closed before the runtime opens: a read-only connection opened first in a
                // process maps the shared-memory file read-only for every later connection.
                let store = rpr::store::ReadStore::open_read_only(&db).unwrap();
                rpr::store::log::witness(&store, &key.verifier(), witness, None).unwrap()
            };
            Runtime::builder(&db)
                .signing(signing.witnessed(cosigned.checkpoint))
                .open()
                .unwrap()
        }
    }
}

/// `n` proposals on `threads` threads; the time of each, and the wall time of all.
fn steps(rt: &Runtime, tag: &str, n: usize, threads: usize) -> (Vec<Duration>, Duration) {
    let me = Actor::new("bench");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let start = Instant::now();
    let times = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut times = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            return times;
                        }
                        let t = Instant::now();
                        let p = rt
                            .propose(&me, definition(&format!("{tag}-{i}")))
                            .expect("propose");
                        times.push(t.elapsed());
                        let _ = std::hint::black_box(p);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    (times, start.elapsed())
}

fn median_us(mut t: Vec<Duration>) -> f64 {
    t.sort();
    t[t.len() / 2].as_secs_f64() * 1e6
}

/// Steps without and with signing (and a witness), alternating rounds: the table rows.
#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn store_steps(dir: &Path) {
    let rounds = env("RPR_BENCH_ROUNDS", 6).max(1);
    let per_round = env("RPR_BENCH_STEPS", 100).max(1);
    let key = SignerKey::from_seed("bench-log", &[1; 32]).unwrap();
    let witness = SignerKey::from_seed("bench-witness", &[2; 32]).unwrap();
    let runtimes: Vec<Runtime> = Mode::ALL
        .iter()
        .map(|&m| open(dir, m, &key, &witness))
        .collect();
    println!();
    println!(
        "Steps through a Runtime (each a `propose`, one durable commit on SQLite, WAL, synchronous=FULL), {rounds} rounds of {per_round} steps per database, the databases in turn (each round starts with the next):"
    );
    println!();
    println!(
        "| in flight | commits | median µs per step | steps/s | durable commits per step | vs no key |"
    );
    println!("|---:|---|---:|---:|---:|---:|");
    for threads in [1, 16] {
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); Mode::ALL.len()];
        let mut walls = [Duration::ZERO; Mode::ALL.len()];
        let before: Vec<_> = runtimes.iter().map(Runtime::write_stats).collect();
        for round in 0..rounds {
            // Each round starts with another database, so that no mode always runs first.
            for k in 0..runtimes.len() {
                let m = (round + k) % runtimes.len();
                let rt = &runtimes[m];
                let (t, wall) = steps(rt, &format!("w{threads}-r{round}"), per_round, threads);
                times[m].extend(t);
                walls[m] += wall;
            }
        }
        let base = if threads == 1 {
            median_us(times[0].clone())
        } else {
            walls[0].as_secs_f64()
        };
        for (m, mode) in Mode::ALL.iter().enumerate() {
            let after = runtimes[m].write_stats();
            let done = (rounds * per_round) as f64;
            let commits = (after.commits - before[m].commits) as f64 / done;
            let median = median_us(times[m].clone());
            let per_s = done / walls[m].as_secs_f64();
            let ratio = if threads == 1 {
                median / base
            } else {
                walls[m].as_secs_f64() / base
            };
            println!(
                "| {threads} | {} | {median:.0} | {per_s:.0} | {commits:.2} | {ratio:.3} |",
                mode.name()
            );
        }
    }
    println!();
    println!(
        "vs no key: at 1 in flight the median step's time over the unsigned one's; at 16, the wall time of the same number of steps over the unsigned one's."
    );
}

/// `verify_log` of a log of `RPR_BENCH_EVENTS` events beside `sha256sum` of the file.
fn verify_vs_sha256sum(dir: &Path) {
    let events = env("RPR_BENCH_EVENTS", 40_000).max(1);
    let key = SignerKey::from_seed("bench-log", &[1; 32]).unwrap();
    let db = dir.join("verify.db");
    {
        let rt = Runtime::builder(&db)
            .signing(Signing::new(key.clone()))
            .read_durability(rpr::store::ReadDurability::ProcessCrashSafe)
            .open()
            .unwrap();
        // 16 writers, so the group commit fills the log quickly; a proposal is one event.
        let _ = steps(&rt, "v", events, 16);
    }
    let store = rpr::store::ReadStore::open_read_only(&db).unwrap();
    let bytes = std::fs::metadata(&db).unwrap().len();
    let mut ours = Vec::new();
    let mut whole = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = rpr::store::log::verify_log(&store, &key.verifier(), None).unwrap();
        ours.push(t.elapsed());
        assert!(r.is_ok(), "{:?}", r.problems);
        let t = Instant::now();
        let r = rpr::store::verify(&store, None).unwrap();
        whole.push(t.elapsed());
        assert!(r.is_ok(), "{:?}", r.problems);
        let t = Instant::now();
        let out = std::process::Command::new("sha256sum")
            .arg(&db)
            .output()
            .expect("sha256sum runs");
        theirs.push(t.elapsed());
        assert!(out.status.success());
    }
    let (a, w, b) = (median_us(ours), median_us(whole), median_us(theirs));
    println!();
    println!(
        "A log of {events} events ({} MB database file), 5 alternating runs, medians: `verify_log` (the signed log: every leaf hashed, the root against the signed checkpoint) {:.1} ms, {:.2}x `sha256sum` of the file ({:.1} ms); `store::verify` (the chain and every row re-derived, what `rpr verify` runs besides) {:.1} ms, {:.2}x; `rpr verify --key` runs both: {:.2}x.",
        bytes / 1_000_000,
        a / 1000.0,
        a / b,
        b / 1000.0,
        w / 1000.0,
        w / b,
        (a + w) / b
    );
}

fn main() {
    let dir_arg: Option<PathBuf> = {
        let mut args = std::env::args().skip(1);
        let mut dir = None;
        while let Some(a) = args.next() {
            if a == "--dir" {
                dir = args.next().map(PathBuf::from);
            }
        }
        dir
    };
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

    let tmp = tempfile::tempdir_in(dir_arg.unwrap_or_else(std::env::temp_dir)).unwrap();
    store_steps(tmp.path());
    verify_vs_sha256sum(tmp.path());
}
