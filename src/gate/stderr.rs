//! What the gate says on stderr: one line per message, filtered by level, as text or as
//! JSON. Stderr is the process's, and so is this setting ([`set_logging`]): every gate
//! served in the process writes under it.

use std::os::fd::AsFd as _;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, mpsc};
use std::time::Duration;

/// How much the gate says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
#[non_exhaustive]
pub enum LogLevel {
    /// Only what went wrong or needs an operator: a server that stopped, a client that
    /// cannot be written to, a pin that cannot be checked.
    Warn,
    /// And one line per governed call's end and per server start (the default).
    #[default]
    Info,
    /// And the protocol's small events: cancellations of requests not being served,
    /// answers to requests the gate did not ask.
    Debug,
}

impl LogLevel {
    fn as_str(self) -> &'static str {
        match self {
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }
}

/// How each line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogFormat {
    /// For people: `rpr gate: …`, a warning marked `rpr gate: warning: …`; every string
    /// from a server, a client or an actor escaped ([`crate::shown::text`]).
    #[default]
    Text,
    /// One JSON object per line: `time` (UTC, RFC 3339, ms), `level` and `message`.
    Json,
}

/// The level and the format of the gate's stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Logging {
    /// The least important messages written.
    pub level: LogLevel,
    /// How they are written.
    pub format: LogFormat,
}

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);
static FORMAT: AtomicU8 = AtomicU8::new(LogFormat::Text as u8);

/// Sets how every gate of this process writes to stderr from now on.
pub fn set_logging(logging: Logging) {
    LEVEL.store(logging.level as u8, Ordering::Relaxed);
    FORMAT.store(logging.format as u8, Ordering::Relaxed);
}

/// Whether messages of `level` are written now.
pub(crate) fn enabled(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Writes one message of `level` (its text starting with `rpr gate: `), if enabled.
pub(crate) fn emit(level: LogLevel, message: &str) {
    if !enabled(level) {
        return;
    }
    let body = message.strip_prefix("rpr gate: ").unwrap_or(message);
    say(line_of(level, body));
}

/// The line of a message of `level`, in the format set, with its newline.
fn line_of(level: LogLevel, body: &str) -> String {
    let mut line = if FORMAT.load(Ordering::Relaxed) == LogFormat::Json as u8 {
        serde_json::json!({
            "time": crate::shown::utc(now_ms()).replacen(' ', "T", 1),
            "level": level.as_str(),
            "message": body,
        })
        .to_string()
    } else if level == LogLevel::Warn {
        format!("rpr gate: warning: {}", crate::shown::text(body))
    } else {
        format!("rpr gate: {}", crate::shown::text(body))
    };
    line.push('\n');
    line
}

/// How many lines may wait for stderr. Past that, a line is dropped and counted.
const QUEUED_LINES: usize = 1024;

/// What the writer thread is handed.
enum Entry {
    Line(String),
    /// Answered once every line queued before it was written (or dropped).
    Flush(mpsc::SyncSender<()>),
}

/// The queue of the thread that writes the gate's lines to stderr; `None` when that thread
/// could not be started (each line is then written by its caller).
static WRITER: OnceLock<Option<mpsc::SyncSender<Entry>>> = OnceLock::new();

/// Lines dropped because the queue was full, not said yet.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Writes `line` now where stderr takes it without waiting, else hands it to the writer
/// thread, so that no request waits on stderr: a host that pipes the gate's stderr and
/// does not read it (the spec lets a client ignore a server's log) fills the pipe, and a
/// write to a full pipe blocks until it is read. Measured before: the gate stopped
/// answering at the 1,167th call (each call's line written before its answer, every worker
/// then blocked behind the first). A line that finds the queue full is dropped; the writer
/// says how many were dropped before the next line it writes.
///
/// Written now: when no line is queued or being written (so lines keep their order), and
/// stderr is an empty pipe the line fits in (a write of at most its capacity into an empty
/// pipe copies it all and returns, Linux pipe(7)), a file or a device. Handing each line
/// to a thread instead cost a wake-up a call: 70 to 120 µs more of the gate's CPU a read.
fn say(line: String) {
    if let Ok(_writing) = WRITING.try_lock()
        && PENDING.load(Ordering::SeqCst) == 0
        && takes_at_once(line.len())
    {
        write_line(&line);
        return;
    }
    let writer = WRITER.get_or_init(|| {
        let (tx, rx) = mpsc::sync_channel(QUEUED_LINES);
        std::thread::Builder::new()
            .name("rpr-gate-stderr".into())
            .spawn(move || write_queued(&rx))
            .ok()
            .map(|_| tx)
    });
    let Some(writer) = writer else {
        write_line(&line);
        return;
    };
    PENDING.fetch_add(1, Ordering::SeqCst);
    match writer.try_send(Entry::Line(line)) {
        Ok(()) => {}
        Err(mpsc::TrySendError::Full(_)) => {
            PENDING.fetch_sub(1, Ordering::SeqCst);
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Err(mpsc::TrySendError::Disconnected(entry)) => {
            PENDING.fetch_sub(1, Ordering::SeqCst);
            if let Entry::Line(line) = entry {
                write_line(&line);
            }
        }
    }
}

/// Held while a line is written, by a caller or by the writer thread.
static WRITING: Mutex<()> = Mutex::new(());

/// Lines handed to the writer thread and not written (or dropped) yet.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// What stderr is, read once.
#[derive(Clone, Copy)]
enum Stderr {
    /// A pipe of this capacity.
    Pipe(usize),
    /// A file or a device: a write to it does not wait for a reader.
    File,
    /// Anything else (a socket, say): every line goes through the writer thread.
    Other,
}

/// Whether stderr takes `len` bytes now, without waiting.
fn takes_at_once(len: usize) -> bool {
    static KIND: OnceLock<Stderr> = OnceLock::new();
    let stderr = std::io::stderr();
    let fd = stderr.as_fd();
    let kind = *KIND.get_or_init(|| {
        if let Some(capacity) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
        {
            return Stderr::Pipe(capacity);
        }
        match nix::sys::stat::fstat(fd) {
            Ok(stat)
                if matches!(
                    nix::sys::stat::SFlag::from_bits_truncate(stat.st_mode)
                        & nix::sys::stat::SFlag::S_IFMT,
                    nix::sys::stat::SFlag::S_IFREG | nix::sys::stat::SFlag::S_IFCHR
                ) =>
            {
                Stderr::File
            }
            _ => Stderr::Other,
        }
    });
    match kind {
        Stderr::Pipe(capacity) => {
            len <= capacity && crate::mcp::session::writer::unread(fd) == Some(0)
        }
        Stderr::File => true,
        Stderr::Other => false,
    }
}

/// The writer thread: lives as long as the process.
fn write_queued(entries: &mpsc::Receiver<Entry>) {
    for entry in entries {
        match entry {
            Entry::Line(line) => {
                let _writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
                say_dropped();
                write_line(&line);
                PENDING.fetch_sub(1, Ordering::SeqCst);
            }
            Entry::Flush(done) => {
                say_dropped();
                let _ = done.send(());
            }
        }
    }
}

/// Says how many lines were dropped since it last said so, if any.
fn say_dropped() {
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        write_line(&dropped_line(dropped));
    }
}

/// The line that says `dropped` lines were not written.
fn dropped_line(dropped: u64) -> String {
    line_of(
        LogLevel::Warn,
        &format!(
            "{dropped} log line(s) were dropped: stderr was not being read, and the gate does \
             not wait for it"
        ),
    )
}

/// Flushes the gate's queued stderr lines when dropped: on every return of a serving
/// function, so a gate's last lines are written before its caller goes on (or exits).
pub(crate) struct FlushOnReturn;

impl Drop for FlushOnReturn {
    fn drop(&mut self) {
        flush(Duration::from_secs(1));
    }
}

/// Waits until the lines queued so far are written, at most `within` (a stderr nobody
/// reads is not waited for longer).
pub(crate) fn flush(within: Duration) {
    let Some(Some(writer)) = WRITER.get() else {
        return;
    };
    let (done, written) = mpsc::sync_channel(1);
    // A full queue is a stderr nobody reads: nothing to wait for.
    if writer.try_send(Entry::Flush(done)).is_ok() {
        let _ = written.recv_timeout(within);
    }
}

/// Writes `line` to stderr in one `write` where the pipe takes it whole (`eprintln!` of a
/// formatted line writes each of its pieces with a `write` of its own: three a line). A
/// stderr that cannot be written to (its reader gone) is ignored: `eprintln!` panics there.
fn write_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
