//! The bindings of the tools of the list the gate holds, computed once per list and session
//! instead of once per call (otherwise the canonical JSON and SHA-256 of a tool's
//! definition ran two or three times a call). A binding is a pure function of the session's
//! server identity, the tool's definition and the class, so a list fetched again, or a
//! server started again, starts a new cache: it is kept for one (session, list) pair only,
//! held by its `Arc`s so neither can be freed and its address reused while cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::ActionClass;
use crate::executor::{Binding, Refusal};
use crate::mcp::executor::Listed;
use crate::mcp::{ArgumentValidator, McpClient, McpError, Tool, ToolBinding, ToolList};

/// One tool's bindings on one session.
pub(crate) struct ToolBindings {
    client: Arc<McpClient>,
    list: Arc<ToolList>,
    binding: ToolBinding,
    /// The binding as the server describes the tool (its own annotation's class).
    pub(crate) claimed: Binding,
    /// The validator of the tool's arguments, or why its schema cannot be used.
    pub(crate) validator: Result<ArgumentValidator, String>,
    /// What a call's executor binds and checks, per class (the policy's word): made once,
    /// not per call, and its binding shared with each call, not copied (its details hold
    /// the tool's whole definition).
    listed: Mutex<Vec<(ActionClass, Arc<Listed>)>>,
}

impl ToolBindings {
    /// What an executor of this tool with `class` (the policy's word) binds and checks on
    /// this session and list ([`crate::mcp::McpExecutor::with_listed`]).
    pub(crate) fn listed(&self, class: ActionClass) -> Result<Arc<Listed>, Refusal> {
        let mut listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, l)) = listed.iter().find(|(c, _)| *c == class) {
            return Ok(Arc::clone(l));
        }
        let made = Arc::new(Listed::new(
            &self.client,
            &self.list,
            &self.binding.tool_name,
            Some(class),
        )?);
        listed.push((class, Arc::clone(&made)));
        Ok(made)
    }

    /// The binding with `class` (the policy's word): the one its executor binds.
    pub(crate) fn planned(&self, class: ActionClass) -> Result<Arc<Binding>, Refusal> {
        self.listed(class)?.binding()
    }
}

/// The cache: the session and list it is for, and each tool's bindings.
#[derive(Default)]
pub(crate) struct Bindings {
    held: Mutex<Option<Held>>,
}

struct Held {
    client: Arc<McpClient>,
    list: Arc<ToolList>,
    tools: HashMap<String, Arc<ToolBindings>>,
}

impl Bindings {
    /// `tool`'s bindings on `client`'s session, `tool` being one of `list`'s.
    pub(crate) fn get(
        &self,
        client: &Arc<McpClient>,
        list: &Arc<ToolList>,
        tool: &Tool,
    ) -> Result<Arc<ToolBindings>, McpError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let same = held
            .as_ref()
            .is_some_and(|h| Arc::ptr_eq(&h.client, client) && Arc::ptr_eq(&h.list, list));
        if !same {
            *held = None;
        }
        let held = held.get_or_insert_with(|| Held {
            client: Arc::clone(client),
            list: Arc::clone(list),
            tools: HashMap::new(),
        });
        if let Some(found) = held.tools.get(&tool.name) {
            return Ok(Arc::clone(found));
        }
        let binding = ToolBinding::new(client.server(), tool)?;
        let claimed = binding.to_binding()?;
        let made = Arc::new(ToolBindings {
            client: Arc::clone(client),
            list: Arc::clone(list),
            binding,
            claimed,
            validator: ArgumentValidator::new(tool).map_err(|e| e.to_string()),
            listed: Mutex::new(Vec::new()),
        });
        held.tools.insert(tool.name.clone(), Arc::clone(&made));
        Ok(made)
    }
}
