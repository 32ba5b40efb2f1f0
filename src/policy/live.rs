//! [`Live`]: one tool on a running server, with the plan the policy gives it.

use std::sync::Arc;

use crate::executor::Binding;
use crate::mcp::{
    McpClient, McpExecutor, ServerCommand, SessionConfig, Tool, ToolBinding, ToolList,
};

use super::{Plan, Policy, PolicyError};

/// One tool on one running server, as listed now, with what the policy decides for it.
/// `rpr call` and the operator steps start one; the gate checks one per call against the
/// tool's pin.
#[derive(Debug)]
pub struct Live {
    /// The name the policy and the pins know the server by (its configured name).
    pub server: String,
    /// The session with the server.
    pub client: Arc<McpClient>,
    /// The tool list the tool was found and planned in.
    pub list: Arc<ToolList>,
    /// The tool.
    pub tool: Tool,
    /// What the policy decides for it.
    pub plan: Plan,
}

/// A started [`Live`] tool, and the notes the policy has about its server's readbacks
/// (one per readback whose `expect` cannot be checked: its tool declares no output schema).
#[derive(Debug)]
pub struct Started {
    /// The tool.
    pub live: Live,
    /// Notes for the operator (they refuse nothing).
    pub notes: Vec<String>,
}

impl Live {
    /// Starts `command` as server `server`, lists its tools, checks the policy's names and
    /// readbacks against them, and plans `tool`.
    ///
    /// # Errors
    ///
    /// The policy does not govern `server`; the server does not start or list its tools;
    /// the policy names a tool it does not offer; it has no tool `tool`; or the policy
    /// refuses to plan the tool (see [`Policy::plan`]).
    pub fn start(
        command: &ServerCommand,
        policy: &Policy,
        server: &str,
        tool: &str,
    ) -> Result<Started, PolicyError> {
        policy.check_governs(server)?;
        let config = SessionConfig {
            max_message_bytes: policy.max_message_bytes(),
            ..SessionConfig::default()
        };
        let client = McpClient::connect(command, &config)
            .map_err(|e| format!("server `{server}` did not start: {e}"))?;
        let client = Arc::new(client);
        let list = client
            .list_tools()
            .map_err(|e| format!("server `{server}`: tools/list failed: {e}"))?;
        policy.check_offered(server, &list)?;
        let notes = policy.check_readbacks(server, &list)?;
        let Some(found) = list.get(tool).cloned() else {
            let names: Vec<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "server `{server}` ({}) has no tool `{tool}` (it has: {})",
                client.server().identity(),
                names.join(", ")
            )
            .into());
        };
        let plan = policy.plan(server, &found, &list)?;
        let live = Self {
            server: server.to_owned(),
            client,
            list: Arc::new(list),
            tool: found,
            plan,
        };
        Ok(Started { live, notes })
    }

    /// An executor of this tool on this server.
    #[must_use]
    pub fn executor(&self) -> McpExecutor {
        McpExecutor::new(Arc::clone(&self.client), self.tool.name.clone())
    }

    /// What a call of the tool would be bound to now (with the server's claimed class).
    ///
    /// # Errors
    ///
    /// The tool's definition cannot be bound (see [`ToolBinding`]).
    pub fn binding(&self) -> Result<Binding, crate::mcp::McpError> {
        ToolBinding::new(self.client.server(), &self.tool)?.to_binding()
    }
}
