//! The threads that serve the client's requests: a request goes to a worker that is idle,
//! or to a new one when none is, so a request never waits behind another (a call at a
//! Human Gate may take minutes: item 4 of the gate issue, no head-of-line blocking). A
//! worker that finished waits for the next request instead of ending, which saves a
//! thread's start per request; one idle longer than [`IDLE`] ends.
//!
//! Only the serving loop hands requests out ([`Workers::run`]), one at a time. It takes an
//! idle worker by decrementing the idle count itself, before it sends, so every request in
//! the channel has a worker that counted itself idle and is (or is about to be) waiting
//! for it: none is left queued behind a busy one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a worker waits for a request before it ends.
const IDLE: Duration = Duration::from_secs(30);

/// One request's work.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// What the workers share.
struct Shared {
    jobs: Mutex<Receiver<Job>>,
    /// Workers waiting for a job, not yet taken by the serving loop.
    idle: AtomicUsize,
    /// Workers started and not ended.
    alive: AtomicUsize,
}

/// The workers of one gate.
pub(crate) struct Workers {
    jobs: Option<Sender<Job>>,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    pub(crate) fn new() -> Self {
        let (tx, rx) = channel();
        Self {
            jobs: Some(tx),
            shared: Arc::new(Shared {
                jobs: Mutex::new(rx),
                idle: AtomicUsize::new(0),
                alive: AtomicUsize::new(0),
            }),
            handles: Vec::new(),
        }
    }

    /// Requests being served now.
    pub(crate) fn busy(&self) -> usize {
        self.shared
            .alive
            .load(Ordering::SeqCst)
            .saturating_sub(self.shared.idle.load(Ordering::SeqCst))
    }

    /// Runs `job` on an idle worker, or on a new one. `Err` when no thread could be
    /// started (the job is not run).
    pub(crate) fn run(&mut self, job: Job) -> Result<(), std::io::Error> {
        if self.jobs.is_none() {
            return Err(std::io::Error::other("the gate's workers are stopped"));
        }
        // Take an idle worker: only this loop decrements, so `idle` cannot drop below the
        // number of workers that will take a job from the channel.
        let took = self
            .shared
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !took {
            self.start()?;
        }
        self.jobs
            .as_ref()
            .map(|jobs| jobs.send(job))
            .and_then(Result::ok)
            .ok_or_else(|| std::io::Error::other("the gate's workers are stopped"))
    }

    /// Starts a worker that takes the next job (it does not count itself idle until it
    /// finished that one).
    fn start(&mut self) -> Result<(), std::io::Error> {
        self.handles.retain(|h| !h.is_finished());
        let shared = Arc::clone(&self.shared);
        shared.alive.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("rpr-gate-request".into())
            .spawn(move || worker(&shared));
        match spawned {
            Ok(handle) => {
                self.handles.push(handle);
                Ok(())
            }
            Err(e) => {
                self.shared.alive.fetch_sub(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Takes no more jobs and waits for the ones in flight to finish.
    pub(crate) fn finish(&mut self) {
        self.jobs = None;
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

fn worker(shared: &Shared) {
    loop {
        let next = shared
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv_timeout(IDLE);
        match next {
            Ok(job) => {
                // A request that panicked ends its worker (and is counted as ended), as
                // its own thread did before workers were kept.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                    break;
                }
                shared.idle.fetch_add(1, Ordering::SeqCst);
            }
            Err(RecvTimeoutError::Timeout) => {
                // Ends only if the serving loop has not taken it meanwhile.
                if shared
                    .idle
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    break;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    shared.alive.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    /// A job that blocks (a call at a Human Gate) holds up no other: each waits on its own
    /// worker, and a worker that finished takes the next job instead of a new thread.
    #[test]
    fn a_blocked_job_holds_up_no_other_and_finished_workers_are_reused() {
        let mut workers = Workers::new();
        let (release_tx, release_rx) = sync_channel::<()>(0);
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (done_tx, done_rx) = channel::<usize>();
        // Three blocked jobs at once.
        for i in 0..3 {
            let (release, done) = (Arc::clone(&release_rx), done_tx.clone());
            workers
                .run(Box::new(move || {
                    let _ = release.lock().unwrap().recv();
                    done.send(i).unwrap();
                }))
                .unwrap();
        }
        // A fourth, quick one is served while the three wait.
        let done = done_tx.clone();
        workers
            .run(Box::new(move || done.send(99).unwrap()))
            .unwrap();
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)), Ok(99));
        assert_eq!(workers.shared.alive.load(Ordering::SeqCst), 4);
        for _ in 0..3 {
            release_tx.send(()).unwrap();
        }
        let mut got: Vec<usize> = (0..3)
            .map(|_| done_rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2]);
        // All four idle now: twenty quick jobs one after another start no thread.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while workers.busy() > 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(workers.busy(), 0);
        for i in 0..20 {
            let done = done_tx.clone();
            workers
                .run(Box::new(move || done.send(i).unwrap()))
                .unwrap();
            assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)), Ok(i));
        }
        assert_eq!(workers.shared.alive.load(Ordering::SeqCst), 4);
        workers.finish();
        assert_eq!(workers.shared.alive.load(Ordering::SeqCst), 0);
    }
}
