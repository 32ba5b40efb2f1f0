//! Validation of tool arguments against the tool's `inputSchema`.

use serde_json::Value;

use super::McpError;
use super::client::Tool;

/// Most validation messages kept in one refusal.
const MAX_MESSAGES: usize = 10;

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
pub struct ArgumentValidator {
    validator: jsonschema::Validator,
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
    /// any other declared dialect is refused with [`McpError::UnsupportedSchema`].
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
        let validator = jsonschema::options()
            .with_draft(draft)
            .build(schema)
            .map_err(|e| unsupported(format!("it does not compile: {}", e.masked())))?;
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
