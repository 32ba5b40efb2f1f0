//! The policy parser and planner: any text is a policy or a specific error, never a panic;
//! a policy is applied to any tool list (tools with any input and output schemas) without a
//! panic, and a plan never lets a tool that changes state through without a readback.
//!
//! Input: the policy text, a newline, then a JSON array of tool definitions, a newline, then
//! a JSON object of call arguments. A missing part is empty.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rpr::mcp::{Tool, ToolList};
use rpr::policy::Policy;
use rpr::{ActionClass, Decision};
use serde_json::Value;

fuzz_target!(|input: &[u8]| {
    let mut parts = input.splitn(3, |b| *b == b'\n');
    let (policy, tools, arguments) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let Ok(text) = std::str::from_utf8(policy) else {
        return;
    };
    let Ok(parsed) = Policy::parse(text) else {
        return;
    };
    let _ = parsed.bounds();
    let _ = parsed.authority();
    let mut list = ToolList::default();
    if let Ok(Value::Array(definitions)) = serde_json::from_slice::<Value>(tools) {
        list.tools = definitions
            .into_iter()
            .filter_map(|d| Tool::from_definition(d).ok())
            .collect();
    }
    let arguments = serde_json::from_slice::<Value>(arguments).unwrap_or(Value::Null);
    // The servers the policy names (parsed again as plain JSON: the policy keeps them private).
    let servers: Vec<String> = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.get("servers")?
                .as_object()
                .map(|s| s.keys().cloned().collect())
        })
        .unwrap_or_default();
    for server in servers.iter().map(String::as_str).chain(["unnamed"]) {
        let _ = parsed.check_governs(server);
        let _ = parsed.check_offered(server, &list);
        let _ = parsed.check_readbacks(server, &list);
        for tool in &list.tools {
            let Ok(plan) = parsed.plan(server, tool, &list) else {
                continue;
            };
            if plan.class == ActionClass::Mutating && !matches!(plan.decision, Decision::Deny(_)) {
                let rule = plan
                    .readback
                    .as_ref()
                    .expect("a tool that changes state is planned with a readback");
                let reader = list.get(&rule.tool).expect("its readback tool is listed");
                let read_plan = parsed.plan(server, reader, &list);
                assert!(
                    read_plan.is_ok_and(|p| p.class == ActionClass::ReadOnly),
                    "a readback tool is read-only by the policy"
                );
            }
            let _ = plan.check_arguments(&tool.name, &arguments);
        }
    }
});
