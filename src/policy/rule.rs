//! One rule of the policy: the class and admission it gives a tool. The policy decides
//! both; a server's annotations (`readOnlyHint`, `destructiveHint`) are its claims, and
//! count only where a rule says `"trust_annotations": true`.

use crate::mcp::Tool;
use crate::{ActionClass, Decision};
use serde::Deserialize;

use super::ReadbackRule;

/// The key of the rule for a server's tools that have no rule of their own.
pub(super) const ANY_TOOL: &str = "*";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolRule {
    /// What admission decides for the tool; without it, `human_gate`, else the class.
    pub(super) admission: Option<AdmissionRule>,
    pub(super) human_gate: Option<bool>,
    /// The class; without it, mutating (or the annotation, when the rule trusts them).
    pub(super) read_only: Option<bool>,
    /// `true`: the server's annotations decide what this rule leaves open (`readOnlyHint`
    /// the class, `destructiveHint` the admission). Without it they decide nothing.
    pub(super) trust_annotations: Option<bool>,
    pub(super) readback: Option<ReadbackRule>,
    /// `true`: the server may not offer this tool. Without it, a rule for a tool the
    /// server does not list is refused when the server starts (a misspelt name).
    pub(super) may_be_absent: Option<bool>,
}

/// A tool's admission, as the policy writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AdmissionRule {
    Allow,
    Hold,
    HumanGate,
    Deny,
}

/// Which rule governs a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// A rule of its own.
    Own,
    /// The server's `"*"` rule.
    AnyTool,
    /// None: the default rule (mutating, a Human Gate).
    Nothing,
}

impl ToolRule {
    fn trusts_annotations(&self) -> bool {
        self.trust_annotations == Some(true)
    }

    /// The class by the policy: its `read_only`; else the tool's `readOnlyHint` when the
    /// rule trusts the annotations; else mutating, the class that fails closed (a Human
    /// Gate, a readback before completion, never a second send while unknown).
    pub(super) fn class(&self, tool: &Tool) -> ActionClass {
        let read_only = self.read_only.unwrap_or_else(|| {
            self.trusts_annotations() && tool.definition["annotations"]["readOnlyHint"] == true
        });
        if read_only {
            ActionClass::ReadOnly
        } else {
            ActionClass::Mutating
        }
    }

    /// The admission decision for a tool of `class` (`None`: denied) and why, for people.
    pub(super) fn admission(
        &self,
        tool: &Tool,
        class: ActionClass,
        found: Found,
    ) -> (Option<Decision>, &'static str) {
        let trusted = self.trusts_annotations();
        match (self.admission, self.human_gate) {
            (Some(AdmissionRule::Deny), _) => (None, "the policy denies it"),
            (Some(AdmissionRule::Allow), _) => (Some(Decision::Allow), "the policy allows it"),
            (Some(AdmissionRule::Hold), _) => {
                (Some(Decision::Hold), "the policy holds it for an approval")
            }
            (Some(AdmissionRule::HumanGate), _) | (None, Some(true)) => {
                (Some(Decision::HumanGate), "the policy requires one")
            }
            (None, Some(false)) => (Some(Decision::Allow), "the policy waives it"),
            (None, None) if class == ActionClass::ReadOnly => (
                Some(Decision::Allow),
                if self.read_only == Some(true) {
                    "the policy says it only reads"
                } else {
                    "it is annotated read-only, and the policy trusts its annotations"
                },
            ),
            // MCP's default for `destructiveHint` is true.
            (None, None)
                if trusted && tool.definition["annotations"]["destructiveHint"] == false =>
            {
                (
                    Some(Decision::Allow),
                    "it is annotated not destructive, and the policy trusts its annotations",
                )
            }
            (None, None) if trusted => (
                Some(Decision::HumanGate),
                "it is not annotated non-destructive, and the policy trusts its annotations",
            ),
            (None, None) if found == Found::Nothing => (
                Some(Decision::HumanGate),
                "the policy has no rule for it, so it is treated as changing state",
            ),
            (None, None) => (
                Some(Decision::HumanGate),
                "it may change state (the policy does not say it only reads)",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn claiming(annotations: Value) -> Tool {
        Tool::from_definition(json!({"name": "put", "inputSchema": {"type": "object"},
            "annotations": annotations}))
        .unwrap()
    }

    fn rule(value: Value) -> ToolRule {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_read_only_claim_decides_nothing_without_the_policys_opt_in() {
        let tool = claiming(json!({"readOnlyHint": true, "destructiveHint": false}));
        let default = ToolRule::default();
        assert_eq!(default.class(&tool), ActionClass::Mutating);
        assert_eq!(
            default
                .admission(&tool, ActionClass::Mutating, Found::Nothing)
                .0,
            Some(Decision::HumanGate)
        );
        let trusting = rule(json!({"trust_annotations": true}));
        assert_eq!(trusting.class(&tool), ActionClass::ReadOnly);
        // The policy's word wins over a trusted annotation.
        let stricter = rule(json!({"trust_annotations": true, "read_only": false}));
        assert_eq!(stricter.class(&tool), ActionClass::Mutating);
    }

    #[test]
    fn a_trusted_destructive_hint_decides_the_human_gate() {
        let mild = claiming(json!({"destructiveHint": false}));
        let harsh = claiming(json!({}));
        let trusting = rule(json!({"trust_annotations": true}));
        let decide = |tool: &Tool| {
            trusting
                .admission(tool, ActionClass::Mutating, Found::Own)
                .0
        };
        assert_eq!(decide(&mild), Some(Decision::Allow));
        assert_eq!(decide(&harsh), Some(Decision::HumanGate));
        let plain = rule(json!({}));
        assert_eq!(
            plain.admission(&mild, ActionClass::Mutating, Found::Own).0,
            Some(Decision::HumanGate)
        );
    }
}
