//! `rpr-mcp`: the read-only MCP inspection server for an rpr database.
//!
//! Speaks MCP `2025-11-25` over stdio (one JSON-RPC message per line, through
//! [`rpr::jsonrpc::server`]) and offers five read-only tools built on [`rpr::inspect`].
//! The database is opened with [`ReadStore::open_read_only`]; nothing this program runs
//! can write it. See `docs/inspection.md`.
//!
//! Here: the command line and the process (exit codes, SIGTERM, whole-line output); the MCP
//! methods and tool calls are in `methods.rs`, the tool definitions in `tools.rs`.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use rpr::jsonrpc::server::Server;
use rpr::jsonrpc::{JsonRpcError, MessageReader, MessageWriter};
use rpr::store::{ReadStore, StoreError};

use methods::Inspector;

/// `eprintln!` that cannot panic: a stderr nobody reads any more (a closed pipe) is
/// ignored, so the exit status stays the one below (`eprintln!` panics there: status 101).
macro_rules! errln {
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        let _ = io::stderr().lock().write_all(line.as_bytes());
    }};
}

mod methods;
mod tools;

/// Largest accepted input line (one message), 4 MiB. Longer lines are skipped.
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// Largest response line, 10 MiB (the limit common clients enforce).
const MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

const EXIT_USAGE: u8 = 2;
const EXIT_MISSING: u8 = 3;
const EXIT_NOT_RPR: u8 = 4;
const EXIT_TOO_NEW: u8 = 5;
const EXIT_OTHER: u8 = 1;

const HELP: &str =
    "rpr-mcp: read-only MCP inspection server for an rpr database (MCP 2025-11-25 over stdio)

Usage: rpr-mcp --database PATH|URL

Options:
  --database PATH  the rpr database file to inspect (required; opened read-only), or a
                   postgres://user:password@host:port/db URL (builds with the `postgres`
                   feature; connect as a role without write privileges, e.g. rpr_reader;
                   the session is read-only too)
  -h, --help       print this help and exit
  -V, --version    print the version and exit

Exit status: 0 on end of input or SIGTERM, 1 the database could not be read, 2 usage error,
3 no such database file, 4 not an rpr database, 5 database schema newer than this build.";

/// Serializes writes to stdout, so a SIGTERM exit never cuts a line in half.
static OUTPUT: Mutex<()> = Mutex::new(());

fn main() -> ExitCode {
    let path = match parse_args(std::env::args_os().skip(1).collect()) {
        Ok(Args::Run(path)) => path,
        Ok(Args::Help) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Ok(Args::Version) => {
            println!("rpr-mcp {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            errln!("rpr-mcp: {msg}; try --help");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    exit_cleanly_on_sigterm();
    let store = match ReadStore::open_read_only(&path) {
        Ok(s) => s,
        Err(e) => {
            let code = match &e {
                StoreError::Missing(_) => EXIT_MISSING,
                StoreError::NotRprDatabase(_) => EXIT_NOT_RPR,
                StoreError::SchemaTooNew { .. } => EXIT_TOO_NEW,
                _ => EXIT_OTHER,
            };
            errln!("rpr-mcp: {}", one_line(&e.to_string()));
            return ExitCode::from(code);
        }
    };
    let mut server = Server::new(
        MessageReader::with_max_message_bytes(io::stdin().lock(), MAX_LINE_BYTES),
        MessageWriter::with_max_message_bytes(WholeLines::default(), MAX_RESPONSE_BYTES),
    );
    let mut inspector = Inspector::new(store);
    match server.serve(&mut inspector) {
        // A write failure: the client closed our stdout, nobody is listening any more.
        Ok(()) | Err(JsonRpcError::Write { .. }) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("rpr-mcp: reading stdin: {}", one_line(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

// ---------------------------------------------------------------------------
// Command line and process
// ---------------------------------------------------------------------------

enum Args {
    Run(PathBuf),
    Help,
    Version,
}

fn parse_args(args: Vec<OsString>) -> Result<Args, String> {
    let mut database: Option<PathBuf> = None;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let value = match arg.to_str() {
            Some("-h" | "--help") => return Ok(Args::Help),
            Some("-V" | "--version") => return Ok(Args::Version),
            Some("--database") => it.next().ok_or("--database needs a PATH")?,
            Some(s) if s.starts_with("--database=") => OsString::from(&s["--database=".len()..]),
            _ => return Err(format!("unexpected argument {:?}", arg.to_string_lossy())),
        };
        if value.is_empty() {
            return Err("--database needs a non-empty PATH".into());
        }
        if database.replace(PathBuf::from(value)).is_some() {
            return Err("--database given twice".into());
        }
    }
    database
        .map(Args::Run)
        .ok_or_else(|| "missing --database PATH".into())
}

/// Blocks SIGTERM in this thread (and so in every thread started later) and
/// waits for it on a dedicated thread, which exits 0 between two messages.
/// Uses `sigwait`, so no handler and no unsafe code is needed.
fn exit_cleanly_on_sigterm() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        loop {
            if let Ok(Signal::SIGTERM) = set.wait() {
                let _guard = OUTPUT.lock();
                std::process::exit(0);
            }
        }
    });
}

/// Standard output a whole line at a time: bytes are held until `flush` (which the
/// writer calls after each message) and written under [`OUTPUT`].
#[derive(Default)]
struct WholeLines(Vec<u8>);

impl Write for WholeLines {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _guard = OUTPUT.lock();
        let mut out = io::stdout().lock();
        let written = out.write_all(&self.0).and_then(|()| out.flush());
        self.0.clear();
        written
    }
}
