//! The views for operators, read-only: `show` (one pathway: the request being decided
//! on, its attempts, approvals and timeline, and who acts next), `list` (pathways by
//! state, proposer or approver, a page at a time) and `log` (the ledger's events, as they
//! come with `--follow`).

use std::fmt::Write as _;

use clap::Args;
use rpr::State;
use rpr::inspect::{self, EventView, MAX_LIMIT, NextAction, PathwayDetail};
use rpr::store::{PathwayRecord, ReadStore};
use serde_json::{Value, json};

use super::Database;
use super::read::print_json;
use crate::config::existing_database;
use crate::shown;
use crate::shown::utc;
use crate::{Exit, Failure, Usage};

/// `show PATHWAY`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    pub(crate) db: Database,
    /// The pathway (`pw_…`).
    #[arg(value_name = "PATHWAY")]
    pub(crate) pathway: String,
}

/// `list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) db: Database,
    /// Only pathways in this state (`human_gate`, `write_status_unknown`, …).
    #[arg(long, value_name = "STATE")]
    pub(crate) state: Option<String>,
    /// Only pathways this actor proposed.
    #[arg(long, value_name = "NAME")]
    pub(crate) actor: Option<String>,
    /// Only pathways waiting for this actor's approval (awaiting approval or at a Human
    /// Gate, with NAME the approval authority).
    #[arg(long, value_name = "NAME")]
    pub(crate) approver: Option<String>,
    /// At most this many pathways (1 to 500).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub(crate) limit: usize,
    /// Go on after this pathway: the cursor the previous page printed.
    #[arg(long, value_name = "CURSOR")]
    pub(crate) cursor: Option<String>,
}

/// `log`.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    #[command(flatten)]
    pub(crate) db: Database,
    /// Only this pathway's events.
    #[arg(long, value_name = "ID")]
    pub(crate) pathway: Option<String>,
    /// Only the events after this position in the ledger (`seq`; 0: from the first).
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub(crate) after: i64,
    /// At most this many events (without --follow; default: all).
    #[arg(long, value_name = "N", conflicts_with = "follow")]
    pub(crate) limit: Option<usize>,
    /// Keep printing new events as they are committed (looks twice a second) until
    /// interrupted.
    #[arg(long)]
    pub(crate) follow: bool,
}

fn read_store(db: &Database) -> Result<ReadStore, Failure> {
    Ok(ReadStore::open_read_only(existing_database(
        db.location(),
    )?)?)
}

/// Who acts next, in one line.
fn next_line(next: &NextAction) -> String {
    if next.action == "none" {
        return "nothing: the pathway is terminal".into();
    }
    let roles: Vec<&str> = next.roles.iter().map(|r| r.as_str()).collect();
    if roles.is_empty() {
        return format!("{} — {}", next.action, next.detail);
    }
    format!(
        "{} by {} ({}) — {}",
        next.action,
        roles.join(" or "),
        next.actors.join(", "),
        next.detail
    )
}

/// Every event of the pathway, oldest first, and whether each passed its chain check.
fn all_events(store: &ReadStore, id: &str) -> Result<(Vec<EventView>, bool), Failure> {
    let mut events = Vec::new();
    let mut verified = true;
    let mut cursor: Option<String> = None;
    loop {
        let page = inspect::evidence(store, id, MAX_LIMIT, cursor.as_deref())?;
        verified &= page.chain_verified;
        events.extend(page.events);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok((events, verified)),
        }
    }
}

/// One event of the timeline: seq, time, kind, actor and the move it made.
fn event_line(e: &EventView) -> String {
    let mut line = event_text(e.seq, &e.event);
    if !e.verified {
        line.push_str("  [FAILED its chain check]");
    }
    line
}

/// An event for people: seq, time, kind, actor, the move it made and what it decided.
fn event_text(seq: i64, v: &Value) -> String {
    let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
    let at = v.get("at").and_then(Value::as_i64).map_or("?".into(), utc);
    let moved = match (v.get("from").and_then(Value::as_str), text("to")) {
        (Some(from), to) if from != to => format!("{from} → {to}"),
        (None, to) => format!("→ {to}"),
        (Some(_), to) => format!("(stays {to})"),
    };
    let mut line = format!(
        "#{:<5} {at}  {:<18} {:<10} {moved}",
        seq,
        text("kind"),
        shown::name(text("actor"))
    );
    if let Some(status) = v.get("attempt_status").and_then(Value::as_str) {
        let _ = write!(line, "  attempt {status}");
    }
    if let Some(decision) = v["data"].get("decision").and_then(Value::as_str) {
        let _ = write!(line, "  decision {decision}");
    }
    if let Some(verdict) = v["data"].get("verdict").and_then(Value::as_str) {
        let _ = write!(line, "  verdict {verdict}");
    }
    if let Some(reason) = v["data"].get("reason").and_then(Value::as_str) {
        let _ = write!(line, "  reason {:?}", shown::name(reason));
    }
    line
}

/// `show PATHWAY`: one pathway for a person deciding on it.
pub(crate) fn show(args: &ShowArgs, as_json: bool) -> Result<Exit, Failure> {
    let store = read_store(&args.db)?;
    let detail = inspect::pathway(&store, &args.pathway)?;
    let (events, chain_verified) = all_events(&store, &args.pathway)?;
    if as_json {
        print_json(&json!({
            "pathway": detail,
            "events": events,
            "chain_verified": chain_verified,
        }))?;
        return Ok(Exit::Done);
    }
    // The definition whole, however large: the detail's page budget may have cut it, and
    // this is what a person decides on.
    let whole = store
        .pathway(&detail.pathway_id)?
        .map_or_else(|| detail.definition.clone(), |r| r.definition);
    // What an approval of a gate's call is of: its tool as pinned now.
    let pin = match (
        rpr::gate::is_gate_metadata(&whole["metadata"]),
        whole["metadata"]["server"].as_str(),
        whole["request"]["action"].as_str(),
    ) {
        (true, Some(server), Some(tool)) => Some(store.pin(server, tool)?),
        _ => None,
    };
    print_detail(
        &detail,
        &whole,
        pin.as_ref(),
        &events,
        chain_verified,
        args.db.location(),
    );
    Ok(Exit::Done)
}

/// `pin`: for a gate's call, its tool's pin (`None` inside: none recorded); `None` for a
/// call of `rpr call`.
fn print_detail(
    d: &PathwayDetail,
    def: &Value,
    pin: Option<&Option<rpr::store::PinRecord>>,
    events: &[EventView],
    chain_verified: bool,
    database: &str,
) {
    let text = |v: &Value| v.as_str().map(shown::name);
    outln!(
        "pathway {}: {} (version {})",
        d.pathway_id,
        d.state,
        d.version
    );
    outln!(
        "  key {:?}, proposed by {} at {}; last changed {}",
        shown::name(&d.idempotency_key),
        shown::name(&d.proposer),
        utc(d.created_at),
        utc(d.updated_at)
    );
    outln!(
        "call: {} on server {} ({})",
        text(&def["request"]["action"]).unwrap_or_else(|| "?".into()),
        text(&def["metadata"]["server"]).unwrap_or_else(|| "?".into()),
        text(&def["class"]).unwrap_or_else(|| "class not recorded".into())
    );
    outln!("arguments, as stored (values redacted by key name when it was proposed):");
    for line in shown::pretty(&def["request"]["arguments"]).lines() {
        outln!("  {line}");
    }
    outln!("request digest: {}", d.request_digest);
    match pin {
        Some(Some(p)) => {
            outln!(
                "binding: the tool as pinned, digest {} ({} {}, pinned by {} at {}): what an \
                 approval is of",
                p.digest,
                p.binding["server_name"]
                    .as_str()
                    .map_or("?".into(), shown::name),
                p.binding["server_version"]
                    .as_str()
                    .map_or("?".into(), shown::name),
                shown::name(&p.pinned_by),
                utc(p.pinned_at)
            );
            if p.seen.is_some() {
                outln!(
                    "  the server's tool CHANGED since it was pinned: the call is refused until \
                     the change is reviewed (`rpr pin --review`)"
                );
            }
        }
        Some(None) => outln!("binding: no pin is recorded for this tool"),
        None => outln!(
            "binding: made when the call is sent (`rpr approve` prints it at the Human Gate)"
        ),
    }
    if let Some(authority) = def.get("authority").and_then(Value::as_object) {
        let roles: Vec<String> = authority
            .iter()
            .map(|(role, who)| format!("{role} {}", who.as_str().map_or("?".into(), shown::name)))
            .collect();
        outln!("authority: {}", roles.join(", "));
    }
    if d.attempts.is_empty() {
        outln!("attempts: none (nothing was sent)");
    } else {
        outln!("attempts:");
    }
    if d.omitted_attempts > 0 {
        outln!("  ({} older attempts left out)", d.omitted_attempts);
    }
    for a in &d.attempts {
        outln!(
            "  {}. {} {}: started {}, last changed {}",
            a.seq,
            a.id,
            a.status,
            utc(a.created_at),
            utc(a.updated_at)
        );
        outln!("     binding {}", a.binding_digest);
        let b = &a.binding;
        if let (Some(server), Some(tool)) = (b["server_name"].as_str(), b["tool_name"].as_str()) {
            outln!(
                "     bound to tool {} of server {} {} (MCP {})",
                shown::name(tool),
                shown::name(server),
                b["server_version"].as_str().map_or("?".into(), shown::name),
                b["protocol_version"]
                    .as_str()
                    .map_or("?".into(), shown::name)
            );
        }
    }
    let approvals: Vec<&EventView> = events
        .iter()
        .filter(|e| {
            matches!(
                e.event["kind"].as_str(),
                Some("approval_granted" | "approved")
            )
        })
        .collect();
    if approvals.is_empty() {
        outln!("approvals: none");
    } else {
        outln!("approvals:");
        for e in approvals {
            let v = &e.event;
            let of = v["data"]["binding_digest"]
                .as_str()
                .map(|b| format!(", of binding {}", shown::name(b)))
                .unwrap_or_default();
            outln!(
                "  {} by {} at {} ({}{of})",
                v["data"]["approval"].as_str().unwrap_or("?"),
                v["actor"].as_str().map_or("?".into(), shown::name),
                v["at"].as_i64().map_or("?".into(), utc),
                if v["kind"] == "approved" {
                    "used: the pathway was approved"
                } else {
                    "granted"
                }
            );
        }
    }
    outln!(
        "timeline ({} events, oldest first; {}):",
        events.len(),
        if chain_verified {
            "each passed its chain check"
        } else {
            "SOME FAILED their chain check; run `rpr verify`"
        }
    );
    for e in events {
        outln!("  {}", event_line(e));
    }
    outln!("next: {}", next_line(&d.next));
    if matches!(d.state, State::HumanGate | State::AwaitingApproval) {
        let approver = d.next.actors.first().map_or("NAME", String::as_str);
        let database = rpr::store::shown_location(std::path::Path::new(database));
        match pin {
            Some(Some(p)) => outln!(
                "  to approve: rpr approve --database {database} --pathway {} --as {} \
                 --at-version {} --binding {}",
                d.pathway_id,
                shown::name(approver),
                d.version,
                p.digest
            ),
            // A gate's call whose tool has no pin: nothing can be approved as shown.
            Some(None) => outln!(
                "  to approve: first pin the tool (rpr pin); a gate's call is approved only as \
                 bound to its pin"
            ),
            None => outln!(
                "  to approve: rpr approve --database {database} --pathway {} --as {} \
                 (a pathway of `rpr call`: with its --config and --policy, to carry the call out)",
                d.pathway_id,
                shown::name(approver)
            ),
        }
        outln!(
            "  to deny: rpr deny --database {database} --pathway {} --as {}",
            d.pathway_id,
            shown::name(approver)
        );
    }
}

/// Whether `record` is waiting for `approver`'s approval.
fn waits_for(record: &PathwayRecord, next: &NextAction, approver: &str) -> bool {
    matches!(record.state, State::HumanGate | State::AwaitingApproval)
        && next.actors.iter().any(|a| a == approver)
}

/// `list`: pathways ordered by id, filtered, a page at a time.
pub(crate) fn list(args: &ListArgs, as_json: bool) -> Result<Exit, Failure> {
    if !(1..=MAX_LIMIT).contains(&args.limit) {
        return Err(Usage(format!(
            "--limit must be 1 to {MAX_LIMIT}, not {}",
            args.limit
        ))
        .into());
    }
    let state = args
        .state
        .as_deref()
        .map(|s| {
            s.parse::<State>().map_err(|_| {
                Usage(format!(
                    "--state {s:?} is no state; the states: {}",
                    State::ALL.map(State::as_str).join(", ")
                ))
            })
        })
        .transpose()?;
    if args.cursor.as_deref() == Some("") {
        return Err(Usage("--cursor needs the cursor a previous page printed".into()).into());
    }
    let store = read_store(&args.db)?;
    let (rows, next_cursor) = store.snapshot(|store| {
        let mut rows = Vec::new();
        let mut after = args.cursor.clone();
        loop {
            let page = store.list_pathways(after.as_deref(), MAX_LIMIT, state)?;
            let Some(last) = page.last() else {
                return Ok::<_, Failure>((rows, None));
            };
            let last = last.id.clone();
            for record in page {
                let next = inspect::next_of(store, &record)?;
                let keep = args.actor.as_ref().is_none_or(|a| *a == record.proposer)
                    && args
                        .approver
                        .as_ref()
                        .is_none_or(|a| waits_for(&record, &next, a));
                if !keep {
                    continue;
                }
                if rows.len() == args.limit {
                    // One more matches: the page ends at the one before it.
                    let cursor = rows
                        .last()
                        .map(|(r, _): &(PathwayRecord, NextAction)| r.id.clone());
                    return Ok((rows, cursor));
                }
                rows.push((record, next));
            }
            after = Some(last);
        }
    })?;
    if as_json {
        let listed: Vec<Value> = rows
            .iter()
            .map(|(r, next)| {
                json!({
                    "pathway_id": r.id,
                    "state": r.state,
                    "idempotency_key": r.idempotency_key,
                    "action": r.definition["request"]["action"],
                    "server": r.definition["metadata"]["server"],
                    "proposer": r.proposer,
                    "version": r.version,
                    "created_at": r.created_at,
                    "updated_at": r.updated_at,
                    "next": next,
                })
            })
            .collect();
        let mut out = json!({"pathways": listed, "count": rows.len()});
        if let Some(c) = &next_cursor {
            out["next_cursor"] = json!(c);
        }
        print_json(&out)?;
        return Ok(Exit::Done);
    }
    for (r, next) in &rows {
        outln!(
            "{}  {}  {} on {}  by {}  changed {}",
            r.id,
            r.state,
            r.definition["request"]["action"]
                .as_str()
                .map_or("?".into(), shown::name),
            r.definition["metadata"]["server"]
                .as_str()
                .map_or("?".into(), shown::name),
            shown::name(&r.proposer),
            utc(r.updated_at)
        );
        outln!("    next: {}", next_line(next));
    }
    outln!("{} pathway(s)", rows.len());
    if let Some(c) = next_cursor {
        outln!("more: the same command with --cursor {c}");
    }
    Ok(Exit::Done)
}

/// How many events `log` reads at a time.
const LOG_PAGE: usize = 500;

/// `log`: the ledger's events in order, one line each (`--json`: one JSON object per
/// line), from `--after`; with `--follow`, then every event committed later.
pub(crate) fn log(args: &LogArgs, as_json: bool) -> Result<Exit, Failure> {
    if args.after < 0 {
        return Err(Usage(format!("--after must be 0 or more, not {}", args.after)).into());
    }
    if args.limit == Some(0) {
        return Err(Usage("--limit must be 1 or more".into()).into());
    }
    let store = read_store(&args.db)?;
    if let Some(id) = &args.pathway
        && store.pathway(id)?.is_none()
    {
        return Err(format!(
            "no pathway with id {:?}; list pathways to see the ids",
            shown::name(id)
        )
        .into());
    }
    let mut after = args.after;
    let mut left = args.limit.unwrap_or(usize::MAX);
    loop {
        let want = left.min(LOG_PAGE);
        let rows = match &args.pathway {
            Some(id) => store.events(id, after, want)?,
            None => store.ledger(after, want)?,
        };
        for row in &rows {
            let event: Value = serde_json::from_str(&row.event)
                .unwrap_or_else(|_| Value::String(row.event.clone()));
            if as_json {
                outln!(
                    "{}",
                    json!({"seq": row.seq, "pathway_id": row.pathway_id, "hash": row.hash, "event": event})
                );
            } else {
                outln!("{}  {}", event_text(row.seq, &event), row.pathway_id);
            }
            after = row.seq;
        }
        left -= rows.len();
        if left == 0 {
            return Ok(Exit::Done);
        }
        if rows.len() < want {
            if !args.follow {
                return Ok(Exit::Done);
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }
}
