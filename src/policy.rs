//! The policy of `rpr call` and `rpr gate`: who holds which role, and per server and tool its
//! class, admission (a Human Gate or not) and readback. Its JSON format is documented in
//! docs/gate.md and docs/host.md.
//!
//! A policy is read ([`Policy::load`], [`Policy::parse`]), checked against the servers and
//! tools there are (a name that governs nothing is refused), and asked for a [`Plan`] per
//! tool. [`Live`] is one tool on a running server with its plan.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::executor::Request;
use crate::mcp::{McpClient, McpReadback, ReadbackVerdict, Tool, ToolList};
use crate::{ActionClass, Actor, ApprovalRule, Authority, Decision, Role};

mod expect;
mod live;
mod mapping;
mod names;
mod pointer;
mod rule;

pub use live::{Live, Started};
use rule::{ANY_TOOL, Found, ToolRule};

/// Why a policy cannot be read, or cannot be applied to the servers and tools there are.
/// The message names the server, tool or member and says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(String);

impl From<String> for PolicyError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for PolicyError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// The host's policy: who holds which role, and per server and tool: Human Gate,
/// class and readback. Unknown members are errors, so a typo cannot weaken it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The policy format's version: 1 (optional; another value is refused).
    version: Option<u32>,
    #[serde(default)]
    authority: BTreeMap<String, String>,
    #[serde(default)]
    servers: BTreeMap<String, BTreeMap<String, ToolRule>>,
    /// Limits on what is recorded as evidence (default `crate::evidence::Bounds::DEFAULT`).
    #[serde(default)]
    evidence_bounds: EvidenceBounds,
    /// How long an approval holds, in seconds (default [`DEFAULT_APPROVAL_TTL`]).
    approval_ttl: Option<u64>,
    /// The cap on one MCP message in either direction, in bytes (default
    /// [`crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES`], 16 MiB).
    max_message_bytes: Option<usize>,
    /// Who approves at a Human Gate, and how many of them.
    #[serde(default)]
    approval: ApprovalPolicy,
}

/// The smallest `max_message_bytes` a policy may give.
const MIN_MESSAGE_BYTES: usize = 1024;
/// The largest `max_message_bytes` a policy may give: 1 GiB.
const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// How long an approval holds when the policy does not say: one hour.
pub const DEFAULT_APPROVAL_TTL: std::time::Duration = std::time::Duration::from_hours(1);

/// The policy's `approval`: approvers besides the approval authority, the quorum, whether
/// the proposer may approve, and who may approve alone as break-glass.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApprovalPolicy {
    #[serde(default)]
    approvers: Vec<String>,
    quorum: Option<u32>,
    #[serde(default)]
    self_approval: bool,
    #[serde(default)]
    break_glass: Vec<String>,
}

/// The policy's `evidence_bounds`: each limit optional, defaulting to `Bounds::DEFAULT`'s.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[expect(
    clippy::struct_field_names,
    reason = "the names are the policy's JSON member names and `crate::evidence::Bounds`'s fields"
)]
struct EvidenceBounds {
    max_depth: Option<usize>,
    max_nodes: Option<usize>,
    max_string_bytes: Option<usize>,
    max_total_bytes: Option<usize>,
}

/// How a mutating tool's effect is read back: a read-only tool on the same server,
/// its arguments (`"$name"` is the call's argument `name`, `"$/a/0/b"` a JSON Pointer into
/// the call's arguments), and what the result must hold (JSON Pointer into the result →
/// expected value, also with `"$…"`). See `mapping` for how each is checked.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadbackRule {
    /// The read-only tool that reads the effect back.
    pub tool: String,
    arguments: Value,
    expect: BTreeMap<String, Value>,
    /// A tool error whose text contains this means the effect is absent (not applied).
    absent_if_error_contains: Option<String>,
}

impl Policy {
    /// Reads and checks the policy file at `path`.
    ///
    /// # Errors
    ///
    /// The file cannot be read, is not a policy (unknown members are refused, so a typo
    /// cannot weaken it), or is not consistent (see [`Policy::parse`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read policy {shown}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("policy {shown} is not valid: {e}").into())
    }

    /// Reads and checks a policy from its JSON text.
    ///
    /// # Errors
    ///
    /// The text is not a policy, or a rule in it cannot hold: an unknown role, both
    /// `admission` and `human_gate`, an empty readback `expect`, a readback mapping that
    /// is not well formed, an evidence bound of 0, a version other than 1.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        let policy: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        policy.check()?;
        Ok(policy)
    }

    /// The cap on one MCP message in either direction, in bytes: the policy's
    /// `max_message_bytes`, else [`crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES`].
    #[must_use]
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
            .unwrap_or(crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// The evidence bounds the runtime records with.
    #[must_use]
    pub fn bounds(&self) -> crate::evidence::Bounds {
        let d = crate::evidence::Bounds::DEFAULT;
        let b = &self.evidence_bounds;
        crate::evidence::Bounds::new(
            b.max_depth.unwrap_or(d.max_depth),
            b.max_nodes.unwrap_or(d.max_nodes),
            b.max_string_bytes.unwrap_or(d.max_string_bytes),
            b.max_total_bytes.unwrap_or(d.max_total_bytes),
        )
    }

    fn check(&self) -> Result<(), String> {
        if let Some(v) = self.version
            && v != 1
        {
            return Err(format!(
                "version {v} is not a policy version this rpr reads (it reads 1)"
            ));
        }
        for (server, tools) in &self.servers {
            for (tool, rule) in tools {
                if rule.admission.is_some() && rule.human_gate.is_some() {
                    return Err(format!(
                        "{server}/{tool}: give `admission` or `human_gate`, not both"
                    ));
                }
                if tool == ANY_TOOL && rule.may_be_absent.is_some() {
                    return Err(format!(
                        "{server}/\"*\": `may_be_absent` is for the rule of a named tool"
                    ));
                }
            }
        }
        let b = &self.evidence_bounds;
        for (name, value) in [
            ("max_depth", b.max_depth),
            ("max_nodes", b.max_nodes),
            ("max_string_bytes", b.max_string_bytes),
            ("max_total_bytes", b.max_total_bytes),
        ] {
            if value == Some(0) {
                return Err(format!("evidence_bounds.{name} must be above 0"));
            }
        }
        if let Some(n) = self.max_message_bytes
            && !(MIN_MESSAGE_BYTES..=MAX_MESSAGE_BYTES).contains(&n)
        {
            return Err(format!(
                "max_message_bytes is {n}: give a number of bytes from {MIN_MESSAGE_BYTES} to {MAX_MESSAGE_BYTES} (1 GiB)"
            ));
        }
        if self.approval_ttl == Some(0) {
            return Err("approval_ttl must be above 0 (seconds an approval holds)".into());
        }
        let a = &self.approval;
        if let Some(name) = a
            .approvers
            .iter()
            .chain(&a.break_glass)
            .find(|n| n.trim().is_empty())
        {
            return Err(format!("approval: an empty approver name ({name:?})"));
        }
        let possible = self.authority().approvers().len();
        match a.quorum {
            Some(0) => return Err("approval.quorum must be at least 1".into()),
            Some(q) if usize::try_from(q).unwrap_or(usize::MAX) > possible => {
                return Err(format!(
                    "approval.quorum is {q}, but only {possible} distinct approver(s) may approve \
                     (the approval authority and approval.approvers): it could never be met"
                ));
            }
            _ => {}
        }
        for (name, actor) in &self.authority {
            if name.parse::<Role>().is_err() {
                return Err(format!("authority: unknown role `{name}`"));
            }
            if actor.trim().is_empty() {
                return Err(format!("authority: role `{name}` has an empty actor"));
            }
        }
        for (server, tools) in &self.servers {
            for (tool, rule) in tools {
                let Some(rb) = &rule.readback else { continue };
                if rb.expect.is_empty() {
                    return Err(format!("{server}/{tool}: readback.expect is empty"));
                }
                // Every text contains "": every tool error of the readback would read as
                // "not applied", opening the way to a second send.
                if rb
                    .absent_if_error_contains
                    .as_deref()
                    .is_some_and(|n| n.trim().is_empty())
                {
                    return Err(format!(
                        "{server}/{tool}: readback.absent_if_error_contains is empty: it would take every tool error of the readback for \"not applied\"; give the text only an absent effect's error contains (say \"ENOENT\"), or leave it out"
                    ));
                }
                mapping::check_syntax(&rb.arguments, rb.expect.iter())
                    .map_err(|e| format!("{server}/{tool}: {e}"))?;
            }
        }
        Ok(())
    }

    /// Every role is `host` unless the policy names another actor; approvals by the
    /// policy's `approval` rule, expiring after `approval_ttl` (default one hour).
    #[must_use]
    pub fn authority(&self) -> Authority {
        let a = &self.approval;
        let ttl = self
            .approval_ttl
            .map_or(DEFAULT_APPROVAL_TTL, std::time::Duration::from_secs);
        let names = |n: &[String]| n.iter().map(Actor::new).collect::<Vec<_>>();
        let mut rule = ApprovalRule::new(a.quorum.unwrap_or(1), names(&a.approvers), Some(ttl))
            .with_break_glass(names(&a.break_glass));
        if a.self_approval {
            rule = rule.allowing_self_approval();
        }
        self.authority
            .iter()
            .filter_map(|(name, actor)| Some((name.parse().ok()?, Actor::new(actor))))
            .fold(Authority::single(&Actor::new("host")), |a, (r, actor)| {
                a.with(r, &actor)
            })
            .with_approval(rule)
    }

    /// The rule that governs `tool` of `server`: its own, else the server's `"*"`, else
    /// the default (no member set: mutating, a Human Gate).
    fn rule(&self, server: &str, tool: &str) -> (ToolRule, Found) {
        let rules = self.servers.get(server);
        if let Some(own) = rules.and_then(|t| t.get(tool)) {
            (own.clone(), Found::Own)
        } else if let Some(any) = rules.and_then(|t| t.get(ANY_TOOL)) {
            (any.clone(), Found::AnyTool)
        } else {
            (ToolRule::default(), Found::Nothing)
        }
    }

    /// What the host does with `tool` of server `server` (as listed by the server now).
    /// The class and the admission are the policy's (see the policy format in docs/gate.md); a tool that
    /// changes state must name a readback whose tool is read-only by the policy, else its
    /// calls are refused before anything is recorded.
    pub fn plan(&self, server: &str, tool: &Tool, list: &ToolList) -> Result<Plan, PolicyError> {
        let (rule, found) = self.rule(server, &tool.name);
        let class = rule.class(tool);
        let name = &tool.name;
        let (decision, why) = match rule.admission(tool, class, found) {
            (Some(decision), why) => (decision, why),
            // Denied: nothing will be sent, so no readback is needed either.
            (None, why) => {
                return Ok(Plan {
                    class,
                    decision: Decision::Deny(format!(
                        "the policy denies tool `{name}` of server `{server}`"
                    )),
                    why,
                    readback: None,
                });
            }
        };
        if class == ActionClass::Mutating && rule.readback.is_none() {
            let fix = format!(
                "Add servers.{server}.{name} to the policy with \"read_only\": true if it only reads, \
                 a \"readback\", or \"admission\": \"deny\""
            );
            return Err(match found {
                Found::Nothing => format!(
                    "tool `{name}` of server `{server}` has no rule in the policy, so it is treated as \
                     changing state (its annotations are the server's claim, not the policy), and a call \
                     that changes state completes only when a readback verifies it. {fix}"
                ),
                Found::Own | Found::AnyTool => format!(
                    "tool `{name}` of server `{server}` changes state, and the policy names no readback \
                     for it: a call that changes state completes only when a readback verifies it. {fix}"
                ),
            }
            .into());
        }
        if let Some(rb) = &rule.readback {
            let Some(reader) = list.get(&rb.tool) else {
                return Err(format!(
                    "the readback tool `{}` for `{name}` is not listed by server `{server}`",
                    rb.tool
                )
                .into());
            };
            if self.rule(server, &rb.tool).0.class(reader) != ActionClass::ReadOnly {
                return Err(format!(
                    "the readback tool `{reader}` for `{name}` of server `{server}` is not read-only by \
                     the policy, and a readback must not change anything. Add servers.{server}.{reader} \
                     to the policy with \"read_only\": true (the server's readOnlyHint counts only \
                     under \"trust_annotations\": true)",
                    reader = rb.tool
                )
                .into());
            }
            check_mapping(server, tool, reader, rb)?;
        }
        Ok(Plan {
            class,
            decision,
            why,
            readback: rule.readback,
        })
    }
}

impl Policy {
    /// Plans every readback the policy names for `server`'s tools that the server offers,
    /// when the gate or `rpr call` starts, so that a readback that could never verify
    /// anything is refused before any call. Returns a note for each readback whose
    /// `expect` cannot be checked because its tool declares no `outputSchema`.
    pub fn check_readbacks(
        &self,
        server: &str,
        list: &ToolList,
    ) -> Result<Vec<String>, PolicyError> {
        let mut unchecked = Vec::new();
        let Some(rules) = self.servers.get(server) else {
            return Ok(unchecked);
        };
        for (name, rule) in rules {
            let (Some(rb), Some(tool)) = (&rule.readback, list.get(name)) else {
                continue;
            };
            // A denied tool plans without its readback: nothing will be sent.
            self.plan(server, tool, list)?;
            if list
                .get(&rb.tool)
                .is_some_and(|reader| reader.definition.get("outputSchema").is_none())
            {
                unchecked.push(format!(
                    "the readback of `{name}` (server `{server}`) is unchecked: its tool `{}` declares no \
                     outputSchema, so its `expect` paths could not be checked (a path its result lacks \
                     leaves the call unknown; it never reads as an absent effect)",
                    rb.tool
                ));
            }
        }
        Ok(unchecked)
    }
}

/// What the policy decides for one tool.
#[derive(Debug)]
pub struct Plan {
    /// The tool's class by the policy (a server's annotation counts only where the policy
    /// says `trust_annotations`).
    pub class: ActionClass,
    /// The admission decision.
    pub decision: Decision,
    /// Why (not) a Human Gate, for people.
    pub why: &'static str,
    /// How a call's effect is read back (a tool that changes state has one, unless denied).
    pub readback: Option<ReadbackRule>,
}

impl Plan {
    /// The admission decision.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.decision.clone()
    }

    /// Refuses, before anything is recorded or sent, a call whose arguments lack a place its
    /// readback reads (a pointer the schema allows but this call does not fill): its effect
    /// could never be verified, so it could only end unknown.
    pub fn check_arguments(&self, tool: &str, arguments: &Value) -> Result<(), String> {
        let Some(why) = self
            .readback
            .as_ref()
            .and_then(|rb| rb.missing_source(arguments))
        else {
            return Ok(());
        };
        Err(format!(
            "the readback of `{tool}` reads what this call does not hold: {why}, so its effect \
             could never be verified"
        ))
    }

    /// The readback of a mutating tool, on `client`.
    pub fn readback(&self, client: &Arc<McpClient>) -> Result<McpReadback, PolicyError> {
        let rule = self
            .readback
            .clone()
            .ok_or("this tool has no readback in the policy")?;
        Ok(rule.on(client))
    }
}

/// Checks a readback mapping against the two tools when the policy is applied: each
/// `"$…"` must name a place the tool's input schema has (else it would read back `null` and
/// leave every call unknown), each place the readback arguments fill one the readback
/// tool's input schema has, and each `expect` path one its output schema has.
fn check_mapping(
    server: &str,
    tool: &Tool,
    reader: &Tool,
    rb: &ReadbackRule,
) -> Result<(), PolicyError> {
    let name = &tool.name;
    mapping::check_schemas(tool, reader, &rb.arguments, rb.expect.values()).map_err(|e| {
        format!(
            "the readback for `{name}` of server `{server}` {e}; fix servers.{server}.{name}.readback in the policy"
        )
    })?;
    expect::check(reader, rb.expect.keys()).map_err(|e| {
        format!(
            "the readback for `{name}` of server `{server}`: {e}; fix servers.{server}.{name}.readback.expect"
        )
    })?;
    Ok(())
}

/// How many bytes of a readback's error text [`ReadbackRule`]'s search for echoes may scan
/// in all (the text once for each distinct string the call and its readback carried): a
/// call with a hundred thousand strings and a server's error of megabytes would otherwise
/// cost their product. Past it, the error proves nothing.
const ECHO_SCAN_BUDGET: usize = 64 << 20;

impl ReadbackRule {
    /// The verdict on a readback result: every expectation met → applied; every expected
    /// member present and `null`, or a tool error containing `absent_if_error_contains`
    /// → not applied; anything else → inconclusive. A path the result does not contain
    /// proves nothing (a misspelt pointer, a server that answers in another shape): it is
    /// inconclusive, never absent. Nor does a mix of met and `null` expectations: what was
    /// met shows the effect is (at least partly) there, so it is no proof of "not applied",
    /// which would open the way to a second send.
    fn judge(&self, request: &Request, result: &Value) -> ReadbackVerdict {
        if result["isError"] == true {
            return match &self.absent_if_error_contains {
                Some(needle) if self.error_says(needle, request, result) => {
                    ReadbackVerdict::NotApplied
                }
                _ => ReadbackVerdict::Inconclusive,
            };
        }
        let (mut met, mut null) = (0, 0);
        for (pointer, expected) in &self.expect {
            let seen = pointer::Pointer::parse(pointer)
                .ok()
                .and_then(|p| p.resolve(result).ok());
            match seen {
                Some(seen) if *seen == mapping::fill(expected, &request.arguments) => met += 1,
                Some(Value::Null) => null += 1,
                None | Some(_) => return ReadbackVerdict::Inconclusive,
            }
        }
        match (met, null) {
            (_, 0) => ReadbackVerdict::Applied,
            (0, _) => ReadbackVerdict::NotApplied,
            _ => ReadbackVerdict::Inconclusive,
        }
    }

    /// Whether a readback's tool error says, in the server's own words, what
    /// `absent_if_error_contains` looks for: the needle in the text of the error's `content`
    /// text items, at a place that is not inside a string the call or its readback carried.
    /// A server that echoes what it was asked (`access denied: /data/ENOENT.txt`) must not
    /// make the needle match. Numbers count as carried strings (as JSON writes them); a
    /// carried string strictly inside the needle itself (`E` for `ENOENT`) is no echo of
    /// it. Only an exact echo is recognized: a server that rewrites what it echoes (a path
    /// made absolute) can still show the needle; choose a needle that names the error, not
    /// a value.
    fn error_says(&self, needle: &str, request: &Request, result: &Value) -> bool {
        let text: String = result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["type"] == "text")
            .filter_map(|item| item["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let asked = mapping::fill(&self.arguments, &request.arguments);
        let mut echoes = Vec::new();
        strings_in(&request.arguments, &mut echoes);
        strings_in(&asked, &mut echoes);
        // A carried string strictly inside the needle (`E` of `ENOENT`) is no echo of it;
        // one as long as the needle or longer that holds it is.
        let inside = |e: &str| e.len() < needle.len() && needle.contains(e);
        echoes.retain(|e| !e.is_empty() && !inside(e));
        echoes.sort_unstable();
        echoes.dedup();
        // Each carried string is looked for in the whole text: past the budget, the error
        // is not read at all, so it proves nothing (inconclusive), never "not applied".
        if echoes.len().saturating_mul(text.len()) > ECHO_SCAN_BUDGET {
            return false;
        }
        let mut covered = vec![false; text.len()];
        for echo in &echoes {
            for (at, _) in text.match_indices(echo.as_str()) {
                covered[at..at + echo.len()].fill(true);
            }
        }
        text.match_indices(needle)
            .any(|(at, _)| !covered[at..at + needle.len()].contains(&true))
    }

    /// Why a readback could not be derived from a call with `arguments`: the first
    /// `"$…"` of the rule they lack. `None` when they hold every one.
    #[must_use]
    pub fn missing_source(&self, arguments: &Value) -> Option<String> {
        mapping::missing_source(&self.arguments, self.expect.values(), arguments)
    }

    /// The readback on `client`. A call whose arguments lack a place the rule reads is not
    /// read back: nothing the readback tool says could prove its effect (inconclusive).
    pub fn on(self, client: &Arc<McpClient>) -> McpReadback {
        let arguments = self.arguments.clone();
        let sources = self.clone();
        McpReadback::new(
            Arc::clone(client),
            self.tool.clone(),
            move |request: &Request| mapping::fill(&arguments, &request.arguments),
            move |request: &Request, result: &Value| self.judge(request, result),
        )
        .judge_tool_errors(true)
        .guarded_by(move |_: &McpClient, request: &Request| {
            sources
                .missing_source(&request.arguments)
                .map_or(Ok(()), |why| {
                    Err(format!(
                        "the readback cannot be derived from this call: {why}"
                    ))
                })
        })
    }
}

/// Every string in `value` (member names and values, at any depth), into `out`.
fn strings_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(members) => {
            for (name, v) in members {
                out.push(name.clone());
                strings_in(v, out);
            }
        }
        Value::Number(n) => out.push(n.to_string()),
        Value::Null | Value::Bool(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule() -> ReadbackRule {
        serde_json::from_value(json!({
            "tool": "get_issue",
            "arguments": {"title": "$title"},
            "expect": {
                "/structuredContent/title": "$title",
                "/structuredContent/assignee": "$assignee"
            }
        }))
        .unwrap()
    }

    fn judged(title: Value, assignee: Value) -> ReadbackVerdict {
        let request = Request::new("create_issue", json!({"title": "t", "assignee": "a"}));
        let result = json!({"structuredContent": {"title": title, "assignee": assignee}});
        rule().judge(&request, &result)
    }

    #[test]
    fn every_expectation_met_is_applied_and_every_one_null_is_not_applied() {
        assert_eq!(judged(json!("t"), json!("a")), ReadbackVerdict::Applied);
        assert_eq!(
            judged(Value::Null, Value::Null),
            ReadbackVerdict::NotApplied
        );
    }

    /// One member shows the effect and another reads back `null` (set later, or stored
    /// elsewhere): the effect is at least partly there, so this proves no "not applied"
    /// (which would let the call be sent again), whichever member is which.
    #[test]
    fn met_and_null_expectations_together_are_inconclusive() {
        assert_eq!(
            judged(json!("t"), Value::Null),
            ReadbackVerdict::Inconclusive
        );
        assert_eq!(
            judged(Value::Null, json!("a")),
            ReadbackVerdict::Inconclusive
        );
    }

    /// The needle is looked for in the server's own words: the text of the error's text
    /// items, with what the call and its readback asked for taken out. A server that
    /// echoes the path it was denied must not read as "not found".
    #[test]
    fn an_error_that_only_echoes_the_needle_back_is_inconclusive() {
        let rule: ReadbackRule = serde_json::from_value(json!({
            "tool": "read_text_file",
            "arguments": {"path": "$path"},
            "expect": {"/structuredContent/content": "$content"},
            "absent_if_error_contains": "ENOENT"
        }))
        .unwrap();
        let request = Request::new(
            "write_file",
            json!({"path": "/data/ENOENT.txt", "content": "x"}),
        );
        let error =
            |text: &str| json!({"content": [{"type": "text", "text": text}], "isError": true});
        assert_eq!(
            rule.judge(
                &request,
                &error("Access denied - path outside allowed directories: /data/ENOENT.txt")
            ),
            ReadbackVerdict::Inconclusive
        );
        assert_eq!(
            rule.judge(
                &request,
                &error("ENOENT: no such file or directory, open '/data/ENOENT.txt'")
            ),
            ReadbackVerdict::NotApplied
        );
        // A carried string equal to the needle, or a number, echoed alone: no statement.
        let named = Request::new("write_file", json!({"path": "ENOENT", "content": "x"}));
        assert_eq!(
            rule.judge(&named, &error("Access denied: ENOENT")),
            ReadbackVerdict::Inconclusive
        );
        let numbered: ReadbackRule = serde_json::from_value(json!({
            "tool": "get", "arguments": {"id": "$id"},
            "expect": {"/structuredContent/id": "$id"},
            "absent_if_error_contains": "404"
        }))
        .unwrap();
        let by_number = Request::new("put", json!({"id": 404}));
        assert_eq!(
            numbered.judge(&by_number, &error("forbidden: 404")),
            ReadbackVerdict::Inconclusive
        );
        assert_eq!(
            numbered.judge(&by_number, &error("not found (404)")),
            ReadbackVerdict::Inconclusive
        );
        // A short carried string inside the needle (here the content `E`) echoes nothing.
        let short = Request::new("write_file", json!({"path": "/data/a.txt", "content": "E"}));
        assert_eq!(
            rule.judge(&short, &error("ENOENT: no such file or directory")),
            ReadbackVerdict::NotApplied
        );
        // Only text items speak: the needle in another item's data is no statement.
        let resource = json!({"content": [{"type": "resource", "resource": {"uri": "file:///ENOENT", "text": "ENOENT"}}], "isError": true});
        assert_eq!(
            rule.judge(&request, &resource),
            ReadbackVerdict::Inconclusive
        );
    }

    /// The search for echoes has a budget: a call carrying more strings than the error's
    /// text can be searched for within it leaves the error unread, inconclusive, never
    /// "not applied" (which would open the way to a second send).
    #[test]
    fn an_error_too_costly_to_search_for_echoes_is_inconclusive() {
        let rule: ReadbackRule = serde_json::from_value(json!({
            "tool": "get", "arguments": {"key": "$key"},
            "expect": {"/structuredContent/value": "$value"},
            "absent_if_error_contains": "ENOENT"
        }))
        .unwrap();
        let text = format!("ENOENT: no such key {}", "x".repeat(1000));
        let error = json!({"content": [{"type": "text", "text": text}], "isError": true});
        let few = Request::new("put", json!({"key": "k", "value": "v"}));
        assert_eq!(rule.judge(&few, &error), ReadbackVerdict::NotApplied);
        let strings = ECHO_SCAN_BUDGET / text.len() + 1;
        let many: Vec<String> = (0..strings).map(|i| format!("s{i}")).collect();
        let costly = Request::new("put", json!({"key": "k", "value": many}));
        assert_eq!(rule.judge(&costly, &error), ReadbackVerdict::Inconclusive);
    }

    #[test]
    fn an_empty_absent_if_error_contains_is_refused() {
        for needle in ["", " "] {
            let text = json!({"servers": {"s": {
                "get": {"read_only": true},
                "put": {"readback": {"tool": "get", "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"},
                    "absent_if_error_contains": needle}}
            }}})
            .to_string();
            let e = Policy::parse(&text).unwrap_err().to_string();
            assert!(e.contains("absent_if_error_contains is empty"), "{e}");
        }
    }

    #[test]
    fn another_value_is_inconclusive() {
        assert_eq!(
            judged(json!("t"), json!("b")),
            ReadbackVerdict::Inconclusive
        );
        assert_eq!(
            judged(Value::Null, json!("b")),
            ReadbackVerdict::Inconclusive
        );
    }
}
