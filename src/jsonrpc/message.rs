//! JSON-RPC 2.0 message types and their conversion from and to JSON values.

use std::fmt;

use serde_json::{Map, Value};

use super::JsonRpcError;

/// A request id: an integer or a string, never `null`.
///
/// The JSON type is part of the id: `Id::Number(1)` and `Id::String("1")` are
/// different ids, and a response only matches a request with the same JSON type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    /// An integer id (`0` is a valid id).
    Number(i64),
    /// A string id.
    String(String),
}

impl Id {
    /// Reads an id from JSON: an integer in `i64` range or a string; anything else is `None`.
    #[must_use]
    pub fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Number(n) => n.as_i64().map(Self::Number),
            Value::String(s) => Some(Self::String(s.clone())),
            _ => None,
        }
    }

    /// The id as JSON, with its original type.
    #[must_use]
    pub fn to_value(&self) -> Value {
        match self {
            Self::Number(n) => Value::from(*n),
            Self::String(s) => Value::from(s.as_str()),
        }
    }
}

impl fmt::Display for Id {
    /// Writes the id in JSON form, so `1` and `"1"` stay distinguishable in messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{}", Value::from(s.as_str())),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for Id {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorObject {
    /// The error code (see [`super::codes`]).
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional additional data, as sent.
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error object without data.
    #[must_use]
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The error object as JSON (`{"code", "message", "data"?}`).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("code".into(), Value::from(self.code));
        map.insert("message".into(), Value::from(self.message.as_str()));
        if let Some(data) = &self.data {
            map.insert("data".into(), data.clone());
        }
        Value::Object(map)
    }

    fn from_value(value: &Value) -> Result<Self, String> {
        let obj = value.as_object().ok_or("`error` is not an object")?;
        let code = obj
            .get("code")
            .and_then(Value::as_i64)
            .ok_or("`error.code` is missing or not an integer")?;
        let message = obj
            .get("message")
            .and_then(Value::as_str)
            .ok_or("`error.message` is missing or not a string")?;
        Ok(Self {
            code,
            message: message.to_owned(),
            data: obj.get("data").cloned(),
        })
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

/// A request: a method call that expects a response with the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request id.
    pub id: Id,
    /// The method name.
    pub method: String,
    /// The parameters (an object or an array), if any.
    pub params: Option<Value>,
}

/// A notification: a method call without an id, never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The parameters (an object or an array), if any.
    pub params: Option<Value>,
}

/// A response to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered; `None` when the peer could not read it
    /// (`"id": null` or no id, allowed for error responses only).
    pub id: Option<Id>,
    /// `Ok(result)` or `Err(error)`.
    pub outcome: Result<Value, ErrorObject>,
}

/// One JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

impl Message {
    /// Interprets a JSON value as one message.
    ///
    /// Fails with [`JsonRpcError::Batch`] for an array and with
    /// [`JsonRpcError::InvalidMessage`] (carrying the id when it was readable) for
    /// anything else that is not a valid JSON-RPC 2.0 message.
    pub fn from_value(value: Value) -> Result<Self, JsonRpcError> {
        let mut obj = match value {
            Value::Object(obj) => obj,
            Value::Array(items) => return Err(JsonRpcError::Batch { len: items.len() }),
            _ => return Err(invalid(None, "the message is not a JSON object")),
        };
        let id_value = obj.remove("id");
        let id = id_value.as_ref().and_then(Id::from_value);
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid(id, "`jsonrpc` must be \"2.0\""));
        }
        if let Some(method) = obj.remove("method") {
            let Value::String(method) = method else {
                return Err(invalid(id, "`method` is not a string"));
            };
            let params = obj.remove("params");
            if params
                .as_ref()
                .is_some_and(|p| !p.is_object() && !p.is_array())
            {
                return Err(invalid(id, "`params` is neither an object nor an array"));
            }
            return match (id_value, id) {
                (None, _) => Ok(Self::Notification(Notification { method, params })),
                (Some(_), Some(id)) => Ok(Self::Request(Request { id, method, params })),
                (Some(_), None) => Err(invalid(
                    None,
                    "a request `id` must be an integer or a string",
                )),
            };
        }
        if id_value.as_ref().is_some_and(|v| !v.is_null()) && id.is_none() {
            return Err(invalid(
                None,
                "a response `id` must be an integer, a string or null",
            ));
        }
        let outcome = match (obj.remove("result"), obj.remove("error")) {
            (Some(result), None) => {
                if id.is_none() {
                    return Err(invalid(None, "a success response has no id"));
                }
                Ok(result)
            }
            (None, Some(error)) => {
                Err(ErrorObject::from_value(&error).map_err(|r| invalid(id.clone(), r))?)
            }
            (Some(_), Some(_)) => {
                return Err(invalid(id, "a response has both `result` and `error`"));
            }
            (None, None) => {
                return Err(invalid(
                    id,
                    "neither `method`, `result` nor `error` is present",
                ));
            }
        };
        Ok(Self::Response(Response { id, outcome }))
    }

    /// The message as a JSON value (`"jsonrpc": "2.0"` included).
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Self::Request(r) => {
                map.insert("id".into(), r.id.to_value());
                map.insert("method".into(), Value::from(r.method.as_str()));
                if let Some(p) = &r.params {
                    map.insert("params".into(), p.clone());
                }
            }
            Self::Notification(n) => {
                map.insert("method".into(), Value::from(n.method.as_str()));
                if let Some(p) = &n.params {
                    map.insert("params".into(), p.clone());
                }
            }
            Self::Response(r) => {
                map.insert("id".into(), r.id.as_ref().map_or(Value::Null, Id::to_value));
                match &r.outcome {
                    Ok(result) => map.insert("result".into(), result.clone()),
                    Err(error) => map.insert("error".into(), error.to_value()),
                };
            }
        }
        Value::Object(map)
    }
}

fn invalid(id: Option<Id>, reason: impl Into<String>) -> JsonRpcError {
    JsonRpcError::InvalidMessage {
        id,
        reason: reason.into(),
    }
}
