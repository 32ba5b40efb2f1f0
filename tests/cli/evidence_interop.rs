//! Signed checkpoints, keys and proofs made by rpr (`rpr keygen`, `rpr::evidence`), checked
//! by an independent implementation, Go's own `golang.org/x/mod/sumdb/note` and
//! `golang.org/x/mod/sumdb/tlog`; and the same things made by Go, checked by rpr.
//!
//! The Go side is `tests/interop/tlog-go` (one small program), built here with Debian's Go
//! and Debian's `golang-golang-x-mod-dev` in GOPATH mode, offline (`.ci/install-tlog-go`
//! installs them; `.ci/run` runs it). As with the MCP peers, a missing Go is installed when
//! possible and otherwise fails the test with the reason: never a skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::merkle::{self, Hash};
use rpr::evidence::note::{KeyType, Note, SignerKey, VerifierKey};
use rpr::evidence::proof;
use rpr::store::ReadStore;

use crate::host_support::{run, text};

/// Debian's GOPATH root, where `golang-golang-x-mod-dev` puts golang.org/x/mod.
const GOPATH: &str = "/usr/share/gocode";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn find_go() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("go"))
        .find(|p| p.is_file())
}

fn have_go() -> Option<PathBuf> {
    let note = Path::new(GOPATH).join("src/golang.org/x/mod/sumdb/note/note.go");
    find_go().filter(|_| note.is_file())
}

/// Builds `tests/interop/tlog-go`, installing Go first if needed.
fn build() -> Result<PathBuf, String> {
    let go = if let Some(go) = have_go() {
        go
    } else {
        eprintln!("evidence_interop: Go or golang.org/x/mod missing; running .ci/install-tlog-go");
        let out = Command::new("bash")
            .arg(root().join(".ci/install-tlog-go"))
            .output()
            .map_err(|e| format!("could not run .ci/install-tlog-go: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                ".ci/install-tlog-go failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        have_go()
            .ok_or(".ci/install-tlog-go succeeded but Go or golang.org/x/mod is still missing")?
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tlog-go");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let bin = dir.join("tlog-go");
    let out = Command::new(&go)
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(root().join("tests/interop/tlog-go"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &dir)
        .env("GO111MODULE", "off")
        .env("GOPATH", GOPATH)
        .env("GOCACHE", dir.join("cache"))
        .env("GOENV", "off")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .output()
        .map_err(|e| format!("could not run {}: {e}", go.display()))?;
    if !out.status.success() {
        return Err(format!(
            "go build of tests/interop/tlog-go failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(bin)
}

/// The built Go checker, once per test binary. Never skips: without Go the test fails.
fn tlog_go() -> &'static Path {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BIN.get_or_init(build) {
        Ok(bin) => bin,
        Err(reason) => panic!(
            "the Go checker (golang.org/x/mod/sumdb/note and tlog) is not available, so rpr's \
             checkpoints cannot be checked against it: {reason}\nInstall it with \
             `bash .ci/install-tlog-go` (as root: Debian's golang-go and \
             golang-golang-x-mod-dev)."
        ),
    }
}

fn go(args: &[&str], dir: &Path) -> Output {
    Command::new(tlog_go())
        .args(args)
        .arg(dir)
        .output()
        .expect("runs tlog-go")
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rpr-tlog-go-")
        .tempdir()
        .unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn checkpoint(key: &SignerKey, leaves: &[Vec<u8>]) -> Note {
    let hashes: Vec<Hash> = leaves.iter().map(|l| merkle::leaf_hash(l)).collect();
    Checkpoint {
        origin: key.name().to_owned(),
        size: leaves.len() as u64,
        root: merkle::Frontier::from_leaves(&hashes).root(),
        extensions: vec![],
    }
    .sign(key)
    .unwrap()
}

/// `rpr keygen`'s key files, a checkpoint cosigned by a witness, an older checkpoint, four
/// inclusion proofs and a consistency proof, all made by rpr: Go's note and tlog verify each,
/// refuse corrupted copies, read rpr's signer key file, and cosign rpr's checkpoint; rpr
/// verifies what Go signed.
#[test]
fn rpr_checkpoints_keys_and_proofs_verify_with_gos_note_and_tlog() {
    let dir = scratch();
    let d = dir.path();
    for (file, name, witness) in [
        ("log.key", "example.com/rpr-log", None),
        ("witness.key", "example.com/witness", Some("--cosigner")),
    ] {
        let out = run([
            "keygen",
            "--out",
            &d.join(file).display().to_string(),
            "--name",
            name,
        ]
        .into_iter()
        .chain(witness));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let log = SignerKey::parse(read(&d.join("log.key")).trim_end()).unwrap();
    let witness = SignerKey::parse(read(&d.join("witness.key")).trim_end()).unwrap();
    assert_eq!(witness.kind(), KeyType::CosignatureV1);
    let leaves: Vec<Vec<u8>> = (0..21)
        .map(|i| format!(r#"{{"event":{i},"kind":"approved"}}"#).into_bytes())
        .collect();
    let old = checkpoint(&log, &leaves[..8]);
    let mut new = checkpoint(&log, &leaves);
    new.sign(&witness).unwrap();
    let refs: Vec<&[u8]> = leaves.iter().map(Vec::as_slice).collect();
    let file = proof::build(&refs, &new, &[0, 7, 8, 20], Some(&old)).unwrap();
    std::fs::write(
        d.join("proof.json"),
        serde_json::to_vec_pretty(&file).unwrap(),
    )
    .unwrap();
    let as_text: Vec<String> = leaves
        .iter()
        .map(|l| String::from_utf8(l.clone()).unwrap())
        .collect();
    std::fs::write(d.join("leaves.json"), serde_json::to_vec(&as_text).unwrap()).unwrap();

    let out = go(&["check-rust"], d);
    let said = text(&out);
    eprintln!("{said}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "Go refused rpr's evidence:\n{said}"
    );
    for expect in [
        "ok: note.NewVerifier read rpr's verifier keys example.com/rpr-log+",
        "ok: note.Open verified rpr's checkpoint (log and witness signatures); tlog.CheckRecord 4 inclusion proofs in a tree of 21; tlog.CheckTree the consistency proof",
        "ok: tlog.TreeHash of the 21 leaves equals the root in rpr's checkpoint",
        "ok: refused all ",
        "ok: note.NewSigner read rpr's signer key file and signed a note",
        "ok: the witness key is a cosignature/v1 key (type 0x04) whose key hash Go computed the same",
        "ok: cosigned rpr's checkpoint as a Go witness (cosignature/v1)",
    ] {
        assert!(said.contains(expect), "Go did not say {expect:?}:\n{said}");
    }

    // What Go signed with rpr's key file, and Go's cosignature on rpr's checkpoint.
    let signed = Note::parse(read(&d.join("go-signed-with-rpr-key.note")).as_bytes()).unwrap();
    signed.verify_all(&[log.verifier()]).unwrap();
    assert_eq!(signed.text(), "signed by Go with rpr's key file\n");
    let go_witness = VerifierKey::parse(read(&d.join("go-witness.pub")).trim_end()).unwrap();
    let cosigned = read(&d.join("go-cosigned.note"));
    assert_eq!(go_witness.kind(), KeyType::CosignatureV1);
    let (cp, note) = Checkpoint::open(
        cosigned.as_bytes(),
        &log.verifier(),
        std::slice::from_ref(&go_witness),
    )
    .unwrap();
    assert_eq!(cp.size, 21);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = note
        .cosigned_at(&go_witness)
        .expect("Go's cosignature states a time");
    assert!(
        at.abs_diff(now) < 600,
        "Go's cosignature time {at}, now {now}"
    );
    // Go's cosignature with its time changed is refused: the time is signed.
    let mut sig = note.signatures().last().unwrap().clone();
    let line = sig.line();
    sig.signature[7] ^= 1;
    let forged = cosigned.replace(&line, &sig.line());
    assert_ne!(forged, cosigned);
    assert!(
        Checkpoint::open(forged.as_bytes(), &log.verifier(), &[go_witness]).is_err(),
        "a cosignature whose time was changed verified"
    );

    // The Go check can fail: a leaf's data changed after it was proven is refused there too.
    let mut tampered = file.clone();
    tampered.leaves[1] = proof::ProvenLeaf {
        data: file.leaves[2].data.clone(),
        ..file.leaves[1].clone()
    };
    std::fs::write(d.join("proof.json"), serde_json::to_vec(&tampered).unwrap()).unwrap();
    let out = go(&["check-rust"], d);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("leaf 7: tlog.CheckRecord"),
        "{}",
        text(&out)
    );
}

/// A log, two checkpoints, inclusion proofs and a consistency proof made by Go's note and
/// tlog verify with rpr's proof-file check and Merkle code; changed, they are refused.
#[test]
fn gos_checkpoints_and_proofs_verify_with_rpr() {
    let dir = scratch();
    let d = dir.path();
    let out = go(&["make"], d);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let key = VerifierKey::parse(read(&d.join("go-log.pub")).trim_end()).unwrap();
    let bytes = std::fs::read(d.join("go-proof.json")).unwrap();
    let verified = proof::verify(&bytes, &key, &[]).unwrap();
    assert_eq!(verified.checkpoint.size, 13);
    assert_eq!(verified.old_checkpoint.as_ref().unwrap().size, 7);
    assert_eq!(
        verified.leaves.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        [0, 6, 12]
    );
    assert_eq!(verified.leaves[1].1, b"go leaf 6");
    let leaves: Vec<String> = serde_json::from_str(&read(&d.join("go-leaves.json"))).unwrap();
    let hashes: Vec<Hash> = leaves
        .iter()
        .map(|l| merkle::leaf_hash(l.as_bytes()))
        .collect();
    assert_eq!(merkle::root(&hashes), verified.checkpoint.root);
    // The proofs rpr makes from the same leaves are Go's, hash for hash.
    let file: proof::ProofFile = serde_json::from_slice(&bytes).unwrap();
    for leaf in &file.leaves {
        let mine = merkle::inclusion_proof(&hashes, leaf.index).unwrap();
        assert_eq!(mine.len(), leaf.proof.len());
    }
    let cons = file.consistency.as_ref().unwrap();
    assert_eq!(
        merkle::consistency_proof(&hashes, 7).unwrap().len(),
        cons.proof.len()
    );
    let remade = proof::build(
        &leaves.iter().map(String::as_bytes).collect::<Vec<_>>(),
        &Note::parse(file.checkpoint.as_bytes()).unwrap(),
        &[0, 6, 12],
        Some(&Note::parse(cons.old_checkpoint.as_bytes()).unwrap()),
    )
    .unwrap();
    assert_eq!(
        remade, file,
        "rpr's proof file from Go's leaves is Go's, byte for byte"
    );

    // Changed: a leaf, or the old checkpoint's root.
    let mut bad = file.clone();
    bad.leaves[0].index = 1;
    assert!(proof::verify(&serde_json::to_vec(&bad).unwrap(), &key, &[]).is_err());
    let mut bad = file.clone();
    bad.consistency.as_mut().unwrap().proof.pop();
    assert!(matches!(
        proof::verify(&serde_json::to_vec(&bad).unwrap(), &key, &[]),
        Err(proof::ProofFileError::Consistency { .. })
    ));
}

/// The whole path on the command line: `rpr call --signing-key` signs the log in its
/// commits, `rpr witness` cosigns, `rpr proof --checkpoint STATE` proves a pathway's events
/// against the cosigned checkpoint, `rpr verify --key --witness` and `rpr verify-proof`
/// accept it, and Go's note and tlog check the same proof and the root of every event.
#[test]
fn a_database_signed_by_rpr_call_proves_a_pathway_that_go_verifies() {
    use crate::host_support::{Scratch, by_key, call_args};
    let dir = Scratch::new("log-cli");
    let d = dir.join("");
    let path = |name: &str| d.join(name).display().to_string();
    for (file, name) in [("log.key", "rpr-log"), ("witness.key", "witness")] {
        let kind = (file == "witness.key").then_some("--cosigner");
        let out = run(["keygen", "--out", &path(file), "--name", name]
            .into_iter()
            .chain(kind));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let (config, policy) = (dir.fault_config("none"), dir.policy());
    let db = path("rpr.db");
    let log_key = path("log.key");
    // A witness's cosignature/v1 key does not sign a log's checkpoints: refused, nothing done.
    let arguments = r#"{"key": "zeroth", "value": "paid"}"#;
    let witness_key = path("witness.key");
    let mut args = call_args(&config, &policy, &db, "put", arguments);
    args.extend(["--signing-key", &witness_key]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("cosignature/v1 key (`rpr keygen --cosigner`)")
            && text(&out).contains("made by `rpr keygen` without --cosigner"),
        "{}",
        text(&out)
    );
    assert!(
        !Path::new(&db).exists(),
        "a refused call wrote the database"
    );
    for key in ["first", "second"] {
        let arguments = format!(r#"{{"key": "{key}", "value": "paid"}}"#);
        let mut args = call_args(&config, &policy, &db, "put", &arguments);
        args.extend(["--key", key, "--signing-key", &log_key]);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    // Without the key, a step is refused and names the flag.
    let arguments = r#"{"key": "third", "value": "paid"}"#;
    let out = run(call_args(&config, &policy, &db, "put", arguments));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--signing-key"), "{}", text(&out));

    let state = path("witness.state");
    let witness = |expect: i32| {
        let out = run([
            "witness",
            "--database",
            &db,
            "--state",
            &state,
            "--key",
            &path("witness.key"),
            "--log-key",
            &path("log.key.pub"),
        ]);
        assert_eq!(out.status.code(), Some(expect), "{}", text(&out));
        out
    };
    let said = text(&witness(0));
    assert!(
        said.contains("rpr witness: cosigned ") && said.contains(" events at 20"),
        "the witness says when it cosigned: {said}"
    );
    // A witness key of type 0x01, from before cosignature/v1: it still cosigns, with a
    // warning that its cosignature states no time.
    let out = run([
        "keygen",
        "--out",
        &path("old-witness.key"),
        "--name",
        "old-witness",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run([
        "witness",
        "--database",
        &db,
        "--state",
        &path("old.state"),
        "--key",
        &path("old-witness.key"),
        "--log-key",
        &path("log.key.pub"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("is a plain Ed25519 key: its cosignature states no time"),
        "{}",
        text(&out)
    );
    let old_state = read(Path::new(&path("old.state")));
    let old_key =
        VerifierKey::parse(read(Path::new(&path("old-witness.key.pub"))).trim_end()).unwrap();
    let log_pub = VerifierKey::parse(read(Path::new(&path("log.key.pub"))).trim_end()).unwrap();
    let (_, note) = Checkpoint::open(
        old_state.as_bytes(),
        &log_pub,
        std::slice::from_ref(&old_key),
    )
    .unwrap();
    assert_eq!(note.cosigned_at(&old_key), None);
    let (first, _) = by_key(Path::new(&db), "first");
    let out = run([
        "proof",
        "--database",
        &db,
        "--pathway",
        &first,
        "--out",
        &path("proof.json"),
        "--checkpoint",
        &state,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run([
        "verify-proof",
        &path("proof.json"),
        "--key",
        &path("log.key.pub"),
        "--witness-key",
        &path("witness.key.pub"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("cosigned by: witness (cosignature/v1, at 20"),
        "{}",
        text(&out)
    );
    let out = run([
        "verify",
        "--database",
        &db,
        "--key",
        &path("log.key.pub"),
        "--witness",
        &state,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("signed log verified: true"),
        "{}",
        text(&out)
    );

    // Go: the proof with both signatures, and the tree hash of every event in the log.
    let store = ReadStore::open_read_only(Path::new(&db)).unwrap();
    let events: Vec<String> = store
        .ledger(0, 10_000)
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect();
    std::fs::write(d.join("leaves.json"), serde_json::to_vec(&events).unwrap()).unwrap();
    let out = go(&["check-rust"], &d);
    assert_eq!(out.status.code(), Some(0), "Go refused:\n{}", text(&out));

    // A forged append (a copy of the last event, re-chained) is found by `verify --key`,
    // refused by the next step, and never enters what the witness cosigns.
    let last = i64::try_from(events.len()).unwrap();
    let text_last = events
        .last()
        .unwrap()
        .replace(&format!("\"seq\":{last}"), &format!("\"seq\":{}", last + 1));
    let (pathway, prev) = {
        let row = store.ledger(last - 1, 1).unwrap().remove(0);
        (row.pathway_id, row.hash)
    };
    drop(store);
    let sql = crate::common::Sql::open(Path::new(&db));
    let hash = rpr::ledger::chain_hash(&prev, &text_last);
    sql.execute(
        "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES ($1, $2, $3, $4, $5)",
        &[
            crate::common::Arg::Int(last + 1),
            crate::common::Arg::Text(&pathway),
            crate::common::Arg::Text(&text_last),
            crate::common::Arg::Text(&prev),
            crate::common::Arg::Text(&hash),
        ],
    );
    let out = run(["verify", "--database", &db, "--key", &path("log.key.pub")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "events {} to {} are not covered",
            last + 1,
            last + 1
        )),
        "{}",
        text(&out)
    );
    let mut args = call_args(&config, &policy, &db, "put", arguments);
    args.extend(["--signing-key", &log_key]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("appended without the signing key"),
        "{}",
        text(&out)
    );
    let out = witness(0);
    assert!(
        text(&out).contains(&format!("cosigned {last} events")),
        "{}",
        text(&out)
    );
}
