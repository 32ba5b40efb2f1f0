//! `rpr`: the operator's command line for responsibility pathways.
//!
//! `call` runs a consequential MCP tool call through a pathway (propose → admit → Human
//! Gate → bind → dispatch → readback) against the stdio servers of an MCP client
//! configuration (`mcpServers` JSON) under a small JSON policy; the other commands take the
//! next step of a pathway (`approve`, `deny`, `reconcile`, `repair`, `resume`, `hold`,
//! `release`, `escalate`, `stop`, `abort`, `attest`, `require-repair`) or read a database
//! (`unresolved`, `status`, `verify`, `show`, `list`, `log`). `gate` governs an MCP server as a stdio proxy;
//! `copy-to-postgres` moves a database into PostgreSQL (feature `postgres`); `keygen` writes
//! a signing key for signed checkpoints and `verify-proof` checks a proof file offline
//! (docs/evidence.md). See
//! `docs/host.md`; `rpr help COMMAND` says what each command takes.
//!
//! The example host (`cargo run --example host -- demo`) tells the same story on real
//! processes in its own short code, with the library alone.

/// Whether a step command writes one JSON document on stdout (`--json`): its text for
/// people then goes to stderr.
static JSON_OUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `--json` moved the text for people to stderr.
pub(crate) fn json_out() -> bool {
    JSON_OUT.load(std::sync::atomic::Ordering::Relaxed)
}

/// `eprintln!` that cannot panic: the line is formatted first and written with one `write`
/// where the pipe takes it whole, and a stderr that cannot be written to is ignored.
/// `eprintln!` panics when stderr's reader has gone (a closed pipe): a gate whose log
/// reader went away would stop serving at its next line.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::write_stderr_line(&format!($($arg)*))
    };
}

/// Writes `line` and a newline to stderr (see `errln!`).
pub(crate) fn write_stderr_line(line: &str) {
    use std::io::Write;
    let mut whole = String::with_capacity(line.len() + 1);
    whole.push_str(line);
    whole.push('\n');
    let _ = std::io::stderr().lock().write_all(whole.as_bytes());
}

/// `println!` for the text a step command prints for people: on stderr under `--json`, where
/// stdout carries the one JSON document.
/// `println!` for the commands' output. When whoever reads stdout has gone (`rpr status |
/// head -1`), the program ends at once with status 141, what a shell reports for a program
/// ended by SIGPIPE, instead of panicking; any other write error ends it with status 1 and a
/// message on stderr. A step cut short so is a crash like any other: its attempt record, if
/// written, is recovered as unknown, never resent; a server it started dies with it.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_stdout_line(format_args!($($arg)*))
    };
}

pub(crate) fn write_stdout_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    WROTE_STDOUT.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(line).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        errln!("rpr: writing stdout: {e}");
        std::process::exit(1);
    }
}

/// Whether anything was written on stdout (a read command's `--json` error document is
/// written only when its command wrote nothing there).
static WROTE_STDOUT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Escaped by [`shown::text`]: a server's, a client's or an actor's string in it cannot
/// redraw the terminal.
macro_rules! say {
    ($($arg:tt)*) => {{
        let line = crate::shown::text(&format!($($arg)*));
        if crate::json_out() {
            errln!("{line}");
        } else {
            outln!("{line}");
        }
    }};
}

/// `errln!` escaped by [`shown::text`], for what the gate tells its log (stderr): it
/// quotes servers, clients and actors.
macro_rules! note {
    ($($arg:tt)*) => {
        errln!("{}", crate::shown::text(&format!($($arg)*)))
    };
}

mod commands;
mod config;
mod console;
mod copy;
mod flow;
mod gate;
mod generate;
mod interrupt;
mod keygen;
mod launch;
mod log;
mod pin_review;
mod verify_proof;
pub(crate) use rpr::shown;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub(crate) use flow::Exit;

/// The error of a command: exit status 2 when it is a [`Usage`], else 1.
pub(crate) type Failure = Box<dyn std::error::Error>;

/// A usage error that clap's parser does not catch (exit 2).
#[derive(Debug)]
pub(crate) struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

const AFTER_HELP: &str = "\
Exit status, the same for every command: 0 done; 3 the pathway needs another step
before the call is done (printed: an approval, the gate's repeat, a reconcile); 4 the
pathway is denied, final (`call --deny-as`, `deny`, the policy); 1 error; 2 bad usage;
141 its stdout was closed (`rpr status | head -1`); 130 interrupted (Ctrl-C) before a
call was sent, or interrupted twice. docs/host.md has the table.
--args takes the tool's arguments as JSON text, as @FILE (read from a file), or as - (stdin).
`call` asks at the terminal when a Human Gate needs a decision; without a terminal and
without --approve-as/--deny-as it leaves the pathway at the gate and prints how to approve.";

/// What `--version` prints after `rpr `: the version, the git commit it was built from
/// (`unknown` outside a git checkout) and the cargo features it was built with.
fn version_line() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        let features: Vec<&str> = [("postgres", cfg!(feature = "postgres"))]
            .iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect();
        format!(
            "{} (commit {}; features: {})",
            env!("CARGO_PKG_VERSION"),
            env!("RPR_COMMIT"),
            if features.is_empty() {
                "none".to_owned()
            } else {
                features.join(", ")
            }
        )
    })
}

/// Runs consequential MCP tool calls through responsibility pathways, and takes their next steps.
#[derive(Debug, Parser)]
#[command(name = "rpr", version = version_line(), after_help = AFTER_HELP, arg_required_else_help = true)]
pub(crate) struct Cli {
    /// Print one JSON document on stdout (`unresolved`, `status`, `show`, `list`, `verify`, `pin`, `log` (a JSON object per line),
    /// `copy-to-postgres`, `verify-proof`, and `call` and the steps on a pathway: its state and next step after the command; their text goes to stderr).
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    signing: log::SigningArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Propose a tool call and take it through admission, the Human Gate, dispatch and readback.
    Call(commands::CallArgs),
    /// Approve a pathway left at the Human Gate (or awaiting approval), then carry the call out (a gate's: approve only).
    Approve(commands::ApproveArgs),
    /// Deny a pathway left at the Human Gate, awaiting approval, or left proposed.
    Deny(commands::ReasonStep),
    /// Run the recovery scan, then list every unresolved pathway and who must act next.
    Unresolved(commands::Database),
    /// Reconcile an unknown (or returned) pathway by the policy's readback.
    Reconcile(commands::ReconcileArgs),
    /// Record repair evidence on a pathway that requires repair (repair owner).
    Repair(commands::RepairArgs),
    /// Dispatch a new attempt of a repaired (or approved) pathway.
    Resume(commands::LiveStep),
    /// Hold an approved pathway before it is dispatched (stop authority).
    Hold(commands::ReasonStep),
    /// Release a held pathway: approved again (stop authority).
    Release(commands::Step),
    /// Send a held or awaiting pathway to a Human Gate (stop authority).
    Escalate(commands::Step),
    /// Stop a pathway whose success reply is not yet confirmed (stop authority).
    Stop(commands::ReasonStep),
    /// End a pathway for good, recording what is left behind (residual owner).
    Abort(commands::AbortArgs),
    /// Decide an unknown pathway by attestation (evidence owner or repair owner).
    Attest(commands::AttestArgs),
    /// Send a stopped or partially completed pathway to repair (repair owner).
    RequireRepair(commands::Step),
    /// Check the ledger's hash chain and the stored states against it, read-only.
    Verify(commands::VerifyArgs),
    /// Show the schema version, pathways by state, unresolved count and ledger head, read-only.
    Status(commands::Database),
    /// Show one pathway: the request, its attempts and bindings, approvals, timeline and who acts next, read-only.
    Show(commands::ShowArgs),
    /// List pathways by state, proposer (--actor) or approver, a page at a time, read-only.
    List(commands::ListArgs),
    /// Print the ledger's events in order, one line each (--follow: and every later one), read-only.
    Log(commands::LogArgs),
    /// Govern an MCP stdio server as a proxy in front of it: every tools/call a pathway (docs/gate.md).
    Gate(gate::GateArgs),
    /// Serve a local web page for operators: approvals waiting with the whole request, unresolved pathways, tool changes, the ledger's status (docs/console.md).
    Console(console::ConsoleArgs),
    /// List the gate's tool pins and the changes waiting, or pin a changed tool by its digest.
    Pin(gate::PinArgs),
    /// Copy a SQLite database into an empty PostgreSQL store, then mark it moved (no more steps).
    CopyToPostgres(copy::CopyArgs),
    /// Write a new Ed25519 signing key for signed checkpoints: KEYFILE (secret, 0600) and KEYFILE.pub.
    Keygen(keygen::KeygenArgs),
    /// Check a proof file offline with the log's public key: its signed checkpoint and each leaf's inclusion proof.
    VerifyProof(verify_proof::VerifyProofArgs),
    /// Print the newest signed checkpoint of the log (--begin: sign a log that has none yet).
    Checkpoint(log::CheckpointArgs),
    /// Cosign the database's checkpoint as a witness if it extends the one cosigned before.
    Witness(log::WitnessArgs),
    /// Write a proof file of a pathway's events in the signed log, for `verify-proof`.
    Proof(log::ProofArgs),
    /// Sign a checkpoint read on stdin with KEYFILE and print the signature line (a --signer-command).
    Sign(log::SignArgs),
    /// Print a completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(generate::CompletionsArgs),
    /// Print the man page of rpr, or of one command (`rpr man call | man -l -`).
    Man(generate::ManArgs),
}

impl Command {
    /// The pathway this command takes a step on, if it is a step.
    fn step(&self) -> Option<commands::Located<'_>> {
        Some(match self {
            Command::Approve(a) => a.live.step.located(),
            Command::Resume(a) => a.step.located(),
            Command::Deny(a) | Command::Hold(a) | Command::Stop(a) => a.step.located(),
            Command::Reconcile(a) => a.located(),
            Command::Repair(a) => a.step.located(),
            Command::Release(a) | Command::Escalate(a) | Command::RequireRepair(a) => a.located(),
            Command::Abort(a) => a.step.located(),
            Command::Attest(a) => a.step.located(),
            _ => return None,
        })
    }
}

impl Command {
    /// Whether the command takes steps (and so signs the log with `--signing-key`).
    fn writes(&self) -> bool {
        self.step().is_some()
            || matches!(
                self,
                Command::Call(_)
                    | Command::Unresolved(_)
                    | Command::Gate(_)
                    | Command::Console(_)
                    | Command::Pin(_)
                    | Command::Checkpoint(_)
            )
    }
}

fn run(cli: &Cli) -> Result<Exit, Failure> {
    if cli.command.writes() {
        log::configure(&cli.signing)?;
    } else if matches!(cli.command, Command::Witness(_)) {
        // `witness` checks its own flags.
    } else if cli.signing.any() {
        return Err(Usage(
            "--signing-key, --signer-command and --log-key apply to the commands that write (call, gate, pin, unresolved, checkpoint and the steps on a pathway)".into(),
        )
        .into());
    } else if cli.signing.witness.is_some() && !matches!(cli.command, Command::Verify(_)) {
        return Err(Usage(
            "--witness applies to `verify --key` and the commands that write".into(),
        )
        .into());
    }
    let json = cli.json;
    let reads = matches!(
        cli.command,
        Command::Unresolved(_)
            | Command::Status(_)
            | Command::Show(_)
            | Command::List(_)
            | Command::Log(_)
            | Command::Verify(_)
            | Command::Pin(_)
            | Command::CopyToPostgres(_)
            | Command::VerifyProof(_)
    );
    if json && let Command::Call(args) = &cli.command {
        JSON_OUT.store(true, std::sync::atomic::Ordering::Relaxed);
        let result = dispatch(cli, json);
        commands::print_call_json(args, &result)?;
        return result;
    }
    if json && !reads {
        let Some(step) = cli.command.step() else {
            return Err(Usage(
                "`--json` applies to `call`, `unresolved`, `status`, `show`, `list`, `log`, `verify`, `pin`, `copy-to-postgres`, `verify-proof` and the steps on a pathway, not to `gate` (its stdout is the MCP protocol) or the key and log commands".into(),
            )
            .into());
        };
        JSON_OUT.store(true, std::sync::atomic::Ordering::Relaxed);
        let result = dispatch(cli, json);
        commands::print_step_json(&step, &result)?;
        return result;
    }
    let result = dispatch(cli, json);
    if json
        && let Err(e) = &result
        && !WROTE_STDOUT.load(std::sync::atomic::Ordering::Relaxed)
    {
        // The same document a step writes on error: `exit` and `error`.
        let doc = serde_json::json!({"exit": "error", "error": e.to_string()});
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    }
    result
}

fn dispatch(cli: &Cli, json: bool) -> Result<Exit, Failure> {
    match &cli.command {
        Command::Call(a) => a.lease.apply(),
        Command::Approve(a) => a.live.lease.apply(),
        Command::Resume(a) => a.lease.apply(),
        _ => {}
    }
    match &cli.command {
        Command::Call(a) => commands::call(a),
        Command::Approve(a) => commands::approve(a),
        Command::Deny(a) => commands::deny(a),
        Command::Unresolved(a) => commands::unresolved(a, json),
        Command::Reconcile(a) => commands::reconcile(a),
        Command::Repair(a) => commands::repair(a),
        Command::Resume(a) => commands::resume(a),
        Command::Hold(a) => commands::hold(a),
        Command::Release(a) => commands::release(a),
        Command::Escalate(a) => commands::escalate(a),
        Command::Stop(a) => commands::stop(a),
        Command::Abort(a) => commands::abort(a),
        Command::Attest(a) => commands::attest(a),
        Command::RequireRepair(a) => commands::require_repair(a),
        Command::Verify(a) => commands::verify(a, cli.signing.witness.as_deref(), json),
        Command::Status(a) => commands::status(a, json),
        Command::Show(a) => commands::show(a, json),
        Command::List(a) => commands::list(a, json),
        Command::Log(a) => commands::log(a, json),
        Command::Gate(a) => gate::run(a),
        Command::Console(a) => console::run(a, &cli.signing),
        Command::Pin(a) => gate::pin(a, json),
        Command::CopyToPostgres(a) => copy::copy_to_postgres(a, json),
        Command::Keygen(a) => keygen::keygen(a),
        Command::VerifyProof(a) => verify_proof::verify_proof(a, json),
        Command::Checkpoint(a) => log::checkpoint(a),
        Command::Witness(a) => log::witness(a, &cli.signing),
        Command::Proof(a) => log::proof(a),
        Command::Sign(a) => log::sign(a),
        Command::Completions(a) => generate::completions(a),
        Command::Man(a) => generate::man(a),
    }
}

/// Which argument is not UTF-8 (clap only says that one is).
fn non_utf8_argument() -> Usage {
    let found = std::env::args_os()
        .skip(1)
        .enumerate()
        .find(|(_, a)| a.to_str().is_none());
    Usage(match found {
        Some((i, a)) => format!(
            "argument {} is not valid UTF-8 ({}); give paths and values in UTF-8",
            i + 1,
            a.to_string_lossy()
        ),
        None => "an argument is not valid UTF-8; give paths and values in UTF-8".into(),
    })
}

fn main() -> ExitCode {
    // Help, version and clap's usage errors exit here (0, or 2 for an error).
    let parsed = Cli::command().try_get_matches().and_then(|m| {
        Ok((
            m.subcommand_name().unwrap_or_default().to_owned(),
            Cli::from_arg_matches(&m)?,
        ))
    });
    let (name, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(e) if e.kind() == ErrorKind::InvalidUtf8 => {
            errln!("rpr: {}", non_utf8_argument());
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    if matches!(
        cli.command,
        Command::Call(_) | Command::Approve(_) | Command::Resume(_) | Command::Reconcile(_)
    ) {
        interrupt::install(interrupt::Meaning::Call);
    } else if matches!(cli.command, Command::Gate(_)) {
        interrupt::install(interrupt::Meaning::Gate);
    }
    let result = run(&cli);
    if interrupt::interrupted() && !matches!(result, Ok(Exit::Interrupted)) {
        errln!(
            "rpr {name}: interrupted while a step was under way: it was finished and recorded, as said above"
        );
    }
    match result {
        Ok(Exit::Interrupted) => ExitCode::from(130),
        Ok(Exit::Done) => ExitCode::SUCCESS,
        Ok(Exit::Pending) => ExitCode::from(3),
        Ok(Exit::Denied) => ExitCode::from(4),
        Err(e) if e.is::<Usage>() => {
            let e = shown::text(&e.to_string());
            errln!("rpr {name}: {e}\n\nFor more information, try 'rpr {name} --help'.");
            ExitCode::from(2)
        }
        Err(e) => {
            // An error may quote a server, a client or an actor.
            errln!("rpr {name}: error: {}", shown::text(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
