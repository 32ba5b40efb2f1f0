//! What the console does: it runs the same `rpr` commands an operator would type
//! (`approve`, `deny`, `reconcile`), as a child process of this very binary, and keeps what
//! each said. So a decision taken in the browser is checked, recorded and refused exactly as
//! at the terminal (the approval rule, the quorum, the expiry, who may act), and the page
//! shows the command, so it can be typed the next time. There is no action that sends a
//! call again.

use std::collections::VecDeque;
use std::process::Command;

use parking_lot::Mutex;

/// One command the console ran.
#[derive(Debug, Clone)]
pub(crate) struct Done {
    /// When it ended, ms since the epoch.
    pub(crate) at: i64,
    /// The command as it could be typed (the database's password hidden).
    pub(crate) shown: String,
    /// Its exit status (`None`: it did not start, or was killed).
    pub(crate) exit: Option<i32>,
    /// What it wrote, stdout then stderr.
    pub(crate) output: String,
}

impl Done {
    /// What the exit status says, in the words of docs/host.md's table.
    pub(crate) fn meaning(&self) -> &'static str {
        match self.exit {
            Some(0) => "done",
            Some(2) => "refused: a usage error",
            Some(3) => "recorded; the pathway needs another step",
            Some(4) => "denied",
            Some(130) => "interrupted",
            Some(_) => "refused, or failed: see what it said",
            None => "did not run to its end",
        }
    }
}

/// The last commands run, newest first.
#[derive(Default)]
pub(crate) struct Log(Mutex<VecDeque<Done>>);

/// How many commands the page keeps.
const KEPT: usize = 20;

impl Log {
    pub(crate) fn all(&self) -> Vec<Done> {
        self.0.lock().iter().cloned().collect()
    }

    /// Runs `rpr ARGS…` on `database` (given as `RPR_DATABASE`, so that no password of
    /// its location is on a command line; `shown` is how the command is shown) and records
    /// what it did.
    pub(crate) fn run(&self, args: &[String], database: &str, shown: String) -> Done {
        let ran = std::env::current_exe().and_then(|exe| {
            Command::new(exe)
                .args(args)
                .env("RPR_DATABASE", database)
                .stdin(std::process::Stdio::null())
                .output()
        });
        let done = match ran {
            Ok(out) => Done {
                at: now_ms(),
                shown,
                exit: out.status.code(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            },
            Err(e) => Done {
                at: now_ms(),
                shown,
                exit: None,
                output: format!("could not run it: {e}"),
            },
        };
        errln!(
            "rpr console: ran `{}`: exit {}",
            rpr::shown::name(&done.shown),
            done.exit.map_or("none".into(), |c| c.to_string())
        );
        let mut log = self.0.lock();
        log.push_front(done.clone());
        log.truncate(KEPT);
        done
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
