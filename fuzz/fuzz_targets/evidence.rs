//! Signed evidence (`rpr::evidence`, docs/evidence.md): the first byte picks the parser, the
//! rest is its input: a signed note, a checkpoint body, a key (verifier and signer), a proof
//! file checked with a fixed log key, or sizes, an index and hashes for the Merkle proof
//! checks. No input panics, and what the strict parsers accept they print back byte for byte
//! (one encoding per note, checkpoint and key).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::merkle::{self, Hash};
use rpr::evidence::note::{Note, SignerKey, VerifierKey};
use rpr::evidence::proof;

/// The key the proof-file seeds are signed with (seed 32 × 7, name fuzz.example/log).
fn log_key() -> VerifierKey {
    SignerKey::from_seed("fuzz.example/log", &[7; 32])
        .unwrap()
        .verifier()
}

fn hashes(bytes: &[u8]) -> Vec<Hash> {
    bytes
        .chunks_exact(32)
        .map(|c| c.try_into().unwrap())
        .collect()
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    match mode % 5 {
        0 => {
            if let Ok(note) = Note::parse(rest) {
                assert_eq!(note.to_text().as_bytes(), rest);
                let _ = note.verify(&[log_key()]);
                if let Ok(cp) = Checkpoint::parse(note.text()) {
                    assert_eq!(cp.to_text().unwrap(), note.text());
                }
            }
        }
        1 => {
            if let Ok(text) = std::str::from_utf8(rest)
                && let Ok(cp) = Checkpoint::parse(text)
            {
                assert_eq!(cp.to_text().unwrap(), text);
            }
        }
        2 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                if let Ok(key) = VerifierKey::parse(text) {
                    assert_eq!(key.to_string(), text);
                }
                if let Ok(key) = SignerKey::parse(text) {
                    assert_eq!(key.to_secret_string(), text);
                }
            }
        }
        3 => {
            if let Ok(v) = proof::verify(rest, &log_key(), &[]) {
                assert!(v.leaves.iter().all(|(i, _)| *i < v.checkpoint.size));
            }
        }
        _ => {
            // Two sizes and an index (8 bytes each), a leaf and two roots (32 each), the proof.
            if rest.len() < 24 + 96 {
                return;
            }
            let word = |i: usize| u64::from_le_bytes(rest[8 * i..8 * i + 8].try_into().unwrap());
            let (a, b, index) = (word(0), word(1), word(2));
            let h = hashes(&rest[24..120]);
            let proof = hashes(&rest[120..]);
            let _ = merkle::verify_inclusion(&h[0], index, a, &proof, &h[1]);
            let _ = merkle::root_from_inclusion(&h[0], index, b, &proof);
            let _ = merkle::verify_consistency(a, b, &h[1], &h[2], &proof);
        }
    }
});
