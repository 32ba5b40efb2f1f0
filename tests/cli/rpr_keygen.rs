//! `rpr keygen`: the key file (mode 0600) and its `.pub`, in the text form Go's note package
//! reads (checked against Go in `evidence_interop.rs`); no overwrite without `--force`; a
//! bad name or path is an error that says so, never a panic.

use std::os::unix::fs::PermissionsExt;

use rpr::evidence::note::{KeyType, Note, SignerKey, VerifierKey};

use crate::host_support::{Scratch, run, text};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn keys(dir: &Scratch, file: &str) -> (String, String) {
    (
        std::fs::read_to_string(dir.join(file)).unwrap(),
        std::fs::read_to_string(dir.join(&format!("{file}.pub"))).unwrap(),
    )
}

#[test]
fn keygen_writes_a_secret_key_file_0600_and_its_public_key() {
    let dir = Scratch::new("keygen");
    let out_path = dir.join("log.key").display().to_string();
    let out = run(["keygen", "--out", &out_path, "--name", "example.com/log"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(mode(&dir.join("log.key")), 0o600);
    assert_eq!(mode(&dir.join("log.key.pub")), 0o644);
    let (secret, public) = keys(&dir, "log.key");
    assert!(
        secret.starts_with("PRIVATE+KEY+example.com/log+"),
        "{secret}"
    );
    assert!(secret.ends_with('\n') && public.ends_with('\n'));
    let signer = SignerKey::parse(secret.trim_end()).unwrap();
    let verifier = VerifierKey::parse(public.trim_end()).unwrap();
    assert_eq!(signer.verifier(), verifier);
    assert_eq!(verifier.name(), "example.com/log");
    // What it prints is the public key, never the secret.
    let said = text(&out);
    assert!(said.contains(public.trim_end()), "{said}");
    assert!(!said.contains(&secret.trim_end()[30..]), "{said}");
    // A note signed with it verifies with the .pub.
    let mut note = Note::new("checkpoint body\n").unwrap();
    note.sign(&signer).unwrap();
    Note::parse(note.to_text().as_bytes())
        .unwrap()
        .verify_all(&[verifier])
        .unwrap();
}

/// `--cosigner`: a witness's key of type 0x04, whose cosignature states its time; `rpr
/// witness` warns about a plain 0x01 key, and the log's flags refuse a 0x04 key.
#[test]
fn keygen_cosigner_writes_a_cosignature_v1_key_pair() {
    let dir = Scratch::new("keygen");
    let out_path = dir.join("w.key").display().to_string();
    let out = run([
        "keygen",
        "--out",
        &out_path,
        "--name",
        "example.com/witness",
        "--cosigner",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (secret, public) = keys(&dir, "w.key");
    let signer = SignerKey::parse(secret.trim_end()).unwrap();
    let verifier = VerifierKey::parse(public.trim_end()).unwrap();
    assert_eq!(signer.kind(), KeyType::CosignatureV1);
    assert_eq!(verifier.kind(), KeyType::CosignatureV1);
    assert_eq!(signer.verifier(), verifier);
    let mut note = Note::new("checkpoint body\n").unwrap();
    note.sign(&signer).unwrap();
    let parsed = Note::parse(note.to_text().as_bytes()).unwrap();
    parsed.verify_all(std::slice::from_ref(&verifier)).unwrap();
    assert!(parsed.cosigned_at(&verifier).is_some());
    // Given where the log's key goes, it is refused by name: exit 2.
    let out = run(["verify-proof", "-", "--key", &format!("{out_path}.pub")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("witness's cosignature/v1 key"),
        "{}",
        text(&out)
    );
}

#[test]
fn keygen_refuses_to_overwrite_without_force_and_replaces_with_it() {
    let dir = Scratch::new("keygen");
    let out_path = dir.join("k").display().to_string();
    assert_eq!(run(["keygen", "--out", &out_path]).status.code(), Some(0));
    let first = keys(&dir, "k");
    let out = run(["keygen", "--out", &out_path]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("exists; give --force"),
        "{}",
        text(&out)
    );
    assert_eq!(keys(&dir, "k"), first, "nothing was written");
    // Only the .pub there: refused too, and the key file is not created.
    let lone = dir.join("lone").display().to_string();
    std::fs::write(format!("{lone}.pub"), "x\n").unwrap();
    let out = run(["keygen", "--out", &lone]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!dir.join("lone").exists());
    // --force replaces both, and the key file is 0600 even if the old one was not.
    std::fs::set_permissions(dir.join("k"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(["keygen", "--out", &out_path, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let second = keys(&dir, "k");
    assert_ne!(second, first);
    assert_eq!(mode(&dir.join("k")), 0o600);
    let leftovers: Vec<_> = std::fs::read_dir(dir.join(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn keygen_default_name_is_host_slash_rpr() {
    let dir = Scratch::new("keygen");
    let out = run(["keygen", "--out", &dir.join("k").display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (_, public) = keys(&dir, "k");
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    let key = VerifierKey::parse(public.trim_end()).unwrap();
    assert_eq!(key.name(), format!("{host}/rpr"));
}

#[test]
fn keygen_bad_input_gets_a_specific_error() {
    let dir = Scratch::new("keygen");
    let k = dir.join("k").display().to_string();
    for (name, code) in [("a b", 2), ("a+b", 2), ("", 2)] {
        let out = run(["keygen", "--out", &k, "--name", name]);
        assert_eq!(out.status.code(), Some(code), "{name:?}: {}", text(&out));
        assert!(
            text(&out).contains("not a valid key name"),
            "{}",
            text(&out)
        );
        assert!(!dir.join("k").exists());
    }
    let out = run(["keygen", "--out", ""]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let missing = dir.join("no/such/dir/k").display().to_string();
    let out = run(["keygen", "--out", &missing]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("No such file or directory"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("panicked"), "{}", text(&out));
    let out = run(["keygen"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
