//! The tool definitions `rpr-mcp` lists: names, descriptions, and input and output schemas.

use std::sync::OnceLock;

use rpr::inspect;
use rpr::{Role, State};
use serde_json::{Value, json};

pub(crate) fn tools() -> &'static Value {
    static TOOLS: OnceLock<Value> = OnceLock::new();
    TOOLS.get_or_init(build_tools)
}

fn str_enum(values: impl IntoIterator<Item = &'static str>) -> Value {
    json!({"type": "string", "enum": values.into_iter().collect::<Vec<_>>()})
}

fn state_schema() -> Value {
    str_enum(State::ALL.iter().map(|s| s.as_str()))
}

fn role_schema() -> Value {
    str_enum(Role::ALL.map(Role::as_str))
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn next_schema() -> Value {
    let roles = json!({"type": "array", "items": role_schema()});
    let actors = json!({"type": "array", "items": {"type": "string"}});
    object(
        json!({
            "action": {"type": "string", "description": "admit, approve_or_deny, dispatch, wait, confirm_by_readback, reconcile, repair, resume, require_repair, release_or_escalate, or none"},
            "roles": roles,
            "actors": actors,
            "detail": {"type": "string"},
            "alternatives": {"type": "array", "items": object(
                json!({"action": {"type": "string"}, "roles": roles, "actors": actors}),
                &["action", "roles", "actors"],
            )},
        }),
        &["action", "roles", "actors", "detail", "alternatives"],
    )
}

fn summary_schema() -> Value {
    object(
        json!({
            "pathway_id": {"type": "string"},
            "state": state_schema(),
            "action": {"type": ["string", "null"]},
            "class": {"type": ["string", "null"]},
            "proposer": {"type": "string"},
            "version": {"type": "integer"},
            "created_at": {"type": "integer"},
            "updated_at": {"type": "integer"},
            "next": next_schema(),
            "clipped": {"type": "boolean"},
        }),
        &[
            "pathway_id",
            "state",
            "action",
            "class",
            "proposer",
            "version",
            "created_at",
            "updated_at",
            "next",
            "clipped",
        ],
    )
}

/// An output schema: the success shape, or `{error: {code, message}}` (an `isError` result).
fn output(properties: Value, required: &[&str]) -> Value {
    let mut properties = properties;
    properties["error"] = object(
        json!({
            "code": str_enum(["pathway_not_found", "invalid_argument", "invalid_cursor", "store_error"]),
            "message": {"type": "string"},
        }),
        &["code", "message"],
    );
    json!({
        "type": "object",
        "properties": properties,
        "anyOf": [{"required": required}, {"required": ["error"]}],
    })
}

fn page_output() -> Value {
    output(
        json!({
            "pathways": {"type": "array", "items": summary_schema()},
            "next_cursor": {"type": "string", "description": "opaque; pass it back unchanged for the next page; absent on the last page"},
        }),
        &["pathways"],
    )
}

fn limit_schema() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": inspect::MAX_LIMIT, "default": inspect::DEFAULT_LIMIT, "description": "page size"})
}

fn cursor_schema() -> Value {
    json!({"type": "string", "description": "the next_cursor of the previous page, unchanged"})
}

fn id_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": inspect::MAX_ID_BYTES, "description": "a pathway id, e.g. from rpr.list_pathways"})
}

fn input(properties: Value, required: &[&str]) -> Value {
    let mut schema =
        json!({"type": "object", "properties": properties, "additionalProperties": false});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

fn tool(
    name: &str,
    title: &str,
    description: &str,
    input_schema: Value,
    output_schema: Value,
) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input_schema,
        "outputSchema": output_schema,
        "annotations": {
            "title": title,
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        },
    })
}

fn build_tools() -> Value {
    let attempt = object(
        json!({
            "attempt_id": {"type": "string"},
            "seq": {"type": "integer"},
            "previous_attempt": {"type": ["string", "null"]},
            "status": {"type": "string"},
            "request": {},
            "request_digest": {"type": "string"},
            "binding": {},
            "binding_digest": {"type": "string"},
            "owner": {"type": ["string", "null"]},
            "lease_until": {"type": ["integer", "null"]},
            "outcome": {},
            "created_at": {"type": "integer"},
            "updated_at": {"type": "integer"},
        }),
        &[
            "attempt_id",
            "seq",
            "status",
            "request_digest",
            "binding",
            "binding_digest",
            "created_at",
            "updated_at",
        ],
    );
    let event = object(
        json!({
            "seq": {"type": "integer"},
            "hash": {"type": "string"},
            "prev_hash": {"type": "string"},
            "event": {},
            "verified": {"type": "boolean"},
        }),
        &["seq", "hash", "prev_hash", "event", "verified"],
    );
    json!([
        tool(
            "rpr.get_status",
            "Database status",
            "Schema version, number of pathways in each state, unresolved count, and the ledger head (hash and length). Never a filesystem path.",
            input(json!({}), &[]),
            output(
                json!({
                    "mode": {"const": "read_only"},
                    "schema_version": {"type": "integer"},
                    "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "unresolved_count": {"type": "integer"},
                    "ledger_length": {"type": "integer"},
                    "ledger_head": {"type": ["string", "null"]},
                }),
                &[
                    "mode",
                    "schema_version",
                    "counts",
                    "unresolved_count",
                    "ledger_length",
                    "ledger_head"
                ],
            ),
        ),
        tool(
            "rpr.list_pathways",
            "List pathways",
            "A page of pathways ordered by id (optionally only one state), each with its state and who must act next. Follow next_cursor for more.",
            input(
                json!({"limit": limit_schema(), "cursor": cursor_schema(), "state": state_schema()}),
                &[]
            ),
            page_output(),
        ),
        tool(
            "rpr.get_pathway",
            "Get a pathway",
            "One pathway: its (redacted) definition, state, attempts with their bindings, and who must act next (action, roles, actors).",
            input(json!({"pathway_id": id_schema()}), &["pathway_id"]),
            output(
                json!({
                    "pathway_id": {"type": "string"},
                    "idempotency_key": {"type": "string"},
                    "state": state_schema(),
                    "version": {"type": "integer"},
                    "proposer": {"type": "string"},
                    "created_at": {"type": "integer"},
                    "updated_at": {"type": "integer"},
                    "request_digest": {"type": "string"},
                    "definition": {"type": "object"},
                    "attempts": {"type": "array", "items": attempt},
                    "next": next_schema(),
                    "truncated": {"type": "boolean"},
                    "omitted_attempts": {"type": "integer", "minimum": 0},
                }),
                &[
                    "pathway_id",
                    "idempotency_key",
                    "state",
                    "version",
                    "proposer",
                    "created_at",
                    "updated_at",
                    "request_digest",
                    "definition",
                    "attempts",
                    "next",
                    "truncated",
                    "omitted_attempts",
                ],
            ),
        ),
        tool(
            "rpr.get_evidence",
            "Get evidence",
            "A page of one pathway's hash-chained ledger events, oldest first. Each event on the page is checked: its hash against its text and prev_hash, and its link to the previous event of the global chain; chain_verified covers this page only.",
            input(
                json!({"pathway_id": id_schema(), "limit": limit_schema(), "cursor": cursor_schema()}),
                &["pathway_id"],
            ),
            // Ends with the ledger's length and head, as `rpr.get_status` does.
            output(
                json!({
                    "pathway_id": {"type": "string"},
                    "events": {"type": "array", "items": event},
                    "next_cursor": {"type": "string"},
                    "chain_verified": {"type": "boolean"},
                    "checked_events": {"type": "integer", "minimum": 0},
                    "problems": {"type": "array", "items": object(
                        json!({"seq": {"type": "integer"}, "problem": {"type": "string"}}),
                        &["seq", "problem"],
                    )},
                    "ledger_length": {"type": "integer"},
                    "ledger_head": {"type": ["string", "null"]},
                }),
                &[
                    "pathway_id",
                    "events",
                    "chain_verified",
                    "checked_events",
                    "problems",
                    "ledger_length",
                    "ledger_head"
                ],
            ),
        ),
        tool(
            "rpr.list_unresolved",
            "List unresolved pathways",
            "A page of pathways not yet completed, denied, aborted or failed (a read that failed), ordered by id, each with the action it needs and the roles and actors that must take it.",
            input(
                json!({"limit": limit_schema(), "cursor": cursor_schema()}),
                &[]
            ),
            page_output(),
        ),
    ])
}
