//! What the console shows, read from the store read-only at each page: the pathways waiting
//! for a decision (the whole request, targets first), the other unresolved pathways with
//! who acts next, the pins waiting for review, the ledger's verification, and what this
//! console did.

use std::fmt::Write as _;

use serde_json::Value;

use rpr::State;
use rpr::inspect::{self, PathwaySummary};
use rpr::shown::{pretty, targets, utc};
use rpr::store::{PinRecord, ReadStore};

use super::act::Done;
use super::page::{esc, form, html};
use crate::Failure;

/// How many unresolved pathways one page shows (`rpr unresolved` lists them all).
pub(crate) const PAGE: usize = 100;

/// What a page needs besides the store.
pub(crate) struct Ctx<'a> {
    /// The database as it may be shown.
    pub(crate) shown_database: &'a str,
    /// Who acts in this console.
    pub(crate) approver: &'a str,
    pub(crate) form_token: &'a str,
    /// Whether the console was given a policy, so it can reconcile by readback.
    pub(crate) can_reconcile: bool,
}

/// The ledger's verification, as last computed.
#[derive(Debug, Clone)]
pub(crate) struct LedgerView {
    pub(crate) head: Option<(i64, String)>,
    pub(crate) events: i64,
    pub(crate) problems: Vec<String>,
}

/// Verifies the whole ledger (`rpr verify`'s check).
pub(crate) fn verify(store: &ReadStore) -> Result<LedgerView, Failure> {
    let head = store.ledger_head()?;
    let report = rpr::store::verify(store, None)?;
    Ok(LedgerView {
        head,
        events: report.events,
        problems: report
            .problems
            .iter()
            .map(crate::commands::problem_line)
            .collect(),
    })
}

/// The dashboard's body.
pub(crate) fn dashboard(
    store: &ReadStore,
    ctx: &Ctx<'_>,
    ledger: &LedgerView,
    done: &[Done],
) -> Result<String, Failure> {
    let page = inspect::list_unresolved(store, PAGE, None)?;
    let (waiting, other): (Vec<&PathwaySummary>, Vec<&PathwaySummary>) = page
        .pathways
        .iter()
        .partition(|p| matches!(p.state, State::HumanGate | State::AwaitingApproval));
    let mut out = String::new();
    let _ = write!(
        out,
        "<h1>rpr console</h1><p class=\"meta\">Database <code>{}</code>. You act as \
         <b id=\"approver\">{}</b>: approvals and denials made here are recorded under that name, as \
         <code>rpr approve --as</code> records them. This page reloads itself when the database changes.</p>",
        esc(ctx.shown_database),
        esc(ctx.approver)
    );
    ledger_section(&mut out, ledger);
    let _ = write!(
        out,
        "<section id=\"waiting\"><h2>Waiting for a decision ({})</h2>",
        waiting.len()
    );
    if waiting.is_empty() {
        out.push_str("<p>No pathway waits at a Human Gate.</p>");
    }
    for p in &waiting {
        waiting_article(&mut out, store, ctx, p)?;
    }
    out.push_str("</section>");
    let _ = write!(
        out,
        "<section id=\"unresolved\"><h2>Other unresolved pathways ({})</h2>",
        other.len()
    );
    if other.is_empty() {
        out.push_str("<p>None.</p>");
    }
    for p in &other {
        unresolved_article(&mut out, ctx, p);
    }
    if page.next_cursor.is_some() {
        let _ = write!(
            out,
            "<p>Only the first {PAGE} unresolved pathways are shown: <code>rpr unresolved --database {}</code> lists them all.</p>",
            esc(ctx.shown_database)
        );
    }
    out.push_str("</section>");
    pins_section(&mut out, &store.pins()?, ctx);
    actions_section(&mut out, done);
    Ok(out)
}

fn ledger_section(out: &mut String, ledger: &LedgerView) {
    out.push_str("<section id=\"ledger\"><h2>The ledger</h2>");
    let head = ledger
        .head
        .as_ref()
        .map_or("none yet".to_owned(), |(seq, hash)| {
            format!("event {seq}, hash <code>{}</code>", esc(hash))
        });
    if ledger.problems.is_empty() {
        let _ = write!(
            out,
            "<p class=\"ok\" id=\"verified\">Verified: {} events, each hash chained to the one before and every stored state explained by them.</p><p class=\"meta\">Head: {head}. Verified again when the ledger moves, and every <code>--verify-every</code> seconds.</p>",
            ledger.events
        );
    } else {
        let _ = write!(
            out,
            "<p class=\"bad\" id=\"verified\">NOT VERIFIED: {} problem(s) in {} events. Run <code>rpr verify</code>.</p><ul>",
            ledger.problems.len(),
            ledger.events
        );
        for p in ledger.problems.iter().take(20) {
            let _ = write!(out, "<li>{}</li>", esc(p));
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
}

/// What a pathway's definition says it calls.
fn call_of(definition: &Value) -> (String, String) {
    let s = |v: &Value| v.as_str().unwrap_or("?").to_owned();
    (
        s(&definition["request"]["action"]),
        s(&definition["metadata"]["server"]),
    )
}

/// An approval granted and not used since the pathway last entered the Human Gate.
struct Granted {
    approver: String,
    at: i64,
    break_glass: bool,
    /// The binding its approver was shown, when it recorded one.
    binding: Option<String>,
}

/// Why a pathway is at the Human Gate: the event that brought it there.
struct Entered {
    kind: String,
    actor: String,
    why: Option<String>,
}

/// The approvals granted since the pathway last entered its Human Gate and not used, from
/// its events, oldest first; and the event that brought it there.
fn outstanding(store: &ReadStore, id: &str) -> Result<(Vec<Granted>, Option<Entered>), Failure> {
    let mut all: Vec<(String, Granted)> = Vec::new();
    let mut entered = None;
    let mut after = 0;
    loop {
        let rows = store.events(id, after, 500)?;
        let Some(last) = rows.last() else { break };
        after = last.seq;
        for row in &rows {
            let e: Value = serde_json::from_str(&row.event)?;
            let kind = e["kind"].as_str().unwrap_or_default();
            if e["to"] == "human_gate" && e["from"] != "human_gate" {
                all.clear();
                entered = Some(Entered {
                    kind: kind.to_owned(),
                    actor: e["actor"].as_str().unwrap_or("?").to_owned(),
                    why: e["data"]["reason"].as_str().map(str::to_owned),
                });
            }
            if kind == "admitted" && e["data"]["decision"] == "human_gate" {
                entered = Some(Entered {
                    kind: "admitted".into(),
                    actor: e["actor"].as_str().unwrap_or("?").to_owned(),
                    why: Some("the policy requires a Human Gate decision for this call".into()),
                });
            }
            let approval = e["data"]["approval"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match kind {
                "approval_granted" => all.push((
                    approval,
                    Granted {
                        approver: e["actor"].as_str().unwrap_or("?").to_owned(),
                        at: e["at"].as_i64().unwrap_or(0),
                        break_glass: e["data"]["break_glass"] == true,
                        binding: e["data"]["binding_digest"].as_str().map(str::to_owned),
                    },
                )),
                "approved" => all.retain(|(a, _)| *a != approval),
                _ => {}
            }
        }
    }
    Ok((all.into_iter().map(|(_, g)| g).collect(), entered))
}

/// Whether `definition` (as stored) is of a call proposed by `rpr gate`.
pub(crate) fn is_gate_call(definition: &Value) -> bool {
    rpr::gate::is_gate_metadata(&definition["metadata"])
}

/// A pathway's definition whole, however large: the detail's page budget
/// (`inspect::pathway`) may have cut it to a marker, and what is approved is shown whole.
fn whole_definition(store: &ReadStore, id: &str) -> Result<Value, Failure> {
    Ok(store
        .pathway(id)?
        .ok_or_else(|| format!("pathway {id} is gone"))?
        .definition)
}

fn waiting_article(
    out: &mut String,
    store: &ReadStore,
    ctx: &Ctx<'_>,
    p: &PathwaySummary,
) -> Result<(), Failure> {
    let d = inspect::pathway(store, &p.pathway_id)?;
    let whole = whole_definition(store, &p.pathway_id)?;
    let def = &whole;
    let (tool, server) = call_of(def);
    let id = &d.pathway_id;
    let _ = write!(
        out,
        "<article class=\"pathway waiting\" id=\"pw-{}\" data-state=\"{}\"><h3>Call <code>{}</code> on server <code>{}</code>: <a href=\"pathway/{}\">{}</a></h3>",
        esc(id),
        d.state,
        esc(&tool),
        esc(&server),
        html(&super::form::encode(id)),
        esc(id)
    );
    let (granted, entered) = outstanding(store, id)?;
    let why = entered.map_or_else(
        || "not recorded".to_owned(),
        |e| {
            format!(
                "<code>{}</code> by <b>{}</b>{}",
                esc(&e.kind),
                esc(&e.actor),
                e.why.map(|w| format!(": {}", esc(&w))).unwrap_or_default()
            )
        },
    );
    let _ = write!(
        out,
        "<p class=\"meta\">Proposed by <b>{}</b> at {}; state <code>{}</code>; brought to the gate by {why}. Nothing has been sent.</p>",
        esc(&d.proposer),
        utc(d.created_at),
        d.state
    );
    let pin = store.pin(&server, &tool)?;
    // What an approval from this page is of: the digest shown here, posted with the form
    // (`rpr approve --binding`), so a pin accepted after the page was drawn approves
    // nothing. A pathway of `rpr call` is bound when its approval step runs.
    let is_gate = is_gate_call(def);
    let shown_binding = pin
        .as_ref()
        .filter(|_| is_gate)
        .map(|pin| pin.digest.clone());
    match pin {
        // A call of `rpr call` to a server of the same name as a gate's is not held to
        // that gate's pin: its binding is made when it is approved.
        _ if !is_gate => out.push_str("<p class=\"binding\">A call of <code>rpr call</code>: it is bound when its approval step runs, so an approval here is of the server as it is at the click (<code>rpr approve</code> prints that binding, shown below with what the command said), and the call is sent only to it.</p>"),
        Some(pin) => {
            let _ = write!(
                out,
                "<p class=\"binding\">Bound to the pinned tool: binding digest <code>{}</code> ({} {}, pinned by {} at {}). An approval here is of this digest, and is refused if the pin changed since this page was drawn; the gate and <code>rpr resume</code> send the call only to the tool as approved (docs/gate.md).</p>",
                esc(&pin.digest),
                esc(pin.binding["server_name"].as_str().unwrap_or("?")),
                esc(pin.binding["server_version"].as_str().unwrap_or("?")),
                esc(&pin.pinned_by),
                utc(pin.pinned_at)
            );
            if pin.seen.is_some() {
                out.push_str("<p class=\"bad\">The server's tool has CHANGED since it was pinned: the call is refused until the change is reviewed (below).</p>");
            }
        }
        None => out.push_str("<p class=\"bad\">No tool pin is recorded for this gate's server and tool: nothing shows what an approval would be of, so it cannot be approved here (pin the tool first with <code>rpr pin</code>, then reload); it can be denied.</p>"),
    }
    let args = &def["request"]["arguments"];
    let found = targets(args);
    out.push_str("<h4>Targets</h4>");
    if found.is_empty() {
        out.push_str("<p>No argument names a target (a path, an address, a key…): read the whole request.</p>");
    } else {
        out.push_str("<table class=\"targets\">");
        for (pointer, value) in &found {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td><code>{}</code></td></tr>",
                html(pointer),
                html(value)
            );
        }
        out.push_str("</table>");
    }
    let _ = write!(
        out,
        "<h4>The whole request</h4><pre class=\"request\">{}</pre><p class=\"meta\">Request digest (sha256 of the whole request) <code>{}</code>. Values were redacted by key name when the call was proposed.</p>",
        html(&pretty(&def["request"])),
        esc(&d.request_digest)
    );
    // Who may decide, and what counts.
    let rule = &def["authority"]["approval"];
    let quorum = rule["quorum"].as_u64().unwrap_or(1);
    let ttl_ms = rule["ttl_ms"].as_i64();
    let now = store.approval_now()?;
    let _ = write!(
        out,
        "<p class=\"approvers\">Approvals needed: {quorum}, from distinct approvers. Who may still approve: <b>{}</b>.</p>",
        if d.next.actors.is_empty() {
            "nobody the definition names".to_owned()
        } else {
            d.next
                .actors
                .iter()
                .map(|a| esc(a))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    if !granted.is_empty() {
        // The binding an approval is judged for now (as the approval step judges it): a
        // gate's call, the pinned digest; any other, the newest approval's.
        let judged = match &shown_binding {
            Some(pinned) => Some(pinned.clone()),
            None => granted.iter().rev().find_map(|g| g.binding.clone()),
        };
        out.push_str("<ul class=\"granted\">");
        for g in &granted {
            let until = ttl_ms.map(|t| g.at.saturating_add(t));
            let other = judged
                .as_deref()
                .filter(|j| g.binding.as_deref() != Some(*j));
            let counts = match until {
                _ if other.is_some() => format!(
                    "<span class=\"bad\">of another binding{}: it does not count toward the quorum of the call as it is bound now, and its approver may approve again</span>",
                    g.binding.as_deref().map_or_else(
                        || " (none recorded)".to_owned(),
                        |b| format!(" (<code>{}</code>)", esc(b))
                    )
                ),
                Some(u) if u <= now => format!("<span class=\"bad\">EXPIRED at {}</span>", utc(u)),
                Some(u) => format!("counts until {}", utc(u)),
                None => "does not expire".to_owned(),
            };
            let _ = write!(
                out,
                "<li>approved by <b>{}</b> at {}{}; {counts}</li>",
                esc(&g.approver),
                utc(g.at),
                if g.break_glass { " (BREAK-GLASS)" } else { "" }
            );
        }
        out.push_str("</ul>");
    }
    match ttl_ms {
        Some(t) => {
            let _ = write!(
                out,
                "<p class=\"expiry\">An approval counts for {} s after it is given (the policy's <code>approval_ttl</code>); one that expired is not used.</p>",
                t / 1000
            );
        }
        None => out.push_str("<p class=\"expiry\">Approvals of this pathway do not expire (it was recorded before approvals had an expiry).</p>"),
    }
    // A gate's call without a pin: the console refuses an approval that names no binding,
    // so no button is offered for one.
    let unpinned = is_gate && shown_binding.is_none();
    let may = d.next.actors.iter().any(|a| a == ctx.approver) && !unpinned;
    // The forms carry the version this page shows: a decision is taken only on the pathway
    // as it was looked at (`rpr approve --at-version`).
    let version = d.version.to_string();
    let fields = [("pathway", id.as_str()), ("version", version.as_str())];
    let mut approve_fields = fields.to_vec();
    if let Some(digest) = &shown_binding {
        approve_fields.push(("binding", digest.as_str()));
    }
    if may {
        out.push_str(&form(
            "approve",
            ctx.form_token,
            &approve_fields,
            "",
            ("approve", &format!("Approve as {}", ctx.approver)),
        ));
    } else if !unpinned {
        let _ = write!(
            out,
            "<p class=\"meta\">You ({}) are not among who may still approve it.</p>",
            esc(ctx.approver)
        );
    }
    out.push_str(&form(
        "deny",
        ctx.form_token,
        &fields,
        "<input type=\"text\" name=\"reason\" placeholder=\"why (recorded)\" size=\"30\"> ",
        ("deny", &format!("Deny as {}", ctx.approver)),
    ));
    let _ = write!(
        out,
        "<p class=\"meta\">The same at a terminal: <code>rpr approve --database {db} --pathway {id} --as {who} --at-version {version}{binding}</code> or <code>rpr deny --database {db} --pathway {id} --as {who} --at-version {version}</code>. A call of <code>rpr gate</code> is sent by the gate, once, when it is approved: while the client's call waits (<code>--approval-wait</code>), or when the client makes it again.</p></article>",
        db = esc(ctx.shown_database),
        id = esc(id),
        who = esc(ctx.approver),
        binding = shown_binding
            .map(|d| format!(" --binding {}", esc(&d)))
            .unwrap_or_default()
    );
    Ok(())
}

fn unresolved_article(out: &mut String, ctx: &Ctx<'_>, p: &PathwaySummary) {
    let id = &p.pathway_id;
    let next = &p.next;
    let _ = write!(
        out,
        "<article class=\"pathway unresolved\" id=\"pw-{}\" data-state=\"{}\"><h3><code>{}</code>: <a href=\"pathway/{}\">{}</a></h3><p>State <code>{}</code>, last changed {}. Next: <b>{}</b> by {}: {}.</p>",
        esc(id),
        p.state,
        esc(p.action.as_deref().unwrap_or("?")),
        html(&super::form::encode(id)),
        esc(id),
        p.state,
        utc(p.updated_at),
        esc(next.action),
        if next.actors.is_empty() {
            "nobody named".to_owned()
        } else {
            next.actors
                .iter()
                .map(|a| esc(a))
                .collect::<Vec<_>>()
                .join(" or ")
        },
        esc(next.detail)
    );
    if matches!(next.action, "reconcile" | "confirm_by_readback") {
        if ctx.can_reconcile {
            let version = p.version.to_string();
            out.push_str(&form(
                "reconcile",
                ctx.form_token,
                &[("pathway", id.as_str()), ("version", version.as_str())],
                "",
                ("reconcile", "Reconcile by readback"),
            ));
            out.push_str("<p class=\"meta\">Reconciling reads the effect back with the policy's readback tool on a fresh session; it never sends the call again.</p>");
        } else {
            out.push_str("<p class=\"meta\">Start the console with <code>--policy</code> to reconcile it by readback here.</p>");
        }
    }
    out.push_str("</article>");
}

fn pins_section(out: &mut String, pins: &[PinRecord], ctx: &Ctx<'_>) {
    let changed: Vec<&PinRecord> = pins.iter().filter(|p| p.seen.is_some()).collect();
    let _ = write!(
        out,
        "<section id=\"pins\"><h2>Tool changes waiting for review ({})</h2>",
        changed.len()
    );
    if changed.is_empty() {
        let _ = write!(
            out,
            "<p>None: every pinned tool ({}) matches what its server last showed.</p>",
            pins.len()
        );
    }
    for p in changed {
        let Some(seen) = &p.seen else { continue };
        let fields = rpr::mcp::changed_fields(&p.binding, &seen.binding).join(", ");
        let _ = write!(
            out,
            "<article class=\"pin\" id=\"pin-{server}-{tool}\"><h3>Tool <code>{tool}</code> of server <code>{server}</code></h3>\
             <p>Pinned <code>{}</code> by {} at {}; seen <code>{}</code> at {} (changed: {}). Calls of it are refused until it is pinned again.</p>\
             <div class=\"side\"><div><h4>Pinned definition</h4><pre class=\"old\">{}</pre></div><div><h4>Seen definition</h4><pre class=\"new\">{}</pre></div></div>\
             <p class=\"meta\">To review and accept: <code>rpr pin --database {} --review --server {server}</code>.</p></article>",
            esc(&p.digest),
            esc(&p.pinned_by),
            utc(p.pinned_at),
            esc(&seen.digest),
            utc(seen.at),
            esc(&fields),
            html(&pretty(&p.definition)),
            html(&pretty(&seen.definition)),
            esc(ctx.shown_database),
            server = esc(&p.server),
            tool = esc(&p.tool),
        );
    }
    out.push_str("</section>");
}

fn actions_section(out: &mut String, done: &[Done]) {
    out.push_str("<section id=\"actions\"><h2>What this console did</h2>");
    if done.is_empty() {
        out.push_str("<p>Nothing yet.</p>");
    } else {
        out.push_str("<ol>");
        for d in done {
            let _ = write!(
                out,
                "<li class=\"action\" data-exit=\"{}\">{}: <code>{}</code>: exit {} ({})<pre>{}</pre></li>",
                d.exit.map_or(-1, |c| c),
                utc(d.at),
                esc(&d.shown),
                d.exit.map_or("none".into(), |c| c.to_string()),
                d.meaning(),
                esc(d.output.trim_end())
            );
        }
        out.push_str("</ol>");
    }
    out.push_str("</section>");
}

/// One pathway, whole: `rpr show` as a page.
pub(crate) fn detail(store: &ReadStore, id: &str) -> Result<String, Failure> {
    let d = inspect::pathway(store, id)?;
    let def = whole_definition(store, id)?;
    let (tool, server) = call_of(&def);
    let mut out = format!(
        "<p><a href=\"../\">Back to the console</a></p><h1>Pathway {}</h1><p>Call <code>{}</code> on server <code>{}</code>; state <code>{}</code> (version {}); proposed by <b>{}</b> at {}; last changed {}.</p><p>Next: <b>{}</b> by {}: {}.</p>",
        esc(&d.pathway_id),
        esc(&tool),
        esc(&server),
        d.state,
        d.version,
        esc(&d.proposer),
        utc(d.created_at),
        utc(d.updated_at),
        esc(d.next.action),
        d.next
            .actors
            .iter()
            .map(|a| esc(a))
            .collect::<Vec<_>>()
            .join(" or "),
        esc(d.next.detail)
    );
    let _ = write!(
        out,
        "<h2>Definition</h2><pre class=\"definition\">{}</pre><h2>Attempts ({})</h2>",
        html(&pretty(&def)),
        d.attempts.len()
    );
    for a in &d.attempts {
        let _ = write!(
            out,
            "<article><h3>{}. <code>{}</code>: {}</h3><p>Started {}, last changed {}; binding <code>{}</code>.</p><pre>{}</pre></article>",
            a.seq,
            esc(&a.id),
            esc(a.status.as_str()),
            utc(a.created_at),
            utc(a.updated_at),
            esc(&a.binding_digest),
            html(&pretty(&serde_json::to_value(a)?))
        );
    }
    out.push_str("<h2>Timeline</h2><table class=\"timeline\"><tr><th>seq</th><th>at</th><th>event</th><th>by</th><th>from → to</th><th>data</th></tr>");
    let mut after = 0;
    loop {
        let rows = store.events(id, after, 500)?;
        let Some(last) = rows.last() else { break };
        after = last.seq;
        for row in &rows {
            let e: Value = serde_json::from_str(&row.event)?;
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td><code>{}</code></td></tr>",
                row.seq,
                utc(e["at"].as_i64().unwrap_or(0)),
                esc(e["kind"].as_str().unwrap_or("?")),
                esc(e["actor"].as_str().unwrap_or("?")),
                esc(e["from"].as_str().unwrap_or("")),
                esc(e["to"].as_str().unwrap_or("?")),
                html(&pretty(&e["data"]))
            );
        }
    }
    out.push_str("</table>");
    Ok(out)
}
