//! C2SP signed notes (<https://c2sp.org/signed-note>) with Ed25519 signatures, and their keys
//! in the text form of Go's `golang.org/x/mod/sumdb/note`.
//!
//! A note is a text ending in a newline, a blank line, and one or more signature lines
//! `— NAME BASE64(KEY_ID || SIGNATURE)`. A key is named; its 32-bit key ID is the first four
//! bytes (big-endian) of `SHA-256(name || 0x0A || TYPE || public key)`, where `TYPE` is the
//! key's signature type ([`KeyType`]). Two types are read and made:
//!
//! * **Ed25519** (`0x01`, c2sp.org/signed-note): the signature is Ed25519 over the note's
//!   text. A log signs its checkpoints with such a key.
//! * **`cosignature/v1`** (`0x04`, c2sp.org/tlog-cosignature): a witness's timestamped
//!   cosignature. The signature is the time (seconds since the Epoch, 8 bytes big-endian)
//!   followed by Ed25519 over `cosignature/v1\ntime SECONDS\n` and the note's text, so it
//!   says when the witness saw the checkpoint, and it cannot be taken for the log's own
//!   signature (another message, another key ID).
//!
//! Keys are written as one line each:
//!
//! * a **verifier key** (public): `NAME+KEYID+BASE64(TYPE || public key)`, KEYID in eight
//!   lower-case hex digits: what a person or a witness is given to check notes with;
//! * a **signer key** (secret): `PRIVATE+KEY+NAME+KEYID+BASE64(TYPE || seed)`, the 32-byte
//!   Ed25519 seed: what `rpr keygen` writes to the key file, mode 0600 (`--cosigner` for a
//!   `cosignature/v1` key).
//!
//! Parsing is strict and bounded ([`MAX_NOTE_BYTES`], [`MAX_SIGNATURES`], [`MAX_KEY_BYTES`]);
//! every failure is a [`NoteError`] or a [`KeyError`] that says which rule was broken, and no
//! input panics. Verification follows the specification: signatures by unknown keys are
//! ignored, a known key's signature that does not verify refuses the whole note, and a note
//! with no verified signature by a known key is refused. A log's checkpoint cosigned by a
//! witness is a note with two signatures; [`Note::verify_all`] requires each given key's.
//! Go's note package verifies the `0x01` signatures; it has no `cosignature/v1` verifier of
//! its own, and ignores such a line as an unknown key's, as the specification asks.

use std::fmt;

use ed25519_dalek::{Signature as EdSignature, Signer as _, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::base64;

/// The largest note [`Note::parse`] reads, in bytes (sixteen post-quantum signatures fit).
pub const MAX_NOTE_BYTES: usize = 128 * 1024;

/// The most signature lines a note may have (the specification asks for at least 16).
pub const MAX_SIGNATURES: usize = 100;

/// The longest key string (either kind) [`VerifierKey::parse`] and [`SignerKey::parse`] read.
pub const MAX_KEY_BYTES: usize = 1024;

/// The signature type identifier of Ed25519 (c2sp.org/signed-note).
pub const ED25519_TYPE: u8 = 0x01;

/// The signature type identifier of an Ed25519 `cosignature/v1` (c2sp.org/tlog-cosignature).
pub const COSIGNATURE_V1_TYPE: u8 = 0x04;

/// The first line of the message a `cosignature/v1` signs (its domain separation).
const COSIGNATURE_V1_HEADER: &str = "cosignature/v1\n";

/// What a key signs, by its signature type: a note's text, or a witness's timestamped
/// cosignature of it. Both are Ed25519 keys; the type is part of the key ID, so one key
/// pair under one name has a different ID as each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// `0x01`: Ed25519 over the note's text (a log's checkpoint signature).
    Ed25519,
    /// `0x04`: a witness's `cosignature/v1`, the time followed by Ed25519 over
    /// `cosignature/v1\ntime SECONDS\n` and the note's text.
    CosignatureV1,
}

impl KeyType {
    /// The signature type byte.
    #[must_use]
    pub const fn byte(self) -> u8 {
        match self {
            Self::Ed25519 => ED25519_TYPE,
            Self::CosignatureV1 => COSIGNATURE_V1_TYPE,
        }
    }

    /// The type of a signature type byte, if it is one of the two read here.
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            ED25519_TYPE => Some(Self::Ed25519),
            COSIGNATURE_V1_TYPE => Some(Self::CosignatureV1),
            _ => None,
        }
    }
}

/// The message a `cosignature/v1` made at `time` signs for the note text `text`.
fn cosigned_message(time: u64, text: &str) -> Vec<u8> {
    let mut m = format!("{COSIGNATURE_V1_HEADER}time {time}\n").into_bytes();
    m.extend_from_slice(text.as_bytes());
    m
}

/// Why a note was refused (parse, sign or verify).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// The note is longer than [`MAX_NOTE_BYTES`].
    #[error("the note has {len} bytes; at most {max} are read")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The note is not UTF-8.
    #[error("the note is not valid UTF-8 (at byte {offset})")]
    NotUtf8 {
        /// Where the first invalid byte is.
        offset: usize,
    },
    /// An ASCII control character other than newline.
    #[error(
        "the note has a control character (U+{code:04X}) at byte {offset}; only newline is allowed"
    )]
    ControlCharacter {
        /// Where it is.
        offset: usize,
        /// Which one.
        code: u32,
    },
    /// No blank line separates the text from the signatures.
    #[error("the note has no blank line before its signatures")]
    NoSignatures,
    /// The signature block is empty or its last line has no newline.
    #[error("the note's signature lines must each end in a newline")]
    UnterminatedSignatures,
    /// A signature line does not start with an em dash and a space.
    #[error("signature line {line} does not start with \"— \" (em dash, space)")]
    SignatureLinePrefix {
        /// Its number among the signature lines, from 1.
        line: usize,
    },
    /// A signature line has no space between the key name and the signature.
    #[error("signature line {line} is not \"— NAME SIGNATURE\"")]
    SignatureLineForm {
        /// Its number among the signature lines, from 1.
        line: usize,
    },
    /// A key name that is empty or has a space or a plus.
    #[error("signature line {line} has an invalid key name (empty, or a space or '+' in it)")]
    SignatureKeyName {
        /// Its number among the signature lines, from 1.
        line: usize,
    },
    /// A signature that is not canonical standard base64.
    #[error("signature line {line}'s signature is not standard base64")]
    SignatureBase64 {
        /// Its number among the signature lines, from 1.
        line: usize,
    },
    /// A signature shorter than a key ID and one byte.
    #[error(
        "signature line {line}'s signature has {len} bytes; a key ID and a signature need at least 5"
    )]
    SignatureTooShort {
        /// Its number among the signature lines, from 1.
        line: usize,
        /// The decoded length.
        len: usize,
    },
    /// More than [`MAX_SIGNATURES`] signature lines.
    #[error("the note has more than {max} signatures")]
    TooManySignatures {
        /// The limit.
        max: usize,
    },
    /// A `cosignature/v1` time over 2^63 - 1 (the specification's limit).
    #[error("a cosignature/v1 time is at most 2^63 - 1 seconds; {0} is not")]
    CosignatureTime(u64),
    /// A text to sign that is empty, does not end in a newline, or is not a valid note text.
    #[error("a note's text must end in a newline and hold no control character but newline")]
    MalformedText,
    /// A known key's signature does not verify: the note is refused whole.
    #[error("the signature by {name}+{key_id:08x} does not verify: the note was altered or forged")]
    InvalidSignature {
        /// The key's name.
        name: String,
        /// The key's ID.
        key_id: u32,
    },
    /// No signature by a known key.
    #[error("the note has no signature by a known key ({known}); its text must not be trusted")]
    NoKnownSignature {
        /// The names of the keys that were known, comma-separated.
        known: String,
    },
    /// A key whose signature was required is not among the note's signatures.
    #[error("the note is not signed by {name}+{key_id:08x}")]
    MissingSignature {
        /// The key's name.
        name: String,
        /// The key's ID.
        key_id: u32,
    },
    /// Two known keys with the same name and ID: which one signed cannot be told.
    #[error("two known keys are both {name}+{key_id:08x}")]
    AmbiguousKey {
        /// Their name.
        name: String,
        /// Their ID.
        key_id: u32,
    },
}

/// Why a key string or key generation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key string is longer than [`MAX_KEY_BYTES`].
    #[error("the key has {len} bytes; a key is at most {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A signer key without the `PRIVATE+KEY+` prefix.
    #[error("a signer key starts with PRIVATE+KEY+ (is this a verifier key?)")]
    NotSignerKey,
    /// A verifier key that starts with `PRIVATE+KEY+`: a secret given where a public key goes.
    #[error("this is a signer (private) key, not a verifier key; give the .pub file")]
    SecretGivenAsVerifier,
    /// Not `NAME+KEYID+KEY` (the key part, base64, may itself hold a `+`).
    #[error("a key is NAME+KEYID+KEY (three parts separated by '+'); this one has {parts}")]
    Form {
        /// How many parts it has.
        parts: usize,
    },
    /// A name that is empty, has a Unicode space or a plus, or a control character.
    #[error(
        "invalid key name {0:?}: it must be non-empty, with no space, '+' or control character"
    )]
    Name(String),
    /// The key ID is not eight lower-case hex digits.
    #[error("the key ID {0:?} is not eight lower-case hex digits")]
    KeyIdForm(String),
    /// The key part is not canonical standard base64.
    #[error("the key part is not standard base64")]
    Base64,
    /// A key of another signature type than Ed25519 (`0x01`) or `cosignature/v1` (`0x04`).
    #[error(
        "key type 0x{0:02x} is neither Ed25519 (0x01) nor an Ed25519 cosignature/v1 (0x04), the types supported"
    )]
    Algorithm(u8),
    /// The key part has the wrong length.
    #[error("the key part has {got} bytes; an Ed25519 key has 1 + 32")]
    Length {
        /// Its length (with the type byte).
        got: usize,
    },
    /// A public key that is not a valid Ed25519 point.
    #[error("the public key is not a valid Ed25519 key")]
    InvalidPublicKey,
    /// The key ID does not match the name and key.
    #[error("the key ID {given:08x} does not match the name and key (they give {computed:08x})")]
    KeyIdMismatch {
        /// The ID in the string.
        given: u32,
        /// The ID computed.
        computed: u32,
    },
    /// The operating system gave no random bytes for a new key.
    #[error("could not read random bytes from the operating system: {0}")]
    Random(String),
}

/// Whether `name` is a valid key name: non-empty, UTF-8 (it is a `str`), no Unicode space,
/// no `+`, and (stricter than the specification, which forbids them in notes anyway) no
/// control character.
#[must_use]
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c == '+' || c.is_control())
}

/// The key ID of an Ed25519 key: `SHA-256(name || 0x0A || 0x01 || public key)[:4]`, big-endian.
#[must_use]
pub fn key_id(name: &str, public: &[u8; 32]) -> u32 {
    key_id_of(name, KeyType::Ed25519, public)
}

/// The key ID of a key of type `kind`: `SHA-256(name || 0x0A || TYPE || public key)[:4]`,
/// big-endian.
#[must_use]
pub fn key_id_of(name: &str, kind: KeyType, public: &[u8; 32]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', kind.byte()]);
    h.update(public);
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// Splits `NAME+KEYID+KEY` and checks the name, the ID's form and the key's base64, type and
/// length. Returns the name, the ID, the type and the 32 key bytes.
fn split_key(s: &str) -> Result<(&str, u32, KeyType, [u8; 32]), KeyError> {
    let parts: Vec<&str> = s.splitn(3, '+').collect();
    let [name, id, key] = parts[..] else {
        return Err(KeyError::Form { parts: parts.len() });
    };
    if !is_valid_name(name) {
        return Err(KeyError::Name(name.to_owned()));
    }
    if id.len() != 8 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(KeyError::KeyIdForm(id.to_owned()));
    }
    let id = u32::from_str_radix(id, 16).map_err(|_| KeyError::KeyIdForm(id.to_owned()))?;
    let raw = base64::decode(key).ok_or(KeyError::Base64)?;
    let Some((&alg, bytes)) = raw.split_first() else {
        return Err(KeyError::Length { got: 0 });
    };
    let kind = KeyType::from_byte(alg).ok_or(KeyError::Algorithm(alg))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| KeyError::Length { got: raw.len() })?;
    Ok((name, id, kind, bytes))
}

fn check_len(s: &str) -> Result<(), KeyError> {
    if s.len() > MAX_KEY_BYTES {
        return Err(KeyError::TooLong {
            len: s.len(),
            max: MAX_KEY_BYTES,
        });
    }
    Ok(())
}

/// A verifier (public) key: a name, its key ID, its type and an Ed25519 public key.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifierKey {
    name: String,
    id: u32,
    kind: KeyType,
    key: VerifyingKey,
}

impl fmt::Debug for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifierKey({self})")
    }
}

impl VerifierKey {
    /// Parses `NAME+KEYID+BASE64(TYPE || public key)` (Go's `note.NewVerifier` form, or a
    /// `cosignature/v1` vkey), and checks that the ID is the name's, type's and key's.
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        check_len(s)?;
        if s.starts_with("PRIVATE+KEY+") {
            return Err(KeyError::SecretGivenAsVerifier);
        }
        let (name, id, kind, bytes) = split_key(s)?;
        let computed = key_id_of(name, kind, &bytes);
        if computed != id {
            return Err(KeyError::KeyIdMismatch {
                given: id,
                computed,
            });
        }
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| KeyError::InvalidPublicKey)?;
        Ok(Self {
            name: name.to_owned(),
            id,
            kind,
            key,
        })
    }

    /// The key for an Ed25519 public key under `name`.
    pub fn from_public(name: &str, public: &[u8; 32]) -> Result<Self, KeyError> {
        Self::from_public_of(name, KeyType::Ed25519, public)
    }

    /// The key of type `kind` for an Ed25519 public key under `name`.
    pub fn from_public_of(name: &str, kind: KeyType, public: &[u8; 32]) -> Result<Self, KeyError> {
        if !is_valid_name(name) {
            return Err(KeyError::Name(name.to_owned()));
        }
        let key = VerifyingKey::from_bytes(public).map_err(|_| KeyError::InvalidPublicKey)?;
        Ok(Self {
            name: name.to_owned(),
            id: key_id_of(name, kind, public),
            kind,
            key,
        })
    }

    /// The key's type: what its signatures sign.
    #[must_use]
    pub fn kind(&self) -> KeyType {
        self.kind
    }

    /// The key's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key's ID.
    #[must_use]
    pub fn key_id(&self) -> u32 {
        self.id
    }

    /// The 32-byte Ed25519 public key.
    #[must_use]
    pub fn public_key(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// Whether `signature` is this key's signature of the note text `text` (strict Ed25519
    /// verification: no malleable or small-order encodings). For a `cosignature/v1` key, the
    /// signature is its time and the Ed25519 signature of the cosigned message; a time over
    /// 2^63 - 1 is refused, as the specification says.
    #[must_use]
    pub fn verifies(&self, text: &str, signature: &[u8]) -> bool {
        match self.kind {
            KeyType::Ed25519 => EdSignature::from_slice(signature)
                .is_ok_and(|sig| self.key.verify_strict(text.as_bytes(), &sig).is_ok()),
            KeyType::CosignatureV1 => cosignature_time(signature).is_some_and(|time| {
                EdSignature::from_slice(&signature[8..]).is_ok_and(|sig| {
                    self.key
                        .verify_strict(&cosigned_message(time, text), &sig)
                        .is_ok()
                })
            }),
        }
    }
}

/// The time of a `cosignature/v1` signature (its first 8 bytes, big-endian), when the
/// signature has the length of one (8 + 64 bytes) and the time is at most 2^63 - 1.
fn cosignature_time(signature: &[u8]) -> Option<u64> {
    let time: [u8; 8] = signature.get(..8)?.try_into().ok()?;
    let time = u64::from_be_bytes(time);
    (signature.len() == 72 && i64::try_from(time).is_ok()).then_some(time)
}

impl fmt::Display for VerifierKey {
    /// `NAME+KEYID+BASE64(TYPE || public key)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut raw = [0u8; 33];
        raw[0] = self.kind.byte();
        raw[1..].copy_from_slice(self.key.as_bytes());
        write!(f, "{}+{:08x}+{}", self.name, self.id, base64::encode(&raw))
    }
}

/// A signer (secret) key: a name, its key ID and an Ed25519 signing key. Its `Debug` shows the
/// public half only; [`SignerKey::to_secret_string`] is the one way to the secret.
#[derive(Clone)]
pub struct SignerKey {
    name: String,
    id: u32,
    kind: KeyType,
    key: SigningKey,
}

impl fmt::Debug for SignerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignerKey({}, secret not shown)", self.verifier())
    }
}

impl SignerKey {
    /// A new key under `name`, from 32 bytes of the operating system's random source
    /// (`getrandom(2)`, or `/dev/urandom` where that is missing).
    pub fn generate(name: &str) -> Result<Self, KeyError> {
        Self::generate_of(name, KeyType::Ed25519)
    }

    /// A new key of type `kind` under `name` (a witness's: [`KeyType::CosignatureV1`]).
    pub fn generate_of(name: &str, kind: KeyType) -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        let key = Self::from_seed_of(name, kind, &seed);
        seed.fill(0);
        key
    }

    /// The Ed25519 key with this 32-byte seed under `name`.
    pub fn from_seed(name: &str, seed: &[u8; 32]) -> Result<Self, KeyError> {
        Self::from_seed_of(name, KeyType::Ed25519, seed)
    }

    /// The key of type `kind` with this 32-byte Ed25519 seed under `name`.
    pub fn from_seed_of(name: &str, kind: KeyType, seed: &[u8; 32]) -> Result<Self, KeyError> {
        if !is_valid_name(name) {
            return Err(KeyError::Name(name.to_owned()));
        }
        let key = SigningKey::from_bytes(seed);
        Ok(Self {
            name: name.to_owned(),
            id: key_id_of(name, kind, key.verifying_key().as_bytes()),
            kind,
            key,
        })
    }

    /// Parses `PRIVATE+KEY+NAME+KEYID+BASE64(TYPE || seed)` (Go's `note.NewSigner` form for
    /// type `0x01`), and checks that the ID is the name's, the type's and the public key's.
    pub fn parse(s: &str) -> Result<Self, KeyError> {
        check_len(s)?;
        let rest = s
            .strip_prefix("PRIVATE+KEY+")
            .ok_or(KeyError::NotSignerKey)?;
        let (name, id, kind, seed) = split_key(rest)?;
        let key = Self::from_seed_of(name, kind, &seed)?;
        if key.id != id {
            return Err(KeyError::KeyIdMismatch {
                given: id,
                computed: key.id,
            });
        }
        Ok(key)
    }

    /// `PRIVATE+KEY+NAME+KEYID+BASE64(TYPE || seed)`: the secret, for the key file only.
    #[must_use]
    pub fn to_secret_string(&self) -> String {
        let mut raw = [0u8; 33];
        raw[0] = self.kind.byte();
        raw[1..].copy_from_slice(self.key.as_bytes());
        let s = format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.id,
            base64::encode(&raw)
        );
        raw.fill(0);
        s
    }

    /// The key's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key's ID.
    #[must_use]
    pub fn key_id(&self) -> u32 {
        self.id
    }

    /// The key's type: what its signatures sign.
    #[must_use]
    pub fn kind(&self) -> KeyType {
        self.kind
    }

    /// The verifier key of this key.
    #[must_use]
    pub fn verifier(&self) -> VerifierKey {
        VerifierKey {
            name: self.name.clone(),
            id: self.id,
            kind: self.kind,
            key: self.key.verifying_key(),
        }
    }

    /// The Ed25519 signature of `message` (64 bytes), whatever the key's type: the raw
    /// primitive. A note's signature by this key is [`Note::sign`]'s.
    #[must_use]
    pub fn sign_bytes(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// This key's signature of the note text `text`, as it goes in the signature line (after
    /// the key ID): Ed25519 over the text, or for a `cosignature/v1` key the time `time`
    /// (seconds since the Epoch) and Ed25519 over the cosigned message. `time` is ignored
    /// for an Ed25519 key; over 2^63 - 1 it is refused.
    pub fn sign_text(&self, text: &str, time: u64) -> Result<Vec<u8>, NoteError> {
        match self.kind {
            KeyType::Ed25519 => Ok(self.sign_bytes(text.as_bytes()).to_vec()),
            KeyType::CosignatureV1 => {
                if i64::try_from(time).is_err() {
                    return Err(NoteError::CosignatureTime(time));
                }
                let mut sig = time.to_be_bytes().to_vec();
                sig.extend_from_slice(&self.sign_bytes(&cosigned_message(time, text)));
                Ok(sig)
            }
        }
    }
}

/// One signature line of a note: the key's name and ID and the signature bytes (without the
/// ID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    /// The signing key's name.
    pub name: String,
    /// The signing key's ID.
    pub key_id: u32,
    /// The signature (for Ed25519, 64 bytes).
    pub signature: Vec<u8>,
}

impl NoteSignature {
    /// The line, without its newline: `— NAME BASE64(KEYID || SIGNATURE)`.
    #[must_use]
    pub fn line(&self) -> String {
        let mut raw = Vec::with_capacity(4 + self.signature.len());
        raw.extend_from_slice(&self.key_id.to_be_bytes());
        raw.extend_from_slice(&self.signature);
        format!("— {} {}", self.name, base64::encode(&raw))
    }
}

/// A note: its text and its signature lines, as parsed (not yet verified) or as signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    text: String,
    signatures: Vec<NoteSignature>,
}

/// Checks the characters of a note or a note text: UTF-8 (given), no control character but
/// newline.
fn check_chars(s: &str) -> Result<(), NoteError> {
    match s
        .char_indices()
        .find(|&(_, c)| (c as u32) < 0x20 && c != '\n')
    {
        Some((offset, c)) => Err(NoteError::ControlCharacter {
            offset,
            code: c as u32,
        }),
        None => Ok(()),
    }
}

impl Note {
    /// A note of `text` with no signature yet (sign it with [`Note::sign`]). The text must end
    /// in a newline and hold no control character but newline.
    pub fn new(text: &str) -> Result<Self, NoteError> {
        if !text.ends_with('\n') || text.len() > MAX_NOTE_BYTES {
            return Err(NoteError::MalformedText);
        }
        check_chars(text).map_err(|_| NoteError::MalformedText)?;
        Ok(Self {
            text: text.to_owned(),
            signatures: Vec::new(),
        })
    }

    /// Parses a signed note without verifying it: the text is everything up to the last blank
    /// line, each line after it a signature. Bounded by [`MAX_NOTE_BYTES`] and
    /// [`MAX_SIGNATURES`].
    pub fn parse(bytes: &[u8]) -> Result<Self, NoteError> {
        if bytes.len() > MAX_NOTE_BYTES {
            return Err(NoteError::TooLarge {
                len: bytes.len(),
                max: MAX_NOTE_BYTES,
            });
        }
        let s = std::str::from_utf8(bytes).map_err(|e| NoteError::NotUtf8 {
            offset: e.valid_up_to(),
        })?;
        check_chars(s)?;
        let split = s.rfind("\n\n").ok_or(NoteError::NoSignatures)?;
        let (text, sigs) = (&s[..=split], &s[split + 2..]);
        if sigs.is_empty() || !sigs.ends_with('\n') {
            return Err(NoteError::UnterminatedSignatures);
        }
        let mut signatures = Vec::new();
        for (i, line) in sigs[..sigs.len() - 1].split('\n').enumerate() {
            let n = i + 1;
            if n > MAX_SIGNATURES {
                return Err(NoteError::TooManySignatures {
                    max: MAX_SIGNATURES,
                });
            }
            let rest = line
                .strip_prefix("— ")
                .ok_or(NoteError::SignatureLinePrefix { line: n })?;
            let (name, b64) = rest
                .split_once(' ')
                .ok_or(NoteError::SignatureLineForm { line: n })?;
            if !is_valid_name(name) {
                return Err(NoteError::SignatureKeyName { line: n });
            }
            let raw = base64::decode(b64).ok_or(NoteError::SignatureBase64 { line: n })?;
            if raw.len() < 5 {
                return Err(NoteError::SignatureTooShort {
                    line: n,
                    len: raw.len(),
                });
            }
            signatures.push(NoteSignature {
                name: name.to_owned(),
                key_id: u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]),
                signature: raw[4..].to_vec(),
            });
        }
        Ok(Self {
            text: text.to_owned(),
            signatures,
        })
    }

    /// The note's text (with its final newline). Not to be trusted before a verification.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The signature lines, in order.
    #[must_use]
    pub fn signatures(&self) -> &[NoteSignature] {
        &self.signatures
    }

    /// Adds `signer`'s signature of the text (a log's signature, or a witness's cosignature
    /// on a log's note; a `cosignature/v1` key's carries the time now). A signature already
    /// there by the same name and key ID is replaced.
    pub fn sign(&mut self, signer: &SignerKey) -> Result<(), NoteError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.sign_at(signer, now)
    }

    /// [`Note::sign`] with the time a `cosignature/v1` states given (seconds since the Epoch;
    /// ignored for an Ed25519 key).
    pub fn sign_at(&mut self, signer: &SignerKey, time: u64) -> Result<(), NoteError> {
        if self.signatures.len() >= MAX_SIGNATURES {
            return Err(NoteError::TooManySignatures {
                max: MAX_SIGNATURES,
            });
        }
        let sig = NoteSignature {
            name: signer.name.clone(),
            key_id: signer.id,
            signature: signer.sign_text(&self.text, time)?,
        };
        self.signatures
            .retain(|s| !(s.name == sig.name && s.key_id == sig.key_id));
        self.signatures.push(sig);
        Ok(())
    }

    /// Adds the log key's signature of the text, made with a nonce made ahead
    /// ([`ahead::AheadSigner`]); a signature by the same name and key ID is replaced.
    pub(crate) fn sign_ahead(&mut self, signer: &ahead::AheadSigner) -> Result<(), NoteError> {
        if self.signatures.len() >= MAX_SIGNATURES {
            return Err(NoteError::TooManySignatures {
                max: MAX_SIGNATURES,
            });
        }
        let key = signer.key();
        let sig = NoteSignature {
            name: key.name.clone(),
            key_id: key.id,
            signature: signer.sign_bytes(self.text.as_bytes()).to_vec(),
        };
        self.signatures
            .retain(|s| !(s.name == sig.name && s.key_id == sig.key_id));
        self.signatures.push(sig);
        Ok(())
    }

    /// The signed note: text, blank line, one line per signature.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = self.text.clone();
        out.push('\n');
        for s in &self.signatures {
            out.push_str(&s.line());
            out.push('\n');
        }
        out
    }

    /// Verifies the note against the `known` keys, as the specification says: signatures by
    /// unknown keys (another name or ID) are ignored, a known key's signature that does not
    /// verify refuses the note, and at least one known key's signature must verify. Returns
    /// the keys (of `known`) whose signatures verified, in the note's order.
    pub fn verify<'k>(&self, known: &'k [VerifierKey]) -> Result<Vec<&'k VerifierKey>, NoteError> {
        let mut verified: Vec<&'k VerifierKey> = Vec::new();
        for sig in &self.signatures {
            let mut matching = known
                .iter()
                .filter(|k| k.name == sig.name && k.id == sig.key_id);
            let Some(key) = matching.next() else {
                continue;
            };
            if matching.any(|other| other.key != key.key) {
                return Err(NoteError::AmbiguousKey {
                    name: sig.name.clone(),
                    key_id: sig.key_id,
                });
            }
            if !key.verifies(&self.text, &sig.signature) {
                return Err(NoteError::InvalidSignature {
                    name: sig.name.clone(),
                    key_id: sig.key_id,
                });
            }
            if !verified.contains(&key) {
                verified.push(key);
            }
        }
        if verified.is_empty() {
            return Err(NoteError::NoKnownSignature {
                known: known
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(verified)
    }

    /// The time `key`'s `cosignature/v1` on this note states (seconds since the Epoch), if the
    /// note has a signature line by that key and it is one: `None` for an Ed25519 key. Read
    /// it after [`Note::verify`] or [`Note::verify_all`] accepted the note with `key`.
    #[must_use]
    pub fn cosigned_at(&self, key: &VerifierKey) -> Option<u64> {
        if key.kind != KeyType::CosignatureV1 {
            return None;
        }
        self.signatures
            .iter()
            .find(|s| s.name == key.name && s.key_id == key.id)
            .and_then(|s| cosignature_time(&s.signature))
    }

    /// Verifies the note and requires a verified signature by every one of `required` (a log's
    /// key and its witnesses' keys, say). Signatures by other keys are ignored.
    pub fn verify_all(&self, required: &[VerifierKey]) -> Result<(), NoteError> {
        let verified = self.verify(required)?;
        for key in required {
            if !verified.contains(&key) {
                return Err(NoteError::MissingSignature {
                    name: key.name.clone(),
                    key_id: key.id,
                });
            }
        }
        Ok(())
    }
}

pub(crate) mod ahead;

#[cfg(test)]
mod tests;
