//! Known answers from Go's `golang.org/x/mod/sumdb/note` tests (keys, a signed note, a note
//! with two signatures), and the refusal of every malformed note and key.

use super::*;
use proptest::prelude::*;

const PETER_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const PETER_SKEY: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const ENOCH_VKEY: &str = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
const TEXT: &str = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
const PETER_SIG: &str = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
const ENOCH_SIG: &str = "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n";

fn peter() -> VerifierKey {
    VerifierKey::parse(PETER_VKEY).unwrap()
}

fn enoch() -> VerifierKey {
    VerifierKey::parse(ENOCH_VKEY).unwrap()
}

#[test]
fn go_keys_parse_and_print_back() {
    let v = peter();
    assert_eq!(v.name(), "PeterNeumann");
    assert_eq!(v.key_id(), 0xc74f_20a3);
    assert_eq!(v.to_string(), PETER_VKEY);
    let s = SignerKey::parse(PETER_SKEY).unwrap();
    assert_eq!(s.to_secret_string(), PETER_SKEY);
    assert_eq!(s.verifier(), v);
    assert!(
        !format!("{s:?}").contains("AYEKFALV"),
        "Debug shows no secret"
    );
}

#[test]
fn signing_gives_gos_signature() {
    let mut note = Note::new(TEXT).unwrap();
    note.sign(&SignerKey::parse(PETER_SKEY).unwrap()).unwrap();
    assert_eq!(note.to_text(), format!("{TEXT}\n{PETER_SIG}"));
}

#[test]
fn a_note_with_a_known_and_an_unknown_signature_verifies() {
    let msg = format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}");
    let note = Note::parse(msg.as_bytes()).unwrap();
    assert_eq!(note.text(), TEXT);
    assert_eq!(note.signatures().len(), 2);
    let known = [peter()];
    let ok = note.verify(&known).unwrap();
    assert_eq!(ok, vec![&known[0]]);
    // Both keys known: both verify, and both can be required (a log and its witness).
    let both = [peter(), enoch()];
    assert_eq!(note.verify(&both).unwrap().len(), 2);
    note.verify_all(&both).unwrap();
    // Only Enoch's signature: requiring Peter's too fails by name.
    let enoch_only = Note::parse(format!("{TEXT}\n{ENOCH_SIG}").as_bytes()).unwrap();
    assert_eq!(
        enoch_only.verify_all(&both),
        Err(NoteError::MissingSignature {
            name: "PeterNeumann".into(),
            key_id: 0xc74f_20a3
        })
    );
    assert!(matches!(
        enoch_only.verify(&[peter()]),
        Err(NoteError::NoKnownSignature { .. })
    ));
    // Round trip of the text form.
    assert_eq!(note.to_text(), msg);
}

#[test]
fn an_altered_text_or_signature_is_refused() {
    let altered = format!("{}\n{PETER_SIG}", TEXT.replace("problem", "pr0blem"));
    assert_eq!(
        Note::parse(altered.as_bytes()).unwrap().verify(&[peter()]),
        Err(NoteError::InvalidSignature {
            name: "PeterNeumann".into(),
            key_id: 0xc74f_20a3
        })
    );
    let mut note = Note::parse(format!("{TEXT}\n{PETER_SIG}").as_bytes()).unwrap();
    for i in 0..64 {
        let mut bad = note.clone();
        bad.signatures[0].signature[i] ^= 1;
        assert!(matches!(
            bad.verify(&[peter()]),
            Err(NoteError::InvalidSignature { .. })
        ));
    }
    // A known key's bad signature refuses the note even beside a good one.
    let mut bad = note.signatures[0].clone();
    bad.signature[0] ^= 1;
    note.signatures.push(bad);
    assert!(note.verify(&[peter()]).is_err());
    // A signature under the right name and a wrong ID is an unknown key's: ignored.
    let mut other = Note::parse(format!("{TEXT}\n{PETER_SIG}").as_bytes()).unwrap();
    other.signatures[0].key_id ^= 1;
    assert!(matches!(
        other.verify(&[peter()]),
        Err(NoteError::NoKnownSignature { .. })
    ));
}

#[test]
fn malformed_notes_get_their_own_error() {
    let good = format!("{TEXT}\n{PETER_SIG}");
    let cases: Vec<(String, NoteError)> = vec![
        (TEXT.to_owned(), NoteError::NoSignatures),
        (format!("{TEXT}\n"), NoteError::UnterminatedSignatures),
        (
            good.trim_end_matches('\n').to_owned(),
            NoteError::UnterminatedSignatures,
        ),
        (
            format!("{TEXT}\n- PeterNeumann AAAAAAA=\n"),
            NoteError::SignatureLinePrefix { line: 1 },
        ),
        (
            format!("{TEXT}\n{PETER_SIG}—PeterNeumann AAAAAAA=\n"),
            NoteError::SignatureLinePrefix { line: 2 },
        ),
        (
            format!("{TEXT}\n— PeterNeumann\n"),
            NoteError::SignatureLineForm { line: 1 },
        ),
        (
            format!("{TEXT}\n— Peter+Neumann AAAAAAA=\n"),
            NoteError::SignatureKeyName { line: 1 },
        ),
        (
            format!("{TEXT}\n—  AAAAAAA=\n"),
            NoteError::SignatureKeyName { line: 1 },
        ),
        (
            format!("{TEXT}\n— PeterNeumann AAAA AAA=\n"),
            NoteError::SignatureBase64 { line: 1 },
        ),
        (
            format!("{TEXT}\n— PeterNeumann AAAAAA==\n"),
            NoteError::SignatureTooShort { line: 1, len: 4 },
        ),
        (
            format!("{TEXT}\n— PeterNeumann AAAAAAF=\n"),
            NoteError::SignatureBase64 { line: 1 },
        ),
        (
            good.replace("problem,", "problem,\r"),
            NoteError::ControlCharacter {
                offset: 56,
                code: 13,
            },
        ),
        (
            good.replace("problem,", "problem\t"),
            NoteError::ControlCharacter {
                offset: 55,
                code: 9,
            },
        ),
    ];
    for (msg, want) in cases {
        assert_eq!(Note::parse(msg.as_bytes()), Err(want), "{msg:?}");
    }
    assert_eq!(
        Note::parse(b"a\n\n\xff\n"),
        Err(NoteError::NotUtf8 { offset: 3 })
    );
    let big = vec![b'a'; MAX_NOTE_BYTES + 1];
    assert!(matches!(Note::parse(&big), Err(NoteError::TooLarge { .. })));
    let many = format!("{TEXT}\n{}", PETER_SIG.repeat(MAX_SIGNATURES + 1));
    assert_eq!(
        Note::parse(many.as_bytes()),
        Err(NoteError::TooManySignatures {
            max: MAX_SIGNATURES
        })
    );
    // Exactly the maximum is read.
    let max = format!("{TEXT}\n{}", PETER_SIG.repeat(MAX_SIGNATURES));
    assert!(
        Note::parse(max.as_bytes())
            .unwrap()
            .verify(&[peter()])
            .is_ok()
    );
    // The text is split at the last blank line: a text may hold blank lines.
    let blank = format!("a\n\nb\n\n{PETER_SIG}");
    assert_eq!(Note::parse(blank.as_bytes()).unwrap().text(), "a\n\nb\n");
    // A text to sign must end in a newline and hold no control character.
    assert_eq!(Note::new("no newline"), Err(NoteError::MalformedText));
    assert_eq!(Note::new("tab\there\n"), Err(NoteError::MalformedText));
}

#[test]
fn malformed_keys_get_their_own_error() {
    let cases: Vec<(&str, KeyError)> = vec![
        (PETER_SKEY, KeyError::SecretGivenAsVerifier),
        ("PeterNeumann", KeyError::Form { parts: 1 }),
        ("PeterNeumann+c74f20a3", KeyError::Form { parts: 2 }),
        (
            "+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            KeyError::Name(String::new()),
        ),
        (
            "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            KeyError::Name("Peter Neumann".into()),
        ),
        (
            "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            KeyError::KeyIdForm("C74F20A3".into()),
        ),
        (
            "PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            KeyError::KeyIdForm("c74f20a".into()),
        ),
        (
            "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            KeyError::KeyIdMismatch {
                given: 0xc74f_20a4,
                computed: 0xc74f_20a3,
            },
        ),
        (
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T",
            KeyError::Base64,
        ),
        // Go's own bad keys: a wrong-length key (not even canonical base64, which Go's
        // decoder lets through) and an unknown algorithm.
        (
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
            KeyError::Base64,
        ),
        (
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWAA==",
            KeyError::Length { got: 34 },
        ),
        (
            "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            KeyError::Algorithm(0x65),
        ),
        ("PeterNeumann+c74f20a3+", KeyError::Length { got: 0 }),
    ];
    for (s, want) in cases {
        assert_eq!(VerifierKey::parse(s), Err(want), "{s:?}");
    }
    assert_eq!(
        SignerKey::parse(PETER_VKEY).unwrap_err(),
        KeyError::NotSignerKey
    );
    assert_eq!(
        SignerKey::parse(
            "PRIVATE+KEY+PeterNeumann+c74f20a4+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
        )
        .unwrap_err(),
        KeyError::KeyIdMismatch {
            given: 0xc74f_20a4,
            computed: 0xc74f_20a3
        }
    );
    let long = "a".repeat(MAX_KEY_BYTES + 1);
    assert!(matches!(
        VerifierKey::parse(&long),
        Err(KeyError::TooLong { .. })
    ));
    assert!(matches!(
        SignerKey::generate("bad name"),
        Err(KeyError::Name(_))
    ));
}

#[test]
fn generated_keys_sign_and_verify_and_differ() {
    let a = SignerKey::generate("example.com/log").unwrap();
    let b = SignerKey::generate("example.com/log").unwrap();
    assert_ne!(
        a.verifier(),
        b.verifier(),
        "two keys from the OS random source"
    );
    let again = SignerKey::parse(&a.to_secret_string()).unwrap();
    assert_eq!(again.verifier(), a.verifier());
    let v = VerifierKey::parse(&a.verifier().to_string()).unwrap();
    let mut note = Note::new("x\n").unwrap();
    note.sign(&a).unwrap();
    note.sign(&b).unwrap();
    // Same name, other key ID: b's signature is an unknown key's to a verifier of a.
    Note::parse(note.to_text().as_bytes())
        .unwrap()
        .verify_all(&[v])
        .unwrap();
    // Signing twice with one key keeps one signature.
    note.sign(&a).unwrap();
    assert_eq!(note.signatures().len(), 2);
}

/// The `PeterNeumann` seed as a `cosignature/v1` key (type 0x04): another key ID, and a
/// signature that is the time followed by Ed25519 over the message the specification
/// (c2sp.org/tlog-cosignature) spells out, checked here with the raw Ed25519 key.
#[test]
fn a_cosignature_v1_is_the_time_and_ed25519_over_the_specified_message() {
    let plain = SignerKey::parse(PETER_SKEY).unwrap();
    let seed = plain.key.to_bytes();
    let cosigner = SignerKey::from_seed_of("PeterNeumann", KeyType::CosignatureV1, &seed).unwrap();
    assert_eq!(cosigner.kind(), KeyType::CosignatureV1);
    assert_ne!(
        cosigner.key_id(),
        plain.key_id(),
        "the type is part of the key ID"
    );
    let public = cosigner.verifier().public_key();
    let mut h = Sha256::new();
    h.update(b"PeterNeumann\n\x04");
    h.update(public);
    let d = h.finalize();
    assert_eq!(
        cosigner.key_id(),
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    );
    // The key strings carry the type byte and read back as the same key.
    let vkey = cosigner.verifier().to_string();
    let raw = base64::decode(vkey.rsplit('+').next().unwrap()).unwrap();
    assert_eq!(raw[0], COSIGNATURE_V1_TYPE);
    assert_eq!(VerifierKey::parse(&vkey).unwrap(), cosigner.verifier());
    let again = SignerKey::parse(&cosigner.to_secret_string()).unwrap();
    assert_eq!(again.verifier(), cosigner.verifier());

    let mut note = Note::new(TEXT).unwrap();
    note.sign(&plain).unwrap();
    note.sign_at(&cosigner, 1_679_315_147).unwrap();
    let sig = &note.signatures()[1].signature;
    assert_eq!(sig.len(), 72);
    assert_eq!(sig[..8], 1_679_315_147u64.to_be_bytes());
    let message = format!("cosignature/v1\ntime 1679315147\n{TEXT}");
    let ed = VerifyingKey::from_bytes(&public).unwrap();
    ed.verify_strict(
        message.as_bytes(),
        &EdSignature::from_slice(&sig[8..]).unwrap(),
    )
    .unwrap();

    // Read back: both signatures verify, and the cosignature's time is stated.
    let parsed = Note::parse(note.to_text().as_bytes()).unwrap();
    parsed
        .verify_all(&[plain.verifier(), cosigner.verifier()])
        .unwrap();
    assert_eq!(
        parsed.cosigned_at(&cosigner.verifier()),
        Some(1_679_315_147)
    );
    assert_eq!(parsed.cosigned_at(&plain.verifier()), None);
}

#[test]
fn a_cosignature_v1_with_its_time_or_text_changed_is_refused() {
    let cosigner = SignerKey::generate_of("example.com/witness", KeyType::CosignatureV1).unwrap();
    let key = cosigner.verifier();
    let mut note = Note::new(TEXT).unwrap();
    note.sign_at(&cosigner, 1_700_000_000).unwrap();
    let good = note.signatures()[0].clone();
    assert!(key.verifies(TEXT, &good.signature));
    // The time is signed: one second later does not verify.
    let mut later = good.signature.clone();
    later[7] ^= 1;
    assert!(!key.verifies(TEXT, &later));
    // Another text, a signature cut short, a plain Ed25519 signature of the text: refused.
    assert!(!key.verifies("another text\n", &good.signature));
    assert!(!key.verifies(TEXT, &good.signature[..71]));
    assert!(!key.verifies(TEXT, &cosigner.sign_bytes(TEXT.as_bytes())));
    // A time over 2^63 - 1 is refused when signing, and when read.
    assert_eq!(
        Note::new(TEXT).unwrap().sign_at(&cosigner, 1 << 63),
        Err(NoteError::CosignatureTime(1 << 63))
    );
    let mut huge = good.signature.clone();
    huge[0] |= 0x80;
    assert!(!key.verifies(TEXT, &huge));
    // A note whose cosignature was changed is refused whole, by name.
    let mut forged = note.clone();
    forged.signatures[0].signature = later;
    let parsed = Note::parse(forged.to_text().as_bytes()).unwrap();
    assert!(matches!(
        parsed.verify(std::slice::from_ref(&key)),
        Err(NoteError::InvalidSignature { .. })
    ));
    // The Ed25519 key of the same seed and name is another key: the cosignature is not its.
    let plain = VerifierKey::from_public("example.com/witness", &key.public_key()).unwrap();
    let parsed = Note::parse(note.to_text().as_bytes()).unwrap();
    assert!(matches!(
        parsed.verify(&[plain]),
        Err(NoteError::NoKnownSignature { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No input makes the note parser panic; whatever parses prints back to the same bytes.
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(note) = Note::parse(&bytes) {
            let text = note.to_text();
            prop_assert_eq!(text.as_bytes(), &bytes[..]);
        }
    }

    /// Nor on mutations of a real note, and a mutated note never verifies with changed text.
    #[test]
    fn mutated_notes_never_panic(pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = format!("{TEXT}\n{PETER_SIG}{ENOCH_SIG}").into_bytes();
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        if let Ok(note) = Note::parse(&bytes)
            && note.verify(&[peter()]).is_ok()
        {
            prop_assert_eq!(note.text(), TEXT);
        }
    }

    /// Nor the key parsers.
    #[test]
    fn key_parse_never_panics(s in "\\PC{0,120}") {
        let _ = VerifierKey::parse(&s);
        let _ = SignerKey::parse(&s);
    }
}
