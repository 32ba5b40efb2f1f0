//! `rpr keygen --out KEYFILE [--name NAME] [--cosigner] [--force]`: a new Ed25519 signing key
//! for signed checkpoints, or with `--cosigner` a witness's `cosignature/v1` key
//! (`rpr::evidence::note`; docs/evidence.md). KEYFILE gets the signer key
//! (`PRIVATE+KEY+NAME+KEYID+…`, mode 0600) and KEYFILE.pub the verifier key
//! (`NAME+KEYID+…`), each one line, in the text form of Go's `golang.org/x/mod/sumdb/note`.

use std::fs::{self, OpenOptions, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rpr::evidence::note::{KeyType, SignerKey, is_valid_name};

use crate::{Exit, Failure, Usage};

/// The arguments of `keygen`.
#[derive(Debug, clap::Args)]
pub(crate) struct KeygenArgs {
    /// Where to write the signer (secret) key; the verifier (public) key goes to KEYFILE.pub.
    /// Keep KEYFILE where whoever can write the database cannot read it.
    #[arg(long, value_name = "KEYFILE")]
    out: PathBuf,
    /// The key's name, written in every signature line (no spaces, no '+'; a schema-less
    /// URL such as `example.com/payments-log` is the convention). Default: HOST/rpr, with
    /// this machine's host name, or `rpr` when the host name is not a valid key name.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// A witness's key (for `rpr witness --key`): its cosignatures are timestamped
    /// `cosignature/v1` signatures (c2sp.org/tlog-cosignature, type 0x04), not a log's
    /// checkpoint signatures. Auditors give its KEYFILE.pub to `verify-proof --witness-key`.
    #[arg(long)]
    cosigner: bool,
    /// Replace KEYFILE and KEYFILE.pub if they exist (the old key is lost: checkpoints it
    /// signed still verify with the old KEYFILE.pub only).
    #[arg(long)]
    force: bool,
}

/// The default key name: `HOST/rpr`, or `rpr`.
fn default_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .map(|h| format!("{h}/rpr"))
        .filter(|n| is_valid_name(n) && !n.starts_with('/'))
        .unwrap_or_else(|| "rpr".to_owned())
}

/// `keygen`: checks the arguments, draws the key, writes both files.
pub(crate) fn keygen(args: &KeygenArgs) -> Result<Exit, Failure> {
    let name = args.name.clone().unwrap_or_else(default_name);
    if !is_valid_name(&name) {
        return Err(Usage(format!(
            "--name {name:?} is not a valid key name: it must be non-empty, with no space, \
             '+' or control character (nothing was written)"
        ))
        .into());
    }
    if args.out.as_os_str().is_empty() {
        return Err(Usage("--out needs a file name (nothing was written)".into()).into());
    }
    let mut public = args.out.clone().into_os_string();
    public.push(".pub");
    let public = PathBuf::from(public);
    if !args.force {
        for path in [&args.out, &public] {
            if fs::symlink_metadata(path).is_ok() {
                return Err(format!(
                    "{} exists; give --force to replace it (its key is then lost); nothing \
                     was written",
                    path.display()
                )
                .into());
            }
        }
    }
    let kind = if args.cosigner {
        KeyType::CosignatureV1
    } else {
        KeyType::Ed25519
    };
    let key = SignerKey::generate_of(&name, kind)?;
    let verifier = key.verifier().to_string();
    write_file(&args.out, &key.to_secret_string(), 0o600, args.force)?;
    if let Err(e) = write_file(&public, &verifier, 0o644, args.force) {
        // No secret without its public half: take the key file back.
        let _ = fs::remove_file(&args.out);
        return Err(e);
    }
    outln!(
        "wrote the signer key to {} (mode 0600: keep it where the database's writers cannot \
         read it)",
        args.out.display()
    );
    outln!("wrote the verifier key to {}:", public.display());
    outln!("{verifier}");
    Ok(Exit::Done)
}

/// Writes `line` and a newline to `path` with `mode`: a new file (never an existing one),
/// or with `force` a new file renamed over the old one, so that the mode is always `mode`
/// and a reader never sees half a key.
fn write_file(path: &Path, line: &str, mode: u32, force: bool) -> Result<(), Failure> {
    let target = if force {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp-{}", std::process::id()));
        PathBuf::from(tmp)
    } else {
        path.to_owned()
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&target)
        .map_err(|e| -> Failure {
            if e.kind() == ErrorKind::AlreadyExists {
                format!(
                    "{} exists; give --force to replace it; nothing was written there",
                    target.display()
                )
                .into()
            } else {
                format!("creating {}: {e}", target.display()).into()
            }
        })?;
    let written = file
        .set_permissions(Permissions::from_mode(mode))
        .and_then(|()| file.write_all(line.as_bytes()))
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&target);
        return Err(format!("writing {}: {e}", target.display()).into());
    }
    if force && let Err(e) = fs::rename(&target, path) {
        let _ = fs::remove_file(&target);
        return Err(format!("replacing {}: {e}", path.display()).into());
    }
    Ok(())
}
