//! Judging each cell from what the client saw, the pathway database and the server's own
//! evidence. A cell passes only when all three agree.

use rpr::State;
use rpr::store::ReadStore;

use super::clients::{Answer, Seen, Step};
use super::model::{Cell, Client, NO_SESSION, Verdict};
use super::servers::{Call, EVERYTHING_NO_UNKNOWN, Setup};

type Check = Result<(), String>;

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(why()) }
}

/// Every cell of one client and server.
pub(crate) fn judge(client: Client, setup: &Setup, seen: &Seen) -> Vec<(Cell, Verdict)> {
    let store = ReadStore::open_read_only(&setup.db()).map_err(|e| {
        format!(
            "the gate's database {} cannot be read: {e}",
            setup.db().display()
        )
    });
    Cell::ALL
        .iter()
        .map(|&cell| {
            if cell == Cell::Unknown && setup.unknown.is_none() {
                return (cell, Verdict::NotApplicable(EVERYTHING_NO_UNKNOWN));
            }
            let checked = store.as_ref().map_err(Clone::clone).and_then(|store| {
                let db = Db { store, setup };
                match cell {
                    Cell::Connect => connect(client, &db, seen),
                    Cell::List => list(client, setup, seen),
                    Cell::Read => read(&db, seen),
                    Cell::Approved => approved(client, &db, seen),
                    Cell::Declined => declined(client, &db, seen),
                    Cell::Unknown => unknown(client, &db, seen),
                }
            });
            (cell, checked.map_or_else(Verdict::Fail, |()| Verdict::Pass))
        })
        .collect()
}

/// The pathway database of one pair, and its server's evidence.
struct Db<'a> {
    store: &'a ReadStore,
    setup: &'a Setup,
}

impl Db<'_> {
    /// The pathway an answer names: its state and how many attempts it has.
    fn pathway(&self, answer: &Answer) -> Result<(String, State, usize), String> {
        let id = answer
            .pathway
            .clone()
            .ok_or_else(|| format!("the answer names no pathway: {}", answer.text))?;
        let record = self
            .store
            .pathway(&id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("pathway {id} is not in the database"))?;
        let attempts = self.store.attempts(&id).map_err(|e| e.to_string())?.len();
        Ok((id, record.state, attempts))
    }

    fn effects(&self, call: &Call) -> usize {
        self.setup.effects(call)
    }
}

fn answer<'a>(seen: &'a Seen, name: &str) -> Result<(&'a Step, &'a Answer), String> {
    let step = seen.step(name)?;
    let answer = step.answer.as_ref().map_err(|why| {
        if why.starts_with(NO_SESSION) {
            why.clone()
        } else {
            format!("{name}: {why}")
        }
    })?;
    Ok((step, answer))
}

/// The client connected at its era, and the gate bound the server at the server's era
/// (every pin the gate took for it records that protocol version).
fn connect(client: Client, db: &Db<'_>, seen: &Seen) -> Check {
    let connected = match &seen.connect {
        Some(Ok(c)) => c,
        Some(Err(why)) => return Err(why.clone()),
        None => return Err("the client never connected".into()),
    };
    if let Some(era) = client.era() {
        ensure(connected.protocol.as_deref() == Some(era), || {
            format!(
                "the client is at {:?}, not {era}",
                connected.protocol.as_deref()
            )
        })?;
    }
    let pins = db.store.pins().map_err(|e| e.to_string())?;
    let ours: Vec<_> = pins.iter().filter(|p| p.server == db.setup.name).collect();
    ensure(!ours.is_empty(), || "the gate took no pin".into())?;
    let want = db.setup.server.era();
    for pin in ours {
        let got = &pin.binding["protocol_version"];
        ensure(got == want, || {
            format!("the gate bound the server at {got}, not {want}")
        })?;
    }
    Ok(())
}

/// The tools the cells need are listed (in name order for a 2026-07-28 client).
fn list(client: Client, setup: &Setup, seen: &Seen) -> Check {
    let Some(Ok(connected)) = &seen.connect else {
        return Err(format!("{NO_SESSION} (see connect)"));
    };
    for tool in setup.tools() {
        ensure(connected.tools.iter().any(|t| t == tool), || {
            format!("`{tool}` is not in {:?}", connected.tools)
        })?;
    }
    if client.era() == Some("2026-07-28") {
        ensure(connected.tools.is_sorted(), || {
            format!("not in name order: {:?}", connected.tools)
        })?;
    }
    Ok(())
}

/// The read asks nothing, is answered with the server's content, and is completed after
/// one attempt.
fn read(db: &Db<'_>, seen: &Seen) -> Check {
    let (step, answer) = answer(seen, "read")?;
    ensure(step.forms.is_empty(), || {
        format!("a read asked for approval: {:?}", step.forms)
    })?;
    ensure(!answer.is_error, || format!("an error: {}", answer.text))?;
    ensure(answer.text.contains(db.setup.read_expect), || {
        format!("`{}` is not in {:?}", db.setup.read_expect, answer.text)
    })?;
    let (id, state, attempts) = db.pathway(answer)?;
    ensure(state == State::Completed && attempts == 1, || {
        format!("pathway {id} is {state:?} after {attempts} attempt(s)")
    })
}

/// How the client was asked: one form (or input request) naming the tool, or (no
/// elicitation) a tool error naming `rpr approve`, on the same pathway as `answer`.
fn asked(client: Client, seen: &Seen, step: &Step, held: &str, tool: &str) -> Check {
    if client.answers_forms() {
        return ensure(
            step.forms.len() == 1 && step.forms[0].contains(tool),
            || format!("{} form(s) shown: {:?}", step.forms.len(), step.forms),
        );
    }
    let (_, held) = answer(seen, held)?;
    ensure(held.is_error && held.text.contains("rpr approve"), || {
        format!("the held call does not name `rpr approve`: {}", held.text)
    })
}

/// Approved, sent once, read back, completed; the server holds the value.
fn approved(client: Client, db: &Db<'_>, seen: &Seen) -> Check {
    let call = &db.setup.approved;
    let (step, answer) = answer(seen, "approved")?;
    asked(client, seen, step, "approved-held", call.tool)?;
    if !client.answers_forms() {
        let (_, held) = self::answer(seen, "approved-held")?;
        ensure(held.pathway == answer.pathway, || {
            "the call made again is not the approved pathway".into()
        })?;
    }
    ensure(!answer.is_error, || format!("an error: {}", answer.text))?;
    let (id, state, attempts) = db.pathway(answer)?;
    ensure(state == State::Completed && attempts == 1, || {
        format!("pathway {id} is {state:?} after {attempts} attempt(s)")
    })?;
    let effects = db.effects(call);
    ensure(effects == 1, || {
        format!("the server did it {effects} time(s), not once")
    })?;
    db.setup.in_place(call)
}

/// Declined (or denied with `rpr deny`): denied, nothing sent, nothing done.
fn declined(client: Client, db: &Db<'_>, seen: &Seen) -> Check {
    let call = &db.setup.declined;
    let (step, answer) = answer(seen, "declined")?;
    asked(client, seen, step, "declined", call.tool)?;
    ensure(answer.is_error, || {
        format!("answered as if done: {}", answer.text)
    })?;
    let (id, state, attempts) = db.pathway(answer)?;
    ensure(state == State::Denied && attempts == 0, || {
        format!("pathway {id} is {state:?} after {attempts} attempt(s)")
    })?;
    let effects = db.effects(call);
    ensure(effects == 0, || {
        format!("the server did it {effects} time(s)")
    })
}

/// Sent once, its outcome unknown; the identical call again is answered from that
/// pathway, says so, and is not sent: the server did it once.
fn unknown(client: Client, db: &Db<'_>, seen: &Seen) -> Check {
    let Some(call) = &db.setup.unknown else {
        return Err("no unknown call".into());
    };
    let (step, first) = answer(seen, "unknown")?;
    asked(client, seen, step, "unknown-held", call.tool)?;
    let (again, repeat) = answer(seen, "unknown-repeat")?;
    ensure(again.forms.is_empty(), || {
        format!("the repeat asked again: {:?}", again.forms)
    })?;
    for (what, a) in [("the call", first), ("its repeat", repeat)] {
        ensure(
            a.is_error && a.text.contains("write status unknown"),
            || format!("{what} does not say write status unknown: {}", a.text),
        )?;
    }
    ensure(repeat.text.contains("not be sent again"), || {
        format!(
            "the repeat does not say it is not sent again: {}",
            repeat.text
        )
    })?;
    let (id, state, attempts) = db.pathway(first)?;
    ensure(repeat.pathway.as_deref() == Some(id.as_str()), || {
        format!("the repeat names {:?}, not {id}", repeat.pathway)
    })?;
    ensure(state == State::WriteStatusUnknown && attempts == 1, || {
        format!("pathway {id} is {state:?} after {attempts} attempt(s)")
    })?;
    let effects = db.effects(call);
    ensure(effects == 1, || {
        format!("the server did it {effects} time(s), not once")
    })
}
