//! Independent readback through a read-only MCP tool.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::client::McpClient;
use super::session::Reply;
use crate::executor::{Observation, Readback, Request};

/// What a readback judge concluded from the read-only tool's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadbackVerdict {
    /// The intended effect is present.
    Applied,
    /// The intended effect is absent.
    NotApplied,
    /// The result does not decide.
    Inconclusive,
}

/// Derives the read-only tool's arguments from the original request.
pub type ReadbackArguments = Box<dyn FnMut(&Request) -> Value + Send>;

/// Judges the read-only tool's result (the `tools/call` result object) against the
/// original request.
pub type ReadbackJudge = Box<dyn FnMut(&Request, &Value) -> ReadbackVerdict + Send>;

/// Decides, before a readback call, whether its result could prove anything about the
/// request (see [`McpReadback::guarded_by`]).
type ReadbackGuard = Box<dyn FnMut(&McpClient, &Request) -> Result<(), String> + Send>;

/// Observes an effect by calling a read-only tool, on the same server or another.
///
/// The caller chooses the tool (it must really be read-only: annotations are hints
/// and are not trusted here), how its arguments follow from the request, and how its
/// result is judged. A failed call (no reply, JSON-RPC error) is
/// [`Observation::Inconclusive`]; so is an `isError: true` result unless
/// [`McpReadback::judge_tool_errors`] hands those to the judge too; so is a call a guard
/// ([`McpReadback::guarded_by`]) refuses, which is not made. The evidence is
/// `{"readback_tool", "server", "arguments"}` plus `"result"`, `"error"`, `"failure"` or
/// `"refused"`.
pub struct McpReadback {
    client: Arc<McpClient>,
    tool: String,
    timeout: Option<Duration>,
    arguments: ReadbackArguments,
    judge: ReadbackJudge,
    judge_tool_errors: bool,
    guards: Vec<ReadbackGuard>,
    refused: Option<String>,
}

impl std::fmt::Debug for McpReadback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpReadback")
            .field("server", &self.client.server().identity())
            .field("tool", &self.tool)
            .field("timeout", &self.timeout)
            .field("judge_tool_errors", &self.judge_tool_errors)
            .finish_non_exhaustive()
    }
}

impl McpReadback {
    /// A readback through `tool` on `client`.
    pub fn new<A, J>(
        client: Arc<McpClient>,
        tool: impl Into<String>,
        arguments: A,
        judge: J,
    ) -> Self
    where
        A: FnMut(&Request) -> Value + Send + 'static,
        J: FnMut(&Request, &Value) -> ReadbackVerdict + Send + 'static,
    {
        Self {
            client,
            tool: tool.into(),
            timeout: None,
            arguments: Box::new(arguments),
            judge: Box::new(judge),
            judge_tool_errors: false,
            guards: Vec::new(),
            refused: None,
        }
    }

    /// Sets the call's timeout (default: the client's request timeout).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Whether `isError: true` results go to the judge (default: no, they are
    /// inconclusive). Enable this when the read tool reports "not found" as an error.
    #[must_use]
    pub fn judge_tool_errors(mut self, judge: bool) -> Self {
        self.judge_tool_errors = judge;
        self
    }

    /// Adds a guard that runs before each readback call, after the ones added before it.
    /// `Err(reason)` says the call's result could prove nothing about this request (the
    /// tool is no longer the one reviewed, the arguments cannot be derived from the
    /// request): the tool is not called, and the observation is inconclusive with
    /// `"refused": reason` in its evidence.
    #[must_use]
    pub fn guarded_by<G>(mut self, guard: G) -> Self
    where
        G: FnMut(&McpClient, &Request) -> Result<(), String> + Send + 'static,
    {
        self.guards.push(Box::new(guard));
        self
    }

    /// Why the last observation did not call the tool (a guard's reason), if it did not.
    #[must_use]
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }
}

impl Readback for McpReadback {
    fn observe(&mut self, request: &Request) -> Observation {
        let arguments = (self.arguments)(request);
        let mut evidence = json!({
            "readback_tool": self.tool,
            "server": self.client.server().identity(),
            "arguments": arguments,
        });
        self.refused = None;
        for guard in &mut self.guards {
            if let Err(why) = guard(&self.client, request) {
                evidence["refused"] = Value::from(why.as_str());
                self.refused = Some(why);
                return Observation::Inconclusive { evidence };
            }
        }
        let timeout = self
            .timeout
            .unwrap_or_else(|| self.client.request_timeout());
        match self.client.call_tool(&self.tool, &arguments, timeout) {
            Ok(Reply::Result(result)) => {
                let tool_error = result.get("isError") == Some(&Value::Bool(true));
                let verdict = if !result.is_object() || (tool_error && !self.judge_tool_errors) {
                    ReadbackVerdict::Inconclusive
                } else {
                    (self.judge)(request, &result)
                };
                evidence["result"] = result;
                match verdict {
                    ReadbackVerdict::Applied => Observation::Applied { evidence },
                    ReadbackVerdict::NotApplied => Observation::NotApplied { evidence },
                    ReadbackVerdict::Inconclusive => Observation::Inconclusive { evidence },
                }
            }
            Ok(Reply::Error(error)) => {
                evidence["error"] = error.to_value();
                Observation::Inconclusive { evidence }
            }
            Err(e) => {
                evidence["failure"] = Value::from(e.to_string());
                Observation::Inconclusive { evidence }
            }
        }
    }
}
