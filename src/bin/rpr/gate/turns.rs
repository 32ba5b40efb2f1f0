//! Whose turn it is on a pathway in this gate: the call that holds a pathway's form open or
//! sends it works on it alone; an identical call arriving meanwhile waits for that turn to
//! end, then answers from the pathway as it then stands. Calls of other identities never
//! wait here, so a form left open for minutes holds up only its own identity.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pathways some call of this gate is working on.
#[derive(Default)]
pub(crate) struct Turns {
    working: Mutex<HashMap<String, Arc<Turn>>>,
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
    turn: Arc<Turn>,
}

impl Turns {
    /// Takes the turn on pathway `id`, unless another call of this gate holds it.
    pub(crate) fn claim(&self, id: &str) -> Claim<'_> {
        let mut working = lock(&self.working);
        if let Some(turn) = working.get(id) {
            return Claim::Taken(Arc::clone(turn));
        }
        let turn = Arc::new(Turn::default());
        working.insert(id.to_owned(), Arc::clone(&turn));
        Claim::Mine(Held {
            turns: self,
            id: id.to_owned(),
            turn,
        })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        lock(&self.turns.working).remove(&self.id);
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
}
