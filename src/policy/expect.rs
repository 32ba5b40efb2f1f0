//! A readback's `expect` pointers checked against the readback tool's declared
//! `outputSchema` when the policy is applied: a pointer the result cannot contain would
//! never find the effect, so every call would stay unknown (and were a missing member
//! read as "not applied", the way to a second send would open).

use crate::mcp::Tool;

use super::pointer::{self, Pointer};

/// Refuses an `expect` pointer into `structuredContent` that no result of the readback
/// tool's `outputSchema` can hold (a member it does not declare, an index into a member that
/// is not an array, `-`): see [`pointer::walk`]. Checked only as far as the schema says:
/// what it leaves open, and pointers outside `structuredContent`, are not refused; the
/// readback judge still takes a path the result lacks as inconclusive.
pub(super) fn check<'p>(
    reader: &Tool,
    pointers: impl IntoIterator<Item = &'p String>,
) -> Result<(), String> {
    let Some(schema) = reader.definition.get("outputSchema") else {
        return Ok(());
    };
    for text in pointers {
        let full = Pointer::parse(text)?;
        let Some((first, rest)) = full.tokens().split_first() else {
            continue;
        };
        if first != "structuredContent" {
            continue;
        }
        let inner = rest.iter().fold(Pointer::root(), |p, t| p.child(t));
        if let Err(miss) = pointer::walk(schema, &inner) {
            return Err(format!(
                "`expect` path {text}: the outputSchema of `{}` has no {inner}: {miss}; a path the \
                 result cannot contain never finds the effect",
                reader.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn reader(output: Value) -> Tool {
        Tool::from_definition(
            json!({"name": "read", "inputSchema": {"type": "object"}, "outputSchema": output}),
        )
        .unwrap()
    }

    #[test]
    fn a_misspelt_member_of_a_declared_output_is_refused_with_the_declared_names() {
        let tool = reader(json!({"type": "object", "properties": {"content": {"type": "string"}}}));
        let err = check(&tool, [&"/structuredContent/contnt".to_owned()]).unwrap_err();
        assert!(err.contains("declares no member `contnt`"), "{err}");
        assert!(
            err.contains("has no /contnt: at the top, `contnt` fails"),
            "{err}"
        );
        assert!(err.contains("(it declares: content)"), "{err}");
        assert!(check(&tool, [&"/structuredContent/content".to_owned()]).is_ok());
    }

    #[test]
    fn what_the_schema_does_not_describe_is_left_unchecked() {
        let open = reader(
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
        );
        assert!(check(&open, [&"/structuredContent/b".to_owned()]).is_ok());
        let loose = reader(json!({"type": "object"}));
        assert!(check(&loose, [&"/structuredContent/any/thing".to_owned()]).is_ok());
        let strict = reader(json!({"type": "object", "properties": {"a": {}}}));
        assert!(check(&strict, [&"/content/0/text".to_owned()]).is_ok());
        let nested = reader(
            json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "object", "properties": {"id": {}}}}}}),
        );
        assert!(check(&nested, [&"/structuredContent/items/0/id".to_owned()]).is_ok());
        assert!(check(&nested, [&"/structuredContent/items/0/idd".to_owned()]).is_err());
    }
}
