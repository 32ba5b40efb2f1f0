//! Whose turn it is on a pathway in this gate: the call that holds a pathway's form open or
//! sends it works on it alone; an identical call arriving meanwhile waits for that turn to
//! end, then answers from the pathway as it then stands. Calls of other identities never
//! wait here, so a form left open for minutes holds up only its own identity.
//!
//! A form asked as a 2026-07-28 multi round-trip request is out with the client while no
//! call holds a turn (the call returned `input_required`). Until the client's retry answers
//! it or its `requestState` expires, an identical call without that state waits for it too,
//! so identical calls share one form in both eras.
//!
//! A pathway that a call of this gate has just proposed may not be stored yet: a call the
//! policy allows is stored with its attempt record, in one commit, at its send. Its turn is
//! claimed with the call's *identity* (the server and the request digest), so that an
//! identical call arriving before that commit finds the pathway here, though the store does
//! not hold it yet, and waits for it as for any turn (found by the `gate` fuzz target: an
//! identical call under another idempotency key was proposed and sent beside it).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pathways some call of this gate is working on.
#[derive(Default)]
pub(crate) struct Turns {
    working: Mutex<Working>,
    /// Pathways whose form is out with a 2026-07-28 client, until when.
    forms: Mutex<HashMap<String, Instant>>,
    form_closed: Condvar,
}

/// The turns held, by pathway; and the pathways proposed by this gate whose turn is held
/// with their call's identity, by identity.
#[derive(Default)]
struct Working {
    turns: HashMap<String, Arc<Turn>>,
    proposed: HashMap<String, String>,
}

/// One call's turn on one pathway.
#[derive(Default)]
pub(crate) struct Turn {
    over: Mutex<bool>,
    ended: Condvar,
}

impl Turn {
    /// Blocks until the turn's holder is done with the pathway.
    pub(crate) fn wait(&self) {
        let mut over = lock(&self.over);
        while !*over {
            over = self
                .ended
                .wait(over)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The caller's turn on a pathway, or the turn it must wait for.
pub(crate) enum Claim<'a> {
    Mine(Held<'a>),
    Taken(Arc<Turn>),
}

/// A turn held: ends (and wakes the waiting calls) when dropped, also by a panic.
pub(crate) struct Held<'a> {
    turns: &'a Turns,
    id: String,
    /// The identity the turn was claimed with ([`Turns::claim_proposed`]).
    identity: Option<String>,
    turn: Arc<Turn>,
}

impl Turns {
    /// Takes the turn on pathway `id`, unless another call of this gate holds it.
    pub(crate) fn claim(&self, id: &str) -> Claim<'_> {
        self.claim_with(id, None)
    }

    /// Takes the turn on pathway `id`, just proposed by the caller for a call of
    /// `identity`: until the turn ends, [`Turns::proposed`] names `id` for `identity`.
    pub(crate) fn claim_proposed(&self, id: &str, identity: &str) -> Claim<'_> {
        self.claim_with(id, Some(identity))
    }

    fn claim_with(&self, id: &str, identity: Option<&str>) -> Claim<'_> {
        let mut working = lock(&self.working);
        if let Some(turn) = working.turns.get(id) {
            return Claim::Taken(Arc::clone(turn));
        }
        let turn = Arc::new(Turn::default());
        working.turns.insert(id.to_owned(), Arc::clone(&turn));
        if let Some(identity) = identity {
            working.proposed.insert(identity.to_owned(), id.to_owned());
        }
        Claim::Mine(Held {
            turns: self,
            id: id.to_owned(),
            identity: identity.map(str::to_owned),
            turn,
        })
    }

    /// The pathway a call of this gate proposed for `identity` and still holds the turn
    /// on (stored or not yet), and that turn.
    pub(crate) fn proposed(&self, identity: &str) -> Option<(String, Arc<Turn>)> {
        let working = lock(&self.working);
        let id = working.proposed.get(identity)?;
        let turn = working.turns.get(id)?;
        Some((id.clone(), Arc::clone(turn)))
    }
}

impl Turns {
    /// Pathway `id`'s form went out as `input_required`, answerable until `until`.
    pub(crate) fn form_out(&self, id: &str, until: Instant) {
        lock(&self.forms).insert(id.to_owned(), until);
    }

    /// A retry brought the answer to pathway `id`'s form (whatever it was).
    pub(crate) fn form_answered(&self, id: &str) {
        lock(&self.forms).remove(id);
        self.form_closed.notify_all();
    }

    /// Blocks while pathway `id`'s form is out and has not expired.
    pub(crate) fn wait_for_form(&self, id: &str) {
        let mut forms = lock(&self.forms);
        loop {
            let Some(until) = forms.get(id).copied() else {
                return;
            };
            let now = Instant::now();
            if until <= now {
                forms.remove(id);
                return;
            }
            forms = self
                .form_closed
                .wait_timeout(forms, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        {
            let mut working = lock(&self.turns.working);
            working.turns.remove(&self.id);
            if let Some(identity) = &self.identity
                && working.proposed.get(identity) == Some(&self.id)
            {
                working.proposed.remove(identity);
            }
        }
        *lock(&self.turn.over) = true;
        self.turn.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_waits_for_the_first_and_other_ids_do_not() {
        let turns = Arc::new(Turns::default());
        let Claim::Mine(held) = turns.claim("pw_a") else {
            panic!("the first claim is the caller's")
        };
        assert!(matches!(turns.claim("pw_b"), Claim::Mine(_)), "another id");
        let Claim::Taken(turn) = turns.claim("pw_a") else {
            panic!("the same id is taken")
        };
        let waiter = std::thread::spawn(move || turn.wait());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the waiter waits for the turn");
        drop(held);
        waiter.join().unwrap();
        assert!(matches!(turns.claim("pw_a"), Claim::Mine(_)), "free again");
    }

    #[test]
    fn a_proposed_pathway_is_found_by_its_identity_until_its_turn_ends() {
        let turns = Turns::default();
        assert!(turns.proposed("fz\nd1").is_none(), "nothing proposed yet");
        let Claim::Mine(held) = turns.claim_proposed("pw_a", "fz\nd1") else {
            panic!("the first claim is the caller's")
        };
        let (id, turn) = turns.proposed("fz\nd1").expect("found by its identity");
        assert_eq!(id, "pw_a");
        assert!(turns.proposed("fz\nd2").is_none(), "another identity");
        assert!(
            matches!(turns.claim("pw_a"), Claim::Taken(_)),
            "the same turn as by its id"
        );
        drop(held);
        turn.wait();
        assert!(turns.proposed("fz\nd1").is_none(), "gone with the turn");
        assert!(matches!(turns.claim("pw_a"), Claim::Mine(_)), "free again");
    }

    #[test]
    fn a_form_out_holds_identical_calls_until_answered_or_expired() {
        let turns = Arc::new(Turns::default());
        turns.form_out("pw_a", Instant::now() + std::time::Duration::from_mins(1));
        let t = Arc::clone(&turns);
        let waiter = std::thread::spawn(move || t.wait_for_form("pw_a"));
        turns.wait_for_form("pw_b");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "waits while the form is out");
        turns.form_answered("pw_a");
        waiter.join().unwrap();
        turns.form_out(
            "pw_c",
            Instant::now() + std::time::Duration::from_millis(30),
        );
        turns.wait_for_form("pw_c");
        assert!(
            lock(&turns.forms).is_empty(),
            "an expired form is forgotten"
        );
    }
}
