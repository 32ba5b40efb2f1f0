//! The one error type of the JSON-RPC layer.

use super::Id;

/// What went wrong while reading or writing JSON-RPC messages.
///
/// Read-side variants other than [`JsonRpcError::Read`] concern one line only: the
/// reader has already moved past that line and can be used again. Use
/// [`JsonRpcError::is_fatal`] to tell the two apart.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonRpcError {
    /// Reading from the underlying stream failed. The stream is unusable; close it.
    #[error("reading from the peer failed: {0}; the connection is unusable, close it")]
    Read(#[source] std::io::Error),

    /// A line was longer than the configured limit. It was skipped without buffering.
    #[error(
        "a line of {length} bytes exceeds the {limit}-byte message limit and was skipped; \
         raise the limit if the peer legitimately sends messages this large"
    )]
    LineTooLong {
        /// Length of the skipped line in bytes (without its line terminator).
        length: u64,
        /// The limit in force.
        limit: usize,
        /// The message's id, where its first or last bytes show it unambiguously (a
        /// top-level `"id"` among the short members that open the object, or as its last
        /// member): the request a skipped reply answered.
        id: Option<super::Id>,
    },

    /// A line was not valid UTF-8. It was skipped.
    #[error(
        "a line is not valid UTF-8 (valid up to byte {valid_up_to}) and was skipped; \
         the peer must send UTF-8 JSON"
    )]
    InvalidUtf8 {
        /// Number of leading bytes that were valid UTF-8.
        valid_up_to: usize,
    },

    /// A line was not one JSON value. It was skipped.
    #[error(
        "a line is not JSON ({source}) and was skipped; the peer must write nothing but \
         JSON-RPC messages, one per line"
    )]
    NotJson {
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },

    /// A line was JSON but not a valid JSON-RPC 2.0 message. It was skipped.
    #[error("a line is not a valid JSON-RPC 2.0 message ({reason}) and was skipped")]
    InvalidMessage {
        /// The message's id, when one could be read (lets a caller fail that request).
        id: Option<Id>,
        /// What is wrong with it.
        reason: String,
    },

    /// A JSON array (a JSON-RPC batch) arrived. Batches are not supported; it was skipped.
    #[error("a batch of {len} messages arrived and was skipped; send one message per line")]
    Batch {
        /// Number of elements in the array.
        len: usize,
    },

    /// The stream ended in the middle of a line. The partial line was discarded.
    #[error("the stream ended inside an unterminated line of {length} bytes; it was discarded")]
    UnterminatedLine {
        /// Bytes of the partial line.
        length: u64,
    },

    /// The message could not be encoded. Nothing was written.
    #[error("the message could not be encoded as JSON ({0}); nothing was written")]
    Encode(#[source] serde_json::Error),

    /// The outgoing message is larger than the limit. Nothing was written.
    #[error(
        "the outgoing message is {length} bytes, over the {limit}-byte limit, and was not \
         written; send smaller arguments or raise the limit (`max_message_bytes` in the \
         policy of `rpr call` and `rpr gate`)"
    )]
    MessageTooLarge {
        /// Encoded length in bytes.
        length: usize,
        /// The limit in force.
        limit: usize,
    },

    /// Writing failed after `written` of `total` bytes had been accepted.
    #[error(
        "writing to the peer failed after {written} of {total} bytes ({source}); \
         the connection is unusable, close it"
    )]
    Write {
        /// Bytes accepted by the underlying writer before the failure.
        written: usize,
        /// Bytes in the whole encoded message (including the line feed).
        total: usize,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl JsonRpcError {
    /// Whether the stream is unusable after this error (read or write failure).
    #[must_use]
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::Read(_) | Self::Write { .. })
    }

    /// For write-side errors, how many bytes of the message reached the writer
    /// (`Some(0)` when nothing was written); `None` for read-side errors.
    #[must_use]
    pub fn bytes_written(&self) -> Option<usize> {
        match self {
            Self::Encode(_) | Self::MessageTooLarge { .. } => Some(0),
            Self::Write { written, .. } => Some(*written),
            _ => None,
        }
    }
}
