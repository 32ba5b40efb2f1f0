//! The writer side of a session: the server's stdin (or the caller's writer) as an
//! [`Outlet`] that the writer thread writes queued lines to, one at a time, and that a
//! caller may write its own line to when nothing is queued before it and the whole line
//! fits without waiting ([`Lines::write_now`]); and the ticket through which a caller
//! follows how much of its line got out.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::reader::Incoming;
use crate::jsonrpc::{JsonRpcError, MessageWriter};

pub(super) enum WriteJob {
    Line {
        line: Vec<u8>,
        ticket: Option<Arc<Ticket>>,
    },
    Close,
}

/// Where a session's lines go: the writer, shared by the writer thread and callers that
/// write their line themselves, and the count of jobs handed to the thread and not done.
pub(super) struct Outlet {
    /// `None` once the writer thread closed it (a [`WriteJob::Close`]).
    sink: parking_lot::Mutex<Option<Box<dyn Sink>>>,
    /// Jobs sent to the writer thread that it has not finished. A line is written by its
    /// caller only when this is 0, so no line overtakes one queued before it.
    queued: AtomicUsize,
}

/// The writer of a session's lines.
pub(super) trait Sink: Send {
    fn write_line(
        &mut self,
        line: &[u8],
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize, JsonRpcError>;

    /// Bytes a write takes now without waiting (0: unknown, or none).
    fn room(&self) -> usize;
}

/// A writer over a stream whose room is not known: every line goes through the thread.
pub(super) struct Stream<W>(pub(super) MessageWriter<W>);

impl<W: Write + Send> Sink for Stream<W> {
    fn write_line(
        &mut self,
        line: &[u8],
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize, JsonRpcError> {
        self.0.write_encoded(line, progress)
    }

    fn room(&self) -> usize {
        0
    }
}

/// A writer over a pipe (a server's stdin): its room is the pipe's whole capacity while
/// the server has read everything written to it, and none otherwise.
pub(super) struct Pipe<W> {
    writer: MessageWriter<W>,
    /// The pipe's capacity (`F_GETPIPE_SZ`), 0 if it could not be read.
    capacity: usize,
}

impl<W: Write + Send + AsFd> Pipe<W> {
    pub(super) fn new(writer: MessageWriter<W>) -> Self {
        let capacity = nix::fcntl::fcntl(writer.get_ref(), nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        Self { writer, capacity }
    }
}

impl<W: Write + Send + AsFd> Sink for Pipe<W> {
    fn write_line(
        &mut self,
        line: &[u8],
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize, JsonRpcError> {
        self.writer.write_encoded(line, progress)
    }

    fn room(&self) -> usize {
        if self.capacity > 0 && unread(self.writer.get_ref().as_fd()) == Some(0) {
            // Empty, the pipe takes `capacity` bytes at once: a write of at most that many
            // copies them all into its buffers and returns (Linux pipe(7)).
            self.capacity
        } else {
            0
        }
    }
}

/// Bytes written to the pipe `fd` and not read yet (`FIONREAD`, which Linux answers on
/// either end of a pipe).
pub(crate) fn unread(fd: BorrowedFd<'_>) -> Option<usize> {
    let mut n: nix::libc::c_int = 0;
    #[expect(
        unsafe_code,
        reason = "ioctl(2) FIONREAD on a borrowed descriptor, into an int on the stack"
    )]
    // SAFETY: `fd` is a descriptor borrowed for this call, so it stays open; FIONREAD
    // writes exactly one `c_int` through the pointer, which points to `n`, alive and
    // exclusively borrowed for the call.
    let rc = unsafe { nix::libc::ioctl(fd.as_raw_fd(), nix::libc::FIONREAD, &raw mut n) };
    if rc == 0 {
        usize::try_from(n).ok()
    } else {
        None
    }
}

/// The sending end of a session's lines: to the writer thread, or written at once.
#[derive(Clone)]
pub(super) struct Lines {
    jobs: mpsc::Sender<WriteJob>,
    outlet: Arc<Outlet>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("queued", &self.outlet.queued.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl Lines {
    /// The lines of a session writing to `sink`, and the receiver its writer thread takes
    /// jobs from ([`writer_loop`]).
    pub(super) fn new(sink: Box<dyn Sink>) -> (Self, mpsc::Receiver<WriteJob>, Arc<Outlet>) {
        let (jobs, receiver) = mpsc::channel();
        let outlet = Arc::new(Outlet {
            sink: parking_lot::Mutex::new(Some(sink)),
            queued: AtomicUsize::new(0),
        });
        let lines = Self {
            jobs,
            outlet: Arc::clone(&outlet),
        };
        (lines, receiver, outlet)
    }

    /// Hands `job` to the writer thread. `Err`: the thread has stopped.
    pub(super) fn queue(&self, job: WriteJob) -> Result<(), ()> {
        self.outlet.queued.fetch_add(1, Ordering::SeqCst);
        self.jobs.send(job).map_err(|_| {
            self.outlet.queued.fetch_sub(1, Ordering::SeqCst);
        })
    }

    /// Writes `line` on the calling thread, now, when nothing handed to the writer thread
    /// is still unwritten (so lines keep their order) and the server's input takes the
    /// whole line without waiting (so a server that does not read cannot hold the caller,
    /// which may hold the session's lock). The ticket follows the write as the writer
    /// thread's would. `Err` gives the line back, to be queued: another write is under
    /// way, a line is queued, the input is closed, or it has no room for the line.
    pub(super) fn write_now(&self, line: Vec<u8>, ticket: &Ticket) -> Result<(), Vec<u8>> {
        let Some(mut sink) = self.outlet.sink.try_lock() else {
            return Err(line);
        };
        if self.outlet.queued.load(Ordering::SeqCst) != 0 {
            return Err(line);
        }
        let Some(sink) = sink.as_mut() else {
            return Err(line);
        };
        if sink.room() < line.len() || !ticket.start() {
            return Err(line);
        }
        let result = sink.write_line(&line, &mut |n| ticket.progress(n));
        ticket.finish(result);
        Ok(())
    }
}

/// The writer thread: writes each queued line in turn; a [`WriteJob::Close`] (or every
/// sender gone) closes the writer.
pub(super) fn writer_loop(outlet: &Outlet, jobs: &mpsc::Receiver<WriteJob>) {
    while let Ok(WriteJob::Line { line, ticket }) = jobs.recv() {
        {
            let mut sink = outlet.sink.lock();
            if let Some(sink) = sink.as_mut() {
                match ticket {
                    None => {
                        let _ = sink.write_line(&line, &mut |_| {});
                    }
                    Some(ticket) => {
                        if ticket.start() {
                            let result = sink.write_line(&line, &mut |n| ticket.progress(n));
                            ticket.finish(result);
                        }
                    }
                }
            }
        }
        outlet.queued.fetch_sub(1, Ordering::SeqCst);
    }
    // Dropping the writer closes the server's stdin (or drops the caller's writer). The
    // close stays counted as queued: no caller writes after it.
    outlet.sink.lock().take();
}

/// Progress of one queued line, shared by the caller and the writer thread.
pub(super) struct Ticket {
    state: Mutex<TicketState>,
    changed: Condvar,
    /// Told when the line fails: the caller waits for its reply alone (one wait a request,
    /// not one for the write and then one for the reply) and reads this ticket only when
    /// something other than a reply came, or nothing did.
    failed: Option<mpsc::Sender<Incoming>>,
}

#[derive(Default)]
enum TicketState {
    #[default]
    Queued,
    Writing(usize),
    Written,
    Failed {
        written: usize,
        reason: String,
    },
    Withdrawn,
}

pub(super) enum TicketWait {
    Written,
    Failed { written: usize, reason: String },
    Withdrawn,
    Stalled { written: usize },
}

impl Ticket {
    /// A ticket for a queued line; `failed` is told [`Incoming::Unwritten`] if the line
    /// fails.
    pub(super) fn new(failed: Option<mpsc::Sender<Incoming>>) -> Self {
        Self {
            state: Mutex::default(),
            changed: Condvar::new(),
            failed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, TicketState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by the writer: false when the caller already withdrew the line.
    fn start(&self) -> bool {
        let mut state = self.lock();
        if matches!(*state, TicketState::Withdrawn) {
            return false;
        }
        *state = TicketState::Writing(0);
        true
    }

    fn progress(&self, written: usize) {
        *self.lock() = TicketState::Writing(written);
    }

    fn finish(&self, result: Result<usize, JsonRpcError>) {
        let failed = result.is_err();
        *self.lock() = match result {
            Ok(_) => TicketState::Written,
            Err(error) => TicketState::Failed {
                written: error.bytes_written().unwrap_or(0),
                reason: error.to_string(),
            },
        };
        self.changed.notify_all();
        if failed && let Some(failed) = &self.failed {
            let _ = failed.send(Incoming::Unwritten);
        }
    }

    /// Waits until the line is written or failed, or until `deadline`. At the
    /// deadline a line still queued is withdrawn (it will never be written).
    pub(super) fn wait(&self, deadline: Instant) -> TicketWait {
        let mut state = self.lock();
        loop {
            match &*state {
                TicketState::Written => return TicketWait::Written,
                TicketState::Failed { written, reason } => {
                    return TicketWait::Failed {
                        written: *written,
                        reason: reason.clone(),
                    };
                }
                TicketState::Withdrawn => return TicketWait::Withdrawn,
                TicketState::Queued | TicketState::Writing(_) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                if let TicketState::Writing(written) = &*state {
                    return TicketWait::Stalled { written: *written };
                }
                *state = TicketState::Withdrawn;
                return TicketWait::Withdrawn;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::time::{Duration, Instant};

    use super::{Lines, MessageWriter, Pipe, Ticket, TicketWait, WriteJob};

    fn written(ticket: &Ticket) -> bool {
        matches!(
            ticket.wait(Instant::now() + Duration::from_millis(1)),
            TicketWait::Written
        )
    }

    /// A caller writes its line itself only into an empty pipe that takes all of it, and
    /// only when no line handed to the writer thread is still unwritten; otherwise the
    /// line comes back to be queued, untouched, and its ticket is not started.
    #[test]
    fn a_line_is_written_at_once_only_into_an_empty_pipe_with_nothing_queued_before_it() {
        let (mut read, write) = std::io::pipe().unwrap();
        let (lines, jobs, _outlet) = Lines::new(Box::new(Pipe::new(MessageWriter::new(write))));
        let capacity = nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap();
        let capacity = usize::try_from(capacity).unwrap();

        let ticket = Ticket::new(None);
        assert!(lines.write_now(b"{\"a\":1}\n".to_vec(), &ticket).is_ok());
        assert!(written(&ticket), "the ticket says written");

        // The server has not read that line yet: the next one waits for the thread.
        let ticket = Ticket::new(None);
        let back = lines
            .write_now(b"{\"b\":2}\n".to_vec(), &ticket)
            .unwrap_err();
        assert_eq!(back, b"{\"b\":2}\n", "given back whole");
        assert!(
            matches!(ticket.wait(Instant::now()), TicketWait::Withdrawn),
            "never started"
        );
        let mut got = [0u8; 8];
        read.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"{\"a\":1}\n");

        // Empty again, but a line is queued for the thread: this one must not pass it.
        lines
            .queue(WriteJob::Line {
                line: b"{\"c\":3}\n".to_vec(),
                ticket: None,
            })
            .unwrap();
        assert!(
            lines
                .write_now(b"{\"d\":4}\n".to_vec(), &Ticket::new(None))
                .is_err()
        );
        drop(jobs);

        // A line longer than the pipe holds never goes at once.
        let (_read, write) = std::io::pipe().unwrap();
        let (lines, _jobs, _outlet) = Lines::new(Box::new(Pipe::new(MessageWriter::new(write))));
        let mut long = vec![b' '; capacity];
        long.push(b'\n');
        assert!(lines.write_now(long, &Ticket::new(None)).is_err());
    }
}
