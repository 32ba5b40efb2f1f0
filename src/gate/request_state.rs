//! The `requestState` of a Human Gate asked as a 2026-07-28 multi round-trip request.
//!
//! The gate answers a gated call with `input_required` (the approval form) and a
//! `requestState`; the client sends the same call again with the person's answer and that
//! state, byte for byte. The state names the pathway, the digest of the request it was
//! given for, and when it expires, under an HMAC-SHA256 tag keyed by a secret this gate
//! process drew from the operating system: a client can neither forge one, nor change the
//! pathway or request it names, nor use one after it expires or after the gate restarts.
//! A state does not make the answer single-use; the pathway does: an approval is recorded
//! only on a pathway still at the gate, and a pathway is sent at most once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The format of the states this module writes.
const VERSION: &str = "rpr1";

/// What a state names, once its tag checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claims {
    pub(crate) pathway: String,
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
            "{VERSION}.{}.{}.{expires}",
            claims.pathway, claims.request_digest
        );
        let tag = hex(&self.tag(&body).finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The claims of `state`, if its tag checks, it has not expired and it was issued for
    /// the request whose digest is `request_digest`.
    pub(crate) fn check(&self, state: &str, request_digest: &str) -> Result<Claims, StateError> {
        let (body, tag) = state.rsplit_once('.').ok_or(StateError::Malformed)?;
        let tag = unhex(tag).ok_or(StateError::Malformed)?;
        self.tag(body)
            .verify_slice(&tag)
            .map_err(|_| StateError::BadTag)?;
        let mut parts = body.split('.');
        let (Some(VERSION), Some(pathway), Some(digest), Some(expires), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(StateError::Malformed);
        };
        let expires: u64 = expires.parse().map_err(|_| StateError::Malformed)?;
        if now_ms() > expires {
            return Err(StateError::Expired);
        }
        if digest != request_digest {
            return Err(StateError::OtherRequest);
        }
        Ok(Claims {
            pathway: pathway.to_owned(),
            request_digest: digest.to_owned(),
        })
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
        for cut in ["", ".", "rpr1", "x.y", "rpr1.a.b.c.zz"] {
            assert!(key.check(cut, "d1").is_err(), "{cut}");
        }
    }

    #[test]
    fn an_expired_state_is_refused() {
        let key = StateKey::generate().unwrap();
        let state = key.issue(&claims(), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(key.check(&state, "d1"), Err(StateError::Expired));
    }
}
