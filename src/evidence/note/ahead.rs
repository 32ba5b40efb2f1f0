//! A log key's Ed25519 signatures with the nonce point made ahead of time, off the commit
//! that waits for the signature.
//!
//! An Ed25519 signature of a message `M` by the secret scalar `s` (public key `A = sB`) is
//! `(R, S)` with `R = rB` and `S = r + SHA-512(R || A || M) * s mod l`. Any verifier checks
//! it the same way whatever `r` was, so long as `r` is secret and never used twice. RFC 8032
//! derives `r` from the key's secret prefix and `M` (deterministic signing), so `R`, the
//! scalar multiplication that is most of a signature's cost, can only be computed once `M`
//! is known: inside the commit. Here a thread of the signer computes `r` and `R` before
//! the message exists, and the commit's signature costs one hash and a multiply-add.
//!
//! **The nonce.** `r = SHA-512("rpr nonce made ahead" || 0 || prefix || Z) mod l`, where
//! `prefix` is the key's secret hash prefix (as in RFC 8032) and `Z` is 32 fresh bytes
//! from the operating system (`getrandom(2)`): secret while the key is (even were `Z`
//! known), and never the same twice while the random source works (it would take two equal
//! `Z`). Nothing deterministic is given up that a verifier could check: signatures of the
//! same checkpoint by the same key now differ, and each verifies.
//!
//! **Never used twice.** A nonce is taken out of the signer (moved, not copied) by the one
//! signature that uses it, and zeroized when dropped. A process forked from this one (a
//! host that forks and goes on without `exec`) has a copy of the nonces made here: each
//! carries the process ID it was made in and is used only there; the child finds them
//! foreign, drops them all and signs deterministically (its copy has no maker thread).
//! The signer never waits on the maker: when no nonce is ready (the maker is behind, its
//! lock is held, the random source failed), the signature is RFC 8032's deterministic one.
//! Deterministic and random nonces never meet: they hash different inputs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use curve25519_dalek::edwards::CompressedEdwardsY;
use curve25519_dalek::{EdwardsPoint, Scalar};
use ed25519_dalek::hazmat::ExpandedSecretKey;
use sha2::{Digest, Sha512};
use zeroize::Zeroize;

use super::{KeyType, SignerKey};

/// How many nonces the maker keeps ready: one per commit, and one spare for the next.
const AHEAD: usize = 2;

/// How long the maker waits for a nonce to be taken before it looks whether its signer is
/// gone (a signer dropped in a forked child cannot wake it).
const IDLE: Duration = Duration::from_millis(250);

/// The domain of the nonce hash: no RFC 8032 nonce hashes these bytes first.
const NONCE_DOMAIN: &[u8] = b"rpr nonce made ahead\0";

/// One nonce `r` and its point `R = rB`, usable once, in the process that made it.
struct Nonce {
    r: Scalar,
    point: CompressedEdwardsY,
    pid: u32,
}

impl Drop for Nonce {
    fn drop(&mut self) {
        self.r.zeroize();
    }
}

struct Shared {
    secret: ExpandedSecretKey,
    ready: Mutex<Vec<Nonce>>,
    taken: Condvar,
    stop: AtomicBool,
}

/// A log's signer key (Ed25519, type `0x01`) whose signatures use nonces made ahead (see
/// the module's text). Its signatures are Ed25519 signatures of the key like any other.
pub(crate) struct AheadSigner {
    key: SignerKey,
    shared: Arc<Shared>,
    maker: OnceLock<bool>,
}

impl std::fmt::Debug for AheadSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AheadSigner").field(&self.key).finish()
    }
}

impl Drop for AheadSigner {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.taken.notify_all();
    }
}

impl AheadSigner {
    /// A signer for `key`; `None` for a `cosignature/v1` key (a witness's, whose signatures
    /// sign another message; it is not a log's key).
    pub(crate) fn new(key: SignerKey) -> Option<Self> {
        if key.kind != KeyType::Ed25519 {
            return None;
        }
        let secret = ExpandedSecretKey::from(key.key.as_bytes());
        Some(Self {
            key,
            shared: Arc::new(Shared {
                secret,
                ready: Mutex::new(Vec::new()),
                taken: Condvar::new(),
                stop: AtomicBool::new(false),
            }),
            maker: OnceLock::new(),
        })
    }

    /// The key it signs with.
    pub(crate) fn key(&self) -> &SignerKey {
        &self.key
    }

    /// The Ed25519 signature of `message`: with a nonce made ahead when one is ready,
    /// otherwise RFC 8032's deterministic one. Either verifies with the key's public key.
    pub(crate) fn sign_bytes(&self, message: &[u8]) -> [u8; 64] {
        self.start_maker();
        match self.take() {
            Some(nonce) => sign_with(&self.shared.secret, &self.key, &nonce, message),
            None => self.key.sign_bytes(message),
        }
    }

    /// Takes a ready nonce made in this process, without waiting.
    fn take(&self) -> Option<Nonce> {
        // Never waits: in a child forked while the maker held the lock, it stays held.
        let mut ready = self.shared.ready.try_lock().ok()?;
        let nonce = ready.pop()?;
        if nonce.pid != std::process::id() {
            // Made in the process this one was forked from, which may use its own copy.
            ready.clear();
            return None;
        }
        drop(ready);
        self.shared.taken.notify_one();
        Some(nonce)
    }

    /// Starts the maker thread on the first signature (a runtime that never signs starts
    /// none). If the thread cannot start, signatures are deterministic.
    fn start_maker(&self) {
        self.maker.get_or_init(|| {
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("rpr-nonces".into())
                .spawn(move || make_ahead(&shared))
                .is_ok()
        });
    }

    /// How many nonces are ready now (tests).
    #[cfg(test)]
    fn ready(&self) -> usize {
        self.shared.ready.lock().map_or(0, |r| r.len())
    }

    /// Puts a nonce made elsewhere in the queue (tests: a fork's copy).
    #[cfg(test)]
    fn plant_foreign(&self) {
        let mut nonce = make(&self.shared).expect("a nonce");
        nonce.pid = nonce.pid.wrapping_add(1);
        self.shared.ready.lock().expect("lock").push(nonce);
    }
}

/// Puts the calling thread in Linux's `SCHED_IDLE` class: it runs only on a processor that
/// has nothing else to run, so it never takes time from the commit it works ahead of (woken
/// by a signature, a thread of the normal class preempts the signer on a busy machine).
/// If the call fails, the thread keeps the normal class.
fn idle_class() {
    let param = nix::libc::sched_param { sched_priority: 0 };
    #[expect(
        unsafe_code,
        reason = "sched_setscheduler(2) on the calling thread, with a parameter on the stack"
    )]
    // SAFETY: `param` is a valid `sched_param` that outlives the call; pid 0 is the calling
    // thread; the call touches no memory of ours besides reading `param`.
    let _ = unsafe { nix::libc::sched_setscheduler(0, nix::libc::SCHED_IDLE, &raw const param) };
}

/// The maker thread: keeps [`AHEAD`] nonces ready until its signer is dropped.
fn make_ahead(shared: &Shared) {
    idle_class();
    loop {
        {
            let mut ready = shared
                .ready
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            while ready.len() >= AHEAD {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                ready = shared
                    .taken
                    .wait_timeout(ready, IDLE)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        // A random source that fails stops the maker: signatures go on, deterministic.
        let Some(nonce) = make(shared) else { return };
        shared
            .ready
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(nonce);
    }
}

/// A new nonce and its point.
fn make(shared: &Shared) -> Option<Nonce> {
    let mut z = [0u8; 32];
    getrandom::fill(&mut z).ok()?;
    let mut h = Sha512::new();
    h.update(NONCE_DOMAIN);
    h.update(shared.secret.hash_prefix);
    h.update(z);
    let mut wide: [u8; 64] = h.finalize().into();
    let r = Scalar::from_bytes_mod_order_wide(&wide);
    wide.zeroize();
    z.zeroize();
    let point = EdwardsPoint::mul_base(&r).compress();
    Some(Nonce {
        r,
        point,
        pid: std::process::id(),
    })
}

/// `R || S` with `S = r + SHA-512(R || A || M) * s`: the signature, `nonce` consumed.
fn sign_with(
    secret: &ExpandedSecretKey,
    key: &SignerKey,
    nonce: &Nonce,
    message: &[u8],
) -> [u8; 64] {
    let mut h = Sha512::new();
    h.update(nonce.point.as_bytes());
    h.update(key.key.verifying_key().as_bytes());
    h.update(message);
    let k = Scalar::from_bytes_mod_order_wide(&h.finalize().into());
    let s = k * secret.scalar + nonce.r;
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(nonce.point.as_bytes());
    sig[32..].copy_from_slice(s.as_bytes());
    sig
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use ed25519_dalek::{Signature, VerifyingKey};

    use super::*;

    fn signer() -> AheadSigner {
        AheadSigner::new(SignerKey::from_seed("log.example", &[7u8; 32]).unwrap()).unwrap()
    }

    fn public(s: &AheadSigner) -> VerifyingKey {
        s.key.key.verifying_key()
    }

    fn wait_ready(s: &AheadSigner, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while s.ready() < n {
            assert!(std::time::Instant::now() < deadline, "the maker made none");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_signature_with_a_nonce_made_ahead_is_ed25519_and_no_nonce_is_used_twice() {
        let s = signer();
        let key = public(&s);
        s.start_maker();
        let mut points = HashSet::new();
        let mut ahead = 0;
        for i in 0..100u32 {
            wait_ready(&s, 1);
            let message = format!("rpr/db\n{i}\nroot\n");
            let sig = s.sign_bytes(message.as_bytes());
            let deterministic = s.key.sign_bytes(message.as_bytes());
            if sig != deterministic {
                ahead += 1;
            }
            key.verify_strict(message.as_bytes(), &Signature::from_bytes(&sig))
                .expect("verifies as Ed25519 (strict)");
            assert!(points.insert(sig[..32].to_vec()), "R (the nonce) repeated");
            // Another message under the same signature fails: the signature binds it.
            assert!(
                key.verify_strict(b"another", &Signature::from_bytes(&sig))
                    .is_err()
            );
        }
        // The signer never waits for the maker's lock, so a few may be deterministic.
        assert!(ahead >= 50, "only {ahead} of 100 used a nonce made ahead");
    }

    #[test]
    fn without_a_nonce_ready_the_signature_is_the_deterministic_one() {
        let s = signer();
        // Marked started without a maker thread: no nonce is ever made, and none is ready.
        assert!(s.maker.set(false).is_ok());
        assert_eq!(s.ready(), 0);
        let message = b"rpr/db\n1\nroot\n";
        assert_eq!(s.sign_bytes(message), s.key.sign_bytes(message));
    }

    #[test]
    fn a_nonce_made_in_another_process_is_dropped_not_used() {
        let s = signer();
        s.plant_foreign();
        assert_eq!(s.ready(), 1);
        assert!(s.take().is_none(), "a forked copy's nonce is not used");
        assert_eq!(s.ready(), 0, "and is dropped");
    }

    #[test]
    fn a_cosignature_key_gets_no_ahead_signer() {
        let key = SignerKey::from_seed_of("w.example", KeyType::CosignatureV1, &[3u8; 32]).unwrap();
        assert!(AheadSigner::new(key).is_none());
    }

    #[test]
    fn the_maker_stops_when_its_signer_is_dropped() {
        let s = signer();
        s.start_maker();
        wait_ready(&s, AHEAD);
        let weak = Arc::downgrade(&s.shared);
        drop(s);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while weak.upgrade().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the maker thread still holds the signer"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
