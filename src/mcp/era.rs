//! The two eras of MCP: the `initialize` handshake (2024-11-05 … 2025-11-25) and the
//! stateless revision 2026-07-28 (`server/discover`, a `_meta` envelope on every request,
//! `resultType` on every result).

use serde_json::{Map, Value, json};

/// The protocol versions reached through the `initialize` handshake, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The protocol versions of the stateless era, newest first.
pub const MODERN_VERSIONS: [&str; 1] = [MODERN_PROTOCOL_VERSION];

/// The stateless MCP revision this client speaks: `2026-07-28`.
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";

/// `_meta` key of the protocol version every 2026-07-28 request carries.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client capabilities every 2026-07-28 request carries.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's name and version (a SHOULD on every 2026-07-28 request).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of a 2026-07-28 result's self-reported server name and version.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The JSON-RPC error code of 2026-07-28 for an unsupported protocol version, with
/// `data.supported` (the server's versions) and `data.requested`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The era a server was reached in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// `initialize` and `notifications/initialized`, then requests in a session
    /// (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25).
    Legacy,
    /// 2026-07-28: no handshake; `server/discover` told the server's versions and
    /// capabilities, and every request carries the `_meta` envelope.
    Modern,
}

impl Era {
    /// The era of a protocol version: [`Era::Modern`] for [`MODERN_VERSIONS`],
    /// [`Era::Legacy`] for every other. A version names its era, so binding the version
    /// binds the era too.
    #[must_use]
    pub fn of_version(version: &str) -> Self {
        if MODERN_VERSIONS.contains(&version) {
            Self::Modern
        } else {
            Self::Legacy
        }
    }

    /// `legacy` or `modern`, for people and logs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Modern => "modern",
        }
    }
}

/// Whether `version` has elicitation (`elicitation/create`): 2025-06-18 and later.
pub(crate) fn has_elicitation(version: &str) -> bool {
    !matches!(version, "2025-03-26" | "2024-11-05")
}

/// The `_meta` envelope of every 2026-07-28 request: the version, the client's
/// capabilities and its name and version.
pub(crate) fn envelope(version: &str, capabilities: &Value) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.into(), json!(version));
    meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities.clone());
    meta.insert(
        META_CLIENT_INFO.into(),
        json!({"name": "rpr", "version": env!("CARGO_PKG_VERSION")}),
    );
    meta
}

/// `params` with `envelope` merged into its `_meta` (the envelope's keys win; every other
/// key the caller put there, such as a `progressToken`, stays). The one exception: client
/// capabilities the caller declared for this request (a proxy passing its own client's
/// per-request capabilities on) are kept instead of the session's.
pub(crate) fn with_envelope(params: Option<Value>, envelope: &Map<String, Value>) -> Value {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        // Positional params have no place for `_meta`; MCP requests never use them.
        Some(other) => return other,
        None => Map::new(),
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        for (key, value) in envelope {
            if key == META_CLIENT_CAPABILITIES && meta.get(key).is_some_and(Value::is_object) {
                continue;
            }
            meta.insert(key.clone(), value.clone());
        }
    }
    Value::Object(params)
}

/// How a result says what it is (2026-07-28): `resultType`, missing meaning complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResultType {
    Complete,
    InputRequired,
    Other(String),
}

pub(crate) fn result_type(result: &Value) -> ResultType {
    match result.get("resultType") {
        None | Some(Value::Null) => ResultType::Complete,
        Some(Value::String(s)) if s == "complete" => ResultType::Complete,
        Some(Value::String(s)) if s == "input_required" => ResultType::InputRequired,
        Some(other) => ResultType::Other(match other {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_is_merged_into_meta_and_keeps_other_keys() {
        let env = envelope("2026-07-28", &json!({"elicitation": {}}));
        let merged = with_envelope(
            Some(json!({"name": "put", "_meta": {"progressToken": 7,
                META_PROTOCOL_VERSION: "1999-01-01"}})),
            &env,
        );
        assert_eq!(merged["_meta"]["progressToken"], 7);
        assert_eq!(merged["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(
            merged["_meta"][META_CLIENT_CAPABILITIES],
            json!({"elicitation": {}})
        );
        assert_eq!(merged["name"], "put");
        let bare = with_envelope(None, &env);
        assert_eq!(bare["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
    }

    #[test]
    fn a_missing_result_type_is_complete() {
        assert_eq!(result_type(&json!({})), ResultType::Complete);
        assert_eq!(
            result_type(&json!({"resultType": "input_required"})),
            ResultType::InputRequired
        );
        assert_eq!(
            result_type(&json!({"resultType": "task"})),
            ResultType::Other("task".into())
        );
    }

    #[test]
    fn a_version_names_its_era() {
        assert_eq!(Era::of_version("2026-07-28"), Era::Modern);
        for v in LEGACY_VERSIONS {
            assert_eq!(Era::of_version(v), Era::Legacy);
        }
    }
}
