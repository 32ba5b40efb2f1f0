//! The signed log on the command line (docs/evidence.md): `--signing-key` and `--witness`
//! for the commands that write, `rpr checkpoint`, `rpr witness` and `rpr proof`; `rpr verify
//! --key` is in `commands::read`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::note::{KeyType, Note, SignerKey, VerifierKey};
use rpr::store::ReadStore;
use rpr::store::log::{self, Signing};

use crate::config::existing_database;
use crate::{Exit, Failure, Usage};

/// The signing of this process's runtimes (`--signing-key`, `--witness`), set once before
/// any opens.
static SIGNING: OnceLock<Signing> = OnceLock::new();

/// The most bytes read from a key file or a witness state.
const MAX_SMALL_FILE_BYTES: u64 = 64 * 1024;

/// Reads a small text file (a key, a checkpoint), `what` naming it in errors.
fn read_small(path: &Path, what: &str) -> Result<String, Failure> {
    let shown = path.display();
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(|e| format!("{what} {shown}: {e}"))?
        .take(MAX_SMALL_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{what} {shown}: not a text file ({e})"))?;
    if text.len() as u64 > MAX_SMALL_FILE_BYTES {
        return Err(format!("{what} {shown}: over {MAX_SMALL_FILE_BYTES} bytes").into());
    }
    Ok(text)
}

/// The signer key in KEYFILE (as `rpr keygen` writes it). Its text is never echoed.
pub(crate) fn signer_key(path: &Path, what: &str) -> Result<SignerKey, Failure> {
    let text = read_small(path, what)?;
    SignerKey::parse(text.trim_end_matches('\n')).map_err(|_| {
        format!(
            "{what} {}: not a signer key (the secret KEYFILE `rpr keygen` writes, not KEYFILE.pub)",
            path.display()
        )
        .into()
    })
}

/// The log's own key must be an Ed25519 checkpoint key: a witness's `cosignature/v1` key
/// signs another message, which Go's note package and the transparency-log tools do not
/// read as a log's signature.
fn log_kind(kind: KeyType, path: &Path, what: &str) -> Result<(), Failure> {
    match kind {
        KeyType::Ed25519 => Ok(()),
        KeyType::CosignatureV1 => Err(Usage(format!(
            "{what} {}: this is a witness's cosignature/v1 key (`rpr keygen --cosigner`); a log \
             signs with a key made by `rpr keygen` without --cosigner (nothing was done)",
            path.display()
        ))
        .into()),
    }
}

/// The log's signer key in KEYFILE: an Ed25519 key, not a witness's.
fn log_signer_key(path: &Path, what: &str) -> Result<SignerKey, Failure> {
    let key = signer_key(path, what)?;
    log_kind(key.kind(), path, what)?;
    Ok(key)
}

/// The log's verifier key in PUB: an Ed25519 key, not a witness's.
fn log_verifier_key(path: &Path, what: &str) -> Result<VerifierKey, Failure> {
    let key = verifier_key(path, what)?;
    log_kind(key.kind(), path, what)?;
    Ok(key)
}

/// The verifier key in PUB (KEYFILE.pub).
pub(crate) fn verifier_key(path: &Path, what: &str) -> Result<VerifierKey, Failure> {
    let text = read_small(path, what)?;
    let line = text.trim_end_matches('\n');
    if SignerKey::parse(line).is_ok() {
        return Err(format!(
            "{what} {}: this is a secret signer key; give its public half (KEYFILE.pub)",
            path.display()
        )
        .into());
    }
    VerifierKey::parse(line).map_err(|e| format!("{what} {}: {e}", path.display()).into())
}

/// A witness state file: the checkpoint note the witness last cosigned, signed by `log`.
fn witness_state(path: &Path, log: &VerifierKey) -> Result<(String, Checkpoint), Failure> {
    let text = read_small(path, "--witness")?;
    let (cp, _) = Checkpoint::open(text.as_bytes(), log, &[]).map_err(|e| {
        format!(
            "--witness {}: not a checkpoint signed by the log's key: {e}",
            path.display()
        )
    })?;
    Ok((text, cp))
}

/// How this process signs: `--signing-key`, or `--signer-command` with `--log-key`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct SigningArgs {
    /// Sign the log in every commit with this key (KEYFILE from `rpr keygen`; keep it where
    /// the database's writers cannot read it). For the commands that write.
    #[arg(
        long,
        global = true,
        value_name = "KEYFILE",
        env = "RPR_SIGNING_KEY",
        hide_env_values = true
    )]
    signing_key: Option<PathBuf>,
    /// Sign by running this command instead (words split at spaces, no shell): the
    /// checkpoint on its stdin, one signature line on its stdout, e.g. `rpr sign --key
    /// KEYFILE` under another account. Needs --log-key.
    #[arg(
        long,
        global = true,
        value_name = "COMMAND",
        conflicts_with = "signing_key"
    )]
    signer_command: Option<String>,
    /// The log's verifier key (KEYFILE.pub): for --signer-command, and for `witness`.
    #[arg(long = "log-key", global = true, value_name = "PUB")]
    log_key: Option<PathBuf>,
    /// A witness's state (the checkpoint it last cosigned): refuse to step on a database
    /// behind it or inconsistent with it. With --signing-key, or with `verify --key`.
    #[arg(long, global = true, value_name = "STATE")]
    pub(crate) witness: Option<PathBuf>,
}

impl SigningArgs {
    /// The flags as given, for a child `rpr` that takes a step on the same database (the
    /// console's commands).
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let paths = [
            ("--signing-key", &self.signing_key),
            ("--log-key", &self.log_key),
            ("--witness", &self.witness),
        ];
        for (flag, path) in paths {
            if let Some(p) = path {
                out.extend([flag.to_owned(), p.display().to_string()]);
            }
        }
        if let Some(c) = &self.signer_command {
            out.extend(["--signer-command".to_owned(), c.clone()]);
        }
        out
    }

    /// Whether any signing flag was given.
    pub(crate) fn any(&self) -> bool {
        self.signing_key.is_some() || self.signer_command.is_some() || self.log_key.is_some()
    }
}

/// Sets this process's signing from the flags.
pub(crate) fn configure(args: &SigningArgs) -> Result<(), Failure> {
    let witness = args.witness.as_deref();
    let signing = match (&args.signing_key, &args.signer_command, &args.log_key) {
        (None, None, None) => {
            if witness.is_some() {
                return Err(
                    Usage("--witness needs --signing-key (or --signer-command)".into()).into(),
                );
            }
            return Ok(());
        }
        (Some(key), None, None) => Signing::new(log_signer_key(key, "--signing-key")?),
        (None, Some(command), Some(log_key)) => {
            let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
            if words.is_empty() {
                return Err(Usage("--signer-command is empty".into()).into());
            }
            Signing::command(words, log_verifier_key(log_key, "--log-key")?)
        }
        (None, Some(_), None) => {
            return Err(Usage(
                "--signer-command needs --log-key PUB (the log's verifier key)".into(),
            )
            .into());
        }
        _ => {
            return Err(
                Usage("--log-key goes with --signer-command, not --signing-key".into()).into(),
            );
        }
    };
    let mut signing = signing;
    if let Some(path) = witness {
        let (_, cp) = witness_state(path, &signing.verifier())?;
        signing = signing.witnessed(cp);
    }
    let _ = SIGNING.set(signing);
    Ok(())
}

/// A runtime builder for `db` with this process's signing.
pub(crate) fn builder(db: &Path) -> rpr::RuntimeBuilder {
    let builder = rpr::Runtime::builder(db);
    match SIGNING.get() {
        Some(signing) => builder.signing(signing.clone()),
        None => builder,
    }
}

/// The arguments of `checkpoint`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckpointArgs {
    #[command(flatten)]
    db: crate::commands::Database,
    /// Sign the log as it stands now, when it has no checkpoint yet (needs --signing-key;
    /// check the database with `rpr verify` first: the checkpoint vouches for every event).
    #[arg(long)]
    begin: bool,
}

/// `checkpoint`: prints the newest signed checkpoint (with `--begin`, signs one first).
pub(crate) fn checkpoint(args: &CheckpointArgs) -> Result<Exit, Failure> {
    let db = existing_database(args.db.location())?;
    if args.begin {
        let Some(signing) = SIGNING.get() else {
            return Err(
                Usage("--begin needs --signing-key KEYFILE (or --signer-command)".into()).into(),
            );
        };
        let rt = rpr::Runtime::builder(db)
            .signing(signing.clone().begin_log())
            .open()
            .map_err(|e| format!("cannot open database {}: {e}", args.db.shown()))?;
        rt.sign_log()?;
    }
    let store = ReadStore::open_read_only(db)?;
    match log::latest(&store)? {
        Some(note) => {
            print!("{note}");
            std::io::stdout().flush()?;
            Ok(Exit::Done)
        }
        None => Err(format!(
            "{}: no signed checkpoint yet (steps taken with --signing-key sign one; a log that has events and none: `rpr checkpoint --begin --signing-key KEYFILE`)",
            args.db.shown()
        )
        .into()),
    }
}

/// The arguments of `witness`.
#[derive(Debug, clap::Args)]
pub(crate) struct WitnessArgs {
    #[command(flatten)]
    db: crate::commands::Database,
    /// The witness's state file: the checkpoint it last cosigned (created on first use).
    /// Keep it where the database's writers cannot write.
    #[arg(long, value_name = "STATE")]
    state: PathBuf,
    /// The witness's own signer key (KEYFILE from `rpr keygen`).
    #[arg(long, value_name = "KEYFILE")]
    key: PathBuf,
    // The log's verifier key is the global --log-key (required here).
}

/// `witness`: cosigns the database's checkpoint if it extends the state's, writes the new
/// state, and prints the cosigned note; exit 1 (state unchanged) if it does not.
pub(crate) fn witness(args: &WitnessArgs, signing: &SigningArgs) -> Result<Exit, Failure> {
    if signing.signing_key.is_some()
        || signing.signer_command.is_some()
        || signing.witness.is_some()
    {
        return Err(Usage("`witness` takes --state, --key and --log-key, not the signing flags of the commands that write".into()).into());
    }
    let Some(log_key) = &signing.log_key else {
        return Err(Usage("`witness` needs --log-key PUB (the log's verifier key, KEYFILE.pub of the runtime's --signing-key)".into()).into());
    };
    let db = existing_database(args.db.location())?;
    let key = signer_key(&args.key, "--key")?;
    let log_key = log_verifier_key(log_key, "--log-key")?;
    if key.kind() == KeyType::Ed25519 {
        errln!(
            "rpr witness: warning: --key {} is a plain Ed25519 key: its cosignature states no \
             time. A witness key made by `rpr keygen --cosigner` signs timestamped \
             cosignature/v1 (c2sp.org/tlog-cosignature); auditors then need its KEYFILE.pub",
            args.key.display()
        );
    }
    let state = match std::fs::metadata(&args.state) {
        Ok(_) => Some(read_small(&args.state, "--state")?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("--state {}: {e}", args.state.display()).into()),
    };
    let store = ReadStore::open_read_only(db)?;
    let cosigned = log::witness(&store, &log_key, &key, state.as_deref())
        .map_err(|e| format!("{e} (state {} kept)", args.state.display()))?;
    let text = cosigned.note.to_text();
    write_atomically(&args.state, text.as_bytes())?;
    let at = cosigned
        .note
        .cosigned_at(&key.verifier())
        .map_or_else(String::new, |t| {
            format!(" at {}", crate::verify_proof::when(t))
        });
    match cosigned.previous {
        Some(old) => errln!(
            "rpr witness: cosigned {} events{at} (consistent with the {old} cosigned before)",
            cosigned.checkpoint.size
        ),
        None => errln!(
            "rpr witness: cosigned {} events{at} (first cosignature: the state begins here)",
            cosigned.checkpoint.size
        ),
    }
    print!("{text}");
    std::io::stdout().flush()?;
    Ok(Exit::Done)
}

/// Writes `bytes` to `path` through a synced temporary file renamed over it: a crash leaves
/// the old state or the new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let shown = path.display();
    let mut f = std::fs::File::create(&tmp).map_err(|e| format!("--state {shown}: {e}"))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("--state {shown}: {e}"))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("--state {shown}: {e}"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// The arguments of `proof`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProofArgs {
    #[command(flatten)]
    db: crate::commands::Database,
    /// The pathway whose events are proven.
    #[arg(long, value_name = "ID")]
    pathway: String,
    /// Where to write the proof file.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Prove against this checkpoint note (a witness's state, cosigned) instead of the
    /// stored one.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
}

/// `proof`: writes a proof file of the pathway's events against a signed checkpoint.
pub(crate) fn proof(args: &ProofArgs) -> Result<Exit, Failure> {
    let db = existing_database(args.db.location())?;
    let against = args
        .checkpoint
        .as_deref()
        .map(|p| read_small(p, "--checkpoint"))
        .transpose()?;
    let store = ReadStore::open_read_only(db)?;
    let file = log::prove(&store, &args.pathway, against.as_deref())?;
    let leaves = file.leaves.len();
    let origin = Note::parse(file.checkpoint.as_bytes())
        .ok()
        .and_then(|n| Checkpoint::parse(n.text()).ok())
        .map(|cp| cp.origin)
        .ok_or("the proof's checkpoint does not read back")?;
    let bytes = serde_json::to_vec_pretty(&file)?;
    std::fs::write(&args.out, bytes).map_err(|e| format!("--out {}: {e}", args.out.display()))?;
    say!(
        "wrote {}: {leaves} event(s) of pathway {} proven in the signed log {}; check it with `rpr verify-proof {} --key PUB --origin {}`",
        args.out.display(),
        crate::shown::text(&args.pathway),
        crate::shown::text(&origin),
        args.out.display(),
        crate::shown::text(&origin)
    );
    Ok(Exit::Done)
}

/// `verify --key`: the signed log checked with the key (and the witness's state).
pub(crate) fn verify_signed(
    store: &ReadStore,
    key: &Path,
    witness: Option<&Path>,
) -> Result<log::LogReport, Failure> {
    let key = log_verifier_key(key, "--key")?;
    let witness = witness
        .map(|p| witness_state(p, &key).map(|(_, cp)| cp))
        .transpose()?;
    Ok(log::verify_log(store, &key, witness.as_ref())?)
}

/// The arguments of `sign`.
#[derive(Debug, clap::Args)]
pub(crate) struct SignArgs {
    /// The signer key (KEYFILE from `rpr keygen`).
    #[arg(long, value_name = "KEYFILE")]
    key: PathBuf,
    /// Sign only checkpoints of this log (`rpr/` and the database identity, as `rpr
    /// checkpoint` prints it).
    #[arg(long, value_name = "ORIGIN")]
    origin: Option<String>,
}

/// `sign`: a signer command for `--signer-command`. Reads a checkpoint's text on stdin
/// (and nothing else: any other note is refused) and prints its signature line by
/// KEYFILE; nothing else on stdout. It signs any tree of the log it is handed: it keeps the
/// key's bytes from the database's writers, not their power to have it sign
/// (docs/evidence.md); a witness is what checks that a tree extends the last.
pub(crate) fn sign(args: &SignArgs) -> Result<Exit, Failure> {
    let key = log_signer_key(&args.key, "--key")?;
    let limit = u64::try_from(rpr::evidence::note::MAX_NOTE_BYTES).unwrap_or(u64::MAX);
    let mut text = String::new();
    std::io::stdin()
        .take(limit + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("stdin: not UTF-8 text ({e})"))?;
    let checkpoint = rpr::evidence::checkpoint::Checkpoint::parse(&text)
        .map_err(|e| format!("stdin: not a checkpoint's text ({e}); nothing signed"))?;
    if let Some(want) = &args.origin
        && checkpoint.origin != *want
    {
        return Err(format!(
            "stdin: a checkpoint of the log {}, not of --origin {}; nothing signed",
            crate::shown::text(&checkpoint.origin),
            crate::shown::text(want)
        )
        .into());
    }
    let mut note = rpr::evidence::note::Note::new(&text)
        .map_err(|e| format!("stdin: not a note's text: {e}"))?;
    note.sign(&key)?;
    let line = note
        .signatures()
        .last()
        .map(rpr::evidence::note::NoteSignature::line)
        .ok_or("no signature was made")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(Exit::Done)
}
