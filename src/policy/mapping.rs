//! A readback rule's mapping: the readback tool's arguments and the expected values are
//! templates in which a string `"$name"` is the call's argument `name` and `"$/a/0/b"` a
//! JSON Pointer into the call's arguments. Checked three times: the pointers' syntax when
//! the policy is loaded; every pointer against both tools' schemas when the server lists
//! them (the source in the write's `inputSchema`, where the value goes in the readback
//! tool's `inputSchema`); and the sources against each call's arguments before anything
//! is recorded or sent.

use crate::mcp::Tool;
use serde_json::Value;

use super::pointer::{self, Pointer};

/// A placeholder in a template: the text after `$`.
struct Placeholder<'t> {
    text: &'t str,
}

/// Every placeholder in `template`.
fn placeholders<'t>(template: &'t Value, out: &mut Vec<Placeholder<'t>>) {
    match template {
        Value::String(s) => out.extend(s.strip_prefix('$').map(|text| Placeholder { text })),
        Value::Array(items) => items.iter().for_each(|v| placeholders(v, out)),
        Value::Object(map) => map.values().for_each(|v| placeholders(v, out)),
        _ => {}
    }
}

/// The places a template fills: every member and item that holds no other (a leaf), as
/// pointers from the template's top.
fn leaves(template: &Value, at: &Pointer, out: &mut Vec<Pointer>) {
    let children: Vec<(String, &Value)> = match template {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        _ => Vec::new(),
    };
    if children.is_empty() {
        if !at.tokens().is_empty() {
            out.push(at.clone());
        }
        return;
    }
    for (token, v) in children {
        leaves(v, &at.child(&token), out);
    }
}

/// The placeholders of every template of a rule: its arguments and its expected values.
fn all_placeholders<'t>(
    arguments: &'t Value,
    expect: impl Iterator<Item = &'t Value>,
) -> Vec<Placeholder<'t>> {
    let mut out = Vec::new();
    placeholders(arguments, &mut out);
    for expected in expect {
        placeholders(expected, &mut out);
    }
    out
}

/// Checks the syntax of a rule's pointers when the policy is loaded.
pub(super) fn check_syntax<'t>(
    arguments: &'t Value,
    expect: impl Iterator<Item = (&'t String, &'t Value)>,
) -> Result<(), String> {
    if !arguments.is_object() {
        return Err("readback.arguments must be an object (the readback tool's arguments)".into());
    }
    let (keys, values): (Vec<&String>, Vec<&Value>) = expect.unzip();
    for key in keys {
        Pointer::parse(key).map_err(|e| format!("readback.expect key: {e}"))?;
    }
    for p in all_placeholders(arguments, values.into_iter()) {
        Pointer::of_placeholder(p.text)
            .map_err(|e| format!("readback placeholder \"${}\": {e}", p.text))?;
    }
    Ok(())
}

fn input_schema(tool: &Tool) -> &Value {
    tool.definition.get("inputSchema").unwrap_or(&Value::Null)
}

/// The names an input schema declares at its top, for a message.
fn declared(tool: &Tool) -> String {
    input_schema(tool)["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect::<Vec<_>>().join(", "))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "none".to_owned())
}

/// Checks every placeholder of the rule against the write's `inputSchema`, and every place
/// its arguments fill against the readback tool's `inputSchema`. `Err` says which tool,
/// which pointer and the first token that fails.
pub(super) fn check_schemas<'t>(
    tool: &Tool,
    reader: &Tool,
    arguments: &'t Value,
    expect: impl Iterator<Item = &'t Value>,
) -> Result<(), String> {
    let name = &tool.name;
    for p in all_placeholders(arguments, expect) {
        let source = Pointer::of_placeholder(p.text)?;
        if let Err(miss) = pointer::walk(input_schema(tool), &source) {
            return Err(if source.is_top_level() {
                format!(
                    "uses \"${}\", but `{name}` has no argument `{}` (it has: {})",
                    p.text,
                    miss.token,
                    declared(tool)
                )
            } else {
                format!(
                    "uses \"${}\", but the inputSchema of `{name}` has no {source}: {miss}",
                    p.text
                )
            });
        }
    }
    let mut targets = Vec::new();
    leaves(arguments, &Pointer::root(), &mut targets);
    let reading = &reader.name;
    for target in targets {
        if let Err(miss) = pointer::walk(input_schema(reader), &target) {
            return Err(if miss.walked.is_empty() {
                format!(
                    "passes argument `{}` to `{reading}`, which has no such argument (it has: {})",
                    miss.token,
                    declared(reader)
                )
            } else {
                format!(
                    "passes {target} to `{reading}`, but the inputSchema of `{reading}` has no {target}: {miss}"
                )
            });
        }
    }
    Ok(())
}

/// The first placeholder of the templates whose source `arguments` lack, or hold as
/// `null`: why a readback of this call could never read what it needs. A `null` fills
/// nothing either: a readback given it reads no record the call wrote (a server that made
/// up the key it was not given answers "not found"), and a `null` read back proves nothing
/// of one.
pub(super) fn missing_source<'t>(
    arguments: &'t Value,
    expect: impl Iterator<Item = &'t Value>,
    call: &Value,
) -> Option<String> {
    all_placeholders(arguments, expect)
        .into_iter()
        .find_map(|p| {
            let source = Pointer::of_placeholder(p.text).ok()?;
            let depth = match source.resolve(call) {
                Ok(Value::Null) if source.is_top_level() => {
                    return Some(format!(
                        "the call's argument `{}` is null",
                        source.tokens()[0]
                    ));
                }
                Ok(Value::Null) => {
                    return Some(format!("the call's arguments hold null at {source}"));
                }
                Ok(_) => return None,
                Err(depth) => depth,
            };
            Some(if source.is_top_level() {
                format!("the call has no argument `{}`", source.tokens()[0])
            } else if depth == 0 {
                format!(
                    "the call's arguments have no {source} (no `{}` at the top)",
                    source.tokens()[0]
                )
            } else {
                format!(
                    "the call's arguments have no {source} (they stop at {}, which has no `{}`)",
                    source.prefix(depth),
                    source.tokens()[depth]
                )
            })
        })
}

/// `template` with every string `"$…"` replaced by what it names in `call` (`null` where
/// `call` lacks it: [`missing_source`] refuses such a call before it is sent).
pub(super) fn fill(template: &Value, call: &Value) -> Value {
    match template {
        Value::String(s) => match s.strip_prefix('$') {
            Some(text) => Pointer::of_placeholder(text)
                .ok()
                .and_then(|p| p.resolve(call).ok().cloned())
                .unwrap_or(Value::Null),
            None => template.clone(),
        },
        Value::Array(items) => items.iter().map(|v| fill(v, call)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), fill(v, call)))
            .collect(),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, input: Value) -> Tool {
        Tool::from_definition(json!({"name": name, "inputSchema": input})).unwrap()
    }

    fn memory() -> (Tool, Tool) {
        let write = tool(
            "create_entities",
            json!({"type": "object", "properties": {"entities": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"}, "entityType": {"type": "string"},
                "observations": {"type": "array", "items": {"type": "string"}}}}}}}),
        );
        let read = tool(
            "open_nodes",
            json!({"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}}),
        );
        (write, read)
    }

    #[test]
    fn nested_sources_and_targets_are_checked_against_both_schemas() {
        let (write, read) = memory();
        let expect = [json!("$/entities/0/entityType")];
        let ok = json!({"names": ["$/entities/0/name"]});
        assert_eq!(check_schemas(&write, &read, &ok, expect.iter()), Ok(()));

        let typo = json!({"names": ["$/entities/0/nmae"]});
        let err = check_schemas(&write, &read, &typo, expect.iter()).unwrap_err();
        assert!(
            err.contains("the inputSchema of `create_entities` has no /entities/0/nmae: under /entities/0, `nmae` fails"),
            "{err}"
        );
        let target = json!({"names": {"first": "$/entities/0/name"}});
        let err = check_schemas(&write, &read, &target, expect.iter()).unwrap_err();
        assert!(
            err.contains("passes /names/first to `open_nodes`, but the inputSchema of `open_nodes` has no /names/first: under /names, `first` fails"),
            "{err}"
        );
        let top = json!({"name": "$/entities/0/name"});
        let err = check_schemas(&write, &read, &top, expect.iter()).unwrap_err();
        assert!(
            err.contains(
                "passes argument `name` to `open_nodes`, which has no such argument (it has: names)"
            ),
            "{err}"
        );
        let plain = json!({"names": ["$entity"]});
        let err = check_schemas(&write, &read, &plain, expect.iter()).unwrap_err();
        assert!(
            err.contains("uses \"$entity\", but `create_entities` has no argument `entity` (it has: entities)"),
            "{err}"
        );
        let bad_expect = [json!("$/entities/-/name")];
        let err = check_schemas(&write, &read, &ok, bad_expect.iter()).unwrap_err();
        assert!(err.contains("under /entities, `-` fails"), "{err}");
    }

    #[test]
    fn fill_reads_names_and_pointers_and_missing_sources_are_named() {
        let call = json!({"entities": [{"name": "a/b~c", "entityType": "t"}], "a~b": 1, "x/y": 2});
        let template = json!({"names": ["$/entities/0/name"], "t": "$/entities/0/entityType",
                              "plain": "$a~b", "slash": "$x/y", "escaped": "$/x~1y", "lit": "v"});
        assert_eq!(
            fill(&template, &call),
            json!({"names": ["a/b~c"], "t": "t", "plain": 1, "slash": 2, "escaped": 2, "lit": "v"})
        );
        assert_eq!(missing_source(&template, std::iter::empty(), &call), None);
        let none = json!({"entities": []});
        let why = missing_source(&template, std::iter::empty(), &none).unwrap();
        assert_eq!(
            why,
            "the call's arguments have no /entities/0/name (they stop at /entities, which has no `0`)"
        );
        let expect = [json!("$key")];
        let why = missing_source(&json!({}), expect.iter(), &json!({})).unwrap();
        assert_eq!(why, "the call has no argument `key`");
    }

    /// A source that holds `null` is as good as none: a readback given `null` reads no
    /// record the call wrote, so a `not found` (or a `null`) it gets would pass for a
    /// write that did not happen, and a repair and resume would write again.
    #[test]
    fn a_source_that_holds_null_is_missing() {
        let template = json!({"key": "$key", "deep": "$/a/b"});
        let call = json!({"key": "k", "a": {"b": 1}});
        assert_eq!(missing_source(&template, std::iter::empty(), &call), None);
        let why = missing_source(
            &template,
            std::iter::empty(),
            &json!({"key": null, "a": {"b": 1}}),
        );
        assert_eq!(why.as_deref(), Some("the call's argument `key` is null"));
        let why = missing_source(
            &template,
            std::iter::empty(),
            &json!({"key": "k", "a": {"b": null}}),
        );
        assert_eq!(
            why.as_deref(),
            Some("the call's arguments hold null at /a/b")
        );
        let expect = [json!("$value")];
        let why = missing_source(&json!({}), expect.iter(), &json!({"value": null}));
        assert_eq!(why.as_deref(), Some("the call's argument `value` is null"));
    }

    #[test]
    fn syntax_is_checked_when_the_policy_is_loaded() {
        let expect = [("/structuredContent/value".to_owned(), json!("$/a~2"))];
        let err = check_syntax(&json!({}), expect.iter().map(|(k, v)| (k, v))).unwrap_err();
        assert!(err.contains("\"$/a~2\""), "{err}");
        let expect = [("value".to_owned(), json!("$v"))];
        let err = check_syntax(&json!({}), expect.iter().map(|(k, v)| (k, v))).unwrap_err();
        assert!(err.contains("must be empty or start with `/`"), "{err}");
        let err = check_syntax(&json!(["$v"]), std::iter::empty()).unwrap_err();
        assert!(err.contains("must be an object"), "{err}");
    }
}
