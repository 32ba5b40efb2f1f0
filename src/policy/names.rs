//! The names a policy uses, checked against the servers and tools there are: a rule under
//! a name nothing has governs nothing, and the tool it meant falls under another rule, so a
//! misspelt name is refused when the server starts, with the names there are.

use crate::mcp::ToolList;

use super::rule::ANY_TOOL;
use super::{Policy, PolicyError};

/// `names` joined for a message, or `none`.
fn listed<'n>(names: impl IntoIterator<Item = &'n str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

impl Policy {
    /// The server the command or gate governs, `server`, must be named in the policy
    /// (`"servers": {"NAME": {}}` with no rules is a name too). A policy may name other
    /// servers besides (one policy may serve several gates).
    pub fn check_governs(&self, server: &str) -> Result<(), PolicyError> {
        if self.servers.contains_key(server) {
            return Ok(());
        }
        Err(format!(
            "the policy has no rules for server `{server}` (it names: {}); the policy knows a \
             server by its configured name (the mcpServers key, or `rpr gate --name`). Fix the \
             name, or add \"{server}\": {{}} to servers to give its tools the default rule \
             (changing state, refused without a readback)",
            listed(self.servers.keys().map(String::as_str))
        )
        .into())
    }

    /// Every server the policy names must be one of `configured` (the names of the
    /// servers in the host's MCP client configuration).
    pub fn check_configured<'n>(
        &self,
        configured: impl IntoIterator<Item = &'n str> + Clone,
    ) -> Result<(), PolicyError> {
        let unknown: Vec<String> = self
            .servers
            .keys()
            .filter(|name| !configured.clone().into_iter().any(|c| c == name.as_str()))
            .map(|name| format!("`{name}`"))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the policy names server(s) {} that the config does not have (it has: {}); fix the \
             names in the policy (a rule under a name no server has governs nothing)",
            unknown.join(", "),
            listed(configured)
        )
        .into())
    }

    /// Every tool the policy names for `server` (a rule's own name, and the tool of each
    /// readback) must be one `list` offers, unless its rule says `"may_be_absent": true`.
    pub fn check_offered(&self, server: &str, list: &ToolList) -> Result<(), String> {
        let Some(rules) = self.servers.get(server) else {
            return Ok(());
        };
        let offered = |name: &str| list.get(name).is_some();
        let mut missing: Vec<String> = Vec::new();
        for (tool, rule) in rules {
            if tool == ANY_TOOL {
                continue;
            }
            let present = offered(tool);
            if !present && rule.may_be_absent != Some(true) {
                missing.push(format!("`{tool}`"));
            }
            if let Some(rb) = rule.readback.as_ref().filter(|_| present)
                && !offered(&rb.tool)
            {
                missing.push(format!("`{}` (the readback of `{tool}`)", rb.tool));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let mut names: Vec<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        Err(format!(
            "the policy names tool(s) {} of server `{server}`, which the server does not offer \
             (it offers: {}); fix the names in servers.{server}, or say \"may_be_absent\": true \
             in the rule of a tool the server may not offer",
            missing.join(", "),
            listed(names)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::Tool;
    use serde_json::json;

    fn offering(names: &[&str]) -> ToolList {
        let mut list = ToolList::default();
        for name in names {
            list.tools.push(
                Tool::from_definition(json!({"name": name, "inputSchema": {"type": "object"}}))
                    .unwrap(),
            );
        }
        list
    }

    fn policy(servers: serde_json::Value) -> Policy {
        serde_json::from_value(json!({ "servers": servers })).unwrap()
    }

    #[test]
    fn a_rule_for_a_tool_the_server_lacks_is_refused_with_the_tools_it_offers() {
        let p = policy(json!({"files": {"*": {"admission": "deny"},
            "read_text_fil": {"read_only": true}}}));
        let err = p
            .check_offered("files", &offering(&["write_file", "read_text_file"]))
            .unwrap_err();
        assert!(err.contains("`read_text_fil`"), "{err}");
        assert!(
            err.contains("(it offers: read_text_file, write_file)"),
            "{err}"
        );
        let absent = policy(json!({"files": {"delete": {"may_be_absent": true}}}));
        assert!(absent.check_offered("files", &offering(&["read"])).is_ok());
    }

    #[test]
    fn a_readback_tool_the_server_lacks_is_refused() {
        let p = policy(json!({"s": {"put": {"readback": {"tool": "gett",
            "arguments": {}, "expect": {"/x": 1}}}}}));
        let err = p
            .check_offered("s", &offering(&["put", "get"]))
            .unwrap_err();
        assert!(err.contains("`gett` (the readback of `put`)"), "{err}");
    }

    #[test]
    fn the_governed_server_must_be_named() {
        let p = policy(json!({"fautls": {}}));
        let err = p.check_governs("faults").unwrap_err().to_string();
        assert!(err.contains("`faults` (it names: fautls)"), "{err}");
        assert!(p.check_governs("fautls").is_ok());
    }
}
