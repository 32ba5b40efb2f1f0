//! The protocol era of each client request. A client of the 2025 era opens with
//! `initialize`; a client of the 2026-07-28 revision has no handshake and puts its version
//! and capabilities in every request's `_meta`, may ask `server/discover` first, and reads
//! `resultType` (and, on lists, `ttlMs` and `cacheScope`) on every result. The gate serves
//! both, request by request, as a dual-era server does (docs/gate.md, "Protocol eras").

use crate::jsonrpc::{ErrorObject, codes};
use serde_json::{Map, Value, json};

/// The revision without a handshake.
pub(crate) const MODERN: &str = "2026-07-28";
/// `_meta` member naming a request's protocol version (2026-07-28).
pub(crate) const VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` member carrying a request's client capabilities (2026-07-28).
pub(crate) const CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` member of a request naming the least severe log level its client wants
/// (2026-07-28; without it a server sends that client no `notifications/message`).
pub(crate) const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";
/// The log levels, least severe first (RFC 5424's, as MCP names them).
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The rank of a log level (0 for `debug`), `None` for a name that is not one.
pub(crate) fn log_rank(level: &str) -> Option<u8> {
    LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .and_then(|i| u8::try_from(i).ok())
}

/// The name of the log level of rank `rank` (`emergency` past the last).
pub(crate) fn log_name(rank: u8) -> &'static str {
    LOG_LEVELS
        .get(usize::from(rank))
        .copied()
        .unwrap_or(LOG_LEVELS[LOG_LEVELS.len() - 1])
}

/// The rank of the most severe level, `emergency`.
pub(crate) const MOST_SEVERE: u8 = 7;

/// `_meta` member of a result naming the server (2026-07-28).
pub(crate) const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";
/// The error for a protocol version the gate does not serve (2026-07-28).
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;
/// How long a 2026-07-28 client may keep a list the gate gave it. The gate lists the
/// server's tools again for every `tools/list`, and checks every call against the tool's
/// pin whatever list the client holds, so a stale list costs a refused call, never a call
/// to a tool other than the one pinned.
pub(crate) const LIST_TTL_MS: u64 = 60_000;

/// Results that carry `ttlMs` and `cacheScope` under 2026-07-28.
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
];

/// The era of one request.
#[derive(Debug, Clone)]
pub(crate) enum Era {
    /// The 2025 era (and earlier): the capabilities are those of `initialize`.
    Legacy,
    /// 2026-07-28: the capabilities this request declared, and the log level it asked for
    /// (a level MCP names; `None` without one).
    Modern {
        capabilities: Value,
        log_level: Option<String>,
    },
}

impl Era {
    /// The era a request's `_meta` names. A version other than [`MODERN`] is refused with
    /// the revision's error, which lists the version the gate serves.
    pub(crate) fn of(params: Option<&Value>) -> Result<Self, ErrorObject> {
        let meta = params.and_then(|p| p.get("_meta"));
        let Some(version) = meta.and_then(|m| m.get(VERSION_META)) else {
            return Ok(Self::Legacy);
        };
        if version.as_str() != Some(MODERN) {
            return Err(ErrorObject {
                code: UNSUPPORTED_VERSION,
                message: format!(
                    "unsupported protocol version {version}: rpr gate serves {MODERN} without a handshake, and 2025-11-25 after `initialize`"
                ),
                data: Some(json!({"supported": [MODERN], "requested": version})),
            });
        }
        let capabilities = meta
            .and_then(|m| m.get(CAPABILITIES_META))
            .filter(|c| c.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        let log_level = meta
            .and_then(|m| m.get(LOG_LEVEL_META))
            .and_then(Value::as_str)
            .filter(|l| log_rank(l).is_some())
            .map(str::to_owned);
        Ok(Self::Modern {
            capabilities,
            log_level,
        })
    }

    /// The log level a 2026-07-28 request asked for.
    pub(crate) fn log_level(&self) -> Option<&str> {
        match self {
            Self::Modern { log_level, .. } => log_level.as_deref(),
            Self::Legacy => None,
        }
    }

    /// What the gate declares to a 2026-07-28 server with a request of this era that it
    /// passes through, in that request's `_meta`: the client's capabilities that concern
    /// what a server may ask of it ([`Era::client_side`]) and its log level. `None` for the
    /// 2025 era.
    pub(crate) fn forwarded_meta(&self) -> Option<Map<String, Value>> {
        let mut meta = Map::new();
        meta.insert(CAPABILITIES_META.to_owned(), self.client_side()?);
        if let Some(level) = self.log_level() {
            meta.insert(LOG_LEVEL_META.to_owned(), json!(level));
        }
        Some(meta)
    }

    pub(crate) fn is_modern(&self) -> bool {
        matches!(self, Self::Modern { .. })
    }

    /// The capabilities a 2026-07-28 request's client declared that concern what a server
    /// may ask of it (`sampling`, `roots`, `elicitation`, as declared): passed to a
    /// 2026-07-28 server with a request the gate passes through and with a governed call, so
    /// that the server may ask that client for input in an `input_required` result. `None`
    /// for the 2025 era.
    pub(crate) fn client_side(&self) -> Option<Value> {
        let Self::Modern { capabilities, .. } = self else {
            return None;
        };
        let declared: Map<String, Value> = super::upstream::CLIENT_SIDE
            .iter()
            .filter_map(|c| {
                let value = capabilities.get(*c).filter(|v| v.is_object())?;
                Some(((*c).to_owned(), value.clone()))
            })
            .collect();
        Some(Value::Object(declared))
    }

    /// Whether this request's client can show a form (2026-07-28: `elicitation` in the
    /// request's capabilities, where an empty object means form mode).
    pub(crate) fn elicits_forms(&self) -> bool {
        match self {
            Self::Legacy => false,
            Self::Modern { capabilities, .. } => capabilities
                .get("elicitation")
                .and_then(Value::as_object)
                .is_some_and(|e| e.is_empty() || e.contains_key("form")),
        }
    }

    /// An answer as this era shapes it. Under 2026-07-28: `resultType` on every result
    /// (`complete` unless the gate or the server said otherwise), `ttlMs` and `cacheScope`
    /// on the cacheable ones when complete (an `input_required` result is not the list or
    /// the resource), the gate's `serverInfo` in `_meta`, and a missing resource as
    /// `-32602` (the 2025 era's `-32002`).
    pub(crate) fn shape(
        &self,
        method: &str,
        answer: Result<Value, ErrorObject>,
        server_info: &Value,
    ) -> Result<Value, ErrorObject> {
        if !self.is_modern() {
            return answer;
        }
        match answer {
            Ok(Value::Object(mut result)) => {
                let complete = result
                    .entry("resultType")
                    .or_insert_with(|| json!("complete"))
                    == "complete";
                if complete && CACHEABLE.contains(&method) {
                    result.entry("ttlMs").or_insert_with(|| json!(0));
                    result
                        .entry("cacheScope")
                        .or_insert_with(|| json!("private"));
                }
                let meta = result
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(SERVER_INFO_META.to_owned(), server_info.clone());
                }
                Ok(Value::Object(result))
            }
            Ok(other) => Ok(other),
            Err(e) if e.code == -32002 => Err(ErrorObject {
                code: codes::INVALID_PARAMS,
                ..e
            }),
            Err(e) => Err(e),
        }
    }
}

/// `params` without the 2026-07-28 members that describe the client to the gate: the
/// server behind the gate is the gate's peer, not the client's, and the gate cannot pass
/// a 2026-07-28 client the server's requests.
pub(crate) fn strip_modern(params: Option<Value>) -> Option<Value> {
    let mut params = params?;
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        if meta.is_empty()
            && let Some(p) = params.as_object_mut()
        {
            p.remove("_meta");
        }
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(version: &str) -> Value {
        json!({"_meta": {VERSION_META: version, CAPABILITIES_META: {"elicitation": {}}}})
    }

    #[test]
    fn a_request_without_the_version_member_is_of_the_2025_era() {
        assert!(!Era::of(None).unwrap().is_modern());
        assert!(
            !Era::of(Some(&json!({"_meta": {"progressToken": 1}})))
                .unwrap()
                .is_modern()
        );
    }

    #[test]
    fn an_unknown_version_is_refused_with_the_supported_one() {
        let e = Era::of(Some(&modern("2099-01-01"))).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_VERSION);
        assert_eq!(e.data.unwrap()["supported"], json!([MODERN]));
    }

    #[test]
    fn an_empty_elicitation_object_means_forms() {
        let era = Era::of(Some(&modern(MODERN))).unwrap();
        assert!(era.elicits_forms());
        let url_only = json!({"_meta": {VERSION_META: MODERN, CAPABILITIES_META: {"elicitation": {"url": {}}}}});
        assert!(!Era::of(Some(&url_only)).unwrap().elicits_forms());
    }

    #[test]
    fn modern_results_are_shaped_and_legacy_ones_untouched() {
        let info = json!({"name": "rpr-gate"});
        let era = Era::of(Some(&modern(MODERN))).unwrap();
        let list = era
            .shape("tools/list", Ok(json!({"tools": []})), &info)
            .unwrap();
        assert_eq!(list["resultType"], "complete");
        assert_eq!(list["ttlMs"], 0);
        assert_eq!(list["cacheScope"], "private");
        assert_eq!(list["_meta"][SERVER_INFO_META], info);
        let call = era
            .shape(
                "tools/call",
                Ok(json!({"resultType": "input_required"})),
                &info,
            )
            .unwrap();
        assert_eq!(call["resultType"], "input_required");
        assert!(call.get("ttlMs").is_none());
        let asked = era
            .shape(
                "resources/read",
                Ok(json!({"resultType": "input_required", "requestState": "s"})),
                &info,
            )
            .unwrap();
        assert!(asked.get("ttlMs").is_none() && asked.get("cacheScope").is_none());
        let missing = era.shape("resources/read", Err(ErrorObject::new(-32002, "no")), &info);
        assert_eq!(missing.unwrap_err().code, codes::INVALID_PARAMS);
        let legacy = Era::Legacy
            .shape("tools/list", Ok(json!({"tools": []})), &info)
            .unwrap();
        assert_eq!(legacy, json!({"tools": []}));
    }

    #[test]
    fn a_modern_requests_client_side_capabilities_are_those_it_declared() {
        let era = Era::of(Some(
            &json!({"_meta": {VERSION_META: MODERN, CAPABILITIES_META: {
                "elicitation": {"form": {}}, "roots": {}, "extensions": {"x": {}}, "sampling": true}}}),
        ))
        .unwrap();
        assert_eq!(
            era.client_side(),
            Some(json!({"elicitation": {"form": {}}, "roots": {}}))
        );
        assert_eq!(Era::Legacy.client_side(), None);
        assert_eq!(era.log_level(), None);
        let logged = Era::of(Some(
            &json!({"_meta": {VERSION_META: MODERN, LOG_LEVEL_META: "warning"}}),
        ))
        .unwrap();
        assert_eq!(logged.log_level(), Some("warning"));
        let meta = logged.forwarded_meta().unwrap();
        assert_eq!(meta[LOG_LEVEL_META], "warning");
        assert_eq!(meta[CAPABILITIES_META], json!({}));
        let unknown = Era::of(Some(
            &json!({"_meta": {VERSION_META: MODERN, LOG_LEVEL_META: "loud"}}),
        ))
        .unwrap();
        assert_eq!(unknown.log_level(), None, "not a level MCP names");
        assert_eq!(Era::Legacy.forwarded_meta(), None);
    }

    #[test]
    fn the_clients_modern_meta_is_not_passed_to_the_server() {
        let p = strip_modern(Some(
            json!({"uri": "x", "_meta": {VERSION_META: MODERN, "progressToken": 3}}),
        ));
        assert_eq!(p, Some(json!({"uri": "x", "_meta": {"progressToken": 3}})));
        let p = strip_modern(Some(json!({"uri": "x", "_meta": {VERSION_META: MODERN}})));
        assert_eq!(p, Some(json!({"uri": "x"})));
    }
}
