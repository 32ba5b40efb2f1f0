//! A 2026-07-28 client's per-request log level toward a server of the 2025 era. The
//! revision removed `logging/setLevel`: each request names the least severe level its
//! client wants (`_meta["io.modelcontextprotocol/logLevel"]`). A 2025-era server knows only
//! one level for its whole session, set with `logging/setLevel`. The gate keeps that level
//! at what the requests in flight need (docs/gate.md, "Log levels"):
//!
//! - it manages the level only for a server of the 2025 era that declared `logging`, and
//!   only while no client opened with `initialize` (such a client sets the level itself,
//!   its `logging/setLevel` passed through);
//! - the level needed is the least severe one any 2026-07-28 request being served asked
//!   for (a request counts from when the gate reads it until its answer is written, or
//!   suppressed for a cancelled request);
//! - before a request that asks for a level is handled, when the level needed differs
//!   from the one the gate last set on that server process, the gate sends
//!   `logging/setLevel` with it and waits for the answer; after such a request is answered,
//!   it does the same with what is needed then: the least severe level still asked for,
//!   or, when no request asks for one, `emergency` (the most severe; the gate passes no
//!   log message on then, and the server's own default level is unknown, so it cannot be
//!   restored). Nothing is sent to a server the gate set no level on while none is asked
//!   for; a restarted server starts from its own default again.
//!
//! The gate still filters what it passes on (`Downstream::notify`): the server's level is
//! the least severe any request asked for, and a message passes only while some request
//! asked for its level or a less severe one.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::json;

use super::{Gate, era, lock};
use crate::mcp::{Era, McpClient, Reply};

/// The log level the gate last set on a server process with `logging/setLevel`.
#[derive(Default)]
pub(crate) struct ServerLevel {
    /// The server process it was set on (a new process starts from its own default).
    set_on: Weak<McpClient>,
    /// The rank of the level set ([`era::log_rank`]).
    rank: Option<u8>,
}

/// How long the gate waits for the answer to its `logging/setLevel` at most.
const SET_LEVEL_WAIT: Duration = Duration::from_secs(5);

impl Gate {
    /// Sets the server's log level to what the requests being served need, if it is not
    /// set so already (the rule in the module's documentation). `starting`: before a
    /// request that asked for a level (the server is started if it is not running, as the
    /// request would start it); else after one was answered (a server not running is left
    /// alone).
    pub(crate) fn sync_log_level(&self, starting: bool) {
        if self.down.opened_with_initialize() {
            return;
        }
        let mut set = lock(&self.server_level);
        let wanted = self.down.wanted_log_rank();
        let client = if starting && wanted.is_some() {
            self.upstream.client().ok()
        } else {
            self.upstream.running()
        };
        let Some(client) = client else {
            return;
        };
        let server = client.server();
        if server.era != Era::Legacy || !server.capabilities["logging"].is_object() {
            return;
        }
        let current = if Weak::ptr_eq(&set.set_on, &Arc::downgrade(&client)) {
            set.rank
        } else {
            None
        };
        let target = match (wanted, current) {
            (Some(wanted), _) => wanted,
            (None, Some(_)) => era::MOST_SEVERE,
            (None, None) => return,
        };
        if current == Some(target) {
            return;
        }
        let level = era::log_name(target);
        let wait = self.upstream.request_timeout.min(SET_LEVEL_WAIT);
        match client
            .session()
            .request("logging/setLevel", Some(json!({ "level": level })), wait)
        {
            Ok(Reply::Result(_)) => {
                *set = ServerLevel {
                    set_on: Arc::downgrade(&client),
                    rank: Some(target),
                };
            }
            Ok(Reply::Error(e)) => {
                note!(
                    Warn,
                    "rpr gate: the server refused `logging/setLevel` to {level}: {e}"
                );
            }
            Err(e) => note!(Warn, "rpr gate: `logging/setLevel` to {level} failed: {e}"),
        }
    }
}
