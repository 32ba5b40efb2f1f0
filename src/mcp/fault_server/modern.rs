//! The fault server's eras: `server/discover`, the 2026-07-28 `_meta` envelope each
//! request must carry, the shape of modern results, `input_required` rounds on `put`, and
//! the request log.

use serde_json::{Value, json};

use super::options::{Fault, ServerEra};
use super::{Connection, Exit, Server, append_line, log};
use crate::jsonrpc::{Id, codes};
use crate::mcp::{
    META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, META_SERVER_INFO, UNSUPPORTED_PROTOCOL_VERSION,
};

/// An error reply: code, message, data.
type Refusal = (i64, String, Option<Value>);

/// What a `put` under 2026-07-28 with `--input-required` does in this round.
pub(super) enum Round {
    /// Ask (again): the `input_required` result.
    Ask(Value),
    /// Every round was answered with `accept`: store.
    Store,
    /// The person declined or cancelled: store nothing.
    Declined(String),
    /// The retry is wrong (altered state, reused id, missing answer).
    Refused(Refusal),
}

impl Server {
    /// Whether the request with `params` is served under 2026-07-28.
    pub(super) fn serves_modern(&self, params: &Value) -> bool {
        match (self.opts.era, self.settled) {
            (ServerEra::Legacy, _) | (ServerEra::Dual, Some(ServerEra::Legacy)) => false,
            (ServerEra::Modern, _) | (ServerEra::Dual, Some(_)) => true,
            (ServerEra::Dual, None) => params
                .get("_meta")
                .and_then(|m| m.get(META_PROTOCOL_VERSION))
                .is_some(),
        }
    }

    /// Checks the envelope every 2026-07-28 request carries.
    pub(super) fn check_envelope(&self, params: &Value) -> Result<(), Refusal> {
        let meta = params.get("_meta");
        let version = meta
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        let capabilities = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES));
        let (Some(version), Some(Value::Object(_))) = (version, capabilities) else {
            return Err((
                codes::INVALID_PARAMS,
                format!(
                    "params._meta must carry {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES}"
                ),
                None,
            ));
        };
        if version != self.opts.modern_version {
            return Err((
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version".into(),
                Some(json!({"supported": [self.opts.modern_version], "requested": version})),
            ));
        }
        Ok(())
    }

    /// `server/discover`: unknown to a legacy server (or the fault it has with it), else
    /// the `DiscoverResult`.
    pub(super) fn discover(
        &mut self,
        conn: &mut Connection,
        id: Id,
        params: &Value,
    ) -> Result<(), Exit> {
        let legacy = self.opts.era == ServerEra::Legacy || self.settled == Some(ServerEra::Legacy);
        if legacy {
            return match self.opts.fault {
                Fault::IgnoreDiscover => {
                    log("ignore-discover: not answering server/discover");
                    Ok(())
                }
                Fault::ExitOnDiscover => {
                    log("exit-on-discover: exiting before initialize");
                    Err(Exit(3))
                }
                _ => Self::error(
                    conn,
                    id,
                    codes::METHOD_NOT_FOUND,
                    "Method not found: server/discover",
                ),
            };
        }
        self.modern = true;
        if self.opts.fault == Fault::SlowDiscover && self.settled.is_none() {
            log("slow-discover: sleeping before the answer");
            std::thread::sleep(std::time::Duration::from_millis(self.opts.sleep_ms));
        }
        if let Err((code, message, data)) = self.check_envelope(params) {
            return Self::error_with(conn, id, code, &message, data);
        }
        self.settled = Some(ServerEra::Modern);
        let mut result = json!({
            "supportedVersions": [self.opts.modern_version],
            "capabilities": self.capabilities(),
            "ttlMs": 0,
            "cacheScope": "private",
        });
        if let Some(text) = &self.opts.instructions {
            result["instructions"] = json!(text);
        }
        self.result(conn, id, result)
    }

    /// The capabilities the server declares: `tools` (`listChanged` with
    /// `change-read-notify`), `prompts` with `--input-required`, and (2025 era) `logging`
    /// with `--logging`.
    pub(super) fn capabilities(&self) -> Value {
        let mut capabilities =
            json!({"tools": {"listChanged": self.opts.fault == Fault::ChangeReadNotify}});
        if self.opts.input_required > 0 {
            capabilities["prompts"] = json!({});
        }
        if self.opts.logging && !self.modern {
            capabilities["logging"] = json!({});
        }
        capabilities
    }

    /// `prompts/get` of the prompt `confirm` (argument `key`): with `--input-required N`
    /// under 2026-07-28, N rounds of `input_required` (as `put`'s) before the prompt, asked
    /// only of a request whose client declared elicitation; otherwise the prompt at once.
    pub(super) fn prompt(
        &mut self,
        conn: &mut Connection,
        id: Id,
        params: &Value,
    ) -> Result<(), Exit> {
        if params.get("name").and_then(Value::as_str) != Some("confirm") {
            return Self::error(conn, id, codes::INVALID_PARAMS, "Unknown prompt");
        }
        let key = params
            .get("arguments")
            .and_then(|a| a.get("key"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut text = format!("confirmed {key}");
        if self.modern && self.opts.input_required > 0 {
            let declared = params
                .get("_meta")
                .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
                .and_then(|c| c.get("elicitation"))
                .is_some_and(Value::is_object);
            if !declared {
                return Self::error(
                    conn,
                    id,
                    codes::INVALID_PARAMS,
                    "this request's client did not declare elicitation, and this prompt needs it",
                );
            }
            match self.input_round(&id, params) {
                Round::Ask(result) => return self.result(conn, id, result),
                Round::Store => {}
                Round::Declined(action) => text = format!("the person answered {action}"),
                Round::Refused((code, message, data)) => {
                    return Self::error_with(conn, id, code, &message, data);
                }
            }
        }
        self.result(
            conn,
            id,
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}),
        )
    }

    /// A 2026-07-28 result: `resultType` and the server's name in `_meta`.
    pub(super) fn decorate(&self, result: &mut Value) {
        let Some(object) = result.as_object_mut() else {
            return;
        };
        object
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                META_SERVER_INFO.into(),
                json!({"name": self.opts.server_name, "version": self.version}),
            );
        }
    }

    /// Appends `{id, method, meta}` to the request log (with `level` for
    /// `logging/setLevel`).
    pub(super) fn log_request(&self, id: &Value, method: &str, params: Option<&Value>) {
        let Some(path) = &self.opts.request_log else {
            return;
        };
        let meta = params.and_then(|p| p.get("_meta")).cloned();
        let mut line = json!({"id": id, "method": method, "meta": meta});
        if method == "logging/setLevel" {
            line["level"] = params
                .and_then(|p| p.get("level"))
                .cloned()
                .unwrap_or(Value::Null);
        }
        append_line(path, &line, "request log");
    }

    /// The `requestState` of round `round` for `arguments`: it names the round and the
    /// arguments, and carries characters a client could alter in transit (non-ASCII, a
    /// quote, a backslash), so only a byte-exact copy matches.
    fn request_state(round: usize, arguments: &Value) -> String {
        let digest = crate::canonical::sha256_hex(arguments).unwrap_or_default();
        format!("fault-server:round={round}:args={digest}:é \"✓\" \\")
    }

    /// The round a `put` under 2026-07-28 with `--input-required N` is in.
    pub(super) fn input_round(&mut self, id: &Id, params: &Value) -> Round {
        let fresh = self.call_ids.insert(id.to_value().to_string());
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        let asked = self.opts.input_required;
        let round = match params.get("requestState") {
            None => 0,
            Some(state) => {
                if !fresh {
                    return Round::Refused((
                        codes::INVALID_REQUEST,
                        format!("request id {id} was used before: a retry needs a new id"),
                        None,
                    ));
                }
                let Some(round) = (1..=asked)
                    .find(|n| state.as_str() == Some(&Self::request_state(*n, &arguments)))
                else {
                    return Round::Refused((
                        codes::INVALID_PARAMS,
                        "requestState was altered, or is for other arguments".into(),
                        None,
                    ));
                };
                let action = params
                    .get("inputResponses")
                    .and_then(|r| r.get("confirm"))
                    .and_then(|c| c.get("action"))
                    .and_then(Value::as_str);
                match action {
                    Some("accept") => round,
                    Some(other) => return Round::Declined(other.to_owned()),
                    None => {
                        return Round::Refused((
                            codes::INVALID_PARAMS,
                            "inputResponses.confirm.action is missing".into(),
                            None,
                        ));
                    }
                }
            }
        };
        if round >= asked {
            return Round::Store;
        }
        let key = arguments.get("key").and_then(Value::as_str).unwrap_or("");
        Round::Ask(json!({
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
                "mode": "form",
                "message": format!("Store a value under {key:?}? (round {} of {asked})", round + 1),
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                    "required": ["ok"]},
            }}},
            "requestState": Self::request_state(round + 1, &arguments),
        }))
    }
}
