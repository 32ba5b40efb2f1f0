//! What an MCP tool call is bound to, and how that is digested.

use serde_json::{Value, json};

use super::McpError;
use super::client::Tool;
use super::negotiate::ServerInfo;
use crate::canonical::sha256_hex;
use crate::executor::Binding;
use crate::pathway::ActionClass;

/// Members of a tool definition that are **not** bound.
///
/// Everything else in the definition is bound, including members this crate does
/// not know yet (fail closed: an unknown member may change what the tool does).
/// In particular `description` is bound, because a changed description is how tool
/// poisoning reaches the model, and `annotations` and `execution` are bound because
/// they change how a host treats the call. Excluded:
///
/// - `_meta`: reserved for protocol metadata, which servers may fill with per-listing
///   values (trace ids, timestamps); the spec gives it no meaning for the call;
/// - `icons`: presentation only (URLs that may carry cache-busting tokens); they
///   reach neither the model nor the call.
pub const UNBOUND_TOOL_FIELDS: [&str; 2] = ["_meta", "icons"];

/// The identity of one tool on one server, as bound before dispatch.
///
/// Two bindings are equal exactly when every field is equal; any difference between
/// the binding taken when a pathway was bound and the live server at dispatch time
/// refuses the call before anything is sent.
///
/// An empty `serverInfo.version` (the Python SDK sends `""`) is accepted and bound
/// verbatim: the identity reads `name@`, `server_version_empty` is true in the
/// details, and a server that later reports any non-empty version no longer matches.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolBinding {
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// `serverInfo.name`.
    pub server_name: String,
    /// `serverInfo.version` (possibly empty).
    pub server_version: String,
    /// sha256 (hex) of the RFC 8785 canonical JSON of the server's `capabilities`.
    pub capabilities_digest: String,
    /// sha256 (hex) of the canonical JSON string of the server's `instructions`
    /// (which reach the model like a tool description does), if it sent any.
    pub instructions_digest: Option<String>,
    /// The tool's name.
    pub tool_name: String,
    /// sha256 (hex) of the canonical JSON of the tool definition without
    /// [`UNBOUND_TOOL_FIELDS`].
    pub tool_digest: String,
    /// sha256 (hex) of the canonical JSON of the tool's `inputSchema` (also covered by
    /// `tool_digest`; kept apart so a schema change is named as such).
    pub input_schema_digest: String,
    /// [`ActionClass::ReadOnly`] only when the tool's `annotations.readOnlyHint` is
    /// `true`, otherwise [`ActionClass::Mutating`] (also the protocol's default). This
    /// is the server's claim, not a verified fact: a pathway's definition may still be
    /// stricter (declare `Mutating`), never laxer.
    pub class: ActionClass,
}

impl ToolBinding {
    /// The binding of `tool` as listed by the server described by `server`.
    pub fn new(server: &ServerInfo, tool: &Tool) -> Result<Self, McpError> {
        let instructions_digest = match &server.instructions {
            Some(text) => Some(sha256_hex(&Value::from(text.as_str()))?),
            None => None,
        };
        Ok(Self {
            protocol_version: server.protocol_version.clone(),
            server_name: server.name.clone(),
            server_version: server.version.clone(),
            capabilities_digest: sha256_hex(&server.capabilities)?,
            instructions_digest,
            tool_name: tool.name.clone(),
            tool_digest: sha256_hex(&bound_definition(tool))?,
            input_schema_digest: sha256_hex(tool.input_schema())?,
            class: claimed_class(tool),
        })
    }

    /// `name@version/tool`, for people.
    #[must_use]
    pub fn target(&self) -> String {
        format!(
            "{}@{}/{}",
            self.server_name, self.server_version, self.tool_name
        )
    }

    /// Everything that is bound, as the JSON stored in the core [`Binding`].
    #[must_use]
    pub fn details(&self) -> Value {
        json!({
            "kind": "mcp-stdio-tool",
            "protocol_version": self.protocol_version,
            "server_name": self.server_name,
            "server_version": self.server_version,
            "server_version_empty": self.server_version.is_empty(),
            "capabilities_digest": self.capabilities_digest,
            "instructions_digest": self.instructions_digest,
            "tool_name": self.tool_name,
            "tool_digest": self.tool_digest,
            "input_schema_digest": self.input_schema_digest,
            "class": match self.class {
                ActionClass::ReadOnly => "read_only",
                ActionClass::Mutating => "mutating",
            },
        })
    }

    /// The core binding (target, details, the digest of the details, and the class).
    pub fn to_binding(&self) -> Result<Binding, McpError> {
        Ok(Binding::new(self.target(), self.details())?.with_class(self.class))
    }
}

/// What the server claims the tool does: read-only only with `readOnlyHint: true`.
fn claimed_class(tool: &Tool) -> ActionClass {
    if tool.definition["annotations"]["readOnlyHint"] == Value::Bool(true) {
        ActionClass::ReadOnly
    } else {
        ActionClass::Mutating
    }
}

/// The part of a tool definition that is digested: all of it but [`UNBOUND_TOOL_FIELDS`].
#[must_use]
pub fn bound_definition(tool: &Tool) -> Value {
    let mut definition = tool.definition.clone();
    if let Some(obj) = definition.as_object_mut() {
        for field in UNBOUND_TOOL_FIELDS {
            obj.remove(field);
        }
    }
    definition
}

/// The top-level detail names whose values differ between two binding details.
#[must_use]
pub fn changed_fields(bound: &Value, live: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let a = bound.as_object().unwrap_or(&empty);
    let b = live.as_object().unwrap_or(&empty);
    let mut names: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}
