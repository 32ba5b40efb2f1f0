//! Ctrl-C (`SIGINT`) and `SIGTERM` for the commands that send a call (`call`, `approve`,
//! `resume`, `reconcile`): the first one is noted and nothing more is sent; a call already
//! in flight is waited for and its outcome recorded, as it would be anyway. A second one
//! ends the process at once: a call in flight then stays `running`, and the next recovery
//! scan (`rpr unresolved`) makes it `write_status_unknown`.
//!
//! The two signals are blocked before any other thread starts (threads inherit the mask;
//! a child process gets an empty one from `std::process::Command`) and taken by one thread
//! with `sigwait`, so no code runs in a signal handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

/// Whether a first interrupt came.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The flag a first interrupt sets (for `rpr::gate::serve_until`).
pub(crate) fn flag() -> Arc<AtomicBool> {
    Arc::clone(&INTERRUPTED)
}

/// What the first interrupt means for the command.
#[derive(Clone, Copy)]
pub(crate) enum Meaning {
    /// A command that sends a call: nothing more is sent.
    Call,
    /// `rpr gate`: no new request is taken; calls in flight are answered.
    Gate,
}

/// Takes `SIGINT` and `SIGTERM` from now on. Call it from the main thread before any other
/// thread starts. If they cannot be taken, they keep their default action (the process
/// ends, as before).
pub(crate) fn install(meaning: Meaning) {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None).is_err() {
        return;
    }
    let watcher = std::thread::Builder::new()
        .name("rpr-interrupt".into())
        .spawn(move || {
            let mut seen = 0;
            while let Ok(signal) = set.wait() {
                seen += 1;
                if seen == 1 {
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    match meaning {
                        Meaning::Call => errln!(
                            "rpr: {signal} received: nothing more will be sent; a call in flight is \
                             waited for and recorded. Send it again to stop at once (a call in flight \
                             then stays `running` until `rpr unresolved` records it unknown)."
                        ),
                        // The gate says it on its own stderr when it starts stopping.
                        Meaning::Gate => {}
                    }
                } else {
                    errln!("rpr: {signal} received again: stopping now");
                    std::process::exit(130);
                }
            }
        });
    if watcher.is_err() {
        // Nobody would take them: give them back their default action.
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
    }
}
