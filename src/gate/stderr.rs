//! What the gate says on stderr: one line per message, filtered by level, as text or as
//! JSON. Stderr is the process's, and so is this setting ([`set_logging`]): every gate
//! served in the process writes under it.

use std::sync::atomic::{AtomicU8, Ordering};

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
    write_line(&line);
}

/// Writes `line` to stderr in one `write` where the pipe takes it whole (`eprintln!` of a
/// formatted line writes each of its pieces with a `write` of its own: three a line). A
/// stderr that cannot be written to is ignored, as `eprintln!` would not be.
fn write_line(line: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
