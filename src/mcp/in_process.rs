//! An MCP server that runs inside the host's own process: threads of it, reached over a
//! reader and a writer that [`InProcessServer`] makes each time the server is started.
//!
//! What carries a call sent to such a server is the host itself: the server's code runs in
//! the host's process and ends with it. So a client of one ([`super::McpClient::connect_in_process`])
//! names no carrier process ([`super::McpClient::server_process`] is `None`, as for an
//! executor that writes in-process: [`crate::executor::Executor::carrier`]), and once the
//! host is gone nothing of the server can still act on a call. That is the whole claim, and
//! it is the caller's to keep: a start function that connects to a server in another
//! process (a socket, a pipe to a child) breaks it, and must be a
//! [`super::ServerCommand`] instead, whose process the crate starts, watches and reaps.
//!
//! It exists for servers written in the host's language and for tests and fuzz targets that
//! script a server on a thread: no child process, no fork.

use std::io::{Read, Write};
use std::sync::Arc;

/// The streams of one start of an in-process server: what the client reads the server's
/// messages from, and what it writes its own to (newline-delimited JSON-RPC, as over
/// stdio). Closing the writer is the server's end of input.
pub type InProcessStreams = (Box<dyn Read + Send>, Box<dyn Write + Send>);

type Start = dyn Fn() -> std::io::Result<InProcessStreams> + Send + Sync;

/// A server that lives in this process (see the module's text): a name for messages and
/// records, and a function that starts it, once per connection (the gate starts its server
/// again after it stops).
#[derive(Clone)]
pub struct InProcessServer {
    name: String,
    start: Arc<Start>,
}

impl std::fmt::Debug for InProcessServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessServer")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl InProcessServer {
    /// A server named `name` (shown in messages and recorded as the server's identity),
    /// started by `start`. `start` must start a server that runs in this process: see the
    /// module's text for why that matters.
    pub fn new(
        name: impl Into<String>,
        start: impl Fn() -> std::io::Result<InProcessStreams> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            start: Arc::new(start),
        }
    }

    /// The server's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts it once: its streams.
    pub(crate) fn start(&self) -> std::io::Result<InProcessStreams> {
        (self.start)()
    }
}
