//! Validation of tool arguments against the tool's `inputSchema`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::McpError;
use super::client::Tool;

/// Most validation messages kept in one refusal.
const MAX_MESSAGES: usize = 10;

/// Most compiled schemas kept for reuse (the cache is emptied when it is full).
const MAX_COMPILED: usize = 256;

/// Compiled validators by the exact text of the schema they were compiled from (its
/// `$schema` included, so the dialect too): a governed call checks its arguments several
/// times (before it is recorded, at bind, prepare and send), and compiling costs more than
/// checking. A schema that differs by one byte is compiled anew.
static COMPILED: Mutex<Option<HashMap<String, Arc<jsonschema::Validator>>>> = Mutex::new(None);

fn compiled(text: &str) -> Option<Arc<jsonschema::Validator>> {
    let cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    cache.as_ref()?.get(text).cloned()
}

fn keep(text: String, validator: &Arc<jsonschema::Validator>) {
    let mut cache = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    let map = cache.get_or_insert_with(HashMap::new);
    if map.len() >= MAX_COMPILED {
        map.clear();
    }
    map.insert(text, Arc::clone(validator));
}

/// The JSON Schema dialect used for a tool's `inputSchema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dialect {
    /// JSON Schema 2020-12: the MCP 2025-11-25 default when `$schema` is absent.
    Draft202012,
    /// JSON Schema draft-07, when `$schema` declares it (the npm reference servers do).
    Draft07,
}

/// A compiled validator for one tool's arguments.
///
/// No remote or file `$ref` is ever fetched: a schema that needs one is reported as
/// unsupported.
#[derive(Clone)]
pub struct ArgumentValidator {
    validator: Arc<jsonschema::Validator>,
    dialect: Dialect,
}

impl std::fmt::Debug for ArgumentValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentValidator")
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

impl ArgumentValidator {
    /// Compiles `tool`'s input schema: 2020-12 unless `$schema` names draft-07;
    /// any other declared dialect is refused with [`McpError::UnsupportedSchema`]. A
    /// schema compiled before in this process, byte for byte the same, is reused.
    pub fn new(tool: &Tool) -> Result<Self, McpError> {
        let schema = tool.input_schema();
        let unsupported = |reason: String| McpError::UnsupportedSchema {
            tool: tool.name.clone(),
            reason,
        };
        let dialect = match schema.get("$schema") {
            None => Dialect::Draft202012,
            Some(Value::String(uri)) => match uri
                .trim_end_matches('#')
                .trim_start_matches("https://")
                .trim_start_matches("http://")
            {
                "json-schema.org/draft/2020-12/schema" => Dialect::Draft202012,
                "json-schema.org/draft-07/schema" => Dialect::Draft07,
                _ => {
                    return Err(unsupported(format!(
                        "`$schema` {uri:?} is not a supported dialect (JSON Schema 2020-12 or draft-07)"
                    )));
                }
            },
            Some(_) => return Err(unsupported("`$schema` is not a string".into())),
        };
        let draft = match dialect {
            Dialect::Draft202012 => jsonschema::Draft::Draft202012,
            Dialect::Draft07 => jsonschema::Draft::Draft7,
        };
        let text = schema.to_string();
        if let Some(validator) = compiled(&text) {
            return Ok(Self { validator, dialect });
        }
        let validator = Arc::new(
            jsonschema::options()
                .with_draft(draft)
                .build(schema)
                .map_err(|e| unsupported(format!("it does not compile: {}", e.masked())))?,
        );
        keep(text, &validator);
        Ok(Self { validator, dialect })
    }

    /// The dialect in use.
    #[must_use]
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Checks `arguments`. On failure, returns up to ten messages of the form
    /// `at <JSON pointer>: <problem>`; argument values are masked, never quoted.
    pub fn check(&self, arguments: &Value) -> Result<(), Vec<String>> {
        let messages: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .take(MAX_MESSAGES)
            .map(|e| {
                let path = e.instance_path().to_string();
                let at = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                format!("at {at}: {}", e.masked())
            })
            .collect();
        if messages.is_empty() {
            Ok(())
        } else {
            Err(messages)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: &Value) -> Tool {
        Tool::from_definition(json!({"name": "t", "inputSchema": schema})).unwrap()
    }

    /// The same schema is compiled once; a schema that differs in one keyword (or only in
    /// its dialect) gets its own validator, which judges by that schema.
    #[test]
    fn a_schema_is_compiled_once_and_a_changed_one_anew() {
        let base =
            json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 7}}});
        let a = ArgumentValidator::new(&tool(&base)).unwrap();
        let b = ArgumentValidator::new(&tool(&base)).unwrap();
        assert!(Arc::ptr_eq(&a.validator, &b.validator), "reused");

        let mut stricter = base.clone();
        stricter["properties"]["n"]["maximum"] = json!(3);
        let c = ArgumentValidator::new(&tool(&stricter)).unwrap();
        assert!(!Arc::ptr_eq(&a.validator, &c.validator));
        assert!(a.check(&json!({"n": 5})).is_ok());
        assert!(
            c.check(&json!({"n": 5})).is_err(),
            "judged by its own schema"
        );

        let mut draft7 = base.clone();
        draft7["$schema"] = json!("http://json-schema.org/draft-07/schema#");
        let d = ArgumentValidator::new(&tool(&draft7)).unwrap();
        assert!(!Arc::ptr_eq(&a.validator, &d.validator));
        assert_eq!(d.dialect(), Dialect::Draft07);
    }
}
