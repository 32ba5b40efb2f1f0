//! The commands that read a database: `unresolved` (after the recovery scan), `status` and
//! `verify`.

use rpr::inspect::{self, MAX_LIMIT};
use rpr::store::ReadStore;
use rpr::{State, StoredPathway};
use serde_json::{Value, json};

use super::{Database, VerifyArgs};
use crate::config::existing_database;
use crate::flow;
use crate::{Exit, Failure, Usage};

/// `unresolved`: the recovery scan, then every non-terminal pathway and who must act.
pub(crate) fn unresolved(args: &Database, as_json: bool) -> Result<Exit, Failure> {
    let db = existing_database(&args.database)?;
    let rt = match flow::runtime(db) {
        Ok(rt) => rt,
        Err(e) => {
            // A database file this process cannot write (read-only media): listed without
            // the recovery scan, which records what it finds, and said so. Not a PostgreSQL
            // URL: there the open's own error (a key it needs, a witness ahead) is the answer.
            if !db.is_file() || !cannot_write(db) {
                return Err(e);
            }
            let Ok(store) = ReadStore::open_read_only(db) else {
                return Err(e);
            };
            let skipped = format!(
                "the database cannot be written here ({e}), so the recovery scan, which records \
                 what it finds, was not run: an attempt whose process is gone still shows as running"
            );
            if !as_json {
                note!("rpr unresolved: {skipped}");
            }
            return list_unresolved(&store, &args.database, as_json, &[], Some(&skipped));
        }
    };
    // Recovery: an in-flight attempt whose process is gone becomes unknown (recorded).
    let mut running: Vec<String> = Vec::new();
    loop {
        let after = running.last().map(String::as_str);
        let page = rt
            .reader()
            .list_pathways(after, 1000, Some(State::Running))?;
        if page.is_empty() {
            break;
        }
        running.extend(page.into_iter().map(|r| r.id));
    }
    let mut recovered = Vec::new();
    for stored in rt.recover()? {
        if matches!(stored, StoredPathway::Unknown(_)) && running.iter().any(|id| id == stored.id())
        {
            if !as_json {
                say!(
                    "recovered: pathway {} was in flight {}: now write_status_unknown",
                    stored.id(),
                    owner_fate(&rt, stored.id())?
                );
            }
            recovered.push(stored.id().to_owned());
        }
    }
    list_unresolved(&rt.reader(), &args.database, as_json, &recovered, None)
}

/// What the takeover of pathway `id` recorded of its owner (its last `recovered_unknown`
/// event's `owner_fate`): proven gone, or only its lease lapsed, when it may still send.
fn owner_fate(rt: &rpr::Runtime, id: &str) -> Result<&'static str, Failure> {
    let events = rt.reader().events(id, 0, usize::MAX)?;
    let fate = events.iter().rev().find_map(|row| {
        let e: serde_json::Value = serde_json::from_str(&row.event).ok()?;
        (e["kind"] == "recovered_unknown").then(|| e["data"]["owner_fate"].clone())
    });
    Ok(match fate.as_ref().and_then(serde_json::Value::as_str) {
        Some("gone") => "in a process that is gone",
        Some("lapsed") => {
            "in a process whose lease lapsed (not proven gone: it may still send, so a \
             readback's \"not applied\" is not accepted while it may)"
        }
        _ => "(its owner's fate is not recorded)",
    })
}

/// Whether this process cannot write the database at `db` (or make files beside it).
fn cannot_write(db: &std::path::Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let dir = db
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    access(db, AccessFlags::W_OK).is_err() || access(dir, AccessFlags::W_OK).is_err()
}

/// Every unresolved pathway of `store` and who must act next, for people or as JSON.
fn list_unresolved(
    store: &ReadStore,
    database: &str,
    as_json: bool,
    recovered: &[String],
    recovery_skipped: Option<&str>,
) -> Result<Exit, Failure> {
    let mut cursor: Option<String> = None;
    let mut listed = Vec::new();
    let mut count = 0;
    loop {
        let page = inspect::list_unresolved(store, MAX_LIMIT, cursor.as_deref())?;
        for s in &page.pathways {
            count += 1;
            let key = store
                .pathway(&s.pathway_id)?
                .map(|r| r.idempotency_key)
                .unwrap_or_default();
            if as_json {
                let mut entry = serde_json::to_value(s)?;
                entry["idempotency_key"] = Value::String(key);
                listed.push(entry);
            } else {
                show_unresolved(s, &key, database);
            }
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    if as_json {
        let mut doc = json!({"recovered": recovered, "unresolved": listed, "count": count});
        if let Some(why) = recovery_skipped {
            doc["recovery_skipped"] = json!(why);
        }
        print_json(&doc)?;
    } else {
        outln!("{count} unresolved pathway(s)");
    }
    Ok(Exit::Done)
}

/// One unresolved pathway for people: what it is, and who must act next.
fn show_unresolved(s: &inspect::PathwaySummary, key: &str, database: &str) {
    let roles: Vec<&str> = s.next.roles.iter().map(|r| r.as_str()).collect();
    say!(
        "{}  {}  {}  key {key:?}",
        s.pathway_id,
        s.state,
        s.action.as_deref().unwrap_or("?")
    );
    say!(
        "    next: {} by {} ({}) — {}",
        s.next.action,
        if roles.is_empty() {
            "nobody".into()
        } else {
            roles.join(" or ")
        },
        s.next.actors.join(", "),
        s.next.detail
    );
    if s.state == State::Proposed {
        // Stopped between propose and admit: nothing was sent; `abort` is no edge
        // from `proposed`, so the way out is the admission, allowing or denying.
        let decision_owner = s.next.actors.first().map_or("NAME", String::as_str);
        say!(
            "    to admit it: repeat the same `rpr call` (same --key {key:?}, same --args); \
             to refuse it: rpr deny --database {} --pathway {} --as {decision_owner}",
            rpr::store::shown_location(std::path::Path::new(database)),
            s.pathway_id
        );
    }
}

/// Prints one JSON document on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// `status`: the database's figures, read-only.
pub(crate) fn status(args: &Database, as_json: bool) -> Result<Exit, Failure> {
    let store = ReadStore::open_read_only(existing_database(&args.database)?)?;
    let status = inspect::status(&store)?;
    if as_json {
        print_json(&status)?;
        return Ok(Exit::Done);
    }
    outln!("schema version {}", status.schema_version);
    let counts: Vec<String> = status
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(state, n)| format!("{state} {n}"))
        .collect();
    outln!(
        "pathways: {} ({})",
        status.counts.values().sum::<i64>(),
        if counts.is_empty() {
            "none".to_owned()
        } else {
            counts.join(", ")
        }
    );
    outln!("{} unresolved pathway(s)", status.unresolved_count);
    outln!(
        "ledger: {} events, head {}",
        status.ledger_length,
        status.ledger_head.as_deref().unwrap_or("-")
    );
    Ok(Exit::Done)
}

/// `verify`: checks the hash chain and the stored states, read-only.
pub(crate) fn verify(
    args: &VerifyArgs,
    witness: Option<&std::path::Path>,
    as_json: bool,
) -> Result<Exit, Failure> {
    let head = args.head.as_deref().map(checked_head).transpose()?;
    if witness.is_some() && args.key.is_none() {
        return Err(Usage("--witness needs --key PUB (the log's verifier key)".into()).into());
    }
    let store = ReadStore::open_read_only(existing_database(&args.db.database)?)?;
    let report = rpr::store::verify(&store, head.as_deref())?;
    let signed = args
        .key
        .as_deref()
        .map(|key| crate::log::verify_signed(&store, key, witness))
        .transpose()?;
    let log_problems: Vec<String> = signed
        .iter()
        .flat_map(|r| r.problems.iter().map(ToString::to_string))
        .collect();
    if as_json {
        let mut out = json!({
            "verified": report.is_ok() && log_problems.is_empty(),
            "events": report.events,
            "head": report.head,
            "problems": report.problems,
        });
        if let Some(r) = &signed {
            out["log"] = json!({
                "checkpoint_size": r.checkpoint.as_ref().map(|c| c.size),
                "problems": log_problems,
            });
        }
        print_json(&out)?;
    } else {
        outln!(
            "ledger: {} events, head {}",
            report.events,
            report.head.as_deref().unwrap_or("-")
        );
        for p in &report.problems {
            say!("  {}", problem_line(p));
        }
        if let Some(r) = &signed {
            match &r.checkpoint {
                Some(cp) => outln!(
                    "signed log: checkpoint of {} events of the log {} verified with the key",
                    cp.size,
                    crate::shown::text(&cp.origin)
                ),
                None => outln!("signed log: no checkpoint verified with the key"),
            }
            for p in &log_problems {
                say!("  {p}");
            }
        }
    }
    if report.is_ok() && log_problems.is_empty() {
        if !as_json {
            outln!("chain and states verified: true");
            if signed.is_some() {
                outln!("signed log verified: true");
            }
        }
        Ok(Exit::Done)
    } else {
        Err(format!(
            "the ledger does not verify: {} problem(s)",
            report.problems.len() + log_problems.len()
        )
        .into())
    }
}

/// `--head`: a ledger hash as `rpr status` and `verify` print it (64 hex digits), in lower
/// case; anything else is bad usage, not a head the chain fails to reach.
fn checked_head(head: &str) -> Result<String, Failure> {
    if head.len() == 64 && head.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(head.to_ascii_lowercase())
    } else {
        Err(Usage(format!(
            "--head {}: not a ledger hash (64 hex digits, as `rpr status` prints the head)",
            crate::shown::text(head)
        ))
        .into())
    }
}

/// One problem of a verification, for people: its kind in words, where, and the detail.
pub(crate) fn problem_line(p: &rpr::ledger::Problem) -> String {
    let kind = serde_json::to_value(p.kind)
        .ok()
        .and_then(|v| v.as_str().map(|k| k.replace('_', " ")))
        .unwrap_or_else(|| "problem".to_owned());
    let mut place = Vec::new();
    if let Some(seq) = p.seq {
        place.push(format!("event {seq}"));
    }
    if let Some(pathway) = &p.pathway {
        place.push(format!("pathway {pathway}"));
    }
    if place.is_empty() {
        format!("{kind}: {}", p.detail)
    } else {
        format!("{kind} ({}): {}", place.join(", "), p.detail)
    }
}
