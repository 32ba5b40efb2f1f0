//! `rpr verify-proof FILE --key PUB [--witness-key PUB]…`: checks a proof file
//! (`rpr-proof/v0`, `rpr::evidence::proof`) offline, with the log's verifier key and any
//! witness keys, and prints what it proved. No database is opened: anyone holding the file
//! and the public key can run it (docs/evidence.md, "Proof files").

use std::io::Read;
use std::path::{Path, PathBuf};

use rpr::evidence::note::{KeyType, VerifierKey};
use rpr::evidence::proof::{self, MAX_PROOF_FILE_BYTES};
use serde_json::json;

use crate::{Exit, Failure, Usage};

/// The arguments of `verify-proof`.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyProofArgs {
    /// The proof file (`-` reads it from stdin).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The log's verifier key file (KEYFILE.pub as `rpr keygen` writes it).
    #[arg(long, value_name = "PUB")]
    key: PathBuf,
    /// A witness's verifier key file; its cosignature on the checkpoint is then required
    /// (repeat for several witnesses).
    #[arg(long = "witness-key", value_name = "PUB")]
    witness_keys: Vec<PathBuf>,
    /// The log the proof must come from: its checkpoint's origin (`rpr/` and the database's
    /// identity, as `rpr proof` and `rpr verify --key` print it). One key can sign the logs of several databases;
    /// without this, a proof from any of them holds.
    #[arg(long, value_name = "ORIGIN")]
    origin: Option<String>,
}

/// The most bytes read from a key file: a verifier key line is under 200.
const MAX_KEY_FILE_BYTES: u64 = 4096;

/// Reads the one verifier key a key file holds (`what` names it in errors).
fn read_key(path: &Path, what: &str) -> Result<VerifierKey, Failure> {
    let shown = path.display();
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(|e| format!("{what} {shown}: {e}"))?
        .take(MAX_KEY_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{what} {shown}: not a key file ({e})"))?;
    if text.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(
            format!("{what} {shown}: not a key file (over {MAX_KEY_FILE_BYTES} bytes)").into(),
        );
    }
    let line = text.strip_suffix('\n').unwrap_or(&text);
    VerifierKey::parse(line).map_err(|e| format!("{what} {shown}: {e}").into())
}

/// Reads the proof file, at most one byte past the limit (so that the check names its size).
fn read_proof(path: &Path) -> Result<Vec<u8>, Failure> {
    let limit = u64::try_from(MAX_PROOF_FILE_BYTES).unwrap_or(u64::MAX) + 1;
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_end(&mut bytes)?;
    } else {
        std::fs::File::open(path)
            .map_err(|e| format!("proof file {}: {e}", path.display()))?
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("proof file {}: {e}", path.display()))?;
    }
    Ok(bytes)
}

/// `verify-proof`: exit 0 when every signature and proof in the file holds; 1 with the
/// reason when one does not; 2 for bad usage.
pub(crate) fn verify_proof(args: &VerifyProofArgs, as_json: bool) -> Result<Exit, Failure> {
    if args.file.as_os_str().is_empty() {
        return Err(Usage("verify-proof needs a proof file (or - for stdin)".into()).into());
    }
    let log = read_key(&args.key, "--key")?;
    if log.kind() != KeyType::Ed25519 {
        return Err(Usage(format!(
            "--key {}: this is a witness's cosignature/v1 key; give it as --witness-key, and the \
             log's own key (KEYFILE.pub of its --signing-key) as --key",
            args.key.display()
        ))
        .into());
    }
    let witnesses = args
        .witness_keys
        .iter()
        .map(|p| read_key(p, "--witness-key"))
        .collect::<Result<Vec<_>, _>>()?;
    // A witness is another party than the log, and each counts once: the log's own
    // signature, or one witness's given twice, would pass for more cosigners than signed.
    for (i, (w, path)) in witnesses.iter().zip(&args.witness_keys).enumerate() {
        if w.public_key() == log.public_key() {
            return Err(Usage(format!(
                "--witness-key {}: this is the log's own key (--key); a witness is another party",
                path.display()
            ))
            .into());
        }
        if witnesses[..i]
            .iter()
            .any(|o| o.public_key() == w.public_key())
        {
            return Err(Usage(format!(
                "--witness-key {}: the same public key is given twice; each witness counts once",
                path.display()
            ))
            .into());
        }
    }
    let bytes = read_proof(&args.file)?;
    let verified = proof::verify(&bytes, &log, &witnesses)
        .map_err(|e| format!("the proof does not hold: {e}"))?;
    let cp = &verified.checkpoint;
    if let Some(want) = &args.origin
        && cp.origin != *want
    {
        return Err(format!(
            "the proof does not hold: its checkpoint is of the log {}, not of --origin {}",
            crate::shown::text(&cp.origin),
            crate::shown::text(want)
        )
        .into());
    }
    let root = hex(&cp.root);
    if as_json {
        crate::commands::print_json(&json!({
            "verified": true,
            "origin": cp.origin,
            "size": cp.size,
            "root": root,
            "log_key": log.name(),
            "witness_keys": witnesses.iter().map(VerifierKey::name).collect::<Vec<_>>(),
            "cosigned_at": verified.cosigned_at,
            "leaves": verified.leaves.iter().map(|(index, data)| json!({
                "index": index,
                "bytes": data.len(),
                "text": std::str::from_utf8(data).ok(),
            })).collect::<Vec<_>>(),
            "consistent_with": verified.old_checkpoint.as_ref().map(|old| json!({
                "size": old.size,
                "root": hex(&old.root),
            })),
        }))?;
        return Ok(Exit::Done);
    }
    outln!(
        "checkpoint: log {} at size {}, root {}",
        cp.origin,
        cp.size,
        root
    );
    outln!("signed by: {}", log.name());
    for (w, at) in witnesses.iter().zip(&verified.cosigned_at) {
        match at {
            Some(at) => outln!(
                "cosigned by: {} (cosignature/v1, at {})",
                w.name(),
                when(*at)
            ),
            None => outln!(
                "cosigned by: {} (a plain Ed25519 signature, no time)",
                w.name()
            ),
        }
    }
    for (index, data) in &verified.leaves {
        match std::str::from_utf8(data) {
            Ok(text) => outln!(
                "leaf {index} ({} bytes): {}",
                data.len(),
                crate::shown::text(text)
            ),
            Err(_) => outln!("leaf {index} ({} bytes, not UTF-8)", data.len()),
        }
    }
    if let Some(old) = &verified.old_checkpoint {
        outln!(
            "extends: the checkpoint at size {}, root {}",
            old.size,
            hex(&old.root)
        );
    }
    outln!(
        "proof verified: {} leaf(s) in the log the key signed",
        verified.leaves.len()
    );
    Ok(Exit::Done)
}

/// A cosignature's time for people: UTC, and the seconds since the Epoch it states.
pub(crate) fn when(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| s.checked_mul(1000))
        .map_or_else(
            || format!("{seconds} s after the Epoch"),
            |ms| format!("{} ({seconds})", rpr::shown::utc(ms)),
        )
}

/// Lower-case hex of a hash.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
