//! The writer side of a session: the thread that owns the server's stdin (or the
//! caller's writer, for a session over streams) and writes queued lines one at a time,
//! and the ticket through which a caller follows how much of its line got out.

use std::io::Write;
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

pub(super) fn writer_loop<W: Write>(mut writer: MessageWriter<W>, jobs: &mpsc::Receiver<WriteJob>) {
    while let Ok(WriteJob::Line { line, ticket }) = jobs.recv() {
        match ticket {
            None => {
                let _ = writer.write_encoded(&line, |_| {});
            }
            Some(ticket) => {
                if !ticket.start() {
                    continue;
                }
                let result = writer.write_encoded(&line, |n| ticket.progress(n));
                ticket.finish(result);
            }
        }
    }
    // Dropping the writer closes the server's stdin (or drops the caller's writer).
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
