//! What the gate says on stderr: one line per message, filtered by level, as text or as
//! JSON. Stderr is the process's, and so is this setting ([`set_logging`]): every gate
//! served in the process writes under it.

use std::os::fd::AsFd as _;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
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
/// Written now only when no line is queued or being written (so lines keep their order),
/// and then ([`written_now`]): into a pipe, by a write that cannot wait; into a file or a
/// device, by a plain write. Handing each line to a thread instead cost a wake-up a call:
/// 70 to 120 µs more of the gate's CPU a read.
fn say(line: String) {
    let line = match WRITING.try_lock() {
        Ok(_writing) if PENDING.load(Ordering::SeqCst) == 0 => {
            if !written_now(&line) {
                // Queued while the lock is held: no later line is written before it.
                queue(line);
            }
            return;
        }
        _ => line,
    };
    queue(line);
}

/// Hands `line` to the writer thread (started on first use); past [`QUEUED_LINES`] waiting,
/// drops and counts it.
fn queue(line: String) {
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

/// Set once the kernel refused a write that cannot wait (`RWF_NOWAIT`) on stderr's pipe.
static NOWAIT_REFUSED: AtomicBool = AtomicBool::new(false);

/// Writes `line` to stderr now if that cannot wait for a reader; `false` (nothing written)
/// when it would have to wait, or when it cannot tell.
///
/// - A pipe: a line of at most `PIPE_BUF` bytes (4,096) is written with `RWF_NOWAIT`, which
///   a pipe answers like a non-blocking descriptor: it takes the whole line, or nothing
///   (`EAGAIN`), pipe(7). Nothing is judged before the write, so another writer of the same
///   pipe (the `rpr` binary's own lines, another process) cannot fill it in between. A
///   longer line is queued. Where the kernel refuses `RWF_NOWAIT` on a pipe, a line is
///   written only into an empty pipe (`FIONREAD`) it fits in (`F_GETPIPE_SZ`): a write of at
///   most the capacity into an empty pipe copies it all and returns; that check and the
///   write are two steps, and another writer could fill the pipe between them.
/// - A file or a character device: written (a write to it does not wait for a reader).
/// - Anything else: `false`.
///
/// A write that fails otherwise (the reader gone) drops the line, as [`write_line`] does,
/// and counts as written.
fn written_now(line: &str) -> bool {
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
            if !NOWAIT_REFUSED.load(Ordering::Relaxed) {
                if line.len() > PIPE_BUF {
                    return false;
                }
                match write_without_waiting(fd, line.as_bytes()) {
                    NoWait::Written | NoWait::Failed => return true,
                    NoWait::Full => return false,
                    NoWait::Refused => NOWAIT_REFUSED.store(true, Ordering::Relaxed),
                }
            }
            if line.len() <= capacity && crate::mcp::session::writer::unread(fd) == Some(0) {
                write_line(line);
                return true;
            }
            false
        }
        Stderr::File => {
            write_line(line);
            true
        }
        Stderr::Other => false,
    }
}

/// The most a pipe writes whole or not at all (pipe(7); 4,096 on Linux).
const PIPE_BUF: usize = 4096;

/// What a write that cannot wait did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoWait {
    /// The whole line was written.
    Written,
    /// The pipe had no room for the whole line; nothing was written.
    Full,
    /// The kernel does not take `RWF_NOWAIT` here; nothing was written.
    Refused,
    /// The write failed otherwise (the pipe's reader gone, say).
    Failed,
}

/// Writes `bytes` (at most [`PIPE_BUF`]) to the pipe `fd` with `pwritev2(…, RWF_NOWAIT)`.
fn write_without_waiting(fd: std::os::fd::BorrowedFd<'_>, bytes: &[u8]) -> NoWait {
    use nix::errno::Errno;
    use std::os::fd::AsRawFd as _;
    debug_assert!(bytes.len() <= PIPE_BUF);
    let iov = nix::libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    loop {
        #[expect(
            unsafe_code,
            reason = "pwritev2(2) of one borrowed buffer on a borrowed descriptor"
        )]
        // SAFETY: `fd` is borrowed for this call, so it stays open; `iov` describes `bytes`,
        // alive and unchanged for the call, which the kernel only reads; the count is 1.
        let rc = unsafe {
            nix::libc::pwritev2(fd.as_raw_fd(), &raw const iov, 1, -1, nix::libc::RWF_NOWAIT)
        };
        match usize::try_from(rc) {
            Ok(n) if n == bytes.len() => return NoWait::Written,
            Ok(n) => {
                // A pipe takes at most PIPE_BUF bytes whole or not at all, so this is not
                // expected; the rest is written after it, waiting, to keep the line whole.
                write_line_bytes(bytes.get(n..).unwrap_or_default());
                return NoWait::Written;
            }
            Err(_) => match Errno::last() {
                Errno::EINTR => {}
                Errno::EAGAIN => return NoWait::Full,
                Errno::EOPNOTSUPP | Errno::EINVAL | Errno::ENOSYS => return NoWait::Refused,
                _ => return NoWait::Failed,
            },
        }
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
    write_line_bytes(line.as_bytes());
}

/// [`write_line`]'s bytes.
fn write_line_bytes(bytes: &[u8]) {
    use std::io::Write as _;
    let _ = std::io::stderr().lock().write_all(bytes);
}

#[cfg(test)]
mod tests {
    use super::{NoWait, PIPE_BUF, write_without_waiting};
    use crate::mcp::session::writer::unread;
    use std::io::Read as _;
    use std::os::fd::AsFd as _;

    /// Fills `w` with non-blocking writes of its own until the pipe takes no more.
    fn fill(w: &std::io::PipeWriter) -> usize {
        let chunk = [b'f'; 512];
        let mut n = 0;
        while write_without_waiting(w.as_fd(), &chunk) == NoWait::Written {
            n += chunk.len();
        }
        n
    }

    #[test]
    fn a_line_goes_into_a_pipe_whole_or_not_at_all_and_a_full_pipe_does_not_wait() {
        let (mut r, w) = std::io::pipe().expect("a pipe");
        let line = format!("rpr gate: {}\n", "x".repeat(1000));
        // Room: the whole line.
        assert_eq!(
            write_without_waiting(w.as_fd(), line.as_bytes()),
            NoWait::Written
        );
        let mut got = vec![0; line.len()];
        r.read_exact(&mut got).expect("the line");
        assert_eq!(got, line.as_bytes());
        // Full (filled by another writer of the same pipe): nothing, at once.
        let filled = fill(&w);
        assert!(filled >= 4096, "the pipe took {filled} bytes");
        let started = std::time::Instant::now();
        assert_eq!(
            write_without_waiting(w.as_fd(), line.as_bytes()),
            NoWait::Full
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(
            unread(r.as_fd()),
            Some(filled),
            "nothing of the line went in"
        );
        // Some room, less than the line: still nothing of it.
        let mut some = vec![0; 100];
        r.read_exact(&mut some).expect("100 bytes");
        assert_eq!(
            write_without_waiting(w.as_fd(), line.as_bytes()),
            NoWait::Full
        );
        assert_eq!(unread(r.as_fd()), Some(filled - 100));
        // Read out: the line goes in whole, after the other writer's bytes.
        let mut rest = vec![0; filled - 100];
        r.read_exact(&mut rest).expect("the filler");
        assert!(rest.iter().all(|&b| b == b'f'));
        let longest = "y".repeat(PIPE_BUF);
        assert_eq!(
            write_without_waiting(w.as_fd(), longest.as_bytes()),
            NoWait::Written
        );
        assert_eq!(unread(r.as_fd()), Some(PIPE_BUF));
    }

    #[test]
    fn a_pipe_whose_reader_is_gone_fails_the_write_without_waiting() {
        let (r, w) = std::io::pipe().expect("a pipe");
        drop(r);
        assert_eq!(
            write_without_waiting(w.as_fd(), b"rpr gate: stopped\n"),
            NoWait::Failed
        );
    }
}
