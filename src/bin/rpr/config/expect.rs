//! A readback's `expect` pointers checked against the readback tool's declared
//! `outputSchema` when the policy is applied: a pointer the result cannot contain would
//! never find the effect, so every call would stay unknown, and before issue 25 a missing
//! member even read as "not applied", opening the way to a second send.

use serde_json::Value;

use rpr::mcp::Tool;

/// Refuses an `expect` pointer into `structuredContent` that names a member the readback
/// tool's `outputSchema` does not declare. Checked only as far as the schema says: below a
/// schema without `properties` (or that admits other members), and for pointers outside
/// `structuredContent`, nothing is refused; the readback judge still takes a path the
/// result lacks as inconclusive.
pub(super) fn check<'p>(
    reader: &Tool,
    pointers: impl IntoIterator<Item = &'p String>,
) -> Result<(), String> {
    let Some(schema) = reader.definition.get("outputSchema") else {
        return Ok(());
    };
    for pointer in pointers {
        let mut segments = pointer.split('/').skip(1).map(unescape);
        if segments.next().as_deref() != Some("structuredContent") {
            continue;
        }
        let mut at = schema;
        let mut walked = String::from("/structuredContent");
        for segment in segments {
            match step(at, &segment) {
                Step::Into(next) => at = next,
                Step::Unchecked => break,
                Step::Undeclared(declared) => {
                    return Err(format!(
                        "`expect` path {pointer}: the outputSchema of `{}` declares no member `{segment}` \
                         under {walked} (it declares: {}); a path the result cannot contain never \
                         finds the effect",
                        reader.name,
                        if declared.is_empty() {
                            "none".to_owned()
                        } else {
                            declared.join(", ")
                        }
                    ));
                }
            }
            walked.push('/');
            walked.push_str(&segment);
        }
    }
    Ok(())
}

enum Step<'s> {
    Into(&'s Value),
    /// The schema says nothing more precise below here.
    Unchecked,
    /// An object schema that admits only the members it names, none of them this one.
    Undeclared(Vec<String>),
}

fn step<'s>(schema: &'s Value, segment: &str) -> Step<'s> {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        if let Some(next) = props.get(segment) {
            return Step::Into(next);
        }
        return match schema.get("additionalProperties") {
            // Other members are admitted: described by this schema, or by none.
            Some(extra @ Value::Object(_)) => Step::Into(extra),
            Some(Value::Bool(true)) => Step::Unchecked,
            // Absent or false: the declared members are the ones the result holds.
            _ => Step::Undeclared(props.keys().cloned().collect()),
        };
    }
    match schema.get("items") {
        Some(items @ Value::Object(_)) if segment.parse::<usize>().is_ok() => Step::Into(items),
        _ => Step::Unchecked,
    }
}

/// A JSON Pointer reference token, unescaped (RFC 6901).
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
