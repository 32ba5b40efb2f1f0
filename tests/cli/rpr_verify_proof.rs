//! `rpr verify-proof FILE --key PUB`: a proof file checked offline, with no database: what a
//! person who was handed the file and the log's public key runs. Every way the file can fail
//! to prove its leaves is exit 1 with the reason; a proof that holds prints what it proved.

use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::merkle;
use rpr::evidence::note::SignerKey;
use rpr::evidence::proof;
use serde_json::Value;

use crate::host_support::{Scratch, run, text};

/// Eight events as leaves, the log's key and a witness's, a checkpoint of all eight signed by
/// the log and cosigned by the witness, and a proof file of leaves 2 and 7 written to
/// `proof.json` (public keys in `log.pub` and `witness.pub`).
struct Fixture {
    dir: Scratch,
    file: String,
    log_pub: String,
    witness_pub: String,
    other_pub: String,
}

fn leaves() -> Vec<Vec<u8>> {
    (1..=8)
        .map(|seq| {
            format!(r#"{{"kind":"proposed","pathway":"pw_{seq}","seq":{seq}}}"#).into_bytes()
        })
        .collect()
}

/// A proof file of the leaves at `indices` of the log of `leaves`, against a checkpoint of
/// all of them signed by each of `signers` in turn (the log's key first).
fn proof_of(leaves: &[Vec<u8>], signers: &[&SignerKey], indices: &[u64]) -> proof::ProofFile {
    let refs: Vec<&[u8]> = leaves.iter().map(Vec::as_slice).collect();
    let hashes: Vec<merkle::Hash> = refs.iter().map(|d| merkle::leaf_hash(d)).collect();
    let cp = Checkpoint {
        origin: "rpr/db_test".into(),
        size: u64::try_from(leaves.len()).unwrap(),
        root: merkle::root(&hashes),
        extensions: Vec::new(),
    };
    let mut note = cp.sign(signers[0]).unwrap();
    for witness in &signers[1..] {
        note.sign(witness).unwrap();
    }
    proof::build(&refs, &note, indices, None).unwrap()
}

fn fixture(tag: &str) -> Fixture {
    let dir = Scratch::new(tag);
    let log = SignerKey::from_seed("example.com/log", &[7; 32]).unwrap();
    let witness = SignerKey::from_seed("example.com/witness", &[9; 32]).unwrap();
    let other = SignerKey::from_seed("example.com/log", &[8; 32]).unwrap();
    let file = proof_of(&leaves(), &[&log, &witness], &[2, 7]);
    let path = dir.join("proof.json");
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let write_pub = |name: &str, key: &SignerKey| {
        let p = dir.join(name);
        std::fs::write(&p, format!("{}\n", key.verifier())).unwrap();
        p.display().to_string()
    };
    Fixture {
        file: path.display().to_string(),
        log_pub: write_pub("log.pub", &log),
        witness_pub: write_pub("witness.pub", &witness),
        other_pub: write_pub("other.pub", &other),
        dir,
    }
}

#[test]
fn a_proof_that_holds_prints_the_checkpoint_and_each_leaf_and_exits_0() {
    let f = fixture("vp-ok");
    let out = run(["verify-proof", &f.file, "--key", &f.log_pub]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("log rpr/db_test at size 8"), "{stdout}");
    assert!(
        stdout.contains("leaf 2 (") && stdout.contains(r#""seq":3"#),
        "{stdout}"
    );
    assert!(
        stdout.contains("leaf 7 (") && stdout.contains(r#""seq":8"#),
        "{stdout}"
    );
    assert!(stdout.contains("proof verified: 2 leaf(s)"), "{stdout}");

    // With the witness's key its cosignature is required, and present.
    let out = run([
        "verify-proof",
        &f.file,
        "--key",
        &f.log_pub,
        "--witness-key",
        &f.witness_pub,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cosigned by: example.com/witness"));

    // --json: one document, the same facts.
    let out = run(["--json", "verify-proof", &f.file, "--key", &f.log_pub]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verified"], true);
    assert_eq!(doc["size"], 8);
    assert_eq!(doc["origin"], "rpr/db_test");
    let indices: Vec<u64> = doc["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [2, 7]);
    let _ = &f.dir;
}

#[test]
fn another_key_an_edited_leaf_or_a_missing_cosignature_is_refused_with_exit_1() {
    let f = fixture("vp-bad");
    // Signed by another key of the same name: no known signature verifies.
    let out = run(["verify-proof", &f.file, "--key", &f.other_pub]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the proof does not hold"),
        "{}",
        text(&out)
    );
    assert!(out.stdout.is_empty(), "nothing printed as proven");

    // A leaf's bytes changed: its inclusion proof no longer leads to the signed root.
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&f.file).unwrap()).unwrap();
    // (The forged bytes' base64 taken from a proof file of a log where leaf 2 is forged.)
    let mut forged = leaves();
    forged[2] = br#"{"kind":"approval_granted","pathway":"pw_3","seq":3}"#.to_vec();
    let other_key = SignerKey::from_seed("example.com/log", &[8; 32]).unwrap();
    let forged_file = proof_of(&forged, &[&other_key], &[2]);
    assert_ne!(forged_file.leaves[0].data, file["leaves"][0]["data"]);
    file["leaves"][0]["data"] = Value::String(forged_file.leaves[0].data.clone());
    let edited = f.dir.join("edited.json");
    std::fs::write(&edited, serde_json::to_vec(&file).unwrap()).unwrap();
    let out = run([
        "verify-proof",
        edited.to_str().unwrap(),
        "--key",
        &f.log_pub,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("leaf 2 is not proven"),
        "{}",
        text(&out)
    );

    // A witness required whose cosignature the checkpoint lacks.
    let log = SignerKey::from_seed("example.com/log", &[7; 32]).unwrap();
    let alone = proof_of(&leaves(), &[&log], &[0]);
    let alone_path = f.dir.join("alone.json");
    std::fs::write(&alone_path, serde_json::to_vec(&alone).unwrap()).unwrap();
    let out = run([
        "verify-proof",
        alone_path.to_str().unwrap(),
        "--key",
        &f.log_pub,
        "--witness-key",
        &f.witness_pub,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the proof does not hold"),
        "{}",
        text(&out)
    );
}

/// A witness is another party than the log, and each counts once: before, the log's own
/// key given as a witness passed on the log's signature alone ("cosigned by" the log), and
/// one witness's key given twice passed as two cosigners.
#[test]
fn the_logs_key_or_one_witness_twice_is_refused_as_witnesses() {
    let f = fixture("vp-witnesses");
    let copy = f.dir.join("witness-copy.pub");
    std::fs::copy(&f.witness_pub, &copy).unwrap();
    for (witnesses, needle) in [
        (vec![f.log_pub.as_str()], "the log's own key"),
        (
            vec![f.witness_pub.as_str(), copy.to_str().unwrap()],
            "given twice",
        ),
    ] {
        let mut args = vec!["verify-proof", f.file.as_str(), "--key", f.log_pub.as_str()];
        for w in &witnesses {
            args.extend(["--witness-key", w]);
        }
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(needle), "{}", text(&out));
        assert!(out.stdout.is_empty(), "nothing said verified");
    }
}

#[test]
fn bad_files_and_keys_get_a_specific_error_never_a_panic() {
    let f = fixture("vp-input");
    let missing = f.dir.join("nope.json");
    let out = run([
        "verify-proof",
        missing.to_str().unwrap(),
        "--key",
        &f.log_pub,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("proof file"), "{}", text(&out));

    // Not a proof file.
    let junk = f.dir.join("junk.json");
    std::fs::write(&junk, b"{\"format\": 1}").unwrap();
    let out = run(["verify-proof", junk.to_str().unwrap(), "--key", &f.log_pub]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not a proof file"), "{}", text(&out));

    // The secret key given where the public one belongs: refused, and not echoed.
    let secret = f.dir.join("log.key");
    let key = SignerKey::from_seed("example.com/log", &[7; 32]).unwrap();
    std::fs::write(&secret, format!("{}\n", key.to_secret_string())).unwrap();
    let out = run(["verify-proof", &f.file, "--key", secret.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--key"), "{}", text(&out));
    assert!(
        !text(&out).contains(&key.to_secret_string()),
        "{}",
        text(&out)
    );

    // A key file that is not a key.
    let garbage = f.dir.join("garbage.pub");
    std::fs::write(&garbage, [0xff, 0x00, 0x41]).unwrap();
    let out = run(["verify-proof", &f.file, "--key", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    // No --key: bad usage.
    let out = run(["verify-proof", &f.file]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!text(&out).contains("panicked"));
}

#[test]
fn a_proof_is_chosen_by_the_signed_event_text_not_the_editable_pathway_column() {
    use crate::host_support::{by_key, call_args};
    let dir = Scratch::new("vp-column");
    let path = |name: &str| dir.join(name).display().to_string();
    let out = run(["keygen", "--out", &path("log.key"), "--name", "rpr-log"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (config, policy, db) = (dir.fault_config("none"), dir.policy(), path("rpr.db"));
    let log_key = path("log.key");
    for key in ["first", "second"] {
        let arguments = format!(r#"{{"key": "{key}", "value": "paid"}}"#);
        let mut args = call_args(&config, &policy, &db, "put", &arguments);
        args.extend(["--key", key, "--signing-key", &log_key]);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let (first, _) = by_key(std::path::Path::new(&db), "first");
    let (second, _) = by_key(std::path::Path::new(&db), "second");
    let names = |event: &str, pathway: &str| {
        serde_json::from_str::<Value>(event).unwrap()["pathway"] == pathway
    };
    let events: Vec<(i64, String)> = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq, event FROM ledger ORDER BY seq")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let of_first = events.iter().filter(|(_, e)| names(e, &first)).count();
    assert!(of_first >= 3, "{events:?}");

    let prove = || {
        run([
            "proof",
            "--database",
            &db,
            "--pathway",
            &first,
            "--out",
            &path("proof.json"),
        ])
    };
    let out = prove();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let file: Value = serde_json::from_slice(&std::fs::read(path("proof.json")).unwrap()).unwrap();
    let leaves = file["leaves"].as_array().unwrap();
    assert_eq!(
        leaves.len(),
        of_first,
        "every event of the pathway, no other"
    );
    let origin = text(&out)
        .split("--origin ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap()
        .to_owned();
    assert!(origin.starts_with("rpr/"), "{}", text(&out));
    let verify = |origin: &str| {
        run([
            "verify-proof",
            &path("proof.json"),
            "--key",
            &path("log.key.pub"),
            "--origin",
            origin,
        ])
    };
    let out = verify(&origin);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // A proof of another database's log, with the same key, is refused under --origin.
    let out = verify("rpr/db_another");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("not of --origin rpr/db_another"),
        "{}",
        text(&out)
    );

    // A writer without the key moves one of the first pathway's events to the second in the
    // column nothing signs: the proof is refused, not written without that event.
    let (moved, _) = events.iter().find(|(_, e)| names(e, &first)).unwrap();
    std::fs::remove_file(path("proof.json")).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE ledger SET pathway_id = ?1 WHERE seq = ?2",
            rusqlite::params![second, moved],
        )
        .unwrap();
    let out = prove();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "ledger event {moved}: its pathway_id column says \"{second}\" but its text names \"{first}\""
        )),
        "{}",
        text(&out)
    );
    assert!(
        !std::path::Path::new(&path("proof.json")).exists(),
        "no proof file is written"
    );
}
