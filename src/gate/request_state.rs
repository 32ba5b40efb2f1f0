//! The `requestState` of a Human Gate asked as a 2026-07-28 multi round-trip request.
//!
//! The gate answers a gated call with `input_required` (the approval form) and a
//! `requestState`; the client sends the same call again with the person's answer and that
//! state, byte for byte. The state names the pathway, the pathway's version when the form
//! was issued, the digest of the binding the form showed (an approval is recorded as of
//! that binding, whatever the server binds as when the answer comes back), the digest of
//! the request it was given for, and when it expires, under an
//! HMAC-SHA256 tag keyed by a secret this gate process drew from the operating system: a
//! client can neither forge one, nor change the pathway, version or request it names, nor
//! use one after it expires or after the gate restarts. An answer is used once: the gate
//! keeps each state whose answer it took ([`Spent`]) until that state expires, and a retry
//! with a state already used records nothing and asks again. The pathway's version alone
//! would not do: a grant that leaves a quorum short does not move the pathway, so the same
//! state and answer, sent again once that grant had expired, would record a new one from
//! an answer the policy had stopped counting. And an answer is recorded only on a pathway
//! still at the gate *at the version the form was issued for*: a pathway that left the gate
//! and came back (held and escalated, its approval expired and asked again) has moved on
//! from that version, so an old answer approves nothing there either.
//!
//! A round of a server's own `input_required` to a governed call, carried to a 2026-07-28
//! client (gate/rounds.rs), gets a state of the same make that names the round (a random
//! nonce) instead of the pathway; there the gate's table of open rounds makes it
//! single-use: a round is continued once, by the first retry that names it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The format of the states this module writes for a Human Gate.
const VERSION: &str = "rpr3";
/// The format of the states it writes for a round of a server's own `input_required` to a
/// governed call ([`StateKey::issue_round`]).
const ROUND: &str = "rpr1r";

/// What a state names, once its tag checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claims {
    pub(crate) pathway: String,
    /// The pathway's version when the form was issued: the answer is for that gating.
    pub(crate) version: i64,
    /// The digest of the binding the form showed (the tool as pinned then).
    pub(crate) binding_digest: String,
    pub(crate) request_digest: String,
}

/// Why a state was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum StateError {
    #[error("the requestState is not one rpr gate wrote")]
    Malformed,
    #[error(
        "the requestState was not issued by this gate process (it was altered, forged, or issued before the gate restarted)"
    )]
    BadTag,
    #[error("the requestState expired")]
    Expired,
    #[error("the requestState was issued for another request (other tool or arguments)")]
    OtherRequest,
}

/// The Human Gate states whose answer this gate took, each kept until every state this
/// process issued at that moment has expired.
#[derive(Debug, Default)]
pub(crate) struct Spent(Mutex<HashMap<String, Instant>>);

impl Spent {
    /// Whether this is the first use of `state`: `true` once, then `false` for as long as
    /// a state issued now with `lifetime` could still check. Forgets the states past that.
    pub(crate) fn first_use(&self, state: &str, lifetime: Duration) -> bool {
        let now = Instant::now();
        let mut spent = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        spent.retain(|_, until| *until > now);
        if spent.contains_key(state) {
            return false;
        }
        spent.insert(state.to_owned(), now + lifetime);
        true
    }
}

/// Issues and checks states under this process's key.
pub(crate) struct StateKey {
    key: [u8; 32],
}

impl StateKey {
    /// A new key from the operating system's random source.
    pub(crate) fn generate() -> Result<Self, String> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("no random key for requestState: {e}"))?;
        Ok(Self { key })
    }

    fn tag(&self, body: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(body.as_bytes());
        mac
    }

    /// A state for `pathway`'s request, valid for `ttl`.
    pub(crate) fn issue(&self, claims: &Claims, ttl: Duration) -> String {
        let expires = now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        let body = format!(
            "{VERSION}.{}.{}.{}.{}.{expires}",
            claims.pathway, claims.version, claims.binding_digest, claims.request_digest
        );
        let tag = hex(&self.tag(&body).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// A state for round `round` (a nonce naming one open round) of a server's
    /// `input_required` to the request whose digest is `request_digest`, valid for `ttl`.
    pub(crate) fn issue_round(&self, round: &str, request_digest: &str, ttl: Duration) -> String {
        let expires = now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        let body = format!("{ROUND}.{round}.{request_digest}.{expires}");
        let tag = hex(&self.tag(&body).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// Whether `state` has the form of a round's state ([`StateKey::issue_round`]); its tag
    /// is not checked.
    pub(crate) fn is_round(state: &str) -> bool {
        state.starts_with(ROUND) && state.as_bytes().get(ROUND.len()) == Some(&b'.')
    }

    /// The round a round's `state` names, if its tag checks, it has not expired and it was
    /// issued for the request whose digest is `request_digest`.
    pub(crate) fn check_round(
        &self,
        state: &str,
        request_digest: &str,
    ) -> Result<String, StateError> {
        let (mut named, _) = self.verify(ROUND, 1, state, request_digest)?;
        Ok(named.remove(0))
    }

    /// The claims of `state`, if its tag checks, it has not expired and it was issued for
    /// the request whose digest is `request_digest`.
    pub(crate) fn check(&self, state: &str, request_digest: &str) -> Result<Claims, StateError> {
        let (named, digest) = self.verify(VERSION, 3, state, request_digest)?;
        let [pathway, version, binding_digest] =
            <[String; 3]>::try_from(named).map_err(|_| StateError::Malformed)?;
        Ok(Claims {
            pathway,
            version: version.parse().map_err(|_| StateError::Malformed)?,
            binding_digest,
            request_digest: digest,
        })
    }

    /// The `named` parts and the digest of a state of format `version`, checked.
    fn verify(
        &self,
        version: &str,
        named: usize,
        state: &str,
        request_digest: &str,
    ) -> Result<(Vec<String>, String), StateError> {
        let (body, tag) = state.rsplit_once('.').ok_or(StateError::Malformed)?;
        let tag = unhex(tag).ok_or(StateError::Malformed)?;
        self.tag(body)
            .verify_slice(&tag)
            .map_err(|_| StateError::BadTag)?;
        let parts: Vec<&str> = body.split('.').collect();
        let [written, middle @ .., digest, expires] = parts.as_slice() else {
            return Err(StateError::Malformed);
        };
        if *written != version || middle.len() != named {
            return Err(StateError::Malformed);
        }
        let expires: u64 = expires.parse().map_err(|_| StateError::Malformed)?;
        if now_ms() > expires {
            return Err(StateError::Expired);
        }
        if *digest != request_digest {
            return Err(StateError::OtherRequest);
        }
        Ok((
            middle.iter().map(|&s| s.to_owned()).collect(),
            (*digest).to_owned(),
        ))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            pathway: "pw_0123abcd".into(),
            version: 3,
            binding_digest: "b1".into(),
            request_digest: "d1".into(),
        }
    }

    #[test]
    fn a_state_checks_under_its_key_for_its_request() {
        let key = StateKey::generate().unwrap();
        let state = key.issue(&claims(), Duration::from_mins(1));
        assert_eq!(key.check(&state, "d1"), Ok(claims()));
        assert_eq!(key.check(&state, "d2"), Err(StateError::OtherRequest));
    }

    #[test]
    fn another_key_or_any_changed_byte_is_refused() {
        let key = StateKey::generate().unwrap();
        let state = key.issue(&claims(), Duration::from_mins(1));
        let other = StateKey::generate().unwrap();
        assert_eq!(other.check(&state, "d1"), Err(StateError::BadTag));
        let moved = state.replace("pw_0123abcd", "pw_0123abce");
        assert_eq!(key.check(&moved, "d1"), Err(StateError::BadTag));
        let mut bytes = state.clone().into_bytes();
        for i in 0..bytes.len() {
            let was = bytes[i];
            bytes[i] = if was == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(bytes.clone()).unwrap();
            assert!(
                key.check(&changed, "d1").is_err(),
                "byte {i} changed: {changed}"
            );
            bytes[i] = was;
        }
        for cut in [
            "",
            ".",
            "rpr3",
            "x.y",
            "rpr3.a.b.c.zz",
            "rpr3.a.b.c.d.zz",
            "rpr2.a.b.c.zz",
        ] {
            assert!(key.check(cut, "d1").is_err(), "{cut}");
        }
    }

    #[test]
    fn a_rounds_state_and_a_human_gates_are_not_taken_for_each_other() {
        let key = StateKey::generate().unwrap();
        let round = key.issue_round("n1", "d1", Duration::from_mins(1));
        assert!(StateKey::is_round(&round));
        assert_eq!(key.check_round(&round, "d1"), Ok("n1".to_owned()));
        assert_eq!(key.check_round(&round, "d2"), Err(StateError::OtherRequest));
        assert_eq!(key.check(&round, "d1"), Err(StateError::Malformed));
        let gate = key.issue(&claims(), Duration::from_mins(1));
        assert!(!StateKey::is_round(&gate));
        assert_eq!(key.check_round(&gate, "d1"), Err(StateError::Malformed));
        let other = StateKey::generate().unwrap();
        assert_eq!(other.check_round(&round, "d1"), Err(StateError::BadTag));
        let expired = key.issue_round("n1", "d1", Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(key.check_round(&expired, "d1"), Err(StateError::Expired));
    }

    #[test]
    fn a_state_is_used_once_while_it_could_check() {
        let spent = Spent::default();
        assert!(spent.first_use("s1", Duration::from_secs(30)));
        assert!(!spent.first_use("s1", Duration::from_secs(30)));
        assert!(spent.first_use("s2", Duration::from_secs(30)));
        // Kept no longer than a state issued with that lifetime could check.
        assert!(spent.first_use("s3", Duration::ZERO));
        assert!(spent.first_use("s3", Duration::ZERO));
    }

    #[test]
    fn an_expired_state_is_refused() {
        let key = StateKey::generate().unwrap();
        let state = key.issue(&claims(), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(key.check(&state, "d1"), Err(StateError::Expired));
    }
}
