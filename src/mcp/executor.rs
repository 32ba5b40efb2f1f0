//! The MCP executor: one tool on one live session, behind the core [`Executor`] trait.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::binding::{ToolBinding, changed_fields};
use super::client::{McpClient, Tool, ToolList};
use super::schema::ArgumentValidator;
use super::session::{Reply, SendGuard};
use crate::executor::{Binding, Carrier, Delivery, Executor, Refusal, RejectionClass, Request};

/// How the executor sends calls and classifies JSON-RPC error replies.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExecutorConfig {
    /// Timeout of the `tools/call` request; `None` uses the client's request timeout.
    pub call_timeout: Option<Duration>,
    /// JSON-RPC error codes that the caller declares to mean "not applied" (for
    /// example `-32602` for a server known to reject before acting). Every other
    /// code is classified [`RejectionClass::Unknown`], the fail-closed default.
    pub not_applied_codes: BTreeSet<i64>,
    /// A `_meta` object sent with the `tools/call` (for example a proxied client's
    /// `progressToken`); not part of the request, its digest or the binding.
    pub call_meta: Option<Value>,
    /// A tag under which the `tools/call` waits, so that it can be cancelled with
    /// [`Session::cancel_tagged`](super::Session::cancel_tagged): the server gets
    /// `notifications/cancelled` under the request's own id, and the call still waits for
    /// its answer until the timeout. An answer that arrives is the outcome as usual;
    /// without one the delivery is `PossiblyWritten` ([`McpError::Cancelled`](super::McpError::Cancelled)),
    /// so a call that may change something stays unknown and a read ends failed.
    pub call_tag: Option<String>,
    /// Asked right before the `tools/call` (and each later round of it) is queued for the
    /// server ([`SendGuard`]): a reason withdraws it, not one byte written, and the
    /// delivery is `NothingWritten` (a later round of a 2026-07-28 call is
    /// `PossiblyWritten`: the server was asked already). A proxy sets it to its client's
    /// cancellation of the call, with [`ExecutorConfig::call_tag`].
    pub send_guard: Option<SendGuard>,
    /// The caller's word on the tool's class, overruling its `readOnlyHint` (a server's
    /// claim) in the binding: a host whose policy says a tool only reads (or that an
    /// annotated read-only tool must be treated as mutating) sets it. `None`: the
    /// annotation decides.
    pub class: Option<crate::ActionClass>,
    /// A tool list the caller checked itself (for example a proxy's list, kept until the
    /// server sends `notifications/tools/list_changed` or restarts): `bind`, `prepare` and
    /// `execute` check the binding against it instead of listing the tools three times.
    /// It saves three `tools/list` round trips per call and gives up the check that the
    /// server did not change the tool, without saying so, since that list was taken: use it
    /// for read-only calls; leave it `None` (the default: list each time) for calls that
    /// change the world, or set [`ExecutorConfig::list_at_send`] too.
    pub tool_list: Option<Arc<super::client::ToolList>>,
    /// With [`ExecutorConfig::tool_list`]: `bind` and `prepare` check against that list,
    /// and `execute` still lists the tools right before the call and sends nothing
    /// (`NothingWritten`) unless the live tool matches the binding. What is sent is
    /// checked against the server as it is at the send, as without a given list, for one
    /// `tools/list` instead of three: for calls that change the world, bound to a list
    /// the caller checked (against a pin, say). Without a given list it changes nothing.
    pub list_at_send: bool,
    /// Answers a 2026-07-28 server's `input_required` rounds of the call in place of the
    /// session's handler ([`McpClient::call_tool_answered`](super::McpClient::call_tool_answered)):
    /// a proxy whose client answers by retrying its own request sets one. Every round is
    /// part of the one attempt; a round not answered is `PossiblyWritten`.
    pub input_answerer: Option<super::InputAnswerer>,
}

impl ExecutorConfig {
    /// Sets [`ExecutorConfig::call_timeout`].
    #[must_use]
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Sets [`ExecutorConfig::call_meta`].
    #[must_use]
    pub fn with_call_meta(mut self, meta: Value) -> Self {
        self.call_meta = Some(meta);
        self
    }

    /// Sets [`ExecutorConfig::class`].
    #[must_use]
    pub fn with_class(mut self, class: crate::ActionClass) -> Self {
        self.class = Some(class);
        self
    }

    /// Sets [`ExecutorConfig::call_tag`].
    #[must_use]
    pub fn with_call_tag(mut self, tag: impl Into<String>) -> Self {
        self.call_tag = Some(tag.into());
        self
    }

    /// Sets [`ExecutorConfig::send_guard`].
    #[must_use]
    pub fn with_send_guard(mut self, guard: SendGuard) -> Self {
        self.send_guard = Some(guard);
        self
    }

    /// Sets [`ExecutorConfig::input_answerer`].
    #[must_use]
    pub fn with_input_answerer(mut self, answerer: super::InputAnswerer) -> Self {
        self.input_answerer = Some(answerer);
        self
    }

    /// Sets [`ExecutorConfig::tool_list`].
    #[must_use]
    pub fn with_tool_list(mut self, list: Arc<super::client::ToolList>) -> Self {
        self.tool_list = Some(list);
        self
    }

    /// Sets [`ExecutorConfig::tool_list`] with [`ExecutorConfig::list_at_send`]: bound to
    /// `list`, checked against a fresh `tools/list` at the send.
    #[must_use]
    pub fn with_tool_list_checked_at_send(mut self, list: Arc<super::client::ToolList>) -> Self {
        self.tool_list = Some(list);
        self.list_at_send = true;
        self
    }

    /// Adds `code` to [`ExecutorConfig::not_applied_codes`].
    #[must_use]
    pub fn with_not_applied_code(mut self, code: i64) -> Self {
        self.not_applied_codes.insert(code);
        self
    }
}

/// Carries a request to one MCP tool over one live [`McpClient`].
///
/// - [`Executor::bind`] lists the tools and binds the request to the server identity,
///   capabilities and tool definition (see [`ToolBinding`]), and states its class:
///   [`ActionClass::ReadOnly`](crate::ActionClass) only when the tool's annotations say
///   `readOnlyHint: true` (the server's claim; a definition may still be stricter),
///   otherwise `Mutating`;
/// - [`Executor::prepare`] lists the tools again, refuses (`binding_changed`) if
///   anything bound differs, and validates the arguments against the tool's
///   `inputSchema` (`invalid_arguments`);
/// - [`Executor::execute`] re-checks the binding once more right before the call
///   (a change yields [`Delivery::NothingWritten`]), sends `tools/call`, and maps the
///   outcome to a [`Delivery`] by what is actually known.
///
/// With [`ExecutorConfig::tool_list`] the first three listings take that list instead;
/// with [`ExecutorConfig::list_at_send`] too, `execute` still lists the tools itself
/// (one `tools/list` per call, at the send). The outcome maps as follows:
///
/// | outcome | delivery |
/// |---|---|
/// | no byte of `tools/call` was written | `NothingWritten` |
/// | bytes written, then timeout, EOF, crash, malformed or lost reply | `PossiblyWritten`, after the server was shut down and reaped |
/// | JSON-RPC error reply | `Rejected` (class from [`ExecutorConfig::not_applied_codes`]) |
/// | result with `isError: true` | `ToolFailed` (result retained) |
/// | any other result object | `Succeeded` (result retained) |
///
/// On `PossiblyWritten` the server may still be working on the call, so `execute`
/// runs the client's shutdown ladder ([`McpClient::shutdown`]: close stdin, `SIGTERM`
/// and `SIGKILL` the process group, reap) before it returns: nothing is concluded
/// about the call while its carrier can still act. This takes up to
/// `close_wait + term_wait` of the transport, and the client is closed afterwards
/// (later calls on it send nothing); a readback needs another client.
///
/// A preparation is for one request and one attempt. `prepare` keeps the binding and
/// the digest of the exact request it checked (sha256 of the canonical
/// `{"action", "arguments"}`); `execute` takes it whatever the outcome, and refuses
/// with `NothingWritten` a request that is not the prepared one; [`Executor::release`]
/// drops it. So a second `execute`, an `execute` after `release`, or an `execute` of
/// another request sends nothing.
///
/// [`Executor::carrier`] is the server process ([`McpClient::server_process`]): the
/// runtime records it with the attempt so that recovery can kill and reap it before it
/// reconciles.
#[derive(Debug)]
pub struct McpExecutor {
    client: Arc<McpClient>,
    tool: String,
    config: ExecutorConfig,
    prepared: Option<Prepared>,
    /// What [`ExecutorConfig::tool_list`] binds, made from it once: the list is fixed, and
    /// so is the client's server, so the binding, its details and the argument validator
    /// made from them are the same at the bind, the preparation and the send. A caller
    /// that made it already for this client, list, tool and class hands it over
    /// ([`McpExecutor::with_listed`]).
    from_given: std::sync::OnceLock<Arc<Listed>>,
}

/// The tool as one list shows it, and what is made from it to bind and check a call.
#[derive(Debug)]
pub(crate) struct Listed {
    /// The client and the list it was made from (held, so that neither can be freed and
    /// its address reused while this is kept): [`McpExecutor::with_listed`] takes it only
    /// for that very client and list.
    client: Arc<McpClient>,
    list: Arc<ToolList>,
    binding: ToolBinding,
    /// [`ToolBinding::details`].
    details: Value,
    tool: Tool,
    /// [`ArgumentValidator::new`] of the tool, or why its schema cannot be used.
    validator: Result<ArgumentValidator, String>,
    /// [`ToolBinding::to_binding`], made when first asked for (canonical JSON and SHA-256
    /// of the details, which hold the tool's whole definition).
    bound: std::sync::OnceLock<Result<Arc<Binding>, String>>,
}

impl Listed {
    /// The binding a call of this tool is bound to, made once and shared.
    pub(crate) fn binding(&self) -> Result<Arc<Binding>, Refusal> {
        self.bound
            .get_or_init(|| {
                self.binding
                    .to_binding()
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|e| Refusal::new("binding_unverifiable", e))
    }

    /// The tool named `name` in `list` (listed by `client`), bound, with the class `class`
    /// when one is given (the policy's word) in place of the server's annotation.
    pub(crate) fn new(
        client: &Arc<McpClient>,
        list: &Arc<ToolList>,
        name: &str,
        class: Option<crate::ActionClass>,
    ) -> Result<Self, Refusal> {
        let Some(tool) = list.get(name) else {
            let message = match list.rejection(name) {
                Some(reason) => {
                    format!("the server lists tool `{name}` with an invalid definition: {reason}")
                }
                None => {
                    format!("the server does not list a tool named `{name}`; check the tool name")
                }
            };
            return Err(Refusal::new("tool_missing", message));
        };
        let mut binding = ToolBinding::new(client.server(), tool)
            .map_err(|e| Refusal::new("binding_unverifiable", e.to_string()))?;
        if let Some(class) = class {
            binding.class = class;
        }
        Ok(Self {
            client: Arc::clone(client),
            list: Arc::clone(list),
            details: binding.details(),
            validator: ArgumentValidator::new(tool).map_err(|e| e.to_string()),
            binding,
            tool: tool.clone(),
            bound: std::sync::OnceLock::new(),
        })
    }
}

/// What one successful `prepare` allows: one `execute` of exactly this request.
#[derive(Debug)]
struct Prepared {
    binding: Binding,
    request_digest: String,
}

/// The digest that ties a preparation to one request: sha256 of the canonical
/// `{"action", "arguments"}`.
fn request_digest(request: &Request) -> Result<String, crate::canonical::CanonicalError> {
    crate::canonical::sha256_hex(
        &serde_json::json!({"action": request.action, "arguments": request.arguments}),
    )
}

impl McpExecutor {
    /// An executor for the tool `tool` on `client`, with the default configuration.
    pub fn new(client: Arc<McpClient>, tool: impl Into<String>) -> Self {
        Self {
            client,
            tool: tool.into(),
            config: ExecutorConfig::default(),
            prepared: None,
            from_given: std::sync::OnceLock::new(),
        }
    }

    /// Replaces the configuration.
    #[must_use]
    pub fn with_config(mut self, config: ExecutorConfig) -> Self {
        self.config = config;
        self.from_given = std::sync::OnceLock::new();
        self
    }

    /// Takes `listed` as what this executor's given list binds, instead of making it again
    /// (the gate makes it once per tool, class and list). Taken only when it was made for
    /// this executor's client, its [`ExecutorConfig::tool_list`] (the same `Arc`), its tool
    /// and its class; otherwise the executor makes its own, as without this call.
    #[must_use]
    pub(crate) fn with_listed(self, listed: Arc<Listed>) -> Self {
        let same = Arc::ptr_eq(&listed.client, &self.client)
            && self
                .config
                .tool_list
                .as_ref()
                .is_some_and(|list| Arc::ptr_eq(list, &listed.list))
            && listed.tool.name == self.tool
            && self.config.class.is_none_or(|c| c == listed.binding.class);
        if same {
            let _ = self.from_given.set(listed);
        }
        self
    }

    /// The client this executor calls through.
    #[must_use]
    pub fn client(&self) -> &Arc<McpClient> {
        &self.client
    }

    /// Lists the tools now (or takes [`ExecutorConfig::tool_list`]) and returns the live
    /// binding of this executor's tool.
    pub fn live_binding(&self) -> Result<(ToolBinding, Tool), Refusal> {
        let live = self.live(false)?;
        Ok((live.binding.clone(), live.tool.clone()))
    }

    /// The tool in the list [`McpExecutor::live_binding`] reads, and what is made from it;
    /// `at_send` lists the tools now when [`ExecutorConfig::list_at_send`] asks for it.
    /// Made once from a given list (`from_given`).
    fn live(&self, at_send: bool) -> Result<Arc<Listed>, Refusal> {
        let given = self
            .config
            .tool_list
            .as_ref()
            .filter(|_| !(at_send && self.config.list_at_send));
        if let Some(list) = given {
            if let Some(live) = self.from_given.get() {
                return Ok(Arc::clone(live));
            }
            let live = Arc::new(Listed::new(
                &self.client,
                list,
                &self.tool,
                self.config.class,
            )?);
            return Ok(Arc::clone(self.from_given.get_or_init(|| live)));
        }
        let listed = self.client.list_tools().map_err(|e| {
            Refusal::new(
                "binding_unverifiable",
                format!("`tools/list` failed, so the binding cannot be checked: {e}; check the server and retry"),
            )
        })?;
        Ok(Arc::new(Listed::new(
            &self.client,
            &Arc::new(listed),
            &self.tool,
            self.config.class,
        )?))
    }

    fn check_action(&self, request: &Request) -> Result<(), Refusal> {
        if request.action == self.tool {
            Ok(())
        } else {
            Err(Refusal::new(
                "wrong_tool",
                format!(
                    "this executor calls tool `{}` but the request is for `{}`; use an executor for that tool",
                    self.tool, request.action
                ),
            ))
        }
    }

    /// Re-lists the tools (see [`ExecutorConfig::tool_list`]; `at_send`: right before the
    /// call), compares with `bound`, and validates the arguments.
    fn verify(&self, request: &Request, bound: &Binding, at_send: bool) -> Result<(), Refusal> {
        let live = self.live(at_send)?;
        if live.details != bound.details || live.binding.target() != bound.target {
            let changed = changed_fields(&bound.details, &live.details).join(", ");
            return Err(Refusal::new(
                "binding_changed",
                format!(
                    "the live server no longer matches the binding (changed: {changed}; now {}); nothing was \
                     sent. Review the change and bind again if it is expected",
                    live.binding.target()
                ),
            ));
        }
        check_arguments(&live, &request.arguments)
    }

    fn classify_error_code(&self, code: i64) -> RejectionClass {
        if self.config.not_applied_codes.contains(&code) {
            RejectionClass::NotApplied
        } else {
            RejectionClass::Unknown
        }
    }
}

/// Validates `arguments` against the live tool's input schema.
fn check_arguments(live: &Listed, arguments: &Value) -> Result<(), Refusal> {
    let tool = &live.tool;
    let validator = live
        .validator
        .as_ref()
        .map_err(|e| Refusal::new("unsupported_schema", format!("{e}; nothing was sent")))?;
    if !arguments.is_object() {
        return Err(Refusal::new(
            "invalid_arguments",
            format!(
                "the arguments of tool `{}` must be a JSON object; nothing was sent",
                tool.name
            ),
        ));
    }
    validator.check(arguments).map_err(|messages| {
        Refusal::new(
            "invalid_arguments",
            format!(
                "the arguments do not match the input schema of tool `{}` ({}); nothing was sent. Fix the arguments",
                tool.name,
                messages.join("; ")
            ),
        )
    })
}

impl Executor for McpExecutor {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.check_action(request)?;
        let live = self.live(false)?;
        if let Err(e) = &live.validator {
            return Err(Refusal::new("unsupported_schema", e.clone()));
        }
        live.binding().map(|b| Binding::clone(&b))
    }

    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.prepared = None;
        self.check_action(request)?;
        self.verify(request, binding, false)?;
        let request_digest = request_digest(request)
            .map_err(|e| Refusal::new("invalid_arguments", format!("{e}; nothing was sent")))?;
        self.prepared = Some(Prepared {
            binding: binding.clone(),
            request_digest,
        });
        Ok(())
    }

    fn execute(&mut self, request: &Request) -> Delivery {
        let Some(Prepared {
            binding: bound,
            request_digest: prepared,
        }) = self.prepared.take()
        else {
            return Delivery::NothingWritten {
                reason:
                    "execute was called without a successful prepare (or after the preparation \
                         was used or released); nothing was sent"
                        .into(),
            };
        };
        if request_digest(request).ok().as_deref() != Some(prepared.as_str()) {
            return Delivery::NothingWritten {
                reason: "the request is not the one that was prepared; nothing was sent. Prepare \
                         this request first"
                    .into(),
            };
        }
        if let Some(reason) = self
            .config
            .send_guard
            .as_ref()
            .and_then(SendGuard::withdrawn)
        {
            // Withdrawn already: not even listed for the check at the send.
            return Delivery::NothingWritten {
                reason: format!("withdrawn before it was sent: {reason}; nothing was sent"),
            };
        }
        if let Err(refusal) = self
            .check_action(request)
            .and_then(|()| self.verify(request, &bound, true))
        {
            return Delivery::NothingWritten {
                reason: format!("refused just before the call: {refusal}"),
            };
        }
        let timeout = self
            .config
            .call_timeout
            .unwrap_or_else(|| self.client.request_timeout());
        let delivery = match self.client.call_tool_answered(
            &self.tool,
            &request.arguments,
            self.config.call_meta.as_ref(),
            timeout,
            self.config.call_tag.as_deref(),
            self.config.send_guard.as_ref(),
            self.config.input_answerer.as_ref(),
        ) {
            Ok(Reply::Result(result)) => classify_result(result),
            Ok(Reply::Error(error)) => Delivery::Rejected {
                error: error.to_value(),
                class: self.classify_error_code(error.code),
            },
            Err(e) if e.nothing_written() => Delivery::NothingWritten {
                reason: e.to_string(),
            },
            Err(e) => Delivery::PossiblyWritten {
                reason: e.to_string(),
            },
        };
        match delivery {
            Delivery::PossiblyWritten { reason } => {
                // The server may still be working on the request. Nothing may be
                // concluded about it while it can still act: kill and reap it first.
                let report = self.client.shutdown();
                Delivery::PossiblyWritten {
                    reason: format!(
                        "{reason}; the server was then shut down and reaped ({:?} after {} ms)",
                        report.stage,
                        report.elapsed.as_millis()
                    ),
                }
            }
            other => other,
        }
    }

    fn release(&mut self) {
        self.prepared = None;
    }

    /// Refused (`withdrawn`) when [`ExecutorConfig::send_guard`] withdraws the call.
    fn still_wanted(&self) -> Result<(), Refusal> {
        match self
            .config
            .send_guard
            .as_ref()
            .and_then(SendGuard::withdrawn)
        {
            Some(reason) => Err(Refusal::new(
                "withdrawn",
                format!("{reason}; nothing was recorded or sent"),
            )),
            None => Ok(()),
        }
    }

    /// The server process ([`McpClient::server_process`]): it carries the call.
    fn carrier(&self) -> Option<Carrier> {
        self.client.server_process()
    }
}

/// Maps a `tools/call` result to a delivery.
fn classify_result(result: Value) -> Delivery {
    if !result.is_object() {
        return Delivery::PossiblyWritten {
            reason: format!(
                "the `tools/call` result is not an object ({result}); the effect is unknown"
            ),
        };
    }
    match result.get("isError") {
        Some(Value::Bool(true)) => Delivery::ToolFailed { reply: result },
        None | Some(Value::Bool(false)) => Delivery::Succeeded { reply: result },
        Some(other) => Delivery::PossiblyWritten {
            reason: format!(
                "the `tools/call` result has a non-boolean `isError` ({other}); the effect is unknown"
            ),
        },
    }
}

#[cfg(all(test, feature = "fault-server"))]
mod tests {
    use super::*;
    use crate::ActionClass;
    use crate::mcp::{InProcessServer, SessionConfig};

    /// A client of the fault server on a thread of this process, its files in `dir`.
    fn client(dir: &std::path::Path, name: &str) -> Arc<McpClient> {
        let args: Vec<String> = [
            "--effects",
            &dir.join(format!("{name}-effects.jsonl"))
                .display()
                .to_string(),
            "--state",
            &dir.join(format!("{name}-state.json")).display().to_string(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let server = InProcessServer::new(name, move || {
            let (requests_in, requests_out) = std::io::pipe()?;
            let (replies_in, replies_out) = std::io::pipe()?;
            let args = args.clone();
            std::thread::spawn(move || {
                crate::mcp::fault_server::run_over(
                    args,
                    std::io::BufReader::new(requests_in),
                    replies_out,
                )
            });
            Ok((Box::new(replies_in), Box::new(requests_out)))
        });
        Arc::new(McpClient::connect_in_process(&server, &SessionConfig::default()).unwrap())
    }

    fn executor(
        client: &Arc<McpClient>,
        list: &Arc<ToolList>,
        tool: &str,
        class: ActionClass,
        listed: &Arc<Listed>,
    ) -> McpExecutor {
        McpExecutor::new(Arc::clone(client), tool)
            .with_config(
                ExecutorConfig::default()
                    .with_class(class)
                    .with_tool_list(Arc::clone(list)),
            )
            .with_listed(Arc::clone(listed))
    }

    fn took(executor: &McpExecutor, listed: &Arc<Listed>) -> bool {
        executor
            .from_given
            .get()
            .is_some_and(|l| Arc::ptr_eq(l, listed))
    }

    #[test]
    fn a_listed_tool_is_taken_only_for_its_own_client_list_tool_and_class() {
        let dir = tempfile::tempdir().unwrap();
        let a = client(dir.path(), "a");
        let b = client(dir.path(), "b");
        let list = Arc::new(a.list_tools().unwrap());
        // The same tools listed again: equal, but another list.
        let again = Arc::new(a.list_tools().unwrap());
        let listed = Arc::new(Listed::new(&a, &list, "get", Some(ActionClass::ReadOnly)).unwrap());

        let mut own = executor(&a, &list, "get", ActionClass::ReadOnly, &listed);
        assert!(took(&own, &listed));
        for (what, other) in [
            (
                "another client",
                executor(&b, &list, "get", ActionClass::ReadOnly, &listed),
            ),
            (
                "another list",
                executor(&a, &again, "get", ActionClass::ReadOnly, &listed),
            ),
            (
                "another tool",
                executor(&a, &list, "put", ActionClass::ReadOnly, &listed),
            ),
            (
                "another class",
                executor(&a, &list, "get", ActionClass::Mutating, &listed),
            ),
        ] {
            assert!(!took(&other, &listed), "{what}: taken");
        }

        // What was taken binds as what the executor makes itself.
        let request = Request::new("get", serde_json::json!({"key": "k"}));
        let mut made = McpExecutor::new(Arc::clone(&a), "get").with_config(
            ExecutorConfig::default()
                .with_class(ActionClass::ReadOnly)
                .with_tool_list(Arc::clone(&list)),
        );
        let binding = own.bind(&request).unwrap();
        assert_eq!(binding, made.bind(&request).unwrap());
        assert!(took(&own, &listed), "bind used what was taken");
        own.prepare(&request, &binding).unwrap();
    }
}
