//! The MCP methods of `rpr-mcp` (`initialize`, `ping`, `tools/list`, `tools/call`) and its
//! five read-only tools over [`rpr::inspect`]: their arguments and results.

use rpr::State;
use rpr::inspect::{self, InspectError};
use rpr::jsonrpc::server::Handler;
use rpr::jsonrpc::{ErrorObject, JsonRpcError, Request, codes};
use rpr::store::{ReadStore, StoreError};
use serde_json::{Map, Value, json};

use crate::tools::tools;

/// The only protocol revision spoken.
const PROTOCOL_VERSION: &str = "2025-11-25";

const INSTRUCTIONS: &str = "Read-only inspection of one rpr (Responsibility Pathway Runtime) database: \
status, pathways, who must act next, and hash-chained evidence. No tool can change anything. \
Read-only is not non-sensitive: results include definitions (redacted by key name only), actor \
names and evidence, so only a trusted client should be connected.";

fn invalid_params(message: &str) -> ErrorObject {
    ErrorObject::new(codes::INVALID_PARAMS, format!("Invalid params: {message}"))
}

pub(crate) struct Inspector {
    store: ReadStore,
    initialized: bool,
}

impl Inspector {
    /// An inspector of `store`, before `initialize`.
    pub(crate) fn new(store: ReadStore) -> Self {
        Self {
            store,
            initialized: false,
        }
    }
}

impl Handler for Inspector {
    fn request(&mut self, request: Request) -> Result<Value, ErrorObject> {
        let params = match request.params {
            None => Map::new(),
            Some(Value::Object(params)) => params,
            // Other params never reach here: the loop answers them as invalid requests.
            Some(_) => return Err(invalid_params("params must be an object")),
        };
        self.method(&request.method, &params)
    }

    /// An over-long line is answered with id `null` (docs/inspection.md): its id was not
    /// parsed, only guessed from its first or last bytes.
    fn invalid(&mut self, error: &JsonRpcError, reply: Option<Value>) -> Option<Value> {
        let mut reply = reply?;
        if matches!(error, JsonRpcError::LineTooLong { .. }) {
            reply["id"] = Value::Null;
        }
        Some(reply)
    }
}

impl Inspector {
    fn method(&mut self, method: &str, params: &Map<String, Value>) -> Result<Value, ErrorObject> {
        match method {
            "initialize" => {
                if !params.get("protocolVersion").is_some_and(Value::is_string) {
                    return Err(invalid_params("initialize needs a string protocolVersion"));
                }
                self.initialized = true;
                Ok(json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {
                        "name": "rpr-mcp",
                        "title": "rpr read-only inspection",
                        "version": env!("CARGO_PKG_VERSION"),
                    },
                    "instructions": INSTRUCTIONS,
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" | "tools/call" if !self.initialized => Err(ErrorObject::new(
                codes::INVALID_REQUEST,
                "Invalid Request: server not initialized; send initialize first",
            )),
            "tools/list" => {
                if params.contains_key("cursor") {
                    return Err(invalid_params(
                        "invalid cursor (the tool list has one page)",
                    ));
                }
                Ok(json!({"tools": tools().clone()}))
            }
            "tools/call" => {
                let Some(Value::String(name)) = params.get("name") else {
                    return Err(invalid_params("tools/call needs a string name"));
                };
                let empty = Map::new();
                let args = match params.get("arguments") {
                    None => &empty,
                    Some(Value::Object(a)) => a,
                    Some(_) => return Err(invalid_params("arguments must be an object")),
                };
                let outcome = match name.as_str() {
                    "rpr.get_status" => self.get_status(args),
                    "rpr.list_pathways" => self.list_pathways(args),
                    "rpr.get_pathway" => self.get_pathway(args),
                    "rpr.get_evidence" => self.get_evidence(args),
                    "rpr.list_unresolved" => self.list_unresolved(args),
                    _ => {
                        return Err(ErrorObject::new(
                            codes::INVALID_PARAMS,
                            format!("Unknown tool: {name}"),
                        ));
                    }
                };
                Ok(tool_result(outcome))
            }
            _ => Err(ErrorObject::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        }
    }

    fn get_status(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &[])?;
        to_value(&inspect::status(&self.store)?)
    }

    fn list_pathways(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["limit", "cursor", "state"])?;
        let state = match args.get("state") {
            None => None,
            Some(Value::String(s)) => Some(
                s.parse::<State>()
                    .map_err(|e| InspectError::InvalidArgument(format!("state: {e}")))?,
            ),
            Some(_) => {
                return Err(InspectError::InvalidArgument(
                    "state must be a string".into(),
                ));
            }
        };
        to_value(&inspect::list_pathways(
            &self.store,
            state,
            limit(args)?,
            cursor(args)?,
        )?)
    }

    fn get_pathway(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["pathway_id"])?;
        to_value(&inspect::pathway(&self.store, pathway_id(args)?)?)
    }

    fn get_evidence(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["pathway_id", "limit", "cursor"])?;
        to_value(&inspect::evidence(
            &self.store,
            pathway_id(args)?,
            limit(args)?,
            cursor(args)?,
        )?)
    }

    fn list_unresolved(&self, args: &Map<String, Value>) -> Result<Value, InspectError> {
        only(args, &["limit", "cursor"])?;
        to_value(&inspect::list_unresolved(
            &self.store,
            limit(args)?,
            cursor(args)?,
        )?)
    }
}

// ---------------------------------------------------------------------------
// Tool arguments and results
// ---------------------------------------------------------------------------

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, InspectError> {
    serde_json::to_value(v).map_err(|e| InspectError::Store(StoreError::Corrupt(e.to_string())))
}

fn only(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), InspectError> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(InspectError::InvalidArgument(format!(
            "unexpected argument {k:?}; this tool takes {}",
            if allowed.is_empty() {
                "no arguments".to_owned()
            } else {
                allowed.join(", ")
            }
        ))),
        None => Ok(()),
    }
}

fn limit(args: &Map<String, Value>) -> Result<usize, InspectError> {
    let bad = || {
        InspectError::InvalidArgument(format!(
            "limit must be an integer from 1 to {}",
            inspect::MAX_LIMIT
        ))
    };
    match args.get("limit") {
        None => Ok(inspect::DEFAULT_LIMIT),
        Some(Value::Number(n)) => {
            let n = n.as_u64().ok_or_else(bad)?;
            usize::try_from(n)
                .ok()
                .filter(|n| (1..=inspect::MAX_LIMIT).contains(n))
                .ok_or_else(bad)
        }
        Some(_) => Err(bad()),
    }
}

fn cursor(args: &Map<String, Value>) -> Result<Option<&str>, InspectError> {
    match args.get("cursor") {
        None => Ok(None),
        Some(Value::String(c)) => Ok(Some(c)),
        Some(_) => Err(InspectError::InvalidArgument(
            "cursor must be a string".into(),
        )),
    }
}

fn pathway_id(args: &Map<String, Value>) -> Result<&str, InspectError> {
    match args.get("pathway_id") {
        Some(Value::String(id)) => Ok(id),
        Some(_) => Err(InspectError::InvalidArgument(
            "pathway_id must be a string".into(),
        )),
        None => Err(InspectError::InvalidArgument(
            "pathway_id is required".into(),
        )),
    }
}

/// A `CallToolResult`: `structuredContent` plus its serialized copy in a text block.
fn tool_result(outcome: Result<Value, InspectError>) -> Value {
    let (structured, is_error) = match outcome {
        Ok(v) => (v, false),
        Err(e) => (
            json!({"error": {"code": e.code(), "message": e.to_string()}}),
            true,
        ),
    };
    let text = serde_json::to_string(&structured).unwrap_or_default();
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": is_error,
    })
}
